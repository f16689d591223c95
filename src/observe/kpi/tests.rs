use super::parse::{cyclictest, statsd};
use super::*;
use proptest::prelude::*;

fn exact(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

proptest! {
    /// Every quantile is within 1/64 of the exact nearest-rank value.
    #[test]
    fn quantiles_within_bound(values in prop::collection::vec(1e-6f64..1e4, 1..400), q in 0.0f64..=1.0) {
        let mut h = Hist::default();
        for v in &values { h.add(*v, 1); }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let e = exact(&sorted, q);
        let got = h.quantile(q).unwrap();
        prop_assert!((got - e).abs() <= e / 64.0 + 1e-12, "q {q}: got {got}, exact {e}");
    }

    /// Merging per-interval histograms is the histogram of all samples.
    #[test]
    fn merge_is_union(a in prop::collection::vec(0.0f64..100.0, 0..100), b in prop::collection::vec(0.0f64..100.0, 0..100)) {
        let (mut ha, mut hb, mut all) = (Hist::default(), Hist::default(), Hist::default());
        for v in &a { ha.add(*v, 1); all.add(*v, 1); }
        for v in &b { hb.add(*v, 1); all.add(*v, 1); }
        ha.merge(&hb);
        prop_assert_eq!(&ha.buckets, &all.buckets);
        prop_assert_eq!(ha.count, all.count);
        prop_assert_eq!(ha.min, all.min);
        prop_assert_eq!(ha.max, all.max);
        prop_assert!((ha.sum - all.sum).abs() < 1e-6);
    }

    /// The recorder's blob round-trips; garbage never panics.
    #[test]
    fn encode_round_trips(values in prop::collection::vec(0.0f64..1e6, 0..200), junk in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut h = Hist::default();
        for v in &values { h.add(*v, 1); }
        let back = Hist::decode(&h.encode(), h.count, h.sum, h.sumsq, h.min, h.max);
        if h.count > 0 { prop_assert_eq!(back, Some(h)); }
        let _ = Hist::decode(&junk, 3, 1.0, 1.0, 0.0, 1.0);
    }

    /// No datagram makes the StatsD parser panic.
    #[test]
    fn statsd_never_panics(d in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = statsd(&d);
    }

    #[test]
    fn cyclictest_never_panics(t in "[0-9# a-zA-Z:\t\n]{0,300}") {
        let _ = cyclictest(&t);
    }
}

#[test]
fn mean_and_stddev() {
    let mut h = Hist::default();
    for v in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
        h.add(v, 1);
    }
    let s = h.summary().unwrap();
    assert_eq!(s.mean, 5.0);
    assert!((s.stddev - 2.0).abs() < 1e-9);
    assert_eq!((s.min, s.max, s.count), (2.0, 9.0, 8));
    assert!(Hist::default().summary().is_none());
}

#[test]
fn zeros_and_refused_values() {
    let mut h = Hist::default();
    h.add(0.0, 3);
    h.add(1.0, 1);
    assert_eq!(h.quantile(0.5), Some(0.0));
    assert_eq!(h.quantile(1.0), Some(1.0));
    for bad in [f64::NAN, -1.0, f64::INFINITY, 1e13] {
        assert!(check_value(bad).is_err(), "{bad}");
        h.add(bad, 1);
    }
    assert_eq!(h.count, 4);
}

#[test]
fn names() {
    assert!(check_name("loop_latency.cam-1").is_ok());
    assert!(check_name("").is_err());
    assert!(check_name("a b").is_err());
    assert!(check_name("ü").is_err());
    assert!(check_name(&"x".repeat(64)).is_ok());
    assert!(check_name(&"x".repeat(65)).is_err());
}

