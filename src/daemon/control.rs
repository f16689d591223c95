//! The daemon's side of the control plane (SPEC §5): it answers the
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
//! - Status and Verify read the groups' and knobs' files in the loop: a
//!   few small reads each (never a write, never a file that blocks).

use super::Daemon;
use crate::control::{wire, Caller, Request, Response};
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
    /// Its caps (`boost --cap`, issue 24).
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
    /// Loop wake-ups so far (for `status`).
    pub(crate) loop_wakes: u64,
    /// The policy's `control:` grants, names resolved (at start and reload).
    grants: Vec<crate::engine::grants::Grant>,
    /// Failed writes and drift since the policy was loaded (`health`).
    pub(crate) health: super::health::Tally,
    /// `run --dry-run`: the event records say that nothing is written.
    dry_run: bool,
}

impl ControlState {
    pub(crate) fn new(gone_tx: mpsc::UnboundedSender<u64>) -> Self {
        let (events, _) = broadcast::channel(1024);
        ControlState {
            events,
            connections: None,
            boosts: BTreeMap::new(),
            next_handle: 1,
            actions: VecDeque::with_capacity(ACTIONS_KEPT),
            last_writer: HashMap::new(),
            gone_tx,
            loop_wakes: 0,
            grants: Vec::new(),
            health: Default::default(),
            dry_run: false,
        }
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

    /// An event: logged as a structured record (journald fields, issue
    /// 28), counted for `health`, and sent to the followers.
    pub(crate) fn publish(&self, make: impl FnOnce() -> wire::Event) {
        let e = make();
        super::eventlog::log(&e, self.dry_run);
        self.health.note(&e);
        if self.followed() {
            let _ = self.events.send(e);
        }
    }

    /// Records a write the daemon queued: the action list, the knob's last
    /// writer, the event.
    pub(crate) fn note_write(&mut self, w: &Write) {
        let cause = w.cause.to_string();
        let a = wire::ActionInfo {
            time: now_text(),
            cause: cause.clone(),
            knob: w.knob.to_string(),
            old: w.old.as_ref().map(|v| w.knob.render(v)),
            new: w.knob.render(&w.new),
        };
        self.last_writer.insert(w.knob.clone(), cause);
        self.publish(|| wire::Event {
            time: a.time.clone(),
            kind: "write".into(),
            knob: Some(a.knob.clone()),
            old: a.old.clone(),
            new: Some(a.new.clone()),
            cause: Some(a.cause.clone()),
            ..Default::default()
        });
        if self.actions.len() >= ACTIONS_KEPT {
            self.actions.pop_front();
        }
        self.actions.push_back(a);
    }

    /// A `settings.critical` process exited (issue 25): the
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
            kind: "critical_exit".into(),
            cause: Some(format!("critical {pattern}")),
            message: Some(format!("{comm} (pid {pid}) {how}")),
            ..Default::default()
        });
    }

    pub(crate) fn note_phase(&self, rule: &str, phase: &dyn std::fmt::Display) {
        self.publish(|| wire::Event {
            time: now_text(),
            kind: "rule".into(),
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
    /// unknown name drops only its entry, with a warning.
    pub(crate) fn resolve_grants(&mut self) {
        use crate::kernel::accounts;
        let root = self.opts.root.clone();
        let user = |n: &str| accounts::user(&root, n).ok().flatten().map(|u| u.uid);
        let group = |n: &str| accounts::group(&root, n).ok().flatten();
        let (grants, warnings) =
            crate::engine::grants::resolve(&self.policy.control, &user, &group);
        for w in warnings {
            // The warning already says `control: …`.
            tracing::warn!("{w}");
        }
        self.control.grants = grants;
    }

    /// Binds the control socket in state_dir and starts its thread; the
    /// socket's host path, or None (logged) when it cannot be served — the
    /// daemon supervises on without it.
    pub(crate) fn start_control(
        &mut self,
        calls: mpsc::UnboundedSender<crate::control::Call>,
    ) -> Option<std::path::PathBuf> {
        use crate::control::server;
        self.resolve_grants();
        let state_dir = self.opts.root.host_path(&self.policy.settings.state_dir);
        let path = server::socket_path(&state_dir);
        let group = &self.policy.settings.socket_group;
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
        match server::start(
            listener,
            calls,
            self.control.events.clone(),
            server::Limits::default(),
        ) {
            Ok(h) => {
                self.control.connections = Some(h.live);
                tracing::info!(socket = %path.display(), "control socket listening");
                self.start_kpi_socket(&state_dir, gid); // issue 26, kpisock.rs
                Some(path)
            }
            Err(e) => {
                tracing::error!("control socket thread: {e}");
                None
            }
        }
    }

    /// Answers one control request.
    pub(crate) fn on_control(&mut self, request: Request) -> Option<Response> {
        Some(match request {
            Request::Status => Response::Status(Box::new(self.status())),
            Request::ListClaims => Response::Claims(wire::ClaimsReply {
                claims: self.claim_infos(),
            }),
            Request::Verify => Response::Verify(self.verify()),
            Request::Health => Response::Health(self.health()),
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
                if let Some(b) = self.observe_book() {
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
            } => self.on_record_kpi(&name, unit.as_deref(), &samples), // issue 26, kpisock.rs
            Request::ConnClosed { conn } => {
                let tied: Vec<u64> = self
                    .control
                    .boosts
                    .iter()
                    .filter(|(_, b)| b.conn == Some(conn))
                    .map(|(h, _)| *h)
                    .collect();
                for h in tied {
                    self.end_boost(h, "claim_owner_gone", "its client's connection closed");
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
        let before = self.policy_hash.clone();
        let r = self.reload(dry_run, candidate);
        if r.ok && !dry_run && self.policy_hash != before {
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
            self.end_boost(h, "claim_released", "its knobs left the policy at a reload");
        }
        if !dry_run {
            if let Some(b) = self.observe_book() {
                b.reload(r.ok);
            }
            self.control.publish(|| wire::Event {
                time: now_text(),
                kind: if r.ok { "reload" } else { "reload_failed" }.into(),
                message: Some(match &r.error {
                    Some(e) => e.clone(),
                    None => format!("{} changes", r.changes),
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
            in_force: self.policy_hash.clone(),
        }
    }

    /// A writer lane finished a write: a refusal becomes a `write_failed`
    /// event, then the actuator logs and counts it.
    pub(crate) fn write_done(&mut self, done: super::lanes::Done) {
        if let Err(msg) = &done.result {
            let j = &done.job;
            self.control.publish(|| wire::Event {
                time: now_text(),
                kind: "write_failed".into(),
                knob: Some(j.label.clone()),
                // The raw text written (j.new is the log's raw + human).
                new: Some(j.text.clone()),
                cause: Some(j.cause.clone()),
                message: Some(msg.clone()),
                ..Default::default()
            });
        }
        if let Some(b) = self.observe_book() {
            b.write_done(&done.job.label, done.result.is_ok());
        }
        self.actuator.finished(done);
    }

    /// A tied process exited.
    pub(crate) fn on_boost_owner_gone(&mut self, handle: u64) {
        self.end_boost(
            handle,
            "claim_owner_gone",
            "the process it was tied to exited",
        );
    }

    /// Ends boost `handle` (its claims released, the knobs written back).
    fn end_boost(&mut self, handle: u64, kind: &str, why: &str) {
        let Some(b) = self.control.boosts.remove(&handle) else {
            return;
        };
        self.supervisor.release_boost(handle);
        tracing::info!(handle, uid = b.uid, "boost ended: {why}");
        if let Some(book) = self.observe_book() {
            book.boost(kind.strip_prefix("claim_").unwrap_or(kind));
        }
        self.control.publish(|| wire::Event {
            time: now_text(),
            kind: kind.into(),
            handle: Some(handle as i64),
            message: Some(why.to_string()),
            ..Default::default()
        });
        let effects = self.supervisor.flush(self.now());
        self.carry_out(effects);
    }

    /// Drops the boosts whose deadline passed (the engine already expired
    /// their claims), with an event each.
    pub(crate) fn expire_boosts(&mut self) {
        let now = self.now();
        let due: Vec<u64> = self
            .control
            .boosts
            .iter()
            .filter(|(_, b)| b.deadline.is_some_and(|d| d <= now))
            .map(|(h, _)| *h)
            .collect();
        for h in due {
            self.end_boost(h, "claim_expired", "its deadline passed");
        }
    }

    /// A boost's `KNOB=VALUE`: a knob of the closed set this policy and
    /// this system have, and a value that knob takes.
    fn boost_knob(&self, name: &str, value: &str) -> Result<(Knob, KnobValue), String> {
        let knob = Knob::parse(name).map_err(|e| format!("not a knob cgwarden manages: {e}"))?;
        if let Some(g) = knob.group() {
            if !self.policy.all_groups().iter().any(|x| x.name == g) {
                return Err(format!("the policy has no group `{g}`"));
            }
        }
        let value = knob
            .parse_value(value.trim())
            .map_err(|e| format!("`{value}`: {e}"))?;
        if self.actuator.read(&knob).is_none() {
            let path = self
                .actuator
                .target(&knob, &value)
                .map(|(p, _)| p.display().to_string())
                .unwrap_or_default();
            return Err(format!(
                "not present on this system ({path} cannot be read)"
            ));
        }
        Ok((knob, value))
    }

    #[allow(clippy::too_many_arguments)]
    fn on_boost(
        &mut self,
        caller: Caller,
        knobs: BTreeMap<String, String>,
        duration: Option<String>,
        reason: Option<String>,
        pid: Option<i64>,
        tied_to_connection: bool,
    ) -> Response {
        if knobs.is_empty() {
            return invalid("a boost names at least one KNOB=VALUE".into());
        }
        if knobs.len() > MAX_BOOST_KNOBS {
            return invalid(format!("a boost names at most {MAX_BOOST_KNOBS} knobs"));
        }
        let asked = match duration
            .as_deref()
            .map(crate::policy::decode::parse_duration)
        {
            None => None,
            Some(Ok(d)) if !d.is_zero() && d <= MAX_BOOST_DURATION => Some(d),
            Some(Ok(_)) => {
                return invalid(format!(
                    "duration `{}`: a boost lasts more than 0 and at most 30 days",
                    duration.unwrap_or_default()
                ))
            }
            Some(Err(e)) => return invalid(format!("duration: {e}")),
        };
        if pid.is_some() && caller.uid != 0 {
            return refused(format!(
                "uid {} may not tie a boost to another process (only root may); \
                 `cgwarden boost ... -- CMD` holds a boost while CMD runs",
                caller.uid
            ));
        }
        if let Some(r) = &reason {
            if r.len() > 256 || r.chars().any(char::is_control) {
                return invalid("reason: at most 256 printable characters".into());
            }
        }
        let mut wanted = Vec::new();
        let mut wanted_caps = Vec::new();
        let mut rejected = Vec::new();
        for (k, v) in &knobs {
            // `boost --cap` (issue 24): a ceiling on a ceiling-type knob.
            if let Some(name) = k.strip_prefix(crate::knobs::CAP_KEY_PREFIX) {
                let cap = self.boost_knob(name, v).and_then(|(knob, value)| {
                    if knob.is_ceiling() {
                        Ok((knob, value))
                    } else {
                        Err(format!("`{knob}` cannot be capped: only cpufreq.*.max, devfreq.*.max, G.uclamp.max, G.cpu.max, G.memory.high and G.memory.max can"))
                    }
                });
                match cap {
                    Ok(kv) => wanted_caps.push(kv),
                    Err(why) => rejected.push(wire::Rejected {
                        knob: k.clone(),
                        why,
                    }),
                }
                continue;
            }
            match self.boost_knob(k, v) {
                Ok(kv) => wanted.push(kv),
                Err(why) => rejected.push(wire::Rejected {
                    knob: k.clone(),
                    why,
                }),
            }
        }
        if wanted.is_empty() && wanted_caps.is_empty() {
            let why: Vec<String> = rejected
                .iter()
                .map(|r| format!("{}: {}", r.knob, r.why))
                .collect();
            return invalid(format!("nothing to boost: {}", why.join("; ")));
        }
        // Who may do what (SPEC §5 "Identity and grants").
        let live = self.control.boosts_of(caller.uid);
        let (allowed, allowed_caps, length) =
            match self.authorize_both(&caller, wanted, wanted_caps, asked, live) {
                Ok((allowed, caps, more_rejected, length)) => {
                    rejected.extend(more_rejected);
                    (allowed, caps, length)
                }
                Err(why) => return refused(why),
            };
        if allowed.is_empty() && allowed_caps.is_empty() {
            let why: Vec<String> = rejected
                .iter()
                .map(|r| format!("{}: {}", r.knob, r.why))
                .collect();
            return refused(format!("nothing to boost: {}", why.join("; ")));
        }
        // What ends it besides the deadline.
        let tied_pid = match pid {
            None => None,
            Some(p) => match i32::try_from(p) {
                Ok(p) if p > 0 => Some(p),
                _ => return invalid(format!("pid {p} is not a process id")),
            },
        };
        let handle = self.control.next_handle;
        let watch = match tied_pid {
            Some(p) => match self.watch_exit(p, handle) {
                Ok(w) => Some(w),
                Err(why) => return invalid(why),
            },
            None => None,
        };
        self.control.next_handle += 1;
        let now = self.now();
        let deadline = length.map(|d| now + d);
        let expires_at = length.map(|d| SystemTime::now() + d);
        // A boosted knob nothing else manages gets a baseline as rule knobs
        // do at startup (its original, else what it holds now), so it
        // returns there when the boost ends (`latency.*` above all: a
        // tolerance left behind would keep a CPU out of idle for good).
        for (k, _) in allowed.iter().chain(&allowed_caps) {
            if self.supervisor.table().baseline(k).is_none() {
                let live = self.actuator.read(k);
                if let Some(b) = self.actuator.original(k).or_else(|| live.clone()) {
                    self.supervisor.seed(k, b, live);
                }
            }
        }
        self.supervisor.boost(handle, allowed.clone(), deadline);
        self.supervisor
            .boost_caps(handle, allowed_caps.clone(), deadline);
        let applied: Vec<wire::Applied> = allowed
            .iter()
            .map(|(k, v)| wire::Applied {
                knob: k.to_string(),
                value: k.render(v),
            })
            .chain(allowed_caps.iter().map(|(k, v)| wire::Applied {
                knob: format!("{}{k}", crate::knobs::CAP_KEY_PREFIX),
                value: k.render(v),
            }))
            .collect();
        tracing::info!(
            handle,
            uid = caller.uid,
            pid = caller.pid,
            knobs = %applied.iter().map(|a| format!("{}={}", a.knob, a.value)).collect::<Vec<_>>().join(" "),
            until = %expires_at.map(crate::show::rfc3339_millis).unwrap_or_else(|| "released".into()),
            "boost granted"
        );
        for a in &applied {
            self.control.publish(|| wire::Event {
                time: now_text(),
                kind: "claim_granted".into(),
                handle: Some(handle as i64),
                knob: Some(a.knob.clone()),
                new: Some(a.value.clone()),
                cause: reason.clone(),
                ..Default::default()
            });
        }
        self.control.boosts.insert(
            handle,
            BoostEntry {
                uid: caller.uid,
                pid: caller.pid,
                reason,
                claims: allowed,
                caps: allowed_caps,
                deadline,
                expires_at,
                conn: tied_to_connection.then_some(caller.conn),
                tied_pid,
                watch,
            },
        );
        let effects = self.supervisor.flush(now);
        self.carry_out(effects);
        Response::Boost(wire::BoostReply {
            handle: handle as i64,
            expires_at: expires_at.map(crate::show::rfc3339_millis),
            applied,
            rejected,
        })
    }

    /// [`Self::authorize`] for a boost's raises and its caps (issue 24):
    /// caps are judged by the grants' `cap:` patterns; the boost lasts the
    /// shorter of the two decisions. A refusal of either refuses it all.
    #[allow(clippy::type_complexity)]
    fn authorize_both(
        &self,
        caller: &Caller,
        wanted: Vec<(Knob, KnobValue)>,
        wanted_caps: Vec<(Knob, KnobValue)>,
        asked: Option<Duration>,
        live: usize,
    ) -> Result<
        (
            Vec<(Knob, KnobValue)>,
            Vec<(Knob, KnobValue)>,
            Vec<wire::Rejected>,
            Option<Duration>,
        ),
        String,
    > {
        let mut rejected = Vec::new();
        let mut lengths = Vec::new();
        let mut allowed = Vec::new();
        if !wanted.is_empty() {
            let (a, r, l) = self.authorize(caller, wanted, asked, live, false)?;
            allowed = a;
            rejected.extend(r);
            lengths.push(l);
        }
        let mut caps = Vec::new();
        if !wanted_caps.is_empty() {
            let (a, r, l) = self.authorize(caller, wanted_caps, asked, live, true)?;
            caps = a;
            rejected.extend(r.into_iter().map(|mut r| {
                r.knob = format!("{}{}", crate::knobs::CAP_KEY_PREFIX, r.knob);
                r
            }));
            lengths.push(l);
        }
        let length = lengths.into_iter().reduce(|a, b| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        });
        Ok((allowed, caps, rejected, length.flatten()))
    }

    /// Which of `wanted` the caller may hold and for how long (SPEC §5
    /// "Identity and grants", decided by `engine::grants`); or why not at all.
    #[allow(clippy::type_complexity)]
    fn authorize(
        &self,
        caller: &Caller,
        wanted: Vec<(Knob, KnobValue)>,
        asked: Option<Duration>,
        live: usize,
        caps: bool,
    ) -> Result<
        (
            Vec<(Knob, KnobValue)>,
            Vec<wire::Rejected>,
            Option<Duration>,
        ),
        String,
    > {
        use crate::engine::grants;
        let who = grants::Caller {
            uid: caller.uid,
            gid: caller.gid,
            groups: caller.groups.clone(),
        };
        let knobs: Vec<Knob> = wanted.iter().map(|(k, _)| k.clone()).collect();
        let cap_grants;
        let grants_now = if caps {
            cap_grants = grants::for_caps(&self.control.grants);
            &cap_grants
        } else {
            &self.control.grants
        };
        let d = grants::decide(grants_now, &who, &knobs, asked, live).map_err(|r| r.reason)?;
        let allowed = wanted
            .into_iter()
            .filter(|(k, _)| d.allowed.contains(k))
            .collect();
        let rejected = d
            .rejected
            .into_iter()
            .map(|(knob, why)| wire::Rejected { knob, why })
            .collect();
        Ok((allowed, rejected, d.duration))
    }

    /// Watches `pid` for its exit (a pidfd turns readable).
    fn watch_exit(&self, pid: i32, handle: u64) -> Result<tokio::task::JoinHandle<()>, String> {
        use crate::kernel::procfs::{pidfd_open, PidFdError};
        let fd: std::os::fd::OwnedFd = match pidfd_open(pid) {
            Ok(fd) => fd.into(),
            Err(PidFdError::Gone) => return Err(format!("no process {pid}")),
            Err(PidFdError::Unavailable(e)) => {
                return Err(format!(
                    "cannot watch process {pid}: pidfd_open failed (errno {e})"
                ))
            }
        };
        let afd = crate::kernel::wait::async_fd(fd, tokio::io::Interest::READABLE)
            .map_err(|(e, _)| format!("cannot watch process {pid}: {e}"))?;
        let tx = self.control.gone_tx.clone();
        Ok(tokio::spawn(async move {
            // Readable once the process has exited.
            let _ = afd.readable().await;
            let _ = tx.send(handle);
        }))
    }

    fn own_boost(&self, caller: &Caller, handle: i64) -> Result<u64, Response> {
        let h = u64::try_from(handle).unwrap_or(0);
        match self.control.boosts.get(&h) {
            None => Err(Response::Error(wire::DaemonError::NoSuchHandle {
                message: format!("no live boost has handle {handle}"),
            })),
            Some(b) if caller.uid != 0 && b.uid != caller.uid => Err(refused(format!(
                "boost {handle} belongs to uid {}; uid {} may not change it",
                b.uid, caller.uid
            ))),
            Some(_) => Ok(h),
        }
    }

    fn on_release(&mut self, caller: &Caller, handle: i64) -> Response {
        match self.own_boost(caller, handle) {
            Ok(h) => {
                self.end_boost(h, "claim_released", "released by its client");
                Response::Released
            }
            Err(r) => r,
        }
    }

    fn on_extend(&mut self, caller: &Caller, handle: i64, duration: &str) -> Response {
        let h = match self.own_boost(caller, handle) {
            Ok(h) => h,
            Err(r) => return r,
        };
        let d = match crate::policy::decode::parse_duration(duration) {
            Ok(d) if !d.is_zero() && d <= MAX_BOOST_DURATION => d,
            Ok(_) => return invalid("a boost lasts more than 0 and at most 30 days".into()),
            Err(e) => return invalid(format!("duration: {e}")),
        };
        let Some(b) = self.control.boosts.get(&h) else {
            return invalid(format!("no live boost has handle {handle}"));
        };
        let wanted = b.claims.clone();
        let wanted_caps = b.caps.clone();
        let asked = Some(d);
        let (allowed, caps, _, length) =
            match self.authorize_both(caller, wanted, wanted_caps, asked, 0) {
                Ok(t) => t,
                Err(why) => return refused(why),
            };
        let now = self.now();
        let deadline = length.map(|d| now + d);
        let expires_at = length.map(|d| SystemTime::now() + d);
        self.supervisor.boost(h, allowed, deadline);
        self.supervisor.boost_caps(h, caps, deadline);
        if let Some(b) = self.control.boosts.get_mut(&h) {
            b.deadline = deadline;
            b.expires_at = expires_at;
        }
        let effects = self.supervisor.flush(now);
        self.carry_out(effects);
        Response::Extend(wire::ExtendReply {
            expires_at: expires_at.map(crate::show::rfc3339_millis),
        })
    }

    /// Engine time `t` on the wall clock.
    fn wall(&self, t: Time) -> SystemTime {
        let now = self.now();
        let n = SystemTime::now();
        if t >= now {
            n + (t - now)
        } else {
            n - (now - t)
        }
    }

    fn claim_infos(&self) -> Vec<wire::ClaimInfo> {
        self.supervisor
            .table()
            .claims()
            .live()
            .map(|c| {
                let mut info = wire::ClaimInfo {
                    owner: c.owner.to_string(),
                    // A cap shows as `cap KNOB` (issue 24).
                    knob: match c.cap {
                        true => format!("{}{}", crate::knobs::CAP_KEY_PREFIX, c.knob),
                        false => c.knob.to_string(),
                    },
                    value: c.knob.render(&c.value),
                    expires_at: c
                        .deadline
                        .map(|d| crate::show::rfc3339_millis(self.wall(d))),
                    ..Default::default()
                };
                if let Owner::Boost { handle } = &c.owner {
                    info.handle = Some(*handle as i64);
                    if let Some(b) = self.control.boosts.get(handle) {
                        info.uid = Some(i64::from(b.uid));
                        info.pid = Some(i64::from(b.pid));
                        info.reason = b.reason.clone();
                        info.tied_to = match (b.tied_pid, b.conn) {
                            (Some(p), _) => Some(format!("process {p}")),
                            (None, Some(_)) => Some("connection".into()),
                            _ => None,
                        };
                        info.expires_at = b.expires_at.map(crate::show::rfc3339_millis);
                    }
                }
                info
            })
            .collect()
    }

    fn group_status(&self, g: &crate::policy::model::Group) -> wire::GroupStatus {
        let root = &self.opts.root;
        let read = |f: &str| {
            root.read_small(&self.cg.file(&g.path, f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let psi =
            |f: &str| read(f).and_then(|t| crate::kernel::psi::parse_psi(&t).some.map(|l| l.avg10));
        let memory_events = read("memory.events")
            .map(|t| {
                crate::kernel::cgroupfs::parse_flat_keyed(&t)
                    .into_iter()
                    .map(|(k, v)| (k, i64::try_from(v).unwrap_or(i64::MAX)))
                    .collect()
            })
            .unwrap_or_default();
        wire::GroupStatus {
            name: g.name.clone(),
            path: self.cg.dir(&g.path).display().to_string(),
            exists: self.cg.exists(&g.path),
            cpuset: read("cpuset.cpus.effective").or_else(|| read("cpuset.cpus")),
            memory_current: read("memory.current").and_then(|t| t.parse().ok()),
            memory_high: read("memory.high"),
            memory_max: read("memory.max"),
            cpu_some_avg10: psi("cpu.pressure"),
            memory_some_avg10: psi("memory.pressure"),
            io_some_avg10: psi("io.pressure"),
            memory_events,
        }
    }

    fn knob_statuses(&self) -> Vec<wire::KnobStatus> {
        let t = self.supervisor.table();
        t.knobs()
            .map(|k| {
                let (effective, winner) = match t.effective_ref(k) {
                    Some((v, o)) => (Some(k.render(v)), o.map(|o| o.to_string())),
                    None => (None, None),
                };
                let mut contenders: Vec<wire::Contender> = t
                    .claims()
                    .on_knob(k)
                    .iter()
                    .map(|c| wire::Contender {
                        owner: c.owner.to_string(),
                        value: k.render(&c.value),
                    })
                    .collect();
                if let Some(w) = &winner {
                    if let Some(i) = contenders.iter().position(|c| &c.owner == w) {
                        let c = contenders.remove(i);
                        contenders.insert(0, c);
                    }
                }
                wire::KnobStatus {
                    knob: k.to_string(),
                    baseline: t.baseline(k).map(|v| k.render(v)),
                    effective,
                    winner,
                    contenders,
                }
            })
            .collect()
    }

    pub(crate) fn status(&self) -> wire::StatusReply {
        let (c, _) = self.actuator.counters();
        let rules = self
            .policy
            .rules
            .iter()
            .zip(self.supervisor.phases())
            .map(|(r, (phase, since))| wire::RuleStatus {
                name: r.name.clone(),
                state: phase.to_string(),
                since: since.map(|t| crate::show::rfc3339_millis(self.wall(t))),
            })
            .collect();
        wire::StatusReply {
            product: self.policy.product.clone(),
            policy: wire::PolicyInfo {
                path: self.opts.policy_path.display().to_string(),
                hash: self.policy_hash.clone(),
                loaded_at: crate::show::rfc3339_millis(self.loaded_at),
            },
            last_reload_error: self.last_reload_error.clone(),
            unavailable: self.unavailable(),
            daemon: wire::DaemonInfo {
                pid: i64::from(std::process::id()),
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_seconds: i64::try_from(self.start.elapsed().as_secs()).unwrap_or(i64::MAX),
                knob_writes: i64::try_from(c.writes).unwrap_or(i64::MAX),
                writes_rejected: i64::try_from(c.rejected).unwrap_or(i64::MAX),
                writes_late: i64::try_from(c.late).unwrap_or(i64::MAX),
                writes_superseded: i64::try_from(c.superseded).unwrap_or(i64::MAX),
                loop_wakeups: i64::try_from(self.control.loop_wakes).unwrap_or(i64::MAX),
                control_connections: self
                    .control
                    .connections
                    .as_ref()
                    .map(|c| c.load(std::sync::atomic::Ordering::Relaxed) as i64)
                    .unwrap_or(0),
            },
            groups: self
                .policy
                .all_groups()
                .into_iter()
                .map(|g| self.group_status(g))
                .collect(),
            rules,
            knobs: self.knob_statuses(),
            claims: self.claim_infos(),
            actions: self.control.actions.iter().cloned().collect(),
        }
    }

    /// Every managed knob with an effective value, compared with the kernel.
    pub(crate) fn verify(&self) -> wire::VerifyReply {
        let t = self.supervisor.table();
        let mut knobs = Vec::new();
        // A knob whose write is still queued or in flight is not drift:
        // the file holds the old value until the write is made.
        let pending = self.actuator.pending();
        for k in t.knobs() {
            let Some(expected) = t.effective(k) else {
                continue;
            };
            let target = self.actuator.target(k, &expected).ok();
            let path = target
                .as_ref()
                .map(|(p, _)| p.clone())
                .unwrap_or_else(|| self.actuator.read_path(k))
                .display()
                .to_string();
            // What the actuator writes for it: a governor list resolves to
            // the first available one, which the file then holds.
            let written = target.map(|(_, text)| text.trim().to_string());
            let actual = self.actuator.read(k);
            let skipped = match actual {
                None => self.actuator.unverifiable(k).map(String::from),
                Some(_) => None,
            };
            let drift = match &actual {
                Some(a) => {
                    a != &expected
                        && a.kernel() != expected.kernel()
                        && written.as_deref() != Some(a.kernel().as_str())
                }
                None => skipped.is_none(),
            } && !pending.contains(&k.to_string());
            knobs.push(wire::KnobCheck {
                knob: k.to_string(),
                path,
                expected: k.render(&expected),
                actual: actual.as_ref().map(|a| k.render(a)),
                drift,
                last_writer: self.control.last_writer.get(k).cloned(),
                skipped,
            });
        }
        for d in knobs.iter().filter(|k| k.drift) {
            self.control.publish(|| wire::Event {
                time: now_text(),
                kind: "drift".into(),
                knob: Some(d.knob.clone()),
                old: Some(d.expected.clone()),
                new: d.actual.clone(),
                message: Some(drift_message(&d.path, d.actual.as_deref())),
                ..Default::default()
            });
        }
        wire::VerifyReply {
            drift: knobs.iter().any(|k| k.drift),
            knobs,
        }
    }
}

/// The `drift` event's text: `PATH holds VALUE instead` (no path: the knob
/// has no file; never a text starting with a blank, issue 22 item 3).
fn drift_message(path: &str, actual: Option<&str>) -> String {
    let what = match actual {
        Some(a) => format!("holds {a} instead"),
        None => "cannot be read".to_string(),
    };
    if path.is_empty() {
        what
    } else {
        format!("{path} {what}")
    }
}
