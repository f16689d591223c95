//! The sysctl family: `sysctl.NAME` for `/proc/sys/NAME` (dots become
//! slashes), a **closed table**: a sysctl is a knob only if it is a row of
//! [`TABLE`]. The table is the whole truth about sysctls: the policy's
//! `system.sysctl` names, rule and boost knobs, grant patterns, the range
//! checked, the journal's allow-list (exactly these files), the fake tree's
//! defaults and the reference table in docs/policy.md all come from it.
//! Adding a sysctl is adding one row.
//!
//! What is left out on purpose: anything that executes code or names a
//! program (`kernel.core_pattern`, `kernel.modprobe`, `kernel.usermodehelper`,
//! `kernel.poweroff_cmd`), one-shot actions (`vm.drop_caches`,
//! `vm.compact_memory`: cgwarden's `compact` action writes the latter
//! itself, unjournalled), and security bounds (`vm.mmap_min_addr`,
//! `kernel.kptr_restrict`, `kernel.unprivileged_*`).
//!
//! The network rows (`net.core.*` buffers, backlog and busy polling,
//! `net.ipv4.ipfrag_*`) size memory and polling time; none opens a port,
//! relaxes a filter or grants a capability. `net.core.rmem_max` and
//! `wmem_max` are what any process may ask with `SO_RCVBUF`/`SO_SNDBUF`:
//! a ceiling on socket memory, not on privilege. `/proc/sys/net` is per
//! network namespace: cgwarden writes its own (the host's, as a system
//! service).
//!
//! Ranges are what the kernel enforces where we are sure of it; the newest
//! kernel's range is used (an older kernel that rejects, say, swappiness 150
//! says so at write time, like any rejected write). A row without a range
//! takes any integer.

use super::{
    did_you_mean, suggest, DocRow, Family, Id, Knob, KnobError, KnobValue, MergePolicy, Places,
    Shape, Tok, ValueKind,
};
use std::fmt;
use std::path::{Path, PathBuf};

const INT_MAX: i64 = i32::MAX as i64;

/// One sysctl of the closed set.
#[derive(Clone, Debug)]
pub(crate) struct Sysctl {
    /// Dotted name (`vm.swappiness`).
    pub(crate) name: &'static str,
    /// The values the kernel accepts, when we are sure of them.
    pub(crate) range: Option<(i64, i64)>,
    /// What a fresh Debian-like kernel reads (the fake tree's content).
    pub(crate) fake: &'static str,
    /// Where the bound comes from (the reference table's last column; read
    /// by the test that holds docs/policy.md to [`doc_table`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) source: &'static str,
}

const fn row(
    name: &'static str,
    range: Option<(i64, i64)>,
    fake: &'static str,
    source: &'static str,
) -> Sysctl {
    Sysctl {
        name,
        range,
        fake,
        source,
    }
}

