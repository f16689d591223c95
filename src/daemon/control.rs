//! The daemon's side of the control plane: it answers the
//! [`Call`]s the control thread forwards, in the event loop, with the
//! engine as the only owner of claims. This module owns the boost book
//! (who asked, why, until when, tied to what), the last 50 actions, the
//! last writer of each knob and the event bus `Subscribe` streams.
//!
//! Decisions:
//! - A boost tied to a process (`pid`, root only) ends when a pidfd on it
//!   turns readable (the process exited); one tied to its connection
//!   (`cgwarden boost ... -- CMD`) ends when the control thread sees the
//!   connection close. No /proc polling anywhere.
//! - Only root may release or extend another uid's boost.
//! - Status, and the knob part of Verify and Health, read the groups' and
//!   knobs' files in the loop: a few small reads each (never a write, never
//!   a file that blocks). What the baseline holds beyond the knobs (the
//!   realtime switch, IRQs, zram, placed processes' attributes: a `/proc`
//!   scan) is checked on a blocking thread, and the call answered when it
//!   is back (`drift`).
//! - A boost's values are judged against the board (CPUs, cpufreq and
//!   devfreq ranges) as the policy's are, and refused with its range.
//! - Boost, Extend and Release are answered once the writes they caused
//!   have landed, failed or passed the late-write deadline ([`held`]); the
//!   loop never waits for them.

mod boost;
mod held;
mod status;

use super::actuator::Outcome;
use super::Daemon;
use crate::control::wire::EventKind;
use crate::control::{wire, Request, Response};
use crate::engine::claims::Owner;
use crate::engine::knobs::Write;
use crate::engine::rule_state::Time;
use crate::knobs::{Knob, KnobValue};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, mpsc};

/// How many actions `status` lists.
pub(crate) const ACTIONS_KEPT: usize = 50;
/// How many KNOB=VALUE pairs one boost may name.
const MAX_BOOST_KNOBS: usize = 64;
/// The longest deadline anyone (root included) may give a boost.
const MAX_BOOST_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// One live boost.
#[derive(Debug)]
struct BoostEntry {
    uid: u32,
    pid: i32,
    reason: Option<String>,
    claims: Vec<(Knob, KnobValue)>,
    /// Its caps (`boost --cap`).
    caps: Vec<(Knob, KnobValue)>,
    deadline: Option<Time>,
    expires_at: Option<SystemTime>,
    conn: Option<u64>,
    tied_pid: Option<i32>,
    watch: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for BoostEntry {
    fn drop(&mut self) {
        if let Some(w) = self.watch.take() {
            w.abort();
        }
    }
}

/// The control plane's state in the daemon.
#[derive(Debug)]
pub(crate) struct ControlState {
    pub(crate) events: broadcast::Sender<wire::Event>,
    /// Live control connections (set once the socket is up).
    pub(crate) connections: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    boosts: BTreeMap<u64, BoostEntry>,
    next_handle: u64,
    actions: VecDeque<wire::ActionInfo>,
    last_writer: HashMap<Knob, String>,
    /// Tied processes that exited, by boost handle.
    gone_tx: mpsc::UnboundedSender<u64>,
    /// Their receiving end (taken by the loop).
    pub(super) gone_rx: Option<mpsc::UnboundedReceiver<u64>>,
    /// The `cgw-services` thread ([`Self::services`]).
    services: Option<crate::kernel::runtime::Spawner>,
    /// Loop wake-ups so far (for `status`).
    pub(crate) loop_wakes: u64,
    /// The policy's `control:` grants, names resolved (at start and reload).
    grants: Vec<crate::engine::grants::Grant>,
    /// Failed writes and drift since the policy was loaded (`health`).
    pub(crate) health: super::health::Tally,
    /// `run --dry-run`: the event records say that nothing is written.
    dry_run: bool,
    /// Replies waiting for their writes.
    held: held::HeldReplies,
    /// What the board offers, read with the grants: a boost's values are
    /// judged against it as the policy's are.
    board: crate::knobs::board::Board,
}

impl ControlState {
    pub(crate) fn new() -> Self {
        let (events, _) = broadcast::channel(1024);
        let (gone_tx, gone_rx) = mpsc::unbounded_channel();
        ControlState {
            events,
            connections: None,
            boosts: BTreeMap::new(),
            next_handle: 1,
            actions: VecDeque::with_capacity(ACTIONS_KEPT),
            last_writer: HashMap::new(),
            gone_tx,
            gone_rx: Some(gone_rx),
            services: None,
            loop_wakes: 0,
            grants: Vec::new(),
            health: Default::default(),
            dry_run: false,
            held: Default::default(),
            board: Default::default(),
        }
    }

