//! One hook run, from spawn to reaped: the command line with its `${…}`
//! substitutions, the spawn into its own cgroup and process group, the
//! supervision under the timeout, the output drained line by line into the
//! log (capped), and the run cgroup removed afterwards.

use super::{
    bump, Counters, Creds, HookContext, HookEvent, CGROUP_EMPTY_WAIT, FIELDS, GROUP_POLL,
    HOOK_PATH, OUTPUT_CAP, PIPE_GRACE,
};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::{remove_runs, ChildSetup};
use crate::policy::model::Hook;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

pub(super) fn log_join(r: Result<(), tokio::task::JoinError>) {
    if let Err(e) = r {
        if e.is_panic() {
            tracing::error!("hook supervisor panicked: {e}");
        }
    }
}

/// The error text without Rust's " (os error N)" suffix.
fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => Errno::from_raw(n).desc().to_string(),
        None => e.to_string(),
    }
}

/// Replaces the known placeholders in `arg` (one pass, left to right).
pub(super) fn substitute(arg: &str, values: &[String; 8]) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let hit = FIELDS
            .iter()
            .zip(values)
            .find(|((key, _), _)| tail.starts_with(key) && tail[key.len()..].starts_with('}'));
        match hit {
            Some(((key, _), v)) => {
                out.push_str(v);
                rest = &tail[key.len() + 1..];
            }
            None => {
                out.push('{');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

pub(super) fn command(
    hook: &Hook,
    creds: Option<Creds>,
    ctx: &HookContext,
    setup: ChildSetup,
) -> Command {
    let values = ctx.values();
    let mut cmd = Command::new(&hook.exec[0]);
    cmd.args(hook.exec[1..].iter().map(|a| substitute(a, &values)))
        .env_clear()
        .envs(FIELDS.iter().zip(&values).map(|((_, var), v)| (*var, v)))
        .env("PATH", HOOK_PATH)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::kernel::hook_run::confine(&mut cmd, setup, creds.map(|c| (c.uid, c.gid)));
    cmd
}

/// Spawns `cmd` for `run` (setting its pid); the error text names the
/// program.
pub(super) fn spawn(cmd: &mut Command, run: &mut Run) -> Result<Child, String> {
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(err) => {
            let mut msg = format!("{}: {}", run.program, errno_text(&err));
            if let (Some(user), Some(libc::EPERM)) = (&run.user, err.raw_os_error()) {
                msg.push_str(&format!(" (running as user {user:?} needs root)"));
            }
            return Err(msg);
        }
    };
    let Some(pid) = child.id() else {
        return Err("spawned process has no pid".to_string());
    };
    run.pid = pid;
    bump(&run.counters.started);
    tracing::info!(hook = %run.name, rule = %run.rule, event = run.event.as_str(), pid,
        cgroup = run.cgroup.as_ref().map(|c| c.rel.as_str()).unwrap_or(""), "hook started");
    Ok(child)
}

/// A queued `cleared` run: waits for a slot (or the shutdown kill, which
/// drops it), then runs like any other.
pub(super) async fn queued(
    mut cmd: Command,
    mut run: Run,
    slots: Arc<Semaphore>,
    mut kill: watch::Receiver<bool>,
    waiting: Arc<AtomicUsize>,
) {
    let permit = {
        let killed = async {
            if kill.wait_for(|k| *k).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            p = slots.acquire_owned() => p.ok(),
            _ = killed => None,
        }
    };
    waiting.fetch_sub(1, Ordering::Relaxed);
    let Some(permit) = permit else {
        tracing::warn!(hook = %run.name, rule = %run.rule,
            "shutting down: queued `cleared` hook not run");
        if let Some(c) = &run.cgroup {
            c.discard();
        }
        return;
    };
    match spawn(&mut cmd, &mut run) {
        Ok(child) => supervise(child, run, kill, permit).await,
        Err(msg) => {
            bump(&run.counters.failed);
            tracing::error!(hook = %run.name, rule = %run.rule, "hook not run: {msg}");
            if let Some(c) = &run.cgroup {
                c.discard();
            }
        }
    }
}

/// The cgroup of one run.
pub(super) struct RunCgroup {
    pub(super) cg: Arc<CgroupFs>,
    /// `cgwarden.hooks/<hook>-<seq>`, relative to the cgroup root.
    pub(super) rel: String,
}

impl RunCgroup {
    pub(super) fn procs_host_path(&self) -> std::path::PathBuf {
        self.cg
            .root()
            .host_path(&self.cg.file(&self.rel, "cgroup.procs"))
    }

    /// Removes the cgroup of a run that never started.
    pub(super) fn discard(&self) {
        if let Err(e) = self.cg.rmdir(&self.rel) {
            tracing::error!("cannot remove hook run cgroup: {e}");
        }
    }

    /// Waits (bounded) until the cgroup is empty, then removes it.
    async fn remove(&self, run: &Run) {
        let t0 = tokio::time::Instant::now();
        loop {
            match self.cg.populated(&self.rel) {
                Ok(false) => break,
                Err(e) if e.is_not_found() => return,
                Err(e) => {
                    tracing::error!(hook = %run.name, "hook run cgroup: {e}");
                    break;
                }
                Ok(true) if t0.elapsed() < CGROUP_EMPTY_WAIT => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(true) => {
                    tracing::error!(hook = %run.name, rule = %run.rule,
                        path = %self.cg.dir(&self.rel).display(),
                        "hook run cgroup still populated {CGROUP_EMPTY_WAIT:?} after its run ended; killing it again, the next start removes it");
                    let _ = self.cg.kill(&self.rel);
                    return;
                }
            }
        }
        match self.cg.rmdir(&self.rel) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::error!(hook = %run.name, "cannot remove hook run cgroup: {e}"),
        }
    }
}

