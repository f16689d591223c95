//! Parsing a metric name (`G.memory.current`, `host.vmstat.FIELD`, …) and
//! the threshold it is compared with (amounts, percentages, event counts in
//! a window, stall time).

use super::{
    error, hw, mem, Avg, CmpOp, MemEvent, MemMetric, Metric, ParseError, Resource, Span, Spanned,
    Stall, Target, Threshold,
};
use crate::knobs::{is_valid_name, suggest, MACHINE};
use crate::units::{Duration, Percent, Size, Temperature};

const METRIC_FORMS: &str = "G.{cpu,memory,io}.{some,full}.{avg10,avg60,avg300}, G.{cpu,memory,io}.{some,full} > AMOUNT/WINDOW, G.memory.current, G.memory.swap.current, G.memory.events.{high,max,oom,oom_kill,oom_group_kill}, G.pids.current, G.cgroup.populated, host.memory.available, host.vmstat.FIELD, host.meminfo.FIELD, host.fragmentation.ORDER, zram.DEV.{orig_data_size,compr_data_size,mem_used_total} or thermal.ZONE.temp";

/// Every valid metric after the `G.` part, for suggestions.
fn metric_suffixes() -> Vec<String> {
    let mut out = Vec::new();
    for r in Resource::ALL {
        for s in Stall::ALL {
            out.push(format!("{r}.{s}"));
            for a in Avg::ALL {
                out.push(format!("{r}.{s}.{a}"));
            }
        }
    }
    out.push("memory.current".into());
    out.push("memory.swap.current".into());
    for e in MemEvent::ALL {
        out.push(format!("memory.events.{e}"));
    }
    out.push("pids.current".into());
    out.push("cgroup.populated".into());
    out
}

