//! The typed policy: what a valid YAML file means. Built only by
//! `decode`, so every value here has already been validated.

use super::expr::{Action, Expr};
use super::yaml::Pos;
use crate::knobs::{CpuMax, GroupKnob, KnobValue};
use crate::units::{CpuList, Percent, Size};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) product: String,
    pub settings: Settings,
    /// Top-level groups; nested ones live in `Group::children`.
    pub(crate) groups: Vec<Group>,
    pub(crate) placement: Vec<Placement>,
    pub(crate) system: System,
    pub(crate) hooks: Vec<Hook>,
    pub rules: Vec<Rule>,
    /// `control:` grants, in file order.
    pub(crate) control: Vec<ControlGrant>,
    /// `report.criteria`: the soak verdicts `cgwarden report` judges by.
    pub(crate) report: ReportCriteria,
    /// The board it was loaded for: target in force, clusters, names.
    pub(crate) binding: super::Binding,
}

/// `settings.metrics`: each way of exposing metrics is optional; none set
/// means no metrics work at all.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MetricsSettings {
    /// HTTP `GET /metrics` on a unix socket.
    pub(crate) socket: Option<PathBuf>,
    /// HTTP on TCP; loopback unless `allow_remote` (checked by `decode`).
    pub(crate) listen: Option<std::net::SocketAddr>,
    pub(crate) allow_remote: bool,
    /// node_exporter textfile, replaced atomically every `interval`.
    pub(crate) textfile: Option<PathBuf>,
    /// How often the textfile is written (default 15s).
    pub(crate) interval: Duration,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            socket: None,
            listen: None,
            allow_remote: false,
            textfile: None,
            interval: Duration::from_secs(15),
        }
    }
}

impl MetricsSettings {
    /// Whether any exposition is configured.
    pub(crate) fn enabled(&self) -> bool {
        self.socket.is_some() || self.listen.is_some() || self.textfile.is_some()
    }
}

/// `settings.recorder`: the SQLite flight recorder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecorderSettings {
    /// The database is `dir/recorder.db` (resolved under `--root`).
    pub(crate) dir: PathBuf,
    /// Sampling period (default 10s); a SIGKILL loses at most one.
    pub(crate) interval: Duration,
    /// Rows older than this are dropped (default 7d).
    pub(crate) retention: Duration,
    /// The database file is kept under this many bytes (default 64M),
    /// oldest rows dropped first.
    pub(crate) max_size: u64,
}

impl RecorderSettings {
    pub(crate) fn new(dir: PathBuf) -> Self {
        RecorderSettings {
            dir,
            interval: Duration::from_secs(10),
            retention: Duration::from_secs(7 * 86400),
            max_size: 64 << 20,
        }
    }
}

/// `report.criteria`: the stability verdicts of `cgwarden report`. The
/// defaults are the usual industrial 72-hour soak table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ReportCriteria {
    /// Most OOM kills allowed (sum of `oom_kill` over all groups). Default 0.
    pub(crate) oom_kills: u64,
    /// Most memory growth allowed over the run, per group and per named
    /// process, in bytes. Default 50M.
    pub(crate) memory_growth: u64,
    /// Process names (comm, exact) whose RSS the recorder samples and
    /// whose growth is judged. Default none.
    pub(crate) processes: Vec<String>,
    /// Thermal zones (by `type`) whose trip crossings count as throttling.
    /// Default none (the criterion is then reported as not measured).
    pub(crate) thermal_zones: Vec<String>,
    /// Most trip crossings allowed per 72 hours (scaled to the report's
    /// span). Default 10.
    pub(crate) thermal_events_per_72h: u64,
    /// Most restarts allowed (reboots plus daemon restarts). Default 0.
    pub(crate) restarts: u64,
    /// Highest PSI memory `full` avg10 allowed, percent. Default 5.
    pub(crate) memory_full_avg10: f64,
    /// The control loop latency's p99 must stay below this. Default 5ms.
    pub(crate) loop_p99: std::time::Duration,
    /// The KPI judged by `loop_p99` (besides `cyclictest`). Default `loop_latency`.
    pub(crate) loop_kpi: String,
    /// The frame rate's standard deviation must stay below this. Default 2.
    pub(crate) fps_stddev: f64,
    /// The KPI judged by `fps_stddev`. Default `fps`.
    pub(crate) fps_kpi: String,
}

