//! Planning the system baseline: sysctls, zram swap, cpufreq floors and
//! governor tunables, devfreq, the realtime switch and the PM QoS latency
//! request, each step read against the current state.

use super::{Converger, Plan, Step};
use crate::kernel::wait::page_size;
use crate::kernel::{cpufreq, pm_qos, realtime, zram};
use crate::knobs::normalize::{self, Form};
use crate::knobs::order::in_write_order;
use crate::knobs::{CpufreqAttr, Knob, KnobValue, ZramAttr};
use std::collections::HashMap;
use std::path::Path;

impl Converger<'_> {
    /// Write steps for knobs that depend on each other (a cpufreq policy's
    /// or devfreq device's min and max), in the order [`in_write_order`] gives
    /// against what the kernel holds now: the daemon's rule too.
    fn ordered_steps(&self, plan: &mut Plan, writes: Vec<(Knob, KnobValue)>) {
        let files = self.files();
        for (knob, value) in in_write_order(writes, |k| files.read(k)) {
            match files.target(&knob, &value) {
                Ok((path, text)) => self.write_step(plan, path, text, Form::Text, true),
                Err(e) => plan.missing.push(e),
            }
        }
    }

    /// Write steps for baseline knobs their families plan alone: what the
    /// board cannot take is missing (once), the rest in write order.
    fn plan_knobs(&self, plan: &mut Plan, knobs: Vec<(Knob, KnobValue)>) {
        let files = self.files();
        let mut writes = Vec::new();
        for (knob, value) in knobs {
            match files.unavailable(&knob, &value) {
                Some(why) if !plan.missing.contains(&why) => plan.missing.push(why),
                Some(_) => {}
                None => writes.push((knob, value)),
            }
        }
        self.ordered_steps(plan, writes);
    }

    pub(super) fn plan_sysctls(&self, plan: &mut Plan) {
        let knobs = crate::knobs::sysctl::baseline_knobs(&self.policy.system.sysctl);
        self.plan_knobs(plan, knobs);
    }

    pub(super) fn plan_zram(&self, plan: &mut Plan) {
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
        // `size: 50%` is a share of this board's RAM.
        let mem_total = crate::kernel::meminfo::mem_total(&self.root);
        for z in wanted {
            let dev = &z.device;
            let Some(size) = z.size.bytes(mem_total.as_ref().ok().copied().flatten()) else {
                let why = match &mem_total {
                    Err(e) => e.to_string(),
                    Ok(_) => format!("{} has no MemTotal line", crate::kernel::meminfo::MEMINFO),
                };
                plan.missing.push(format!(
                    "zram {dev}: size {} cannot be resolved: {why}",
                    z.size
                ));
                continue;
            };
            if size == 0 {
                plan.missing.push(format!(
                    "zram {dev}: size {} is less than 1 MiB on this board; not set up",
                    z.size
                ));
                continue;
            }
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
            let limit = z.mem_limit.map(|l| {
                let knob = Knob::Zram {
                    device: dev.clone(),
                    attr: ZramAttr::MemLimit,
                };
                self.files().target(&knob, &KnobValue::Size(l))
            });
            match limit {
                None => {}
                Some(Err(e)) => plan.missing.push(format!("zram {dev}: {e}")),
                Some(Ok((limit_path, value))) => {
                    // mem_limit is write-only (0200); its value comes from mm_stat.
                    let cur_limit = if present {
                        zram::current(&self.root, &limit_path).ok().flatten()
                    } else {
                        None
                    };
                    // The reset zeroes mem_limit: then it is written even if it matched.
                    let same = cur_limit
                        .as_deref()
                        .is_some_and(|c| normalize::same(Form::Size, c, &value, page_size()));
                    if reset || !same {
                        plan.steps.push(Step::Write {
                            path: limit_path,
                            value,
                            form: Form::Size,
                            was: cur_limit.map(|c| normalize::display(Form::Size, &c)),
                        });
                    }
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

    pub(super) fn plan_cpufreq(&self, plan: &mut Plan) {
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
            let knob = |attr| Knob::Cpufreq {
                policy: p.clone(),
                attr,
            };
            if let Some(list) = &c.governor {
                let list = KnobValue::Word(list.clone());
                match self.files().target(&knob(CpufreqAttr::Governor), &list) {
                    Err(e) => plan.missing.push(e),
                    Ok((path, gov)) => {
                        self.write_step(plan, path, gov.clone(), Form::Text, true);
                        governor = Some(gov);
                    }
                }
            }
            let bounds = [(CpufreqAttr::Min, c.min), (CpufreqAttr::Max, c.max)]
                .into_iter()
                .filter_map(|(attr, f)| Some((knob(attr), KnobValue::Frequency(f?))))
                .collect();
            self.ordered_steps(plan, bounds);
            self.plan_governor_tunables(plan, c, running.as_deref(), governor.as_deref());
        }
    }

    /// `system.devfreq`: each device's knobs in the order its family gives
    /// them (the governor first), the floor and ceiling in the order the
    /// kernel accepts.
    pub(super) fn plan_devfreq(&self, plan: &mut Plan) {
        for d in &self.policy.system.devfreq {
            self.plan_knobs(plan, d.knobs());
        }
    }

    /// The governor tunables of one policy, after its governor: in
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
        // The tunables go into the directory of the governor the plan leaves
        // running, which a switch has not created yet.
        let planned = HashMap::from([(p.clone(), gov.to_string())]);
        let files = self.files_under(&planned);
        for (attr, us) in &c.tunables {
            let knob = Knob::Cpufreq {
                policy: p.clone(),
                attr: *attr,
            };
            let value = KnobValue::Int(i64::try_from(*us).unwrap_or(i64::MAX));
            if crate::knobs::cpufreq::WITHOUT_TUNABLES.contains(&gov) {
                plan.missing.push(format!(
                    "cpufreq {p}: governor `{gov}` has no tunables ({} cannot be set)",
                    attr.file_name()
                ));
                continue;
            }
            match files.target(&knob, &value) {
                Ok((path, value)) if switching => plan.steps.push(Step::Write {
                    path,
                    value,
                    form: Form::Text,
                    was: None,
                }),
                Ok((path, value)) => self.write_step(plan, path, value, Form::Text, true),
                Err(_) => plan.missing.push(format!(
                    "cpufreq {p}: governor `{gov}` has no {} ({} does not exist)",
                    attr.file_name(),
                    files.read_path(&knob).display()
                )),
            }
        }
    }

    pub(super) fn plan_realtime(&self, plan: &mut Plan) {
        let Some(rt) = &self.policy.system.realtime else {
            return;
        };
        if let Some(cpus) = &rt.housekeeping_cpus {
            let list: Vec<u32> = cpus.iter().collect();
            match realtime::irqs(&self.root) {
                Ok(irqs) => {
                    // `system.irqs` places its IRQs itself.
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
            let value = KnobValue::Word(if tm { "1" } else { "0" }.to_string());
            let knob = Knob::Sysctl("kernel.timer_migration".to_string());
            self.plan_knobs(plan, vec![(knob, value)]);
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
    pub(super) fn plan_latency(&self, plan: &mut Plan) {
        let Some(l) = &self.policy.system.latency else {
            return;
        };
        let cpus = l.knobs().into_iter().filter(|(k, _)| !k.held_by_daemon());
        self.plan_knobs(plan, cpus.collect());
        if let Some(us) = l.global {
            plan.warnings.push(format!(
                "latency.global {us}us is held only by the daemon (`cgwarden run`): the kernel drops a CPU latency request when its file descriptor closes, so {} is not written here",
                pm_qos::CPU_DMA_LATENCY
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Converger, Step};
    use crate::kernel::Root;

    /// The files `plan` writes, in order, for policy4 and the GPU at
    /// `want` (kHz and Hz: floor, ceiling) on a tree where they hold `now`.
    fn planned(want: [u64; 4], now: [u64; 4]) -> Vec<String> {
        let t = tempfile::tempdir().expect("tempdir");
        let root = Root::fake(t.path());
        let files = [
            "/sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq",
            "/sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq",
            "/sys/class/devfreq/gpu/min_freq",
            "/sys/class/devfreq/gpu/max_freq",
        ];
        for (path, value) in files.iter().zip(now) {
            let path = std::path::Path::new(path);
            root.mkdir_all(path.parent().expect("parent"))
                .expect("mkdir");
            root.write(path, &value.to_string()).expect("write");
        }
        let [cmin, cmax, dmin, dmax] = want;
        let yaml = format!(
            "version: 1\nsystem:\n  cpufreq:\n    policy4: {{ min: {cmin}kHz, max: {cmax}kHz }}\n  devfreq:\n    gpu: {{ min: {dmin}Hz, max: {dmax}Hz }}\n"
        );
        let policy =
            crate::policy::load_bytes("t.yaml", yaml.as_bytes()).unwrap_or_else(|d| panic!("{d}"));
        let plan = Converger::new(root, &policy).plan();
        plan.steps
            .iter()
            .filter_map(|s| match s {
                Step::Write { path, .. } => path.file_name().map(|f| f.to_string_lossy().into()),
                _ => None,
            })
            .collect()
    }

    /// A floor above the ceiling there is now waits for the ceiling, for
    /// cpufreq and devfreq alike (`knobs::order`, the daemon's rule too).
    #[test]
    fn a_ceiling_goes_up_before_a_floor_above_it() {
        let want = [2_000_000, 2_400_000, 600_000_000, 900_000_000];
        let now = [300_000, 1_500_000, 100_000_000, 500_000_000];
        assert_eq!(
            planned(want, now),
            [
                "scaling_max_freq",
                "scaling_min_freq",
                "max_freq",
                "min_freq"
            ]
        );
    }

    #[test]
    fn a_floor_comes_down_before_a_lower_ceiling() {
        let want = [300_000, 1_000_000, 100_000_000, 200_000_000];
        let now = [1_800_000, 2_400_000, 600_000_000, 900_000_000];
        assert_eq!(
            planned(want, now),
            [
                "scaling_min_freq",
                "scaling_max_freq",
                "min_freq",
                "max_freq"
            ]
        );
    }
}