    /// The `cgw-services` thread (see [`super::services`]), started by the
    /// first service that needs it; `None` (logged) when it cannot be
    /// started: that service is off.
    pub(crate) fn services(&mut self) -> Option<crate::kernel::runtime::Spawner> {
        use super::services::SERVICES;
        if self.services.is_none() {
            match crate::kernel::runtime::start(SERVICES) {
                Ok(s) => self.services = Some(s),
                Err(e) => tracing::error!("cannot start the {SERVICES} thread: {e}"),
            }
        }
        self.services.clone()
    }

    /// Marks a `--dry-run` daemon's event records (see [`Self::publish`]).
    pub(crate) fn dry_run(mut self, on: bool) -> Self {
        self.dry_run = on;
        self
    }

    /// Whether anyone follows the events (events are built only then).
    fn followed(&self) -> bool {
        self.events.receiver_count() > 0
    }

    /// An event: logged as a structured record (journald fields, see
    /// `eventlog`), counted for `health`, and sent to the followers.
    pub(crate) fn publish(&self, make: impl FnOnce() -> wire::Event) {
        let e = make();
        super::eventlog::log(&e, self.dry_run);
        self.deliver(e);
    }

    /// A logged event, counted for `health` and sent to the followers.
    fn deliver(&self, e: wire::Event) {
        self.health.note(&e);
        if self.followed() {
            let _ = self.events.send(e);
        }
    }

    /// Records a write the daemon decided: the action list, the knob's
    /// last writer. Its event is published when it is known to hold: a
    /// queued write's when it lands ([`Self::write_landed`]), one made at
    /// once (a held request, a dry run) here; a write that cannot be made
    /// is a `write_failed`.
    pub(crate) fn note_write(&mut self, w: &Write, outcome: &Outcome) {
        let cause = w.cause.to_string();
        let a = wire::ActionInfo {
            time: now_text(),
            cause: cause.clone(),
            knob: w.knob.to_string(),
            old: w.old.as_ref().map(|v| w.knob.render(v)),
            new: w.knob.render(&w.new),
        };
        self.last_writer.insert(w.knob.clone(), cause);
        let (kind, message) = match outcome {
            Outcome::Queued => (None, None),
            Outcome::Held | Outcome::DryRun => (Some(EventKind::Write), None),
            Outcome::Unsupported(why) => (Some(EventKind::WriteFailed), Some(why.clone())),
        };
        if let Some(kind) = kind {
            self.publish(|| wire::Event {
                time: a.time.clone(),
                kind: kind.into(),
                knob: Some(a.knob.clone()),
                old: a.old.clone(),
                new: Some(a.new.clone()),
                cause: Some(a.cause.clone()),
                message,
                ..Default::default()
            });
        }
        if self.actions.len() >= ACTIONS_KEPT {
            self.actions.pop_front();
        }
        self.actions.push_back(a);
    }

    /// A `settings.critical` process exited: the
    /// `critical_exit` event (recorder row; `cgwarden events`), timed when
    /// the exec thread saw the exit.
    pub(crate) fn note_critical_exit(
        &self,
        pid: i32,
        comm: &str,
        pattern: &str,
        by_scan: bool,
        at: SystemTime,
    ) {
        let how = if by_scan {
            "was found gone by a scan (its exit event was not seen)"
        } else {
            "exited"
        };
        self.publish(|| wire::Event {
            time: crate::show::rfc3339_millis(at),
            kind: EventKind::CriticalExit.into(),
            cause: Some(format!("critical {pattern}")),
            message: Some(format!("{comm} (pid {pid}) {how}")),
            ..Default::default()
        });
    }

    pub(crate) fn note_phase(&self, rule: &str, phase: &dyn std::fmt::Display) {
        self.publish(|| wire::Event {
            time: now_text(),
            kind: EventKind::Rule.into(),
            rule: Some(rule.to_string()),
            state: Some(phase.to_string()),
            ..Default::default()
        });
    }

    /// Daemon stop: every boost's claims go (the writes follow with the
    /// rules' release).
    pub(crate) fn release_all_boosts(&mut self, sup: &mut crate::engine::supervisor::Supervisor) {
        for h in std::mem::take(&mut self.boosts).into_keys() {
            sup.release_boost(h);
        }
    }

    /// How many live boosts `uid` holds.
    fn boosts_of(&self, uid: u32) -> usize {
        self.boosts.values().filter(|b| b.uid == uid).count()
    }

    /// The knobs boost `handle` holds or caps (none when it is not live).
    fn knobs_of(&self, handle: i64) -> Vec<Knob> {
        u64::try_from(handle)
            .ok()
            .and_then(|h| self.boosts.get(&h))
            .map(|b| b.claims.iter().chain(&b.caps).map(|(k, _)| k.clone()))
            .into_iter()
            .flatten()
            .collect()
    }

