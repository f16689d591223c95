//! Planning the system baseline: sysctls, zram swap, cpufreq floors and
//! governor tunables, devfreq, the realtime switch and the PM QoS latency
//! request, each step read against the current state.

use super::{Converger, Plan, Step};
use crate::kernel::wait::page_size;
use crate::kernel::{cpufreq, pm_qos, realtime, zram};
use crate::knobs::normalize::{self, Form};
use crate::knobs::sysctl;
use crate::knobs::{Knob, KnobValue};
use std::path::Path;

impl Converger<'_> {
    pub(super) fn plan_sysctls(&self, plan: &mut Plan) {
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
    pub(super) fn plan_devfreq(&self, plan: &mut Plan) {
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

    pub(super) fn plan_realtime(&self, plan: &mut Plan) {
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
    pub(super) fn plan_latency(&self, plan: &mut Plan) {
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
}
