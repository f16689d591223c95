//! `cgwarden doctor`: what the policy needs from how the kernel was built and
//! booted, and is missing (docs/realtime.md). Nothing is written: boot
//! parameters and kernel configuration cannot change at runtime, so each
//! finding names its fix (the exact kernel parameter to add, or the config
//! option).
//!
//! The comparison is pure: [`Needs::of`] is what the policy asks for,
//! [`crate::kernel::boot::BootState`] is what the kernel has, and
//! [`findings`] runs every check of [`CHECKS`] over the two. A check is one
//! function of that shape, so the kernel-config checks to come
//! (CONFIG_PSI, …) are more entries in the table, not a new mechanism.
//!
//! The RT CPUs of a policy are the CPUs of its `partition: isolated` groups
//! plus every possible CPU outside `system.realtime.housekeeping_cpus`; the
//! housekeeping CPUs are that list, else the possible CPUs outside the RT
//! ones. Decisions:
//! - `isolcpus`: a CPU in an isolated cpuset partition needs none (the
//!   partition removes it from load balancing at runtime); any other RT CPU
//!   must be in `isolcpus=` (or `/sys/devices/system/cpu/isolated`).
//! - `nohz_full`: every RT CPU; the kernel's own view
//!   (`/sys/devices/system/cpu/nohz_full`) is trusted over the command line.
//!   A command line asking for it on a kernel without the file is a kernel
//!   built without CONFIG_NO_HZ_FULL.
//! - `rcu_nocbs`: every RT CPU, in `rcu_nocbs=` or `nohz_full` (nohz_full
//!   CPUs are offloaded by the kernel itself).
//! - `irqaffinity`: set, and only to housekeeping CPUs: IRQs set up before
//!   cgwarden starts (or by drivers later) get this default;
//!   `system.realtime` moves the existing ones at runtime.
//! - PREEMPT_RT (`/sys/kernel/realtime`): needed when there are RT CPUs.
//! - CONFIG_RT_GROUP_SCHED: with it, a task may only be SCHED_FIFO/RR inside
//!   a cgroup given `cpu.rt_runtime_us` budget (none by default, and cgroup
//!   v2 has no such file on most kernels), so RT placements into groups fail
//!   with EPERM. Needed off when a placement grants an RT policy; unknown is
//!   a note, not a failure.
//! - A parameter value this module cannot read (`isolcpus=1-3:1/2`) is a
//!   note: check it by hand.

use crate::kernel::boot::{format_cpus, BootState, CpuSet, RtGroupSched};
use crate::kernel::Root;
use crate::policy::model::{Partition, Policy, SchedPolicy};
use std::collections::BTreeSet;
use std::fmt;

/// What a policy asks of the kernel's boot and build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    /// CPUs reserved for RT work.
    pub(crate) rt: CpuSet,
    /// Of those, the CPUs of `partition: isolated` groups.
    pub(crate) partitioned: CpuSet,
    /// Where IRQs and housekeeping belong (empty when there are no RT CPUs).
    pub(crate) housekeeping: CpuSet,
    /// Groups a placement puts SCHED_FIFO/RR/DEADLINE tasks in.
    pub(crate) rt_sched_groups: Vec<String>,
    /// cgroup controllers the groups use.
    pub(crate) controllers: BTreeSet<&'static str>,
    /// Rules, metrics or the recorder read PSI.
    pub(crate) psi: bool,
    /// A group sets `uclamp`, or a rule or grant names a uclamp knob.
    pub(crate) uclamp: bool,
    /// `system.zram` is set.
    pub(crate) zram: bool,
    /// There are placement rules (exec events; many moves).
    pub(crate) placement: bool,
}

