//! Replay over synthetic recordings written the way the recorder writes
//! them: the event loop's [`Tape`] fed by a fake metrics source, taken and
//! inserted every "recorder interval", with the real [`Supervisor`] playing
//! the daemon and its phase changes and writes written as `rule`/`write`
//! events.

use super::sweep::Sweep;
use super::*;
use crate::engine::condition::Metrics;
use crate::observe::tape::Tape;
use crate::policy::expr::MemEvent;

const BASE: f64 = 1_700_000_000.0;

/// What the fake device shows the engine.
#[derive(Default)]
struct Fake {
    avg: f64,
    total: u64,
    oom: u64,
    mem: u64,
    stall: StallHistory,
    now: Duration,
    /// The stall line is not read (a kernel trigger watches it, silent).
    skip_stall: bool,
}

fn cpu_some() -> StallKey {
    StallKey {
        target: Target::Group("app".into()),
        resource: Resource::Cpu,
        stall: Stall::Some,
    }
}

impl Metrics for Fake {
    fn psi_avg(&self, _: &Target, _: Resource, _: Stall, _: Avg) -> Option<f64> {
        Some(self.avg)
    }
    /// As the daemon's view: a silent armed trigger is no stall.
    fn psi_stall(&self, t: &Target, r: Resource, s: Stall, window: Duration) -> Option<Duration> {
        let view = Inputs {
            vals: &HashMap::new(),
            stall: &self.stall,
            now: self.now,
        }
        .psi_stall(t, r, s, window);
        match view {
            None if self.stall.is_armed(&cpu_some()) => Some(Duration::ZERO),
            v => v,
        }
    }
    fn memory_current(&self, _: &str) -> Option<u64> {
        Some(self.mem)
    }
    fn swap_current(&self, _: &str) -> Option<u64> {
        Some(0)
    }
    fn memory_event(&self, _: &str, _: MemEvent) -> Option<u64> {
        Some(self.oom)
    }
    fn pids_current(&self, _: &str) -> Option<u64> {
        Some(3)
    }
    fn populated(&self, _: &str) -> Option<bool> {
        Some(true)
    }
    fn memory_available(&self) -> Option<u64> {
        Some(1 << 30)
    }
    fn thermal_millic(&self, _: &str) -> Option<i64> {
        Some(50_000)
    }
    fn running(&self, _: &str) -> bool {
        true
    }
    fn exists(&self, _: &str) -> bool {
        true
    }
}

/// A recording being written: the daemon's side.
struct Writer {
    db: Connection,
    policy: Policy,
    tape: Tape,
    sup: Supervisor,
    keys: HashMap<String, i64>,
    run: i64,
    /// Evaluations per recorder interval.
    every: usize,
    n: usize,
}

fn policy(yaml: &str) -> Policy {
    crate::policy::load_bytes("t.yaml", yaml.as_bytes()).unwrap_or_else(|d| panic!("{d}"))
}

impl Writer {
    fn new(yaml: &str, every: usize) -> Writer {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(crate::observe::SCHEMA).unwrap();
        db.execute_batch(tape::SCHEMA).unwrap();
        let policy = policy(yaml);
        Writer {
            tape: Tape::new(&policy, BASE),
            sup: Supervisor::new(&policy),
            policy,
            db,
            keys: HashMap::new(),
            run: 1,
            every,
            n: 0,
        }
    }

    /// One evaluation at `t` seconds, after those the engine's deadlines
    /// ask for before it (the daemon wakes for them).
    fn eval(&mut self, t: f64, f: &mut Fake) {
        let now = Duration::from_secs_f64(t);
        while let Some(d) = self.sup.next_deadline().filter(|d| *d < now && *d > f.now) {
            self.eval_at(d, f);
        }
        self.eval_at(now, f);
        self.n += 1;
        if self.n.is_multiple_of(self.every) {
            self.flush();
        }
    }