/// Resolves a dotted metric name written at character `start`.
pub(super) fn parse_metric(word: &str, start: usize) -> Result<Metric, ParseError> {
    // Words are ASCII, so byte offsets within the word are character offsets.
    let mut segs: Vec<(&str, usize)> = Vec::new();
    let mut offset = start;
    for seg in word.split('.') {
        if seg.is_empty() {
            return Err(error(
                offset,
                format!("empty part in metric `{word}`: expected {METRIC_FORMS}"),
            ));
        }
        segs.push((seg, offset));
        offset = offset.saturating_add(seg.len()).saturating_add(1);
    }
    let names: Vec<&str> = segs.iter().map(|(s, _)| *s).collect();
    let span_of = |i: usize| {
        segs.get(i).map_or(Span::new(start, start), |(s, o)| {
            Span::new(*o, o.saturating_add(s.len()))
        })
    };

    if names == [MACHINE, "memory", "available"] {
        return Ok(Metric::MemoryAvailable);
    }
    // A machine-only metric under `system` (a group name in the seed's
    // layout, and what integrators call the machine) can only mean the
    // machine: say that rules call it `host`.
    if let ["system", rest @ ..] = names.as_slice() {
        if !rest.is_empty() {
            let mut as_host = vec![MACHINE];
            as_host.extend_from_slice(rest);
            let machine_only =
                as_host == [MACHINE, "memory", "available"] || mem::parse(&as_host).is_some();
            if machine_only {
                return Err(error(
                    start,
                    format!(
                        "`{word}` is a metric of the whole machine, which rules call `{MACHINE}`: did you mean `{MACHINE}.{}`?",
                        rest.join(".")
                    ),
                ));
            }
        }
    }
    if let Some(m) = hw::parse_hw_metric(&names, &span_of)? {
        return Ok(m);
    }
    if let Some(m) = super::kpi::parse(&names) {
        return m
            .map(|(name, stat)| Metric::Kpi { name, stat })
            .map_err(|e| error(start, e));
    }
    if let Some(m) = mem::parse(&names) {
        return m.map(Metric::Mem).map_err(|e| error(start, e));
    }
    if let ["thermal", zone @ .., "temp"] = names.as_slice() {
        if !zone.is_empty() {
            let zone_start = span_of(1).start;
            let zone_text = zone.join(".");
            if zone_text.len() > 64 {
                return Err(error(
                    zone_start,
                    "thermal zone name is longer than 64 characters",
                ));
            }
            let end = zone_start.saturating_add(zone_text.len());
            return Ok(Metric::ThermalTemp {
                zone: Spanned::new(zone_text, Span::new(zone_start, end)),
            });
        }
    }

    let (target_name, rest) = match names.split_first() {
        Some((t, rest)) if !rest.is_empty() => (*t, rest),
        _ => {
            return Err(error(
                start,
                format!("unknown metric `{word}`: expected {METRIC_FORMS}"),
            ))
        }
    };
    if !is_valid_name(target_name) {
        return Err(error(
            start,
            format!(
                "invalid group name `{target_name}` in metric `{word}`: expected [a-z0-9][a-z0-9_-]{{0,63}} or `{MACHINE}`"
            ),
        ));
    }
    let target_span = span_of(0);
    let group = || Spanned::new(target_name.to_string(), target_span);
    let target = || {
        let t = if target_name == MACHINE {
            Target::Host
        } else {
            Target::Group(target_name.to_string())
        };
        Spanned::new(t, target_span)
    };

    let psi = |r: &str, s: &str| Some((Resource::from_name(r)?, Stall::from_name(s)?));
    let metric = match rest {
        [r, s, a] => match (psi(r, s), Avg::from_name(a)) {
            (Some((resource, stall)), Some(avg)) => Some(Metric::PsiAvg {
                target: target(),
                resource,
                stall,
                avg,
            }),
            _ => match (*r, *s, *a) {
                ("memory", "swap", "current") => Some(Metric::SwapCurrent { group: group() }),
                ("memory", "events", e) => {
                    MemEvent::from_name(e).map(|event| Metric::MemoryEvent {
                        group: group(),
                        event,
                    })
                }
                _ => None,
            },
        },
        [r, s] => match psi(r, s) {
            Some((resource, stall)) => Some(Metric::PsiStall {
                target: target(),
                resource,
                stall,
            }),
            None => match (*r, *s) {
                ("memory", "current") => Some(Metric::MemoryCurrent { group: group() }),
                ("pids", "current") => Some(Metric::PidsCurrent { group: group() }),
                ("cgroup", "populated") => Some(Metric::Populated { group: group() }),
                _ => None,
            },
        },
        _ => None,
    };
    if let Some(m) = metric {
        // `host` is the whole machine, never a group (a reserved name):
        // only pressure reads it here.
        if target_name == MACHINE && !matches!(m, Metric::PsiAvg { .. } | Metric::PsiStall { .. }) {
            return Err(error(
                start,
                format!(
                    "`{word}`: `{MACHINE}` is the whole machine, not a group; it has `{MACHINE}.memory.available`, pressure (`{MACHINE}.cpu.some.avg10`, `{MACHINE}.memory.full > 100ms/1s`) and `{MACHINE}.vmstat`, `{MACHINE}.meminfo`, `{MACHINE}.fragmentation`"
                ),
            ));
        }
        return Ok(m);
    }

    // Unknown: suggest the closest valid metric and point at the first part
    // that differs from it.
    let rest_text = rest.join(".");
    let suffixes = metric_suffixes();
    match suggest(&rest_text, suffixes.iter().map(String::as_str)) {
        Some(fix) => {
            let fix_parts: Vec<&str> = fix.split('.').collect();
            let bad = rest
                .iter()
                .zip(fix_parts.iter().map(Some).chain(std::iter::repeat(None)))
                .position(|(have, want)| want != Some(have))
                .unwrap_or(rest.len().saturating_sub(1));
            let (bad_part, pos) = segs
                .get(bad.saturating_add(1))
                .copied()
                .unwrap_or((word, start));
            Err(error(
                pos,
                format!(
                    "unknown metric part `{bad_part}` in `{word}`, did you mean `{target_name}.{fix}`?"
                ),
            ))
        }
        None => Err(error(
            span_of(1).start,
            format!("unknown metric `{word}`: expected {METRIC_FORMS}"),
        )),
    }
}