#[test]
fn store_caps_names_and_units() {
    let t0 = Instant::now();
    let s = Store::new(t0);
    for i in 0..MAX_NAMES {
        s.record(&format!("k{i}"), Unit::None, &[(1.0, 1)], t0)
            .unwrap();
    }
    let e = s
        .record("one_more", Unit::None, &[(1.0, 1)], t0)
        .unwrap_err();
    assert_eq!(e.0, Refusal::Names);
    assert!(e.1.contains("too many KPI names"), "{}", e.1);
    // A known name still records.
    assert_eq!(s.record("k0", Unit::None, &[(2.0, 5)], t0), Ok(5));
    let e = s.record("k0", Unit::Seconds, &[(2.0, 1)], t0).unwrap_err();
    assert_eq!(e.0, Refusal::Unit);
    assert_eq!(
        s.record("bad name", Unit::None, &[(1.0, 1)], t0)
            .unwrap_err()
            .0,
        Refusal::Name
    );
    assert_eq!(
        s.record("k1", Unit::None, &[(-1.0, 1)], t0).unwrap_err().0,
        Refusal::Value
    );
    // Nothing to record takes no name.
    assert_eq!(
        s.record("k2", Unit::None, &[], t0).unwrap_err().0,
        Refusal::Value
    );
    let refused: Vec<u64> = s.refused().iter().map(|(_, n)| *n).collect();
    assert_eq!(refused, vec![1, 1, 2, 1, 0, 0]);
    assert_eq!(s.accepted(), MAX_NAMES as u64 + 5);
}

#[test]
fn windows_slide_and_drain() {
    let t0 = Instant::now();
    let s = Store::new(t0);
    s.record("loop", Unit::Seconds, &[(0.010, 100)], t0)
        .unwrap();
    let later = t0 + Duration::from_secs(120);
    s.record("loop", Unit::Seconds, &[(0.001, 100)], later)
        .unwrap();
    // The last minute has only the fast samples; five minutes both.
    let w1 = s.window("loop", Duration::from_secs(60), later).unwrap();
    assert_eq!(w1.count, 100);
    assert!((w1.p99 - 0.001).abs() < 0.001 / 64.0);
    let w5 = s.window("loop", MAX_WINDOW, later).unwrap();
    assert_eq!(w5.count, 200);
    assert!((w5.p99 - 0.010).abs() < 0.010 / 64.0);
    // Past the ring, nothing.
    assert!(s
        .window("loop", MAX_WINDOW, later + Duration::from_secs(400))
        .is_none());
    let d = s.drain();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].2.count, 200);
    assert!(s.drain().is_empty());
    let rows = s.rows(MAX_WINDOW, later);
    assert_eq!(rows[0].total_count, 200);
}

