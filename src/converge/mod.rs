//! The one-shot converger behind `plan`, `apply` and `reset`.
//!
//! `plan` reads the current state through the kernel layer and lists the
//! steps that would bring it to the policy's baseline; `apply` builds the
//! same list and carries it out, journalling each original first; `reset`
//! replays the journal backwards. Steps come out in an order the kernel
//! accepts: parents before children, controllers enabled before their
//! knobs are written, `cpuset.mems` before `cpuset.cpus`, memory limits
//! from `min` up to `max`, processes moved only after their group is ready.

mod apply;
mod baseline;
pub(crate) mod held;
mod hw;
pub(crate) use hw::coexistence_warnings;
pub(crate) mod journal;
pub(crate) mod lock;
pub(crate) mod placement;
pub(crate) mod reset;
pub(crate) mod trust;
pub(crate) mod tuning;

use crate::engine::placement::Placer;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::HOOKS_PARENT;
use crate::kernel::knob_files::KnobFiles;
use crate::kernel::wait::page_size;
use crate::kernel::{procfs, sched, zram, Root};
use crate::knobs::normalize::{self, Form};
use crate::knobs::order::in_write_order;
use crate::knobs::{GroupKnob, Knob, KnobValue};
use crate::policy::model::group_baseline;
use crate::policy::model::{Group, OnMissing, Policy, Sched, SchedPolicy};
use journal::{Entry, Journal};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

/// One change the converger makes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    Mkdir {
        path: PathBuf,
    },
    Write {
        path: PathBuf,
        value: String,
        form: Form,
        /// The current content as shown to a person; `None` when absent.
        was: Option<String>,
    },
    /// A write to a write-only trigger file (zram `reset`): there is no
    /// content to show, read or journal. `saves` are the files whose content
    /// the trigger destroys; their originals are journalled before it fires.
    Trigger {
        path: PathBuf,
        value: String,
        saves: Vec<PathBuf>,
    },
    /// Load a kernel module with the system's modprobe.
    Modprobe {
        module: String,
    },
    /// Read `/sys/class/zram-control/hot_add` to create a zram device.
    ZramHotAdd {
        device: String,
    },
    Mkswap {
        device: String,
        size: u64,
    },
    Swapon {
        device: String,
        priority: Option<i32>,
    },
    Move {
        pid: i32,
        comm: String,
        procs: PathBuf,
        /// The process's cgroup now, relative to the cgroup2 mount.
        was: String,
    },
    Sched {
        pid: i32,
        comm: String,
        sched: Sched,
    },
    /// A kernel thread's policy and/or CPUs (`system.irqs` IRQ threads,
    /// `system.kthreads`): its originals are journalled first.
    Kthread {
        pid: i32,
        comm: String,
        sched: Option<Sched>,
        cpus: Option<crate::units::CpuList>,
    },
    /// A per-process attribute or `threads:` change on one thread.
    Task(tuning::TaskChange),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Mkdir { path } => write!(f, "MKDIR {}", path.display()),
            Step::Write {
                path, value, was, ..
            } => write!(
                f,
                "WRITE {} {} (was {})",
                path.display(),
                value,
                was.as_deref()
                    .map(|w| if w.is_empty() { "\"\"" } else { w })
                    .unwrap_or("-")
            ),
            Step::Trigger { path, value, .. } => write!(f, "WRITE {} {value}", path.display()),
            Step::Modprobe { module } => write!(f, "MODPROBE {module}"),
            Step::ZramHotAdd { device } => write!(f, "HOTADD {} ({device})", zram::HOT_ADD),
            Step::Mkswap { device, size } => {
                write!(f, "MKSWAP {} {size}", zram::dev_node(device).display())
            }
            Step::Swapon { device, priority } => match priority {
                Some(p) => write!(
                    f,
                    "SWAPON {} priority {p}",
                    zram::dev_node(device).display()
                ),
                None => write!(f, "SWAPON {}", zram::dev_node(device).display()),
            },
            Step::Move {
                pid, procs, was, ..
            } => write!(f, "WRITE {} {pid} (was {was})", procs.display()),
            Step::Sched { pid, sched, .. } => {
                write!(f, "SCHED {pid} {}", sched.policy.as_str())?;
                if let Some(p) = sched.priority {
                    write!(f, " priority {p}")?;
                }
                if let Some(n) = sched.nice {
                    write!(f, " nice {n}")?;
                }
                if let Some(d) = &sched.deadline {
                    write!(
                        f,
                        " runtime {}ns deadline {}ns period {}ns",
                        d.runtime.as_nanos(),
                        d.deadline.as_nanos(),
                        d.period.as_nanos()
                    )?;
                }
                Ok(())
            }
            Step::Kthread {
                pid,
                comm,
                sched,
                cpus,
            } => {
                write!(f, "KTHREAD {pid} ({comm})")?;
                if let Some(s) = sched {
                    write!(f, " {}", s.policy.as_str())?;
                    if let Some(p) = s.priority {
                        write!(f, " priority {p}")?;
                    }
                }
                if let Some(c) = cpus {
                    write!(f, " cpus {c}")?;
                }
                Ok(())
            }
            Step::Task(ch) => write!(f, "TASK {ch}"),
        }
    }
}

