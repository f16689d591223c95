//! The board's hardware in the rule language (thermal and throttling): `thermal.ZONE.trip.N`, `cooling.NAME.state`,
//! `cpufreq.POLICY.limit`, `cpufreq.POLICY.cur` and `throttled(POLICY)`.

use super::{error, Metric, ParseError, Span, Spanned};

/// The longest zone or cooling-device type (THERMAL_NAME_LENGTH is 20;
/// vendor types are longer in practice, 64 is the zones' existing bound).
const MAX_TYPE: usize = 64;

/// A metric of this module, or `None` when `names` is none of them.
pub(super) fn parse_hw_metric(
    names: &[&str],
    span_of: &dyn Fn(usize) -> Span,
) -> Result<Option<Metric>, ParseError> {
    let spanned = |first: usize, parts: &[&str]| {
        let text = parts.join(".");
        let start = span_of(first).start;
        Spanned::new(
            text.clone(),
            Span::new(start, start.saturating_add(text.len())),
        )
    };
    match names {
        ["thermal", zone @ .., "trip", n] if !zone.is_empty() => {
            let trip = n.parse::<u32>().ok().filter(|t| *t < 64).ok_or_else(|| {
                error(
                    span_of(names.len() - 1).start,
                    format!("trip point `{n}`: expected its number, 0–63 (trip_point_N_temp)"),
                )
            })?;
            let zone = spanned(1, zone);
            check_len(&zone, "thermal zone")?;
            Ok(Some(Metric::ThermalTrip { zone, trip }))
        }
        ["cooling", device @ .., "state"] if !device.is_empty() => {
            let device = spanned(1, device);
            check_len(&device, "cooling device type")?;
            Ok(Some(Metric::CoolingState { device }))
        }
        ["cpufreq", policy, which @ ("limit" | "cur")] => {
            if !crate::knobs::is_numbered(policy, "policy") {
                return Err(error(
                    span_of(1).start,
                    format!("invalid cpufreq policy `{policy}`: expected `policyN`"),
                ));
            }
            Ok(Some(Metric::CpufreqFreq {
                policy: spanned(1, &[policy]),
                limit: *which == "limit",
            }))
        }
        _ => Ok(None),
    }
}

fn check_len(s: &Spanned<String>, what: &str) -> Result<(), ParseError> {
    if s.value.len() > MAX_TYPE {
        return Err(error(
            s.span.start,
            format!("{what} name is longer than {MAX_TYPE} characters"),
        ));
    }
    Ok(())
}

/// `throttled(POLICY)`'s argument: `policyN`.
pub(super) fn throttled_arg(arg: &str, pos: usize) -> Result<(), ParseError> {
    if crate::knobs::is_numbered(arg, "policy") {
        Ok(())
    } else {
        Err(error(
            pos,
            format!("throttled() needs a cpufreq policy like `policy7`, found `{arg}`"),
        ))
    }
}
