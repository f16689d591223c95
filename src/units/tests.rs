use super::*;
use proptest::prelude::*;

fn bytes(text: &str) -> u64 {
    Size::parse(text)
        .ok()
        .and_then(|s| s.bytes())
        .unwrap_or(u64::MAX)
}

#[test]
fn size_forms() {
    assert_eq!(bytes("4096"), 4096);
    assert_eq!(bytes("0"), 0);
    assert_eq!(bytes("512K"), 512 << 10);
    assert_eq!(bytes("512k"), 512 << 10);
    assert_eq!(bytes("3584M"), 3584 << 20);
    assert_eq!(bytes("4G"), 4 << 30);
    assert_eq!(bytes("4Gi"), 4 << 30);
    assert_eq!(bytes("4GiB"), 4 << 30);
    assert_eq!(bytes("4GB"), 4 << 30);
    assert_eq!(bytes("1T"), 1 << 40);
    assert_eq!(bytes("1.5K"), 1536);
    assert_eq!(bytes("4B"), 4);
    assert_eq!(Size::parse("max"), Ok(Size::Max));
}

#[test]
fn size_rejections() {
    for bad in [
        "", "4Q", "K", "-4", "+4", "4 K", " 4K", "4K ", "4_096", "4e3", "1.3K", "1.", ".5K",
        "0x10", "16E", "MAX", "Max", "4KK", "4KiBB", "1.5",
    ] {
        let err = Size::parse(bad);
        assert!(err.is_err(), "{bad:?} should be rejected: {err:?}");
    }
    let err = Size::parse("4Q")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("invalid size `4Q`: expected"), "{err}");
}

#[test]
fn size_display_and_kernel() {
    assert_eq!(Size::Bytes(4096).to_string(), "4K");
    assert_eq!(Size::Bytes(3584 << 20).to_string(), "3584M");
    assert_eq!(Size::Bytes(4 << 30).to_string(), "4G");
    assert_eq!(Size::Bytes(1000).to_string(), "1000");
    assert_eq!(Size::Bytes(0).to_string(), "0");
    assert_eq!(Size::Max.to_string(), "max");
    assert_eq!(Size::Bytes(4 << 30).kernel(), "4294967296");
    assert_eq!(Size::Max.kernel(), "max");
    assert!(Size::Max > Size::Bytes(u64::MAX));
    assert!(Size::Bytes(1) < Size::Bytes(2));
    assert_eq!(Size::Max.bytes(), None);
}

#[test]
fn frequency_forms() {
    let khz = |t: &str| Frequency::parse(t).map(|f| f.khz()).unwrap_or(0);
    assert_eq!(khz("1200000"), 1_200_000);
    assert_eq!(khz("800kHz"), 800);
    assert_eq!(khz("1200MHz"), 1_200_000);
    assert_eq!(khz("1.8GHz"), 1_800_000);
    assert_eq!(khz("1.8ghz"), 1_800_000);
    assert_eq!(khz("2.5MHz"), 2_500);
    for bad in [
        "",
        "0",
        "0MHz",
        "1.5",
        "1.2345MHz",
        "GHz",
        "1.8 GHz",
        "-1GHz",
        "1.8Hz",
        "1e6",
        "99999999999999999999999GHz",
    ] {
        assert!(Frequency::parse(bad).is_err(), "{bad:?} should be rejected");
    }
    assert_eq!(Frequency { khz: 1_800_000 }.to_string(), "1800MHz");
    assert_eq!(Frequency { khz: 2_000_000 }.to_string(), "2GHz");
    assert_eq!(Frequency { khz: 1_234 }.to_string(), "1234");
}

#[test]
fn percent_forms() {
    assert_eq!(Percent::parse("10%"), Ok(Percent(10.0)));
    assert_eq!(Percent::parse("12.5%"), Ok(Percent(12.5)));
    assert_eq!(Percent::parse("0%"), Ok(Percent(0.0)));
    assert_eq!(Percent::parse("100%"), Ok(Percent(100.0)));
    for bad in [
        "10", "%", "-1%", "-0%", "100.1%", "101%", "nan%", "inf%", "NaN%", "1e1%", " 10%", "10 %",
        "+5%", "5.%",
    ] {
        assert!(Percent::parse(bad).is_err(), "{bad:?} should be rejected");
    }
    assert_eq!(Percent(12.5).to_string(), "12.5%");
    assert_eq!(Percent(10.0).to_string(), "10%");
    assert!(Percent::new(f64::NAN).is_none());
    assert!(Percent::new(f64::INFINITY).is_none());
}