/// Steps that cannot be taken on a fake tree (no kernel behind the files).
fn needs_kernel(step: &Step) -> Option<crate::kernel::Op> {
    match step {
        Step::Task(ch) if !tuning::file_only(&ch.op) => Some(crate::kernel::Op::Sched),
        Step::Mkswap { .. } | Step::Swapon { .. } => Some(crate::kernel::Op::Swap),
        Step::Sched { .. } | Step::Kthread { .. } => Some(crate::kernel::Op::Sched),
        Step::ZramHotAdd { .. } | Step::Modprobe { .. } => Some(crate::kernel::Op::ZramControl),
        _ => None,
    }
}

/// What the converger found: the steps, and what the system lacks.
#[derive(Debug, Default)]
pub struct Plan {
    pub(crate) steps: Vec<Step>,
    /// Knobs or controllers the policy wants that this system does not have.
    pub(crate) missing: Vec<String>,
    /// Things that are present but cannot be changed now (e.g. zram in use).
    pub(crate) warnings: Vec<String>,
    /// Processes a placement matches that stay where they are: their cgroup
    /// belongs to a container runtime or another delegated manager (one
    /// line each, `pid 1234 (talker) in CGROUP: placement at policy line
    /// 12 → realtime matches it, but …`). Not steps, not warnings: notes.
    pub(crate) kept: Vec<String>,
    /// The policy has groups but the cgroup root is no cgroup v2 directory:
    /// why no group can be built. `plan` and `apply` exit 3 on it whatever
    /// `on_missing` says (not `0 changes`, exit 0, as if converged);
    /// `apply` then writes nothing.
    pub(crate) no_groups: Option<String>,
}

/// The outcome of carrying out a plan.
#[derive(Debug, Default)]
pub struct Applied {
    pub(crate) changes: usize,
    pub(crate) skipped: usize,
    pub(crate) failures: Vec<String>,
    /// What turned out missing while applying (a module that would not load).
    pub(crate) missing: Vec<String>,
    /// `on_missing: fail` and something was missing: stopped before any write.
    pub(crate) refused_missing: bool,
}

/// Why a step failed: the journal (the whole apply stops — nothing may be
/// written whose original is not safe) or the kernel (this step only).
#[derive(Debug)]
enum StepError {
    Journal(crate::kernel::Error),
    Kernel(crate::kernel::Error),
}

impl From<crate::kernel::Error> for StepError {
    fn from(e: crate::kernel::Error) -> Self {
        StepError::Kernel(e)
    }
}

