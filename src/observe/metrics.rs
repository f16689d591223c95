//! The OpenMetrics exposition: names, units, labels and
//! values, built at scrape time from the groups' kernel files (read now,
//! through `src/kernel`) and the engine view the daemon published
//! ([`super::state`]).
//!
//! Encoding is `prometheus-client`'s (the Prometheus project's Rust client):
//! its `Collector` trait lets one scrape encode values read at that moment,
//! without keeping a registry of metric objects alive between scrapes — so
//! a group or rule removed by a reload simply stops being encoded, and no
//! label set can grow unbounded. Labels name only policy groups, rules,
//! knobs and hooks, and closed sets (`event`, `result`).
//!
//! Two renderings: OpenMetrics 1.0 (what Prometheus asks for), and the
//! Prometheus text format 0.0.4 derived from it ([`to_prometheus_text`])
//! for clients that do not ask for OpenMetrics and for node_exporter's
//! textfile collector, which parses only 0.0.4.

use super::sample::{GroupSample, Limit, RESOURCES};
use super::state::EngineView;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::borrow::Cow;
use std::fmt::Error as FmtError;
use std::sync::Arc;

/// The OpenMetrics content type.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format's content type.
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The `memory.events` keys exported (a closed set: a future kernel's new
/// key does not become a label by surprise).
const MEMORY_EVENTS: [&str; 6] = ["low", "high", "max", "oom", "oom_kill", "oom_group_kill"];

/// The daemon's own cost, read from `/proc/self` at scrape time.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OwnCost {
    pub(crate) rss_bytes: Option<u64>,
    pub(crate) cpu_seconds: Option<f64>,
    pub(crate) fds: Option<u64>,
}

impl OwnCost {
    pub(crate) fn read() -> OwnCost {
        use crate::kernel::selfproc;
        OwnCost {
            rss_bytes: selfproc::memory_kib().0.map(|k| k.saturating_mul(1024)),
            cpu_seconds: selfproc::cpu_seconds(),
            fds: selfproc::open_fds(),
        }
    }
}

/// Everything one scrape encodes.
#[derive(Debug)]
struct Scrape {
    view: Arc<EngineView>,
    groups: Vec<GroupSample>,
    own: OwnCost,
}

/// Renders one OpenMetrics exposition (ends with `# EOF`).
pub(crate) fn render(view: Arc<EngineView>, groups: Vec<GroupSample>, own: OwnCost) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape { view, groups, own }));
    let mut out = String::with_capacity(16 * 1024);
    // Writing into a String cannot fail; an encoder error would be a bug in
    // the label set, answered with what was encoded so far.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::warn!("metrics: encoding stopped: {e}");
    }
    out
}

type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;
/// A histogram's (sum, count, per-bucket (upper bound, count)).
type HistogramValue = (f64, u64, Vec<(f64, u64)>);

/// A family of samples of one metric.
struct Family<'e, 'w> {
    enc: &'e mut DescriptorEncoder<'w>,
}

