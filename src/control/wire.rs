//! The `io.cgwarden.Daemon` varlink interface's types: what travels on the
//! control socket, shared by the service ([`super::server`]) and the CLI
//! clients ([`super::client`]). The checked-in IDL
//! (`src/control/io.cgwarden.Daemon.varlink`) is generated from these and
//! the service's method signatures; a test keeps the two the same.
//!
//! Knob values in replies and events travel in the kernel's exact form
//! (`3758096384`, `2400000`, `max`: docs/control.md "Values"; the CLI's text
//! shows units, see `knobs::human`); requests take the policy's forms
//! (`3584M`, `1.8GHz`). Times are RFC 3339 strings.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use zlink::introspect::{CustomType, Type};

pub(crate) const INTERFACE: &str = "io.cgwarden.Daemon";

/// The policy in force.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct PolicyInfo {
    pub(crate) path: String,
    /// Hex SHA-256 of the policy file's content.
    pub(crate) hash: String,
    pub(crate) loaded_at: String,
    /// The `targets:` entry in force (`QCS9100 (the board's
    /// /sys/devices/soc0/machine)`); none when the policy has no targets.
    #[serde(default)]
    pub(crate) target: Option<String>,
    /// How the policy met the board: the target, the board's clusters and
    /// what each cluster name became, one line each.
    #[serde(default)]
    pub(crate) board: Vec<String>,
}

/// One group: its place, limits and pressure.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct GroupStatus {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) exists: bool,
    pub(crate) cpuset: Option<String>,
    pub(crate) memory_current: Option<i64>,
    pub(crate) memory_high: Option<String>,
    pub(crate) memory_max: Option<String>,
    /// PSI `some avg10`, percent.
    pub(crate) cpu_some_avg10: Option<f64>,
    pub(crate) memory_some_avg10: Option<f64>,
    pub(crate) io_some_avg10: Option<f64>,
    /// `memory.events` as the kernel counts them (since the group was created).
    pub(crate) memory_events: BTreeMap<String, i64>,
}

/// One rule and its phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct RuleStatus {
    pub(crate) name: String,
    /// idle | pending | active | holding
    pub(crate) state: String,
    pub(crate) since: Option<String>,
}

/// A claim competing for a knob.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct Contender {
    /// `rule NAME` or `boost HANDLE`.
    pub(crate) owner: String,
    pub(crate) value: String,
}

/// One managed knob: what it returns to, what it holds and why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct KnobStatus {
    pub(crate) knob: String,
    pub(crate) baseline: Option<String>,
    pub(crate) effective: Option<String>,
    /// The claim whose value is in effect; none when the baseline is.
    pub(crate) winner: Option<String>,
    /// Every live claim on the knob, winner first.
    pub(crate) contenders: Vec<Contender>,
}

/// A live claim: a rule's `while` action or a boost.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct ClaimInfo {
    /// `rule NAME` or `boost HANDLE`.
    pub(crate) owner: String,
    /// The boost's handle; none for a rule.
    pub(crate) handle: Option<i64>,
    pub(crate) knob: String,
    pub(crate) value: String,
    pub(crate) expires_at: Option<String>,
    /// Who asked (kernel-given uid and pid of the boost's client).
    pub(crate) uid: Option<i64>,
    pub(crate) pid: Option<i64>,
    pub(crate) reason: Option<String>,
    /// What ends the boost besides its deadline: `process PID`, `connection`.
    pub(crate) tied_to: Option<String>,
}

/// One write the daemon made (or queued).
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct ActionInfo {
    pub(crate) time: String,
    pub(crate) cause: String,
    pub(crate) knob: String,
    pub(crate) old: Option<String>,
    pub(crate) new: String,
}

/// The daemon's own counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct DaemonInfo {
    pub(crate) pid: i64,
    pub(crate) version: String,
    pub(crate) uptime_seconds: i64,
    pub(crate) knob_writes: i64,
    pub(crate) writes_rejected: i64,
    pub(crate) writes_late: i64,
    pub(crate) writes_superseded: i64,
    pub(crate) loop_wakeups: i64,
    pub(crate) control_connections: i64,
}