#[test]
fn memory_per_name_is_bounded() {
    // An adversarial spread: every bucket of the range in every slot.
    let t0 = Instant::now();
    let s = Store::new(t0);
    let mut v = MIN_VALUE;
    let mut values = Vec::new();
    while v < MAX_VALUE {
        values.push((v, 1));
        v *= 1.0 + 1.0 / 64.0;
    }
    for slot in 0..(SLOTS as u32 + 5) {
        // Past the budget (every name together) a slot is refused whole.
        match s.record("x", Unit::None, &values, t0 + SLOT * slot) {
            Ok(_) | Err((Refusal::Memory, _)) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    let held = s.buckets_held();
    assert!(held <= ((SLOTS + 2) * 2241).min(MAX_BUCKETS), "{held}");
}

#[test]
fn every_name_together_stays_within_the_bucket_budget() {
    // 64 names, each sending the whole range in every slot: without the
    // budget ~8.9 M buckets (~140 MiB); with it, at most MAX_BUCKETS.
    let t0 = Instant::now();
    let s = Store::new(t0);
    let mut v = MIN_VALUE;
    let mut values = Vec::new();
    while v < MAX_VALUE {
        values.push((v, 1));
        v *= 1.0 + 1.0 / 64.0;
    }
    let mut refused = 0;
    for slot in 0..(SLOTS as u32 + 2) {
        for n in 0..MAX_NAMES {
            if let Err((r, why)) = s.record(&format!("k{n}"), Unit::None, &values, t0 + SLOT * slot)
            {
                assert_eq!(r, Refusal::Memory, "{why}");
                refused += 1;
            }
        }
    }
    let held = s.buckets_held();
    assert!(held <= MAX_BUCKETS, "{held} buckets held");
    assert!(refused > 0, "the budget was never reached");
    let memory = s
        .refused()
        .into_iter()
        .find(|(r, _)| *r == Refusal::Memory)
        .map(|(_, n)| n);
    assert_eq!(memory, Some(refused));
    // A sample into a bucket a name already holds is still taken.
    let last = t0 + SLOT * (SLOTS as u32 + 1);
    assert_eq!(s.record("k0", Unit::None, &[(values[3].0, 1)], last), Ok(1));
}

#[test]
fn statsd_lines() {
    let d = b"loop:2.5|ms\nfps:29.8|g|@0.5\nfps:30|g|#cam:1\r\nhits:1|c\nx:-1|g\nbad line\n\nq:1|ms|@2\ny:abc|ms\n";
    let r = statsd(d);
    assert_eq!(r.len(), 8, "{r:?}");
    assert_eq!(
        r[0],
        Ok(parse::Sample {
            name: "loop".into(),
            unit: Unit::Seconds,
            value: 0.0025
        })
    );
    assert_eq!(r[1].as_ref().map(|s| s.value), Ok(29.8));
    assert_eq!(r[2].as_ref().map(|s| s.unit), Ok(Unit::None));
    assert!(r[3].as_ref().unwrap_err().contains("|c is not a KPI"));
    assert!(r[4].as_ref().unwrap_err().contains("change of a gauge"));
    assert!(r[5].is_err() && r[6].is_err() && r[7].is_err());
}

/// cyclictest 2.x output captured on this machine: `--histfile` (2
/// threads, -h 50, overflows) and `-h 40` on stdout with its status lines.
#[test]
fn cyclictest_real_output() {
    let f = include_str!("../../../tests/fixtures/kpi/cyclictest-histfile.txt");
    let c = cyclictest(f).unwrap();
    assert_eq!(c.max_us, vec![2709, 8822]);
    assert_eq!(c.overflows, vec![15, 14]);
    // `# Total:` counts the histogram's samples (not the overflows).
    let in_hist: u64 = c.threads.iter().flatten().map(|(_, n)| n).sum();
    assert_eq!(in_hist, 1985 + 1986);
    assert_eq!(c.count(), 1985 + 1986 + 29);
    let samples = c.samples();
    assert_eq!(samples.last(), Some(&(8822e-6, 14)));
    let f = include_str!("../../../tests/fixtures/kpi/cyclictest-h-stdout.txt");
    let c = cyclictest(f).unwrap();
    assert_eq!(c.max_us, vec![3466, 4866]);
    assert_eq!(c.overflows, vec![998, 1000]);
    assert_eq!(c.count(), 2000);
    assert!(cyclictest("T: 0 ( 12) P: 0\n").is_err());
    assert!(cyclictest("# Histogram\n000000 000001\n")
        .unwrap_err()
        .contains("cut short"));
    assert!(cyclictest("000000 000001 000002 000003\n# Max Latencies: 00001\n").is_err());
}

#[test]
fn cli_values() {
    assert_eq!(parse_value("29.8"), Ok((Unit::None, 29.8)));
    assert_eq!(
        parse_value("2.5ms").map(|(u, v)| (u, (v * 1e6).round())),
        Ok((Unit::Seconds, 2500.0))
    );
    let (u, v) = parse_value("180us").unwrap();
    assert!(u == Unit::Seconds && (v - 180e-6).abs() < 1e-15, "{v}");
    assert_eq!(parse_value("1s"), Ok((Unit::Seconds, 1.0)));
    for bad in ["", "-1", "1e3", "ms", "1.2.3", "inf", "nan", "3h"] {
        assert!(parse_value(bad).is_err(), "{bad}");
    }
    let v = |a: &[&str]| parse_values(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(v(&["1", "2"]).unwrap().1.len(), 2);
    assert!(v(&["1", "2ms"]).unwrap_err().contains("same kind"));
}
