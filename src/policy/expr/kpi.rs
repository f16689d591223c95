//! KPI conditions of the rule language, `kpi.NAME.STAT OP VALUE`
//! with an optional trailing window (`/1m` or ` over 1m`; default 1m,
//! at most 5m: the daemon keeps 5 minutes of each KPI in memory). NAME is
//! a KPI name ([`check_name`]); STAT one of [`Stat`]; VALUE a plain number
//! or a duration (`5ms`, compared in seconds: times are kept in seconds).

use std::fmt;

/// Longest KPI name.
pub(crate) const MAX_NAME_LEN: usize = 64;
/// The window of a KPI condition that names none.
pub(crate) const DEFAULT_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest window a KPI condition may name.
pub(crate) const MAX_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether `name` may name a KPI (`[A-Za-z0-9_.-]`, 1–64 characters); the
/// error says why not.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a KPI name may not be empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "KPI name `{}…` is longer than {MAX_NAME_LEN} characters",
            name.chars().take(32).collect::<String>()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "KPI name `{}` has `{}`: names use A-Z a-z 0-9 _ . -",
            name.escape_debug(),
            c.escape_debug()
        ));
    }
    Ok(())
}

/// What a condition reads of a KPI over its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stat {
    P50,
    P90,
    P99,
    Max,
    Min,
    Mean,
    Stddev,
    Count,
}

impl Stat {
    pub(crate) const ALL: [Stat; 8] = [
        Stat::P50,
        Stat::P90,
        Stat::P99,
        Stat::Max,
        Stat::Min,
        Stat::Mean,
        Stat::Stddev,
        Stat::Count,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Max => "max",
            Stat::Min => "min",
            Stat::Mean => "mean",
            Stat::Stddev => "stddev",
            Stat::Count => "count",
        }
    }

    pub(crate) fn from_name(s: &str) -> Option<Stat> {
        Stat::ALL.into_iter().find(|x| x.name() == s)
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `kpi.NAME.STAT`'s parts (after `kpi`): `None` when `names` is not a KPI
/// metric at all, `Some(Err)` for a bad name or statistic.
pub(crate) fn parse(names: &[&str]) -> Option<Result<(String, Stat), String>> {
    let ["kpi", rest @ ..] = names else {
        return None;
    };
    let [name @ .., stat] = rest else {
        return None;
    };
    if name.is_empty() {
        return Some(Err(format!(
            "`kpi.{stat}`: expected kpi.NAME.STAT, like kpi.loop_latency.p99"
        )));
    }
    let name = name.join(".");
    Some(check_name(&name).and_then(|()| {
        Stat::from_name(stat)
            .map(|s| (name.clone(), s))
            .ok_or_else(|| {
                let names: Vec<&str> = Stat::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown KPI statistic `{stat}` in kpi.{name}.{stat}: expected {}",
                    names.join(", ")
                )
            })
    }))
}

/// A KPI threshold's value: a plain number or a duration (in seconds);
/// `true` when it was a duration.
pub(crate) fn parse_value(text: &str, stat: Stat) -> Result<(f64, bool), String> {
    if stat == Stat::Count {
        return match text.parse::<u64>() {
            Ok(n) if text.bytes().all(|b| b.is_ascii_digit()) => Ok((n as f64, false)),
            _ => Err(format!(
                "a KPI count compares with a whole number, found `{text}`"
            )),
        };
    }
    if !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|b| *b == b'.').count() <= 1
    {
        if let Ok(v) = text.parse::<f64>() {
            return Ok((v, false));
        }
    }
    crate::units::Duration::parse(text)
        .map(|d| (d.get().as_secs_f64(), true))
        .map_err(|_| {
            format!("a KPI compares with a number (`2`, `29.5`) or a duration (`5ms`, `200us`), found `{text}`")
        })
}

/// A KPI condition's window, checked.
pub(crate) fn parse_window(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::units::Duration::parse(text)
        .map_err(|e| format!("KPI window: {e}"))?
        .get();
    if d < std::time::Duration::from_secs(1) || d > MAX_WINDOW {
        return Err(format!(
            "the KPI window `{text}` must be between 1s and 5m (the daemon keeps 5 minutes of each KPI)"
        ));
    }
    Ok(d)
}

/// The threshold of a `kpi.NAME.STAT` comparison: `VALUE` or
/// `VALUE/WINDOW` (the ` over WINDOW` spelling is read by the parser).
pub(super) fn threshold(
    stat: Stat,
    value: &str,
    value_pos: usize,
) -> Result<super::Threshold, super::ParseError> {
    let (text, window) = match value.split_once('/') {
        Some((v, w)) => {
            let at = value_pos.saturating_add(v.chars().count() + 1);
            let w = parse_window(w).map_err(|e| super::error(at, e))?;
            (v, Some(crate::units::Duration(w)))
        }
        None => (value, None),
    };
    let (v, _) = parse_value(text, stat).map_err(|e| super::error(value_pos, e))?;
    Ok(super::Threshold::Kpi {
        value: v,
        text: text.to_string(),
        window,
    })
}

#[cfg(test)]
mod tests {
    use crate::policy::expr::{parse_expr, ExprKind, Metric, Threshold};

    fn kpi(src: &str) -> (Metric, Threshold) {
        match parse_expr(src).unwrap().kind {
            ExprKind::Compare(c) => (c.metric, c.value),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn both_spellings_mean_the_same() {
        let (m, t) = kpi("kpi.loop_latency.p99 > 5ms over 1m");
        assert_eq!(m.to_string(), "kpi.loop_latency.p99");
        let Threshold::Kpi { value, window, .. } = &t else {
            panic!("{t:?}")
        };
        assert!((value - 0.005).abs() < 1e-12);
        assert_eq!(window.map(|w| w.get().as_secs()), Some(60));
        assert_eq!(kpi("kpi.loop_latency.p99 > 5ms/1m"), (m.clone(), t.clone()));
        // Printing round-trips (as the `/` form).
        let e =
            parse_expr("kpi.loop_latency.p99 > 5ms over 1m and kpi.Cam-1.fps.stddev >= 2").unwrap();
        assert_eq!(parse_expr(&e.to_string()).unwrap(), e);
        assert!(e.to_string().contains("5ms/1m"), "{e}");
        // A dotted, mixed-case name and a bare window-less count.
        let (m, t) = kpi("kpi.Cam-1.fps.count < 10");
        assert_eq!(
            m,
            Metric::Kpi {
                name: "Cam-1.fps".into(),
                stat: super::Stat::Count
            }
        );
        assert!(matches!(t, Threshold::Kpi { window: None, .. }));
    }

    #[test]
    fn errors_point_at_the_part() {
        for (src, want) in [
            ("kpi.loop.p98 > 1", "unknown KPI statistic"),
            ("kpi.p99 > 1", "expected kpi.NAME.STAT"),
            ("kpi.loop.p99 > 5ms/10m", "between 1s and 5m"),
            ("kpi.loop.p99 > 5ms/1m over 1m", "one window"),
            ("kpi.loop.p99 > 5ms over", "expected a window"),
            ("kpi.loop.p99 > fast", "a number"),
            ("kpi.loop.count > 1.5", "whole number"),
        ] {
            let e = parse_expr(src).unwrap_err();
            assert!(e.message.contains(want), "{src}: {e}");
        }
    }
}