    fn eval_at(&mut self, now: Duration, f: &mut Fake) {
        let t = now.as_secs_f64();
        f.now = now;
        if !f.skip_stall {
            f.stall.record(&cpu_some(), now, f.total);
        }
        self.tape.record(now, &*f, &f.stall, &[]);
        let effects = self.sup.step(&self.policy, now, &*f, &|_| None);
        for e in effects {
            match e {
                Effect::Phase { rule, phase } => {
                    self.db
                        .execute(
                            "INSERT INTO events (ts, run, kind, rule, state) VALUES (?1, ?2, 'rule', ?3, ?4)",
                            rusqlite::params![BASE + t, self.run, rule, phase.as_str()],
                        )
                        .unwrap();
                }
                Effect::Write(w) => {
                    self.db
                        .execute(
                            "INSERT INTO events (ts, run, kind, knob, old, cause) VALUES (?1, ?2, 'write', ?3, ?4, ?5)",
                            rusqlite::params![
                                BASE + t,
                                self.run,
                                w.knob.to_string(),
                                w.old.as_ref().map(|v| w.knob.render(v)),
                                w.cause.to_string()
                            ],
                        )
                        .unwrap();
                }
                _ => {}
            }
        }
    }

    fn flush(&mut self) {
        let (chunks, lost) = tape::take(&self.tape.shared());
        assert_eq!(lost, 0);
        tape::insert(&self.db, self.run, &mut self.keys, &chunks).unwrap();
    }

    fn recording(&mut self) -> Recording {
        self.flush();
        Recording::read(&self.db, None).unwrap()
    }
}

const AVG_POLICY: &str = "version: 1\nproduct: t\ngroups:\n  app: { cpu: { weight: 100 } }\nrules:\n  - name: hot\n    when: app.memory.some.avg10 > 10%\n    while:\n      - set app.cpu.weight = 200\n";

/// avg10 per second: three runs above 10 (2 s at 15, 3 s at 25, 1 s at 35).
const AVGS: [f64; 12] = [
    5.0, 15.0, 15.0, 5.0, 25.0, 25.0, 25.0, 5.0, 35.0, 5.0, 5.0, 5.0,
];

fn avg_recording() -> Recording {
    let mut w = Writer::new(AVG_POLICY, 5);
    let mut f = Fake::default();
    for (i, a) in AVGS.iter().enumerate() {
        f.avg = *a;
        w.eval(i as f64, &mut f);
    }
    w.recording()
}

#[test]
fn the_sweep_gives_the_hand_computed_firings() {
    let rec = avg_recording();
    assert_eq!(rec.rows.len(), 3, "one tape row per recorder interval");
    let p = policy(AVG_POLICY);
    let s = Sweep::parse(&p, "hot.threshold=10%..40%/10%").unwrap();
    assert_eq!(s.values, ["10%", "20%", "30%", "40%"]);
    let rows = s.run(&p, &rec);
    let got: Vec<(&str, usize, f64, usize)> = rows
        .iter()
        .map(|r| (r.value.as_str(), r.firings, r.active_seconds, r.writes))
        .collect();
    // By hand: > 10: {15,15} {25,25,25} {35} = 3 episodes, 2+3+1 s, a claim
    // and a release each; > 20: 2, 3+1 s; > 30: 1, 1 s; > 40: none.
    assert_eq!(
        got,
        [
            ("10%", 3, 6.0, 6),
            ("20%", 2, 4.0, 4),
            ("30%", 1, 1.0, 2),
            ("40%", 0, 0.0, 0)
        ]
    );
    // The metric as written names the comparison too; `for` is swept.
    let s = Sweep::parse(&p, "hot.app.memory.some.avg10=20%..20%/1%").unwrap();
    assert_eq!(s.run(&p, &rec)[0].firings, 2);
    let s = Sweep::parse(&p, "hot.for=0s..2s/1s").unwrap();
    let f: Vec<usize> = s.run(&p, &rec).iter().map(|r| r.firings).collect();
    // for 1s: the 2 s and 3 s runs; for 2s: the 3 s run only.
    assert_eq!(f, [3, 2, 1]);
    assert!(sweep::text(&s, &s.run(&p, &rec)).contains("firings"));
}

#[test]
fn a_changed_policy_is_evaluated_at_its_own_deadlines_too() {
    // Evaluations were taped every second; `for: 1500ms` comes due between
    // two of them, and the daemon running that policy would have woken then.
    let rec = avg_recording();
    let p = policy(AVG_POLICY);
    let s = Sweep::parse(&p, "hot.for=1500ms..1500ms/1ms").unwrap();
    let out = simulate(&s.apply(&p, "1500ms").unwrap(), &rec);
    let starts: Vec<f64> = out.rules[0]
        .episodes
        .iter()
        .map(|e| e.start - BASE)
        .collect();
    // Pending at 1 and at 4; due at 2.5 and 5.5, with the inputs as last
    // taped (15 and 25). Without the deadline steps: only [6.0].
    assert_eq!(starts, [2.5, 5.5]);
}

