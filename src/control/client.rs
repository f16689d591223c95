//! The CLI commands that talk to the running daemon:
//! `status`, `boost`, `release`, `reload`, `verify`, `events`. Each is a
//! thin varlink client of `io.cgwarden.Daemon` (zlink's proxy); anything
//! they show, any other varlink client can get too.
//!
//! Exit statuses: 0 done; 1 refused (the daemon's error is printed) or,
//! for `verify`, drift found, for `health`, unhealthy (each reason on
//! stderr); 4 no daemon answers on the socket (its path
//! is in the message).

use super::wire::{self, DaemonError, EventReply};
use crate::exit;
use futures_util::{Stream, StreamExt};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[zlink::proxy("io.cgwarden.Daemon")]
pub(crate) trait DaemonProxy {
    async fn status(&mut self) -> zlink::Result<Result<wire::StatusReply, DaemonError>>;
    async fn boost(
        &mut self,
        knobs: &BTreeMap<String, String>,
        duration: Option<&str>,
        reason: Option<&str>,
        pid: Option<i64>,
        tied_to_connection: Option<bool>,
    ) -> zlink::Result<Result<wire::BoostReply, DaemonError>>;
    async fn extend(
        &mut self,
        handle: i64,
        duration: &str,
    ) -> zlink::Result<Result<wire::ExtendReply, DaemonError>>;
    async fn release(
        &mut self,
        handle: i64,
    ) -> zlink::Result<Result<wire::ReleaseReply, DaemonError>>;
    async fn list_claims(&mut self) -> zlink::Result<Result<wire::ClaimsReply, DaemonError>>;
    async fn reload(
        &mut self,
        dry_run: Option<bool>,
        candidate: Option<String>,
        candidate_name: Option<String>,
    ) -> zlink::Result<Result<wire::ReloadReply, DaemonError>>;
    async fn verify(&mut self) -> zlink::Result<Result<wire::VerifyReply, DaemonError>>;
    async fn health(&mut self) -> zlink::Result<Result<wire::HealthReply, DaemonError>>;
    async fn record_kpi(
        &mut self,
        name: &str,
        values: &[f64],
        counts: Option<&[i64]>,
        unit: Option<&str>,
    ) -> zlink::Result<Result<wire::RecordKpiReply, DaemonError>>;
    #[zlink(more)]
    async fn subscribe(
        &mut self,
    ) -> zlink::Result<impl Stream<Item = zlink::Result<Result<EventReply, DaemonError>>>>;
}

/// What a client command asked for.
#[derive(Debug)]
pub(crate) enum Command {
    Status {
        json: bool,
    },
    Boost {
        knobs: Vec<String>,
        duration: Option<String>,
        reason: Option<String>,
        cmd: Vec<String>,
    },
    Release {
        handle: i64,
    },
    Reload {
        dry_run: bool,
        /// A file to preview (dry run): read here, sent as text (the daemon
        /// may not see the client's /tmp or /home).
        candidate: Option<PathBuf>,
    },
    Verify {
        json: bool,
    },
    Health {
        json: bool,
    },
    Events {
        json: bool,
    },
    /// `cgwarden kpi`: samples `(value, repeat)` in `unit`.
    Kpi {
        name: String,
        unit: String,
        samples: Vec<(f64, u64)>,
        /// Where they came from, for the line printed.
        source: String,
    },
}

type Conn = zlink::tokio::unix::Connection;

/// Runs a client command against the socket at `socket`; returns the exit status.
pub(crate) fn run(socket: &Path, cmd: Command) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cgwarden: error: cannot start the runtime: {e}");
            return exit::TEMPFAIL;
        }
    };
    rt.block_on(async move {
        let mut conn = match zlink::tokio::unix::connect(socket).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "cgwarden: error: no daemon answers on {}: {e} (is `cgwarden run` running, and \
                     may you use its socket?)",
                    socket.display()
                );
                return exit::UNREACHABLE;
            }
        };
        match run_on(&mut conn, cmd).await {
            Ok(code) => code,
            Err(Failure::Daemon(e)) => {
                eprintln!("cgwarden: error: {}", e.message());
                exit::REFUSED
            }
            Err(Failure::Link(e)) => {
                eprintln!(
                    "cgwarden: error: the daemon on {} stopped answering: {e}",
                    socket.display()
                );
                exit::UNREACHABLE
            }
        }
    })
}

