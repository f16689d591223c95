//! Rule evaluation cost per tick: `Supervisor::step` on synthetic policies
//! (10 / 100 / 1000 rules over 4 / 64 / 512 groups), and — separately,
//! because it is file I/O — `daemon::sample::Sampler::sample` on a fake tree.
//!
//!   cargo bench --bench tick              (all tables)
//!   cargo bench --bench tick -- step      (engine only)
//!   cargo bench --bench tick -- sample    (sampler only)
//!   cargo bench --bench tick -- iq9100    (the shipped policy's idle tick and rescan, piece by piece)
//!
//! Prints numbers; asserts nothing (except that the synthetic policies load
//! and that rules really fire and clear, so the numbers mean something).
//!
//! The engine's synthetic metrics vary per tick: every group's PSI averages,
//! stall time and memory.current follow slow waves with a per-group phase, and
//! its memory.events counters step every few ticks, so on a typical tick a
//! few percent of the rules change phase (fire, clear, step) and the rest are
//! re-evaluated with no change. A second run ("quiet") keeps every condition
//! false: the idle tick the daemon runs most of its life.

use cgwarden::bench::{
    group_paths, sampled_needs, Avg, CgroupFs, Effect, Knob, KnobValue, MemEvent, Metrics, Policy,
    Resource, Sampler, Stall, Supervisor, Target, View,
};
use cgwarden::testing::{FakeProcess, FakeTree, Root};
use std::hint::black_box;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- policies

/// A policy with `rules` rules spread over `groups` groups (g0 … gN-1),
/// cycling through four rule shapes that together use every metric kind the
/// issue names (PSI average, memory.current, memory.events, stall time), `and`
/// / `or` / `not`, `for`/`hold`/`cooldown`, while-claims (group knobs and a
/// first-wins sysctl shared by many rules) and then-steps with a hook.
fn policy_text(rules: usize, groups: usize) -> String {
    policy_text_with(rules, groups, true)
}

/// `baselines: false`: the groups set no knobs, so the knob table holds only
/// what the rules touch (isolates the per-tick cost of the baseline entries).
fn policy_text_with(rules: usize, groups: usize, baselines: bool) -> String {
    let mut y = String::from("version: 1\nproduct: bench\ngroups:\n");
    for g in 0..groups {
        if baselines {
            y += &format!(
                "  g{g}:\n    cpu: {{ weight: 100 }}\n    memory: {{ high: 4G, max: 10G }}\n"
            );
        } else {
            y += &format!("  g{g}: {{}}\n");
        }
    }
    y += "system:\n  sysctl: { vm.swappiness: 30 }\n";
    y += "hooks:\n  alert: { exec: [/bin/true], min_interval: 1m }\n";
    y += "rules:\n";
    for i in 0..rules {
        let g = i % groups;
        let h = (i * 7 + 3) % groups;
        y += &format!("  - name: r{i}\n");
        y += &match i % 4 {
            0 => format!(
                "    when: g{g}.memory.some.avg10 > 10%\n    for: 2s\n    then: [\"raise g{g}.memory.high by 64M up to 8G\", \"hook alert\"]\n    cooldown: 5s\n"
            ),
            1 => format!(
                "    when: g{g}.memory.current > 2G and g{g}.cpu.some.avg60 > 5%\n    while: [\"set g{g}.cpu.weight = 200\"]\n    hold: 1s\n"
            ),
            2 => format!(
                "    when: g{g}.memory.events.oom_kill > 0 or g{h}.memory.events.high > 0\n    while: [\"set sysctl.vm.swappiness = {}\"]\n    hold: 3s\n",
                60 + i % 40
            ),
            _ => format!(
                "    when: g{g}.cpu.some > 100ms/1s or (g{h}.io.full.avg10 > 20% and not g{g}.memory.current < 1G)\n    while: [\"set g{g}.memory.high = 6G\", \"hook alert\"]\n    hold: 2s\n"
            ),
        };
    }
    y
}

fn load(rules: usize, groups: usize) -> Policy {
    load_with(rules, groups, true)
}

fn load_with(rules: usize, groups: usize, baselines: bool) -> Policy {
    let text = policy_text_with(rules, groups, baselines);
    cgwarden::bench::load_bytes("bench.yaml", text.as_bytes()).unwrap_or_else(|d| {
        panic!("synthetic policy ({rules} rules, {groups} groups) is invalid:\n{d}")
    })
}