/// `Status()`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct StatusReply {
    pub(crate) product: String,
    pub(crate) policy: PolicyInfo,
    pub(crate) last_reload_error: Option<String>,
    /// What the policy asks the daemon to serve and it could not (a metrics
    /// address already in use, the recorder's database): not fatal, one
    /// line each.
    #[serde(default)]
    pub(crate) unavailable: Vec<String>,
    pub(crate) daemon: DaemonInfo,
    pub(crate) groups: Vec<GroupStatus>,
    pub(crate) rules: Vec<RuleStatus>,
    pub(crate) knobs: Vec<KnobStatus>,
    pub(crate) claims: Vec<ClaimInfo>,
    /// The last 50 writes, oldest first.
    pub(crate) actions: Vec<ActionInfo>,
    /// Processes a placement matches that stay where they are: their
    /// cgroup belongs to a container runtime or another delegated manager.
    #[serde(default)]
    pub(crate) left_alone: Vec<LeftAlone>,
}

/// A process a placement matches and leaves in its cgroup.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct LeftAlone {
    pub(crate) pid: i64,
    pub(crate) comm: String,
    /// Its cgroup as `/proc/PID/cgroup` shows it.
    pub(crate) cgroup: String,
    /// The matching placement's group and its line in the policy file.
    pub(crate) group: String,
    pub(crate) policy_line: i64,
    /// Whose the cgroup is: `a container runtime (docker)`, ...
    pub(crate) owner: String,
}

/// A knob a boost holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct Applied {
    pub(crate) knob: String,
    pub(crate) value: String,
}

/// A knob a boost asked for and did not get.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct Rejected {
    pub(crate) knob: String,
    pub(crate) why: String,
}

/// A knob a call changed that may not hold its new value: its write failed,
/// or had not finished within the late-write deadline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, CustomType)]
pub(crate) struct NotHeld {
    pub(crate) knob: String,
    /// What happened to the write, naming the file and the value.
    pub(crate) why: String,
    /// The write was still going (in the kernel, or queued behind another
    /// write of its lane): the value holds once it lands. False: it failed.
    pub(crate) late: bool,
}

/// `Boost(...)`: answered once its writes have landed (or failed, or
/// passed the late-write deadline).
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct BoostReply {
    pub(crate) handle: i64,
    pub(crate) expires_at: Option<String>,
    pub(crate) applied: Vec<Applied>,
    pub(crate) rejected: Vec<Rejected>,
    /// Granted knobs whose write failed or was late; absent when every
    /// write landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) not_held: Option<Vec<NotHeld>>,
}

/// `Extend(...)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct ExtendReply {
    pub(crate) expires_at: Option<String>,
    /// Knobs the extension changed (a grant narrowed since the boost) whose
    /// write failed or was late; absent when every write landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) not_held: Option<Vec<NotHeld>>,
}

/// `Release(...)`: no parameters at all when every write landed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct ReleaseReply {
    /// Knobs whose write back failed or was late; absent when every write
    /// landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) not_held: Option<Vec<NotHeld>>,
}

/// `RecordKpi(...)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct RecordKpiReply {
    /// Samples recorded (the sum of `counts`, or the number of values).
    pub(crate) recorded: i64,
}

/// `ListClaims()`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct ClaimsReply {
    pub(crate) claims: Vec<ClaimInfo>,
}

/// `Reload(dry_run, candidate, candidate_name)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct ReloadReply {
    pub(crate) ok: bool,
    pub(crate) error: Option<String>,
    /// One line per difference; `= rule … kept (…)` lines say an active
    /// rule's state survives and are not changes.
    pub(crate) diff: Vec<String>,
    /// Hex SHA-256 of the policy loaded (with dry_run: of the file or
    /// candidate previewed).
    pub(crate) hash: String,
    /// How many lines of `diff` are changes.
    pub(crate) changes: i64,
    /// Hex SHA-256 of the policy in force after the call.
    pub(crate) in_force: String,
}

/// One knob compared with what it should hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct KnobCheck {
    pub(crate) knob: String,
    pub(crate) path: String,
    pub(crate) expected: String,
    /// None: the file could not be read.
    pub(crate) actual: Option<String>,
    pub(crate) drift: bool,
    /// The cause of the last write cgwarden made to it.
    pub(crate) last_writer: Option<String>,
    /// Why it could not be read back and is not drift: a kernel-only step
    /// skipped on a fake root (`swapon is skipped on a fake root`).
    pub(crate) skipped: Option<String>,
}

/// `Verify()`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct VerifyReply {
    pub(crate) drift: bool,
    pub(crate) knobs: Vec<KnobCheck>,
}