impl Needs {
    /// The needs of `policy` on a machine with `possible` CPUs.
    pub(crate) fn of(policy: &Policy, possible: &CpuSet) -> Needs {
        let mut n = Needs::default();
        for g in policy.all_groups() {
            if g.cpuset.partition == Some(Partition::Isolated) {
                if let Some(c) = &g.cpuset.cpus {
                    n.partitioned.extend(c.iter());
                }
            }
        }
        n.rt.extend(n.partitioned.iter().copied());
        let hk = policy
            .system
            .realtime
            .as_ref()
            .and_then(|r| r.housekeeping_cpus.as_ref());
        if let Some(hk) = hk {
            let hk: CpuSet = hk.iter().collect();
            n.rt.extend(possible.iter().filter(|c| !hk.contains(c)));
            n.housekeeping = hk;
        } else if !n.rt.is_empty() {
            n.housekeeping = possible.difference(&n.rt).copied().collect();
        }
        for p in &policy.placement {
            let rt = p.sched.as_ref().is_some_and(|s| {
                matches!(
                    s.policy,
                    SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Deadline
                )
            });
            if rt && !n.rt_sched_groups.contains(&p.group) {
                n.rt_sched_groups.push(p.group.clone());
            }
        }
        n.controllers = crate::converge::policy_controllers(policy);
        let mut reads = crate::engine::condition::Needs::default();
        for r in &policy.rules {
            reads.add_expr(&r.when);
        }
        n.psi = !reads.psi_avg.is_empty()
            || !reads.psi_stall.is_empty()
            || policy.settings.metrics.enabled()
            || policy.settings.recorder.is_some();
        n.uclamp = policy
            .all_groups()
            .iter()
            .any(|g| g.uclamp.min.is_some() || g.uclamp.max.is_some())
            || policy.rules.iter().any(|r| {
                r.then
                    .iter()
                    .chain(r.while_.iter())
                    .any(|a| a.to_string().contains(".uclamp."))
            });
        n.zram = !policy.system.zram.is_empty();
        n.placement = !policy.placement.is_empty();
        n
    }
}

/// One thing the kernel lacks (or may lack).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The check's name (`nohz_full`).
    pub(crate) check: &'static str,
    /// The policy needs it (exit 3); otherwise a note to look at.
    pub(crate) missing: bool,
    pub(crate) what: String,
    /// The exact fix: a kernel parameter to add, a config option.
    pub(crate) fix: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.missing { "missing" } else { "note" };
        write!(
            f,
            "{kind}: {}: {}; fix: {}",
            self.check, self.what, self.fix
        )
    }
}

/// A check: the needs and the kernel's state in, findings out.
pub(crate) type Check = fn(&Needs, &BootState) -> Vec<Finding>;

/// Every check, in the order findings are reported.
pub(crate) const CHECKS: &[(&str, Check)] = &[
    ("cmdline", check_cmdline),
    ("isolcpus", check_isolcpus),
    ("nohz_full", check_nohz_full),
    ("rcu_nocbs", check_rcu_nocbs),
    ("irqaffinity", check_irqaffinity),
    ("preempt_rt", check_preempt_rt),
    ("rt_group_sched", check_rt_group_sched),
    ("kernel_config", check_kernel_config),
    ("controllers", check_controllers),
    ("psi", check_psi),
    ("uclamp", check_uclamp),
    ("zram", check_zram),
    ("proc_events", check_proc_events),
    ("favordynmods", check_favordynmods),
];

/// Every finding for `needs` on a kernel in `state`.
pub(crate) fn findings(needs: &Needs, state: &BootState) -> Vec<Finding> {
    CHECKS.iter().flat_map(|(_, c)| c(needs, state)).collect()
}

/// Reads the kernel's state under `root` and compares it with `policy`.
pub(crate) fn diagnose(root: &Root, policy: &Policy) -> crate::kernel::Result<Vec<Finding>> {
    let state = BootState::read(root, &policy.settings.cgroup_root)?;
    Ok(findings(&Needs::of(policy, &state.possible), &state))
}

/// `cgwarden doctor`: prints one line per finding and a summary; the exit
/// status is 3 (the system lacks something the policy requires)
/// when a finding is missing, 0 otherwise.
pub(crate) fn command(root: &Root, policy: &Policy) -> u8 {
    match diagnose(root, policy) {
        Ok(found) => {
            for f in &found {
                crate::outln!("{f}");
            }
            hardware_lines(root);
            board_lines(root, policy);
            for w in crate::converge::coexistence_warnings(root, policy) {
                crate::outln!("coexistence: {w}");
            }
            let missing = found.iter().filter(|f| f.missing).count();
            crate::outln!("{missing} missing, {} notes", found.len() - missing);
            if missing > 0 {
                crate::exit::MISSING
            } else {
                crate::exit::OK
            }
        }
        Err(e) => {
            eprintln!("cgwarden: error: doctor: {e}");
            crate::exit::for_kernel_error(&e)
        }
    }
}