impl Default for ReportCriteria {
    fn default() -> Self {
        ReportCriteria {
            oom_kills: 0,
            memory_growth: 50 << 20,
            processes: Vec::new(),
            thermal_zones: Vec::new(),
            thermal_events_per_72h: 10,
            restarts: 0,
            memory_full_avg10: 5.0,
            loop_p99: std::time::Duration::from_millis(5),
            loop_kpi: "loop_latency".into(),
            fps_stddev: 2.0,
            fps_kpi: "fps".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnMissing {
    Warn,
    Fail,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub cgroup_root: PathBuf,
    pub(crate) tick: Duration,
    pub(crate) rescan: Duration,
    pub(crate) state_dir: PathBuf,
    pub(crate) on_missing: OnMissing,
    pub(crate) socket_group: String,
    /// `settings.metrics`: where the OpenMetrics exposition goes.
    pub(crate) metrics: MetricsSettings,
    /// `settings.recorder`: the flight recorder; `None`: off.
    pub(crate) recorder: Option<RecorderSettings>,
    /// How the daemon itself runs (`settings.daemon`).
    pub(crate) daemon: DaemonSettings,
    /// `settings.drift`: `None`, no check.
    pub(crate) drift: Option<DriftSettings>,
    /// `settings.critical`: comm globs of the processes whose exit is a
    /// `critical_exit` event, a counter, a recorder row and a report
    /// criterion; `kill in` never picks one.
    pub(crate) critical: Vec<String>,
}

/// `settings.drift`: how often every managed knob is compared with its
/// effective value, and what a drift does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DriftSettings {
    pub(crate) interval: Duration,
    /// `on_drift: restore` writes the effective value back; `warn` only
    /// reports.
    pub(crate) restore: bool,
}

/// `settings.daemon`: the priority, CPUs and memory locking of the daemon's
/// own reacting threads (event loop, exec/placement thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DaemonSettings {
    /// `sched_setaffinity` of the whole process; `None`: left as started.
    pub(crate) cpus: Option<CpuList>,
    /// Policy of the reacting threads: fifo/rr with a priority, or other
    /// with a nice value (validated: nothing else reaches here).
    pub(crate) sched: Sched,
    /// `mlockall(MCL_CURRENT | MCL_FUTURE)`: every page the daemon maps is
    /// resident and locked (kernel/residency.rs).
    pub(crate) mlock: bool,
}

impl Default for DaemonSettings {
    fn default() -> Self {
        DaemonSettings {
            cpus: None,
            sched: Sched {
                policy: SchedPolicy::Fifo,
                priority: Some(1),
                nice: None,
                deadline: None,
            },
            mlock: true,
        }
    }
}

impl std::fmt::Display for DaemonSettings {
    /// `fifo 1, mlock, cpus 0-3` (as `check` shows it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.sched;
        match (s.priority, s.nice) {
            (Some(p), _) => write!(f, "{} {p}", s.policy.as_str())?,
            (None, n) => write!(f, "{} nice {}", s.policy.as_str(), n.unwrap_or(0))?,
        }
        f.write_str(if self.mlock { ", mlock" } else { ", no mlock" })?;
        if let Some(c) = &self.cpus {
            write!(f, ", cpus {c}")?;
        }
        Ok(())
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cgroup_root: PathBuf::from(crate::knobs::group::CGROUP2_MOUNT),
            tick: Duration::from_secs(1),
            rescan: Duration::from_secs(30),
            state_dir: PathBuf::from("/run/cgwarden"),
            on_missing: OnMissing::Warn,
            socket_group: "root".into(),
            metrics: MetricsSettings::default(),
            recorder: None,
            daemon: DaemonSettings::default(),
            drift: None,
            critical: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Partition {
    Member,
    Root,
    Isolated,
}

impl Partition {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Partition::Member => "member",
            Partition::Root => "root",
            Partition::Isolated => "isolated",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct CpusetSpec {
    pub(crate) cpus: Option<CpuList>,
    /// Where `cpus` is written, for the subset check's error.
    pub(crate) cpus_pos: Option<Pos>,
    pub(crate) mems: Option<CpuList>,
    pub(crate) partition: Option<Partition>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct CpuSpec {
    pub(crate) weight: Option<u64>,
    pub(crate) max: Option<CpuMax>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct UclampSpec {
    pub(crate) min: Option<Percent>,
    pub(crate) max: Option<Percent>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct MemorySpec {
    pub(crate) min: Option<Size>,
    pub(crate) low: Option<Size>,
    pub(crate) high: Option<Size>,
    pub(crate) max: Option<Size>,
    pub(crate) swap_max: Option<Size>,
    pub(crate) oom_group: Option<bool>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct IoSpec {
    pub(crate) weight: Option<u64>,
}

/// `pids.max`: a count or `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PidsMax {
    Count(u64),
    Max,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PidsSpec {
    pub(crate) max: Option<PidsMax>,
}

#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    /// Path below `settings.cgroup_root`, e.g. `vision/capture`.
    pub path: String,
    pub pos: Pos,
    pub(crate) cpuset: CpusetSpec,
    pub(crate) cpu: CpuSpec,
    pub(crate) uclamp: UclampSpec,
    pub(crate) memory: MemorySpec,
    pub(crate) io: IoSpec,
    pub(crate) pids: PidsSpec,
    pub(crate) children: Vec<Group>,
    /// `type: threaded`: holds single threads of a process placed in its
    /// domain ancestor (`cgroup.type`, `cgroup.threads`).
    pub(crate) threaded: bool,
}

impl Group {
    /// This group and all its descendants, parents before children.
    pub(crate) fn walk(&self) -> Vec<&Group> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserSpec {
    Name(String),
    Uid(u32),
}

#[derive(Clone, Debug, Default)]
pub struct Match {
    pub comm: Option<String>,
    pub exe: Option<String>,
    pub cmdline: Option<String>,
    pub user: Option<UserSpec>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchedPolicy {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

impl SchedPolicy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SchedPolicy::Other => "other",
            SchedPolicy::Batch => "batch",
            SchedPolicy::Idle => "idle",
            SchedPolicy::Fifo => "fifo",
            SchedPolicy::Rr => "rr",
            SchedPolicy::Deadline => "deadline",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeadlineParams {
    pub(crate) runtime: Duration,
    pub(crate) deadline: Duration,
    pub(crate) period: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sched {
    pub(crate) policy: SchedPolicy,
    pub(crate) priority: Option<u32>,
    pub(crate) nice: Option<i32>,
    pub(crate) deadline: Option<DeadlineParams>,
}

#[derive(Clone, Debug)]
pub struct Placement {
    pub matcher: Match,
    pub group: String,
    pub sched: Option<Sched>,
    pub pos: Pos,
    /// Per-process attributes and `threads:` (docs/policy.md).
    pub tuning: Tuning,
}

/// What a placement sets on a matched process beyond its group and sched:
/// attributes applied to every thread, and per-thread rules by thread comm.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tuning {
    pub(crate) attrs: TaskAttrs,
    /// `threads:` in file order; the first entry whose name matches a
    /// thread's comm applies to it.
    pub(crate) threads: Vec<ThreadRule>,
}

impl Tuning {
    pub(crate) fn is_empty(&self) -> bool {
        self.attrs.is_empty() && self.threads.is_empty()
    }
}

/// Attributes of a task: each `None` is
/// left as the process has it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TaskAttrs {
    /// -20..19 (`setpriority`, per thread).
    pub(crate) nice: Option<i32>,
    /// -1000..1000 (`/proc/PID/oom_score_adj`, per process).
    pub(crate) oom_score_adj: Option<i32>,
    pub(crate) ioprio: Option<IoPrio>,
    /// Affinity (`sched_setaffinity`, per thread).
    pub(crate) cpus: Option<CpuList>,
    /// Per-task utilization clamps (`sched_setattr` with UTIL_CLAMP).
    pub(crate) uclamp: Option<TaskUclamp>,
}

impl TaskAttrs {
    pub(crate) fn is_empty(&self) -> bool {
        *self == TaskAttrs::default()
    }
}

/// `ioprio: { class: rt|be|idle, level: 0-7 }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IoPrio {
    pub(crate) class: IoClass,
    /// 0 (highest) to 7; ignored by the kernel for `idle`.
    pub(crate) level: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoClass {
    Rt,
    Be,
    Idle,
}

impl IoClass {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IoClass::Rt => "rt",
            IoClass::Be => "be",
            IoClass::Idle => "idle",
        }
    }
}

/// Per-task `uclamp: { min, max }` (percent of capacity).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct TaskUclamp {
    pub(crate) min: Option<Percent>,
    pub(crate) max: Option<Percent>,
}

/// One `threads:` entry: threads of the matched process whose comm matches
/// `name` (a glob) get these, over the process's own attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ThreadRule {
    pub(crate) name: String,
    /// A `type: threaded` group the thread is moved to (`cgroup.threads`).
    pub(crate) group: Option<String>,
    pub(crate) sched: Option<Sched>,
    pub(crate) attrs: TaskAttrs,
    pub(crate) pos: Pos,
}

#[derive(Clone, Debug)]
pub(crate) struct Zram {
    pub(crate) device: String,
    pub(crate) algorithm: Option<String>,
    pub(crate) size: ZramSize,
    pub(crate) swap_priority: Option<i32>,
    pub(crate) mem_limit: Option<Size>,
}

/// `system.zram.DEV.size`: bytes, or a share of the board's RAM (`50%` of
/// `MemTotal`), resolved where the device is set up — on the board, never
/// on the machine that runs `check`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ZramSize {
    Bytes(u64),
    /// Percent of `MemTotal`, more than 0 and at most [`ZramSize::MAX_SHARE`].
    OfRam(f64),
}

impl ZramSize {
    /// The largest share of RAM a zram device may be given, in percent: it
    /// holds compressed pages (2–4:1 is usual), so more than RAM makes sense
    /// (ChromeOS sizes it 150%); past 4× RAM its metadata alone costs more
    /// than it can save.
    pub(crate) const MAX_SHARE: f64 = 400.0;