/// `Health()`: the post-update check.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct HealthReply {
    /// The policy on disk is in force, its last reload did not fail, and no
    /// drift or failed write was seen since it was put in force.
    pub(crate) healthy: bool,
    /// Why not, one line each; empty when healthy.
    pub(crate) reasons: Vec<String>,
    /// Hex SHA-256 of the policy in force.
    pub(crate) hash: String,
    /// Hex SHA-256 of the policy file on disk now; none when unreadable.
    pub(crate) disk_hash: Option<String>,
    /// Since when drift and failed writes count: when the policy in force
    /// was loaded (daemon start or the reload that changed it).
    pub(crate) since: String,
    /// The `targets:` entry in force; none when the policy has no targets.
    #[serde(default)]
    pub(crate) target: Option<String>,
}

/// One event of the stream.
#[derive(Debug, Clone, Default, Serialize, Deserialize, CustomType)]
pub(crate) struct Event {
    pub(crate) time: String,
    // An [`EventKind`]'s text; a string, so that a client reads the kinds
    // a newer daemon adds. (The doc line below is the interface's, in the
    // IDL file.)
    /// subscribed | rule | write | write_failed | claim_granted | claim_expired |
    /// claim_released | claim_owner_gone | drift | reload | reload_failed | lagged |
    /// stopped (the last: the daemon stops)
    pub(crate) kind: String,
    pub(crate) rule: Option<String>,
    /// For `rule`: the new phase.
    pub(crate) state: Option<String>,
    pub(crate) knob: Option<String>,
    pub(crate) old: Option<String>,
    pub(crate) new: Option<String>,
    pub(crate) cause: Option<String>,
    pub(crate) handle: Option<i64>,
    pub(crate) message: Option<String>,
}

/// The kinds of event: the one list the stream ([`Event::kind`]), the
/// daemon's event log and the flight recorder's `events.kind` column share.
/// The text of each ([`EventKind::as_str`]) is part of the interface:
/// never change one; a new kind gets a new variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EventKind {
    /// The stream's first event (the stream only).
    Subscribed,
    /// A rule changed phase.
    Rule,
    /// A knob was written.
    Write,
    /// The kernel refused a write.
    WriteFailed,
    /// A boost's claim was granted.
    ClaimGranted,
    /// A boost's deadline passed.
    ClaimExpired,
    /// A boost was released (by its client, or a reload).
    ClaimReleased,
    /// A boost's process or connection went away.
    ClaimOwnerGone,
    /// A knob or file no longer holds what the daemon wrote.
    Drift,
    /// The policy was reloaded.
    Reload,
    /// A reload was refused.
    ReloadFailed,
    /// A `kill in` action killed a process.
    Kill,
    /// A `kill in` action found nothing it may kill.
    KillRefused,
    /// A critical process exited.
    CriticalExit,
    /// A cpufreq policy's throttle episode began.
    Throttle,
    /// A group was frozen.
    Freeze,
    /// A group was thawed.
    Thaw,
    /// The kernel refused a freeze.
    FreezeFailed,
    /// The kernel refused a thaw.
    ThawFailed,
    /// The stream fell behind and events were dropped (the stream only).
    Lagged,
    /// The last event a daemon sends before it exits; the `Subscribe`
    /// stream ends with it.
    Stopped,
    /// The recorder's own row: it started a run.
    Start,
    /// The recorder's own row: the daemon stopped.
    Stop,
    /// The recorder's own row: events or evaluations it could not keep.
    Lost,
    /// The recorder's own row: the cpufreq policies at start.
    Cpufreq,
}

impl EventKind {
    /// Every kind.
    pub(crate) const ALL: [EventKind; 25] = [
        EventKind::Subscribed,
        EventKind::Rule,
        EventKind::Write,
        EventKind::WriteFailed,
        EventKind::ClaimGranted,
        EventKind::ClaimExpired,
        EventKind::ClaimReleased,
        EventKind::ClaimOwnerGone,
        EventKind::Drift,
        EventKind::Reload,
        EventKind::ReloadFailed,
        EventKind::Kill,
        EventKind::KillRefused,
        EventKind::CriticalExit,
        EventKind::Throttle,
        EventKind::Freeze,
        EventKind::Thaw,
        EventKind::FreezeFailed,
        EventKind::ThawFailed,
        EventKind::Lagged,
        EventKind::Stopped,
        EventKind::Start,
        EventKind::Stop,
        EventKind::Lost,
        EventKind::Cpufreq,
    ];

