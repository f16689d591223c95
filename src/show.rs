//! How times, hashes and counts are shown to people and in the wire formats
//! (a leaf: the control plane, the hooks' environment, the report and the
//! terminal view all format through here, so they agree).
//!
//! Times are RFC 3339 in UTC. The formatter is hand-written (not
//! humantime's) because it must be total: any `SystemTime` — before the
//! epoch, past year 9999 — formats without a panic.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` as RFC 3339 UTC with whole seconds, e.g. `2026-11-30T10:15:00Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let mut s = String::with_capacity(20);
    push_rfc3339(&mut s, t, 0);
    s
}

/// Appends `t` as RFC 3339 UTC with `frac` (0, 3 or 6; more is taken as 6)
/// digits of the second, rounded down (before the epoch too: 0.25 s before
/// it is `1969-12-31T23:59:59.750Z`). The digits are written into a fixed
/// buffer and pushed once, not formatted through `format!`: the daemon
/// stamps every log line and event with this (`crate::logline`), a few
/// hundred instructions instead of thousands.
pub(crate) fn push_rfc3339(out: &mut String, t: SystemTime, frac: u32) {
    let (secs, nanos): (i64, u32) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let s = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => (-s, 0),
                n => (-s - 1, 1_000_000_000 - n),
            }
        }
    };
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400) as u32;
    if !(0..=9999).contains(&y) {
        // Outside four digits: what `{y:04}` gives (a sign, all digits).
        use std::fmt::Write as _;
        let _ = write!(out, "{y:04}");
    }
    // `YYYY-MM-DDTHH:MM:SS.ffffffZ` in place, then one push.
    let mut b = *b"0000-00-00T00:00:00.000000Z";
    put_digits(&mut b[0..4], y.clamp(0, 9999) as u32);
    put_digits(&mut b[5..7], m);
    put_digits(&mut b[8..10], d);
    put_digits(&mut b[11..13], sod / 3600);
    put_digits(&mut b[14..16], sod % 3600 / 60);
    put_digits(&mut b[17..19], sod % 60);
    let end = match frac {
        0 => 19,
        1..=3 => {
            put_digits(&mut b[20..23], nanos / 1_000_000);
            23
        }
        _ => {
            put_digits(&mut b[20..26], nanos / 1_000);
            26
        }
    };
    let first = if (0..=9999).contains(&y) { 0 } else { 4 };
    // Every byte is ASCII.
    out.push_str(std::str::from_utf8(&b[first..end]).unwrap_or_default());
    out.push('Z');
}

/// Writes `v`'s last `b.len()` decimal digits into `b`, zero-padded.
fn put_digits(b: &mut [u8], mut v: u32) {
    for c in b.iter_mut().rev() {
        *c = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// `t` as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T10:15:00.250Z`
/// (the control plane's times).
pub(crate) fn rfc3339_millis(t: SystemTime) -> String {
    let mut s = String::with_capacity(24);
    push_rfc3339(&mut s, t, 3);
    s
}

/// The first 12 hex digits of a policy hash.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// A count and its noun, the noun plural unless the count is one: `1
/// change`, `0 changes`, `3 rules`. Every noun counted in output takes a
/// plain `s`.
pub(crate) fn count<N>(n: N, noun: &str) -> String
where
    N: std::fmt::Display + PartialEq + From<u8>,
{
    if n == N::from(1) {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(1usize, "change"), "1 change");
        assert_eq!(count(0usize, "change"), "0 changes");
        assert_eq!(count(2i64, "rule"), "2 rules");
        assert_eq!(count(1u64, "other change"), "1 other change");
    }

    #[test]
    fn time_format_known_dates() {
        let at = |s: u64| rfc3339(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(1_796_033_700), "2026-11-30T10:15:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z"); // leap century
        assert_eq!(at(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(at(951_868_800), "2000-03-01T00:00:00Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(at(1_735_689_599), "2024-12-31T23:59:59Z"); // day 366
        assert_eq!(at(4_107_456_000), "2100-02-28T00:00:00Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z"); // 2100 not leap
        assert_eq!(at(2_147_483_647), "2038-01-19T03:14:07Z");
        // Sub-second parts are dropped, before the epoch rounded down.
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_999)),
            "1970-01-01T00:00:01Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(500)),
            "1969-12-31T23:59:59Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(2_203_891_200)),
            "1900-03-01T00:00:00Z"
        );
    }

    /// Every day from 1600 to 2400 against a naive calendar walk.
    #[test]
    fn civil_from_days_matches_a_calendar_walk() {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let len = |y: i64, m: u32| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        // 1600-01-01 is day -135140.
        let (mut y, mut m, mut d) = (1600i64, 1u32, 1u32);
        for days in -135_140i64..160_000 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            d += 1;
            if d > len(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        assert!(y > 2400);
    }

    #[test]
    fn millis_agree_with_humantime_after_the_epoch() {
        for ms in [0u64, 1, 999, 1_796_033_700_250, 4_107_542_400_001] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(
                rfc3339_millis(t),
                humantime::format_rfc3339_millis(t).to_string()
            );
        }
        assert_eq!(
            rfc3339_millis(UNIX_EPOCH - Duration::from_millis(250)),
            "1969-12-31T23:59:59.750Z"
        );
    }

    /// The log lines' stamp (`push_rfc3339` with 6 digits) is humantime's
    /// micros after the epoch, and total before it and past year 9999.
    #[test]
    fn micros_agree_with_humantime_and_never_panic() {
        let micros = |t: SystemTime| {
            let mut s = String::new();
            push_rfc3339(&mut s, t, 6);
            s
        };
        for us in [
            0u64,
            1,
            999_999,
            1_796_033_700_250_001,
            4_107_542_400_000_001,
            253_402_300_799_999_999,
        ] {
            let t = UNIX_EPOCH + Duration::from_micros(us);
            assert_eq!(micros(t), humantime::format_rfc3339_micros(t).to_string());
        }
        assert_eq!(
            micros(UNIX_EPOCH - Duration::from_nanos(1)),
            "1969-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            micros(UNIX_EPOCH + Duration::from_secs(253_402_300_800)),
            "10000-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(62_167_219_200 + 86_400)),
            "-001-12-31T00:00:00Z"
        );
    }

    #[test]
    fn short_hashes() {
        assert_eq!(short("0123456789abcdef"), "0123456789ab");
        assert_eq!(short("abc"), "abc");
    }
}
