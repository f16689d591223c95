//! `cgwarden capture DIR`: a read-only copy of the files cgwarden reads
//! from a board, laid out as a tree `--root DIR` takes, so `plan` and
//! `doctor` run on a laptop against that exact board (docs/cli.md,
//! `capture`).
//!
//! What is copied is declared once, in [`sources`], by the readers' own
//! paths (the knob families' directories, the kernel readers' files); a
//! unit test runs `plan`, `doctor` and every reader with the capture's
//! paths recorded and fails on a path no source covers.
//!
//! # On the board
//!
//! Nothing is written outside DIR, and nothing is read that changes the
//! board: a file is opened `O_RDONLY | O_NOFOLLOW`; a write-only file
//! (no read bit: `cgroup.kill`, `memory.reclaim`, zram's `reset`) is never
//! opened, and neither are the files in [`NEVER_READ`] (reading zram-control's
//! `hot_add` adds a device; opening `/dev/cpu_dma_latency` is a latency
//! request): each becomes an empty file in DIR, because what cgwarden looks
//! at there is whether the file exists. A file that cannot be read (EACCES,
//! EIO, EINVAL: sysfs has many) is skipped and counted, never an error; a
//! file larger than [`MAX_FILE`] likewise. The whole copy stops at
//! [`MAX_FILES`] files or [`MAX_BYTES`] bytes, and says so.
//!
//! # Symlinks
//!
//! Walks never follow a symlink. A symlink inside a copied tree is made
//! again in DIR when its target is relative, of sysfs's form (`../` steps,
//! then names) and stays inside DIR (`cpu0/cpufreq` → `../cpufreq/policy0`,
//! a zone's `subsystem`); any other link is skipped and counted. A class
//! directory's entries (`/sys/class/devfreq/gpu` →
//! `../../devices/platform/soc/3d00000.gpu/devfreq/3d00000.gpu`,
//! `/sys/block/zram0`) are made again as links, and their targets copied
//! under the targets' own paths: the readers resolve the class path under
//! the root, through the link, as on the board. A file named by one path
//! (`/proc/device-tree/model` through the absolute `/proc/device-tree` link,
//! `/proc/self/mounts`) is copied as a plain file at that path.
//!
//! DIR itself is written beneath its own directory descriptor, one
//! component at a time with `O_NOFOLLOW`: a write never goes through a link,
//! not even one the copy made.
//!
//! # Processes
//!
//! `/proc/PID` only with `--processes` (command lines may hold secrets):
//! [`PROC_FILES`] of each process and [`TASK_FILES`] of each of its
//! threads, `exe` as a plain file holding the link's target (what
//! [`Root::read_link`] takes on a plain tree), and `/etc/passwd` and
//! `/etc/group` for the placement rules that name users. cgwarden's own
//! process is left out, as `plan` leaves itself out on the board.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::error::{Error, Result};
use super::root::Root;

/// The largest file copied (a `/boot/config-*` is ~300 KiB; a sysfs
/// attribute is one page).
pub(crate) const MAX_FILE: usize = 1 << 20;
/// The most files copied, all sources together.
pub(crate) const MAX_FILES: u64 = 200_000;
/// The most bytes copied, all sources together.
pub(crate) const MAX_BYTES: u64 = 256 << 20;
/// The deepest a copied tree is walked below its top (cgroup hierarchies
/// nest deeper than sysfs attribute directories).
const MAX_DEPTH: usize = 8;
const MAX_CGROUP_DEPTH: usize = 32;

/// Files never opened: reading or opening them changes the board.
pub(crate) const NEVER_READ: [&str; 2] =
    [super::zram::HOT_ADD, crate::knobs::latency::CPU_DMA_LATENCY];

/// What names the board: the SoC (`/sys/devices/soc0`), the device tree's
/// model and compatible (through `/proc/device-tree` and at their sysfs
/// place), DMI's product. Serial numbers are left out.
pub(crate) const IDENTITY: [&str; 11] = [
    "/sys/devices/soc0/machine",
    "/sys/devices/soc0/family",
    "/sys/devices/soc0/soc_id",
    "/sys/devices/soc0/revision",
    "/proc/device-tree/model",
    "/proc/device-tree/compatible",
    "/sys/firmware/devicetree/base/model",
    "/sys/firmware/devicetree/base/compatible",
    "/sys/class/dmi/id/product_name",
    "/sys/class/dmi/id/sys_vendor",
    "/sys/class/dmi/id/board_name",
];