// ---------------------------------------------------------------- metrics

/// Synthetic metrics at tick `k`. Group index = the number after `g`.
struct Synth {
    k: u64,
    quiet: bool,
}

fn gidx(name: &str) -> u64 {
    name[1..].parse().unwrap_or(0)
}

/// A triangle wave in [0, 1) with period `p` ticks and a per-group phase.
fn wave(k: u64, g: u64, p: u64, salt: u64) -> f64 {
    let x = (k + g.wrapping_mul(2654435761).wrapping_add(salt) % p) % p;
    let half = p / 2;
    if x < half {
        x as f64 / half as f64
    } else {
        (p - x) as f64 / half as f64
    }
}

impl Metrics for Synth {
    fn psi_avg(&self, t: &Target, res: Resource, _s: Stall, avg: Avg) -> Option<f64> {
        if self.quiet {
            return Some(0.0);
        }
        let g = match t {
            Target::Group(n) => gidx(n),
            Target::Host => 0,
        };
        let p = match avg {
            Avg::Avg10 => 23,
            Avg::Avg60 => 41,
            Avg::Avg300 => 97,
        };
        Some(30.0 * wave(self.k, g, p, res as u64))
    }
    fn psi_stall(&self, t: &Target, _r: Resource, _s: Stall, _w: Duration) -> Option<Duration> {
        if self.quiet {
            return Some(Duration::ZERO);
        }
        let g = match t {
            Target::Group(n) => gidx(n),
            Target::Host => 0,
        };
        Some(Duration::from_micros(
            (200_000.0 * wave(self.k, g, 31, 5)) as u64,
        ))
    }
    fn memory_current(&self, g: &str) -> Option<u64> {
        if self.quiet {
            return Some(512 << 20);
        }
        Some(((4u64 << 30) as f64 * wave(self.k, gidx(g), 37, 11)) as u64)
    }
    fn swap_current(&self, _: &str) -> Option<u64> {
        Some(0)
    }
    fn memory_event(&self, g: &str, ev: MemEvent) -> Option<u64> {
        if self.quiet {
            return Some(3);
        }
        let every = match ev {
            MemEvent::OomKill => 29,
            _ => 13,
        };
        Some((self.k + gidx(g)) / every)
    }
    fn pids_current(&self, _: &str) -> Option<u64> {
        Some(10)
    }
    fn populated(&self, _: &str) -> Option<bool> {
        Some(true)
    }
    fn memory_available(&self) -> Option<u64> {
        Some(8 << 30)
    }
    fn thermal_millic(&self, _: &str) -> Option<i64> {
        Some(50_000)
    }
    fn running(&self, _: &str) -> bool {
        false
    }
    fn exists(&self, _: &str) -> bool {
        true
    }
}

fn no_current(_: &Knob) -> Option<KnobValue> {
    None
}

// ---------------------------------------------------------------- stats

