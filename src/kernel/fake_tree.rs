//! A fake device tree: plain files laid out like a board's `/sys`, `/proc`
//! and `/etc`, for `--root` demos and tests.
//!
//! The default tree is an 8-CPU board with three cpufreq policies, a zram
//! device, IRQs, cpuidle states, the sysctls the shipped policies touch and
//! a cgroup2 root offering `cpuset cpu io memory pids`. Everything cgwarden
//! reads on a device is here with a realistic default value, so `plan` on it
//! shows what `apply` would do on a freshly booted board.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A process laid out under `proc/PID`.
#[derive(Clone, Debug)]
pub struct FakeProcess {
    pub pid: i32,
    pub comm: String,
    pub exe: Option<String>,
    pub cmdline: Vec<String>,
    pub uid: u32,
    /// Its cgroup relative to the cgroup2 mount, e.g. `/` or `/system.slice`.
    pub cgroup: String,
    pub threads: Vec<i32>,
}

impl FakeProcess {
    pub fn new(pid: i32, comm: &str) -> Self {
        FakeProcess {
            pid,
            comm: comm.into(),
            exe: Some(format!("/usr/bin/{comm}")),
            cmdline: vec![format!("/usr/bin/{comm}")],
            uid: 0,
            cgroup: "/".into(),
            threads: vec![pid],
        }
    }
}

/// Builder for a fake tree rooted at a directory.
pub struct FakeTree {
    dir: PathBuf,
}

/// Files of `/proc/sys` a fresh kernel has beside the knob families'
/// defaults ([`crate::knobs::Family::fake_defaults`]): the
/// `compact` action's trigger and a name the knob grammar cannot spell.
const OTHER_SYSCTLS: &[(&str, &str)] = &[("vm/compact_memory", ""), ("vm/page-cluster", "3")];

/// `/proc/vmstat` of the fake board (the lines cgwarden reads, and some).
const FAKE_VMSTAT: &str = "nr_free_pages 1875233\nnr_zone_inactive_anon 1204\nnr_zone_active_anon 33088\npgpgin 424780\npgpgout 0\npswpin 0\npswpout 0\npgfault 4021137\npgmajfault 1045\npgsteal_kswapd 0\npgsteal_direct 0\npgscan_kswapd 0\npgscan_direct 0\nworkingset_refault_anon 0\nworkingset_refault_file 12\nallocstall_dma 0\nallocstall_dma32 0\nallocstall_normal 3\nallocstall_movable 0\ncompact_stall 2\ncompact_fail 1\ncompact_success 1\noom_kill 0\n";

/// `/proc/buddyinfo` of the fake board: free blocks per order, per zone.
const FAKE_BUDDYINFO: &str = "Node 0, zone      DMA      1      0      0      1      2      1      1      0      1      1      3 \nNode 0, zone    DMA32    263    154     76     41     21     14      9      6      4      3    418 \nNode 0, zone   Normal   1024    512    300    120     64     32     16      8      4      2   1200 \n";