    /// `512M`, `1G`, `4294967296`, or `50%` / `12.5%` of RAM.
    pub(crate) fn parse(text: &str) -> Result<ZramSize, crate::units::UnitError> {
        let Some(number) = text.strip_suffix('%') else {
            return match Size::parse(text)? {
                Size::Bytes(b) => Ok(ZramSize::Bytes(b)),
                Size::Max => Err(crate::units::UnitError::new(
                    "zram size",
                    text,
                    "a zram device needs a size, not `max`",
                )),
            };
        };
        let err = || {
            crate::units::UnitError::new(
                "zram size",
                text,
                format!(
                    "a share of RAM is a number above 0 and at most {}, followed by `%`, like \
                     `50%` or `12.5%`",
                    Self::MAX_SHARE
                ),
            )
        };
        let plain = !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && number.bytes().filter(|&b| b == b'.').count() <= 1
            && !number.starts_with('.')
            && !number.ends_with('.');
        let p: f64 = if plain {
            number.parse().map_err(|_| err())?
        } else {
            return Err(err());
        };
        if p > 0.0 && p <= Self::MAX_SHARE {
            Ok(ZramSize::OfRam(p))
        } else {
            Err(err())
        }
    }

    /// The size in bytes on a board with `mem_total` bytes of RAM
    /// (`MemTotal`): a share is taken of RAM counted in whole MiB and rounded
    /// down to a whole MiB, as zram-generator does; `None` for a share when
    /// `MemTotal` is unknown.
    pub(crate) fn bytes(&self, mem_total: Option<u64>) -> Option<u64> {
        const MIB: u64 = 1 << 20;
        match *self {
            ZramSize::Bytes(b) => Some(b),
            ZramSize::OfRam(p) => {
                let ram_mib = mem_total? / MIB;
                // f64 holds every MiB count of a real board exactly.
                let mib = (ram_mib as f64 * p / 100.0).floor() as u64;
                Some(mib * MIB)
            }
        }
    }
}

impl std::fmt::Display for ZramSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZramSize::Bytes(b) => write!(f, "{}", Size::Bytes(*b)),
            ZramSize::OfRam(p) => write!(f, "{p}% of RAM"),
        }
    }
}