/// Every sysctl cgwarden may write, one row each.
#[rustfmt::skip]
pub(crate) const TABLE: &[Sysctl] = &[
    // Memory: reclaim, watermarks, writeback, overcommit, compaction.
    row("vm.swappiness", Some((0, 200)), "60", "0..=100 before 5.8"),
    row("vm.min_free_kbytes", Some((0, INT_MAX)), "67584", "`SYSCTL_ZERO`, an `int`"),
    row("vm.watermark_scale_factor", Some((1, 3000)), "10", "1..=1000 on older kernels"),
    row("vm.watermark_boost_factor", Some((0, INT_MAX)), "15000", "`SYSCTL_ZERO`, an `int`"),
    row("vm.dirty_ratio", Some((0, 100)), "20", "`SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`"),
    row("vm.dirty_background_ratio", Some((0, 100)), "10", "`SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`"),
    row("vm.dirty_bytes", None, "0", ""),
    row("vm.dirty_background_bytes", None, "0", ""),
    row("vm.dirty_expire_centisecs", Some((0, INT_MAX)), "3000", "`SYSCTL_ZERO`, an `int`"),
    row("vm.dirty_writeback_centisecs", Some((0, INT_MAX)), "500", "`SYSCTL_ZERO`, an `int`"),
    row("vm.vfs_cache_pressure", Some((0, INT_MAX)), "100", "`SYSCTL_ZERO`, an `int`"),
    row("vm.overcommit_memory", Some((0, 2)), "0", "`SYSCTL_ZERO`..`SYSCTL_TWO`"),
    row("vm.overcommit_ratio", None, "50", ""),
    row("vm.overcommit_kbytes", None, "0", ""),
    row("vm.panic_on_oom", Some((0, 2)), "0", "`SYSCTL_ZERO`..`SYSCTL_TWO`"),
    row("vm.oom_kill_allocating_task", None, "0", ""),
    row("vm.oom_dump_tasks", None, "1", ""),
    row("vm.compaction_proactiveness", Some((0, 100)), "20", "`SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`"),
    row("vm.compact_unevictable_allowed", Some((0, 1)), "1", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("vm.extfrag_threshold", Some((0, 1000)), "500", "`SYSCTL_ZERO`..`SYSCTL_ONE_THOUSAND`"),
    row("vm.stat_interval", None, "1", ""),
    row("vm.zone_reclaim_mode", None, "0", ""),
    row("vm.admin_reserve_kbytes", None, "8192", ""),
    row("vm.user_reserve_kbytes", None, "131072", ""),
    row("vm.max_map_count", None, "65530", ""),
    row("vm.min_unmapped_ratio", Some((0, 100)), "1", "`SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`"),
    row("vm.percpu_pagelist_high_fraction", None, "0", ""),
    row("vm.lowmem_reserve_ratio", None, "256\t256\t32\t0\t0", "one integer per zone"),
    row("vm.nr_hugepages", None, "0", ""),
    row("vm.nr_overcommit_hugepages", None, "0", ""),
    // Swap readahead: 2^N pages per swap-in; 0 with zram, where a page is
    // decompressed on its own and readahead only costs latency.
    row("vm.page-cluster", Some((0, 31)), "3", "`SYSCTL_ZERO`..`page_cluster_max` (31) since 6.2"),
    // Scheduler: RT throttling, uclamp, timer migration.
    row("kernel.sched_rt_period_us", Some((1, INT_MAX)), "1000000", "`SYSCTL_ONE`..`INT_MAX`"),
    row("kernel.sched_rt_runtime_us", Some((-1, INT_MAX)), "950000", "-1 = unlimited; ≤ the period at write"),
    row("kernel.sched_rr_timeslice_ms", None, "100", ""),
    row("kernel.sched_util_clamp_min", Some((0, 1024)), "1024", "`SCHED_CAPACITY_SCALE`"),
    row("kernel.sched_util_clamp_max", Some((0, 1024)), "1024", "`SCHED_CAPACITY_SCALE`"),
    row("kernel.sched_util_clamp_min_rt_default", Some((0, 1024)), "1024", "`SCHED_CAPACITY_SCALE`"),
    row("kernel.sched_autogroup_enabled", Some((0, 1)), "1", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("kernel.sched_child_runs_first", None, "0", ""),
    row("kernel.sched_schedstats", Some((0, 1)), "0", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("kernel.sched_energy_aware", Some((0, 1)), "1", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("kernel.sched_cfs_bandwidth_slice_us", Some((1, INT_MAX)), "5000", "`SYSCTL_ONE`"),
    row("kernel.sched_deadline_period_max_us", None, "4194304", ""),
    row("kernel.sched_deadline_period_min_us", None, "100", ""),
    row("kernel.timer_migration", Some((0, 1)), "1", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    // The industrial watchdog set: a hung task, a soft lockup or an oops
    // panics, and a panic reboots after N seconds: a stuck board comes back.
    row("kernel.hung_task_timeout_secs", Some((0, INT_MAX)), "120", "0 disables; `LONG_MAX/HZ` in the kernel"),
    row("kernel.hung_task_panic", Some((0, 1)), "0", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("kernel.panic", Some((-INT_MAX - 1, INT_MAX)), "0", "an `int`: N s to reboot, < 0 at once, 0 never"),
    row("kernel.panic_on_oops", Some((0, 1)), "0", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    row("kernel.softlockup_panic", Some((0, 1)), "0", "`SYSCTL_ZERO`..`SYSCTL_ONE`"),
    // Network buffers, as ROS 2 / DDS deployments size them: the socket
    // buffer ceilings and defaults, the receive backlog, IPv4 reassembly
    // (large UDP samples arrive fragmented) and busy polling. The fake
    // values are what a stock 64-bit kernel prints (`SK_RMEM_MAX` = 212992
    // for the four buffers); kernels with the late-2025 change that set the
    // two ceilings to 4 MiB read 4194304 for `rmem_max`/`wmem_max`.
    row("net.core.rmem_max", Some((SOCK_MIN_RCVBUF, INT_MAX)), "212992", "`SOCK_MIN_RCVBUF` (2304 on 64-bit), an `int`"),
    row("net.core.wmem_max", Some((SOCK_MIN_SNDBUF, INT_MAX)), "212992", "`SOCK_MIN_SNDBUF` (4608 on 64-bit), an `int`"),
    row("net.core.rmem_default", Some((SOCK_MIN_RCVBUF, INT_MAX)), "212992", "`SOCK_MIN_RCVBUF` (2304 on 64-bit), an `int`"),
    row("net.core.wmem_default", Some((SOCK_MIN_SNDBUF, INT_MAX)), "212992", "`SOCK_MIN_SNDBUF` (4608 on 64-bit), an `int`"),
    row("net.core.netdev_max_backlog", Some((-INT_MAX - 1, INT_MAX)), "1000", "an `int` (`proc_dointvec`)"),
    row("net.core.busy_read", Some((0, INT_MAX)), "0", "µs; `SYSCTL_ZERO`, an `int`"),
    row("net.core.busy_poll", Some((0, INT_MAX)), "0", "µs; `SYSCTL_ZERO`, an `int`"),
    row("net.ipv4.ipfrag_high_thresh", Some((0, i64::MAX)), "4194304", "an `unsigned long`; ≥ `ipfrag_low_thresh` at write"),
    row("net.ipv4.ipfrag_time", Some((0, INT_MAX / 1000)), "30", "seconds; < 0 would expire every fragment at once; `INT_MAX/HZ`, smallest at HZ=1000"),
];

/// `SOCK_MIN_RCVBUF`: 2048 + `SKB_DATA_ALIGN(sizeof(struct sk_buff))`, the
/// `sk_buff` being 256 bytes aligned on 64-bit kernels; `SOCK_MIN_SNDBUF`
/// is twice it. A build whose `sk_buff` aligns larger refuses a few bytes
/// more at write time.
const SOCK_MIN_RCVBUF: i64 = 2048 + 256;
const SOCK_MIN_SNDBUF: i64 = 2 * SOCK_MIN_RCVBUF;

/// Where the uclamp interface of the kernel shows itself even before any
/// group exists (CONFIG_UCLAMP_TASK): a sysctl of the table, read only.
pub(crate) const UCLAMP_PROBE: &str = "/proc/sys/kernel/sched_util_clamp_min";

/// The trigger of the `compact` action: written `1`, never journalled (it
/// holds no value to restore), so not a knob.
pub(crate) const COMPACT_MEMORY: &str = "/proc/sys/vm/compact_memory";

/// The RT throttling sysctl the daemon reads to warn about RT starvation.
pub(crate) const SCHED_RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// The row of sysctl `name` (`vm.swappiness`).
pub(crate) fn lookup(name: &str) -> Option<&'static Sysctl> {
    TABLE.iter().find(|s| s.name == name)
}

/// The range the kernel accepts for sysctl `name`, when it has one this
/// crate is sure of.
pub(crate) fn sysctl_range(name: &str) -> Option<(i64, i64)> {
    lookup(name).and_then(|s| s.range)
}

/// Device path of sysctl `name`: `vm.swappiness` → `/proc/sys/vm/swappiness`.
/// Only names of the table have one.
pub(crate) fn path(name: &str) -> Option<PathBuf> {
    lookup(name).map(|s| Path::new("/proc/sys").join(s.name.replace('.', "/")))
}

/// Sysctls the kernel keeps as pairs (mm/page-writeback.c, mm/util.c): an
/// absolute amount and a ratio, of which one is in force. Writing one zeroes
/// the other, and `dirty_bytes` and `dirty_background_bytes` refuse 0 (EINVAL
/// on 6.1): there 0 only says "the ratio is in force", so the pair is
/// restored by writing whichever original is not 0 (`reset`), and writing
/// either journals both first (the kernel changes the other behind it).
pub(crate) const COUPLED: [(&str, &str); 3] = [
    ("vm.dirty_bytes", "vm.dirty_ratio"),
    ("vm.dirty_background_bytes", "vm.dirty_background_ratio"),
    ("vm.overcommit_kbytes", "vm.overcommit_ratio"),
];

/// The sysctl family.
pub(super) struct SysctlFamily;

/// The sysctl family's registration.
pub(super) static FAMILY: SysctlFamily = SysctlFamily;

impl Family for SysctlFamily {
    fn id(&self) -> Id {
        Id {
            name: "sysctl",
            head: Some("sysctl"),
            grammar: Some("sysctl.NAME"),
        }
    }

    fn parse(&self, text: &str, rest: &str) -> Result<Knob, KnobError> {
        parse_sysctl(text, rest)
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
        TABLE
            .iter()
            .map(|s| format!("sysctl.{}", s.name).bytes().map(Tok::Lit).collect())
            .collect()
    }

    fn owns(&self, p: &Path, _: &Path) -> bool {
        TABLE
            .iter()
            .any(|s| path(s.name).is_some_and(|own| own == p))
    }

    fn doc(&self) -> Vec<DocRow> {
        TABLE
            .iter()
            .map(|s| DocRow {
                knob: format!("`sysctl.{}`", s.name),
                values: "",
                merge: MergePolicy::First,
                file: format!("`/proc/sys/{}`", s.name.replace('.', "/")),
            })
            .collect()
    }

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::Sysctl(name) => write!(f, "sysctl.{name}"),
            _ => Ok(()),
        }
    }

    /// An integer within the sysctl's range in [`TABLE`].
    fn kind(&self, knob: &Knob) -> ValueKind {
        let range = match knob {
            Knob::Sysctl(name) => sysctl_range(name),
            _ => None,
        };
        let (min, max) = range.unwrap_or((i64::MIN, i64::MAX));
        ValueKind::Int { min, max }
    }

    fn path(&self, knob: &Knob, _: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::Sysctl(name) => {
                path(name).ok_or_else(|| format!("sysctl {name} is not a sysctl cgwarden manages"))
            }
            _ => Err(format!("{knob} is not a sysctl")),
        }
    }

    /// Every sysctl of [`TABLE`] with what a fresh Debian-like kernel reads.
    fn fake_defaults(&self) -> Vec<(PathBuf, &'static str)> {
        TABLE
            .iter()
            .filter_map(|s| Some((path(s.name)?, s.fake)))
            .collect()
    }

    fn unavailable(&self, knob: &Knob, value: &KnobValue, at: &Places<'_>) -> Option<String> {
        let Knob::Sysctl(name) = knob else {
            return None;
        };
        match self.target(knob, value, at) {
            Ok((path, _)) if at.files.exists(&path) => None,
            Ok((path, _)) => Some(format!(
                "sysctl {name}: {} does not exist on this kernel",
                path.display()
            )),
            Err(_) => Some(format!("sysctl {name}: not a sysctl cgwarden manages")),
        }
    }

    /// For a file of a [`COUPLED`] sysctl: the pair's files, `(amount, ratio)`.
    fn coupled(&self, file: &Path) -> Option<(PathBuf, PathBuf)> {
        COUPLED.iter().find_map(|(amount, ratio)| {
            let (a, r) = (path(amount)?, path(ratio)?);
            (file == a || file == r).then_some((a, r))
        })
    }
}

/// `system.sysctl`'s knobs: each value the policy's text as it stands (a
/// sysctl may hold several numbers).
pub(crate) fn baseline_knobs(section: &[(String, String)]) -> Vec<(Knob, KnobValue)> {
    section
        .iter()
        .map(|(name, value)| (Knob::Sysctl(name.clone()), KnobValue::Word(value.clone())))
        .collect()
}

/// The rows of docs/policy.md's sysctl table: name, range, source of the bound.
#[cfg(test)]
pub(crate) fn doc_table() -> String {
    let mut out = String::from("| sysctl | range | source of the bound |\n|---|---|---|\n");
    for s in TABLE {
        let range = match s.range {
            Some((lo, hi)) if hi == INT_MAX => format!("{lo}..=2^31-1"),
            Some((lo, hi)) if hi == i64::MAX => format!("{lo}..=2^63-1"),
            Some((lo, hi)) => format!("{lo}..={hi}"),
            None => "any integer".into(),
        };
        out.push_str(&format!("| `{}` | {range} | {} |\n", s.name, s.source));
    }
    out
}

fn parse_sysctl(text: &str, name: &str) -> Result<Knob, KnobError> {
    if lookup(name).is_some() {
        return Ok(Knob::Sysctl(name.to_string()));
    }
    let hint = suggest(name, TABLE.iter().map(|s| s.name)).map(|n| format!("sysctl.{n}"));
    Err(KnobError::new(format!(
        "unknown knob `{text}`: sysctl `{name}` is not in the allowed set (docs/policy.md lists it)"
    ))
    .with_hint(Some(
        did_you_mean(hint).unwrap_or_else(|| SCOPE.to_string()),
    )))
}

/// The hint for a sysctl with no near miss.
const SCOPE: &str = "sysctl knobs are limited to the closed table: vm.* memory tuning, kernel.sched_*, kernel.timer_migration, the watchdog set, net.core socket buffers and busy polling, net.ipv4.ipfrag_*";
