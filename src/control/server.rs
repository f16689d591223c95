//! The varlink service on `state_dir/io.cgwarden`, a task of the daemon's
//! `cgw-services` thread. It forwards each call to the daemon's event loop as
//! a [`Call`] and relays the answer; `Subscribe` streams the loop's events.
//!
//! What zlink does not bound, this module does, around zlink's socket
//! (malformed, oversized, half-sent or slow requests):
//! - at most [`Limits::connections`] connections at once; one more is
//!   accepted and closed at once;
//! - a message (up to its NUL) may not exceed [`Limits::message`] bytes;
//! - a connection that sends nothing for [`Limits::idle`] is closed, one
//!   that stops in the middle of a message for [`Limits::partial`];
//! - a reply or event the client does not read within [`Limits::write`]
//!   closes the connection (a stuck subscriber cannot hold the service);
//! - at most [`Limits::subscribers`] event streams at once.
//!
//! zlink serves all connections from one task and reads malformed JSON as
//! a closed connection; neither can reach the daemon's loop, which only
//! ever sees well-formed [`Request`]s.

use super::wire::{self, DaemonError, EventReply};
use super::{Call, Caller, Request, Response};
use crate::control::wire::EventKind;
use futures_util::Stream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use zlink::connection::socket::ReadResult;
use zlink::connection::socket::{self, FetchPeerCredentials, Socket};
use zlink::Reply;

/// The bounds every connection lives within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) connections: usize,
    pub(crate) message: usize,
    pub(crate) idle: Duration,
    pub(crate) partial: Duration,
    pub(crate) write: Duration,
    pub(crate) subscribers: usize,
    /// How long a call waits for the daemon's loop.
    pub(crate) answer: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            message: 64 * 1024,
            idle: Duration::from_secs(60),
            partial: Duration::from_secs(5),
            write: Duration::from_secs(1),
            subscribers: 16,
            answer: Duration::from_secs(5),
        }
    }
}

pub(crate) use super::wire::socket_path;

/// What the service shares with the daemon.
#[derive(Debug, Clone)]
pub(crate) struct Handle {
    /// Live connections (for `status`).
    pub(crate) live: Arc<AtomicUsize>,
}

/// Binds `path` (removing a stale socket: the caller holds the state_dir
/// lock, so no other daemon serves it), mode 0660, group `gid`.
pub(crate) fn bind(path: &Path, gid: u32) -> std::io::Result<std::os::unix::net::UnixListener> {
    let l = bind_socket(path, gid, |p| std::os::unix::net::UnixListener::bind(p))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Binds a unix socket of the daemon's (`bind_with` makes it: a stream
/// listener, the KPI datagram socket) at `path`: a stale socket there is
/// replaced, anything else is refused; mode 0660, group `gid`.
pub(crate) fn bind_socket<S>(
    path: &Path,
    gid: u32,
    bind_with: impl FnOnce(&Path) -> std::io::Result<S>,
) -> std::io::Result<S> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() || m.is_file() || m.is_dir() => {
            return Err(std::io::Error::other(format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            )))
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    let s = bind_with(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid)))
        .map_err(std::io::Error::from)?;
    Ok(s)
}

/// Serves `listener` as a task of `services` (a runtime thread,
/// [`crate::kernel::runtime`]). Calls go to `calls`; events come from
/// `events`.
pub(crate) fn start(
    services: &crate::kernel::runtime::Spawner,
    listener: std::os::unix::net::UnixListener,
    calls: mpsc::UnboundedSender<Call>,
    events: broadcast::Sender<wire::Event>,
    limits: Limits,
) -> std::io::Result<Handle> {
    let live = Arc::new(AtomicUsize::new(0));
    let handle = Handle { live: live.clone() };
    services.spawn(move || async move {
        let listener = match tokio::net::UnixListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("control socket: {e}");
                return;
            }
        };
        let l = GuardedListener {
            inner: listener,
            live,
            next: AtomicU64::new(1),
            calls: calls.clone(),
            limits,
        };
        let service = Service {
            calls,
            events,
            subscribers: Arc::new(AtomicUsize::new(0)),
            limits,
        };
        if let Err(e) = zlink::Server::new(l, service).run().await {
            tracing::error!("control socket stopped: {e}");
        }
    })?;
    Ok(handle)
}

// ---- the socket, with limits ----

type InnerStream = zlink::tokio::unix::Stream;
type InnerRead = <InnerStream as Socket>::ReadHalf;
type InnerWrite = <InnerStream as Socket>::WriteHalf;

