//! `system:`: the baseline (sysctls, zram, cpufreq, devfreq, the realtime
//! switch, PM QoS latency).

use super::{describe, is_numbered, knob_error_text, Decoder};
use crate::knobs::{Knob, KnobValue};
use crate::policy::model::*;
use crate::policy::yaml::{Node, Value};
use crate::units::{CpuList, Frequency, Size};

impl<'a> Decoder<'a> {
    /// `system.devfreq`: per device `governor`, `min`, `max`,
    /// each checked with its knob's grammar.
    fn devfreq(&mut self, n: &Node) -> Vec<Devfreq> {
        let mut out = Vec::new();
        for (k, v) in self.named_map(n, "system.devfreq") {
            let what = format!("devfreq.{}", k.name);
            if let Err(e) = Knob::parse(&format!("{what}.max")) {
                self.err(k.pos, format!("system.devfreq: {}", knob_error_text(&e)));
                continue;
            }
            let Some(c) = self.fields(v, &what, &["governor", "min", "max"]) else {
                continue;
            };
            let mut d = Devfreq {
                device: k.name.clone(),
                ..Devfreq::default()
            };
            for attr in ["governor", "min", "max"] {
                let Some(node) = c.get(attr) else { continue };
                let text = match &node.value {
                    Value::Str(s) => s.clone(),
                    Value::Int(i) => i.to_string(),
                    _ => {
                        self.err(
                            node.pos,
                            format!("{what}.{attr} must be a value, found {}", describe(node)),
                        );
                        continue;
                    }
                };
                let parsed = Knob::parse(&format!("{what}.{attr}")).map(|k| k.parse_value(&text));
                match parsed {
                    Ok(Ok(KnobValue::Word(g))) => d.governor = Some(g),
                    Ok(Ok(KnobValue::Hz(hz))) if attr == "min" => d.min = Some(hz),
                    Ok(Ok(KnobValue::Hz(hz))) => d.max = Some(hz),
                    Ok(Err(e)) => self.err(node.pos, format!("{what}.{attr}: {e}")),
                    _ => self.err(node.pos, format!("{what}.{attr}: invalid value `{text}`")),
                }
            }
            if let (Some(lo), Some(hi)) = (d.min, d.max) {
                if lo > hi {
                    self.err(
                        k.pos,
                        format!(
                            "{what}.min {} is greater than max {}",
                            KnobValue::Hz(lo),
                            KnobValue::Hz(hi)
                        ),
                    );
                }
            }
            out.push(d);
        }
        out
    }