    /// The kind's text on the wire, in the log and in the recorder.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            EventKind::Subscribed => "subscribed",
            EventKind::Rule => "rule",
            EventKind::Write => "write",
            EventKind::WriteFailed => "write_failed",
            EventKind::ClaimGranted => "claim_granted",
            EventKind::ClaimExpired => "claim_expired",
            EventKind::ClaimReleased => "claim_released",
            EventKind::ClaimOwnerGone => "claim_owner_gone",
            EventKind::Drift => "drift",
            EventKind::Reload => "reload",
            EventKind::ReloadFailed => "reload_failed",
            EventKind::Kill => "kill",
            EventKind::KillRefused => "kill_refused",
            EventKind::CriticalExit => "critical_exit",
            EventKind::Throttle => "throttle",
            EventKind::Freeze => "freeze",
            EventKind::Thaw => "thaw",
            EventKind::FreezeFailed => "freeze_failed",
            EventKind::ThawFailed => "thaw_failed",
            EventKind::Lagged => "lagged",
            EventKind::Stopped => "stopped",
            EventKind::Start => "start",
            EventKind::Stop => "stop",
            EventKind::Lost => "lost",
            EventKind::Cpufreq => "cpufreq",
        }
    }

    /// The kind whose text is `s`; `None` for a kind this build does not know.
    pub(crate) fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<EventKind> for String {
    fn from(k: EventKind) -> String {
        k.as_str().to_string()
    }
}

impl Event {
    /// This event's kind; `None` for one this build does not know (a newer
    /// daemon's).
    pub(crate) fn kind(&self) -> Option<EventKind> {
        EventKind::parse(&self.kind)
    }

    /// Whether this event is of kind `k`.
    pub(crate) fn is(&self, k: EventKind) -> bool {
        self.kind == k.as_str()
    }
}

/// The kind of the last event a daemon sends before it exits; the
/// `Subscribe` stream ends with it.
pub(crate) const STOPPED: &str = EventKind::Stopped.as_str();

/// `Subscribe()`: one reply per event.
#[derive(Debug, Clone, Default, Serialize, Deserialize, Type)]
pub(crate) struct EventReply {
    pub(crate) event: Event,
}

/// The interface's errors; each carries a human-readable `message`.
#[derive(Debug, Clone, PartialEq, zlink::ReplyError, zlink::introspect::ReplyError)]
#[zlink(interface = "io.cgwarden.Daemon")]
pub(crate) enum DaemonError {
    /// The caller may not do this (no grant, limit reached, not its boost).
    Refused { message: String },
    /// A parameter is malformed (unknown knob, bad duration or value).
    InvalidRequest { message: String },
    /// No live boost has this handle.
    NoSuchHandle { message: String },
    /// The daemon is stopping or too busy to answer.
    Unavailable { message: String },
}

impl DaemonError {
    pub(crate) fn message(&self) -> &str {
        match self {
            DaemonError::Refused { message }
            | DaemonError::InvalidRequest { message }
            | DaemonError::NoSuchHandle { message }
            | DaemonError::Unavailable { message } => message,
        }
    }
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            DaemonError::Refused { .. } => "Refused",
            DaemonError::InvalidRequest { .. } => "InvalidRequest",
            DaemonError::NoSuchHandle { .. } => "NoSuchHandle",
            DaemonError::Unavailable { .. } => "Unavailable",
        };
        write!(f, "{INTERFACE}.{name}: {}", self.message())
    }
}

impl std::error::Error for DaemonError {}

/// The socket's file name in `state_dir`.
pub(crate) const SOCKET_NAME: &str = "io.cgwarden";

/// The socket path of a policy's `state_dir`.
pub(crate) fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the interface (clients, the journald fields, the
    /// recorder's schema): each is pinned here, and each parses back.
    #[test]
    fn event_kinds_keep_their_texts_and_parse_back() {
        let texts: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            texts,
            [
                "subscribed",
                "rule",
                "write",
                "write_failed",
                "claim_granted",
                "claim_expired",
                "claim_released",
                "claim_owner_gone",
                "drift",
                "reload",
                "reload_failed",
                "kill",
                "kill_refused",
                "critical_exit",
                "throttle",
                "freeze",
                "thaw",
                "freeze_failed",
                "thaw_failed",
                "lagged",
                "stopped",
                "start",
                "stop",
                "lost",
                "cpufreq",
            ]
        );
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::parse("from_a_newer_daemon"), None);
        assert_eq!(STOPPED, "stopped");
    }
}
