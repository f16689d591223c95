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
    fn psi_stall(&self, t: &Target, r: Resource, s: Stall, window: Duration) -> Option<Duration> {
        Inputs {
            vals: &HashMap::new(),
            stall: &self.stall,
            now: self.now,
        }
        .psi_stall(t, r, s, window)
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
        f.stall.record(&cpu_some(), now, f.total);
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
                            "INSERT INTO events (ts, run, kind, knob, cause) VALUES (?1, ?2, 'write', ?3, ?4)",
                            rusqlite::params![BASE + t, self.run, w.knob.to_string(), w.cause.to_string()],
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