/// Types the value of a comparison by its metric.
pub(super) fn parse_threshold(
    metric: &Metric,
    metric_text: &str,
    op: CmpOp,
    op_pos: usize,
    value: &str,
    value_pos: usize,
) -> Result<Threshold, ParseError> {
    let wrong = |expected: &str| {
        error(
            value_pos,
            format!("`{metric_text}` compares with {expected}, found `{value}`"),
        )
    };
    if let Some(slash) = value.find('/') {
        if !matches!(
            metric,
            Metric::PsiStall { .. } | Metric::MemoryEvent { .. } | Metric::Kpi { .. }
        ) {
            let (before, window) = value.split_at(slash);
            return Err(error(
                value_pos.saturating_add(before.chars().count()),
                format!(
                    "a window `{window}` only applies to event counts (`G.memory.events.high > 5/10s`) and stall time (`G.memory.some > 150ms/1s`); `{metric_text}` compares with a plain value"
                ),
            ));
        }
    }
    match metric {
        Metric::Kpi { stat, .. } => super::kpi::threshold(*stat, value, value_pos),
        Metric::PsiAvg { .. } => Percent::parse(value)
            .map(Threshold::Percent)
            .map_err(|_| wrong("a percentage like `10%`")),
        Metric::PsiStall { .. } => {
            if !matches!(op, CmpOp::Gt | CmpOp::Ge) {
                return Err(error(
                    op_pos,
                    format!(
                        "a stall-time condition only supports `>` or `>=` (a PSI trigger fires when stall time exceeds the amount), found `{}`; use `not (...)` for the opposite",
                        op.symbol()
                    ),
                ));
            }
            parse_stall(metric_text, value, value_pos)
        }
        Metric::MemoryCurrent { .. } | Metric::SwapCurrent { .. } | Metric::MemoryAvailable => {
            match Size::parse(value) {
                Ok(Size::Bytes(b)) => Ok(Threshold::Size(Size::Bytes(b))),
                _ => Err(wrong("a byte size like `512M` (not `max`)")),
            }
        }
        Metric::MemoryEvent { .. } => {
            if !matches!(op, CmpOp::Gt | CmpOp::Ge) {
                return Err(error(
                    op_pos,
                    format!(
                        "an event-count condition only supports `>` or `>=` (more than N new events within a window), found `{}`; use `not (...)` for the opposite",
                        op.symbol()
                    ),
                ));
            }
            parse_events(metric_text, value, value_pos)
        }
        Metric::PidsCurrent { .. } => parse_count(value)
            .map(Threshold::Count)
            .ok_or_else(|| wrong("a whole number")),
        Metric::Populated { .. } => match parse_count(value) {
            Some(n @ (0 | 1)) => Ok(Threshold::Count(n)),
            _ => Err(wrong("0 or 1")),
        },
        Metric::ThermalTemp { .. } | Metric::ThermalTrip { .. } => Temperature::parse(value)
            .map(Threshold::Temperature)
            .map_err(|_| wrong("a temperature like `85C`")),
        Metric::CoolingState { .. } => parse_count(value)
            .map(Threshold::Count)
            .ok_or_else(|| wrong("a whole number (a cooling state)")),
        Metric::CpufreqFreq { .. } => crate::units::Frequency::parse(value)
            .map(Threshold::Frequency)
            .map_err(|_| wrong("a frequency like `1.8GHz`")),
        Metric::Mem(m) if m.is_bytes() => match Size::parse(value) {
            Ok(Size::Bytes(b)) => Ok(Threshold::Size(Size::Bytes(b))),
            _ => Err(wrong("a byte size like `64M` (not `max`)")),
        },
        Metric::Mem(m) => {
            let n: f64 = value
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite() && *n >= 0.0 && !value.starts_with('+'))
                .ok_or_else(|| match m {
                    MemMetric::Fragmentation(_) => wrong("an index between 0 and 1 like `0.75`"),
                    _ => wrong("a rate per second like `100` or `0.5`"),
                })?;
            if matches!(m, MemMetric::Fragmentation(_)) && n > 1.0 {
                return Err(wrong("an index between 0 and 1 like `0.75`"));
            }
            Ok(Threshold::Number(n))
        }
    }
}

