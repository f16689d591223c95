//! Tests of [`super`] (`hooks`).

use super::run::{drain, substitute, Drained, Stream};
use super::*;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;
use tempfile::TempDir;

/// The process-spawning tests count our children and fds: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn hook(name: &str, exec: &[&str], timeout: Duration) -> Hook {
    Hook {
        name: name.to_string(),
        exec: exec.iter().map(|s| s.to_string()).collect(),
        timeout,
        min_interval: None,
        user: None,
    }
}

fn ctx() -> HookContext {
    HookContext {
        rule: "mem-pressure".into(),
        event: HookEvent::Fired,
        metric: "inference.memory.some.avg10".into(),
        value: "12.5%".into(),
        threshold: "10%".into(),
        group: String::new(),
        product: "edge-box".into(),
        // 2026-11-30T10:15:00Z
        time: std::time::UNIX_EPOCH + Duration::from_secs(1_796_033_700),
        paired: false,
    }
}

fn runner(hooks: &[Hook], max: usize) -> HookRunner {
    HookRunner::new(
        hooks,
        &Root::real(),
        HookLimits {
            max_concurrent: max,
        },
    )
}

/// Waits (bounded) until no hook process is alive.
async fn settle(r: &HookRunner) {
    let t = Instant::now();
    while r.running() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "hooks never finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn started(f: Fired) -> u32 {
    match f {
        Fired::Started { pid } => pid,
        other => panic!("expected Started, got {other:?}"),
    }
}

fn nul_split(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn proc_state(pid: i32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().next().map(str::to_string)
}

fn zombie_children() -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut z = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = text.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
        if f.len() > 1 && f[0] == "Z" && f[1] == me {
            z.push(pid);
        }
    }
    z
}

fn fd_count() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn placeholders() {
    let v = ctx().values();
    assert_eq!(
        substitute("{rule}: {metric}={value}", &v),
        "mem-pressure: inference.memory.some.avg10=12.5%"
    );
    assert_eq!(substitute("[{group}]", &v), "[]");
    assert_eq!(
        substitute("{nope} {rule {{rule}} {", &v),
        "{nope} {rule {mem-pressure} {"
    );
    assert_eq!(substitute("{time}{event}", &v), "2026-11-30T10:15:00Zfired");
    let mut c = ctx();
    c.rule = "{value}".into();
    assert_eq!(
        substitute("{rule}", &c.values()),
        "{value}",
        "no second expansion"
    );
    assert_eq!(substitute("ünï{product}çødé", &v), "ünïedge-boxçødé");
}