#[test]
fn duration_forms() {
    let ms = |t: &str| Duration::parse(t).map(|d| d.get().as_millis()).unwrap_or(0);
    assert_eq!(ms("500ms"), 500);
    assert_eq!(ms("30s"), 30_000);
    assert_eq!(ms("2m"), 120_000);
    assert_eq!(ms("1h"), 3_600_000);
    assert_eq!(ms("1h30m"), 5_400_000);
    assert_eq!(ms("2d"), 172_800_000);
    assert_eq!(ms("0s"), 0);
    assert_eq!(ms("1m30s250ms"), 90_250);
    let us = |t: &str| Duration::parse(t).map(|d| d.get().as_nanos()).unwrap_or(0);
    assert_eq!(us("40us"), 40_000);
    assert_eq!(us("40µs"), 40_000);
    assert_eq!(us("7ns"), 7);
    // What humantime would take silently is refused.
    for bad in [
        "",
        "30",
        "0",
        "s",
        "1x",
        "-1s",
        "1.5",
        "1.5s",
        "10sec",
        "2hours",
        "1w",
        "1M",
        "1y",
        "1h 30m",
        " 1s",
        "1s ",
        "30m1h",
        "1s1s",
        "1S",
        "1H",
        "+1s",
        "1_000ms",
        "99999999999999999999999999999999999999999d",
    ] {
        let e = Duration::parse(bad);
        assert!(e.is_err(), "{bad:?} should be rejected");
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains(DURATION_REASON) || e.contains("too long"),
            "{bad:?}: {e}"
        );
    }
    let e = Duration::parse("10sec").err().map(|e| e.to_string());
    assert_eq!(
            e.as_deref(),
            Some(
                "invalid duration `10sec`: unknown unit `sec`; expected whole numbers with units d, h, m, s, ms, us (or µs), ns, written together, largest first, like `500ms`, `30s`, `1h30m`"
            )
        );
    // A fraction is refused with the whole-unit spelling to write instead.
    for (bad, write) in [
        ("1.5m", "write `1m30s`"),
        ("0.5s", "write `500ms`"),
        ("1h0.5m", "write `1h30s`"),
        ("2.25h", "write `2h15m`"),
        ("1.5", "write whole numbers of a smaller unit"),
        ("0.5ns", "write whole numbers of a smaller unit"),
        ("1.5x", "write whole numbers of a smaller unit"),
    ] {
        let e = Duration::parse(bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.starts_with(&format!(
                "invalid duration `{bad}`: fractions are not supported, {write}; "
            )),
            "{bad:?}: {e}"
        );
    }
    let d = |ms: u64| Duration(std::time::Duration::from_millis(ms));
    assert_eq!(d(5_400_500).to_string(), "1h30m500ms");
    assert_eq!(d(0).to_string(), "0s");
    assert_eq!(d(90_000_000).to_string(), "1d1h");
    assert_eq!(
        Duration(std::time::Duration::from_nanos(1_001)).to_string(),
        "1us1ns"
    );
}

#[test]
fn cpulist_forms() {
    let list = |t: &str| CpuList::parse(t).map(|c| c.iter().collect::<Vec<_>>());
    assert_eq!(list("0-3,6"), Ok(vec![0, 1, 2, 3, 6]));
    assert_eq!(list("7"), Ok(vec![7]));
    assert_eq!(list("0 - 1 , 3"), Ok(vec![0, 1, 3]));
    assert_eq!(list("3,1,2"), Ok(vec![1, 2, 3]));
    assert_eq!(list("8191"), Ok(vec![8191]));
    for bad in [
        "",
        " ",
        "5-3",
        "1,,2",
        ",1",
        "1,",
        "a",
        "1-",
        "-1",
        "8192",
        "0-8192",
        "1-2-3",
        "99999999999",
        "1;2",
    ] {
        assert!(CpuList::parse(bad).is_err(), "{bad:?} should be rejected");
    }
    let reversed = CpuList::parse("5-3")
        .err()
        .map(|e| e.reason)
        .unwrap_or_default();
    assert!(reversed.contains("reversed"), "{reversed}");
    assert_eq!(CpuList::parse_kernel(""), Ok(CpuList::default()));
    assert_eq!(CpuList::parse_kernel(" \n"), Ok(CpuList::default()));
    assert_eq!(list("0,1,2,3,5,7-8").map(|v| v.len()), Ok(7));
    let c = CpuList::parse("0,1,2,3,5,7-8").unwrap_or_default();
    assert_eq!(c.to_string(), "0-3,5,7-8");
    assert!(c.contains(5) && !c.contains(4));
    assert_eq!(c.len(), 7);
    let sub = CpuList::parse("1-2").unwrap_or_default();
    assert!(sub.is_subset(&c));
    assert_eq!(CpuList::default().to_string(), "");
}