impl FakeTree {
    /// Lays out the default 8-CPU board under `dir`.
    pub fn standard(dir: impl Into<PathBuf>) -> io::Result<FakeTree> {
        let t = FakeTree { dir: dir.into() };
        t.file(
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids",
        )?;
        t.file("sys/fs/cgroup/cgroup.subtree_control", "")?;
        t.file("sys/kernel/rcu_expedited", "0")?;
        t.file("sys/fs/cgroup/cgroup.procs", "")?;
        for family in crate::knobs::FAMILIES {
            for (path, value) in family.fake_defaults() {
                let rel = path.strip_prefix("/").unwrap_or(&path);
                t.file(&rel.to_string_lossy(), value)?;
            }
        }
        for (name, value) in OTHER_SYSCTLS {
            t.file(&format!("proc/sys/{name}"), value)?;
        }
        t.file("sys/devices/system/cpu/online", "0-7")?;
        t.file("sys/devices/system/cpu/possible", "0-7")?;
        // Three clusters: CPUs 0-3, 4-6 and the prime CPU 7.
        for (policy, related, min, max) in [
            ("policy0", "0-3", 300000, 1958400),
            ("policy4", "4-6", 691200, 2400000),
            ("policy7", "7", 806400, 2841600),
        ] {
            t.cpufreq_policy(policy, related, min, max)?;
        }
        for cpu in 0..8 {
            // The scheduler's relative performance, 1024 for the fastest
            // CPU (Documentation/ABI/testing/sysfs-devices-system-cpu): the
            // device tree's capacity-dmips-mhz (1024, 1946, 1985 on sc7280)
            // times each policy's top frequency, scaled.
            let capacity = [364, 364, 364, 364, 847, 847, 847, 1024][cpu];
            t.file(
                &format!("sys/devices/system/cpu/cpu{cpu}/cpu_capacity"),
                &capacity.to_string(),
            )?;
            // No constraint (what the kernel shows by default).
            t.file(
                &format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"),
                "0",
            )?;
            for state in 0..3 {
                t.file(
                    &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable"),
                    "0",
                )?;
                t.file(
                    &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/name"),
                    ["WFI", "C1", "C2"][state],
                )?;
            }
        }
        t.file(
            "sys/block/zram0/comp_algorithm",
            "lzo [lzo-rle] lz4 lz4hc zstd",
        )?;
        t.file("sys/block/zram0/disksize", "0")?;
        t.file("sys/block/zram0/mem_limit", "0")?;
        t.file("sys/block/zram0/initstate", "0")?;
        t.file("sys/block/zram0/reset", "")?;
        t.file("sys/class/zram-control/hot_add", "1")?;
        // Memory telemetry: an idle zram device, counters and
        // free blocks as a 6.1 kernel prints them.
        t.file(
            "sys/block/zram0/mm_stat",
            "       0        0        0        0        0        0        0        0        0",
        )?;
        t.file("proc/vmstat", FAKE_VMSTAT)?;
        t.file("proc/buddyinfo", FAKE_BUDDYINFO)?;
        t.file(
            "proc/swaps",
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        )?;
        for irq in [1, 9, 16, 17, 24, 25, 26] {
            t.file(&format!("proc/irq/{irq}/smp_affinity_list"), "0-7")?;
        }
        t.file("proc/irq/default_smp_affinity", "ff")?;
        t.file("sys/devices/virtual/workqueue/cpumask", "ff")?;
        t.file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nvision:x:1001:1001::/home/vision:/bin/sh\n")?;
        t.file("etc/group", "root:x:0:\nnogroup:x:65534:\nvision:x:1001:\n")?;
        fs::create_dir_all(t.dir.join("run"))?;
        Ok(t)
    }

    /// Lays out cpufreq policy `policy` driving CPUs `related` (a cpu list)
    /// with a hardware range of `min_khz`–`max_khz`, governed by schedutil,
    /// as qcom-cpufreq-hw shows it.
    pub fn cpufreq_policy(
        &self,
        policy: &str,
        related: &str,
        min_khz: u64,
        max_khz: u64,
    ) -> io::Result<()> {
        let d = format!("sys/devices/system/cpu/cpufreq/{policy}");
        // The kernel prints each CPU followed by a blank.
        let cpus = crate::units::CpuList::parse(related)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let listed: String = cpus.iter().map(|c| format!("{c} ")).collect();
        self.file(&format!("{d}/related_cpus"), &listed)?;
        self.file(&format!("{d}/scaling_governor"), "schedutil")?;
        self.file(
            &format!("{d}/scaling_available_governors"),
            "ondemand userspace powersave performance schedutil",
        )?;
        self.file(&format!("{d}/scaling_min_freq"), &min_khz.to_string())?;
        self.file(&format!("{d}/scaling_max_freq"), &max_khz.to_string())?;
        self.file(&format!("{d}/cpuinfo_min_freq"), &min_khz.to_string())?;
        self.file(&format!("{d}/cpuinfo_max_freq"), &max_khz.to_string())?;
        // schedutil's per-policy tunables (qcom-cpufreq-hw sets
        // CPUFREQ_HAVE_GOVERNOR_PER_POLICY) as the board's vendor
        // (Android-derived) kernel has them: up_rate_limit_us and
        // down_rate_limit_us, both cpufreq_policy_transition_delay_us()
        // (1000 µs when the driver gives no transition latency); and the
        // defaults a governor switch recreates them with (fake::sysfs).
        // Mainline's single rate_limit_us is a test fixture.
        for f in ["up_rate_limit_us", "down_rate_limit_us"] {
            self.file(&format!("{d}/schedutil/{f}"), "1000")?;
            self.file(
                &format!(
                    "{d}/{}/schedutil/{f}",
                    super::root::fake::sysfs::GOVERNOR_DEFAULTS
                ),
                "1000",
            )?;
        }
        Ok(())
    }

