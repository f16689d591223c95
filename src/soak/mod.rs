//! `cgwarden soak`: the seed's validation run as
//! one command beside the daemon. It checks the daemon answers and its
//! flight recorder is on, remembers its start in `DIR/soak.json` (wall
//! clock and boot id, so a rerun resumes rather than restarts: see
//! [`state`]), runs the load matrix ([`loads`]) in its phases, prints a
//! progress line with the criteria so far, and at the end writes
//! `DIR/report.html` and `DIR/report.json` over the soak's window and exits
//! with the report's status. Restarts of the daemon and reboots inside the
//! window are counted by the report's `restarts` criterion, never hidden.
//! docs/soak.md is the user's page.

/// A line on stderr that never panics: after a SIGHUP the terminal may be
/// gone (`eprintln!` panics on EIO), and a 72-hour soak must not die of it.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub(crate) mod loads;
pub(crate) mod state;

use crate::control::client::DaemonProxy;
use crate::exit;
use crate::kernel::Root;
use crate::observe::report::window;
use state::{Load, Phase, State};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What `cgwarden soak` was asked.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) duration: Duration,
    /// `seed` or `none`.
    pub(crate) load: String,
    pub(crate) out: PathBuf,
    pub(crate) policy: PathBuf,
    pub(crate) root: Option<PathBuf>,
    /// A progress line this often.
    pub(crate) progress: Duration,
}

/// Exit statuses before the report decides (docs/soak.md).
const CANNOT: u8 = exit::MISSING;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `H:MM:SS`.
pub(crate) fn clock(secs: f64) -> String {
    let s = if secs.is_finite() {
        secs.max(0.0) as u64
    } else {
        0
    };
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The daemon's pid, or why it does not answer (a refusal for a recorder it
/// could not open).
async fn daemon_pid(socket: &Path) -> Result<i64, String> {
    let ask = async {
        let mut conn = zlink::tokio::unix::connect(socket)
            .await
            .map_err(|e| format!("no daemon answers on {}: {e}", socket.display()))?;
        match conn.status().await {
            Ok(Ok(s)) => {
                if let Some(u) = s
                    .unavailable
                    .iter()
                    .find(|u| u.starts_with("flight recorder"))
                {
                    return Err(format!("the daemon's recorder is off: {u}"));
                }
                Ok(s.daemon.pid)
            }
            Ok(Err(e)) => Err(format!("the daemon refused status: {}", e.message())),
            Err(e) => Err(format!(
                "the daemon on {} stopped answering: {e}",
                socket.display()
            )),
        }
    };
    match tokio::time::timeout(Duration::from_secs(5), ask).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the daemon on {} did not answer in 5 s",
            socket.display()
        )),
    }
}

/// Everything found before the soak can run.
struct Setup {
    socket: PathBuf,
    db: PathBuf,
    criteria: crate::policy::model::ReportCriteria,
    interval: Duration,
    root: Root,
}

fn setup(o: &Options) -> Result<Setup, (u8, String)> {
    let p = crate::policy::load(&o.policy).map_err(|d| {
        {
            use std::io::Write as _;
            let _ = write!(std::io::stderr(), "{d}");
        }
        (
            CANNOT,
            format!("the policy {} does not load", o.policy.display()),
        )
    })?;
    let Some(rec) = p.settings.recorder.clone() else {
        return Err((
            CANNOT,
            format!(
                "the policy {} has no settings.recorder: a soak is judged from the flight \
                 recorder (docs/recorder.md); add `settings: {{ recorder: {{ dir: /var/lib/cgwarden }} }}` \
                 and reload the daemon",
                o.policy.display()
            ),
        ));
    };
    let root = match &o.root {
        Some(r) => Root::fake(r),
        None => Root::real(),
    };
    let socket = crate::control::client::locate(None, &o.policy, o.root.as_deref())
        .map_err(|e| (exit::USAGE, e))?;
    let db = root.host_path(&rec.dir.join(crate::observe::report::DB_FILE));
    Ok(Setup {
        socket,
        db,
        criteria: p.report.clone(),
        interval: rec.interval,
        root,
    })
}

/// Waits up to `patience` for the daemon to answer with its recorder on and
/// the database to exist; the daemon's pid.
async fn wait_daemon(s: &Setup, patience: Duration) -> Result<i64, (u8, String)> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let r = daemon_pid(&s.socket).await.and_then(|pid| {
            if s.db.exists() {
                Ok(pid)
            } else {
                Err(format!(
                    "the daemon (pid {pid}) has no flight recorder database at {} yet",
                    s.db.display()
                ))
            }
        });
        match r {
            Ok(pid) => return Ok(pid),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                let code = if e.starts_with("the daemon's recorder is off") {
                    CANNOT
                } else {
                    exit::UNREACHABLE
                };
                return Err((
                    code,
                    format!("{e} (soak runs beside `cgwarden run`, which records: start the daemon first)"),
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Runs `cgwarden soak`; returns the exit status.
pub(crate) fn run(o: &Options) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say!("cgwarden: error: soak: cannot start the runtime: {e}");
            return exit::TEMPFAIL;
        }
    };
    match rt.block_on(soak(o)) {
        Ok(code) => code,
        Err((code, msg)) => {
            say!("cgwarden: error: soak: {msg}");
            code
        }
    }
}