/// Counts a connection while either half lives; tells the daemon when it
/// closes (its connection-tied boosts end).
#[derive(Debug)]
struct ConnGuard {
    id: u64,
    live: Arc<AtomicUsize>,
    calls: mpsc::UnboundedSender<Call>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        let _ = self.calls.send(Call {
            request: Request::ConnClosed { conn: self.id },
            reply: None,
        });
    }
}

#[derive(Debug)]
struct GuardedListener {
    inner: tokio::net::UnixListener,
    live: Arc<AtomicUsize>,
    next: AtomicU64,
    calls: mpsc::UnboundedSender<Call>,
    limits: Limits,
}

impl zlink::Listener for GuardedListener {
    type Socket = Guarded;

    async fn accept(&mut self) -> zlink::Result<Option<zlink::Connection<Guarded>>> {
        loop {
            // An accept error (EMFILE, ENOBUFS) must not end the service:
            // zlink's server stops on the first one.
            let stream = match self.inner.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("control socket: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if self.live.load(Ordering::Relaxed) >= self.limits.connections {
                tracing::debug!(
                    "control socket: {} connections already; closing a new one",
                    self.limits.connections
                );
                drop(stream);
                continue;
            }
            let stream = match InnerStream::try_from(stream) {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("control socket: {e}");
                    continue;
                }
            };
            self.live.fetch_add(1, Ordering::Relaxed);
            let guard = Arc::new(ConnGuard {
                id: self.next.fetch_add(1, Ordering::Relaxed),
                live: self.live.clone(),
                calls: self.calls.clone(),
            });
            return Ok(Some(zlink::Connection::new(Guarded {
                inner: stream,
                guard,
                limits: self.limits,
            })));
        }
    }
}

/// A connection's socket: zlink's Unix stream within [`Limits`].
#[derive(Debug)]
pub(crate) struct Guarded {
    inner: InnerStream,
    guard: Arc<ConnGuard>,
    limits: Limits,
}

impl Socket for Guarded {
    type ReadHalf = GuardedRead;
    type WriteHalf = GuardedWrite;
    const CAN_TRANSFER_FDS: bool = true;

    fn split(self) -> (GuardedRead, GuardedWrite) {
        let (r, w) = self.inner.split();
        (
            GuardedRead {
                inner: r,
                guard: self.guard.clone(),
                limits: self.limits,
                since_nul: 0,
                quiet_since: tokio::time::Instant::now(),
                started: None,
            },
            GuardedWrite {
                inner: w,
                guard: self.guard,
                limits: self.limits,
            },
        )
    }
}

#[derive(Debug)]
pub(crate) struct GuardedRead {
    inner: InnerRead,
    guard: Arc<ConnGuard>,
    limits: Limits,
    /// Bytes received since the last message's NUL.
    since_nul: usize,
    /// When the last message ended (or the connection opened).
    quiet_since: tokio::time::Instant,
    /// When the message being received began.
    started: Option<tokio::time::Instant>,
}

/// The connection a read half belongs to.
pub(crate) trait ConnId {
    fn conn_id(&self) -> u64;
}

impl ConnId for GuardedRead {
    fn conn_id(&self) -> u64 {
        self.guard.id
    }
}

/// Whether a write failed because the client closed its end.
fn peer_gone(e: &zlink::Error) -> bool {
    matches!(e, zlink::Error::Io(io) if matches!(
        io.kind(),
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
    ))
}

fn closed(why: String) -> zlink::Error {
    zlink::Error::Io(std::io::Error::other(why))
}

impl socket::ReadHalf for GuardedRead {
    async fn read(&mut self, buf: &mut [u8]) -> zlink::Result<ReadResult> {
        // Fixed deadlines, not a timer per read: zlink re-creates every
        // connection's read future on each turn of its loop, so a timeout
        // started here would restart whenever anyone else talks.
        let (deadline, what) = match self.started {
            Some(t) => (t + self.limits.partial, "a message left unfinished"),
            None => (self.quiet_since + self.limits.idle, "nothing received"),
        };
        let r = match tokio::time::timeout_at(deadline, self.inner.read(buf)).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(closed(format!(
                    "connection {}: {what} for too long; closed",
                    self.guard.id
                )))
            }
        };
        let n = r.bytes_read().min(buf.len());
        let now = tokio::time::Instant::now();
        match buf[..n].iter().rposition(|b| *b == 0) {
            Some(p) => {
                self.since_nul = n - p - 1;
                self.quiet_since = now;
                self.started = (self.since_nul > 0).then_some(now);
            }
            None => {
                self.since_nul += n;
                if n > 0 && self.started.is_none() {
                    self.started = Some(now);
                }
            }
        }
        if self.since_nul > self.limits.message {
            return Err(closed(format!(
                "connection {}: a message over {} bytes; closed",
                self.guard.id, self.limits.message
            )));
        }
        Ok(r)
    }
}