#[test]
fn a_knob_without_baseline_returns_to_the_recorded_original() {
    // The daemon seeds such a knob from its journal (here: 100); a release
    // writes it back. The replay seeds it from the first recorded write's
    // `old`, so it counts the same writes.
    let yaml = AVG_POLICY.replace("app: { cpu: { weight: 100 } }", "app: {}");
    let mut w = Writer::new(&yaml, 5);
    let knob = crate::knobs::Knob::parse("app.cpu.weight").unwrap();
    let v = knob.parse_value("100").unwrap();
    w.sup.seed(&knob, v.clone(), Some(v));
    let mut f = Fake::default();
    for (i, a) in AVGS.iter().enumerate() {
        f.avg = *a;
        w.eval(i as f64, &mut f);
    }
    let rec = w.recording();
    assert_eq!(
        rec.originals.get("app.cpu.weight").map(String::as_str),
        Some("100")
    );
    let out = simulate(&policy(&yaml), &rec);
    let timeline: Vec<(f64, &str)> = out.knobs["app.cpu.weight"]
        .iter()
        .map(|(t, v)| (t - BASE, v.as_str()))
        .collect();
    assert_eq!(
        timeline,
        [
            (1.0, "200"),
            (3.0, "100"),
            (4.0, "200"),
            (7.0, "100"),
            (8.0, "200"),
            (9.0, "100")
        ]
    );
    let d = &diff(&out, &rec)[0];
    assert_eq!((d.recorded_writes, d.replayed_writes), (6, 6), "{d:?}");
}

#[test]
fn the_html_page_charts_the_taped_inputs_with_the_firings_marked() {
    let rec = avg_recording();
    let avg: Vec<(f64, f64)> = super::html::series(&rec)["app.memory.some.avg10"]
        .iter()
        .map(|(t, v)| (t - BASE, *v))
        .collect();
    // Every change, and each row's restatement (rows start at 0, 5, 10).
    assert_eq!(
        avg,
        [
            (0.0, 5.0),
            (1.0, 15.0),
            (3.0, 5.0),
            (4.0, 25.0),
            (5.0, 25.0),
            (7.0, 5.0),
            (8.0, 35.0),
            (9.0, 5.0),
            (10.0, 5.0)
        ]
    );
    let mut w = Writer::new(MIXED, 4);
    let mut f = Fake::default();
    mixed(&mut w, 0, 70, &mut f);
    let rec = w.recording();
    let p = policy(MIXED);
    let out = simulate(&p, &rec);
    let page = super::html::page(&p, &out, &diff(&out, &rec), &rec);
    let stall = super::html::series(&rec)["app.cpu.some (stall %)"].clone();
    // 50 ms between the evaluations at 0 and 1.25 s: 4 %; the burst's
    // 300 ms a second shows as 24 % or more.
    assert_eq!(stall[0], (BASE + 1.25, 4.0));
    assert!(stall.iter().any(|p| p.1 >= 24.0), "{stall:?}");
    for want in [
        "<svg",
        "would fire: app.cpu.some",
        "fired in the recording",
        "would write app.cpu.weight = 300",
        "app.cpu.some (stall %)",
    ] {
        assert!(page.contains(want), "no {want}");
    }
    assert_eq!(
        page.matches("<svg").count(),
        6,
        "one chart per input of each rule"
    );
}

#[test]
fn a_bad_sweep_is_refused_with_the_reason() {
    let p = policy(AVG_POLICY);
    for (spec, says) in [
        ("cold.threshold=1%..2%/1%", "names no rule"),
        ("hot.threshold=1%..2G/1%", "one unit"),
        ("hot.threshold=5%..1%/1%", "HI at least LO"),
        ("hot.app.cpu.some=1..2/1", "0 comparison"),
        ("hot.threshold=1..2/1", "compares with"),
        ("hot.threshold", "RULE.THRESHOLD"),
    ] {
        let e = Sweep::parse(&p, spec).unwrap_err();
        assert!(e.contains(says), "{spec}: {e}");
    }
}