/// What the board says it is, its clusters (what `little`, `big`, `prime`
/// and `clusterN` name here), and the policy's target and names on it.
fn board_lines(root: &Root, policy: &Policy) {
    let board = crate::kernel::board::read(root, &policy.settings.cgroup_root);
    match &board.identity {
        Some(id) => crate::outln!("board: {} ({})", id.name, id.source),
        None => crate::outln!(
            "board: it does not say what it is (no /sys/devices/soc0/machine, device-tree compatible or DMI product_name)"
        ),
    }
    let clusters = crate::knobs::clusters::Clusters::of(&board);
    if clusters.is_empty() {
        crate::outln!(
            "clusters: none (no cpufreq policy under /sys/devices/system/cpu/cpufreq lists its related_cpus)"
        );
    } else {
        let all: Vec<String> = (0..clusters.len()).map(|i| clusters.label(i)).collect();
        crate::outln!("clusters: {}", all.join(", "));
    }
    for line in policy.binding.lines() {
        if !line.starts_with("clusters: ") {
            crate::outln!("{line}");
        }
    }
}

/// The board's devfreq devices and their governors, one line
/// each; nothing when the kernel has none.
fn hardware_lines(root: &Root) {
    let mhz = |hz: Option<u64>| hz.map_or("-".to_string(), |h| format!("{}MHz", h / 1_000_000));
    for d in crate::knobs::devfreq::devices(root) {
        crate::outln!(
            "devfreq {}: governor {} (offers {}), cur {} min {} max {}",
            d.name,
            d.governor.as_deref().unwrap_or("-"),
            if d.available_governors.is_empty() {
                "-".to_string()
            } else {
                d.available_governors.join(" ")
            },
            mhz(d.cur),
            mhz(d.min),
            mhz(d.max)
        );
    }
}

fn missing(check: &'static str, what: String, fix: String) -> Finding {
    Finding {
        check,
        missing: true,
        what,
        fix,
    }
}

fn unreadable(check: &'static str, value: &str) -> Finding {
    Finding {
        check,
        missing: false,
        what: format!("cannot read the boot parameter {check}={value}"),
        fix: "check by hand that it covers the RT CPUs".to_string(),
    }
}

fn note(check: &'static str, what: String, fix: String) -> Finding {
    Finding {
        check,
        missing: false,
        what,
        fix,
    }
}

/// The config option behind each cgroup controller.
fn controller_option(c: &str) -> &'static str {
    match c {
        "cpuset" => "CONFIG_CPUSETS",
        "cpu" => "CONFIG_CGROUP_SCHED (with CONFIG_FAIR_GROUP_SCHED)",
        "memory" => "CONFIG_MEMCG",
        "io" => "CONFIG_BLK_CGROUP",
        "pids" => "CONFIG_CGROUP_PIDS",
        _ => "the controller's CONFIG_ option",
    }
}

/// Without a readable configuration the runtime evidence (cgroup files,
/// /proc/pressure) still decides most checks; say how to get the rest.
fn check_kernel_config(_n: &Needs, s: &BootState) -> Vec<Finding> {
    if s.config.source.is_some() {
        return Vec::new();
    }
    vec![note(
        "kernel_config",
        "the kernel configuration is readable neither at /proc/config.gz nor at /boot/config-RELEASE, so build options are judged by what the running kernel shows".into(),
        "build with CONFIG_IKCONFIG=y and CONFIG_IKCONFIG_PROC=y, or install the config as /boot/config-$(uname -r)".into(),
    )]
}

fn check_controllers(n: &Needs, s: &BootState) -> Vec<Finding> {
    let Some(have) = &s.controllers else {
        if n.controllers.is_empty() {
            return Vec::new();
        }
        return vec![missing(
            "controllers",
            "the policy's cgroup root has no cgroup.controllers: no cgroup v2 hierarchy is mounted there".into(),
            "mount cgroup2 at /sys/fs/cgroup (systemd: systemd.unified_cgroup_hierarchy=1) or point settings.cgroup_root at a cgroup2 directory".into(),
        )];
    };
    n.controllers
        .iter()
        .filter(|c| !have.contains(**c))
        .map(|c| {
            missing(
                "controllers",
                format!(
                    "the cgroup root does not offer the `{c}` controller the policy's groups use"
                ),
                format!(
                    "build with {} and keep it off cgroup v1 (kernel parameter cgroup_no_v1=all)",
                    controller_option(c)
                ),
            )
        })
        .collect()
}