enum Failure {
    Daemon(DaemonError),
    Link(zlink::Error),
}

fn answer<T>(r: zlink::Result<Result<T, DaemonError>>) -> Result<T, Failure> {
    match r {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(Failure::Daemon(e)),
        Err(e) => Err(Failure::Link(e)),
    }
}

fn json<T: serde::Serialize>(t: &T) -> String {
    serde_json::to_string_pretty(t).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

async fn run_on(conn: &mut Conn, cmd: Command) -> Result<u8, Failure> {
    match cmd {
        Command::Status { json: j } => {
            let s = answer(conn.status().await)?;
            if j {
                crate::outln!("{}", json(&s));
            } else {
                crate::out!("{}", super::render::status(&s));
            }
            Ok(exit::OK)
        }
        Command::Boost {
            knobs,
            duration,
            reason,
            cmd,
        } => boost(conn, knobs, duration, reason, cmd).await,
        Command::Kpi {
            name,
            unit,
            samples,
            source,
        } => {
            // A histogram may be large: 1000 buckets per call keeps a call
            // far below the service's 64 KiB message limit.
            let mut recorded = 0i64;
            for chunk in samples.chunks(1000) {
                let values: Vec<f64> = chunk.iter().map(|(v, _)| *v).collect();
                let counts: Vec<i64> = chunk
                    .iter()
                    .map(|(_, n)| i64::try_from(*n).unwrap_or(i64::MAX))
                    .collect();
                let r = answer(
                    conn.record_kpi(&name, &values, Some(&counts), Some(&unit))
                        .await,
                )?;
                recorded = recorded.saturating_add(r.recorded);
            }
            crate::outln!(
                "kpi {name}: {} recorded ({unit}) from {source}",
                crate::show::count(recorded, "sample")
            );
            Ok(exit::OK)
        }
        Command::Release { handle } => {
            let r = release(conn, handle).await?;
            crate::outln!("released boost {handle}");
            not_held(r.not_held.as_deref());
            Ok(exit::OK)
        }
        Command::Reload { dry_run, candidate } => {
            let (text, name) = match &candidate {
                Some(path) => match crate::policy::read_bytes(path) {
                    Ok(b) => (
                        Some(String::from_utf8_lossy(&b).into_owned()),
                        Some(path.display().to_string()),
                    ),
                    Err(m) => {
                        eprintln!("cgwarden: error: {}: {m}", path.display());
                        return Ok(exit::REFUSED);
                    }
                },
                None => (None, None),
            };
            let r = answer(conn.reload(Some(dry_run), text, name).await)?;
            for l in &r.diff {
                crate::outln!("{l}");
            }
            match (r.ok, &r.error) {
                (true, _) => {
                    let what = match &candidate {
                        Some(p) => format!("would reload {}", p.display()),
                        None if dry_run => "would reload".to_string(),
                        None => "reloaded".to_string(),
                    };
                    if dry_run && r.hash != r.in_force {
                        crate::outln!(
                            "{what}: policy {} ({}; in force: {})",
                            crate::show::short(&r.hash),
                            crate::show::count(r.changes, "change"),
                            crate::show::short(&r.in_force)
                        );
                    } else {
                        crate::outln!(
                            "{what}: policy {} ({})",
                            crate::show::short(&r.hash),
                            crate::show::count(r.changes, "change")
                        );
                    }
                    Ok(exit::OK)
                }
                (false, e) => {
                    eprintln!(
                        "{}",
                        e.as_deref().unwrap_or("the policy was refused").trim_end()
                    );
                    eprintln!("cgwarden: error: reload refused; the running policy is unchanged");
                    Ok(exit::REFUSED)
                }
            }
        }
        Command::Verify { json: j } => {
            let v = answer(conn.verify().await)?;
            if j {
                crate::outln!("{}", json(&v));
            } else {
                crate::out!("{}", super::render::verify(&v));
            }
            Ok(if v.drift { exit::REFUSED } else { exit::OK })
        }
        Command::Health { json: j } => {
            let h = answer(conn.health().await)?;
            if j {
                crate::outln!("{}", json(&h));
            } else if h.healthy {
                crate::outln!(
                    "healthy: policy {} in force since {}{}",
                    crate::show::short(&h.hash),
                    h.since,
                    h.target
                        .as_deref()
                        .map(|t| format!(", target {t}"))
                        .unwrap_or_default()
                );
            } else {
                for r in &h.reasons {
                    eprintln!("cgwarden: unhealthy: {r}");
                }
            }
            Ok(if h.healthy { exit::OK } else { exit::REFUSED })
        }
        Command::Events { json: j } => {
            let stream = conn.subscribe().await.map_err(Failure::Link)?;
            futures_util::pin_mut!(stream);
            while let Some(item) = stream.next().await {
                let ev = answer(item)?.event;
                // The reader went away (`events | head -3`): done, quietly.
                if crate::out::closed() {
                    break;
                }
                if j {
                    crate::outln!("{}", serde_json::to_string(&ev).unwrap_or_default());
                } else {
                    crate::outln!("{}", super::render::event(&ev));
                }
                if crate::out::closed() {
                    break;
                }
            }
            Ok(exit::OK)
        }
    }
}

async fn boost(
    conn: &mut Conn,
    knobs: Vec<String>,
    duration: Option<String>,
    reason: Option<String>,
    cmd: Vec<String>,
) -> Result<u8, Failure> {
    let mut map = BTreeMap::new();
    for kv in &knobs {
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("cgwarden: error: boost: `{kv}` is not KNOB=VALUE");
            return Ok(exit::USAGE);
        };
        map.insert(k.trim().to_string(), v.trim().to_string());
    }
    let tied = !cmd.is_empty();
    let b = answer(
        conn.boost(
            &map,
            duration.as_deref(),
            reason.as_deref(),
            None,
            Some(tied),
        )
        .await,
    )?;
    for r in &b.rejected {
        eprintln!("cgwarden: rejected: {}: {}", r.knob, r.why);
    }
    // The reply came once the writes landed, failed or passed their
    // deadline: what did not land is said here, before CMD starts.
    not_held(b.not_held.as_deref());
    let until = b.expires_at.as_deref().unwrap_or("released");
    for a in &b.applied {
        crate::outln!(
            "boost {}: {} = {} until {until}",
            b.handle,
            a.knob,
            crate::knobs::human::human_text(&a.knob, &a.value)
        );
    }
    if cmd.is_empty() {
        crate::outln!("{}", b.handle);
        return Ok(exit::OK);
    }
    // Hold the boost exactly while CMD runs: the reply above came once the
    // knobs held their values; the boost is tied to this connection, so it
    // ends even if this process is killed; released explicitly when CMD
    // exits, whose reply comes once the knobs are back, before we exit.
    let code = run_child(&cmd).await;
    if let Ok(r) = release(conn, b.handle).await {
        not_held(r.not_held.as_deref());
    }
    Ok(code)
}