fn parse_count(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Shortest and longest event-count window.
const EVENT_WINDOW: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(3600),
);

/// `N` or `N/WINDOW` of an event-count condition.
fn parse_events(metric_text: &str, value: &str, value_pos: usize) -> Result<Threshold, ParseError> {
    let (count_text, window_text) = match value.split_once('/') {
        Some((c, w)) => (c, Some(w)),
        None => (value, None),
    };
    let Some(count) = parse_count(count_text) else {
        return Err(error(
            value_pos,
            format!(
                "`{metric_text}` compares with a whole number of events, optionally within a window like `5/10s`, found `{count_text}`"
            ),
        ));
    };
    let Some(window_text) = window_text else {
        return Ok(Threshold::Events {
            count,
            window: None,
        });
    };
    let window_pos = value_pos
        .saturating_add(count_text.chars().count())
        .saturating_add(1);
    let window = Duration::parse(window_text)
        .map_err(|e| error(window_pos, format!("event window: {e}")))?;
    let (min, max) = EVENT_WINDOW;
    if !(min..=max).contains(&window.get()) {
        return Err(error(
            window_pos,
            format!("the event window `{window_text}` must be between 1s and 1h"),
        ));
    }
    if window.get().subsec_nanos() % 1_000_000 != 0 {
        return Err(error(
            window_pos,
            format!("the event window `{window_text}` must be a whole number of milliseconds"),
        ));
    }
    Ok(Threshold::Events {
        count,
        window: Some(window),
    })
}

/// `AMOUNT/WINDOW` of a stall-time condition, within the kernel's limits.
fn parse_stall(metric_text: &str, value: &str, value_pos: usize) -> Result<Threshold, ParseError> {
    let Some((amount_text, window_text)) = value.split_once('/') else {
        let hint = if value.ends_with('%') {
            format!("; for a PSI average write `{metric_text}.avg10`")
        } else {
            String::new()
        };
        return Err(error(
            value_pos,
            format!(
                "`{metric_text}` compares stall time as AMOUNT/WINDOW like `150ms/1s`, found `{value}`{hint}"
            ),
        ));
    };
    let window_pos = value_pos
        .saturating_add(amount_text.chars().count())
        .saturating_add(1);
    let micros = |text: &str, pos: usize| {
        let d = Duration::parse(text).map_err(|e| error(pos, e.to_string()))?;
        d.whole_micros().map(|us| (d, us)).ok_or_else(|| {
            error(
                pos,
                format!("`{text}` is not a whole number of microseconds"),
            )
        })
    };
    let (amount, amount_us) = micros(amount_text, value_pos)?;
    let (window, window_us) = micros(window_text, window_pos)?;
    if !(500_000..=10_000_000).contains(&window_us) {
        return Err(error(
            window_pos,
            format!("the stall window `{window_text}` must be between 500ms and 10s"),
        ));
    }
    if amount_us == 0 || amount_us > window_us {
        return Err(error(
            value_pos,
            format!(
                "the stall amount `{amount_text}` must be greater than 0 and at most the window `{window_text}`"
            ),
        ));
    }
    Ok(Threshold::StallTime { amount, window })
}