#[tokio::test]
async fn environment_and_arguments() {
    let _s = SERIAL.lock().await;
    std::env::set_var("CGWARDEN_TEST_LEAK_MARKER", "leaked");
    let dir = TempDir::new().unwrap();
    let d = dir.path().display();
    let script = format!("cat /proc/$$/environ > {d}/env; cat /proc/$$/cmdline > {d}/argv");
    let h = hook(
        "dump",
        &[
            "/bin/sh",
            "-c",
            &script,
            "sh",
            "{rule}",
            "{event}",
            "{metric}",
            "{value}",
            "{threshold}",
            "[{group}]",
            "{product}",
            "{time}",
            "{other} {rule",
            "x{value}y",
        ],
        Duration::from_secs(10),
    );
    let mut r = runner(&[h], 8);
    started(r.fire("dump", &ctx(), Instant::now()));
    settle(&r).await;

    let mut env = nul_split(&fs::read(dir.path().join("env")).unwrap());
    env.sort();
    let mut want = vec![
        "CGWARDEN_EVENT=fired".to_string(),
        "CGWARDEN_GROUP=".into(),
        "CGWARDEN_METRIC=inference.memory.some.avg10".into(),
        "CGWARDEN_PRODUCT=edge-box".into(),
        "CGWARDEN_RULE=mem-pressure".into(),
        "CGWARDEN_THRESHOLD=10%".into(),
        "CGWARDEN_TIME=2026-11-30T10:15:00Z".into(),
        "CGWARDEN_VALUE=12.5%".into(),
        format!("PATH={HOOK_PATH}"),
    ];
    want.sort();
    assert_eq!(env, want);
    assert!(std::env::var("CGWARDEN_TEST_LEAK_MARKER").is_ok());
    assert!(!env.iter().any(|e| e.contains("LEAK_MARKER")));

    let raw = fs::read(dir.path().join("argv")).unwrap();
    let argv: Vec<String> = raw
        .strip_suffix(&[0])
        .unwrap()
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    assert_eq!(
        argv[4..],
        [
            "mem-pressure",
            "fired",
            "inference.memory.some.avg10",
            "12.5%",
            "10%",
            "[]",
            "edge-box",
            "2026-11-30T10:15:00Z",
            "{other} {rule",
            "x12.5%y",
        ]
    );
    let s = r.stats()["dump"];
    assert_eq!(
        (s.started, s.failed, s.timed_out, s.exited_nonzero),
        (1, 0, 0, 0)
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let _s = SERIAL.lock().await;
    let dir = TempDir::new().unwrap();
    let gc = dir.path().join("gc");
    let script = format!("sleep 60 & echo $! > {}; sleep 60", gc.display());
    let h = hook(
        "slow",
        &["/bin/sh", "-c", &script],
        Duration::from_millis(300),
    );
    let mut r = runner(&[h], 8);
    let t = Instant::now();
    let pid = started(r.fire("slow", &ctx(), t)) as i32;
    // The grandchild's pid, once the hook wrote it.
    let gpid: i32 = loop {
        if let Ok(s) = fs::read_to_string(&gc) {
            if s.ends_with('\n') {
                break s.trim().parse().unwrap();
            }
        }
        assert!(t.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(proc_state(gpid).as_deref().map(|s| s != "Z"), Some(true));
    settle(&r).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert!(proc_state(pid).is_none(), "hook process not reaped");
    // Killed: gone, or a zombie waiting for init to reap it.
    let t2 = Instant::now();
    while let Some(st) = proc_state(gpid) {
        if st == "Z" {
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(2),
            "grandchild alive ({st})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = r.stats()["slow"];
    assert_eq!((s.started, s.timed_out, s.exited_nonzero), (1, 1, 1));
}

#[tokio::test]
async fn leftovers_are_killed_at_the_timeout() {
    let _s = SERIAL.lock().await;
    let dir = TempDir::new().unwrap();
    let gc = dir.path().join("gc");
    // The program exits at once; its background child closed the pipes.
    let script = format!("sleep 60 >/dev/null 2>&1 & echo $! > {}", gc.display());
    let h = hook(
        "bg",
        &["/bin/sh", "-c", &script],
        Duration::from_millis(400),
    );
    let mut r = runner(&[h], 8);
    let t = Instant::now();
    started(r.fire("bg", &ctx(), t));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.running(), 1, "run lasts while its group lives");
    settle(&r).await;
    assert!(t.elapsed() >= Duration::from_millis(400));
    let gpid: i32 = fs::read_to_string(&gc).unwrap().trim().parse().unwrap();
    let t2 = Instant::now();
    while let Some(st) = proc_state(gpid) {
        if st == "Z" {
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(2),
            "leftover alive ({st})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = r.stats()["bg"];
    assert_eq!((s.timed_out, s.exited_nonzero), (1, 0));
}

#[tokio::test]
async fn rate_limit_drops_calls_within_min_interval() {
    let _s = SERIAL.lock().await;
    let mut h = hook("rl", &["/bin/true"], Duration::from_secs(5));
    h.min_interval = Some(Duration::from_millis(200));
    let mut r = runner(&[h], 8);
    let t0 = Instant::now();
    started(r.fire("rl", &ctx(), t0));
    assert_eq!(
        r.fire("rl", &ctx(), t0 + Duration::from_millis(50)),
        Fired::RateLimited {
            next_allowed_in: Duration::from_millis(150)
        }
    );
    started(r.fire("rl", &ctx(), t0 + Duration::from_millis(200)));
    assert!(matches!(
        r.fire("rl", &ctx(), t0 + Duration::from_millis(399)),
        Fired::RateLimited { .. }
    ));
    assert_eq!(r.fire("nope", &ctx(), t0), Fired::Unknown);
    settle(&r).await;
    let s = r.stats()["rl"];
    assert_eq!((s.started, s.rate_limited), (2, 2));
}

fn paired(event: HookEvent) -> HookContext {
    HookContext {
        event,
        paired: true,
        ..ctx()
    }
}

fn lines(p: &std::path::Path) -> Vec<String> {
    fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// min_interval never splits a pair: a started `fired` always gets its
/// `cleared` (which neither waits for nor arms the limit); a `fired`
/// dropped by the limit takes its `cleared` with it.
#[tokio::test]
async fn rate_limit_never_splits_a_pair() {
    let _s = SERIAL.lock().await;
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("log");
    let script = format!("echo $CGWARDEN_EVENT >> {}", log.display());
    let mut h = hook("pair", &["/bin/sh", "-c", &script], Duration::from_secs(5));
    h.min_interval = Some(Duration::from_secs(60));
    let mut r = runner(&[h], 8);
    let t0 = Instant::now();
    // A cleared with no fired at all: dropped.
    assert_eq!(
        r.fire("pair", &paired(HookEvent::Cleared), t0),
        Fired::Unpaired
    );
    started(r.fire("pair", &paired(HookEvent::Fired), t0));
    settle(&r).await;
    // Within min_interval, yet the cleared runs.
    started(r.fire(
        "pair",
        &paired(HookEvent::Cleared),
        t0 + Duration::from_secs(1),
    ));
    settle(&r).await;
    // The next episode's fired is inside the limit (armed by the fired
    // at t0, not by the cleared): dropped, and so is its cleared.
    assert!(matches!(
        r.fire(
            "pair",
            &paired(HookEvent::Fired),
            t0 + Duration::from_secs(2)
        ),
        Fired::RateLimited { .. }
    ));
    assert_eq!(
        r.fire(
            "pair",
            &paired(HookEvent::Cleared),
            t0 + Duration::from_secs(3)
        ),
        Fired::Unpaired
    );
    // After the interval a new pair runs whole.
    started(r.fire(
        "pair",
        &paired(HookEvent::Fired),
        t0 + Duration::from_secs(61),
    ));
    // Each run finishes before the next starts, as in the episodes
    // above: two hook processes started back to back may append to the
    // log in either order on a loaded machine (seen in CI).
    settle(&r).await;
    started(r.fire(
        "pair",
        &paired(HookEvent::Cleared),
        t0 + Duration::from_secs(62),
    ));
    settle(&r).await;
    assert_eq!(lines(&log), ["fired", "cleared", "fired", "cleared"]);
    // Unpaired (`then`) calls keep the plain limit, cleared included.
    let c = HookContext {
        event: HookEvent::Cleared,
        ..ctx()
    };
    assert!(matches!(
        r.fire("pair", &c, t0 + Duration::from_secs(63)),
        Fired::RateLimited { .. }
    ));
    let s = r.stats()["pair"];
    assert_eq!((s.started, s.rate_limited, s.unpaired), (4, 2, 2));
}

/// At the cap a paired `cleared` is queued, not dropped, and gets the
/// next free slot before later calls; a `fired` dropped at the cap takes
/// its `cleared` with it.
#[tokio::test]
async fn a_cleared_at_capacity_waits_for_a_slot() {
    let _s = SERIAL.lock().await;
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("log");
    let script = format!("echo $CGWARDEN_EVENT >> {}; sleep 0.3", log.display());
    let h = hook("pair", &["/bin/sh", "-c", &script], Duration::from_secs(5));
    let other = hook("other", &["/bin/true"], Duration::from_secs(5));
    let mut r = runner(&[h, other], 1);
    let now = Instant::now();
    started(r.fire("pair", &paired(HookEvent::Fired), now));
    assert_eq!(
        r.fire("pair", &paired(HookEvent::Cleared), now),
        Fired::Queued
    );
    assert_eq!(r.waiting(), 1);
    // The slot frees: the queued cleared takes it, not a newcomer.
    let t = Instant::now();
    while r.waiting() > 0 {
        assert_eq!(r.fire("other", &ctx(), Instant::now()), Fired::AtCapacity);
        assert!(t.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(r.running(), 1, "the cleared run holds the slot");
    settle(&r).await;
    assert_eq!(lines(&log), ["fired", "cleared"]);
    // A fired dropped at the cap: its cleared is dropped too.
    let blocker = r.fire("pair", &ctx(), Instant::now());
    started(blocker);
    let other_rule = HookContext {
        rule: "other-rule".into(),
        ..paired(HookEvent::Fired)
    };
    assert_eq!(
        r.fire("pair", &other_rule, Instant::now()),
        Fired::AtCapacity
    );
    let other_rule = HookContext {
        event: HookEvent::Cleared,
        ..other_rule
    };
    assert_eq!(r.fire("pair", &other_rule, Instant::now()), Fired::Unpaired);
    settle(&r).await;
    let s = r.stats()["pair"];
    assert_eq!(
        (s.started, s.queued, s.at_capacity, s.unpaired),
        (3, 1, 1, 1)
    );
}

/// A queued `cleared` still waiting when shutdown's grace ends is not
/// started after the kill.
#[tokio::test]
async fn shutdown_drops_a_cleared_still_queued_after_the_grace() {
    let _s = SERIAL.lock().await;
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("log");
    let script = format!("echo $CGWARDEN_EVENT >> {}; sleep 30", log.display());
    let h = hook("pair", &["/bin/sh", "-c", &script], Duration::from_secs(60));
    let mut r = runner(&[h], 1);
    started(r.fire("pair", &paired(HookEvent::Fired), Instant::now()));
    assert_eq!(
        r.fire("pair", &paired(HookEvent::Cleared), Instant::now()),
        Fired::Queued
    );
    let t = Instant::now();
    r.shutdown(Duration::from_millis(300)).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!((r.running(), r.waiting()), (0, 0));
    assert_eq!(lines(&log), ["fired"]);
}

#[tokio::test]
async fn cap_and_shutdown() {
    let _s = SERIAL.lock().await;
    let a = hook("a", &["/bin/sleep", "30"], Duration::from_secs(60));
    let b = hook("b", &["/bin/sleep", "30"], Duration::from_secs(60));
    let mut r = runner(&[a, b], 2);
    let now = Instant::now();
    let p1 = started(r.fire("a", &ctx(), now)) as i32;
    let p2 = started(r.fire("b", &ctx(), now)) as i32;
    assert_eq!(r.fire("a", &ctx(), now), Fired::AtCapacity);
    assert_eq!(r.fire("b", &ctx(), now), Fired::AtCapacity);
    assert_eq!(r.running(), 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(r.running(), 2);
    let t = Instant::now();
    r.shutdown(Duration::from_millis(200)).await;
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(r.running(), 0);
    assert!(proc_state(p1).is_none() && proc_state(p2).is_none());
    assert!(matches!(
        r.fire("a", &ctx(), Instant::now()),
        Fired::Failed(_)
    ));
    let s = r.stats();
    assert_eq!(
        (s["a"].started, s["a"].at_capacity, s["b"].at_capacity),
        (1, 1, 1)
    );
    assert_eq!(s["a"].timed_out, 0);
}

#[tokio::test]
async fn shutdown_waits_for_quick_hooks() {
    let _s = SERIAL.lock().await;
    let a = hook("a", &["/bin/sleep", "0.2"], Duration::from_secs(60));
    let mut r = runner(&[a], 2);
    started(r.fire("a", &ctx(), Instant::now()));
    r.shutdown(Duration::from_secs(10)).await;
    assert_eq!(r.running(), 0);
    let s = r.stats()["a"];
    assert_eq!((s.exited_nonzero, s.timed_out), (0, 0));
}

#[tokio::test]
async fn missing_program_fails_and_runner_stays_usable() {
    let _s = SERIAL.lock().await;
    let bad = hook(
        "bad",
        &["/nonexistent/cgwarden-hook"],
        Duration::from_secs(5),
    );
    let rel = hook("rel", &["true"], Duration::from_secs(5));
    let ok = hook("ok", &["/bin/true"], Duration::from_secs(5));
    let mut r = runner(&[bad, rel, ok], 1);
    let now = Instant::now();
    match r.fire("bad", &ctx(), now) {
        Fired::Failed(m) => {
            assert_eq!(m, "/nonexistent/cgwarden-hook: No such file or directory")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(r.fire("rel", &ctx(), now), Fired::Failed(m) if m.contains("absolute")));
    // The failure released its slot (cap 1).
    started(r.fire("ok", &ctx(), now));
    settle(&r).await;
    let s = r.stats();
    assert_eq!((s["bad"].failed, s["bad"].started), (1, 0));
    assert_eq!((s["rel"].failed, s["ok"].started), (1, 1));
}

#[tokio::test]
async fn unknown_user_disables_the_hook() {
    let _s = SERIAL.lock().await;
    let t = TempDir::new().unwrap();
    fs::create_dir_all(t.path().join("etc")).unwrap();
    fs::write(t.path().join("etc/passwd"), "root:x:0:0::/:/bin/sh\n").unwrap();
    let mut h = hook("u", &["/bin/true"], Duration::from_secs(5));
    h.user = Some("ghost".into());
    let ok = hook("ok", &["/bin/true"], Duration::from_secs(5));
    let mut r = HookRunner::new(
        &[h.clone(), ok],
        &Root::fake(t.path()),
        HookLimits::default(),
    );
    assert!(matches!(r.fire("u", &ctx(), Instant::now()), Fired::Failed(m) if m.contains("ghost")));
    started(r.fire("ok", &ctx(), Instant::now()));
    settle(&r).await;
    assert_eq!(r.stats()["u"].failed, 1);
    // Unreadable passwd: disabled too.
    let mut r = HookRunner::new(
        &[h],
        &Root::fake(t.path().join("none")),
        HookLimits::default(),
    );
    assert!(matches!(
        r.fire("u", &ctx(), Instant::now()),
        Fired::Failed(_)
    ));
}

#[tokio::test]
async fn runs_as_the_hook_user() {
    let _s = SERIAL.lock().await;
    let passwd = fs::read_to_string("/etc/passwd").unwrap();
    let Some(crate::kernel::accounts::User { uid, gid }) =
        crate::kernel::accounts::parse_user(&passwd, "nobody")
    else {
        eprintln!("no user nobody here; skipped");
        return;
    };
    let dir = TempDir::new().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.path().join("ids");
    let script = format!(
        "grep -E '^(Uid|Gid|Groups):' /proc/self/status > {}",
        out.display()
    );
    let mut h = hook(
        "as-nobody",
        &["/bin/sh", "-c", &script],
        Duration::from_secs(10),
    );
    h.user = Some("nobody".into());
    let mut r = runner(&[h], 8);
    let f = r.fire("as-nobody", &ctx(), Instant::now());
    if !nix::unistd::geteuid().is_root() {
        assert!(matches!(f, Fired::Failed(m) if m.contains("Operation not permitted")));
        return;
    }
    started(f);
    settle(&r).await;
    let text = fs::read_to_string(&out).unwrap();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(field("Uid:"), vec![uid.to_string(); 4]);
    assert_eq!(field("Gid:"), vec![gid.to_string(); 4]);
    assert!(field("Groups:").is_empty(), "{text}");
}

#[tokio::test]
async fn many_runs_leave_no_zombies_or_fds() {
    let _s = SERIAL.lock().await;
    let h = hook("t", &["/bin/true"], Duration::from_secs(10));
    let mut r = runner(&[h], 8);
    // Warm-up: the runtime's child-reaping machinery opens its fds once.
    started(r.fire("t", &ctx(), Instant::now()));
    settle(&r).await;
    // The zombie scan does see an unreaped child of ours.
    let mut c = std::process::Command::new("/bin/true").spawn().unwrap();
    let zpid = c.id() as i32;
    let t = Instant::now();
    while !zombie_children().contains(&zpid) {
        assert!(t.elapsed() < Duration::from_secs(5), "scan misses zombies");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    c.wait().unwrap();
    let fds = fd_count();
    let mut waits = 0u64;
    for _ in 0..2000 {
        loop {
            match r.fire("t", &ctx(), Instant::now()) {
                Fired::Started { .. } => break,
                Fired::AtCapacity => {
                    waits += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                other => panic!("{other:?}"),
            }
            assert!(r.running() <= 8);
        }
    }
    settle(&r).await;
    let t = Instant::now();
    loop {
        let z = zombie_children();
        let n = fd_count();
        if z.is_empty() && n.abs_diff(fds) <= 2 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "zombies {z:?}, fds {n} (were {fds})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = r.stats()["t"];
    assert_eq!(s.started, 2001);
    assert_eq!(s.at_capacity, waits);
    assert_eq!((s.failed, s.exited_nonzero, s.timed_out), (0, 0, 0));
}

/// Collects formatted log output.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn chatty_hook_output_is_capped() {
    let _s = SERIAL.lock().await;
    let cap = Capture::default();
    let w = cap.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    let _g = tracing::subscriber::set_default(sub);
    let h = hook(
        "chatty",
        &["/bin/sh", "-c", "yes | head -c 1048576; echo oops >&2"],
        Duration::from_secs(20),
    );
    let mut r = runner(&[h], 8);
    let t = Instant::now();
    started(r.fire("chatty", &ctx(), t));
    settle(&r).await;
    assert!(t.elapsed() < Duration::from_secs(10));
    let s = r.stats()["chatty"];
    assert_eq!(
        (s.output_truncated, s.timed_out, s.exited_nonzero),
        (1, 0, 0)
    );
    let log = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
    let y_lines = log
        .lines()
        .filter(|l| l.contains("INFO") && l.contains(": y hook=chatty"))
        .count();
    assert_eq!(y_lines, OUTPUT_CAP / 2, "one logged line per 2 bytes");
    assert_eq!(log.matches("output truncated").count(), 1);
    assert!(log
        .lines()
        .any(|l| l.contains("WARN") && l.contains(": oops hook=chatty")));
    assert!(log.contains("hook=chatty") && log.contains("rule=mem-pressure"));
    assert!(log.contains("hook exited"));
}

#[tokio::test]
async fn drain_caps_one_huge_line() {
    // Serialized too: tracing's per-callsite interest cache races with
    // the scoped subscriber of `chatty_hook_output_is_capped`.
    let _s = SERIAL.lock().await;
    let run = Run {
        name: Arc::from("x"),
        rule: "r".into(),
        event: HookEvent::Fired,
        program: "/bin/x".into(),
        user: None,
        pid: 1,
        timeout: Duration::from_secs(1),
        counters: Arc::default(),
        cgroup: None,
    };
    let data = vec![b'a'; 1 << 20];
    let d = drain(&data[..], Stream::Stdout, &run).await;
    assert_eq!(
        d,
        Drained {
            read: 1 << 20,
            logged: OUTPUT_CAP,
            truncated: true
        }
    );
    let small = b"one\r\ntwo\nthree".to_vec();
    let d = drain(&small[..], Stream::Stderr, &run).await;
    assert_eq!(
        d,
        Drained {
            read: 14,
            logged: 14,
            truncated: false
        }
    );
    let exact = vec![b'\n'; OUTPUT_CAP];
    let d = drain(&exact[..], Stream::Stdout, &run).await;
    assert!(!d.truncated);
}