/// Files of `/proc/PID` copied with `--processes`.
pub(crate) const PROC_FILES: [&str; 7] = [
    "comm",
    "cmdline",
    "exe",
    "status",
    "stat",
    "cgroup",
    "oom_score_adj",
];
/// Files of `/proc/PID/task/TID` copied with `--processes`.
pub(crate) const TASK_FILES: [&str; 4] = ["comm", "stat", "status", "cgroup"];

/// How one place of the board is copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// One file, read through any link above it, written as a plain file.
    File(PathBuf),
    /// A directory whose presence is what is read (`/sys/module/zram`).
    Dir(PathBuf),
    /// A directory tree, whole (see the module docs for links).
    Tree(PathBuf),
    /// A class directory: each entry (whose name starts with the prefix,
    /// if one is given) made again, a link's target copied as a tree.
    Class(PathBuf, Option<&'static str>),
    /// The cgroup2 hierarchies at or directly below this directory.
    Cgroups(PathBuf),
    /// `/proc/PID` of every process (only with `--processes`).
    Processes,
}

/// One line of what is copied, and the takes that copy it.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub(crate) what: &'static str,
    pub(crate) takes: Vec<Take>,
}

fn file(p: impl Into<PathBuf>) -> Take {
    Take::File(p.into())
}

/// What `capture` copies from `src`, in order (the kernel release names
/// the `/boot` configuration, so the source is asked for it).
pub(crate) fn sources(src: &Root, processes: bool) -> Vec<Source> {
    use crate::knobs;
    let release = src
        .read_trimmed(Path::new(super::boot::OSRELEASE))
        .ok()
        .filter(|r| !r.is_empty() && !r.contains('/'));
    let mut boot = vec![
        file(super::boot::CMDLINE),
        file(super::boot::CONFIG_GZ),
        file(super::boot::OSRELEASE),
        file(super::boot::REALTIME),
        file(super::boot::MOUNTS),
        file(super::cgroupfs::MOUNTINFO),
        Take::Dir(super::boot::ZRAM_MODULE.into()),
    ];
    if let Some(r) = release {
        boot.push(file(super::boot::config_path(&r)));
    }
    let mut sysctls: Vec<Take> = knobs::sysctl::TABLE
        .iter()
        .filter_map(|s| knobs::sysctl::path(s.name))
        .map(Take::File)
        .collect();
    for p in [
        knobs::sysctl::COMPACT_MEMORY,
        knobs::sysctl::SCHED_RT_RUNTIME,
        super::zram::KERNEL_MODPROBE,
        super::procfs::BOOT_ID,
    ] {
        sysctls.push(file(p));
    }
    let mut out = vec![
        Source {
            what: "the cgroup2 hierarchy: every group's readable files",
            takes: vec![Take::Cgroups(knobs::group::CGROUP2_MOUNT.into())],
        },
        Source {
            what: "CPUs: online, possible, isolated, nohz_full, topology, cpufreq policies and governor tunables, cpuidle states, PM QoS",
            takes: vec![Take::Tree(knobs::system::CPU_DIR.into())],
        },
        Source {
            what: "devfreq devices",
            takes: vec![Take::Class(knobs::devfreq::DEVFREQ_DIR.into(), None)],
        },
        Source {
            what: "thermal zones and cooling devices",
            takes: vec![Take::Class(super::thermal::THERMAL_DIR.into(), None)],
        },
        Source {
            what: "IRQs: /proc/irq, /proc/interrupts, /sys/kernel/irq",
            takes: vec![
                Take::Tree(knobs::system::PROC_IRQ.into()),
                file(super::irq::PROC_INTERRUPTS),
                Take::Tree(super::irq::SYS_KERNEL_IRQ.into()),
            ],
        },
        Source {
            what: "pressure (PSI), meminfo, vmstat, buddyinfo, swaps",
            takes: vec![
                Take::Tree(super::psi::PRESSURE_DIR.into()),
                file(super::meminfo::MEMINFO),
                file(super::memstat::VMSTAT),
                file(super::memstat::BUDDYINFO),
                file(super::zram::PROC_SWAPS),
            ],
        },
        Source {
            what: "zram devices and zram-control",
            takes: vec![
                Take::Class(knobs::zram::BLOCK_DIR.into(), Some("zram")),
                Take::Tree(super::zram::CONTROL_DIR.into()),
            ],
        },
        Source {
            what: "the sysctls cgwarden sets or reads",
            takes: sysctls,
        },
        Source {
            what: "the realtime switch's files: workqueue cpumask, rcu_expedited; /dev/cpu_dma_latency (its presence)",
            takes: vec![
                Take::File(knobs::system::workqueue_cpumask_path()),
                Take::File(knobs::system::rcu_expedited_path()),
                file(knobs::latency::CPU_DMA_LATENCY),
            ],
        },
        Source {
            what: "the kernel's command line, configuration, release, PREEMPT_RT, mounts",
            takes: boot,
        },
        Source {
            what: "board identity: soc0, device-tree model and compatible, DMI product (no serial numbers, hostname or machine-id)",
            takes: IDENTITY.iter().map(file).collect(),
        },
    ];
    if processes {
        out.push(Source {
            what: "processes: /proc/PID's comm, exe, cmdline, status, stat, cgroup, oom_score_adj and its threads'; /etc/passwd, /etc/group",
            takes: vec![
                Take::Processes,
                file(super::accounts::PASSWD),
                file(super::accounts::GROUP),
            ],
        });
    }
    out
}

