//! Boosts: granting one after the grant checks, extending and
//! releasing it, and ending it when its owner is gone or its time is up.

use super::{invalid, now_text, refused, BoostEntry, MAX_BOOST_DURATION, MAX_BOOST_KNOBS};
use crate::control::wire::EventKind;
use crate::control::{wire, Caller, Response};
use crate::daemon::Daemon;
use crate::knobs::{Knob, KnobValue};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

impl Daemon {
    /// A tied process exited.
    pub(crate) fn on_boost_owner_gone(&mut self, handle: u64) {
        self.end_boost(
            handle,
            EventKind::ClaimOwnerGone,
            "the process it was tied to exited",
        );
    }

    /// Ends boost `handle` (its claims released, the knobs written back).
    pub(super) fn end_boost(&mut self, handle: u64, kind: EventKind, why: &str) {
        let Some(b) = self.control.boosts.remove(&handle) else {
            return;
        };
        self.supervisor.release_boost(handle);
        tracing::info!(handle, uid = b.uid, "boost ended: {why}");
        if let Some(book) = self.telemetry.observe_book() {
            book.boost(
                kind.as_str()
                    .strip_prefix("claim_")
                    .unwrap_or(kind.as_str()),
            );
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
        // No clock read at every loop turn for no boost.
        if self.control.boosts.is_empty() {
            return;
        }
        let now = self.now();
        let due: Vec<u64> = self
            .control
            .boosts
            .iter()
            .filter(|(_, b)| b.deadline.is_some_and(|d| d <= now))
            .map(|(h, _)| *h)
            .collect();
        for h in due {
            self.end_boost(h, EventKind::ClaimExpired, "its deadline passed");
        }
    }

    /// A boost's `KNOB=VALUE`: a knob of the closed set this policy and
    /// this system have, and a value that knob takes.
    fn boost_knob(&self, name: &str, value: &str) -> Result<(Knob, KnobValue), String> {
        // `cpufreq.big.min`: the cluster as this board names it.
        let name = &self.loaded.policy.binding.knob_name(name)?;
        let knob = Knob::parse(name).map_err(|e| format!("not a knob cgwarden manages: {e}"))?;
        if let Some(g) = knob.group() {
            if !self.loaded.policy.all_groups().iter().any(|x| x.name == g) {
                return Err(format!("the policy has no group `{g}`"));
            }
        }
        let value = knob
            .parse_value(value.trim())
            .map_err(|e| format!("`{value}`: {e}"))?;
        self.control
            .board
            .check_value(&knob, &value)
            .map_err(|why| format!("`{value}`: {why}"))?;
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
    pub(super) fn on_boost(
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
            // `boost --cap`: a ceiling on a ceiling-type knob.
            if let Some(name) = k.strip_prefix(crate::knobs::CAP_KEY_PREFIX) {
                let cap = self.boost_knob(name, v).and_then(|(knob, value)| {
                    if knob.is_ceiling() {
                        Ok((knob, value))
                    } else {
                        Err(crate::knobs::not_a_ceiling(&knob))
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
        // Who may do what (the policy's `control:` grants).
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
                kind: EventKind::ClaimGranted.into(),
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
            not_held: None,
        })
    }

    /// [`Self::authorize`] for a boost's raises and its caps:
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

    /// Which of `wanted` the caller may hold and for how long (the
    /// policy's `control:` grants, decided by `engine::grants`); or why not at all.
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

    pub(super) fn on_release(&mut self, caller: &Caller, handle: i64) -> Response {
        match self.own_boost(caller, handle) {
            Ok(h) => {
                self.end_boost(h, EventKind::ClaimReleased, "released by its client");
                Response::Released(wire::ReleaseReply::default())
            }
            Err(r) => r,
        }
    }

    pub(super) fn on_extend(&mut self, caller: &Caller, handle: i64, duration: &str) -> Response {
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
            not_held: None,
        })
    }
}
