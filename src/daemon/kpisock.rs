//! The inputs of the KPI store
//! ([`crate::observe::kpi`]) — StatsD lines on the unix datagram socket
//! `state_dir/kpi.sock`, and varlink `RecordKpi` (answered here for the
//! event loop).
//!
//! Decisions:
//! - The socket is `SOCK_DGRAM`, mode 0660, group `settings.socket_group`,
//!   beside the control socket (and only when it is served): whoever may
//!   use the control socket may report KPIs, nobody else. A datagram
//!   carries its own boundaries, so a client that dies mid-send leaves
//!   nothing half-read, and a sender never waits for the daemon beyond the
//!   socket buffer (a full buffer makes its `send` fail or block, as with
//!   a StatsD daemon over UDP).
//! - A task of the `cgw-services` thread (tokio's `UnixDatagram`): samples
//!   go straight into the store (one short mutex), never through the event
//!   loop, so a flood of samples costs the loop nothing.
//! - Malformed lines (and refused samples) never stop the datagram's other
//!   lines; each is counted (`cgwarden_kpi_refused_total{reason}`), and the
//!   reason is logged at most once a minute.
//! - `RecordKpi` needs no grant: it writes no knob and only adds numbers to
//!   a bounded store, exactly what anyone who may write to `kpi.sock` can
//!   do. The socket's mode and group are the authorization.

use crate::control::{wire, Response};
use crate::kernel::runtime::Spawner;
use crate::observe::kpi::{parse, Refusal, Store, Unit};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The datagram socket's name in `state_dir`.
pub(crate) const KPI_SOCKET: &str = "kpi.sock";
/// The largest datagram read (the rest of a longer one is dropped by the
/// kernel and the datagram's last line counted as malformed).
const DATAGRAM: usize = 64 * 1024;

/// Binds `state_dir/kpi.sock` and serves it as a task of `services`;
/// logs (never fails the daemon) when it cannot.
pub(crate) fn start(store: &Arc<Store>, services: &Spawner, state_dir: &Path, gid: u32) {
    let path = state_dir.join(KPI_SOCKET);
    match bind(&path, gid).and_then(|s| s.set_nonblocking(true).map(|()| s)) {
        Ok(sock) => {
            let store = store.clone();
            match services.spawn(move || async move {
                match tokio::net::UnixDatagram::from_std(sock) {
                    Ok(sock) => serve(&sock, &store).await,
                    Err(e) => tracing::error!("KPI socket: {e}"),
                }
            }) {
                Ok(()) => tracing::info!(socket = %path.display(), "KPI socket listening"),
                Err(e) => tracing::error!("KPI socket: {e}"),
            }
        }
        Err(e) => tracing::error!(socket = %path.display(), "KPI socket unavailable: {e}"),
    }
}

/// `RecordKpi`.
pub(crate) fn record(
    store: &Store,
    name: &str,
    unit: Option<&str>,
    samples: &[(f64, u64)],
) -> Response {
    let unit = match unit.map(Unit::from_name) {
        None => Unit::None,
        Some(Some(u)) => u,
        Some(None) => {
            store.refuse(Refusal::Unit);
            return Response::Error(wire::DaemonError::InvalidRequest {
                message: format!(
                    "unit `{}` is not a KPI unit: `seconds` or `none`",
                    unit.unwrap_or_default()
                ),
            });
        }
    };
    match store.record(name, unit, samples, Instant::now()) {
        Ok(n) => Response::RecordKpi(wire::RecordKpiReply {
            recorded: i64::try_from(n).unwrap_or(i64::MAX),
        }),
        Err((r, message)) => Response::Error(if r == Refusal::Names {
            wire::DaemonError::Refused { message }
        } else {
            wire::DaemonError::InvalidRequest { message }
        }),
    }
}

/// Removes the daemon's sockets in `state_dir` (a host path): the control
/// socket and [`KPI_SOCKET`], each only when it is a socket. The daemon
/// does at its stop; `reset` does too, under the state_dir lock (so no
/// daemon serves them), for those a killed daemon left.
pub(crate) fn remove_sockets(state_dir: &Path) {
    use std::os::unix::fs::FileTypeExt;
    for name in [crate::control::wire::SOCKET_NAME, KPI_SOCKET] {
        let path = state_dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(socket = %path.display(), "cannot remove the socket: {e}");
            }
        }
    }
}

/// Binds the datagram socket as the control socket is bound: a stale socket
/// is replaced, anything else at the path is not; 0660, group `gid`.
fn bind(path: &Path, gid: u32) -> std::io::Result<UnixDatagram> {
    crate::control::server::bind_socket(path, gid, |p| UnixDatagram::bind(p))
}

/// Reads datagrams until the socket fails (the daemon's exit ends it).
async fn serve(sock: &tokio::net::UnixDatagram, store: &Store) {
    let mut buf = vec![0u8; DATAGRAM];
    let mut last_warn: Option<Instant> = None;
    loop {
        let n = match sock.recv(&mut buf).await {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!("KPI socket: {e}; no more StatsD samples are read");
                return;
            }
        };
        let mut warn = |why: &str| {
            if last_warn.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                last_warn = Some(Instant::now());
                tracing::warn!(
                    "KPI socket: {why} (counted in cgwarden_kpi_refused_total; said once a minute)"
                );
            }
        };
        for line in parse::statsd(buf.get(..n).unwrap_or_default()) {
            match line {
                Ok(s) => {
                    if let Err((_, why)) =
                        store.record(&s.name, s.unit, &[(s.value, 1)], Instant::now())
                    {
                        warn(&why);
                    }
                }
                Err(why) => {
                    store.refuse(Refusal::Malformed);
                    warn(&why);
                }
            }
        }
    }
}