    pub(super) fn system(&mut self, node: &Node) -> System {
        let mut sys = System::default();
        let Some(f) = self.fields(
            node,
            "system",
            &[
                "sysctl", "zram", "cpufreq", "realtime", "latency", "devfreq", "irqs", "kthreads",
            ],
        ) else {
            return sys;
        };
        if let Some(n) = f.get("devfreq") {
            sys.devfreq = self.devfreq(n);
        }
        if let Some(n) = f.get("irqs") {
            sys.irqs = self.thread_rules(n, "system.irqs");
        }
        if let Some(n) = f.get("kthreads") {
            sys.kthreads = self.thread_rules(n, "system.kthreads");
        }
        if let Some(n) = f.get("sysctl") {
            for (k, v) in self.named_map(n, "system.sysctl") {
                if let Err(e) = Knob::parse(&format!("sysctl.{}", k.name)) {
                    self.err(
                        k.pos,
                        format!("sysctl `{}`: {}", k.name, knob_error_text(&e)),
                    );
                    continue;
                }
                let value = match &v.value {
                    Value::Int(i) => Some(i.to_string()),
                    Value::Str(s)
                        if !s.trim().is_empty()
                            && s.split_whitespace().all(|w| w.parse::<i64>().is_ok()) =>
                    {
                        Some(s.split_whitespace().collect::<Vec<_>>().join(" "))
                    }
                    _ => None,
                };
                // A sysctl with a kernel range takes one integer in it.
                if let (Some(val), Some((min, max))) = (&value, crate::knobs::sysctl_range(&k.name))
                {
                    if val
                        .parse::<i64>()
                        .map_or(true, |n| !(min..=max).contains(&n))
                    {
                        self.err(
                            v.pos,
                            format!(
                                "sysctl `{}` must be a whole number from {min} to {max}, found {}",
                                k.name,
                                describe(v)
                            ),
                        );
                        continue;
                    }
                }
                match value {
                    Some(val) => sys.sysctl.push((k.name.clone(), val)),
                    None => self.err(v.pos, format!("sysctl `{}` must be an integer (or integers separated by spaces), found {}", k.name, describe(v))),
                }
            }
        }
        if let Some(n) = f.get("zram") {
            for (k, v) in self.named_map(n, "system.zram") {
                if !is_numbered(&k.name, "zram") {
                    self.err(
                        k.pos,
                        format!("zram device `{}` must be named zramN", k.name),
                    );
                    continue;
                }
                let what = format!("zram.{}", k.name);
                let Some(z) = self.fields(
                    v,
                    &what,
                    &["algorithm", "size", "swap_priority", "mem_limit"],
                ) else {
                    continue;
                };
                let algorithm = self.opt_text(&z, "algorithm", &format!("{what}.algorithm"));
                if let (Some(a), Some(n)) = (&algorithm, z.get("algorithm")) {
                    if a.is_empty()
                        || !a
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    {
                        self.err(n.pos, format!("{what}.algorithm `{a}` is not a compressor name (e.g. lz4, zstd, lzo-rle)"));
                    }
                }
                let size = match z.get("size") {
                    Some(n) => self.unit(n, &format!("{what}.size"), ZramSize::parse),
                    None => {
                        self.err(k.pos, format!("{what} needs `size:`"));
                        None
                    }
                };
                if let (Some(ZramSize::Bytes(0)), Some(n)) = (size, z.get("size")) {
                    self.err(
                        n.pos,
                        format!(
                            "{what}.size must be more than 0 (the kernel refuses a 0 disksize)"
                        ),
                    );
                }
                let swap_priority = z
                    .get("swap_priority")
                    .and_then(|n| self.int(n, &format!("{what}.swap_priority"), -1, 32767))
                    .map(|v| v as i32);
                let mem_limit = z
                    .get("mem_limit")
                    .and_then(|n| self.unit(n, &format!("{what}.mem_limit"), Size::parse));
                if let Some(size) = size {
                    sys.zram.push(Zram {
                        device: k.name.clone(),
                        algorithm,
                        size,
                        swap_priority,
                        mem_limit,
                    });
                }
            }
        }
        if let Some(n) = f.get("cpufreq") {
            for (k, v) in self.named_map(n, "system.cpufreq") {
                if !is_numbered(&k.name, "policy") {
                    self.err(k.pos, format!("cpufreq policy `{}` must be named policyN (as in /sys/devices/system/cpu/cpufreq)", k.name));
                    continue;
                }
                let what = format!("cpufreq.{}", k.name);
                let Some(c) = self.fields(
                    v,
                    &what,
                    &[
                        "governor",
                        "min",
                        "max",
                        "rate_limit_us",
                        "up_rate_limit_us",
                        "down_rate_limit_us",
                    ],
                ) else {
                    continue;
                };
                let mut governor = self.opt_text(&c, "governor", &format!("{what}.governor"));
                if let (Some(g), Some(n)) = (&governor, c.get("governor")) {
                    // One name or a fallback list, the knob's grammar.
                    let knob = Knob::parse(&format!("{what}.governor"));
                    match knob.map(|k| k.parse_value(g)) {
                        Ok(Ok(KnobValue::Word(list))) => governor = Some(list),
                        _ => self.err(
                            n.pos,
                            format!("{what}.governor `{g}` is not a governor name or a fallback list like `schedutil|ondemand`"),
                        ),
                    }
                }
                let mut tunables = Vec::new();
                for attr in crate::knobs::cpufreq::TUNABLES {
                    if let Some(n) = c.get(attr.name()) {
                        let max = crate::knobs::cpufreq::RATE_LIMIT_MAX_US;
                        if let Some(us) = self.int(n, &format!("{what}.{}", attr.name()), 0, max) {
                            tunables.push((attr, us as u64));
                        }
                    }
                }
                let min = c
                    .get("min")
                    .and_then(|n| self.unit(n, &format!("{what}.min"), Frequency::parse));
                let max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{what}.max"), Frequency::parse));
                if let (Some(lo), Some(hi), Some(n)) = (&min, &max, c.get("min")) {
                    if lo.khz() > hi.khz() {
                        self.err(n.pos, format!("{what}.min {lo} is greater than max {hi}"));
                    }
                }
                sys.cpufreq.push(Cpufreq {
                    policy: k.name.clone(),
                    governor,
                    min,
                    max,
                    tunables,
                });
            }
        }
        if let Some(n) = f.get("realtime") {
            if let Some(r) = self.fields(
                n,
                "system.realtime",
                &[
                    "housekeeping_cpus",
                    "timer_migration",
                    "cpuidle_disable",
                    "rcu_expedited",
                ],
            ) {
                let mut rt = Realtime {
                    housekeeping_cpus: r
                        .get("housekeeping_cpus")
                        .and_then(|n| self.unit(n, "realtime.housekeeping_cpus", CpuList::parse)),
                    timer_migration: r
                        .get("timer_migration")
                        .and_then(|n| self.bool(n, "realtime.timer_migration")),
                    cpuidle_disable: None,
                    rcu_expedited: r
                        .get("rcu_expedited")
                        .and_then(|n| self.bool(n, "realtime.rcu_expedited")),
                };
                if let Some(c) = r.get("cpuidle_disable") {
                    if let Some(cf) =
                        self.fields(c, "realtime.cpuidle_disable", &["cpus", "deeper_than"])
                    {
                        let cpus = match cf.get("cpus") {
                            Some(n) => {
                                self.unit(n, "realtime.cpuidle_disable.cpus", CpuList::parse)
                            }
                            None => {
                                self.err(c.pos, "realtime.cpuidle_disable needs `cpus:`");
                                None
                            }
                        };
                        let deeper_than = cf
                            .get("deeper_than")
                            .and_then(|n| {
                                self.int(n, "realtime.cpuidle_disable.deeper_than", 0, 64)
                            })
                            .unwrap_or(0) as u32;
                        rt.cpuidle_disable = cpus.map(|cpus| CpuidleDisable { cpus, deeper_than });
                    }
                }
                sys.realtime = Some(rt);
            }
        }
        if let Some(n) = f.get("latency") {
            sys.latency = self.latency(n);
        }
        sys
    }