    /// Lays out a devfreq device in `dir` (relative to the root) as
    /// Documentation/ABI/testing/sysfs-class-devfreq shows one: the first of
    /// `governors` in force, the frequencies it offers (Hz, ascending), the
    /// whole range allowed, running at `cur_hz`.
    pub fn devfreq_device(
        &self,
        dir: &str,
        governors: &str,
        freqs_hz: &[u64],
        cur_hz: u64,
    ) -> io::Result<()> {
        let governor = governors.split_whitespace().next().unwrap_or_default();
        let listed: Vec<String> = freqs_hz.iter().map(u64::to_string).collect();
        let (min, max) = (freqs_hz.first(), freqs_hz.last());
        self.file(&format!("{dir}/governor"), governor)?;
        self.file(&format!("{dir}/available_governors"), governors)?;
        self.file(&format!("{dir}/available_frequencies"), &listed.join(" "))?;
        self.file(
            &format!("{dir}/min_freq"),
            &min.copied().unwrap_or(0).to_string(),
        )?;
        self.file(
            &format!("{dir}/max_freq"),
            &max.copied().unwrap_or(0).to_string(),
        )?;
        self.file(&format!("{dir}/cur_freq"), &cur_hz.to_string())
    }

    /// Marks directory `rel` delegated as systemd marks a `Delegate=yes`
    /// unit's cgroup where it may: `user.delegate` = `value` (`trusted.*`
    /// needs CAP_SYS_ADMIN). The host's filesystem must keep user xattrs
    /// (ext4, btrfs, tmpfs from 6.6).
    pub fn mark_delegated(&self, rel: &str, value: &[u8]) -> io::Result<()> {
        super::xattr::set(&self.dir.join(rel), "user.delegate", value)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a file (creating its directories), with a trailing newline as sysfs shows.
    pub fn file(&self, rel: &str, content: &str) -> io::Result<()> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut c = content.to_string();
        if !c.ends_with('\n') {
            c.push('\n');
        }
        fs::write(p, c)
    }

    pub fn read(&self, rel: &str) -> io::Result<String> {
        fs::read_to_string(self.dir.join(rel))
    }

    /// Adds a process under `proc/PID` (comm, exe link, cmdline, status, cgroup, stat, task/)
    /// and lists it in its cgroup's `cgroup.procs`.
    pub fn add_process(&self, p: &FakeProcess) -> io::Result<()> {
        self.add_processes(std::slice::from_ref(p))
    }

    /// Adds many processes; each group's `cgroup.procs` is rewritten once
    /// (laying out a thousand processes one by one is quadratic).
    pub fn add_processes(&self, ps: &[FakeProcess]) -> io::Result<()> {
        let mut by_group: Vec<(&str, Vec<i32>)> = Vec::new();
        for p in ps {
            self.proc_files(p)?;
            match by_group.iter_mut().find(|(g, _)| *g == p.cgroup) {
                Some((_, pids)) => pids.push(p.pid),
                None => by_group.push((&p.cgroup, vec![p.pid])),
            }
        }
        // The kernel lists every member in its cgroup's cgroup.procs.
        for (group, pids) in by_group {
            let procs = self
                .dir
                .join("sys/fs/cgroup")
                .join(group.trim_start_matches('/'))
                .join("cgroup.procs");
            if !procs.exists() {
                continue;
            }
            let mut members = fs::read_to_string(&procs)?;
            members.truncate(members.trim_end().len());
            for pid in pids {
                if members.lines().any(|l| l.trim() == pid.to_string()) {
                    continue;
                }
                if !members.is_empty() {
                    members.push('\n');
                }
                members.push_str(&pid.to_string());
            }
            members.push('\n');
            fs::write(&procs, members)?;
        }
        Ok(())
    }

