//! `GET /metrics` over HTTP/1.1 on a unix socket and/or a TCP address, and
//! the node_exporter textfile, as tasks of the daemon's `cgw-services`
//! thread (SCHED_OTHER: threads the daemon creates start SCHED_OTHER through
//! `SCHED_FLAG_RESET_ON_FORK`; its current-thread tokio runtime also serves
//! the control and KPI sockets and the policy watch). Nothing here runs on
//! the event loop: a scrape reads the groups' files and the last published
//! engine view ([`super::state`]) on that thread. The textfile's write,
//! which may wait for the disk, is the thread's that does: the recorder's
//! (`cgw-recorder`) when it runs, else `cgw-textfile`.
//!
//! The server is hyper 1 (with hyper-util's tokio glue), the maintained
//! HTTP implementation tokio programs use; it serves both listeners, so
//! no HTTP parsing is written here. Bounds, like the control socket's:
//! at most [`MAX_CONNECTIONS`] connections at once (one more is closed at
//! once), request heads of at most [`MAX_HEAD`] bytes, [`HEAD_TIMEOUT`] to
//! send the request head and [`CONN_DEADLINE`] for a whole connection; a
//! stuck client holds one connection slot for at most that long.

use super::metrics::{self, OwnCost};
use super::state::EngineView;
use super::textfile::{Job, Textfile};
use crate::kernel::cgroupfs::CgroupFs;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};

/// Connections served at once (both listeners together).
pub(crate) const MAX_CONNECTIONS: usize = 16;
/// The largest request head accepted (hyper's read buffer).
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Time a client has to send its request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives (keep-alive included).
pub(crate) const CONN_DEADLINE: Duration = Duration::from_secs(30);

/// What a scrape reads.
#[derive(Clone)]
pub(crate) struct Exposer {
    pub(crate) cg: CgroupFs,
    pub(crate) view: watch::Receiver<Arc<EngineView>>,
    /// The KPI store (`cgwarden_kpi`).
    pub(crate) kpi: Option<Arc<super::kpi::Store>>,
}

impl Exposer {
    /// One OpenMetrics exposition, read now.
    pub(crate) fn scrape(&self) -> String {
        let view = self.view.borrow().clone();
        let mut groups: Vec<super::sample::GroupSample> = view
            .groups
            .iter()
            .map(|(name, path)| super::sample::read_group(&self.cg, name, path))
            .collect();
        // The machine's memory telemetry and OOM kills.
        groups.push(super::sample::host_memory(self.cg.root()));
        let om = metrics::render(view, groups, OwnCost::read());
        match &self.kpi {
            Some(k) => super::kpi::expose::splice(om, k, std::time::Instant::now()),
            None => om,
        }
    }
}

/// The bound listeners and textfile the services thread serves.
pub(crate) struct Endpoints {
    pub(crate) unix: Option<std::os::unix::net::UnixListener>,
    pub(crate) tcp: Option<std::net::TcpListener>,
    /// Host path of the textfile, how often it is written, and the thread
    /// that writes it (the recorder's, when it runs: [`start`] starts
    /// `cgw-textfile` otherwise).
    pub(crate) textfile: Option<(PathBuf, Duration)>,
    /// The recorder's jobs, when it runs.
    pub(crate) disk: Option<std::sync::mpsc::Sender<Job>>,
}

/// Serves `ends` as tasks of `services` (the daemon's `cgw-services`
/// thread, [`crate::kernel::runtime`]).
pub(crate) fn start(
    services: &crate::kernel::runtime::Spawner,
    exposer: Exposer,
    ends: Endpoints,
) -> std::io::Result<()> {
    let textfile = match (ends.textfile, ends.disk) {
        (Some((path, every)), Some(disk)) => Some((path, every, disk)),
        (Some((path, every)), None) => Some((path, every, super::textfile::thread()?)),
        (None, _) => None,
    };
    let (unix, tcp) = (ends.unix, ends.tcp);
    services.spawn(move || serve(exposer, unix, tcp, textfile))
}