    /// `system.latency: { cpus: {"7": 0us}, global: 100us }` (PM QoS).
    fn latency(&mut self, node: &Node) -> Option<Latency> {
        let f = self.fields(node, "system.latency", &["cpus", "global"])?;
        let us = |text: &str| match Knob::LatencyGlobal.parse_value(text) {
            Ok(crate::knobs::KnobValue::Latency(Some(us))) => Ok(us),
            Ok(_) => Err("expected microseconds".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let mut lat = Latency {
            cpus: Vec::new(),
            global: f
                .get("global")
                .and_then(|n| self.unit(n, "latency.global", us)),
        };
        if let Some(c) = f.get("cpus") {
            for (k, v) in self.named_map(c, "system.latency.cpus") {
                let cpus = match CpuList::parse(&k.name) {
                    Ok(l) => l,
                    Err(e) => {
                        self.err(k.pos, format!("system.latency.cpus: `{}`: {e}", k.name));
                        continue;
                    }
                };
                if let Some(v) = self.unit(v, &format!("latency.cpus.{}", k.name), us) {
                    for cpu in cpus.iter() {
                        if lat.cpus.iter().any(|(c, _)| *c == cpu) {
                            self.err(
                                k.pos,
                                format!("system.latency.cpus: CPU {cpu} is named twice"),
                            );
                        } else {
                            lat.cpus.push((cpu, v));
                        }
                    }
                }
            }
        }
        Some(lat)
    }
}