/// Kills and removes the run cgroups a daemon that crashed or was killed
/// left under [`HOOKS_PARENT`].
pub(super) fn remove_stale_runs(cg: &CgroupFs) {
    for r in remove_runs(cg, CGROUP_EMPTY_WAIT) {
        match r {
            Ok(path) => tracing::warn!(path = %path.display(),
                "removed a hook run cgroup left by a previous daemon"),
            Err(e) => tracing::error!("stale hook run: {e}"),
        }
    }
}

/// One running hook process, as its supervisor sees it.
pub(super) struct Run {
    pub(super) name: Arc<str>,
    pub(super) rule: String,
    pub(super) event: HookEvent,
    /// `exec[0]` and `user`, for spawn errors.
    pub(super) program: String,
    pub(super) user: Option<String>,
    pub(super) pid: u32,
    pub(super) timeout: Duration,
    pub(super) counters: Arc<Counters>,
    /// The run's own cgroup, when it has one.
    pub(super) cgroup: Option<RunCgroup>,
}

impl Run {
    pub(super) fn pgid(&self) -> Pid {
        Pid::from_raw(self.pid as i32)
    }

    /// SIGKILL to the run's process group. Only called while the group is
    /// known to exist: the leader is not reaped yet, or a probe just found
    /// members (a live group pins its id, so it cannot be reused).
    pub(super) fn kill_group(&self) {
        if let Some(c) = &self.cgroup {
            if let Err(e) = c.cg.kill(&c.rel) {
                tracing::error!(hook = %self.name, rule = %self.rule, pid = self.pid,
                    "cannot kill hook cgroup: {e}");
            }
        }
        match killpg(self.pgid(), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::error!(hook = %self.name, rule = %self.rule, pid = self.pid,
                "cannot kill hook process group: {e}"),
        }
    }