async fn soak(o: &Options) -> Result<u8, (u8, String)> {
    use tokio::signal::unix::{signal, SignalKind};
    let load = match o.load.as_str() {
        "seed" => Load::Seed,
        "none" => Load::None,
        other => return Err((exit::USAGE, format!("--load {other}: seed or none"))),
    };
    if o.duration.is_zero() || o.duration > state::MAX_DURATION {
        return Err((exit::USAGE, "--for: between 1s and a year".into()));
    }
    let s = setup(o)?;
    let dir = &o.out;
    let prior = state::load(dir).map_err(|e| {
        (
            CANNOT,
            format!("{e}; remove it to start a new soak in {}", dir.display()),
        )
    })?;
    let boot = crate::kernel::procfs::boot_id(&s.root).unwrap_or_default();
    let t = now();
    let mut st = match prior {
        Some(st) if st.finished.is_some() => {
            let f = st.finished.clone().unwrap_or(state::Finished {
                at: t,
                exit_code: exit::REFUSED,
                passed: false,
            });
            crate::outln!(
                "soak {}: finished at {}: {} (exit {}); the report is {}; remove {} for a new soak",
                dir.display(),
                crate::observe::report::when(f.at),
                if f.passed { "PASS" } else { "FAIL" },
                f.exit_code,
                dir.join("report.html").display(),
                dir.join(state::FILE).display()
            );
            return Ok(f.exit_code);
        }
        Some(mut st) => {
            let pid = wait_daemon(&s, Duration::from_secs(30)).await?;
            if (st.duration_seconds - o.duration.as_secs_f64()).abs() > 0.5 || st.load != load {
                say!(
                    "cgwarden: warning: soak: resuming the soak in {} as it began (--for {}, --load {}), not as asked now",
                    dir.display(),
                    clock(st.duration_seconds),
                    st.load.as_str()
                );
            }
            let reboot = st.resumed(t, &boot);
            state::save(dir, &st).map_err(|e| (exit::TEMPFAIL, e))?;
            crate::outln!(
                "soak {}: resumed at {} of {}{} (daemon pid {pid}); restarts inside the window are counted by the report",
                dir.display(),
                clock(st.elapsed(t)),
                clock(st.duration_seconds),
                if reboot { " after a reboot" } else { "" },
            );
            st
        }
        None => {
            std::fs::create_dir_all(dir).map_err(|e| {
                (
                    exit::TEMPFAIL,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
            let pid = wait_daemon(&s, Duration::from_secs(5) + s.interval * 2).await?;
            let st = State::new(t, &boot, o.duration, load);
            state::save(dir, &st).map_err(|e| (exit::TEMPFAIL, e))?;
            crate::outln!(
                "soak {}: {} from {} (boot {}), load {}, daemon pid {pid}, recorder {}",
                dir.display(),
                clock(st.duration_seconds),
                st.started_at,
                if boot.is_empty() { "unknown" } else { &boot },
                load.as_str(),
                s.db.display()
            );
            st
        }
    };
    let plan = match st.load {
        Load::Seed => {
            let (how, groups) = crate::kernel::topology::cpu_groups(&s.root);
            crate::outln!("soak: {} CPU groups ({})", groups.len(), how.as_str());
            let p = loads::plan(&s.root, o.root.is_some(), &groups, dir);
            for l in &p {
                crate::outln!("soak: load {}", l.describe());
            }
            p
        }
        Load::None => Vec::new(),
    };

    let mut int = signal(SignalKind::interrupt()).ok();
    let mut term = signal(SignalKind::terminate()).ok();
    // A closed terminal must not end a 72-hour soak: SIGHUP is noted, the
    // soak goes on (its lines are dropped if nobody reads them).
    let mut hup = signal(SignalKind::hangup()).ok();
    let mut running: Option<loads::Running> = None;
    let mut next_progress = 0.0f64;
    let mut last_pid: Option<i64> = None;
    let mut announced: Option<Phase> = None;
    let cpu0 = crate::kernel::selfproc::cpu_seconds();
    let loop_start = now();
    let interrupted = loop {
        let t = now();
        let phase = st.phase(t);
        if announced != Some(phase) {
            announced = Some(phase);
            if phase.as_str() != st.phase {
                st.phase = phase.as_str().into();
                let _ = state::save(dir, &st);
            }
            crate::outln!("soak: {} at {}", phase.as_str(), clock(st.elapsed(t)));
        }
        if phase == Phase::Done {
            break None;
        }
        match (phase == Phase::Load, running.is_some()) {
            (true, false) => {
                let end = state::phase_end(st.elapsed(t), st.duration_seconds, st.load);
                let r = loads::Running::start(
                    &plan,
                    Duration::from_secs_f64((end - st.elapsed(t)).max(1.0)),
                );
                for w in &r.warnings {
                    say!("cgwarden: warning: soak: {w}");
                }
                crate::outln!("soak: {} loads running", r.count());
                running = Some(r);
            }
            (false, true) => {
                if let Some(mut r) = running.take() {
                    r.stop();
                }
            }
            _ => {}
        }
        if t >= next_progress {
            next_progress = t + o.progress.as_secs_f64();
            let pid = daemon_pid(&s.socket).await;
            progress(&s, &st, t, phase, &pid, last_pid);
            if let Ok(p) = pid {
                last_pid = Some(p);
            }
        }
        let phase_end = st.started + state::phase_end(st.elapsed(t), st.duration_seconds, st.load);
        let wake = next_progress.min(phase_end);
        let nap = Duration::from_secs_f64((wake - now()).clamp(0.05, 1.0));
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            Some(_) = async { match &mut int { Some(s) => s.recv().await, None => std::future::pending().await } } => break Some("SIGINT"),
            Some(_) = async { match &mut term { Some(s) => s.recv().await, None => std::future::pending().await } } => break Some("SIGTERM"),
            Some(_) = async { match &mut hup { Some(s) => s.recv().await, None => std::future::pending().await } } => {
                say!("cgwarden: soak: SIGHUP (terminal closed?): the soak goes on");
            }
        }
    };
    if let Some(mut r) = running.take() {
        r.stop();
    }
    if let (Some(a), Some(b)) = (cpu0, crate::kernel::selfproc::cpu_seconds()) {
        let wall = (now() - loop_start).max(1e-3);
        crate::outln!(
            "soak: this run used {:.1} s CPU in {} ({:.0} % of one CPU; tools not counted)",
            b - a,
            clock(wall),
            100.0 * (b - a) / wall
        );
    }
    if let Some(sig) = interrupted {
        let t = now();
        let _ = state::save(dir, &st);
        crate::outln!(
            "soak {}: stopped by {sig} at {} of {}; run the same command to resume",
            dir.display(),
            clock(st.elapsed(t)),
            clock(st.duration_seconds)
        );
        return Ok(exit::TEMPFAIL);
    }
    finish(&s, dir, &mut st)
}

/// One progress line: elapsed/total, phase, daemon, the criteria so far.
fn progress(
    s: &Setup,
    st: &State,
    t: f64,
    phase: Phase,
    pid: &Result<i64, String>,
    last: Option<i64>,
) {
    let daemon = match (pid, last) {
        (Ok(p), Some(l)) if *p != l => format!("daemon pid {p} (restarted; was {l})"),
        (Ok(p), _) => format!("daemon pid {p}"),
        (Err(_), _) => "daemon not answering".to_string(),
    };
    let criteria = match window::judge(&s.db, st.started, t, &s.criteria, false) {
        Ok(j) => {
            let n = |k: &str| j.rows.iter().filter(|r| r.status == k).count();
            let mut failed: Vec<&str> = j
                .rows
                .iter()
                .filter(|r| r.status == "fail")
                .map(|r| r.id)
                .collect();
            failed.dedup();
            format!(
                "{} pass, {} fail{}, {} not measured",
                n("pass"),
                n("fail"),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", failed.join(", "))
                },
                n("not_measured")
            )
        }
        Err((_, e)) => format!("criteria unknown: {e}"),
    };
    crate::outln!(
        "soak {}/{} {} (left {}) | {daemon} | {criteria}",
        clock(st.elapsed(t)),
        clock(st.duration_seconds),
        phase.as_str(),
        clock(st.remaining(t))
    );
}

/// The report over the soak's window into DIR; the state marked finished.
fn finish(s: &Setup, dir: &Path, st: &mut State) -> Result<u8, (u8, String)> {
    // The recorder's last interval in the window.
    std::thread::sleep(Duration::from_millis(200));
    let t = now();
    let j = window::judge(&s.db, st.started, t, &s.criteria, true)?;
    if let Some((html, json)) = &j.rendered {
        for (name, text) in [("report.html", html), ("report.json", json)] {
            let p = dir.join(name);
            std::fs::write(&p, text)
                .map_err(|e| (exit::TEMPFAIL, format!("cannot write {}: {e}", p.display())))?;
        }
    }
    for r in &j.rows {
        if r.status == "fail" && !r.detail.is_empty() {
            crate::outln!("{} — {}", r.line, r.detail);
        } else {
            crate::outln!("{}", r.line);
        }
    }
    let code = j.exit_code();
    st.phase = Phase::Done.as_str().into();
    st.finished = Some(state::Finished {
        at: t,
        exit_code: code,
        passed: j.passed,
    });
    state::save(dir, st).map_err(|e| (exit::TEMPFAIL, e))?;
    crate::outln!(
        "soak {}: {} over {}; report {}",
        dir.display(),
        if j.passed { "PASS" } else { "FAIL" },
        clock(st.duration_seconds),
        dir.join("report.html").display()
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clock_is_hours_minutes_seconds() {
        assert_eq!(super::clock(0.0), "0:00:00");
        assert_eq!(super::clock(3725.9), "1:02:05");
        assert_eq!(super::clock(72.0 * 3600.0), "72:00:00");
        assert_eq!(super::clock(f64::NAN), "0:00:00");
        assert_eq!(super::clock(-5.0), "0:00:00");
    }
}