/// What a capture copied and skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Counts {
    /// Files copied.
    pub(crate) files: u64,
    /// Bytes copied.
    pub(crate) bytes: u64,
    /// Empty files made for files never read (write-only, [`NEVER_READ`]).
    pub(crate) markers: u64,
    /// Symlinks made again.
    pub(crate) links: u64,
    /// Files that could not be read (EACCES, EIO, ...).
    pub(crate) unreadable: u64,
    /// Files larger than [`MAX_FILE`].
    pub(crate) too_large: u64,
    /// Symlinks not made again (absolute, or leading out of DIR).
    pub(crate) links_skipped: u64,
    /// Devices, sockets, pipes.
    pub(crate) special: u64,
    /// Files left out once [`MAX_FILES`] or [`MAX_BYTES`] was reached.
    pub(crate) over_limit: u64,
    /// Processes copied (with `--processes`).
    pub(crate) processes: u64,
}

/// The outcome of [`capture`].
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    pub(crate) counts: Counts,
    pub(crate) processes: bool,
    /// Device paths that could not be read, for a closer look (the first
    /// [`Summary::SHOWN`]).
    pub(crate) unreadable: Vec<PathBuf>,
}

impl Summary {
    pub(crate) const SHOWN: usize = 20;

    /// The one line `cgwarden capture` prints.
    pub(crate) fn line(&self, dir: &Path) -> String {
        let c = &self.counts;
        let procs = if self.processes {
            format!("{} processes", c.processes)
        } else {
            "no processes (--processes copies them)".to_string()
        };
        let mut line = format!(
            "captured into {}: {} files ({} KiB), {} empty for files never read, {} links, {procs}",
            dir.display(),
            c.files,
            c.bytes.div_ceil(1024),
            c.markers,
            c.links,
        );
        let skipped = [
            (c.unreadable, "unreadable"),
            (c.too_large, "larger than 1 MiB"),
            (c.links_skipped, "links leading out"),
            (c.special, "devices or sockets"),
            (c.over_limit, "over the capture's limit"),
        ];
        let said: Vec<String> = skipped
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        if !said.is_empty() {
            line.push_str(&format!("; skipped {}", said.join(", ")));
        }
        line
    }
}

/// Why a capture did not start or stopped.
#[derive(Debug)]
pub(crate) enum Refused {
    /// DIR is unsuitable (not empty, inside `/proc` or `/sys`): a usage error.
    Usage(String),
    /// DIR could not be written.
    Failed(Error),
}