/// `Release(handle)`. A reply without parameters (every write landed, or a
/// daemon that does not report them) is an empty [`wire::ReleaseReply`].
async fn release(conn: &mut Conn, handle: i64) -> Result<wire::ReleaseReply, Failure> {
    match conn.release(handle).await {
        Err(zlink::Error::MissingParameters) => Ok(wire::ReleaseReply::default()),
        r => answer(r),
    }
}

/// Prints the knobs whose write failed or was late (stderr; the call itself
/// succeeded, so the exit status does not change).
fn not_held(list: Option<&[wire::NotHeld]>) {
    for n in list.unwrap_or_default() {
        let what = if n.late { "late" } else { "not held" };
        eprintln!("cgwarden: {what}: {}: {}", n.knob, n.why);
    }
}

/// Runs CMD, forwarding SIGTERM/SIGINT/SIGHUP to it; its exit status.
async fn run_child(cmd: &[String]) -> u8 {
    use tokio::signal::unix::{signal, SignalKind};
    let Some((prog, args)) = cmd.split_first() else {
        return exit::USAGE;
    };
    let mut child = match tokio::process::Command::new(prog).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cgwarden: error: boost: cannot run {prog}: {e}");
            return 127;
        }
    };
    let mut sigs = Vec::new();
    for k in [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
    ] {
        if let Ok(s) = signal(k) {
            sigs.push((k, s));
        }
    }
    let pid = child.id();
    loop {
        let forwarded = async {
            let mut futs: Vec<_> = sigs
                .iter_mut()
                .map(|(k, s)| {
                    let k = *k;
                    Box::pin(async move {
                        s.recv().await;
                        k
                    })
                })
                .collect();
            if futs.is_empty() {
                std::future::pending::<()>().await;
            }
            let (k, _, _) = futures_util::future::select_all(futs.iter_mut()).await;
            drop(futs);
            k
        };
        tokio::select! {
            st = child.wait() => {
                return match st {
                    Ok(s) => {
                        use std::os::unix::process::ExitStatusExt;
                        match (s.code(), s.signal()) {
                            (Some(c), _) => u8::try_from(c).unwrap_or(1),
                            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
                            _ => 1,
                        }
                    }
                    Err(e) => {
                        eprintln!("cgwarden: error: boost: waiting for {prog}: {e}");
                        1
                    }
                }
            }
            k = forwarded => {
                if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::try_from(k.as_raw_value()).ok(),
                    );
                }
            }
        }
    }
}