/// `system.cpufreq.POLICY`: a cpufreq policy's baseline (the family's).
pub(crate) use crate::knobs::cpufreq::Baseline as Cpufreq;

#[derive(Clone, Debug)]
pub(crate) struct CpuidleDisable {
    pub(crate) cpus: CpuList,
    /// Idle states with an index greater than this are disabled.
    pub(crate) deeper_than: u32,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Realtime {
    pub(crate) housekeeping_cpus: Option<CpuList>,
    pub(crate) timer_migration: Option<bool>,
    pub(crate) cpuidle_disable: Option<CpuidleDisable>,
    /// `/sys/kernel/rcu_expedited` (the vendor RT extension sets it).
    pub(crate) rcu_expedited: Option<bool>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct System {
    /// `(name, value)` in file order; the value is what is written to /proc/sys.
    pub(crate) sysctl: Vec<(String, String)>,
    pub(crate) zram: Vec<Zram>,
    pub(crate) cpufreq: Vec<Cpufreq>,
    pub(crate) realtime: Option<Realtime>,
    /// `system.latency` (PM QoS; docs/latency.md).
    pub(crate) latency: Option<Latency>,
    /// `system.devfreq`, in file order.
    pub(crate) devfreq: Vec<Devfreq>,
    /// `system.irqs`: the first entry whose glob matches one of
    /// an IRQ's action names applies to it.
    pub(crate) irqs: Vec<KthreadRule>,
    /// `system.kthreads`: the first entry whose glob matches a
    /// kernel thread's comm applies to it.
    pub(crate) kthreads: Vec<KthreadRule>,
}

/// One entry of `system.irqs` or `system.kthreads`.
#[derive(Clone, Debug)]
pub(crate) struct KthreadRule {
    /// Glob (`*`, `?`) over IRQ action names or kernel thread comms.
    pub(crate) name: String,
    /// IRQ affinity, or the kthread's CPUs.
    pub(crate) cpus: Option<CpuList>,
    /// The threaded IRQ's `irq/N-NAME` thread, or the kthread: fifo/rr with
    /// a priority, or other.
    pub(crate) sched: Option<Sched>,
}

/// `system.devfreq.NAME`: a devfreq device's baseline (the family's).
pub(crate) use crate::knobs::devfreq::Baseline as Devfreq;

/// `system.latency`: tolerated wake-up latencies (the family's).
pub(crate) use crate::knobs::latency::Baseline as Latency;

#[derive(Clone, Debug)]
pub(crate) struct Hook {
    pub(crate) name: String,
    pub(crate) exec: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) min_interval: Option<Duration>,
    pub(crate) user: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    pub(crate) when: Expr,
    /// The source text of `when`, kept for logs and status.
    pub(crate) when_text: String,
    pub(crate) for_: Duration,
    pub(crate) hold: Duration,
    pub(crate) cooldown: Option<Duration>,
    pub(crate) then: Vec<Action>,
    pub(crate) while_: Vec<Action>,
    /// `max_active`: how long the rule is expected to stay active at most
    /// (metric `cgwarden_rule_max_active_seconds`; the shipped alert
    /// `CgwardenRuleActiveTooLong` fires past it). Changes nothing the
    /// daemon does.
    pub(crate) max_active: Option<Duration>,
}

/// Whom a `control:` entry grants to, as written: names are resolved to
/// ids when the daemon starts (and on reload), never by `check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ControlSubject {
    /// `group: NAME`: the caller's primary or a supplementary group.
    Group(String),
    /// `user: NAME`.
    User(String),
    /// `uid: N`.
    Uid(u32),
}