#[test]
fn temperature_forms() {
    let md = |t: &str| Temperature::parse(t).map(|t| t.millidegrees);
    assert_eq!(md("85C"), Ok(85_000));
    assert_eq!(md("-10C"), Ok(-10_000));
    assert_eq!(md("72.5C"), Ok(72_500));
    assert_eq!(md("72.5c"), Ok(72_500));
    assert_eq!(md("72.5°C"), Ok(72_500));
    assert_eq!(md("-273.15C"), Ok(-273_150));
    for bad in [
        "",
        "85",
        "C",
        "85F",
        "-C",
        "1.2345C",
        "-274C",
        "1001C",
        "--1C",
        "+1C",
        "8 5C",
        "99999999999999999999C",
    ] {
        assert!(
            Temperature::parse(bad).is_err(),
            "{bad:?} should be rejected"
        );
    }
    assert_eq!(
        Temperature {
            millidegrees: 85_000
        }
        .to_string(),
        "85C"
    );
    assert_eq!(Temperature { millidegrees: -500 }.to_string(), "-0.5C");
    assert_eq!(
        Temperature {
            millidegrees: 72_125
        }
        .to_string(),
        "72.125C"
    );
}

proptest! {
    #[test]
    fn size_roundtrip(b in any::<u64>(), shift in 0u32..60, max in any::<bool>()) {
        let s = if max { Size::Max } else { Size::Bytes(b >> shift << shift) };
        prop_assert_eq!(Size::parse(&s.to_string()), Ok(s));
    }

    #[test]
    fn frequency_roundtrip(khz in 1u64..u64::MAX) {
        let f = Frequency { khz };
        prop_assert_eq!(Frequency::parse(&f.to_string()), Ok(f));
    }

    #[test]
    fn percent_roundtrip(v in 0.0f64..=100.0) {
        let p = Percent(v);
        prop_assert_eq!(Percent::parse(&p.to_string()), Ok(p));
    }

    #[test]
    fn duration_roundtrip(secs in 0u64..10_000_000_000, nanos in 0u32..1_000_000_000) {
        let d = Duration(std::time::Duration::new(secs, nanos));
        prop_assert_eq!(Duration::parse(&d.to_string()), Ok(d));
    }

    #[test]
    fn cpulist_roundtrip(cpus in proptest::collection::btree_set(0u32..=MAX_CPU_INDEX, 1..40)) {
        let c = CpuList(cpus);
        prop_assert_eq!(CpuList::parse(&c.to_string()), Ok(c));
    }

    #[test]
    fn temperature_roundtrip(md in MIN_MILLIDEGREES..=MAX_MILLIDEGREES) {
        let t = Temperature { millidegrees: md };
        prop_assert_eq!(Temperature::parse(&t.to_string()), Ok(t));
    }

    /// Every string of the duration grammar parses to its sum.
    #[test]
    fn duration_grammar(terms in proptest::collection::vec(any::<Option<u32>>(), 8)) {
        let mut text = String::new();
        let mut nanos: u128 = 0;
        let mut used_us = false;
        for ((unit, length), n) in DURATION_UNITS.iter().zip(&terms) {
            // `us` and `µs` are one unit: at most one of them.
            if let Some(n) = n {
                if unit.ends_with("s") && *length == 1_000 {
                    if used_us { continue; }
                    used_us = true;
                }
                text.push_str(&format!("{n}{unit}"));
                nanos += u128::from(*n) * u128::from(*length);
            }
        }
        prop_assume!(!text.is_empty());
        let d = Duration::parse(&text);
        prop_assert_eq!(d.map(|d| d.get().as_nanos()), Ok(nanos), "{}", text);
    }

    /// Every size of the grammar parses to its bytes, in every spelling.
    #[test]
    fn size_grammar(n in 0u64..1_000_000, step in 0usize..6, upper in any::<bool>(), tail in 0usize..4) {
        let letter = ['K', 'M', 'G', 'T', 'P', 'E'][step];
        let letter = if upper { letter } else { letter.to_ascii_lowercase() };
        let tail = ["", "i", "B", "iB"][tail];
        let mult = 1u128 << (10 * (step + 1));
        let want = u128::from(n) * mult;
        let got = Size::parse(&format!("{n}{letter}{tail}")).map(|s| s.bytes());
        if want <= u128::from(u64::MAX) {
            prop_assert_eq!(got, Ok(Some(want as u64)));
        } else {
            prop_assert!(got.is_err());
        }
    }

    /// A rejected size or duration always states its grammar.
    #[test]
    fn errors_state_the_grammar(s in "[0-9a-zA-Zµ. ]{0,12}") {
        if let Err(e) = Size::parse(&s) {
            prop_assert!(e.reason.contains(SIZE_REASON), "{}", e);
        }
        if let Err(e) = Duration::parse(&s) {
            prop_assert!(e.reason.contains(DURATION_REASON) || e.reason.contains("too long"), "{}", e);
        }
    }

    #[test]
    fn parsers_never_panic(s in "\\PC{0,24}") {
        let _ = Size::parse(&s);
        let _ = Frequency::parse(&s);
        let _ = Percent::parse(&s);
        let _ = Duration::parse(&s);
        let _ = CpuList::parse(&s);
        let _ = CpuList::parse_kernel(&s);
        let _ = Temperature::parse(&s);
    }
}
