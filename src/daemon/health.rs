//! `cgwarden health` (the fleet's view): the check an OTA framework (RAUC,
//! Mender, SWUpdate) runs after installing a new policy or image, before it
//! commits the update or rolls it back.
//!
//! Healthy means all of:
//! - the policy file on disk is the policy in force (same sha256): a new
//!   policy that was refused, or not picked up, fails the check;
//! - the last reload did not fail (`status`'s "last reload error");
//! - no drift: the managed knobs read back what they should now (the same
//!   comparison as `verify`), and no drift event (from `verify` or the
//!   periodic `settings.drift` check) was seen since the policy was loaded;
//! - no write the kernel refused since the policy was loaded.
//!
//! "Since the policy was loaded" is since the daemon started, or since the
//! reload that put a different policy in force: an update is judged by what
//! its own policy did, not by a failure of the policy it replaced. A reload
//! of the same content (SIGHUP, a rollback writing the old file back) keeps
//! the count. The tally is fed by the event stream ([`Tally::note`] in
//! `ControlState::publish`), so every source of a failed write or a drift
//! counts, including ones added later.

use super::reload::Loaded;
use crate::control::wire;
use crate::control::wire::EventKind;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::SystemTime;

/// Failures counted since the policy in force was loaded.
#[derive(Debug)]
pub(crate) struct Tally {
    since: Cell<SystemTime>,
    writes_failed: Cell<u64>,
    last_write_failure: RefCell<Option<String>>,
    drifts: Cell<u64>,
    last_drift: RefCell<Option<String>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            since: Cell::new(SystemTime::now()),
            writes_failed: Cell::new(0),
            last_write_failure: RefCell::new(None),
            drifts: Cell::new(0),
            last_drift: RefCell::new(None),
        }
    }
}

/// `KNOB = VALUE by CAUSE: MESSAGE`, as far as the event says.
fn what(e: &wire::Event) -> String {
    let mut s = e.knob.clone().unwrap_or_default();
    if let Some(n) = &e.new {
        s.push_str(&format!(" = {n}"));
    }
    if let Some(c) = &e.cause {
        s.push_str(&format!(" by {c}"));
    }
    if let Some(m) = &e.message {
        s.push_str(&format!(": {m}"));
    }
    s
}

impl Tally {
    /// Counts a failure event.
    pub(crate) fn note(&self, e: &wire::Event) {
        match e.kind() {
            Some(EventKind::WriteFailed) => {
                self.writes_failed.set(self.writes_failed.get() + 1);
                *self.last_write_failure.borrow_mut() = Some(what(e));
            }
            Some(EventKind::Drift) => {
                self.drifts.set(self.drifts.get() + 1);
                *self.last_drift.borrow_mut() = Some(format!(
                    "{}: expected {}{}",
                    e.knob.as_deref().unwrap_or("?"),
                    e.old.as_deref().unwrap_or("?"),
                    e.message
                        .as_deref()
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                ));
            }
            _ => {}
        }
    }

    /// A different policy was put in force: counting starts again.
    pub(crate) fn restart(&self) {
        self.since.set(SystemTime::now());
        self.writes_failed.set(0);
        self.drifts.set(0);
        *self.last_write_failure.borrow_mut() = None;
        *self.last_drift.borrow_mut() = None;
    }

    /// The reasons the tally gives (empty: none).
    fn reasons(&self) -> Vec<String> {
        let since = crate::show::rfc3339_millis(self.since.get());
        let mut out = Vec::new();
        let n = self.drifts.get();
        if n > 0 {
            out.push(format!(
                "{n} drift{} seen since {since}; the last: {}",
                if n == 1 { "" } else { "s" },
                self.last_drift.borrow().as_deref().unwrap_or("?")
            ));
        }
        let n = self.writes_failed.get();
        if n > 0 {
            out.push(format!(
                "{n} write{} refused by the kernel since {since}; the last: {}",
                if n == 1 { "" } else { "s" },
                self.last_write_failure.borrow().as_deref().unwrap_or("?")
            ));
        }
        out
    }
}

/// What `Health` found in the loop, before the held check: the policy
/// file's hash and the reasons so far.
#[derive(Debug)]
pub(crate) struct Pending {
    reasons: Vec<String>,
    disk_hash: Option<String>,
}

/// The loop's part of `Health()` but the knobs: whether the policy on
/// disk (`policy_path`) is the one in force, and the last reload.
pub(crate) fn pending(loaded: &Loaded, policy_path: &Path) -> Pending {
    let mut reasons = Vec::new();
    let disk_hash = match crate::policy::read_bytes(policy_path) {
        Ok(bytes) => Some(super::reload::hash_hex(&bytes)),
        Err(e) => {
            reasons.push(format!(
                "the policy file {} cannot be read: {e}",
                policy_path.display()
            ));
            None
        }
    };
    if let Some(d) = &disk_hash {
        if *d != loaded.hash {
            reasons.push(format!(
                "the policy on disk ({}, sha256 {}) is not the one in force (sha256 {}){}",
                policy_path.display(),
                crate::show::short(d),
                crate::show::short(&loaded.hash),
                if loaded.last_error.is_some() {
                    ": it was refused"
                } else {
                    ""
                }
            ));
        }
    }
    if let Some(e) = &loaded.last_error {
        let first = e.lines().next().unwrap_or_default();
        let more = e.lines().count().saturating_sub(1);
        reasons.push(format!(
            "the last reload failed: {first}{}",
            if more > 0 {
                format!(" (and {more} more lines: `cgwarden status`)")
            } else {
                String::new()
            }
        ));
    }
    Pending { reasons, disk_hash }
}

/// The answer, once the held drifts are noted too.
pub(crate) fn reply(loaded: &Loaded, tally: &Tally, p: Pending) -> wire::HealthReply {
    let mut reasons = p.reasons;
    reasons.extend(tally.reasons());
    wire::HealthReply {
        healthy: reasons.is_empty(),
        reasons,
        hash: loaded.hash.clone(),
        disk_hash: p.disk_hash,
        since: crate::show::rfc3339_millis(tally.since.get()),
        target: loaded.policy.binding.target_text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_until_a_new_policy_restarts_the_tally() {
        let t = Tally::default();
        assert!(t.reasons().is_empty());
        t.note(&wire::Event {
            kind: EventKind::Write.into(),
            ..Default::default()
        });
        assert!(t.reasons().is_empty());
        t.note(&wire::Event {
            kind: EventKind::WriteFailed.into(),
            knob: Some("app.memory.max".into()),
            new: Some("1G".into()),
            cause: Some("baseline".into()),
            message: Some("EBUSY".into()),
            ..Default::default()
        });
        t.note(&wire::Event {
            kind: EventKind::Drift.into(),
            knob: Some("vm.swappiness".into()),
            old: Some("33".into()),
            message: Some("/proc/sys/vm/swappiness holds 60 instead".into()),
            ..Default::default()
        });
        let r = t.reasons();
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(
            r[0].starts_with("1 drift seen since ")
                && r[0].ends_with(
                    "vm.swappiness: expected 33, /proc/sys/vm/swappiness holds 60 instead"
                ),
            "{r:?}"
        );
        assert!(
            r[1].contains("1 write refused")
                && r[1].ends_with("app.memory.max = 1G by baseline: EBUSY"),
            "{r:?}"
        );
        t.restart();
        assert!(t.reasons().is_empty());
    }
}