impl std::fmt::Display for ControlSubject {
    /// `group vision`, `user alice`, `uid 1000` (as refusals name a grant).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlSubject::Group(g) => write!(f, "group {g}"),
            ControlSubject::User(u) => write!(f, "user {u}"),
            ControlSubject::Uid(u) => write!(f, "uid {u}"),
        }
    }
}

/// `max_duration` when a `control:` entry leaves it out.
pub(crate) const DEFAULT_CONTROL_MAX_DURATION: Duration = Duration::from_secs(3600);
/// The largest `max_duration` a `control:` entry may give.
pub(crate) const MAX_CONTROL_MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// `max_boosts` when a `control:` entry leaves it out.
pub(crate) const DEFAULT_CONTROL_MAX_BOOSTS: u32 = 4;
/// The largest `max_boosts` a `control:` entry may give.
pub(crate) const MAX_CONTROL_MAX_BOOSTS: u32 = 1000;

/// One `control:` entry: what a non-root caller may boost, for how long, and
/// how many boosts it may hold at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ControlGrant {
    pub(crate) subject: ControlSubject,
    /// Knob globs (`*`, `?`), each checked to match some knob of the policy.
    pub(crate) boost: Vec<String>,
    /// Knob globs this entry may cap (`boost --cap`): granted
    /// apart from raises.
    pub(crate) cap: Vec<String>,
    pub(crate) max_duration: Duration,
    pub(crate) max_boosts: u32,
    pub(crate) pos: Pos,
}

impl Policy {
    /// Every group, parents before children.
    pub fn all_groups(&self) -> Vec<&Group> {
        self.groups.iter().flat_map(|g| g.walk()).collect()
    }

    /// Group name → path below the cgroup root, for every group.
    pub(crate) fn group_paths(&self) -> std::collections::HashMap<String, String> {
        self.all_groups()
            .into_iter()
            .map(|g| (g.name.clone(), g.path.clone()))
            .collect()
    }

    pub(crate) fn group(&self, name: &str) -> Option<&Group> {
        self.all_groups().into_iter().find(|g| g.name == name)
    }
}