    /// `proc/PID/smaps_rollup` as a 6.x kernel prints it, with
    /// `Rss:` and `Pss:` set (KiB); the other lines are a real process's.
    #[cfg(test)]
    pub(crate) fn set_smaps_rollup(&self, pid: i32, rss_kib: u64, pss_kib: u64) -> io::Result<()> {
        self.file(
            &format!("proc/{pid}/smaps_rollup"),
            &smaps_rollup_text(rss_kib, pss_kib),
        )
    }

    /// A process renames itself (`prctl(PR_SET_NAME)` on its main thread):
    /// the kernel shows the new name in `comm`, `stat`'s second field and
    /// `status`'s `Name:` alike.
    pub fn rename(&self, pid: i32, comm: &str) -> io::Result<()> {
        let d = format!("proc/{pid}");
        self.file(&format!("{d}/comm"), comm)?;
        let stat = self.read(&format!("{d}/stat"))?;
        if let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) {
            let renamed = format!("{}({comm}){}", &stat[..open], &stat[close + 1..]);
            self.file(&format!("{d}/stat"), &renamed)?;
        }
        let status = self.read(&format!("{d}/status"))?;
        let renamed: String = status
            .lines()
            .map(|l| match l.strip_prefix("Name:") {
                Some(_) => format!("Name:\t{comm}\n"),
                None => format!("{l}\n"),
            })
            .collect();
        self.file(&format!("{d}/status"), &renamed)
    }

    fn proc_files(&self, p: &FakeProcess) -> io::Result<()> {
        let d = format!("proc/{}", p.pid);
        self.file(&format!("{d}/comm"), &p.comm)?;
        let mut cmd = Vec::new();
        for a in &p.cmdline {
            cmd.extend_from_slice(a.as_bytes());
            cmd.push(0);
        }
        fs::write(self.dir.join(&d).join("cmdline"), cmd)?;
        self.file(
            &format!("{d}/status"),
            &format!(
                "Name:\t{}\nPid:\t{}\nPPid:\t1\nUid:\t{u}\t{u}\t{u}\t{u}\n",
                p.comm,
                p.pid,
                u = p.uid
            ),
        )?;
        self.file(&format!("{d}/cgroup"), &format!("0::{}", p.cgroup))?;
        self.file(
            &format!("{d}/stat"),
            &format!("{} ({}) S 1 {} {} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0", p.pid, p.comm, p.pid, p.pid),
        )?;
        if let Some(exe) = &p.exe {
            let link = self.dir.join(&d).join("exe");
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(exe, link)?;
        }
        self.file(&format!("{d}/oom_score_adj"), "0")?;
        // PSS for the recorder (a small process's figures).
        self.file(&format!("{d}/smaps_rollup"), &smaps_rollup_text(1756, 280))?;
        // Each thread as the kernel shows it: comm (the process's until it
        // renames itself), stat (nice 0), status (affinity), cgroup.
        for t in &p.threads {
            let td = format!("{d}/task/{t}");
            fs::create_dir_all(self.dir.join(&td))?;
            self.file(&format!("{td}/comm"), &p.comm)?;
            self.file(
                &format!("{td}/stat"),
                &format!("{t} ({}) S 1 {} {} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0", p.comm, p.pid, p.pid),
            )?;
            self.file(
                &format!("{td}/status"),
                &format!(
                    "Name:\t{}\nPid:\t{t}\nTgid:\t{}\nCpus_allowed_list:\t0-7\n",
                    p.comm, p.pid
                ),
            )?;
            self.file(&format!("{td}/cgroup"), &format!("0::{}", p.cgroup))?;
        }
        Ok(())
    }
}

/// `/proc/PID/smaps_rollup` text with `Rss:` and `Pss:` set (KiB): the
/// layout and the other values are what a 6.8 kernel printed for a shell's
/// `cat` (`cat /proc/self/smaps_rollup`).
pub fn smaps_rollup_text(rss_kib: u64, pss_kib: u64) -> String {
    format!(
        "559bcf987000-7fff3ffd6000 ---p 00000000 00:00 0                          [rollup]
Rss:            {rss_kib:>8} kB
Pss:            {pss_kib:>8} kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            168 kB
Pss_Shmem:             0 kB
Shared_Clean:       1604 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       112 kB
Referenced:         1756 kB
Anonymous:           112 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
"
    )
}