    /// When the next reply held for its writes is due (the late-write
    /// deadline), for the loop's timer.
    pub(crate) fn held_due(&self) -> Option<std::time::Instant> {
        self.held.due()
    }
}

fn now_text() -> String {
    crate::show::rfc3339_millis(SystemTime::now())
}

fn refused(message: String) -> Response {
    Response::Error(wire::DaemonError::Refused { message })
}

fn invalid(message: String) -> Response {
    Response::Error(wire::DaemonError::InvalidRequest { message })
}

impl Daemon {
    /// Resolves the policy's `control:` grants (user and group names to
    /// ids, from the root's account files, as placement and hooks do); an
    /// unknown name drops only its entry, with a warning. Reads the board's
    /// bounds boosts are judged by, at the same moments (start, reload).
    pub(crate) fn resolve_grants(&mut self) {
        use crate::kernel::accounts;
        let root = self.opts.root.clone();
        let user = |n: &str| accounts::user(&root, n).ok().flatten().map(|u| u.uid);
        let group = |n: &str| accounts::group(&root, n).ok().flatten();
        let (grants, warnings) =
            crate::engine::grants::resolve(&self.loaded.policy.control, &user, &group);
        for w in warnings {
            // The warning already says `control: …`.
            tracing::warn!("{w}");
        }
        self.control.grants = grants;
        self.control.board =
            crate::kernel::board::read(&root, &self.loaded.policy.settings.cgroup_root);
    }