#[test]
fn a_rule_whose_input_is_not_recorded_is_a_named_gap() {
    let rec = avg_recording();
    let p = policy("version: 1\nproduct: t\ngroups:\n  app: {}\nrules:\n  - name: hot\n    when: app.memory.some.avg10 > 10%\n    then: [compact memory]\n  - name: big\n    when: app.memory.current > 1G\n    then: [compact memory]\n");
    let out = simulate(&p, &rec);
    assert_eq!(
        out.gaps,
        [Gap {
            rule: "big".into(),
            input: "app.memory.current".into(),
            from: BASE,
            to: BASE + 11.0,
        }]
    );
    assert_eq!(
        out.rules[0].firings(),
        3,
        "the recorded input still replays"
    );
    let t = text(Path::new("p.yaml"), &out, &diff(&out, &rec));
    assert!(
        t.contains("GAP: app.memory.current is not in the recording from"),
        "{t}"
    );

    // A reload in the middle that stops reading an input: the gap is that span.
    let mut w = Writer::new(AVG_POLICY, 2);
    let mut f = Fake::default();
    for i in 0..4 {
        w.eval(f64::from(i), &mut f);
    }
    w.flush();
    let other = policy("version: 1\nproduct: t\ngroups:\n  app: {}\nrules:\n  - name: big\n    when: app.memory.current > 1G\n    then: [compact memory]\n");
    w.tape.set_policy(&other);
    for i in 4..8 {
        w.eval(f64::from(i), &mut f);
    }
    w.tape.set_policy(&w.policy.clone());
    for i in 8..10 {
        w.eval(f64::from(i), &mut f);
    }
    let out = simulate(&policy(AVG_POLICY), &w.recording());
    let spans: Vec<(f64, f64)> = out
        .gaps
        .iter()
        .map(|g| (g.from - BASE, g.to - BASE))
        .collect();
    assert_eq!(spans, [(4.0, 7.0)]);
    assert_eq!(out.gaps[0].input, "app.memory.some.avg10");
}

const MIXED: &str = "version: 1\nproduct: t\ngroups:\n  app: { cpu: { weight: 100 }, memory: { high: 2G } }\nrules:\n  - name: stall\n    when: app.cpu.some > 200ms/1s\n    for: 2s\n    hold: 1s\n    while:\n      - set app.cpu.weight = 300\n  - name: oom\n    when: app.memory.events.oom_kill > 0/5s\n    then: [compact memory]\n  - name: mix\n    when: app.memory.some.avg10 > 30% or (running(camd) and app.memory.current > 512M and thermal.cpu.temp > 40C)\n    while:\n      - set app.memory.high = 1G\n";

/// A run with stalls, OOM kills and memory swings, taped and recorded.
fn mixed(w: &mut Writer, from: u32, to: u32, f: &mut Fake) {
    for i in from..to {
        // 300 ms of stall a second in 10..20 and 40..43, 50 ms otherwise.
        f.total += if (10..20).contains(&i) || (40..43).contains(&i) {
            300_000
        } else {
            50_000
        };
        if i == 25 || i == 27 || i == 50 {
            f.oom += 1;
        }
        f.avg = if (30..35).contains(&i) { 40.0 } else { 2.0 };
        f.mem = if (55..58).contains(&i) {
            600 << 20
        } else {
            100 << 20
        };
        w.eval(f64::from(i) + 0.25 * f64::from(i % 3), f);
    }
}