impl<'e, 'w> Family<'e, 'w> {
    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: &[(Labels<'_>, f64)],
    ) -> Result<(), FmtError> {
        let mut m = self
            .enc
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        for (labels, v) in samples {
            if labels.is_empty() {
                m.encode_counter::<NoLabelSet, _, f64>(v, None)?;
            } else {
                m.encode_family(labels)?
                    .encode_counter::<NoLabelSet, _, f64>(v, None)?;
            }
        }
        Ok(())
    }

    fn counter_u64(
        &mut self,
        name: &str,
        help: &str,
        samples: &[(Labels<'_>, u64)],
    ) -> Result<(), FmtError> {
        let mut m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, v) in samples {
            if labels.is_empty() {
                m.encode_counter::<NoLabelSet, _, f64>(v, None)?;
            } else {
                m.encode_family(labels)?
                    .encode_counter::<NoLabelSet, _, f64>(v, None)?;
            }
        }
        Ok(())
    }

    fn gauge(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: &[(Labels<'_>, f64)],
    ) -> Result<(), FmtError> {
        let mut m = self
            .enc
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        for (labels, v) in samples {
            // Whole numbers as integers (`4096`, not `4096.0`).
            let whole = (v.fract() == 0.0 && v.abs() < 9e15).then_some(*v as i64);
            match (labels.is_empty(), whole) {
                (true, Some(i)) => m.encode_gauge(&i)?,
                (true, None) => m.encode_gauge(v)?,
                (false, Some(i)) => m.encode_family(labels)?.encode_gauge(&i)?,
                (false, None) => m.encode_family(labels)?.encode_gauge(v)?,
            }
        }
        Ok(())
    }

    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        samples: &[(Labels<'_>, HistogramValue)],
    ) -> Result<(), FmtError> {
        let mut m =
            self.enc
                .encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
        for (labels, (sum, count, buckets)) in samples {
            if labels.is_empty() {
                m.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
            } else {
                m.encode_family(labels)?
                    .encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
            }
        }
        Ok(())
    }

    fn info(&mut self, name: &str, help: &str, labels: &Labels<'_>) -> Result<(), FmtError> {
        let mut m = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Info)?;
        m.encode_info(labels)
    }
}

/// A limit as a sample: `max` has none (prometheus-client cannot encode
/// +Inf, and an absent series reads as "no limit" in PromQL: `current /
/// high` is then empty rather than 0).
fn limit(l: Option<Limit>) -> Option<f64> {
    match l? {
        Limit::Bytes(b) => Some(b as f64),
        Limit::Max => None,
    }
}

/// A label value as the text format needs it: `\`, `"` and newlines
/// escaped (prometheus-client writes label values as given).
fn esc(v: &str) -> Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), FmtError> {
        let v = &self.view;
        let mut f = Family { enc: &mut enc };
        // ---- identity ----
        f.info(
            "cgwarden_build",
            "cgwarden's version.",
            &vec![("version", Cow::Borrowed(env!("CARGO_PKG_VERSION")))],
        )?;
        f.info(
            "cgwarden_policy",
            "The policy in force: its product and the sha256 of its file.",
            &vec![("product", esc(&v.product)), ("hash", esc(&v.policy_hash))],
        )?;
        let d = &v.device;
        f.info(
            "cgwarden_device",
            "Which device this is: the policy's product, host name, machine id, board model (device tree or DMI) and kernel release.",
            &vec![
                ("product", esc(&v.product)),
                ("hostname", esc(&d.hostname)),
                ("machine_id", esc(&d.machine_id)),
                ("model", esc(&d.model)),
                ("kernel", esc(&d.kernel)),
            ],
        )?;
        f.gauge(
            "cgwarden_config_last_reload_successful",
            "Whether the last policy (re)load succeeded (1) or was refused (0).",
            None,
            &[(vec![], if v.reload_ok { 1.0 } else { 0.0 })],
        )?;
        f.gauge(
            "cgwarden_config_last_reload_success_timestamp",
            "When the policy in force was loaded (Unix time).",
            Some(Unit::Seconds),
            &[(vec![], v.reload_success)],
        )?;
        // ---- per group: pressure, memory, memory events ----
        for (ri, r) in RESOURCES.iter().enumerate() {
            // PSI `some`: at least one task stalled; `full`: all non-idle
            // tasks at once (each HELP says which).
            for (full, word, help, who) in [
                (false, "waiting", "some", "some tasks"),
                (true, "stalled", "full", "all non-idle tasks at once"),
            ] {
                let samples: Vec<(Labels, f64)> = self
                    .groups
                    .iter()
                    .filter_map(|g| {
                        let l = g.line(ri, full)?;
                        Some((vec![("group", esc(&g.name))], l.total_us as f64 / 1e6))
                    })
                    .collect();
                f.counter(
                    &format!("cgwarden_cgroup_pressure_{r}_{word}"),
                    &format!("Time {who} of the group were stalled on {r} (PSI `{help}` total)."),
                    Some(Unit::Seconds),
                    &samples,
                )?;
            }
        }
        let bytes = |get: &dyn Fn(&GroupSample) -> Option<f64>| -> Vec<(Labels, f64)> {
            self.groups
                .iter()
                .filter_map(|g| Some((vec![("group", esc(&g.name))], get(g)?)))
                .collect()
        };
        f.gauge(
            "cgwarden_cgroup_memory_current",
            "memory.current of the group.",
            Some(Unit::Bytes),
            &bytes(&|g| g.memory_current.map(|b| b as f64)),
        )?;
        f.gauge(
            "cgwarden_cgroup_memory_high",
            "memory.high of the group (no sample: max).",
            Some(Unit::Bytes),
            &bytes(&|g| limit(g.memory_high)),
        )?;
        f.gauge(
            "cgwarden_cgroup_memory_max",
            "memory.max of the group (no sample: max).",
            Some(Unit::Bytes),
            &bytes(&|g| limit(g.memory_max)),
        )?;
        let mut events: Vec<(Labels, u64)> = Vec::new();
        for g in &self.groups {
            for e in MEMORY_EVENTS {
                if let Some(n) = g.events.get(e) {
                    events.push((
                        vec![("group", esc(&g.name)), ("event", Cow::Borrowed(e))],
                        *n,
                    ));
                }
            }
        }
        f.counter_u64(
            "cgwarden_cgroup_memory_events",
            "memory.events counters of the group (since the group was created).",
            &events,
        )?;
        if let Some(m) = self.groups.iter().find_map(|g| g.mem.as_ref()) {
            memstat(&mut f, m)?;
        }
        // ---- rules and knobs ----
        let rules_active: Vec<(Labels, f64)> = v
            .rules
            .iter()
            .map(|r| {
                (
                    vec![("rule", esc(&r.name))],
                    if r.active { 1.0 } else { 0.0 },
                )
            })
            .collect();
        f.gauge(
            "cgwarden_rule_active",
            "Whether the rule is active (its claims held) now.",
            None,
            &rules_active,
        )?;
        let since: Vec<(Labels, f64)> = v
            .rules
            .iter()
            .filter_map(|r| Some((vec![("rule", esc(&r.name))], r.active_since?)))
            .collect();
        f.gauge(
            "cgwarden_rule_active_since_timestamp",
            "When the rule became active (Unix time); no sample while it is not active.",
            Some(Unit::Seconds),
            &since,
        )?;
        let bounds: Vec<(Labels, f64)> = v
            .rules
            .iter()
            .filter_map(|r| Some((vec![("rule", esc(&r.name))], r.max_active?)))
            .collect();
        f.gauge(
            "cgwarden_rule_max_active",
            "The policy's `max_active` of the rule: how long it is expected to stay active at most.",
            Some(Unit::Seconds),
            &bounds,
        )?;
        let fired: Vec<(Labels, u64)> = v
            .rules
            .iter()
            .map(|r| (vec![("rule", esc(&r.name))], r.fired))
            .collect();
        f.counter_u64(
            "cgwarden_rule_fired",
            "Times the rule became active since the daemon started.",
            &fired,
        )?;
        let values: Vec<(Labels, f64)> = v
            .knobs
            .iter()
            .filter_map(|k| Some((vec![("knob", esc(&k.name))], k.value?)))
            .collect();
        f.gauge(
            "cgwarden_knob_value",
            "The knob's effective value, for numeric knobs (no sample: max, or not a number).",
            None,
            &values,
        )?;
        let mut writes: Vec<(Labels, u64)> = Vec::new();
        for k in &v.knobs {
            writes.push((
                vec![("knob", esc(&k.name)), ("result", Cow::Borrowed("ok"))],
                k.ok,
            ));
            writes.push((
                vec![("knob", esc(&k.name)), ("result", Cow::Borrowed("failed"))],
                k.failed,
            ));
        }
        f.counter_u64(
            "cgwarden_knob_writes",
            "Writes of the knob the kernel took (ok) or refused (failed).",
            &writes,
        )?;
        let boosts: Vec<(Labels, u64)> = super::state::BOOST_RESULTS
            .iter()
            .map(|r| {
                let n = v.boosts.get(r).copied().unwrap_or(0);
                (vec![("result", Cow::Borrowed(*r))], n)
            })
            .collect();
        f.counter_u64(
            "cgwarden_boosts",
            "Boost requests and ends by result (granted, refused, expired, released, owner_gone).",
            &boosts,
        )?;
        let claims: Vec<(Labels, f64)> = ["rule", "boost"]
            .iter()
            .map(|o| {
                (
                    vec![("owner", Cow::Borrowed(*o))],
                    v.claims_live.get(o).copied().unwrap_or(0) as f64,
                )
            })
            .collect();
        f.gauge(
            "cgwarden_claims",
            "Live claims by owner kind.",
            None,
            &claims,
        )?;
        // What the kernel lets each cpufreq policy reach now.
        if !v.cpufreq_limits.is_empty() {
            let limit: Vec<(Labels, f64)> = v
                .cpufreq_limits
                .iter()
                .map(|(p, (khz, _))| {
                    (
                        vec![("policy", Cow::Borrowed(p.as_str()))],
                        *khz as f64 * 1000.0,
                    )
                })
                .collect();
            f.gauge(
                "cgwarden_cpufreq_limit_hertz",
                "The ceiling the kernel lets the cpufreq policy reach now (after thermal and QoS clipping).",
                None,
                &limit,
            )?;
            let throttled: Vec<(Labels, f64)> = v
                .cpufreq_limits
                .iter()
                .map(|(p, (_, t))| {
                    (
                        vec![("policy", Cow::Borrowed(p.as_str()))],
                        f64::from(u8::from(*t)),
                    )
                })
                .collect();
            f.gauge(
                "cgwarden_cpufreq_throttled",
                "1 while throttled(POLICY) holds.",
                None,
                &throttled,
            )?;
        }
        // settings.drift's findings, per knob. The family is
        // declared before the first drift (a fleet query names it; a series
        // per managed knob at 0 would multiply the fleet's series).
        let drifts: Vec<(Labels, u64)> = v
            .drifts
            .iter()
            .map(|(k, n)| (vec![("knob", Cow::Borrowed(k.as_str()))], *n))
            .collect();
        f.counter_u64(
            "cgwarden_drift",
            "Managed knobs found holding another value than the effective one (settings.drift).",
            &drifts,
        )?;
        // One episode per rising edge of throttled(POLICY).
        if !v.throttle_episodes.is_empty() {
            let episodes: Vec<(Labels, u64)> = v
                .throttle_episodes
                .iter()
                .map(|(p, n)| (vec![("policy", Cow::Borrowed(p.as_str()))], *n))
                .collect();
            f.counter_u64(
                "cgwarden_throttle_episodes",
                "Throttle episodes (rising edges of throttled(POLICY)) per cpufreq policy.",
                &episodes,
            )?;
        }
        // ---- hooks ----
        use std::sync::atomic::Ordering::Relaxed;
        let mut runs: Vec<(Labels, u64)> = Vec::new();
        let mut dropped: Vec<(Labels, u64)> = Vec::new();
        let mut durations = Vec::new();
        for h in &v.hooks {
            let c = &h.counters;
            let n = h.name.as_str();
            let hook = esc(n);
            let timed_out = c.timed_out.load(Relaxed);
            for (result, value) in [
                ("ok", c.succeeded.load(Relaxed)),
                (
                    "failed",
                    c.exited_nonzero.load(Relaxed).saturating_sub(timed_out),
                ),
                ("timed_out", timed_out),
                ("not_started", c.failed.load(Relaxed)),
            ] {
                runs.push((
                    vec![("hook", hook.clone()), ("result", Cow::Borrowed(result))],
                    value,
                ));
            }
            for (why, value) in [
                ("rate_limited", c.rate_limited.load(Relaxed)),
                ("at_capacity", c.at_capacity.load(Relaxed)),
                ("unpaired", c.unpaired.load(Relaxed)),
            ] {
                dropped.push((
                    vec![("hook", hook.clone()), ("reason", Cow::Borrowed(why))],
                    value,
                ));
            }
            durations.push((vec![("hook", hook)], c.duration.snapshot()));
        }
        f.counter_u64(
            "cgwarden_hook_runs",
            "Hook runs by result (ok, failed: non-zero exit, timed_out, not_started: spawn failed).",
            &runs,
        )?;
        f.counter_u64(
            "cgwarden_hook_calls_dropped",
            "Hook calls not run, by reason.",
            &dropped,
        )?;
        f.histogram(
            "cgwarden_hook_run_duration",
            "How long finished hook runs took.",
            &durations,
        )?;
        // ---- placement ----
        if let Some(x) = &v.exec {
            let c = &x.counters;
            let placed = c.placed.lock().map(|m| m.clone()).unwrap_or_default();
            let per_group: Vec<(Labels, u64)> = v
                .groups
                .iter()
                .map(|(g, _)| (vec![("group", esc(g))], placed.get(g).copied().unwrap_or(0)))
                .collect();
            f.counter_u64(
                "cgwarden_placements",
                "Processes moved into the group by placement rules.",
                &per_group,
            )?;
            f.counter_u64(
                "cgwarden_placement_misses",
                "Processes a safety-net /proc rescan had to place (exec events missed them).",
                &[(vec![], c.misses.load(Relaxed))],
            )?;
            f.counter_u64(
                "cgwarden_exec_events_lost",
                "Process-event losses seen (socket overruns, sequence gaps).",
                &[
                    (
                        vec![("cause", Cow::Borrowed("overrun"))],
                        c.overruns.load(Relaxed),
                    ),
                    (vec![("cause", Cow::Borrowed("gap"))], c.gaps.load(Relaxed)),
                ],
            )?;
            f.histogram(
                "cgwarden_exec_to_placed",
                "Exec event received to process moved.",
                &[(vec![], c.to_placed.histogram())],
            )?;
            last_resort(&mut f, &x.last_resort)?;
        }
        // ---- the daemon's own cost ----
        if let Some(b) = self.own.rss_bytes {
            f.gauge(
                "cgwarden_process_resident_memory",
                "The daemon's resident memory (smaps_rollup Rss).",
                Some(Unit::Bytes),
                &[(vec![], b as f64)],
            )?;
        }
        if let Some(s) = self.own.cpu_seconds {
            f.counter(
                "cgwarden_process_cpu",
                "CPU time the daemon used (user + system).",
                Some(Unit::Seconds),
                &[(vec![], s)],
            )?;
        }
        if let Some(n) = self.own.fds {
            f.gauge(
                "cgwarden_process_open_fds",
                "File descriptors the daemon has open.",
                None,
                &[(vec![], n as f64)],
            )?;
        }
        Ok(())
    }
}

/// Memory telemetry (vmstat counters, meminfo lines, zram
/// mm_stat, fragmentation index per order).
fn memstat(f: &mut Family<'_, '_>, m: &super::memstat::MemTelemetry) -> Result<(), FmtError> {
    let vm: Vec<(Labels, u64)> = m
        .vmstat
        .iter()
        .map(|(k, v)| (vec![("field", Cow::Owned(k.clone()))], *v))
        .collect();
    f.counter_u64(
        "cgwarden_vmstat",
        "/proc/vmstat counters (allocstall sums the per-zone lines).",
        &vm,
    )?;
    let mi: Vec<(Labels, f64)> = m
        .meminfo
        .iter()
        .map(|(k, v)| (vec![("field", Cow::Owned(k.clone()))], *v as f64))
        .collect();
    f.gauge(
        "cgwarden_meminfo",
        "/proc/meminfo lines.",
        Some(Unit::Bytes),
        &mi,
    )?;
    let mut zram: Vec<(Labels, f64)> = Vec::new();
    for (d, s) in &m.zram {
        for (field, v) in crate::policy::expr::mem::ZRAM_FIELDS.iter().zip(s) {
            zram.push((
                vec![
                    ("device", Cow::Owned(d.clone())),
                    ("field", Cow::Borrowed(*field)),
                ],
                *v as f64,
            ));
        }
    }
    f.gauge(
        "cgwarden_zram_mm_stat",
        "zram mm_stat: orig_data_size, compr_data_size, mem_used_total.",
        Some(Unit::Bytes),
        &zram,
    )?;
    let frag: Vec<(Labels, f64)> = m
        .fragmentation
        .iter()
        .enumerate()
        .map(|(o, v)| (vec![("order", Cow::Owned(o.to_string()))], *v))
        .collect();
    f.gauge(
        "cgwarden_memory_fragmentation_index",
        "Unusable free space index of /proc/buddyinfo per page order (0-1, all zones).",
        None,
        &frag,
    )?;
    Ok(())
}

/// Critical exits, last-resort kills and freezes (labels from
/// the policy: `settings.critical` entries, groups, rules).
fn last_resort(f: &mut Family<'_, '_>, lr: &crate::stats::LastResortStats) -> Result<(), FmtError> {
    use crate::stats::LastResortStats as L;
    let owned = |k: String| Cow::Owned(esc(&k).into_owned());
    let crit: Vec<(Labels, u64)> = L::read(&lr.critical_exits)
        .into_iter()
        .map(|(k, v)| (vec![("name", owned(k))], v))
        .collect();
    f.counter_u64(
        "cgwarden_critical_exits",
        "Exits of settings.critical processes, by the entry they matched.",
        &crit,
    )?;
    let kills: Vec<(Labels, u64)> = L::read(&lr.kills)
        .into_iter()
        .map(|((g, r), v)| (vec![("group", owned(g)), ("rule", owned(r))], v))
        .collect();
    f.counter_u64(
        "cgwarden_kills",
        "Processes killed by a rule's `kill in` last resort.",
        &kills,
    )?;
    let freezes: Vec<(Labels, u64)> = L::read(&lr.freezes)
        .into_iter()
        .map(|(g, v)| (vec![("group", owned(g))], v))
        .collect();
    f.counter_u64(
        "cgwarden_freezes",
        "Times a rule's `freeze` froze the group.",
        &freezes,
    )?;
    Ok(())
}

/// Converts an OpenMetrics exposition to the Prometheus text format 0.0.4:
/// no `# EOF` or `# UNIT`, counters' HELP/TYPE named with their `_total`
/// sample name, `info` families typed `gauge` under their `_info` name.
pub(crate) fn to_prometheus_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut lines = om.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // The TYPE line follows its HELP line.
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = lines
                .peek()
                .and_then(|t| t.strip_prefix("# TYPE "))
                .and_then(|t| t.split_once(' '))
                .filter(|(n, _)| *n == name)
                .map(|(_, k)| k.to_string());
            let (name, kind) = match kind.as_deref() {
                Some("counter") => (format!("{name}_total"), "counter"),
                Some("info") => (format!("{name}_info"), "gauge"),
                Some("gauge") => (name.to_string(), "gauge"),
                Some("histogram") => (name.to_string(), "histogram"),
                Some("summary") => (name.to_string(), "summary"), // cgwarden_kpi
                _ => (name.to_string(), "untyped"),
            };
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            if lines.peek().is_some_and(|t| t.starts_with("# TYPE ")) {
                lines.next();
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::psi::{Psi, PsiLine};
    use crate::observe::state::{KnobView, RuleView};

    fn sample() -> String {
        let mut g = GroupSample {
            name: "app".into(),
            memory_current: Some(4096),
            memory_high: Some(Limit::Max),
            memory_max: Some(Limit::Bytes(1 << 20)),
            ..Default::default()
        };
        g.psi[1] = Psi {
            some: Some(PsiLine {
                total_us: 2_500_000,
                ..Default::default()
            }),
            full: Some(PsiLine {
                total_us: 500_000,
                ..Default::default()
            }),
        };
        g.events.insert("oom_kill".into(), 2);
        g.events.insert("future_event".into(), 9);
        let view = EngineView {
            product: "cam".into(),
            policy_hash: "abc".into(),
            groups: vec![("app".into(), "app".into())],
            rules: vec![RuleView {
                name: "r1".into(),
                active: true,
                fired: 3,
                active_since: Some(1700000100.0),
                max_active: Some(600.0),
            }],
            knobs: vec![KnobView {
                name: "app.memory.high".into(),
                value: Some(1048576.0),
                ok: 4,
                failed: 1,
            }],
            reload_ok: true,
            reload_success: 1700000000.0,
            device: Arc::new(crate::kernel::identity::Device {
                hostname: "cell-07".into(),
                machine_id: "0123abcd".into(),
                model: "IQ-9075 EVK".into(),
                kernel: "6.6.52".into(),
            }),
            ..Default::default()
        };
        render(
            Arc::new(view),
            vec![g],
            OwnCost {
                rss_bytes: Some(8 << 20),
                cpu_seconds: Some(1.5),
                fds: Some(12),
            },
        )
    }

    #[test]
    fn names_units_and_values_follow_prometheus_conventions() {
        let t = sample();
        for want in [
            "# TYPE cgwarden_cgroup_pressure_memory_waiting_seconds counter",
            "cgwarden_cgroup_pressure_memory_waiting_seconds_total{group=\"app\"} 2.5",
            "cgwarden_cgroup_pressure_memory_stalled_seconds_total{group=\"app\"} 0.5",
            "cgwarden_cgroup_memory_current_bytes{group=\"app\"} 4096",
            "cgwarden_cgroup_memory_max_bytes{group=\"app\"} 1048576",
            "cgwarden_cgroup_memory_events_total{group=\"app\",event=\"oom_kill\"} 2",
            "cgwarden_rule_active{rule=\"r1\"} 1",
            "cgwarden_rule_fired_total{rule=\"r1\"} 3",
            "cgwarden_knob_value{knob=\"app.memory.high\"} 1048576",
            "cgwarden_knob_writes_total{knob=\"app.memory.high\",result=\"failed\"} 1",
            "cgwarden_build_info{version=\"",
            "cgwarden_policy_info{product=\"cam\",hash=\"abc\"} 1",
            "cgwarden_config_last_reload_successful 1",
            "cgwarden_config_last_reload_success_timestamp_seconds 1700000000",
            "cgwarden_process_resident_memory_bytes 8388608",
            "cgwarden_process_cpu_seconds_total 1.5",
            "cgwarden_process_open_fds 12",
            "cgwarden_boosts_total{result=\"granted\"} 0",
            "cgwarden_device_info{product=\"cam\",hostname=\"cell-07\",machine_id=\"0123abcd\",model=\"IQ-9075 EVK\",kernel=\"6.6.52\"} 1",
            "cgwarden_rule_active_since_timestamp_seconds{rule=\"r1\"} 1700000100",
            "cgwarden_rule_max_active_seconds{rule=\"r1\"} 600",
        ] {
            assert!(t.contains(want), "missing `{want}` in\n{t}");
        }
        assert!(t.ends_with("# EOF\n"));
        // memory.high is `max`: no sample.
        assert!(!t.contains("cgwarden_cgroup_memory_high_bytes{"), "{t}");
        // A memory.events key outside the known set is no label.
        assert!(!t.contains("future_event"), "{t}");
        // No cpu pressure was read: no sample (not a zero).
        assert!(!t.contains("cgwarden_cgroup_pressure_cpu_waiting_seconds_total{"));
    }

    #[test]
    fn prometheus_text_names_counters_and_infos_by_their_samples() {
        let t = to_prometheus_text(&sample());
        assert!(!t.contains("# EOF") && !t.contains("# UNIT"));
        assert!(
            t.contains("# TYPE cgwarden_rule_fired_total counter\n"),
            "{t}"
        );
        assert!(t.contains("# HELP cgwarden_rule_fired_total Times"), "{t}");
        assert!(t.contains("# TYPE cgwarden_build_info gauge\n"), "{t}");
        assert!(t.contains("# TYPE cgwarden_rule_active gauge\n"), "{t}");
        assert!(t.contains("cgwarden_rule_fired_total{rule=\"r1\"} 3\n"));
        // Every TYPE is followed by samples of that name.
        let mut lines = t.lines().peekable();
        while let Some(l) = lines.next() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                if let Some(next) = lines.peek().filter(|n| !n.starts_with('#')) {
                    assert!(next.starts_with(name), "{name} then {next}");
                }
            }
        }
    }

    #[test]
    fn hostile_label_values_are_escaped() {
        let view = EngineView {
            product: "a\"b\\c\nd".into(),
            ..Default::default()
        };
        let t = render(Arc::new(view), vec![], OwnCost::default());
        let line = t
            .lines()
            .find(|l| l.starts_with("cgwarden_policy_info"))
            .unwrap();
        assert!(line.contains(r#"product="a\"b\\c\nd""#), "{line}");
    }
}