/// Exit code when the system lacks what the policy needs and `on_missing: fail`.
#[cfg(test)]
pub(crate) const EXIT_MISSING: i32 = 3;

pub struct Converger<'p> {
    root: Root,
    policy: &'p Policy,
    cg: CgroupFs,
    /// Group name → path below the cgroup root, for [`KnobFiles`].
    groups: HashMap<String, String>,
    /// No governor switch planned (the governors [`Converger::files`] maps
    /// tunables under: the running ones).
    running: HashMap<String, String>,
}

/// The controller a group knob file belongs to.
fn controller_of(file: &str) -> &'static str {
    match file.split('.').next() {
        Some("cpuset") => "cpuset",
        Some("cpu") => "cpu",
        Some("memory") => "memory",
        Some("io") => "io",
        Some("pids") => "pids",
        _ => "",
    }
}

/// A group's baseline knobs (the policy's [`group_baseline`]) in the order
/// they are written: [`in_write_order`], the rule the daemon's writes follow.
pub(crate) fn group_knobs(g: &Group) -> Vec<(GroupKnob, KnobValue)> {
    let knobs: Vec<(Knob, KnobValue)> = group_baseline(g)
        .into_iter()
        .map(|(knob, v)| {
            let group = g.name.clone();
            (Knob::Group { group, knob }, v)
        })
        .collect();
    in_write_order(knobs, |_| None)
        .into_iter()
        .filter_map(|(k, v)| Some((k.group_knob()?.1, v)))
        .collect()
}

/// Controllers a group itself needs: those of its knobs, plus those the
/// rules read or write for it (memory for `G.memory.*`, pids for `G.pids.*`).
fn own_controllers(policy: &Policy, g: &Group) -> BTreeSet<&'static str> {
    let mut set: BTreeSet<&'static str> = group_knobs(g)
        .iter()
        .map(|(k, _)| controller_of(k.file_name()))
        .collect();
    for c in crate::policy::rule_controllers(policy, &g.name) {
        set.insert(c);
    }
    set
}

/// Controllers `g`'s children need enabled in its `cgroup.subtree_control`
/// (a repair of `g` enables exactly these).
pub(crate) fn children_controllers(policy: &Policy, g: &Group) -> BTreeSet<&'static str> {
    g.children
        .iter()
        .flat_map(|c| subtree_controllers(policy, c))
        .collect()
}

/// Every controller the policy's groups need somewhere in the hierarchy
/// (what `doctor` checks the cgroup root offers).
pub(crate) fn policy_controllers(policy: &Policy) -> BTreeSet<&'static str> {
    policy
        .groups
        .iter()
        .flat_map(|g| subtree_controllers(policy, g))
        .collect()
}

fn subtree_controllers(policy: &Policy, g: &Group) -> BTreeSet<&'static str> {
    let mut set = own_controllers(policy, g);
    for c in &g.children {
        set.extend(subtree_controllers(policy, c));
    }
    set
}

/// Where the uclamp interface of the kernel shows itself even before any
/// group exists (CONFIG_UCLAMP_TASK).
const UCLAMP_PROBE: &str = crate::knobs::sysctl::UCLAMP_PROBE;

impl<'p> Converger<'p> {
    pub fn new(root: Root, policy: &'p Policy) -> Self {
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        Converger {
            root,
            policy,
            cg,
            groups: policy.group_paths(),
            running: HashMap::new(),
        }
    }