fn check_psi(n: &Needs, s: &BootState) -> Vec<Finding> {
    if !n.psi || s.psi {
        return Vec::new();
    }
    let fix = match s.config.enabled("CONFIG_PSI") {
        Some(true) => {
            "add the kernel parameter psi=1 (the kernel is built with CONFIG_PSI_DEFAULT_DISABLED)"
        }
        _ => "build with CONFIG_PSI=y (and boot with psi=1 if CONFIG_PSI_DEFAULT_DISABLED=y)",
    };
    vec![missing(
        "psi",
        "/proc/pressure is absent, and the policy's rules, metrics or recorder read pressure"
            .into(),
        fix.into(),
    )]
}

fn check_uclamp(n: &Needs, s: &BootState) -> Vec<Finding> {
    match (n.uclamp, s.config.enabled("CONFIG_UCLAMP_TASK_GROUP")) {
        (true, Some(false)) => vec![missing(
            "uclamp",
            "the policy sets uclamp, and the kernel is built without it".into(),
            "build with CONFIG_UCLAMP_TASK=y and CONFIG_UCLAMP_TASK_GROUP=y".into(),
        )],
        _ => Vec::new(),
    }
}

fn check_zram(n: &Needs, s: &BootState) -> Vec<Finding> {
    if !n.zram || s.zram_loaded {
        return Vec::new();
    }
    match s.config.enabled("CONFIG_ZRAM") {
        Some(false) => vec![missing(
            "zram",
            "the policy sets up zram, and the kernel is built without it".into(),
            "build with CONFIG_ZRAM=m (or y)".into(),
        )],
        _ => Vec::new(),
    }
}

fn check_proc_events(n: &Needs, s: &BootState) -> Vec<Finding> {
    match (n.placement, s.config.built_in("CONFIG_PROC_EVENTS")) {
        (true, Some(false)) => vec![note(
            "proc_events",
            "the kernel has no process-events connector: processes are placed by the periodic /proc scan (settings.rescan), not at exec".into(),
            "build with CONFIG_CONNECTOR=y and CONFIG_PROC_EVENTS=y".into(),
        )],
        _ => Vec::new(),
    }
}

fn check_favordynmods(n: &Needs, s: &BootState) -> Vec<Finding> {
    if !n.placement {
        return Vec::new();
    }
    let mounted = s
        .cgroup2_options
        .as_deref()
        .is_some_and(|o| o.split(',').any(|x| x == "favordynmods"));
    if mounted || s.config.built_in("CONFIG_CGROUP_FAVOR_DYNMODS") == Some(true) {
        return Vec::new();
    }
    vec![note(
        "favordynmods",
        "cgroup2 is not in favordynmods mode: every process move takes a global lock, which an exec flood makes expensive".into(),
        "build with CONFIG_CGROUP_FAVOR_DYNMODS=y, or remount: mount -o remount,favordynmods /sys/fs/cgroup".into(),
    )]
}

/// No `/proc/cmdline` (a fake board): a note naming where it was looked
/// for, when the policy has RT CPUs whose boot parameters are checked.
fn check_cmdline(n: &Needs, s: &BootState) -> Vec<Finding> {
    match &s.cmdline_absent {
        Some(path) if !n.rt.is_empty() => vec![note(
            "cmdline",
            format!(
                "{} does not exist; the boot-parameter checks read an empty command line",
                path.display()
            ),
            "run doctor on the device, or copy its /proc/cmdline there".into(),
        )],
        _ => Vec::new(),
    }
}

fn union(a: &CpuSet, b: &CpuSet) -> CpuSet {
    a.union(b).copied().collect()
}

fn check_isolcpus(n: &Needs, s: &BootState) -> Vec<Finding> {
    let want: CpuSet = n.rt.difference(&n.partitioned).copied().collect();
    if want.is_empty() {
        return Vec::new();
    }
    let (flags, mut have) = match s.cmdline.isolcpus() {
        None => (Vec::new(), CpuSet::new()),
        Some(Ok(fc)) => fc,
        Some(Err(v)) => return vec![unreadable("isolcpus", &v)],
    };
    have.extend(s.isolated.iter().flatten());
    let lack: CpuSet = want.difference(&have).copied().collect();
    if lack.is_empty() {
        return Vec::new();
    }
    let flags = if flags.is_empty() {
        "managed_irq,domain,".to_string()
    } else {
        format!("{},", flags.join(","))
    };
    vec![missing(
        "isolcpus",
        format!(
            "RT CPU(s) {} are neither isolated at boot nor in an isolated cpuset partition",
            format_cpus(&lack)
        ),
        format!(
            "add the kernel parameter isolcpus={flags}{}",
            format_cpus(&union(&have, &want))
        ),
    )]
}