    /// Binds the control socket in state_dir and serves it on the
    /// `cgw-services` thread ([`ControlState::services`]); the socket's host path, or None (logged) when it cannot be served — the
    /// daemon supervises on without it.
    pub(crate) fn start_control(
        &mut self,
        calls: mpsc::UnboundedSender<crate::control::Call>,
    ) -> Option<std::path::PathBuf> {
        use crate::control::server;
        self.resolve_grants();
        let state_dir = self
            .opts
            .root
            .host_path(&self.loaded.policy.settings.state_dir);
        let path = server::socket_path(&state_dir);
        let group = &self.loaded.policy.settings.socket_group;
        let gid = match crate::kernel::accounts::group(&self.opts.root, group) {
            Ok(Some(g)) => g,
            _ => {
                tracing::warn!(
                    "settings.socket_group `{group}` is not a group here; the control socket is root's only"
                );
                0
            }
        };
        // Members of socket_group must reach the socket: state_dir becomes
        // traversable (not listable, not writable) by its group.
        if gid != 0 {
            use std::os::unix::fs::PermissionsExt;
            let ok = nix::unistd::chown(&state_dir, None, Some(nix::unistd::Gid::from_raw(gid)))
                .is_ok()
                && std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o710))
                    .is_ok();
            if !ok {
                tracing::warn!(dir = %state_dir.display(), "cannot let group `{group}` reach the control socket");
            }
        }
        let listener = match server::bind(&path, gid) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(socket = %path.display(), "control socket unavailable: {e}");
                return None;
            }
        };
        let services = self.control.services()?;
        match server::start(
            &services,
            listener,
            calls,
            self.control.events.clone(),
            server::Limits::default(),
        ) {
            Ok(h) => {
                self.control.connections = Some(h.live);
                tracing::info!(socket = %path.display(), "control socket listening");
                super::kpisock::start(&self.telemetry.kpi, &services, &state_dir, gid);
                Some(path)
            }
            Err(e) => {
                tracing::error!("control socket: {e}");
                None
            }
        }
    }

    /// Answers one control call: at once, or — `Boost`, `Extend`,
    /// `Release` — once the writes of the boost's knobs have landed
    /// ([`held`]).
    pub(crate) fn on_call(&mut self, call: crate::control::Call) {
        // Verify and Health finish off the loop (the held check may scan
        // /proc); the loop's part is done here.
        let call = match (call.request, call.reply) {
            (Request::Verify, Some(tx)) => {
                let knobs = self.verify_knobs();
                self.check_held_then(super::drift::Answer::Verify(tx, knobs));
                return;
            }
            (Request::Health, Some(tx)) => {
                let pending = self.health_pending();
                self.check_held_then(super::drift::Answer::Health(tx, pending));
                return;
            }
            (request, reply) => crate::control::Call { request, reply },
        };
        // A release ends the boost: its knobs are known only before.
        let before = match &call.request {
            Request::Extend { handle, .. } | Request::Release { handle, .. } => {
                self.control.knobs_of(*handle)
            }
            _ => Vec::new(),
        };
        let answer = self.on_control(call.request);
        let (Some(tx), Some(answer)) = (call.reply, answer) else {
            return;
        };
        let knobs = match &answer {
            Response::Boost(b) => self.control.knobs_of(b.handle),
            Response::Extend(_) | Response::Released(_) => before,
            _ => Vec::new(),
        };
        self.control
            .answer_when_landed(&self.actuator, tx, answer, &knobs);
    }

    /// Answers one control request.
    pub(crate) fn on_control(&mut self, request: Request) -> Option<Response> {
        Some(match request {
            Request::Status => Response::Status(Box::new(self.status())),
            Request::ListClaims => Response::Claims(wire::ClaimsReply {
                claims: self.claim_infos(),
            }),
            Request::Verify => Response::Verify(self.verify()),
            Request::Health => Response::Health(Box::new(self.health())),
            Request::Reload { dry_run, candidate } => {
                Response::Reload(self.reload_for_control(dry_run, candidate))
            }
            Request::Boost {
                caller,
                knobs,
                duration,
                reason,
                pid,
                tied_to_connection,
            } => {
                let r = self.on_boost(caller, knobs, duration, reason, pid, tied_to_connection);
                if let Some(b) = self.telemetry.observe_book() {
                    b.boost(if matches!(r, Response::Boost(_)) {
                        "granted"
                    } else {
                        "refused"
                    });
                }
                r
            }
            Request::Extend {
                caller,
                handle,
                duration,
            } => self.on_extend(&caller, handle, &duration),
            Request::Release { caller, handle } => self.on_release(&caller, handle),
            Request::RecordKpi {
                name,
                unit,
                samples,
            } => super::kpisock::record(&self.telemetry.kpi, &name, unit.as_deref(), &samples),
            Request::ConnClosed { conn } => {
                let tied: Vec<u64> = self
                    .control
                    .boosts
                    .iter()
                    .filter(|(_, b)| b.conn == Some(conn))
                    .map(|(h, _)| *h)
                    .collect();
                for h in tied {
                    self.end_boost(
                        h,
                        EventKind::ClaimOwnerGone,
                        "its client's connection closed",
                    );
                }
                return None;
            }
        })
    }

    /// A reload asked over the socket; SIGHUP and the file watch go through
    /// the same path.
    pub(crate) fn reload_for_control(
        &mut self,
        dry_run: bool,
        candidate: Option<(String, String)>,
    ) -> wire::ReloadReply {
        let before = self.loaded.hash.clone();
        let r = self.reload(dry_run, candidate);
        if r.ok && !dry_run && self.loaded.hash != before {
            self.control.health.restart();
        }
        if r.ok && !dry_run {
            self.resolve_grants();
        }
        // Boosts whose every claim the reload released (their knobs' group
        // left the policy) end with it.
        let gone: Vec<u64> = self
            .control
            .boosts
            .keys()
            .copied()
            .filter(|h| {
                !self
                    .supervisor
                    .table()
                    .claims()
                    .live()
                    .any(|c| c.owner == Owner::Boost { handle: *h })
            })
            .collect();
        for h in gone {
            self.end_boost(
                h,
                EventKind::ClaimReleased,
                "its knobs left the policy at a reload",
            );
        }
        if !dry_run {
            if let Some(b) = self.telemetry.observe_book() {
                b.reload(r.ok);
            }
            self.control.publish(|| wire::Event {
                time: now_text(),
                kind: if r.ok {
                    EventKind::Reload
                } else {
                    EventKind::ReloadFailed
                }
                .into(),
                message: Some(match &r.error {
                    Some(e) => e.clone(),
                    None => crate::show::count(r.changes, "change"),
                }),
                ..Default::default()
            });
        }
        wire::ReloadReply {
            ok: r.ok,
            error: r.error,
            changes: i64::try_from(r.changes).unwrap_or(i64::MAX),
            diff: r.diff,
            hash: r.hash,
            in_force: self.loaded.hash.clone(),
        }
    }
}

impl ControlState {
    /// A writer lane finished a write: a refusal becomes a `write_failed`
    /// event; the replies it completes go out.
    pub(crate) fn write_landed(&mut self, done: &super::lanes::Done) {
        let j = &done.job;
        if let (Ok(()), Some(w)) = (&done.result, &j.event) {
            let e = wire::Event {
                time: now_text(),
                kind: EventKind::Write.into(),
                knob: Some(j.label.clone()),
                old: w.old.clone(),
                new: Some(w.new.clone()),
                cause: Some(j.cause.clone()),
                ..Default::default()
            };
            super::eventlog::log_write(&e, &j.path, &j.old, &j.new, done.elapsed_ms());
            self.deliver(e);
        }
        if let Err(msg) = &done.result {
            self.publish(|| wire::Event {
                time: now_text(),
                kind: EventKind::WriteFailed.into(),
                knob: Some(j.label.clone()),
                // The raw text written (j.new is the log's raw + human).
                new: Some(j.text.clone()),
                cause: Some(j.cause.clone()),
                message: Some(msg.clone()),
                ..Default::default()
            });
        }
        self.reply_landed(done);
    }
}