/// The metadata file a capture leaves in DIR beside `sys/`, `proc/`.
pub(crate) const METADATA: &str = "capture.json";

#[derive(serde::Serialize)]
struct Metadata<'a> {
    format: u32,
    cgwarden: &'a str,
    taken: String,
    kernel: String,
    model: String,
    processes: bool,
    counts: &'a Counts,
    limits: Limits,
    sources: Vec<&'a str>,
}

#[derive(serde::Serialize)]
struct Limits {
    max_file: usize,
    max_files: u64,
    max_bytes: u64,
}

/// Copies what [`sources`] names from `src` (the board: [`Root::real`])
/// into `dir`, a new or empty directory.
pub(crate) fn capture(
    src: &Root,
    dir: &Path,
    processes: bool,
) -> std::result::Result<Summary, Refused> {
    check_dir(src, dir).map_err(Refused::Usage)?;
    let mode = if processes { 0o700 } else { 0o755 };
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(dir)
            .map_err(|e| Refused::Failed(Error::io("mkdir", dir, e)))?;
    }
    let out = Out::open(dir).map_err(Refused::Failed)?;
    let list = sources(src, processes);
    let mut c = Copier {
        src,
        out,
        counts: Counts::default(),
        unreadable: Vec::new(),
        walked: BTreeSet::new(),
    };
    for take in list.iter().flat_map(|s| &s.takes) {
        c.take(take).map_err(Refused::Failed)?;
    }
    write_metadata(src, dir, &list, &c.counts, processes).map_err(Refused::Failed)?;
    Ok(Summary {
        counts: c.counts,
        processes,
        unreadable: c.unreadable,
    })
}

/// Writes [`METADATA`]: when, the kernel, the model, the counts, the list.
fn write_metadata(
    src: &Root,
    dir: &Path,
    list: &[Source],
    counts: &Counts,
    processes: bool,
) -> Result<()> {
    let device = super::identity::Device::read(src);
    let meta = Metadata {
        format: 1,
        cgwarden: env!("CARGO_PKG_VERSION"),
        taken: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        kernel: device.kernel,
        model: device.model,
        processes,
        counts,
        limits: Limits {
            max_file: MAX_FILE,
            max_files: MAX_FILES,
            max_bytes: MAX_BYTES,
        },
        sources: list.iter().map(|s| s.what).collect(),
    };
    let mut json = serde_json::to_string_pretty(&meta).unwrap_or_default();
    json.push('\n');
    let meta_path = dir.join(METADATA);
    fs::write(&meta_path, json).map_err(|e| Error::io("write", meta_path, e))
}

/// DIR must be absent or an empty directory, and outside the source's
/// `/proc`, `/sys` and `/dev` (a directory made in cgroupfs is a group).
fn check_dir(src: &Root, dir: &Path) -> std::result::Result<(), String> {
    let shown = dir.display();
    match fs::symlink_metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(format!("{shown}: not a directory")),
        Ok(_) => {
            let mut rd = fs::read_dir(dir).map_err(|e| format!("{shown}: {e}"))?;
            if rd.next().is_some() {
                return Err(format!(
                    "{shown}: not empty; capture writes into a new or empty directory"
                ));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{shown}: {e}")),
    }
    // The nearest directory that exists, resolved: where DIR really goes.
    let abs = std::path::absolute(dir).map_err(|e| format!("{shown}: {e}"))?;
    let mut probe = abs.as_path();
    let real = loop {
        if let Ok(r) = fs::canonicalize(probe) {
            break r.join(abs.strip_prefix(probe).unwrap_or(Path::new("")));
        }
        match probe.parent() {
            Some(p) => probe = p,
            None => break abs.clone(),
        }
    };
    let base = fs::canonicalize(src.base()).unwrap_or_else(|_| src.base().to_path_buf());
    for kernel in ["proc", "sys", "dev"] {
        if real.starts_with(base.join(kernel)) {
            return Err(format!(
                "{shown}: inside the board's /{kernel}; capture into a directory of a real file system"
            ));
        }
    }
    Ok(())
}

/// What a source file turned out to be.
enum Got {
    Bytes(Vec<u8>),
    TooLarge,
    /// Gone (a process that exited, a file a sparse tree lacks).
    Absent,
    Unreadable,
}

struct Copier<'a> {
    src: &'a Root,
    out: Out,
    counts: Counts,
    unreadable: Vec<PathBuf>,
    /// Trees already copied (a class link's target may be reached twice).
    walked: BTreeSet<PathBuf>,
}

