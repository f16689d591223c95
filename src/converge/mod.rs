//! The one-shot converger behind `plan`, `apply` and `reset`.
//!
//! `plan` reads the current state through the kernel layer and lists the
//! steps that would bring it to the policy's baseline; `apply` builds the
//! same list and carries it out, journalling each original first; `reset`
//! replays the journal backwards. Steps come out in an order the kernel
//! accepts: parents before children, controllers enabled before their
//! knobs are written, `cpuset.mems` before `cpuset.cpus`, memory limits
//! from `min` up to `max`, processes moved only after their group is ready.

mod hw;
pub use hw::coexistence_warnings;
pub(crate) mod journal;
pub mod lock;
pub(crate) mod placement;
pub mod reset;
pub mod trust;
pub(crate) mod tuning;

use crate::engine::normalize::{self, Form};
use crate::engine::placement::Placer;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::HOOKS_PARENT;
use crate::kernel::{cpufreq, pm_qos, procfs, realtime, sched, zram, Root};
use crate::knobs::sysctl;
use crate::knobs::{Knob, KnobValue};
use crate::policy::model::group_baseline;
use crate::policy::model::{Group, OnMissing, Policy, Sched, SchedPolicy};
use journal::{Entry, Journal};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// One change the converger makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
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
    /// `system.kthreads`; issue 24): its originals are journalled first.
    Kthread {
        pid: i32,
        comm: String,
        sched: Option<Sched>,
        cpus: Option<crate::units::CpuList>,
    },
    /// A per-process attribute or `threads:` change on one thread (SPEC §6).
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
    pub steps: Vec<Step>,
    /// Knobs or controllers the policy wants that this system does not have.
    pub missing: Vec<String>,
    /// Things that are present but cannot be changed now (e.g. zram in use).
    pub warnings: Vec<String>,
    /// The policy has groups but the cgroup root is no cgroup v2 directory:
    /// why no group can be built. `plan` and `apply` exit 3 on it whatever
    /// `on_missing` says (issue 22 item 7: it planned `0 changes`, exit 0,
    /// like a converged system); `apply` then writes nothing.
    pub no_groups: Option<String>,
}

/// The outcome of carrying out a plan.
#[derive(Debug, Default)]
pub struct Applied {
    pub changes: usize,
    pub skipped: usize,
    pub failures: Vec<String>,
    /// What turned out missing while applying (a module that would not load).
    pub missing: Vec<String>,
    /// `on_missing: fail` and something was missing: stopped before any write.
    pub refused_missing: bool,
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
pub const EXIT_MISSING: i32 = 3;

pub struct Converger<'p> {
    root: Root,
    policy: &'p Policy,
    cg: CgroupFs,
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

/// A group's baseline knobs in the order they are written: the policy's
/// [`group_baseline`] as file, kernel text and comparison form.
pub fn group_knobs(g: &Group) -> Vec<(&'static str, String, Form)> {
    group_baseline(g)
        .into_iter()
        .map(|(gk, v)| {
            let knob = Knob::Group {
                group: g.name.clone(),
                knob: gk,
            };
            (gk.file_name(), knob.render(&v), normalize::form_of(gk))
        })
        .collect()
}

/// Controllers a group itself needs: those of its knobs, plus those the
/// rules read or write for it (memory for `G.memory.*`, pids for `G.pids.*`).
fn own_controllers(policy: &Policy, g: &Group) -> BTreeSet<&'static str> {
    let mut set: BTreeSet<&'static str> = group_knobs(g)
        .iter()
        .map(|(f, _, _)| controller_of(f))
        .collect();
    for c in crate::policy::rule_controllers(policy, &g.name) {
        set.insert(c);
    }
    set
}

/// Controllers `g`'s children need enabled in its `cgroup.subtree_control`
/// (a repair of `g` enables exactly these).
pub fn children_controllers(policy: &Policy, g: &Group) -> BTreeSet<&'static str> {
    g.children
        .iter()
        .flat_map(|c| subtree_controllers(policy, c))
        .collect()
}