impl AsFd for GuardedRead {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl socket::UnixSocket for GuardedRead {}

#[derive(Debug)]
pub(crate) struct GuardedWrite {
    inner: InnerWrite,
    guard: Arc<ConnGuard>,
    limits: Limits,
}

impl socket::WriteHalf for GuardedWrite {
    async fn write(
        &mut self,
        buf: &[u8],
        fds: &[impl AsFd],
        creds: Option<&zlink::connection::PassedCredentials>,
    ) -> zlink::Result<()> {
        // This layer says what happened; zlink's own "Error writing to
        // client" WARN is filtered out of the log (see `main`), so a client
        // that simply went away (`events | head -1`, a killed `top`) is not
        // a warning.
        let id = self.guard.id;
        match tokio::time::timeout(self.limits.write, self.inner.write(buf, fds, creds)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                if peer_gone(&e) {
                    tracing::debug!("control socket: connection {id}: the client went away");
                } else {
                    tracing::warn!("control socket: connection {id}: writing: {e}");
                }
                Err(e)
            }
            Err(_) => {
                let why = format!(
                    "connection {id}: a reply was not read within {:?}; connection closed",
                    self.limits.write
                );
                tracing::warn!("control socket: {why}");
                Err(closed(why))
            }
        }
    }
}

// ---- the service ----

struct Service {
    calls: mpsc::UnboundedSender<Call>,
    events: broadcast::Sender<wire::Event>,
    subscribers: Arc<AtomicUsize>,
    limits: Limits,
}

impl Service {
    async fn ask(&self, request: Request) -> Response {
        ask(self.calls.clone(), self.limits.answer, request).await
    }

    /// The one reply of a call the daemon answers once its writes have
    /// landed (`Boost`, `Extend`, `Release`), as a stream: zlink serves
    /// every connection from one task, and a stream is polled beside the
    /// others, so a call waiting for a slow write (up to the late-write
    /// deadline) holds up no other client.
    fn answer_later<T: Send + 'static>(
        &self,
        request: Result<Request, DaemonError>,
        take: impl FnOnce(Response) -> Option<Reply<T>> + Send + 'static,
    ) -> AnswerStream<T> {
        let (calls, limit) = (self.calls.clone(), self.limits.answer);
        Box::pin(futures_util::stream::once(async move {
            match ask(calls, limit, request?).await {
                Response::Error(e) => Err(e),
                r => take(r)
                    .map(|r| r.set_continues(Some(false)))
                    .ok_or_else(unexpected),
            }
        }))
    }
}

/// Sends `request` to the daemon's loop and waits up to `limit` for its answer.
async fn ask(calls: mpsc::UnboundedSender<Call>, limit: Duration, request: Request) -> Response {
    let (tx, rx) = oneshot::channel();
    let call = Call {
        request,
        reply: Some(tx),
    };
    if calls.send(call).is_err() {
        return Response::Error(unavailable("the daemon is stopping"));
    }
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Response::Error(unavailable("the daemon is stopping")),
        Err(_) => Response::Error(unavailable(&format!(
            "the daemon did not answer within {limit:?}"
        ))),
    }
}

type AnswerStream<T> = Pin<Box<dyn Stream<Item = Result<Reply<T>, DaemonError>> + Send>>;

fn unavailable(m: &str) -> DaemonError {
    DaemonError::Unavailable {
        message: m.to_string(),
    }
}

fn unexpected() -> DaemonError {
    unavailable("the daemon gave an answer of the wrong kind")
}

async fn caller<Sock>(conn: &mut zlink::Connection<Sock>) -> Result<Caller, DaemonError>
where
    Sock: Socket,
    Sock::ReadHalf: FetchPeerCredentials + ConnId,
{
    let id = conn.read().read_half().conn_id();
    let creds = conn
        .peer_credentials()
        .await
        .map_err(|e| DaemonError::Refused {
            message: format!("the kernel did not say who is calling: {e}"),
        })?;
    Ok(Caller {
        uid: creds.unix_user_id().as_raw(),
        gid: creds.unix_primary_group_id().as_raw(),
        groups: creds
            .unix_supplementary_group_ids()
            .iter()
            .map(|g| g.as_raw())
            .collect(),
        pid: creds.process_id().as_raw_nonzero().get(),
        conn: id,
    })
}