    /// True while some process (possibly a zombie) is in the process
    /// group, or the run's cgroup is populated.
    pub(super) fn group_alive(&self) -> bool {
        if let Some(c) = &self.cgroup {
            if c.cg.populated(&c.rel).unwrap_or(false) {
                return true;
            }
        }
        killpg(self.pgid(), None).is_ok()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Drained {
    /// Bytes read from the pipe.
    pub(super) read: u64,
    /// Bytes logged (≤ OUTPUT_CAP).
    pub(super) logged: usize,
    pub(super) truncated: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Killed {
    Timeout,
    Shutdown,
}

/// Owns one hook process until it is reaped; holds its concurrency slot.
pub(super) async fn supervise(
    mut child: Child,
    run: Run,
    mut kill: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let start = tokio::time::Instant::now();
    let deadline = start + run.timeout;
    let mut out = pin!(drain_opt(child.stdout.take(), Stream::Stdout, &run));
    let mut err = pin!(drain_opt(child.stderr.take(), Stream::Stderr, &run));
    let timer = tokio::time::sleep_until(deadline);
    let mut timer = pin!(timer);
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut out_res: Option<Drained> = None;
    let mut err_res: Option<Drained> = None;
    let mut killed: Option<Killed> = None;
    let mut pipes_abandoned = false;
    let mut kill_gone = false;
    let mut probing = false;

    loop {
        let pipes_done = pipes_abandoned || (out_res.is_some() && err_res.is_some());
        if status.is_some() && pipes_done {
            if killed.is_some() {
                break;
            }
            // Leftovers in the group get the rest of the timeout: probe the
            // group now and then every GROUP_POLL.
            if !probing {
                if !run.group_alive() {
                    break;
                }
                probing = true;
            }
        }
        tokio::select! {
            s = child.wait(), if status.is_none() => status = Some(s),
            d = &mut out, if out_res.is_none() && !pipes_abandoned => out_res = Some(d),
            d = &mut err, if err_res.is_none() && !pipes_abandoned => err_res = Some(d),
            _ = &mut timer, if !(killed.is_some() && pipes_abandoned) => {
                if killed.is_none() {
                    killed = Some(Killed::Timeout);
                    bump(&run.counters.timed_out);
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        timeout = ?run.timeout, "hook timed out, killing its process group");
                    run.kill_group();
                    timer.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
                } else {
                    pipes_abandoned = true;
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        "hook output pipes still open after kill, abandoning them");
                }
            }
            r = kill.wait_for(|k| *k), if killed.is_none() && !kill_gone => match r {
                Ok(_) => {
                    killed = Some(Killed::Shutdown);
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        "shutting down, killing hook process group");
                    run.kill_group();
                    timer.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
                }
                Err(_) => kill_gone = true,
            },
            _ = tokio::time::sleep(GROUP_POLL), if probing && killed.is_none() => {
                if !run.group_alive() {
                    break;
                }
            }
        }
    }

    let took = start.elapsed();
    run.counters.duration.record(took);
    if let Some(c) = &run.cgroup {
        c.remove(&run).await;
    }
    for d in [out_res, err_res].into_iter().flatten() {
        if d.truncated {
            bump(&run.counters.output_truncated);
            break;
        }
    }
    match status {
        Some(Ok(s)) if s.success() && killed.is_none() => {
            bump(&run.counters.succeeded);
            tracing::info!(hook = %run.name, rule = %run.rule, pid = run.pid, status = %s,
                duration = ?took, "hook exited");
        }
        Some(Ok(s)) => {
            if !s.success() {
                bump(&run.counters.exited_nonzero);
            }
            tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid, status = %s,
                duration = ?took, killed = ?killed, "hook exited");
        }
        Some(Err(e)) => {
            tracing::error!(hook = %run.name, rule = %run.rule, pid = run.pid,
                "waiting for hook: {e}");
        }
        None => {} // the loop only ends once the program is reaped
    }
}

async fn drain_opt<R: AsyncRead + Unpin>(r: Option<R>, stream: Stream, run: &Run) -> Drained {
    match r {
        Some(r) => drain(r, stream, run).await,
        None => Drained::default(),
    }
}

/// Logs `r` line by line up to [`OUTPUT_CAP`] bytes, then reads to EOF
/// discarding the rest.
pub(super) async fn drain<R: AsyncRead + Unpin>(mut r: R, stream: Stream, run: &Run) -> Drained {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut d = Drained::default();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(hook = %run.name, stream = stream.as_str(),
                    "reading hook output: {e}");
                break;
            }
        };
        d.read += n as u64;
        if d.truncated {
            continue;
        }
        let take = n.min(OUTPUT_CAP - d.logged);
        d.logged += take;
        for &b in &buf[..take] {
            if b == b'\n' {
                emit(&mut line, stream, run);
            } else {
                line.push(b);
            }
        }
        if take < n {
            d.truncated = true;
            emit(&mut line, stream, run);
            tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                stream = stream.as_str(),
                "hook output truncated after {OUTPUT_CAP} bytes, discarding the rest");
        }
    }
    if !line.is_empty() {
        emit(&mut line, stream, run);
    }
    d
}

/// Logs one line (without its newline) and clears the buffer.
fn emit(line: &mut Vec<u8>, stream: Stream, run: &Run) {
    let bytes = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(bytes);
    match stream {
        Stream::Stdout => tracing::info!(hook = %run.name, rule = %run.rule, pid = run.pid,
            stream = "stdout", "{text}"),
        Stream::Stderr => tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
            stream = "stderr", "{text}"),
    }
    line.clear();
}