/// A group's baseline as the policy sets it, in write order: the one list of
/// which group files cgwarden manages and with what value. `apply` writes it,
/// the daemon's knob table starts from it and a repair rewrites it.
pub(crate) fn group_baseline(g: &Group) -> Vec<(GroupKnob, KnobValue)> {
    let mut out = Vec::new();
    if let Some(m) = &g.cpuset.mems {
        out.push((GroupKnob::CpusetMems, KnobValue::CpuList(m.clone())));
    }
    if let Some(c) = &g.cpuset.cpus {
        out.push((GroupKnob::CpusetCpus, KnobValue::CpuList(c.clone())));
    }
    if let Some(p) = g.cpuset.partition {
        out.push((
            GroupKnob::CpusetPartition,
            KnobValue::Word(p.as_str().to_string()),
        ));
    }
    if let Some(w) = g.cpu.weight {
        out.push((GroupKnob::CpuWeight, KnobValue::Weight(w)));
    }
    if let Some(m) = &g.cpu.max {
        out.push((GroupKnob::CpuMax, KnobValue::CpuMax(*m)));
    }
    if let Some(v) = &g.uclamp.min {
        out.push((GroupKnob::UclampMin, KnobValue::Percent(*v)));
    }
    if let Some(v) = &g.uclamp.max {
        out.push((GroupKnob::UclampMax, KnobValue::Percent(*v)));
    }
    let m = &g.memory;
    for (k, v) in [
        (GroupKnob::MemoryMin, &m.min),
        (GroupKnob::MemoryLow, &m.low),
        (GroupKnob::MemoryHigh, &m.high),
        (GroupKnob::MemoryMax, &m.max),
        (GroupKnob::MemorySwapMax, &m.swap_max),
    ] {
        if let Some(s) = v {
            out.push((k, KnobValue::Size(*s)));
        }
    }
    if let Some(o) = m.oom_group {
        out.push((GroupKnob::MemoryOomGroup, KnobValue::Int(i64::from(o))));
    }
    if let Some(w) = g.io.weight {
        out.push((GroupKnob::IoWeight, KnobValue::Weight(w)));
    }
    if let Some(p) = g.pids.max {
        let v = match p {
            PidsMax::Count(n) => Some(n),
            PidsMax::Max => None,
        };
        out.push((GroupKnob::PidsMax, KnobValue::Count(v)));
    }
    out
}

#[cfg(test)]
mod zram_size_tests {
    use super::ZramSize;

    #[test]
    fn sizes_and_shares_of_ram_parse_and_nothing_else() {
        assert_eq!(ZramSize::parse("512M"), Ok(ZramSize::Bytes(512 << 20)));
        assert_eq!(ZramSize::parse("4096"), Ok(ZramSize::Bytes(4096)));
        assert_eq!(ZramSize::parse("50%"), Ok(ZramSize::OfRam(50.0)));
        assert_eq!(ZramSize::parse("12.5%"), Ok(ZramSize::OfRam(12.5)));
        assert_eq!(ZramSize::parse("150%"), Ok(ZramSize::OfRam(150.0)));
        assert_eq!(ZramSize::parse("400%"), Ok(ZramSize::OfRam(400.0)));
        for bad in [
            "0%", "0.0%", "400.5%", "1000%", "%", "-5%", "5 %", "1e2%", ".5%", "5.%", "5.5.5%",
            "inf%", "NaN%", "max", "50%%",
        ] {
            let e = ZramSize::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_share_is_of_ram_in_whole_mib_rounded_down_to_a_mib() {
        // The x86 guest: MemTotal 2013248 kB = 1966 MiB and a bit.
        let guest = 2_013_248 * 1024;
        assert_eq!(ZramSize::OfRam(50.0).bytes(Some(guest)), Some(983 << 20));
        assert_eq!(ZramSize::OfRam(12.5).bytes(Some(8 << 30)), Some(1 << 30));
        assert_eq!(ZramSize::OfRam(150.0).bytes(Some(guest)), Some(2949 << 20));
        assert_eq!(ZramSize::OfRam(33.3).bytes(Some(3 << 20)), Some(0));
        assert_eq!(ZramSize::OfRam(50.0).bytes(None), None);
        assert_eq!(ZramSize::Bytes(7).bytes(None), Some(7));
        assert_eq!(ZramSize::OfRam(50.0).to_string(), "50% of RAM");
        assert_eq!(ZramSize::Bytes(1 << 30).to_string(), "1G");
    }
}