#[test]
fn replaying_the_recorded_policy_reproduces_the_recorded_firings() {
    let mut w = Writer::new(MIXED, 4);
    let mut f = Fake::default();
    mixed(&mut w, 0, 70, &mut f);
    let rec = w.recording();
    let out = simulate(&policy(MIXED), &rec);
    assert!(
        out.gaps.is_empty() && out.unavailable.is_empty(),
        "{:?} {:?}",
        out.gaps,
        out.unavailable
    );
    let firings: Vec<usize> = out.rules.iter().map(RuleOut::firings).collect();
    assert_eq!(firings, [2, 2, 2], "{:#?}", out.rules);
    for d in diff(&out, &rec) {
        assert!(d.recorded > 0, "{d:?}");
        assert_eq!(
            (d.matched, d.recorded, d.replayed),
            (d.recorded, d.replayed, d.matched),
            "{d:?}"
        );
        assert_eq!(d.recorded_writes, d.replayed_writes, "{d:?}");
    }
    // Exactly, not only within the tolerance: the same evaluation times.
    let recorded = recorded_episodes(&rec);
    for r in &out.rules {
        let starts: Vec<f64> = r.episodes.iter().map(|e| e.start).collect();
        let rec_starts: Vec<f64> = recorded[&r.name].iter().map(|e| e.0).collect();
        assert_eq!(starts, rec_starts, "{}", r.name);
    }
    assert!(
        out.rules[0].episodes[0].why.contains("app.cpu.some"),
        "{:?}",
        out.rules[0].episodes[0]
    );
    // A lower stall threshold fires earlier and the diff says so.
    let lower = Sweep::parse(&policy(MIXED), "stall.threshold=30ms..30ms/1ms").unwrap();
    let p = lower.apply(&policy(MIXED), "30ms").unwrap();
    let out = simulate(&p, &rec);
    let d = &diff(&out, &rec)[0];
    assert!(
        out.rules[0].episodes[0].start < recorded["stall"][0].0,
        "{:?}",
        out.rules[0]
    );
    assert!(
        !d.only_replay.is_empty() && !d.only_recording.is_empty(),
        "{d:?}"
    );
    let t = text(Path::new("p.yaml"), &out, &diff(&out, &rec));
    assert!(t.contains("would fire (did not in the recording)"), "{t}");
    // A longer `hold` starts each episode at the same evaluation but ends
    // it later (by more than the tape rows' spacing): matched, yet not
    // "same".
    let held = Sweep::parse(&policy(MIXED), "stall.hold=15s..15s/1s").unwrap();
    let p = held.apply(&policy(MIXED), "15s").unwrap();
    let out = simulate(&p, &rec);
    let d = &diff(&out, &rec)[0];
    assert!(
        d.matched > 0 && !d.ends_apart.is_empty(),
        "{d:?} (within {} s)",
        rec.interval()
    );
    assert!(
        d.ends_apart.iter().all(|(_, x)| x.is_none_or(|x| x > 0.0)),
        "{d:?}"
    );
    let t = text(Path::new("p.yaml"), &out, &diff(&out, &rec));
    assert!(
        t.contains("later than in the recording") && t.contains("— differs"),
        "{t}"
    );
}

#[test]
fn a_line_behind_a_silent_armed_trigger_replays_as_no_stall() {
    // A real kernel: the daemon registered a PSI trigger and does not poll
    // the line; between wakes the engine reads "no stall" from the trigger's
    // silence. The tape keeps that flag, so the replay reads the same.
    let yaml = "version: 1\nproduct: t\ngroups:\n  app: {}\nrules:\n  - name: stall\n    when: app.cpu.some > 100ms/1s\n    then: [compact memory]\n  - name: hot\n    when: app.memory.some.avg10 > 10%\n    then: [compact memory]\n";
    let mut w = Writer::new(yaml, 3);
    let mut f = Fake::default();
    f.stall.set_armed(&cpu_some(), true);
    // Two reads (a window's worth of history), then only the trigger's silence.
    w.eval(0.0, &mut f);
    f.total += 10_000;
    w.eval(0.5, &mut f);
    f.skip_stall = true;
    for i in 1..6 {
        f.avg = if i == 3 { 20.0 } else { 0.0 };
        w.eval(f64::from(i), &mut f);
    }
    let rec = w.recording();
    let out = simulate(&policy(yaml), &rec);
    assert!(out.unavailable.is_empty(), "{:?}", out.unavailable);
    assert!(out.gaps.is_empty(), "{:?}", out.gaps);
    assert_eq!(out.rules[1].firings(), 1);
}