async fn serve(
    exposer: Exposer,
    unix: Option<std::os::unix::net::UnixListener>,
    tcp: Option<std::net::TcpListener>,
    textfile: Option<(PathBuf, Duration, std::sync::mpsc::Sender<Job>)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = Vec::new();
    if let Some(l) = unix {
        match tokio::net::UnixListener::from_std(l) {
            Ok(l) => {
                let (e, s) = (exposer.clone(), slots.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        match l.accept().await {
                            Ok((stream, _)) => connection(stream, &e, &s),
                            Err(err) => accept_failed(&err).await,
                        }
                    }
                }));
            }
            Err(e) => tracing::error!("metrics socket: {e}"),
        }
    }
    if let Some(l) = tcp {
        match tokio::net::TcpListener::from_std(l) {
            Ok(l) => {
                let (e, s) = (exposer.clone(), slots.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        match l.accept().await {
                            Ok((stream, _)) => connection(stream, &e, &s),
                            Err(err) => accept_failed(&err).await,
                        }
                    }
                }));
            }
            Err(e) => tracing::error!("metrics listener: {e}"),
        }
    }
    if let Some((path, every, disk)) = textfile {
        let e = exposer.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let busy = Arc::new(AtomicBool::new(false));
            loop {
                tick.tick().await;
                // One write waits for the disk at a time; while it does, a
                // newer text is not queued behind it.
                if busy.swap(true, Ordering::AcqRel) {
                    tracing::debug!(path = %path.display(), "metrics textfile: the last write still waits for the disk; this one skipped");
                    continue;
                }
                let text = metrics::to_prometheus_text(&e.scrape());
                let job = Textfile {
                    path: path.clone(),
                    text,
                    busy: busy.clone(),
                };
                if disk.send(Job::Textfile(job)).is_err() {
                    // Only at the daemon's stop (the recorder's last interval).
                    tracing::debug!(path = %path.display(), "metrics textfile: its writer has stopped");
                    return;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// An accept error (EMFILE, ENOBUFS) must not end the service.
async fn accept_failed(e: &std::io::Error) {
    tracing::warn!("metrics: accept: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Serves one connection on its own task, within the bounds.
fn connection<S>(stream: S, exposer: &Exposer, slots: &Arc<Semaphore>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Ok(permit) = slots.clone().try_acquire_owned() else {
        tracing::debug!("metrics: {MAX_CONNECTIONS} connections already; closing a new one");
        return;
    };
    let exposer = exposer.clone();
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |req| {
            let e = exposer.clone();
            async move { Ok::<_, std::convert::Infallible>(answer(&e, &req)) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEAD_TIMEOUT)
            .max_buf_size(MAX_HEAD)
            .serve_connection(TokioIo::new(stream), service);
        match tokio::time::timeout(CONN_DEADLINE, conn).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("metrics: connection: {e}"),
            Err(_) => tracing::debug!("metrics: connection closed after {CONN_DEADLINE:?}"),
        }
        drop(permit);
    });
}

/// The answer to one request: `GET`/`HEAD /metrics`, OpenMetrics when the
/// client asks for it (Prometheus does), else the Prometheus text format.
fn answer(exposer: &Exposer, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(ctype),
        );
        r
    };
    if req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "cgwarden serves GET /metrics\n".into(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET or HEAD\n".into(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    let openmetrics = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let started = Instant::now();
    let text = exposer.scrape();
    tracing::debug!(took = ?started.elapsed(), "metrics scraped");
    if openmetrics {
        reply(StatusCode::OK, metrics::OPENMETRICS, text)
    } else {
        reply(
            StatusCode::OK,
            metrics::PROMETHEUS_TEXT,
            metrics::to_prometheus_text(&text),
        )
    }
}