fn check_nohz_full(n: &Needs, s: &BootState) -> Vec<Finding> {
    if n.rt.is_empty() {
        return Vec::new();
    }
    let asked = match s.cmdline.cpus("nohz_full") {
        None => CpuSet::new(),
        Some(Ok(c)) => c,
        Some(Err(v)) => return vec![unreadable("nohz_full", &v)],
    };
    let have = match &s.nohz_full {
        Some(c) => c.clone(),
        None if !asked.is_empty() => {
            return vec![missing(
                "nohz_full",
                format!(
                    "the command line asks for nohz_full={} but the kernel has no /sys/devices/system/cpu/nohz_full",
                    format_cpus(&asked)
                ),
                "build the kernel with CONFIG_NO_HZ_FULL=y".to_string(),
            )]
        }
        None => asked,
    };
    let lack: CpuSet = n.rt.difference(&have).copied().collect();
    if lack.is_empty() {
        return Vec::new();
    }
    vec![missing(
        "nohz_full",
        format!(
            "RT CPU(s) {} still take the scheduler tick",
            format_cpus(&lack)
        ),
        format!(
            "add the kernel parameter nohz_full={}",
            format_cpus(&union(&have, &n.rt))
        ),
    )]
}

fn check_rcu_nocbs(n: &Needs, s: &BootState) -> Vec<Finding> {
    if n.rt.is_empty() {
        return Vec::new();
    }
    let have = match s.cmdline.cpus("rcu_nocbs") {
        None => CpuSet::new(),
        Some(Ok(c)) => c,
        Some(Err(v)) => return vec![unreadable("rcu_nocbs", &v)],
    };
    let nohz: CpuSet = match &s.nohz_full {
        Some(c) => c.clone(),
        None => CpuSet::new(),
    };
    let lack: CpuSet =
        n.rt.iter()
            .filter(|c| !have.contains(c) && !nohz.contains(c))
            .copied()
            .collect();
    if lack.is_empty() {
        return Vec::new();
    }
    vec![missing(
        "rcu_nocbs",
        format!(
            "RT CPU(s) {} run their own RCU callbacks",
            format_cpus(&lack)
        ),
        format!(
            "add the kernel parameter rcu_nocbs={}",
            format_cpus(&union(&have, &n.rt))
        ),
    )]
}

fn check_irqaffinity(n: &Needs, s: &BootState) -> Vec<Finding> {
    if n.rt.is_empty() || n.housekeeping.is_empty() {
        return Vec::new();
    }
    let fix = format!(
        "add the kernel parameter irqaffinity={}",
        format_cpus(&n.housekeeping)
    );
    match s.cmdline.cpus("irqaffinity") {
        None => vec![missing(
            "irqaffinity",
            "IRQs set up at boot may land on the RT CPUs (no irqaffinity= parameter)".into(),
            fix,
        )],
        Some(Err(v)) => vec![unreadable("irqaffinity", &v)],
        Some(Ok(c)) => {
            let on_rt: CpuSet = c.intersection(&n.rt).copied().collect();
            if on_rt.is_empty() {
                Vec::new()
            } else {
                vec![missing(
                    "irqaffinity",
                    format!(
                        "irqaffinity={} includes RT CPU(s) {}",
                        format_cpus(&c),
                        format_cpus(&on_rt)
                    ),
                    fix,
                )]
            }
        }
    }
}

fn check_preempt_rt(n: &Needs, s: &BootState) -> Vec<Finding> {
    if n.rt.is_empty() || s.preempt_rt {
        return Vec::new();
    }
    vec![missing(
        "preempt_rt",
        "the kernel is not PREEMPT_RT (/sys/kernel/realtime is absent or not 1)".into(),
        "boot a kernel built with CONFIG_PREEMPT_RT=y".into(),
    )]
}