/// Every controller the policy's groups need somewhere in the hierarchy
/// (what `doctor` checks the cgroup root offers).
pub fn policy_controllers(policy: &Policy) -> BTreeSet<&'static str> {
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
        Converger { root, policy, cg }
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
            if normalize::same(form, cur, &value) {
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

    /// SPEC §2: cpu lists are validated against the CPUs present at apply
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
        for (file, value, form) in group_knobs(g) {
            let ctrl = controller_of(file);
            let path = self.cg.file(&g.path, file);
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

    fn plan_sysctls(&self, plan: &mut Plan) {
        for (name, value) in &self.policy.system.sysctl {
            self.sysctl_step(plan, name, value);
        }
    }

    fn sysctl_step(&self, plan: &mut Plan, name: &str, value: &str) {
        match sysctl::path(name) {
            Some(path) if self.root.exists(&path) => {
                self.write_step(plan, path, value.to_string(), Form::Text, true)
            }
            Some(path) => plan.missing.push(format!(
                "sysctl {name}: {} does not exist on this kernel",
                path.display()
            )),
            None => plan
                .missing
                .push(format!("sysctl {name}: not a sysctl cgwarden manages")),
        }
    }

    fn plan_zram(&self, plan: &mut Plan) {
        let wanted = &self.policy.system.zram;
        if wanted.is_empty() {
            return;
        }
        // The module: loaded when its control class or any wanted device
        // exists. Otherwise `apply` loads it first of all (as zram-generator
        // does), so that `on_missing: fail` can still stop before any write.
        let module_absent = !zram::module_loaded(&self.root)
            && !wanted.iter().any(|z| zram::exists(&self.root, &z.device));
        if module_absent {
            plan.steps.insert(
                0,
                Step::Modprobe {
                    module: zram::MODULE.to_string(),
                },
            );
            if !self.root.supports(crate::kernel::Op::ZramControl) {
                // No module loading without a kernel: what is absent is missing.
                for z in wanted {
                    plan.missing.push(format!(
                        "zram {}: {} and {} are absent, and no module is loaded on a fake root",
                        z.device,
                        zram::device_dir(&z.device).display(),
                        zram::CONTROL_DIR
                    ));
                }
                return;
            }
        }
        for z in wanted {
            let dev = &z.device;
            if !zram::exists(&self.root, dev) {
                // After `modprobe zram` the module creates zram0 itself
                // (num_devices defaults to 1); further devices need hot_add,
                // which is a no-op for a device that exists by then.
                let made_by_modprobe = module_absent && dev == "zram0";
                if !made_by_modprobe {
                    if module_absent || self.root.exists(Path::new(zram::HOT_ADD)) {
                        plan.steps.push(Step::ZramHotAdd {
                            device: dev.clone(),
                        });
                    } else {
                        plan.missing.push(format!(
                            "zram {dev}: {} and {} are absent (a kernel without zram-control?)",
                            zram::device_dir(dev).display(),
                            zram::HOT_ADD
                        ));
                        continue;
                    }
                }
            }
            let present = zram::exists(&self.root, dev);
            let size = z.size.bytes().unwrap_or(0);
            let in_swap = zram::swaps(&self.root)
                .unwrap_or_default()
                .into_iter()
                .find(|s| s.path == zram::dev_node(dev).to_string_lossy());
            let (active, offered) = if present {
                zram::comp_algorithm(&self.root, dev).unwrap_or_default()
            } else {
                Default::default()
            };
            if let Some(alg) = &z.algorithm {
                if present && !offered.is_empty() && !offered.iter().any(|o| o == alg) {
                    plan.missing.push(format!(
                        "zram {dev}: algorithm `{alg}` is not offered ({}: {}); load its module",
                        zram::attr_path(dev, "comp_algorithm").display(),
                        offered.join(" ")
                    ));
                    continue;
                }
            }
            let cur_size = if present {
                zram::disksize(&self.root, dev).unwrap_or(0)
            } else {
                0
            };
            // mem_limit is write-only (0200); its value comes from mm_stat.
            let limit_path = zram::attr_path(dev, "mem_limit");
            let cur_limit = if present {
                zram::current(&self.root, &limit_path).ok().flatten()
            } else {
                None
            };
            let alg_ok = z.algorithm.as_ref().is_none_or(|a| *a == active);
            let mut reset = false;
            if let Some(swap) = &in_swap {
                // Never swapoff a live swap device behind the operator's back.
                if !alg_ok || cur_size != size {
                    plan.warnings.push(format!(
                        "zram {dev} is in use as swap with algorithm {active} and {cur_size} bytes; the policy's settings apply after `cgwarden reset` or a reboot"
                    ));
                }
                if let Some(p) = z.swap_priority {
                    if p >= 0 && swap.priority != p {
                        plan.warnings.push(format!(
                            "zram {dev} swaps at priority {}; priority {p} applies after swapoff",
                            swap.priority
                        ));
                    }
                }
            } else {
                // Initialised by someone else (or an earlier run) and not
                // swapping: algorithm and size can only change after the
                // kernel's `reset`, which zeroes disksize and mem_limit and
                // keeps the algorithm. Their originals are journalled before
                // the trigger, so `cgwarden reset` can put them back.
                let initialised = cur_size != 0;
                reset = initialised && (!alg_ok || cur_size != size);
                if reset {
                    plan.steps.push(Step::Trigger {
                        path: zram::attr_path(dev, "reset"),
                        value: "1".into(),
                        saves: ["comp_algorithm", "disksize", "mem_limit"]
                            .iter()
                            .map(|a| zram::attr_path(dev, a))
                            .collect(),
                    });
                }
                let fresh = !initialised || reset;
                if let Some(alg) = &z.algorithm {
                    if fresh && (!alg_ok || !present) {
                        plan.steps.push(Step::Write {
                            path: zram::attr_path(dev, "comp_algorithm"),
                            value: alg.clone(),
                            form: Form::Bracketed,
                            was: present.then(|| active.clone()),
                        });
                    }
                }
                if fresh {
                    plan.steps.push(Step::Write {
                        path: zram::attr_path(dev, "disksize"),
                        value: size.to_string(),
                        form: Form::Size,
                        was: present.then(|| cur_size.to_string()),
                    });
                }
            }
            if let Some(limit) = &z.mem_limit {
                let value = limit.kernel().replace("max", "0");
                // The reset zeroes mem_limit: then it is written even if it matched.
                let same = cur_limit
                    .as_deref()
                    .is_some_and(|c| normalize::same(Form::Size, c, &value));
                if reset || !same {
                    plan.steps.push(Step::Write {
                        path: limit_path,
                        value,
                        form: Form::Size,
                        was: cur_limit.map(|c| normalize::display(Form::Size, &c)),
                    });
                }
            }
            if in_swap.is_none() {
                plan.steps.push(Step::Mkswap {
                    device: dev.clone(),
                    size,
                });
                plan.steps.push(Step::Swapon {
                    device: dev.clone(),
                    priority: z.swap_priority,
                });
            }
        }
    }

    fn plan_cpufreq(&self, plan: &mut Plan) {
        for c in &self.policy.system.cpufreq {
            let p = &c.policy;
            if !cpufreq::exists(&self.root, p) {
                plan.missing.push(format!(
                    "cpufreq {p}: {} does not exist (no cpufreq driver, or no such policy)",
                    cpufreq::policy_dir(p).display()
                ));
                continue;
            }
            let running = cpufreq::read(&self.root, p, cpufreq::SCALING_GOVERNOR).ok();
            let mut governor = running.clone();
            if let Some(list) = &c.governor {
                match cpufreq::resolve_governor(&self.root, p, list) {
                    Err(e) => plan.missing.push(e),
                    Ok(gov) => {
                        self.write_step(
                            plan,
                            cpufreq::attr_path(p, cpufreq::SCALING_GOVERNOR),
                            gov.clone(),
                            Form::Text,
                            true,
                        );
                        governor = Some(gov);
                    }
                }
            }
            // Raising the floor above the current ceiling needs the ceiling first.
            let cur_max = cpufreq::read_khz(&self.root, p, cpufreq::SCALING_MAX_FREQ).ok();
            let min_first = crate::knobs::cpufreq::min_first(c.min.map(|f| f.khz()), cur_max);
            let min = c.min.as_ref().map(|f| (cpufreq::SCALING_MIN_FREQ, f.khz()));
            let max = c.max.as_ref().map(|f| (cpufreq::SCALING_MAX_FREQ, f.khz()));
            let order = if min_first { [min, max] } else { [max, min] };
            for (attr, khz) in order.into_iter().flatten() {
                self.write_step(
                    plan,
                    cpufreq::attr_path(p, attr),
                    khz.to_string(),
                    Form::Text,
                    true,
                );
            }
            self.plan_governor_tunables(plan, c, running.as_deref(), governor.as_deref());
        }
    }

    /// `system.devfreq` (issue 24): the governor first (a governor switch
    /// may reset the limits' QoS requests on vendor kernels), then min/max
    /// in the order the kernel accepts, in Hz.
    fn plan_devfreq(&self, plan: &mut Plan) {
        use crate::kernel::devfreq;
        for d in &self.policy.system.devfreq {
            let n = &d.device;
            if !devfreq::exists(&self.root, n) {
                plan.missing.push(format!(
                    "devfreq {n}: {} does not exist (no such devfreq device)",
                    devfreq::device_dir(n).display()
                ));
                continue;
            }
            if let Some(gov) = &d.governor {
                let offered = devfreq::available_governors(&self.root, n);
                if !offered.is_empty() && !offered.iter().any(|o| o == gov) {
                    plan.missing.push(format!(
                        "devfreq {n}: governor `{gov}` is not offered (available: {})",
                        offered.join(" ")
                    ));
                } else {
                    let path = devfreq::attr_path(n, devfreq::GOVERNOR);
                    self.write_step(plan, path, gov.clone(), Form::Text, true);
                }
            }
            let cur_max = devfreq::read_hz(&self.root, n, devfreq::MAX_FREQ);
            let min_first = crate::knobs::cpufreq::min_first(d.min, cur_max);
            let min = d.min.map(|hz| (devfreq::MIN_FREQ, hz));
            let max = d.max.map(|hz| (devfreq::MAX_FREQ, hz));
            let order = if min_first { [min, max] } else { [max, min] };
            for (file, hz) in order.into_iter().flatten() {
                let path = devfreq::attr_path(n, file);
                self.write_step(plan, path, hz.to_string(), Form::Text, true);
            }
        }
    }

    /// The governor tunables of one policy, after its governor (issue 24): in
    /// the directory of the governor the plan leaves running. A governor
    /// the plan switches to has no directory yet: its tunables are written
    /// (with no `was`) after the switch; a running governor without the
    /// tunable makes it missing.
    fn plan_governor_tunables(
        &self,
        plan: &mut Plan,
        c: &crate::policy::model::Cpufreq,
        running: Option<&str>,
        governor: Option<&str>,
    ) {
        let p = &c.policy;
        let Some(gov) = governor else {
            if !c.tunables.is_empty() {
                plan.missing.push(format!(
                    "cpufreq {p}: no governor is running ({} unreadable); its tunables cannot be written",
                    cpufreq::attr_path(p, cpufreq::SCALING_GOVERNOR).display()
                ));
            }
            return;
        };
        let switching = running != Some(gov);
        for (attr, us) in &c.tunables {
            let path = cpufreq::tunable_target(&self.root, p, gov, *attr);
            if crate::knobs::cpufreq::WITHOUT_TUNABLES.contains(&gov) {
                plan.missing.push(format!(
                    "cpufreq {p}: governor `{gov}` has no tunables ({} cannot be set)",
                    attr.file_name()
                ));
            } else if switching {
                plan.steps.push(Step::Write {
                    path,
                    value: us.to_string(),
                    form: Form::Text,
                    was: None,
                });
            } else if cpufreq::existing_tunable(&self.root, p, gov, *attr).is_some() {
                self.write_step(plan, path, us.to_string(), Form::Text, true);
            } else {
                plan.missing.push(format!(
                    "cpufreq {p}: governor `{gov}` has no {} ({} does not exist)",
                    attr.file_name(),
                    path.display()
                ));
            }
        }
    }

    fn plan_realtime(&self, plan: &mut Plan) {
        let Some(rt) = &self.policy.system.realtime else {
            return;
        };
        if let Some(cpus) = &rt.housekeeping_cpus {
            let list: Vec<u32> = cpus.iter().collect();
            match realtime::irqs(&self.root) {
                Ok(irqs) => {
                    // `system.irqs` places its IRQs itself (issue 24).
                    let placed = self.irqs_placed_by_rules();
                    for irq in irqs.into_iter().filter(|i| !placed.contains(i)) {
                        let path = realtime::irq_affinity_path(irq);
                        if self.root.exists(&path) {
                            self.write_step(plan, path, cpus.to_string(), Form::CpuList, true);
                        }
                    }
                }
                Err(e) => plan
                    .missing
                    .push(format!("realtime.housekeeping_cpus: cannot list IRQs: {e}")),
            }
            let mask = realtime::cpulist_to_hex_mask(&list);
            for path in [
                realtime::default_affinity_path(),
                realtime::workqueue_cpumask_path(),
            ] {
                if self.root.exists(&path) {
                    self.write_step(plan, path, mask.clone(), Form::HexMask, true);
                } else {
                    plan.missing.push(format!(
                        "realtime.housekeeping_cpus: {} does not exist",
                        path.display()
                    ));
                }
            }
        }
        if let Some(tm) = rt.timer_migration {
            self.sysctl_step(plan, "kernel.timer_migration", if tm { "1" } else { "0" });
        }
        if let Some(on) = rt.rcu_expedited {
            let path = realtime::rcu_expedited_path();
            if self.root.exists(&path) {
                self.write_step(
                    plan,
                    path,
                    (if on { "1" } else { "0" }).into(),
                    Form::Text,
                    true,
                );
            } else {
                plan.missing.push(format!(
                    "realtime.rcu_expedited: {} does not exist",
                    path.display()
                ));
            }
        }
        if let Some(cd) = &rt.cpuidle_disable {
            for cpu in cd.cpus.iter() {
                match realtime::cpuidle_states(&self.root, cpu) {
                    Ok(states) if !states.is_empty() => {
                        for s in states.into_iter().filter(|s| *s > cd.deeper_than) {
                            self.write_step(
                                plan,
                                realtime::cpuidle_disable_path(cpu, s),
                                "1".into(),
                                Form::Text,
                                true,
                            );
                        }
                    }
                    _ => plan.missing.push(format!(
                        "realtime.cpuidle_disable: cpu{cpu} has no cpuidle states"
                    )),
                }
            }
        }
    }

    /// `system.latency` (docs/latency.md): per-CPU resume latencies are
    /// written (journalled, restored by `reset`) in the kernel's encoding
    /// (`0us` is `n/a`); the global request can only be held by the daemon,
    /// so a one-shot `apply` reports it and writes nothing for it.
    fn plan_latency(&self, plan: &mut Plan) {
        let Some(l) = &self.policy.system.latency else {
            return;
        };
        for (cpu, us) in &l.cpus {
            let path = pm_qos::resume_latency_path(*cpu);
            if self.root.exists(&path) {
                self.write_step(
                    plan,
                    path,
                    Knob::LatencyCpu(*cpu).render(&KnobValue::Latency(Some(*us))),
                    Form::Text,
                    true,
                );
            } else {
                plan.missing.push(format!(
                    "latency.cpu{cpu}: {} does not exist (no per-CPU PM QoS in this kernel)",
                    path.display()
                ));
            }
        }
        if let Some(us) = l.global {
            plan.warnings.push(format!(
                "latency.global {us}us is held only by the daemon (`cgwarden run`): the kernel drops a CPU latency request when its file descriptor closes, so {} is not written here",
                pm_qos::CPU_DMA_LATENCY
            ));
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
    /// kernel to swapon, mkswap or set scheduling policies (SPEC §1).
    pub fn skips(&self, step: &Step) -> bool {
        needs_kernel(step).is_some_and(|op| !self.root.supports(op))
    }

    /// Which knobs are missing, for `on_missing: fail`: checked before any write.
    pub fn refuse_missing(&self, plan: &Plan) -> bool {
        self.policy.settings.on_missing == OnMissing::Fail && !plan.missing.is_empty()
    }

    /// Carries out a plan: journal first, then each step, re-checking the
    /// current value right before writing. A step the kernel rejects is
    /// reported and does not stop the others.
    /// Checks the originals journal as `apply` opens it (a journal of another
    /// cgroup root is refused), writing nothing: `apply` refuses what it
    /// finds there before it refuses a plan that builds no group.
    pub fn check_journal(&self) -> Result<(), crate::kernel::Error> {
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
    /// shared with its writer lanes: issue 24's IRQ watcher).
    pub fn apply_journalled(
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
                        // "missing" only when loading failed (SPEC §4); with
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

    fn apply_step(
        &self,
        step: &Step,
        journal: &mut Journal,
        created: &mut Vec<PathBuf>,
    ) -> Result<bool, StepError> {
        match step {
            Step::Mkdir { path } => {
                if self.root.is_dir(path) {
                    return Ok(false);
                }
                journal
                    .record(Entry::Mkdir { path: path.clone() })
                    .map_err(StepError::Journal)?;
                let rel = path
                    .strip_prefix(self.cg.base())
                    .map(|p| p.to_string_lossy().into_owned())
                    .map_err(|_| {
                        crate::kernel::Error::other(path.clone(), "not below the cgroup root")
                    })?;
                self.cg.mkdir(&rel)?;
                created.push(path.clone());
                Ok(true)
            }
            Step::Write {
                path, value, form, ..
            } => {
                let current = if zram::device_of(path).is_some() {
                    // zram's write-only mem_limit is read through mm_stat.
                    zram::current(&self.root, path)?
                } else if self.root.exists(path) {
                    Some(self.root.read(path)?)
                } else {
                    None
                };
                if let Some(cur) = &current {
                    if normalize::same(*form, cur, value) {
                        return Ok(false);
                    }
                }
                let inside_created = created.iter().any(|d| path.starts_with(d));
                let was_invalid = *form == Form::Partition
                    && current
                        .as_deref()
                        .and_then(normalize::partition_invalid)
                        .is_some();
                if !inside_created {
                    match current {
                        Some(content) => journal
                            .record(Entry::File {
                                path: path.clone(),
                                content,
                            })
                            .map_err(StepError::Journal)?,
                        None => journal
                            .record(Entry::Absent { path: path.clone() })
                            .map_err(StepError::Journal)?,
                    }
                }
                if was_invalid && value.trim() != "member" {
                    // 6.1 keeps an invalid partition invalid when its own type is
                    // written again, even once the conflict is gone; only a pass
                    // through `member` makes the kernel check it anew.
                    self.root.write(path, "member")?;
                }
                self.root.write(path, value)?;
                if *form == Form::Partition {
                    check_partition(&self.root, path, value)?;
                }
                Ok(true)
            }
            Step::Trigger { path, value, saves } => {
                // Never read the trigger itself (EACCES: mode 0200); journal
                // what it destroys, then fire it.
                for p in saves {
                    if let Some(content) = zram::current(&self.root, p)? {
                        journal
                            .record(Entry::File {
                                path: p.clone(),
                                content,
                            })
                            .map_err(StepError::Journal)?;
                    }
                }
                self.root.write(path, value)?;
                Ok(true)
            }
            Step::Modprobe { module } => {
                zram::modprobe(module)?;
                if module == zram::MODULE && !zram::module_loaded(&self.root) {
                    return Err(StepError::Kernel(crate::kernel::Error::other(
                        zram::CONTROL_DIR,
                        format!(
                            "`modprobe {module}` succeeded but {} did not appear",
                            zram::CONTROL_DIR
                        ),
                    )));
                }
                Ok(true)
            }
            Step::ZramHotAdd { device } => {
                if zram::exists(&self.root, device) {
                    // Created meanwhile (by modprobe with num_devices > 1).
                    return Ok(false);
                }
                let got = zram::hot_add(&self.root)?;
                journal
                    .record(Entry::ZramHotAdd {
                        device: got.clone(),
                    })
                    .map_err(StepError::Journal)?;
                if &got != device {
                    return Err(StepError::Kernel(crate::kernel::Error::other(
                        zram::HOT_ADD,
                        format!("hot_add created {got}, not {device}; name the device {got} in the policy"),
                    )));
                }
                Ok(true)
            }
            Step::Mkswap { device, size } => {
                journal
                    .record(Entry::ZramInit {
                        device: device.clone(),
                    })
                    .map_err(StepError::Journal)?;
                zram::write_swap_header(&zram::dev_node(device), *size)?;
                Ok(true)
            }
            Step::Swapon { device, priority } => {
                let node = zram::dev_node(device);
                journal
                    .record(Entry::Swapon { path: node.clone() })
                    .map_err(StepError::Journal)?;
                zram::swapon(&node, *priority)?;
                Ok(true)
            }
            Step::Move { pid, procs, .. } => {
                let rel = procs
                    .parent()
                    .and_then(|d| d.strip_prefix(self.cg.base()).ok())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                self.cg.move_pid(&rel, *pid)?;
                Ok(true)
            }
            Step::Kthread {
                pid,
                comm,
                sched: s,
                cpus,
            } => {
                use crate::kernel::irq;
                if !irq::is_kthread(&self.root, *pid, comm) {
                    return Ok(false);
                }
                let sched_now =
                    irq::sched_text(&self.root, *pid)?.unwrap_or_else(|| "other 0".into());
                let cpus_now = irq::affinity(&self.root, *pid)?.unwrap_or_default();
                journal
                    .record(Entry::Kthread {
                        pid: *pid,
                        comm: comm.clone(),
                        sched: sched_now,
                        cpus: cpus_now,
                    })
                    .map_err(StepError::Journal)?;
                if let Some(s) = s {
                    sched::apply(*pid, &sched_spec(s))?;
                }
                if let Some(c) = cpus {
                    irq::set_affinity(&self.root, *pid, &c.iter().collect::<Vec<_>>())?;
                }
                Ok(true)
            }
            Step::Sched { pid, sched: s, .. } => {
                let spec = sched_spec(s);
                let mut any = false;
                for tid in procfs::threads(&self.root, *pid) {
                    match sched::apply(tid, &spec) {
                        Ok(()) => any = true,
                        Err(e) if e.errno() == Some(libc::ESRCH) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(any)
            }
            Step::Task(ch) => {
                let t = tuning::Tuner::new(self.root.clone(), self.policy);
                // The original first, as for every other write.
                t.journal(std::slice::from_ref(ch)).map_err(|e| {
                    StepError::Journal(crate::kernel::Error::other(
                        tuning::journal::path(&self.policy.settings.state_dir),
                        e,
                    ))
                })?;
                t.make(ch)?;
                Ok(true)
            }
        }
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
pub fn sched_matches(root: &Root, pid: i32, s: &Sched) -> bool {
    match sched::current_attr(root, pid) {
        Ok(Some(cur)) => sched::attr_matches(&cur, &sched_spec(s)),
        _ => false,
    }
}

/// A placement rule's `sched:` in the kernel layer's terms.
pub fn sched_spec(s: &Sched) -> sched::SchedSpec {
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