#[test]
fn a_daemon_restart_starts_a_new_engine_and_the_json_has_the_parts() {
    let mut w = Writer::new(MIXED, 4);
    let mut f = Fake::default();
    mixed(&mut w, 0, 30, &mut f);
    w.flush();
    w.run = 2;
    w.sup = Supervisor::new(&w.policy);
    // The recorder opens a run with a `start` event.
    w.db.execute(
        "INSERT INTO events (ts, run, kind) VALUES (?1, 2, 'start')",
        [BASE + 29.9],
    )
    .unwrap();
    mixed(&mut w, 30, 70, &mut f);
    let rec = w.recording();
    let out = simulate(&policy(MIXED), &rec);
    for d in diff(&out, &rec) {
        assert!(
            d.only_replay.is_empty() && d.only_recording.is_empty(),
            "{d:?}"
        );
    }
    let v = serde_json::to_value(&out).unwrap();
    assert!(v["rules"][0]["episodes"][0]["why"].is_string());
    assert!(v["actions"].as_array().is_some_and(|a| !a.is_empty()));
}

#[test]
fn a_recording_without_a_tape_says_so() {
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(crate::observe::SCHEMA).unwrap();
    let rec = Recording::read(&db, None).unwrap();
    assert!(rec.rows.is_empty() && rec.span().is_none());
    // A damaged row is named, not replayed.
    db.execute_batch(tape::SCHEMA).unwrap();
    db.execute(
        "INSERT INTO tape (ts, run, until, evals, data) VALUES (5, 1, 6, 2, x'0102')",
        [],
    )
    .unwrap();
    let rec = Recording::read(&db, None).unwrap();
    assert_eq!(rec.damaged, [(5.0, 6.0)]);
}

#[test]
fn hostile_times_and_values_do_not_panic() {
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(crate::observe::SCHEMA).unwrap();
    db.execute_batch(tape::SCHEMA).unwrap();
    db.execute(
        "INSERT INTO tape_keys (id, name, scale) VALUES (1, 'app.memory.some.avg10', 0.0)",
        [],
    )
    .unwrap();
    // Three evaluations, the key watched, values 1, -1 and i64::MAX.
    let c = tape::Chunk {
        keys: vec![("app.memory.some.avg10".into(), 0.0)],
        evals: vec![0.0, 1e18, 1e19],
        values: vec![vec![(0, Some(1)), (1, Some(-1)), (2, Some(i64::MAX))]],
        triggers: vec![],
    };
    let data = tape::encode(&c, &[1], &HashMap::new());
    for ts in [-1e300, 1e300, 0.0] {
        db.execute(
            "INSERT INTO tape (ts, run, until, evals, data) VALUES (?1, 1, ?1, 3, ?2)",
            rusqlite::params![ts, data],
        )
        .unwrap();
    }
    let rec = Recording::read(&db, None).unwrap();
    assert_eq!((rec.rows.len(), rec.damaged.len()), (3, 0));
    let out = simulate(&policy(AVG_POLICY), &rec);
    assert_eq!(out.evaluations, 9);
    let _ = text(Path::new("p"), &out, &diff(&out, &rec));
    let s = Sweep::parse(&policy(AVG_POLICY), "hot.threshold=0%..1e300%/1e299%");
    assert!(s.is_err() || s.is_ok_and(|s| s.values.len() <= 1000));
}

#[test]
fn since_keeps_the_last_part() {
    let mut w = Writer::new(AVG_POLICY, 3);
    let mut f = Fake::default();
    for (i, a) in AVGS.iter().enumerate() {
        f.avg = *a;
        w.eval(i as f64, &mut f);
    }
    w.flush();
    let rec = Recording::read(&w.db, Some(Duration::from_secs(4))).unwrap();
    let (from, _) = rec.span().unwrap();
    assert_eq!(from - BASE, 6.0, "the rows reaching into the last 4 s");
    assert_eq!(simulate(&policy(AVG_POLICY), &rec).rules[0].firings(), 2);
}

use std::path::Path;