fn check_rt_group_sched(n: &Needs, s: &BootState) -> Vec<Finding> {
    if n.rt_sched_groups.is_empty() {
        return Vec::new();
    }
    let groups = n.rt_sched_groups.join(", ");
    match &s.rt_group_sched {
        RtGroupSched::Off(_) => Vec::new(),
        RtGroupSched::On(seen) => vec![missing(
            "rt_group_sched",
            format!(
                "CONFIG_RT_GROUP_SCHED is on ({}): RT tasks placed in {groups} need cpu.rt_runtime_us budget there, and get EPERM without it",
                seen.display()
            ),
            "build the kernel with CONFIG_RT_GROUP_SCHED=n".into(),
        )],
        RtGroupSched::Unknown => vec![Finding {
            check: "rt_group_sched",
            missing: false,
            what: format!(
                "cannot tell whether CONFIG_RT_GROUP_SCHED is on (no cpu.rt_runtime_us in the cgroup root, no /boot/config-RELEASE); RT tasks are placed in {groups}"
            ),
            fix: "check `zcat /proc/config.gz | grep RT_GROUP_SCHED`: it must not be =y".into(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::boot::{parse_cpus, Cmdline, KernelConfig};
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn set(t: &str) -> CpuSet {
        parse_cpus(t).unwrap_or_default()
    }

    fn state(cmdline: &str) -> BootState {
        BootState {
            cmdline: Cmdline::parse(cmdline),
            cmdline_absent: None,
            possible: set("0-7"),
            isolated: Some(set("")),
            nohz_full: Cmdline::parse(cmdline)
                .cpus("nohz_full")
                .and_then(|r| r.ok())
                .or(Some(set(""))),
            preempt_rt: true,
            rt_group_sched: RtGroupSched::Off(PathBuf::from("/boot/config-x")),
            config: KernelConfig::parse(
                PathBuf::from("/boot/config-x"),
                "CONFIG_PSI=y\nCONFIG_PROC_EVENTS=y\nCONFIG_CGROUP_FAVOR_DYNMODS=y\nCONFIG_UCLAMP_TASK_GROUP=y\n",
            ),
            controllers: Some(["cpuset", "cpu", "io", "memory", "pids"].map(String::from).into()),
            psi: true,
            cgroup2_options: Some("rw,nosuid,nodev,noexec,relatime".into()),
            zram_loaded: true,
        }
    }

    fn rt7() -> Needs {
        Needs {
            rt: set("7"),
            partitioned: set("7"),
            housekeeping: set("0-6"),
            rt_sched_groups: vec!["rt".into()],
            ..Needs::default()
        }
    }

    const GOOD: &str = "nohz_full=7 rcu_nocbs=7 irqaffinity=0-6";

    #[test]
    fn build_options_and_runtime_evidence_decide_the_kernel_checks() {
        let mut n = Needs {
            psi: true,
            uclamp: true,
            placement: true,
            zram: true,
            controllers: ["cpu", "io", "memory"].into(),
            ..Needs::default()
        };
        let mut s = state("");
        assert_eq!(findings(&n, &s), []);
        // PSI built but disabled at boot: the parameter, not the option.
        s.psi = false;
        let f = findings(&n, &s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].missing && f[0].fix.contains("psi=1"), "{f:?}");
        // No configuration at all: PSI's fix names the option; the build
        // checks that need the config say nothing but one note.
        s.config = KernelConfig::default();
        s.zram_loaded = false;
        let f = findings(&n, &s);
        let names: Vec<&str> = f.iter().map(|f| f.check).collect();
        assert_eq!(names, ["kernel_config", "psi", "favordynmods"], "{f:?}");
        assert!(f[1].fix.contains("CONFIG_PSI=y"));
        assert!(!f[0].missing && !f[2].missing);
        // favordynmods as a mount option is enough.
        s.cgroup2_options = Some("rw,favordynmods".into());
        s.psi = true;
        assert_eq!(findings(&n, &s).len(), 1);
        // A controller the root does not offer is missing, named.
        s.controllers = Some(["cpu", "memory"].map(String::from).into());
        let f = findings(&n, &s);
        assert!(
            f.iter().any(|f| f.missing
                && f.what.contains("`io`")
                && f.fix.contains("CONFIG_BLK_CGROUP")),
            "{f:?}"
        );
        // Nothing asked, nothing said (but the config note).
        n = Needs::default();
        assert!(findings(&n, &s).iter().all(|f| f.check == "kernel_config"));
    }

    #[test]
    fn a_well_booted_kernel_has_no_findings() {
        assert_eq!(findings(&rt7(), &state(GOOD)), []);
        // Nothing RT in the policy: nothing to ask of the boot.
        assert_eq!(findings(&Needs::default(), &state("")), []);
    }

    #[test]
    fn each_missing_parameter_is_named_with_its_fix() {
        let f = findings(&rt7(), &state("rcu_nocbs=7 irqaffinity=0-6"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].check, "nohz_full");
        assert!(f[0].missing);
        assert!(f[0].to_string().contains("nohz_full=7"), "{}", f[0]);
        // Another CPU already tickless: the fix keeps it.
        let f = findings(&rt7(), &state("nohz_full=2-3 rcu_nocbs=7 irqaffinity=0-6"));
        assert!(f[0].fix.ends_with("nohz_full=2-3,7"), "{f:?}");
        // nohz_full implies rcu_nocbs.
        assert_eq!(findings(&rt7(), &state("nohz_full=7 irqaffinity=0-6")), []);
        let f = findings(&rt7(), &state("nohz_full=7 rcu_nocbs=7 irqaffinity=0-7"));
        assert_eq!(f.len(), 1);
        assert!(f[0].to_string().contains("irqaffinity=0-6"), "{}", f[0]);
        let f = findings(&rt7(), &state("nohz_full=7 rcu_nocbs=7"));
        assert!(f[0].to_string().contains("irqaffinity=0-6"), "{}", f[0]);
    }

    #[test]
    fn isolcpus_only_for_cpus_outside_an_isolated_partition() {
        let mut n = rt7();
        n.partitioned = set("");
        let f = findings(&n, &state(GOOD));
        assert_eq!(f.len(), 1);
        assert!(f[0].fix.ends_with("isolcpus=managed_irq,domain,7"), "{f:?}");
        assert_eq!(
            findings(&n, &state(&format!("{GOOD} isolcpus=domain,7"))),
            []
        );
        let f = findings(&n, &state(&format!("{GOOD} isolcpus=nohz,6")));
        assert!(f[0].fix.ends_with("isolcpus=nohz,6-7"), "{f:?}");
    }

    #[test]
    fn kernel_build_checks() {
        let mut s = state(GOOD);
        s.preempt_rt = false;
        s.rt_group_sched = RtGroupSched::On(PathBuf::from("/sys/fs/cgroup/cpu.rt_runtime_us"));
        let f = findings(&rt7(), &s);
        let names: Vec<_> = f.iter().map(|f| f.check).collect();
        assert_eq!(names, ["preempt_rt", "rt_group_sched"]);
        assert!(f.iter().all(|f| f.missing));
        s.rt_group_sched = RtGroupSched::Unknown;
        let f = findings(&rt7(), &s);
        assert!(!f[1].missing, "unknown is a note: {f:?}");
        // A kernel without NO_HZ_FULL ignores the parameter.
        let mut s = state(GOOD);
        s.nohz_full = None;
        let f = findings(&rt7(), &s);
        assert!(f[0].fix.contains("CONFIG_NO_HZ_FULL"), "{f:?}");
        let f = findings(&rt7(), &state("nohz_full=7-x rcu_nocbs=7 irqaffinity=0-6"));
        assert!(
            f.iter().any(|f| !f.missing && f.check == "nohz_full"),
            "{f:?}"
        );
    }

    proptest! {
        /// Booting with exactly the fixes doctor names clears every
        /// missing finding about boot parameters.
        #[test]
        fn applying_the_fixes_clears_the_findings(
            rt in proptest::collection::btree_set(0u32..8, 1..4),
            part in any::<bool>(),
            noise in "(nohz_full=[0-7] |rcu_nocbs=[0-7] |irqaffinity=[0-7] |isolcpus=[0-7] ){0,4}",
        ) {
            let hk: CpuSet = (0..8).filter(|c| !rt.contains(c)).collect();
            prop_assume!(!hk.is_empty());
            let n = Needs {
                partitioned: if part { rt.clone() } else { CpuSet::new() },
                rt,
                housekeeping: hk,
                rt_sched_groups: Vec::new(),
                ..Needs::default()
            };
            let mut cmd = noise.clone();
            for f in findings(&n, &state(&noise)) {
                if let Some(p) = f.fix.strip_prefix("add the kernel parameter ") {
                    cmd.push(' ');
                    cmd.push_str(p);
                }
            }
            let left: Vec<_> = findings(&n, &state(&cmd)).into_iter().filter(|f| f.missing).collect();
            prop_assert!(left.is_empty(), "{cmd}: {left:?}");
        }
    }
}