    /// Where the knobs live and what is written for a value: the daemon's
    /// mapping ([`KnobFiles`]), governor tunables under the running governors.
    fn files(&self) -> KnobFiles<'_> {
        self.files_under(&self.running)
    }

    /// [`Converger::files`] with tunables under `governors` (the governors
    /// the plan switches to).
    fn files_under<'a>(&'a self, governors: &'a HashMap<String, String>) -> KnobFiles<'a> {
        KnobFiles {
            root: &self.root,
            cg: &self.cg,
            groups: &self.groups,
            governors,
        }
    }

    /// Everything `apply` would do, read from the current state. Writes nothing.
    pub fn plan(&self) -> Plan {
        let mut plan = Plan::default();
        self.plan_groups(&mut plan);
        self.plan_sysctls(&mut plan);
        self.plan_zram(&mut plan);
        self.plan_cpufreq(&mut plan);
        self.plan_devfreq(&mut plan);
        self.plan_realtime(&mut plan);
        self.plan_hardware_threads(&mut plan);
        self.plan_latency(&mut plan);
        self.plan_placement(&mut plan);
        plan
    }

    fn write_step(
        &self,
        plan: &mut Plan,
        path: PathBuf,
        value: String,
        form: Form,
        exists_now: bool,
    ) {
        let current = if exists_now {
            self.root.read(&path).ok()
        } else {
            None
        };
        if let Some(cur) = &current {
            if normalize::same(form, cur, &value, page_size()) {
                return;
            }
        }
        plan.steps.push(Step::Write {
            path,
            value,
            form,
            was: current.map(|c| normalize::display(form, &c)),
        });
    }

    fn plan_groups(&self, plan: &mut Plan) {
        if self.policy.groups.is_empty() {
            return;
        }
        let base = self.cg.base().to_path_buf();
        let offered = match self.cg.controllers("") {
            Ok(c) => c,
            Err(e) => {
                let why = format!(
                    "cgroup root {}: not a cgroup v2 directory ({e}); no group can be built",
                    base.display()
                );
                plan.missing.push(why.clone());
                plan.no_groups = Some(why);
                return;
            }
        };
        let need: BTreeSet<&str> = self
            .policy
            .groups
            .iter()
            .flat_map(|g| subtree_controllers(self.policy, g))
            .collect();
        self.enable_step(plan, "", &need, &offered, true);
        for g in &self.policy.groups {
            self.plan_group(plan, g, &offered, true);
        }
        // The parent of the hook runs' own cgroups (daemon/hooks.rs), a
        // created group like any other: journalled, removed by `reset`. Not
        // on a fake root, where hooks stay in the daemon's cgroup.
        if !self.policy.hooks.is_empty()
            && self.root.supports(crate::kernel::Op::HookCgroup)
            && !self.cg.exists(HOOKS_PARENT)
        {
            plan.steps.push(Step::Mkdir {
                path: self.cg.dir(HOOKS_PARENT),
            });
        }
    }

    /// Enables `need` (those offered) in `rel`'s `cgroup.subtree_control`.
    fn enable_step(
        &self,
        plan: &mut Plan,
        rel: &str,
        need: &BTreeSet<&str>,
        offered: &[String],
        exists: bool,
    ) {
        let mut tokens = Vec::new();
        for c in need {
            if offered.iter().any(|o| o == c) {
                tokens.push(format!("+{c}"));
            } else {
                plan.missing.push(format!(
                    "controller `{c}` is not offered by {} (cgroup.controllers: {}); its knobs are skipped",
                    self.cg.file("", "cgroup.controllers").display(),
                    offered.join(" ")
                ));
            }
        }
        if tokens.is_empty() {
            return;
        }
        let path = self.cg.file(rel, "cgroup.subtree_control");
        self.write_step(plan, path, tokens.join(" "), Form::ControllerSet, exists);
    }

    /// Cpu lists are validated against the CPUs present at apply
    /// time. A group's `cpuset.cpus` naming a CPU this machine cannot have
    /// (not in `/sys/devices/system/cpu/possible`; an offline CPU may come
    /// back, so `possible`, not `online`) is missing, with on_missing
    /// semantics, and not written. `None` when the list is fine or
    /// `possible` cannot be read (nothing to check against).
    fn absent_cpus(&self, g: &Group) -> Option<String> {
        let cpus = g.cpuset.cpus.as_ref()?;
        let possible_path = Path::new(crate::kernel::selfproc::POSSIBLE_CPUS);
        let text = self.root.read_trimmed(possible_path).ok()?;
        let possible = crate::units::CpuList::parse_kernel(&text).ok()?;
        let absent: BTreeSet<u32> = cpus.iter().filter(|&c| !possible.contains(c)).collect();
        if absent.is_empty() {
            return None;
        }
        Some(format!(
            "{}: cpuset.cpus {cpus} names CPU {} that this machine does not have ({} is {text}); not written",
            self.cg.file(&g.path, "cpuset.cpus").display(),
            crate::units::CpuList(absent),
            possible_path.display()
        ))
    }

    fn plan_group(&self, plan: &mut Plan, g: &Group, offered: &[String], parent_exists: bool) {
        let exists = parent_exists && self.cg.exists(&g.path);
        if !exists {
            plan.steps.push(Step::Mkdir {
                path: self.cg.dir(&g.path),
            });
        }
        let parent_rel = g.path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
        let parent_enabled = if exists {
            self.cg.subtree_control(parent_rel).unwrap_or_default()
        } else {
            Vec::new()
        };
        if g.threaded {
            // Before any knob: a threaded group takes single threads and
            // only threaded controllers (docs/policy.md, `type:`).
            let path = self.cg.file(&g.path, "cgroup.type");
            self.write_step(plan, path, "threaded".into(), Form::Text, exists);
        }
        let uclamp = self.root.exists(Path::new(UCLAMP_PROBE));
        for (gk, v) in group_knobs(g) {
            let (file, form) = (gk.file_name(), normalize::form_of(gk));
            let ctrl = controller_of(file);
            let knob = Knob::Group {
                group: g.name.clone(),
                knob: gk,
            };
            let (path, value) = match self.files().target(&knob, &v) {
                Ok(t) => t,
                Err(e) => {
                    plan.missing.push(format!("{knob}: {e}"));
                    continue;
                }
            };
            if !offered.iter().any(|o| o == ctrl) {
                // Reported once per controller by enable_step.
                continue;
            }
            if file.starts_with("cpu.uclamp") && !uclamp {
                plan.missing.push(format!(
                    "{}: this kernel has no uclamp ({UCLAMP_PROBE} is absent: CONFIG_UCLAMP_TASK_GROUP off)",
                    path.display()
                ));
                continue;
            }
            // On a real kernel a knob file of an existing group whose controller
            // is already enabled must exist; if not, the kernel lacks it.
            let enabled = parent_enabled.iter().any(|c| c == ctrl);
            if exists && enabled && !self.cg.knob_exists(&g.path, file) {
                plan.missing.push(format!(
                    "{}: the kernel does not offer this knob",
                    path.display()
                ));
                continue;
            }
            if file == "cpuset.cpus" {
                if let Some(m) = self.absent_cpus(g) {
                    plan.missing.push(m);
                    continue;
                }
            }
            self.write_step(plan, path, value, form, exists);
        }
        if !g.children.is_empty() {
            let need: BTreeSet<&str> = g
                .children
                .iter()
                .flat_map(|c| subtree_controllers(self.policy, c))
                .collect();
            let need: BTreeSet<&str> = need
                .into_iter()
                .filter(|c| offered.iter().any(|o| o == c))
                .collect();
            self.enable_step(plan, &g.path, &need, offered, exists);
            for c in &g.children {
                self.plan_group(plan, c, offered, exists);
            }
        }
    }

    fn plan_placement(&self, plan: &mut Plan) {
        if self.policy.placement.is_empty() {
            return;
        }
        let placer = Placer::new(&self.policy.placement, |name| {
            crate::kernel::accounts::user(&self.root, name)
                .ok()
                .flatten()
                .map(|u| u.uid)
        });
        let pids = match procfs::pids(&self.root) {
            Ok(p) => p,
            Err(e) => {
                plan.warnings.push(format!("cannot scan processes: {e}"));
                return;
            }
        };
        // The same placement as the daemon's exec path (match, move, sched,
        // descendants left behind), recorded as steps. A process that
        // vanished mid-scan simply yields nothing.
        let mut ops = placement::PlanOps::new(self.root.clone(), self.policy);
        let tuner = tuning::Tuner::new(self.root.clone(), self.policy);
        let mut tasks = Vec::new();
        for pid in pids {
            let placed = placer.place(pid, &mut ops);
            plan.warnings.extend(placed.errors);
            if let Some(k) = &placed.kept {
                plan.kept.push(k.describe(pid));
            }
            // Per-process attributes and threads, after the moves.
            if let Some(rule) = placed.rule.filter(|_| !tuner.is_empty()) {
                for ch in tuner.changes(pid, rule) {
                    match &ch.denied {
                        Some(why) => plan.warnings.push(format!("{ch}: {why}")),
                        None => tasks.push(Step::Task(ch)),
                    }
                }
            }
        }
        plan.steps.append(&mut ops.steps);
        plan.steps.append(&mut tasks);
    }

    /// Whether a step is only reported, not taken: on a fake root there is no
    /// kernel to swapon, mkswap or set scheduling policies.
    pub(crate) fn skips(&self, step: &Step) -> bool {
        needs_kernel(step).is_some_and(|op| !self.root.supports(op))
    }

    /// Which knobs are missing, for `on_missing: fail`: checked before any write.
    pub(crate) fn refuse_missing(&self, plan: &Plan) -> bool {
        self.policy.settings.on_missing == OnMissing::Fail && !plan.missing.is_empty()
    }

    /// Carries out a plan: journal first, then each step, re-checking the
    /// current value right before writing. A step the kernel rejects is
    /// reported and does not stop the others.
    /// Checks the originals journal as `apply` opens it (a journal of another
    /// cgroup root is refused), writing nothing: `apply` refuses what it
    /// finds there before it refuses a plan that builds no group.
    pub(crate) fn check_journal(&self) -> Result<(), crate::kernel::Error> {
        Journal::open(
            &self.root,
            &self.policy.settings.state_dir,
            &self.policy.settings.cgroup_root,
        )
        .map(drop)
    }

    pub fn apply(
        &self,
        plan: &Plan,
        out: &mut dyn FnMut(&str),
    ) -> Result<Applied, crate::kernel::Error> {
        let mut journal = Journal::open(
            &self.root,
            &self.policy.settings.state_dir,
            &self.policy.settings.cgroup_root,
        )?;
        self.apply_journalled(plan, &mut journal, out)
    }

    /// [`Converger::apply`] with a journal the caller holds (the daemon's,
    /// shared with its writer lanes and the IRQ watcher).
    pub(crate) fn apply_journalled(
        &self,
        plan: &Plan,
        journal: &mut Journal,
        out: &mut dyn FnMut(&str),
    ) -> Result<Applied, crate::kernel::Error> {
        let mut done = Applied::default();
        let mut created: Vec<PathBuf> = journal
            .entries()
            .iter()
            .filter_map(|e| match e {
                Entry::Mkdir { path } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let mut zram_unavailable = false;
        for step in &plan.steps {
            if self.skips(step) {
                out(&format!("# skipped on a fake root: {step}"));
                done.skipped += 1;
                continue;
            }
            if zram_unavailable && is_zram_step(step) {
                done.skipped += 1;
                continue;
            }
            if let Step::Modprobe { module } = step {
                match self.apply_step(step, journal, &mut created) {
                    Err(StepError::Journal(e)) => return Err(e),
                    Err(StepError::Kernel(e)) => {
                        // "missing" only when loading failed; with
                        // on_missing: fail nothing has been written yet: the
                        // module is loaded before anything else.
                        zram_unavailable = true;
                        done.missing.push(format!(
                            "{step}: {e}; {module} is missing, its steps are skipped"
                        ));
                        if self.policy.settings.on_missing == OnMissing::Fail {
                            done.refused_missing = true;
                            return Ok(done);
                        }
                    }
                    Ok(_) => {
                        out(&step.to_string());
                        done.changes += 1;
                    }
                }
                continue;
            }
            match self.apply_step(step, journal, &mut created) {
                Ok(true) => {
                    out(&step.to_string());
                    done.changes += 1;
                }
                Ok(false) => {}
                // Without a safe original nothing more is written.
                Err(StepError::Journal(e)) => return Err(e),
                Err(StepError::Kernel(e)) => {
                    // A process that exited between scan and move is not an error.
                    if matches!(step, Step::Move { .. } | Step::Sched { .. } | Step::Task(_))
                        && e.is_gone()
                    {
                        continue;
                    }
                    done.failures.push(format!("{step}: {e}"));
                }
            }
        }
        Ok(done)
    }
}

/// The kernel accepts a partition write it cannot honour and keeps the
/// group as `isolated invalid (REASON)`: read it back, and fail with the
/// kernel's reason when the partition is not in force.
fn check_partition(root: &Root, path: &Path, value: &str) -> Result<(), crate::kernel::Error> {
    let now = root.read(path)?;
    match normalize::partition_invalid(&now) {
        Some(reason) => Err(crate::kernel::Error::other(
            path,
            format!(
                "the kernel holds partition `{value}` invalid: {}",
                if reason.is_empty() {
                    "no reason given"
                } else {
                    reason
                }
            ),
        )),
        None => Ok(()),
    }
}

/// Steps that act on zram devices (skipped when the module could not be loaded).
fn is_zram_step(step: &Step) -> bool {
    match step {
        Step::Trigger { path, .. } | Step::Write { path, .. } => {
            path.starts_with(crate::knobs::zram::BLOCK_DIR)
                && path.to_string_lossy().contains("/zram")
        }
        Step::ZramHotAdd { .. } | Step::Mkswap { .. } | Step::Swapon { .. } => true,
        _ => false,
    }
}

fn to_kernel_policy(p: SchedPolicy) -> sched::Policy {
    match p {
        SchedPolicy::Other => sched::Policy::Other,
        SchedPolicy::Batch => sched::Policy::Batch,
        SchedPolicy::Idle => sched::Policy::Idle,
        SchedPolicy::Fifo => sched::Policy::Fifo,
        SchedPolicy::Rr => sched::Policy::Rr,
        SchedPolicy::Deadline => sched::Policy::Deadline,
    }
}

/// Whether a process already runs with a rule's scheduling (policy and the
/// parameters that go with it: nice, rt priority or deadline runtime/
/// deadline/period), so rescans do not apply it again.
pub(crate) fn sched_matches(root: &Root, pid: i32, s: &Sched) -> bool {
    match sched::current_attr(root, pid) {
        Ok(Some(cur)) => sched::attr_matches(&cur, &sched_spec(s)),
        _ => false,
    }
}

/// A placement rule's `sched:` in the kernel layer's terms.
pub(crate) fn sched_spec(s: &Sched) -> sched::SchedSpec {
    sched::SchedSpec {
        policy: to_kernel_policy(s.policy),
        priority: s.priority,
        nice: s.nice,
        deadline: s.deadline.map(|d| {
            (
                u64::try_from(d.runtime.as_nanos()).unwrap_or(u64::MAX),
                u64::try_from(d.deadline.as_nanos()).unwrap_or(u64::MAX),
                u64::try_from(d.period.as_nanos()).unwrap_or(u64::MAX),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_read_back_fails_with_the_kernels_reason() {
        let t = tempfile::TempDir::new().expect("tempdir");
        let root = Root::fake(t.path());
        let p = Path::new("/sys/fs/cgroup/rt/cpuset.cpus.partition");
        root.mkdir_all(Path::new("/sys/fs/cgroup/rt"))
            .expect("mkdir");
        // What the 6.1 guest read back after `echo isolated` with an overlapping sibling.
        root.write_new(
            p,
            "isolated invalid (Cpu list in cpuset.cpus not exclusive)",
        )
        .expect("write");
        let e = check_partition(&root, p, "isolated").expect_err("invalid must fail");
        let msg = e.to_string();
        assert!(msg.contains("cpuset.cpus.partition"), "{msg}");
        assert!(
            msg.contains("partition `isolated` invalid: Cpu list in cpuset.cpus not exclusive"),
            "{msg}"
        );
        root.write_new(p, "root invalid").expect("write");
        let msg = check_partition(&root, p, "root")
            .expect_err("invalid")
            .to_string();
        assert!(msg.contains("no reason given"), "{msg}");
        root.write_new(p, "isolated").expect("write");
        assert!(check_partition(&root, p, "isolated").is_ok());
    }

    /// The hook runs' parent is a planned (so journalled) group on a kernel
    /// root when the policy has hooks; never on a fake root or without hooks.
    #[test]
    fn hooks_parent_is_planned_on_kernel_roots_with_hooks() {
        let t = tempfile::TempDir::new().expect("tempdir");
        let cg = t.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(&cg).expect("mkdir");
        std::fs::write(cg.join("cgroup.controllers"), "cpu memory pids\n").expect("write");
        std::fs::write(cg.join("cgroup.subtree_control"), "").expect("write");
        let text = |hooks: bool| {
            format!(
                "version: 1\ngroups:\n  app:\n    pids: {{ max: 64 }}\n{}",
                if hooks {
                    "hooks:\n  alert: { exec: [/bin/true] }\n"
                } else {
                    ""
                }
            )
        };
        let load = |t: &str| crate::policy::load_bytes("t.yaml", t.as_bytes()).expect("policy");
        let parent = PathBuf::from("/sys/fs/cgroup/cgwarden.hooks");
        let mkdirs = |root: Root, p: &Policy| -> Vec<PathBuf> {
            Converger::new(root, p)
                .plan()
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::Mkdir { path } => Some(path.clone()),
                    _ => None,
                })
                .collect()
        };
        let with = load(&text(true));
        let without = load(&text(false));
        let m = mkdirs(Root::real_at(t.path()), &with);
        assert!(m.contains(&parent), "{m:?}");
        assert!(!mkdirs(Root::real_at(t.path()), &without).contains(&parent));
        assert!(!mkdirs(Root::fake(t.path()), &with).contains(&parent));
        // Already there: nothing to do.
        std::fs::create_dir(cg.join("cgwarden.hooks")).expect("mkdir");
        assert!(!mkdirs(Root::real_at(t.path()), &with).contains(&parent));
    }

    #[test]
    fn zram_steps_are_recognised() {
        let w = |p: &str| Step::Write {
            path: p.into(),
            value: "1".into(),
            form: Form::Text,
            was: None,
        };
        assert!(is_zram_step(&w("/sys/block/zram0/disksize")));
        assert!(!is_zram_step(&w("/sys/block/sda/queue/scheduler")));
        assert!(!is_zram_step(&w("/proc/sys/vm/swappiness")));
        assert!(is_zram_step(&Step::Mkswap {
            device: "zram0".into(),
            size: 1 << 20
        }));
        assert!(!is_zram_step(&Step::Modprobe {
            module: "zram".into()
        }));
        let trig = Step::Trigger {
            path: "/sys/block/zram0/reset".into(),
            value: "1".into(),
            saves: vec![],
        };
        assert!(is_zram_step(&trig));
        assert_eq!(trig.to_string(), "WRITE /sys/block/zram0/reset 1");
    }
}
