//! One rendering rule for knob values (docs/control.md "Values"), the same
//! in the log, events and status.
//!
//! - **JSON and the control socket** carry the exact kernel form
//!   ([`super::Knob::render`]: `2400000`, `3758096384`, `max`) — scripts
//!   compare numbers;
//! - **text for people** (`status`, `events`, `verify`, the demo) shows
//!   [`human`]: sizes in binary units (`3.5G`), frequencies in GHz/MHz
//!   (`806.4MHz`, `2.4GHz`), everything else as the policy writes it; a size
//!   that is not exact with two decimals is marked `≈`;
//! - **logs** say both, [`both`]: `806400 (806.4MHz)`, the raw form alone
//!   when the two are the same (`30`).

use super::{Knob, KnobValue};
use crate::units::Size;

/// The value for people (module docs).
pub(crate) fn human(v: &KnobValue) -> String {
    match v {
        KnobValue::Size(Size::Bytes(b)) => size(*b),
        KnobValue::Frequency(f) => frequency(f.khz()),
        other => other.to_string(),
    }
}

/// The raw (kernel) form, then the human one in parentheses when it differs.
pub(crate) fn both(knob: &Knob, v: &KnobValue) -> String {
    let raw = knob.render(v);
    let h = human(v);
    if raw == h {
        raw
    } else {
        format!("{raw} ({h})")
    }
}

/// [`human`] of a raw value as the control socket carries it, for knob
/// `knob` — or a cap on it, named `cap KNOB` ([`super::CAP_KEY_PREFIX`]) —
/// the text unchanged when either does not parse.
pub(crate) fn human_text(knob: &str, raw: &str) -> String {
    let knob = knob.strip_prefix(super::CAP_KEY_PREFIX).unwrap_or(knob);
    match knob.parse::<Knob>() {
        Ok(k) => k
            .parse_kernel(raw)
            .map(|v| human(&v))
            .unwrap_or_else(|_| raw.to_string()),
        Err(_) => raw.to_string(),
    }
}

/// Bytes in the largest binary unit that is at least 1, with up to two
/// decimals; `≈` when that is not exact.
fn size(b: u64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("E", 60),
        ("P", 50),
        ("T", 40),
        ("G", 30),
        ("M", 20),
        ("K", 10),
    ];
    let Some((unit, shift)) = UNITS.iter().find(|(_, s)| b >> s > 0) else {
        return b.to_string();
    };
    let mult = 1u128 << shift;
    let hundredths = u128::from(b) * 100;
    if hundredths % mult == 0 {
        let h = hundredths / mult;
        return format!("{}{}{unit}", h / 100, decimals(h % 100));
    }
    format!("≈{:.2}{unit}", b as f64 / mult as f64)
}

/// `.5`, `.25`, or nothing, for a count of hundredths.
fn decimals(h: u128) -> String {
    match h {
        0 => String::new(),
        h if h % 10 == 0 => format!(".{}", h / 10),
        h => format!(".{h:02}"),
    }
}

/// kHz as GHz when at least 1 GHz and exact in MHz, else MHz (always exact:
/// three decimals at most), else kHz.
fn frequency(khz: u64) -> String {
    let thousandths = |n: u64| match n % 1000 {
        0 => String::new(),
        r => format!(".{r:03}").trim_end_matches('0').to_string(),
    };
    if khz >= 1_000_000 && khz.is_multiple_of(1_000) {
        let mhz = khz / 1_000;
        format!("{}{}GHz", mhz / 1_000, thousandths(mhz))
    } else if khz >= 1_000 {
        format!("{}{}MHz", khz / 1_000, thousandths(khz))
    } else {
        format!("{khz}kHz")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Knob {
        s.parse().unwrap()
    }

    #[test]
    fn people_get_units_scripts_get_numbers_logs_get_both() {
        let f = k("cpufreq.policy7.min");
        let v = f.parse_kernel("806400").unwrap();
        assert_eq!(human(&v), "806.4MHz");
        assert_eq!(both(&f, &v), "806400 (806.4MHz)");
        assert_eq!(human_text("cpufreq.policy7.min", "2400000"), "2.4GHz");
        assert_eq!(human_text("cpufreq.policy7.min", "800000"), "800MHz");
        assert_eq!(human_text("cpufreq.policy7.min", "1234567"), "1234.567MHz");
        assert_eq!(human_text("cpufreq.policy7.min", "500"), "500kHz");
        let m = k("app.memory.high");
        let v = m.parse_kernel("3758096384").unwrap();
        assert_eq!(both(&m, &v), "3758096384 (3.5G)");
        assert_eq!(human_text("app.memory.high", "2684354560"), "2.5G");
        assert_eq!(human_text("app.memory.high", "536870912"), "512M");
        assert_eq!(human_text("app.memory.high", "1610612736"), "1.5G");
        assert_eq!(human_text("app.memory.high", "1342177280"), "1.25G");
        assert_eq!(human_text("app.memory.high", "123456789"), "≈117.74M");
        assert_eq!(human_text("app.memory.high", "1000"), "1000");
        assert_eq!(human_text("app.memory.high", "max"), "max");
        // A cap is shown as the knob it caps (`boost --cap`, status, events).
        assert_eq!(human_text("cap app.memory.high", "3221225472"), "3G");
        assert_eq!(human_text("cap cpufreq.policy7.max", "1800000"), "1.8GHz");
        // Nothing to convert: the raw form alone, in logs too.
        let s = k("sysctl.vm.swappiness");
        assert_eq!(both(&s, &s.parse_kernel("30").unwrap()), "30");
        // Text that is not a value of the knob stays as it is.
        assert_eq!(human_text("app.memory.high", "lots"), "lots");
        assert_eq!(human_text("no such knob", "12"), "12");
    }

    #[test]
    fn every_human_form_of_a_size_or_frequency_reads_back_near_its_value() {
        for b in [1u64 << 10, 1536, 3 << 29, u64::MAX, 4095, 1 << 62] {
            let t = size(b);
            let exact = !t.starts_with('≈');
            let parsed = crate::units::Size::parse(t.trim_start_matches('≈'));
            if exact {
                assert_eq!(parsed.ok().and_then(|s| s.bytes()), Some(b), "{t}");
            }
        }
        for khz in [1u64, 999, 1000, 691_200, 1_000_000, 2_400_000, 1_234_567] {
            let t = frequency(khz);
            let f = crate::units::Frequency::parse(&t).map(|f| f.khz());
            assert_eq!(f, Ok(khz), "{t}");
        }
    }
}