/// Where the control socket is: `--socket`, else the policy's `state_dir`
/// (`/run/cgwarden` when the policy is the default one and it does not
/// exist), under `--root` if given. A policy named by `--policy` that cannot
/// be loaded is an error naming the file (never a question to
/// `/run/cgwarden` about `status --policy /typo.yaml`).
pub(crate) fn locate(
    socket: Option<&Path>,
    policy: &Path,
    root: Option<&Path>,
) -> Result<PathBuf, String> {
    let device_path = match socket {
        Some(s) => return Ok(s.to_path_buf()),
        None => {
            let state_dir = match crate::policy::load(policy) {
                Ok(p) => p.settings.state_dir,
                Err(_) if policy == Path::new(DEFAULT_POLICY) && !policy.exists() => {
                    crate::policy::model::Settings::default().state_dir
                }
                Err(e) => {
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or("");
                    let why = first.split_once(": error: ").map_or(first, |(_, m)| m);
                    // A policy file being edited (a typo saved, an update the
                    // daemon refused) must not lock the operator out of
                    // `status`, `health` or `reload`: its settings.state_dir,
                    // read leniently, or the default, when a daemon listens
                    // there.
                    if let Some(socket) = lenient_socket(policy, root) {
                        eprintln!(
                            "cgwarden: warning: --policy {}: {why}; reaching the daemon at {}",
                            policy.display(),
                            socket.display()
                        );
                        return Ok(socket);
                    }
                    return Err(format!(
                        "--policy {}: {why} (the daemon's policy names its socket's state_dir; or give --socket PATH)",
                        policy.display(),
                    ));
                }
            };
            super::wire::socket_path(&state_dir)
        }
    };
    Ok(on_host(device_path, root))
}

fn on_host(device_path: PathBuf, root: Option<&Path>) -> PathBuf {
    match root {
        Some(r) => crate::kernel::Root::fake(r).host_path(&device_path),
        None => device_path,
    }
}

/// The socket a policy that does not load still names: `settings.state_dir`
/// read from the YAML alone (the default when absent), if a socket exists
/// there. `None` when the file is unreadable or not YAML.
fn lenient_socket(policy: &Path, root: Option<&Path>) -> Option<PathBuf> {
    let text = std::fs::read_to_string(policy).ok()?;
    let doc: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    let state_dir = match doc.pointer("/settings/state_dir") {
        Some(serde_json::Value::String(s)) => PathBuf::from(s),
        Some(_) => return None,
        None => crate::policy::model::Settings::default().state_dir,
    };
    let socket = on_host(super::wire::socket_path(&state_dir), root);
    socket.exists().then_some(socket)
}

/// The policy clients read when `--policy` is not given.
pub(crate) const DEFAULT_POLICY: &str = "/etc/cgwarden/policy.yaml";