impl Copier<'_> {
    fn take(&mut self, take: &Take) -> Result<()> {
        match take {
            Take::File(p) => self.file(p, true),
            Take::Dir(p) => {
                if self.src.is_dir(p) {
                    self.out.dir(p)?;
                }
                Ok(())
            }
            Take::Tree(p) => self.tree(p, MAX_DEPTH),
            Take::Class(p, only) => self.class(p, *only),
            Take::Cgroups(p) => self.cgroups(p),
            Take::Processes => self.processes(),
        }
    }

    /// Copies regular file `dev` (a marker for one never read); `follow`:
    /// links above it are followed on the source (a declared path).
    fn file(&mut self, dev: &Path, follow: bool) -> Result<()> {
        let host = self.src.host_path(dev);
        let meta = match if follow {
            fs::metadata(&host)
        } else {
            fs::symlink_metadata(&host)
        } {
            Ok(m) => m,
            Err(_) => return Ok(()),
        };
        let never = NEVER_READ.iter().any(|n| Path::new(n) == dev);
        if never || (meta.file_type().is_file() && meta.permissions().mode() & 0o444 == 0) {
            self.counts.markers += 1;
            return self.out.file(dev, b"");
        }
        if !meta.file_type().is_file() {
            self.counts.special += 1;
            return Ok(());
        }
        if self.counts.files >= MAX_FILES || self.counts.bytes >= MAX_BYTES {
            self.counts.over_limit += 1;
            return Ok(());
        }
        match self.read(dev, MAX_FILE) {
            Got::Bytes(b) => {
                self.counts.files += 1;
                self.counts.bytes += b.len() as u64;
                self.out.file(dev, &b)
            }
            Got::TooLarge => {
                self.counts.too_large += 1;
                Ok(())
            }
            Got::Absent => Ok(()),
            Got::Unreadable => {
                self.counts.unreadable += 1;
                if self.unreadable.len() < Summary::SHOWN {
                    self.unreadable.push(dev.to_path_buf());
                }
                Ok(())
            }
        }
    }

    /// At most `cap` bytes of `dev` (more is [`Got::TooLarge`]), opened
    /// read-only without following a link at its end.
    fn read(&self, dev: &Path, cap: usize) -> Got {
        let host = self.src.host_path(dev);
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&host);
        let mut buf = Vec::new();
        let r = f.and_then(|f| f.take(cap as u64 + 1).read_to_end(&mut buf));
        match r {
            Ok(_) if buf.len() > cap => Got::TooLarge,
            Ok(_) => Got::Bytes(buf),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => Got::Absent,
            Err(_) => Got::Unreadable,
        }
    }

    /// Copies the tree at `dev` whole, `depth` levels deep.
    fn tree(&mut self, dev: &Path, depth: usize) -> Result<()> {
        if self.walked.iter().any(|w| dev.starts_with(w)) {
            return Ok(());
        }
        if !self.src.is_dir(dev) {
            return Ok(());
        }
        self.walked.insert(dev.to_path_buf());
        self.walk(dev, depth)
    }

    fn walk(&mut self, dev: &Path, depth: usize) -> Result<()> {
        self.out.dir(dev)?;
        for (name, kind) in self.entries(dev) {
            let p = dev.join(&name);
            match kind {
                Kind::Dir if depth > 0 => self.walk(&p, depth - 1)?,
                Kind::Dir => {}
                Kind::File => self.file(&p, false)?,
                Kind::Link => {
                    self.link(&p)?;
                }
                Kind::Other => self.counts.special += 1,
            }
        }
        Ok(())
    }

    /// The entries of directory `dev`, sorted, by their own type (links
    /// not followed). A directory that cannot be listed has none.
    fn entries(&self, dev: &Path) -> Vec<(String, Kind)> {
        let Ok(rd) = fs::read_dir(self.src.host_path(dev)) else {
            return Vec::new();
        };
        let mut v: Vec<(String, Kind)> = rd
            .filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().into_string().ok()?;
                let t = e.file_type().ok()?;
                let kind = if t.is_dir() {
                    Kind::Dir
                } else if t.is_file() {
                    Kind::File
                } else if t.is_symlink() {
                    Kind::Link
                } else {
                    Kind::Other
                };
                Some((name, kind))
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Makes symlink `dev` again in DIR if its target stays inside (module
    /// docs); returns the target's device path then.
    fn link(&mut self, dev: &Path) -> Result<Option<PathBuf>> {
        let Ok(target) = fs::read_link(self.src.host_path(dev)) else {
            return Ok(None);
        };
        match link_target(dev, &target) {
            Some(to) => {
                self.counts.links += 1;
                self.out.symlink(dev, &target)?;
                Ok(Some(to))
            }
            None => {
                self.counts.links_skipped += 1;
                Ok(None)
            }
        }
    }

    /// A class directory: its entries again, links' targets as trees.
    fn class(&mut self, dev: &Path, only: Option<&str>) -> Result<()> {
        if !self.src.is_dir(dev) {
            return Ok(());
        }
        self.out.dir(dev)?;
        for (name, kind) in self.entries(dev) {
            if only.is_some_and(|o| !name.starts_with(o)) {
                continue;
            }
            let p = dev.join(&name);
            match kind {
                Kind::Link => {
                    if let Some(to) = self.link(&p)? {
                        self.tree(&to, MAX_DEPTH)?;
                    }
                }
                Kind::Dir => self.tree(&p, MAX_DEPTH)?,
                Kind::File => self.file(&p, false)?,
                Kind::Other => self.counts.special += 1,
            }
        }
        Ok(())
    }

    /// The cgroup2 hierarchy at `dev`, or (a hybrid layout, where `dev`
    /// holds the v1 hierarchies) those directly below it.
    fn cgroups(&mut self, dev: &Path) -> Result<()> {
        let v2 = |d: &Path| self.src.is_file(&d.join(super::cgroupfs::CONTROLLERS));
        if v2(dev) {
            return self.tree(dev, MAX_CGROUP_DEPTH);
        }
        if !self.src.is_dir(dev) {
            return Ok(());
        }
        self.out.dir(dev)?;
        for (name, kind) in self.entries(dev) {
            let p = dev.join(&name);
            if kind == Kind::Dir && v2(&p) {
                self.tree(&p, MAX_CGROUP_DEPTH)?;
            }
        }
        Ok(())
    }

    /// `/proc/PID` of every process but this one.
    fn processes(&mut self) -> Result<()> {
        let me = self.src.own_pid();
        let Ok(pids) = super::procfs::pids(self.src) else {
            return Ok(());
        };
        for pid in pids.into_iter().filter(|p| Some(*p) != me) {
            let dir = PathBuf::from(format!("/proc/{pid}"));
            let before = self.counts.files;
            for f in PROC_FILES {
                if f == "exe" {
                    self.exe(&dir.join(f))?;
                } else {
                    self.file(&dir.join(f), false)?;
                }
            }
            let task = dir.join("task");
            for (tid, kind) in self.entries(&task) {
                if kind != Kind::Dir {
                    continue;
                }
                for f in TASK_FILES {
                    self.file(&task.join(&tid).join(f), false)?;
                }
            }
            if self.counts.files > before {
                self.counts.processes += 1;
            }
        }
        Ok(())
    }

    /// `/proc/PID/exe` as a plain file holding the link's target (a kernel
    /// thread has none).
    fn exe(&mut self, dev: &Path) -> Result<()> {
        let host = self.src.host_path(dev);
        let target = match fs::read_link(&host) {
            Ok(t) => t,
            // A plain tree may hold the target as a file already.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return self.file(dev, false);
            }
            Err(_) => return Ok(()),
        };
        use std::os::unix::ffi::OsStrExt;
        let mut text = target.as_os_str().as_bytes().to_vec();
        text.push(b'\n');
        self.counts.files += 1;
        self.counts.bytes += text.len() as u64;
        self.out.file(dev, &text)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Link,
    Other,
}

/// The device path symlink `link` (a device path) points at, when its
/// `target` is of sysfs's form — relative, `../` steps first, then names —
/// and stays below `/`; `None` otherwise.
pub(crate) fn link_target(link: &Path, target: &Path) -> Option<PathBuf> {
    let mut out = link.parent()?.to_path_buf();
    let mut named = false;
    for c in target.components() {
        match c {
            Component::ParentDir if !named => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => {
                named = true;
                out.push(n);
            }
            _ => return None,
        }
    }
    named.then_some(out)
}

/// DIR, written beneath its own descriptor without following any link.
struct Out {
    root: OwnedFd,
    /// The directory last opened (copies go file after file in one).
    last: Option<(PathBuf, OwnedFd)>,
    dir: PathBuf,
}

impl Out {
    fn open(dir: &Path) -> Result<Out> {
        let root = nix::fcntl::open(
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io("open", dir, io::Error::from(e)))?;
        Ok(Out {
            root,
            last: None,
            dir: dir.to_path_buf(),
        })
    }

    fn err(&self, op: &'static str, dev: &Path, e: Errno) -> Error {
        let rel = dev.strip_prefix("/").unwrap_or(dev);
        Error::io(op, self.dir.join(rel), io::Error::from(e))
    }

    /// Directory `dev` in DIR (made with its parents), opened; a link on
    /// the way is an error (ELOOP / ENOTDIR).
    fn dir(&mut self, dev: &Path) -> Result<()> {
        self.open_dir(dev).map(|_| ())
    }

    fn open_dir(&mut self, dev: &Path) -> Result<&OwnedFd> {
        if self.last.as_ref().is_some_and(|(p, _)| p == dev) {
            return Ok(&self.last.as_ref().expect("checked").1);
        }
        let mut fd = self
            .root
            .try_clone()
            .map_err(|e| Error::io("open", &self.dir, e))?;
        for c in dev.components() {
            let Component::Normal(name) = c else { continue };
            match nix::sys::stat::mkdirat(&fd, name, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(self.err("mkdir", dev, e)),
            }
            fd = nix::fcntl::openat(
                &fd,
                name,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| self.err("open", dev, e))?;
        }
        self.last = Some((dev.to_path_buf(), fd));
        Ok(&self.last.as_ref().expect("just set").1)
    }

    /// The parent of `dev` opened in DIR, and `dev`'s name.
    fn parent(&mut self, dev: &Path) -> Result<(&OwnedFd, PathBuf)> {
        let (Some(parent), Some(name)) = (dev.parent(), dev.file_name()) else {
            return Err(self.err("open", dev, Errno::EINVAL));
        };
        let name = PathBuf::from(name);
        Ok((self.open_dir(parent)?, name))
    }

    /// Plain file `dev` holding `bytes`; one that exists already (a path
    /// two sources name) is left as it is.
    fn file(&mut self, dev: &Path, bytes: &[u8]) -> Result<()> {
        let (dir, name) = self.parent(dev)?;
        let fd = nix::fcntl::openat(
            dir,
            &name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        );
        let fd = match fd {
            Ok(fd) => fd,
            Err(Errno::EEXIST) => return Ok(()),
            Err(e) => return Err(self.err("create", dev, e)),
        };
        fs::File::from(fd).write_all(bytes).map_err(|e| {
            Error::io(
                "write",
                self.dir.join(dev.strip_prefix("/").unwrap_or(dev)),
                e,
            )
        })
    }

    /// Symlink `dev` → `target` (checked by [`link_target`]).
    fn symlink(&mut self, dev: &Path, target: &Path) -> Result<()> {
        let (dir, name) = self.parent(dev)?;
        match nix::unistd::symlinkat(target, dir, &name) {
            Ok(()) | Err(Errno::EEXIST) => Ok(()),
            Err(e) => Err(self.err("symlink", dev, e)),
        }
    }
}

#[cfg(test)]
mod tests;
