//! The control plane: the varlink service on
//! `state_dir/io.cgwarden` and the CLI commands that are its clients
//! (`status`, `boost`, `release`, `reload`, `verify`, `events`).
//!
//! The service runs off the loop, a task of the daemon's `cgw-services`
//! thread ([`server`]), and owns no state: every call becomes a [`Call`]
//! the daemon's event loop answers, so the engine stays the one owner of
//! claims and knobs, and a stuck or hostile client can at worst hold its
//! connections until their limits close them, never stall the loop (nor
//! the thread: every wait is a task's). The caller is who
//! the kernel says (SO_PEERCRED, SO_PEERPIDFD), never what the request says.
//!
//! The protocol is zlink's (a maintained varlink implementation): nothing
//! of varlink's framing or JSON is written by hand here.

pub(crate) mod client;
pub(crate) mod render;
pub(crate) mod server;
pub(crate) mod wire;

use std::collections::BTreeMap;
use tokio::sync::oneshot;

/// Who is calling, as the kernel says.
#[derive(Debug)]
pub(crate) struct Caller {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// Supplementary groups (SO_PEERGROUPS).
    pub(crate) groups: Vec<u32>,
    pub(crate) pid: i32,
    /// The control connection (a boost may end with it).
    pub(crate) conn: u64,
}

/// A request the daemon's event loop answers.
#[derive(Debug)]
pub(crate) enum Request {
    Status,
    ListClaims,
    Verify,
    Health,
    Reload {
        dry_run: bool,
        /// A candidate to preview instead of the policy file (dry run only):
        /// its name for messages and its content, read by the client.
        candidate: Option<(String, String)>,
    },
    Boost {
        caller: Caller,
        knobs: BTreeMap<String, String>,
        duration: Option<String>,
        reason: Option<String>,
        /// Tie the boost to this process (root only).
        pid: Option<i64>,
        /// End the boost when this connection closes.
        tied_to_connection: bool,
    },
    Extend {
        caller: Caller,
        handle: i64,
        duration: String,
    },
    Release {
        caller: Caller,
        handle: i64,
    },
    /// KPI samples, `(value, repeat)` in `unit` (`seconds` or
    /// `none`, default `none`).
    RecordKpi {
        name: String,
        unit: Option<String>,
        samples: Vec<(f64, u64)>,
    },
    /// A control connection closed: its connection-tied boosts end.
    ConnClosed {
        conn: u64,
    },
}

/// The daemon's answer.
#[derive(Debug)]
pub(crate) enum Response {
    Status(Box<wire::StatusReply>),
    Claims(wire::ClaimsReply),
    Verify(wire::VerifyReply),
    Health(Box<wire::HealthReply>),
    Reload(wire::ReloadReply),
    Boost(wire::BoostReply),
    Extend(wire::ExtendReply),
    Released(wire::ReleaseReply),
    RecordKpi(wire::RecordKpiReply),
    Error(wire::DaemonError),
}

/// A request and where its answer goes (none for [`Request::ConnClosed`]).
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) request: Request,
    pub(crate) reply: Option<oneshot::Sender<Response>>,
}

/// `RecordKpi`'s values and optional counts as `(value, repeat)`
/// pairs; the lengths must agree and counts be ≥ 0.
pub(crate) fn kpi_samples(
    values: &[f64],
    counts: Option<&[i64]>,
) -> Result<Vec<(f64, u64)>, wire::DaemonError> {
    let bad = |m: String| wire::DaemonError::InvalidRequest { message: m };
    match counts {
        None => Ok(values.iter().map(|v| (*v, 1)).collect()),
        Some(c) if c.len() != values.len() => Err(bad(format!(
            "{} counts for {} values: give one count per value, or none",
            c.len(),
            values.len()
        ))),
        Some(c) => values
            .iter()
            .zip(c)
            .map(|(v, n)| {
                u64::try_from(*n)
                    .map(|n| (*v, n))
                    .map_err(|_| bad(format!("count {n} is negative")))
            })
            .collect(),
    }
}