/// The tape's cost for policies/iq9100-vision.yaml, a day
/// at its 1 s tick, written in its 10 s recorder rows to a SQLite file as
/// the recorder writes it. Busy: every input the rules read changes at
/// every evaluation (a CPU stall counter ticking up to 120 ms a second,
/// avg10 moving, the big cluster's temperature in 0.1 °C steps, MemAvailable
/// by up to 8 MiB); quiet: only the stall counter moves. Printed for the
/// README; bounded so an encoding regression fails.
#[test]
fn the_iq9100_tape_costs_little_per_day() {
    let p = crate::policy::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/iq9100-vision.yaml"
    )))
    .unwrap_or_else(|d| panic!("{d}"));
    let names: Vec<String> = tape::leaves(&p).into_iter().map(|l| l.name).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let mut lcg = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (lcg >> 33) % n
    };
    for (busy, bound) in [(true, 2_500_000u64), (false, 1_500_000)] {
        let dir = tempfile::tempdir().unwrap();
        let db = Connection::open(dir.path().join("t.db")).unwrap();
        db.execute_batch("PRAGMA synchronous = OFF;").unwrap();
        db.execute_batch(crate::observe::SCHEMA).unwrap();
        db.execute_batch(tape::SCHEMA).unwrap();
        let size = |db: &Connection| -> u64 {
            let pages: i64 = db.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
            let page: i64 = db.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
            (pages * page) as u64
        };
        let before = size(&db);
        let mut t = Tape::new(&p, BASE);
        let mut keys = HashMap::new();
        let mut f = Fake {
            mem: 0,
            ..Default::default()
        };
        let (mut temp, mut avail) = (60_000i64, 2_000_000_000i64);
        struct Busy<'a>(&'a Fake, i64, i64);
        impl Metrics for Busy<'_> {
            fn psi_avg(&self, a: &Target, b: Resource, c: Stall, d: Avg) -> Option<f64> {
                self.0.psi_avg(a, b, c, d)
            }
            fn psi_stall(
                &self,
                _: &Target,
                _: Resource,
                _: Stall,
                _: Duration,
            ) -> Option<Duration> {
                None
            }
            fn memory_current(&self, _: &str) -> Option<u64> {
                None
            }
            fn swap_current(&self, _: &str) -> Option<u64> {
                None
            }
            fn memory_event(&self, _: &str, _: MemEvent) -> Option<u64> {
                Some(0)
            }
            fn pids_current(&self, _: &str) -> Option<u64> {
                None
            }
            fn populated(&self, _: &str) -> Option<bool> {
                None
            }
            fn memory_available(&self) -> Option<u64> {
                u64::try_from(self.2).ok()
            }
            fn thermal_millic(&self, _: &str) -> Option<i64> {
                Some(self.1)
            }
            fn running(&self, _: &str) -> bool {
                false
            }
            fn exists(&self, _: &str) -> bool {
                true
            }
        }
        let key = StallKey {
            target: Target::Group("inference".into()),
            resource: Resource::Cpu,
            stall: Stall::Some,
        };
        for s in 0..86_400u64 {
            let now = Duration::from_secs(s);
            f.total += rnd(120_000);
            if busy {
                f.avg = rnd(3000) as f64 / 100.0;
                temp += (rnd(11) as i64 - 5) * 100;
                avail += (rnd(4097) as i64 - 2048) * 4096;
            }
            f.stall.record(&key, now, f.total);
            t.record(now, &Busy(&f, temp, avail), &f.stall, &[]);
            if s % 10 == 9 {
                let (chunks, _) = tape::take(&t.shared());
                let tx = db.unchecked_transaction().unwrap();
                tape::insert(&tx, 1, &mut keys, &chunks).unwrap();
                tx.commit().unwrap();
            }
        }
        let payload: i64 = db
            .query_row("SELECT sum(length(data)) FROM tape", [], |r| r.get(0))
            .unwrap();
        let grown = size(&db) - before;
        eprintln!(
            "iq9100 tape, {}: {grown} bytes/day on disk ({payload} bytes of encoded rows)",
            if busy { "busy" } else { "quiet" }
        );
        assert!(grown < bound, "{grown} bytes/day");
        // And the day replays: every evaluation, no gap.
        let t0 = std::time::Instant::now();
        let rec = Recording::read(&db, None).unwrap();
        let out = simulate(&p, &rec);
        eprintln!(
            "  replayed {} evaluations in {:.2?} (debug build); firings {:?}",
            out.evaluations,
            t0.elapsed(),
            out.rules.iter().map(RuleOut::firings).collect::<Vec<_>>()
        );
        assert_eq!(out.evaluations, 86_400);
        assert!(
            out.gaps.is_empty() && out.damaged.is_empty(),
            "{:?}",
            out.gaps
        );
    }
}