struct Stats {
    median: Duration,
    p99: Duration,
    max: Duration,
    mean: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let n = v.len();
    let total: Duration = v.iter().sum();
    Stats {
        median: v[n / 2],
        p99: v[(n * 99 / 100).min(n - 1)],
        max: v[n - 1],
        mean: total / n as u32,
    }
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

// ---------------------------------------------------------------- engine

fn bench_step(rules: usize, groups: usize, quiet: bool, baselines: bool) {
    let p = load_with(rules, groups, baselines);
    let mut sup = Supervisor::new(&p);
    let ticks: u64 = match rules {
        r if r >= 1000 => 3000,
        r if r >= 100 => 10_000,
        _ => 30_000,
    };
    let warm = 300;
    let mut times = Vec::with_capacity(ticks as usize);
    let (mut writes, mut phases, mut hooks) = (0u64, 0u64, 0u64);
    for k in 0..warm + ticks {
        let m = Synth { k, quiet };
        let now = Duration::from_secs(k);
        let t0 = Instant::now();
        let eff = sup.step(&p, now, &m, &no_current);
        let dt = t0.elapsed();
        if k >= warm {
            times.push(dt);
            for e in &eff {
                match e {
                    Effect::Write(_) => writes += 1,
                    Effect::Phase { .. } => phases += 1,
                    Effect::Hook { .. } => hooks += 1,
                    _ => {}
                }
            }
        }
        black_box(eff);
    }
    if !quiet {
        assert!(
            phases > 0 && writes > 0,
            "synthetic metrics never changed a rule"
        );
    }
    let s = stats(times);
    let n = ticks as f64;
    println!(
        "{:>6} {:>6} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9.1} {:>8.2} {:>8.2} {:>7.2}",
        rules,
        groups,
        match (quiet, baselines) {
            (false, _) => "varying",
            (true, true) => "quiet",
            (true, false) => "quiet-nb",
        },
        ticks,
        us(s.median),
        us(s.p99),
        us(s.max),
        us(s.mean),
        s.median.as_nanos() as f64 / rules as f64,
        phases as f64 / n,
        writes as f64 / n,
        hooks as f64 / n,
    );
}

fn engine() {
    println!("== Supervisor::step per tick (synthetic metrics, simulated 1 s ticks, 300 warm-up ticks) ==");
    println!(
        "{:>6} {:>6} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8} {:>7}",
        "rules",
        "groups",
        "metrics",
        "ticks",
        "median us",
        "p99 us",
        "max us",
        "mean us",
        "ns/rule",
        "phase/t",
        "write/t",
        "hook/t"
    );
    for rules in [10, 100, 1000] {
        for groups in [4, 64, 512] {
            bench_step(rules, groups, false, true);
        }
    }
    for rules in [10, 100, 1000] {
        for groups in [4, 64, 512] {
            bench_step(rules, groups, true, true);
        }
    }
    for rules in [10, 1000] {
        bench_step(rules, 512, true, false);
    }
    println!("(ns/rule = median / rules; phase/t, write/t, hook/t = effects per tick)");
    println!("(varying: ~16 % of rules change phase per tick; quiet: every condition false, nothing changes;");
    println!(" quiet-nb: quiet, and the groups set no baseline knobs, so the knob table holds only rule knobs)");
}

// ---------------------------------------------------------------- sampler

const PSI: &str = "some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.50 avg60=0.30 avg300=0.10 total=45678\n";

/// A fake tree with `groups` groups laid out as the kernel shows them, and
/// `procs` fake processes in /proc.
fn fake_tree(dir: &std::path::Path, groups: usize, procs: usize) -> FakeTree {
    let t = FakeTree::standard(dir).unwrap();
    for g in 0..groups {
        let d = format!("sys/fs/cgroup/g{g}");
        for r in ["cpu", "memory", "io"] {
            t.file(&format!("{d}/{r}.pressure"), PSI).unwrap();
        }
        t.file(&format!("{d}/memory.current"), "1073741824")
            .unwrap();
        t.file(
            &format!("{d}/memory.events"),
            "low 0\nhigh 4\nmax 0\noom 0\noom_kill 0\noom_group_kill 0",
        )
        .unwrap();
        t.file(&format!("{d}/cgroup.events"), "populated 1\nfrozen 0")
            .unwrap();
    }
    t.file(
        "proc/meminfo",
        "MemTotal:       16384000 kB\nMemFree:         8192000 kB\nMemAvailable:   12288000 kB",
    )
    .unwrap();
    for pid in 0..procs {
        t.add_process(&FakeProcess::new(1000 + pid as i32, &format!("proc{pid}")))
            .unwrap();
    }
    t
}

fn time_n(n: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..n / 10 + 5 {
        f();
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        f();
        v.push(t0.elapsed());
    }
    stats(v)
}

fn sampler() {
    println!();
    println!(
        "== Sampler::sample on a fake tree (file I/O; /tmp is {}) ==",
        fs_of("/tmp")
    );
    println!("   policy: 4 rules per group (every group needs cpu/memory/io PSI, memory.current, memory.events)");
    println!(
        "{:>6} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "groups",
        "rules",
        "samples",
        "median us",
        "p99 us",
        "max us",
        "mean us",
        "us/group",
        "+step us"
    );
    for groups in [4, 64, 512] {
        let dir = tempfile::tempdir().unwrap();
        let _t = fake_tree(dir.path(), groups, 0);
        let p = load(4 * groups, groups);
        let root = Root::fake(dir.path());
        let cg = CgroupFs::new(root.clone(), p.settings.cgroup_root.clone());
        let mut sampler = Sampler::new(root, cg, group_paths(&p), sampled_needs(&p.rules));
        let n = match groups {
            512 => 300,
            64 => 2000,
            _ => 10_000,
        };
        let start = Instant::now();
        let s = time_n(n, || {
            black_box(sampler.sample(start.elapsed()));
        });
        // The whole evaluation the daemon does per tick minus logging: sample + step on the View.
        let mut sup = Supervisor::new(&p);
        let full = time_n(n, || {
            let now = start.elapsed();
            let snap = sampler.sample(now);
            let view = View {
                snap: &snap,
                stall: &sampler.stall,
                now,
            };
            black_box(sup.step(&p, now, &view, &no_current));
        });
        println!(
            "{:>6} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12.2} {:>12}",
            groups,
            4 * groups,
            n,
            us(s.median),
            us(s.p99),
            us(s.max),
            us(s.mean),
            s.median.as_secs_f64() * 1e6 / groups as f64,
            us(full.median),
        );
    }
    println!("(+step = median of sample + Supervisor::step on the sampled View, i.e. one daemon tick without check_groups and logging)");

    // The daemon's check_groups() runs before every sample: policy.all_groups() + one stat per group.
    println!();
    println!("== check_groups equivalent (all_groups() + CgroupFs::exists per group, every evaluation) ==");
    for groups in [4, 64, 512] {
        let dir = tempfile::tempdir().unwrap();
        let _t = fake_tree(dir.path(), groups, 0);
        let p = load(groups, groups);
        let cg = CgroupFs::new(Root::fake(dir.path()), p.settings.cgroup_root.clone());
        let s = time_n(2000, || {
            let missing: Vec<String> = p
                .all_groups()
                .into_iter()
                .filter(|g| !cg.exists(&g.path))
                .map(|g| g.name.clone())
                .collect();
            black_box(missing);
        });
        println!(
            "  {groups:>4} groups: median {} us, p99 {} us",
            us(s.median),
            us(s.p99)
        );
    }

    // running(NAME): the sampler scans /proc every tick, and View::running
    // compiles the glob on every call.
    println!();
    println!("== running(NAME): /proc comm scan per sample, and View::running per call ==");
    for procs in [50, 300] {
        let dir = tempfile::tempdir().unwrap();
        let _t = fake_tree(dir.path(), 4, procs);
        let text = format!(
            "{}  - name: rt\n    when: running(cyclictest*)\n    while: [\"set sysctl.vm.swappiness = 10\"]\n",
            policy_text(0, 4)
        );
        let p = cgwarden::bench::load_bytes("running.yaml", text.as_bytes())
            .unwrap_or_else(|d| panic!("{d}\n{text}"));
        let root = Root::fake(dir.path());
        let cg = CgroupFs::new(root.clone(), p.settings.cgroup_root.clone());
        let mut sampler = Sampler::new(root, cg, group_paths(&p), sampled_needs(&p.rules));
        let start = Instant::now();
        let s = time_n(300, || {
            black_box(sampler.sample(start.elapsed()));
        });
        let snap = sampler.sample(start.elapsed());
        let view = View {
            snap: &snap,
            stall: &sampler.stall,
            now: start.elapsed(),
        };
        let r = time_n(5000, || {
            black_box(view.running(black_box("cyclictest*")));
        });
        let pat = glob::Pattern::new("cyclictest*").unwrap();
        let names: Vec<String> = (0..procs).map(|i| format!("proc{i}")).collect();
        let pre = time_n(5000, || {
            black_box(names.iter().any(|c| pat.matches(c)));
        });
        let compile = time_n(5000, || {
            black_box(glob::Pattern::new(black_box("cyclictest*")).ok());
        });
        println!(
            "  {procs:>4} procs: sample (scan) median {} us; View::running median {} us (glob compile alone {} us; precompiled match over the same names {} us)",
            us(s.median),
            us(r.median),
            us(compile.median),
            us(pre.median)
        );
    }
}

/// What one idle second of `cgwarden run policies/iq9100-vision.yaml` costs on
/// the demo board, piece by piece: the per-tick evaluation (check_groups +
/// sample + step) and the 30 s rescan (a full `Converger::plan`, of which
/// the daemon keeps only the Move/Sched steps).
fn iq9100() {
    use cgwarden::bench::Converger;
    println!();
    println!("== iq9100-vision policy on the demo board (what the idle daemon does) ==");
    let dir = tempfile::tempdir().unwrap();
    let t = FakeTree::standard(dir.path()).unwrap();
    t.add_process(&FakeProcess::new(1, "systemd")).unwrap();
    t.add_process(&FakeProcess::new(412, "motion_control"))
        .unwrap();
    t.add_process(&FakeProcess {
        exe: Some("/opt/npu/bin/infer-server".into()),
        cmdline: vec!["/opt/npu/bin/infer-server".into()],
        ..FakeProcess::new(530, "infer-server")
    })
    .unwrap();
    t.add_process(&FakeProcess::new(702, "sshd")).unwrap();
    let text = fs_read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/iq9100-vision.yaml"
    ));
    let p = cgwarden::bench::load_bytes("iq9100-vision.yaml", text.as_bytes())
        .unwrap_or_else(|d| panic!("{d}"));
    let root = Root::fake(dir.path());
    let conv = Converger::new(root.clone(), &p);
    let plan = conv.plan();
    conv.apply(&plan, &mut |_| {}).unwrap();
    for g in ["realtime", "inference", "vision", "system"] {
        let d = format!("sys/fs/cgroup/{g}");
        for r in ["cpu", "memory", "io"] {
            t.file(&format!("{d}/{r}.pressure"), PSI).unwrap();
        }
        t.file(&format!("{d}/memory.current"), "1073741824")
            .unwrap();
        t.file(
            &format!("{d}/memory.events"),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0",
        )
        .unwrap();
    }
    t.file("proc/meminfo", "MemAvailable:   12288000 kB")
        .unwrap();
    let cg = CgroupFs::new(root.clone(), p.settings.cgroup_root.clone());
    let mut sampler = Sampler::new(
        root.clone(),
        cg.clone(),
        group_paths(&p),
        sampled_needs(&p.rules),
    );
    let mut sup = Supervisor::new(&p);
    let start = Instant::now();
    let check = time_n(5000, || {
        let missing: Vec<String> = p
            .all_groups()
            .into_iter()
            .filter(|g| !cg.exists(&g.path))
            .map(|g| g.name.clone())
            .collect();
        black_box(missing);
    });
    let sample = time_n(5000, || {
        black_box(sampler.sample(start.elapsed()));
    });
    let full = time_n(5000, || {
        let now = start.elapsed();
        let snap = sampler.sample(now);
        let view = View {
            snap: &snap,
            stall: &sampler.stall,
            now,
        };
        black_box(sup.step(&p, now, &view, &no_current));
    });
    let rescan = time_n(300, || {
        black_box(Converger::new(root.clone(), &p).plan());
    });
    println!(
        "  check_groups equivalent   median {:>8} us  p99 {:>8} us",
        us(check.median),
        us(check.p99)
    );
    println!(
        "  Sampler::sample           median {:>8} us  p99 {:>8} us",
        us(sample.median),
        us(sample.p99)
    );
    println!(
        "  sample + step             median {:>8} us  p99 {:>8} us",
        us(full.median),
        us(full.p99)
    );
    println!(
        "  rescan: Converger::plan   median {:>8} us  p99 {:>8} us  (every 30 s = {:.1} us/s)",
        us(rescan.median),
        us(rescan.p99),
        rescan.median.as_secs_f64() * 1e6 / 30.0
    );
    println!(
        "  => per idle second at tick 1s: ~{:.0} us of evaluation + {:.0} us of rescan (tokio, epoll and logging not included)",
        (check.median + full.median).as_secs_f64() * 1e6,
        rescan.median.as_secs_f64() * 1e6 / 30.0
    );
}

fn fs_read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fs_of(path: &str) -> String {
    std::process::Command::new("df")
        .args(["--output=fstype", path])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    // `cargo bench` passes `--bench`; anything else selects a part.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    println!(
        "cgwarden tick benchmark ({} build, {} CPUs)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    if want("step") {
        engine();
    }
    if want("sample") {
        sampler();
    }
    if want("iq9100") {
        iq9100();
    }
}