type EventStream = Pin<Box<dyn Stream<Item = Reply<EventReply>> + Send>>;

#[zlink::service(
    interface = "io.cgwarden.Daemon",
    vendor = "cgwarden",
    product = "cgwarden",
    version = env!("CARGO_PKG_VERSION"),
    url = "https://github.com/cgwarden/cgwarden",
    types = [
        wire::PolicyInfo, wire::GroupStatus, wire::RuleStatus, wire::Contender,
        wire::KnobStatus, wire::ClaimInfo, wire::ActionInfo, wire::DaemonInfo,
        wire::Applied, wire::Rejected, wire::NotHeld, wire::KnobCheck, wire::Event,
        wire::LeftAlone
    ]
)]
impl<Sock> Service
where
    Sock::ReadHalf: FetchPeerCredentials + ConnId,
{
    /// Everything the daemon is doing: policy, groups, rules, knobs, claims, recent writes.
    async fn status(&mut self) -> Result<wire::StatusReply, DaemonError> {
        match self.ask(Request::Status).await {
            Response::Status(s) => Ok(*s),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// Hold knobs at values for a while. Answered once the boost's writes have landed, failed or passed the late-write deadline (one reply, with or without `more`).
    #[zlink(more)]
    async fn boost(
        &mut self,
        more: bool,
        knobs: std::collections::BTreeMap<String, String>,
        duration: Option<String>,
        reason: Option<String>,
        pid: Option<i64>,
        tied_to_connection: Option<bool>,
        #[zlink(connection)] conn: &mut zlink::Connection<Sock>,
    ) -> impl Stream<Item = Result<Reply<wire::BoostReply>, DaemonError>> + Unpin {
        let _ = more;
        let request = caller(conn).await.map(|caller| Request::Boost {
            caller,
            knobs,
            duration,
            reason,
            pid,
            tied_to_connection: tied_to_connection.unwrap_or(false),
        });
        let s: AnswerStream<wire::BoostReply> = self.answer_later(request, |r| match r {
            Response::Boost(b) => Some(Reply::new(Some(b))),
            _ => None,
        });
        s
    }

    /// Move a boost's deadline to `duration` from now. Answered once the writes it causes have landed (one reply, with or without `more`).
    #[zlink(more)]
    async fn extend(
        &mut self,
        more: bool,
        handle: i64,
        duration: String,
        #[zlink(connection)] conn: &mut zlink::Connection<Sock>,
    ) -> impl Stream<Item = Result<Reply<wire::ExtendReply>, DaemonError>> + Unpin {
        let _ = more;
        let request = caller(conn).await.map(|caller| Request::Extend {
            caller,
            handle,
            duration,
        });
        let s: AnswerStream<wire::ExtendReply> = self.answer_later(request, |r| match r {
            Response::Extend(x) => Some(Reply::new(Some(x))),
            _ => None,
        });
        s
    }

    /// End a boost now. Answered once its knobs are written back (one reply, with or without `more`); without parameters when every write landed.
    #[zlink(more)]
    async fn release(
        &mut self,
        more: bool,
        handle: i64,
        #[zlink(connection)] conn: &mut zlink::Connection<Sock>,
    ) -> impl Stream<Item = Result<Reply<wire::ReleaseReply>, DaemonError>> + Unpin {
        let _ = more;
        let request = caller(conn)
            .await
            .map(|caller| Request::Release { caller, handle });
        let s: AnswerStream<wire::ReleaseReply> = self.answer_later(request, |r| match r {
            // Nothing to report: the reply a `()` method gives.
            Response::Released(x) if x.not_held.is_none() => Some(Reply::new(None)),
            Response::Released(x) => Some(Reply::new(Some(x))),
            _ => None,
        });
        s
    }

    /// Every live claim, rules' and boosts'.
    async fn list_claims(&mut self) -> Result<wire::ClaimsReply, DaemonError> {
        match self.ask(Request::ListClaims).await {
            Response::Claims(c) => Ok(c),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// Re-read the policy; with dry_run, only say what would change. A
    /// candidate (the YAML text, with dry_run only) is previewed instead of
    /// the policy file: the difference from the policy in force.
    async fn reload(
        &mut self,
        dry_run: Option<bool>,
        candidate: Option<String>,
        candidate_name: Option<String>,
        #[zlink(connection)] conn: &mut zlink::Connection<Sock>,
    ) -> Result<wire::ReloadReply, DaemonError> {
        let caller = caller(conn).await?;
        if caller.uid != 0 {
            return Err(DaemonError::Refused {
                message: format!(
                    "uid {} may not reload the policy: only root may",
                    caller.uid
                ),
            });
        }
        let dry_run = dry_run.unwrap_or(false);
        if candidate.is_some() && !dry_run {
            return Err(DaemonError::InvalidRequest {
                message: "a candidate policy is only previewed (dry_run); the daemon loads the file it watches".into(),
            });
        }
        let candidate =
            candidate.map(|text| (candidate_name.unwrap_or_else(|| "candidate".into()), text));
        match self.ask(Request::Reload { dry_run, candidate }).await {
            Response::Reload(r) => Ok(r),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// Compare every managed knob with what it should hold.
    async fn verify(&mut self) -> Result<wire::VerifyReply, DaemonError> {
        match self.ask(Request::Verify).await {
            Response::Verify(v) => Ok(v),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// Is the policy on disk in force, with no failed reload, drift or failed write since it was loaded? (The post-update check.)
    async fn health(&mut self) -> Result<wire::HealthReply, DaemonError> {
        match self.ask(Request::Health).await {
            Response::Health(h) => Ok(*h),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// Record samples of a KPI: `values` in `unit` (`seconds` or `none`, the default); `counts[i]`, when given, repeats `values[i]` (a histogram). Anyone who may connect may record.
    async fn record_kpi(
        &mut self,
        name: String,
        values: Vec<f64>,
        counts: Option<Vec<i64>>,
        unit: Option<String>,
    ) -> Result<wire::RecordKpiReply, DaemonError> {
        let samples = super::kpi_samples(&values, counts.as_deref())?;
        match self
            .ask(Request::RecordKpi {
                name,
                unit,
                samples,
            })
            .await
        {
            Response::RecordKpi(r) => Ok(r),
            Response::Error(e) => Err(e),
            _ => Err(unexpected()),
        }
    }

    /// The event stream: rules, writes, claims, reloads (call with `more`); a daemon that stops ends it with a `stopped` event.
    #[zlink(more)]
    async fn subscribe(&mut self, more: bool) -> impl Stream<Item = Reply<EventReply>> + Unpin {
        let s: EventStream = self.event_stream(more);
        s
    }
}

impl Service {
    fn event_stream(&mut self, more: bool) -> EventStream {
        let first = |message: &str| wire::Event {
            time: crate::show::rfc3339_millis(std::time::SystemTime::now()),
            kind: EventKind::Subscribed.into(),
            message: Some(message.to_string()),
            ..Default::default()
        };
        let reply = |event: wire::Event, continues: bool| {
            Reply::new(Some(EventReply { event })).set_continues(Some(continues))
        };
        if !more {
            return Box::pin(futures_util::stream::iter([reply(
                first("call Subscribe with `more` to follow the events"),
                false,
            )]));
        }
        let n = self.subscribers.fetch_add(1, Ordering::Relaxed);
        if n >= self.limits.subscribers {
            self.subscribers.fetch_sub(1, Ordering::Relaxed);
            return Box::pin(futures_util::stream::iter([reply(
                first(&format!(
                    "{} event streams are open already; try again later",
                    self.limits.subscribers
                )),
                false,
            )]));
        }
        let slot = SubscriberSlot(self.subscribers.clone());
        let rx = self.events.subscribe();
        let head = futures_util::stream::iter([reply(first("following events"), true)]);
        // The daemon's last event, `stopped`, is the stream's last reply (no
        // `continues`): a client tells a clean stop from a daemon that died
        // (the connection closing without it). The stream, and with it the
        // receiver, ends once that reply is written: the daemon waits for
        // that before it exits.
        let tail = futures_util::stream::unfold(
            (rx, slot, false),
            move |(mut rx, slot, ended)| async move {
                if ended {
                    // Polled again only once the last reply was written.
                    return None;
                }
                let event = match rx.recv().await {
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(n)) => wire::Event {
                        time: crate::show::rfc3339_millis(std::time::SystemTime::now()),
                        kind: EventKind::Lagged.into(),
                        message: Some(format!(
                            "{} dropped: this client reads too slowly",
                            crate::show::count(n, "event")
                        )),
                        ..Default::default()
                    },
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                let last = event.kind == wire::STOPPED;
                Some((reply(event, !last), (rx, slot, last)))
            },
        );
        use futures_util::StreamExt;
        Box::pin(head.chain(tail))
    }
}

/// Frees a subscriber slot when its stream ends.
struct SubscriberSlot(Arc<AtomicUsize>);

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
