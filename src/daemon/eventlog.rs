//! Every event of the stream (`cgwarden events`: rule transitions, writes,
//! claims, reloads, drift, and the kinds other parts add) as one log record
//! with structured fields, so journald
//! and the uploaders behind it (Fluent Bit, Vector, systemd-journal-upload)
//! filter by field, never by parsing the text:
//!
//! | field | value |
//! |---|---|
//! | `MESSAGE_ID` | a fixed 128-bit id per event kind ([`MESSAGE_IDS`]), as `journalctl MESSAGE_ID=…` and catalogs expect |
//! | `CGWARDEN_EVENT` | the kind (`rule`, `write`, `write_failed`, `claim_granted`, …) |
//! | `CGWARDEN_RULE`, `CGWARDEN_STATE` | the rule and its new phase (`rule`) |
//! | `CGWARDEN_KNOB`, `CGWARDEN_OLD`, `CGWARDEN_NEW` | the knob and its values (`write`, `write_failed`, `drift`, claims) |
//! | `CGWARDEN_CAUSE` | what made the write (`rule NAME`, `boost N`, `baseline`) or the boost's reason |
//! | `CGWARDEN_HANDLE` | the boost's handle (claims) |
//! | `CGWARDEN_DRY_RUN` | `true` under `run --dry-run` (nothing was written) |
//! | `PATH`, `ELAPSED_MS` | for `write`: the file and how long the kernel took ([`log_write`]) |
//! | `MESSAGE` | one readable line |
//!
//! A knob write is one record, made when the write has landed: its
//! `write` event (or `write_failed`), never a second line for the same
//! write. A field an event does not have is absent, not empty. The records go
//! through `tracing` (target `cgwarden::event`) like every other line:
//! structured journald records under systemd (`tracing-journald`, fields
//! upper-cased, no prefix), `key=value` text on stderr otherwise. Failures
//! (`write_failed`, `reload_failed`, `drift`, `kill`, `critical_exit`) are
//! warnings (PRIORITY 4), the rest informational (tracing-journald gives
//! INFO the PRIORITY 5, notice).
//!
//! The ids are part of the interface (docs/operations.md lists them): never
//! change one; a new kind gets a new id.

use crate::control::wire::Event;
use crate::control::wire::EventKind;
use std::path::Path;

/// The journald MESSAGE_ID of each event kind (32 hex digits, as
/// `journalctl --new-id128` makes them). Kinds without their own id (a
/// kind added later) log under `other`.
pub(crate) const MESSAGE_IDS: [(&str, &str); 16] = [
    ("rule", "1122b142d8ff40ce86670a70fbecdcca"),
    ("write", "19aa36027d324aaeade6a5ac99084eda"),
    ("write_failed", "afe3d479b2304e37900c209cac1434df"),
    ("claim_granted", "ecf093d6edec44ae8645fe84622d6fe1"),
    ("claim_expired", "5799b22c17c24770ab848e3c501b6e68"),
    ("claim_released", "572d31179ce84f739af09d4fac2d93cf"),
    ("claim_owner_gone", "0d23ddfbd2eb4554920fe9e2a223ee02"),
    ("drift", "a7666fd3ebc847aab5aa4ec71b2d21d6"),
    ("reload", "bec348b2c2e34a57911fe39843cf6169"),
    ("reload_failed", "8465b6a187534c3989ce70d63a9efd70"),
    ("kill", "0c5e53e03960462eb30b6007fbdcf99b"),
    ("critical_exit", "dcc9c1887f2249a08dcfe4a1b146ed06"),
    ("throttle", "763ae1cb14864c349bc5fa9469ecbcfc"),
    ("freeze", "d3478eac96204fb899f1798b663a667e"),
    ("thaw", "390106a0c5724121add33c82aa066de7"),
    ("other", "95d7a6d012de43eaaa89b9a302f9b6ca"),
];

/// The id of `kind` ([`MESSAGE_IDS`]; `other` for a kind without one).
pub(crate) fn message_id(kind: &str) -> &'static str {
    MESSAGE_IDS
        .iter()
        .find(|(k, _)| *k == kind)
        .or_else(|| MESSAGE_IDS.iter().find(|(k, _)| *k == "other"))
        .map(|(_, id)| *id)
        .unwrap_or_default()
}

/// Whether the kind is a failure (logged as a warning).
fn is_failure(kind: Option<EventKind>) -> bool {
    use EventKind as K;
    matches!(
        kind,
        Some(K::WriteFailed | K::ReloadFailed | K::Drift | K::Kill | K::CriticalExit)
    )
}

/// The record's readable line.
pub(crate) fn message(e: &Event) -> String {
    let o = |v: &Option<String>| v.clone().unwrap_or_default();
    let extra = |m: &Option<String>| match m {
        Some(m) if !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    };
    // The two kinds a loop turn logs most, pushed rather than formatted.
    fn s(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or_default()
    }
    use EventKind as K;
    match e.kind() {
        Some(K::Rule) => ["rule ", s(&e.rule), " ", s(&e.state)].concat(),
        Some(K::Write) => {
            let mut m = ["set ", s(&e.knob), " = ", s(&e.new)].concat();
            if let Some(v) = e.old.as_deref() {
                m.extend([" (was ", v, ")"]);
            }
            m.extend([" by ", s(&e.cause)]);
            m
        }
        Some(K::WriteFailed) => format!(
            "write of {} = {} by {} failed{}",
            o(&e.knob),
            o(&e.new),
            o(&e.cause),
            extra(&e.message)
        ),
        Some(K::Drift) => format!("drift on {}{}", o(&e.knob), extra(&e.message)),
        Some(K::ClaimGranted) => format!(
            "boost {} holds {} = {}",
            e.handle.unwrap_or_default(),
            o(&e.knob),
            o(&e.new)
        ),
        Some(k @ (K::ClaimExpired | K::ClaimReleased | K::ClaimOwnerGone)) => format!(
            "boost {} ended ({}){}",
            e.handle.unwrap_or_default(),
            &k.as_str()["claim_".len()..],
            extra(&e.message)
        ),
        Some(K::Reload) => format!("policy reloaded{}", extra(&e.message)),
        Some(K::ReloadFailed) => format!("policy reload refused{}", extra(&e.message)),
        _ => {
            let mut parts = vec![e.kind.clone()];
            for v in [&e.rule, &e.knob, &e.message].into_iter().flatten() {
                parts.push(v.clone());
            }
            parts.join(" ")
        }
    }
}

/// Logs `e` as one structured record (see the module docs). Under
/// `--dry-run` the text starts with `(dry run)` and `CGWARDEN_DRY_RUN=true`
/// says that nothing was written.
pub(crate) fn log(e: &Event, dry_run: bool) {
    if e.is(EventKind::Subscribed) || e.is(EventKind::Lagged) {
        return;
    }
    let id = message_id(&e.kind);
    let text = if dry_run {
        format!("(dry run) {}", message(e))
    } else {
        message(e)
    };
    let dry = dry_run.then_some(true);
    let (rule, state, knob) = (e.rule.as_deref(), e.state.as_deref(), e.knob.as_deref());
    let (old, new, cause) = (e.old.as_deref(), e.new.as_deref(), e.cause.as_deref());
    let handle = e.handle;
    let kind = e.kind.as_str();
    if is_failure(e.kind()) {
        tracing::warn!(
            target: "cgwarden::event",
            message_id = id,
            cgwarden_event = kind,
            cgwarden_rule = rule,
            cgwarden_state = state,
            cgwarden_knob = knob,
            cgwarden_old = old,
            cgwarden_new = new,
            cgwarden_cause = cause,
            cgwarden_handle = handle,
            cgwarden_dry_run = dry,
            "{text}"
        );
    } else {
        tracing::info!(
            target: "cgwarden::event",
            message_id = id,
            cgwarden_event = kind,
            cgwarden_rule = rule,
            cgwarden_state = state,
            cgwarden_knob = knob,
            cgwarden_old = old,
            cgwarden_new = new,
            cgwarden_cause = cause,
            cgwarden_handle = handle,
            cgwarden_dry_run = dry,
            "{text}"
        );
    }
}

/// Logs a knob write that landed, `e` (a `write` event), as its one record:
/// the event's fields, the file written and how long the kernel took; the
/// text says the old and new value raw and for people ([`write_text`]).
pub(crate) fn log_write(e: &Event, path: &Path, old: &str, new: &str, elapsed_ms: f64) {
    let text = write_text(
        e.knob.as_deref().unwrap_or_default(),
        old,
        new,
        e.cause.as_deref().unwrap_or_default(),
    );
    tracing::info!(
        target: "cgwarden::event",
        path = %path.display(),
        elapsed_ms,
        message_id = message_id(&e.kind),
        cgwarden_event = e.kind.as_str(),
        cgwarden_knob = e.knob.as_deref(),
        cgwarden_old = e.old.as_deref(),
        cgwarden_new = e.new.as_deref(),
        cgwarden_cause = e.cause.as_deref(),
        "{text}"
    );
}

/// `set KNOB = NEW, was OLD, by CAUSE`, the values as the log shows them
/// (`knobs::human::both`: `268435456 (256M)`); `-` for an old value not
/// known leaves the `was` out.
fn write_text(knob: &str, old: &str, new: &str, cause: &str) -> String {
    let mut m = ["set ", knob, " = ", new].concat();
    if old != "-" {
        m.extend([", was ", old, ","]);
    }
    m.extend([" by ", cause]);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_are_distinct_128_bit_and_every_kind_has_one() {
        let ids: BTreeSet<&str> = MESSAGE_IDS.iter().map(|(_, id)| *id).collect();
        assert_eq!(ids.len(), MESSAGE_IDS.len());
        for id in &ids {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        // Every kind the IDL documents has its own id.
        let idl = include_str!("../control/io.cgwarden.Daemon.varlink");
        for kind in [
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
        ] {
            assert!(idl.contains(kind), "{kind}");
            assert_ne!(message_id(kind), message_id("other"), "{kind}");
        }
        assert_eq!(message_id("something_new"), message_id("other"));
    }

    #[test]
    fn messages_read_as_sentences() {
        let e = Event {
            kind: EventKind::Write.into(),
            knob: Some("app.memory.high".into()),
            old: Some("64M".into()),
            new: Some("96M".into()),
            cause: Some("rule app-stall".into()),
            ..Default::default()
        };
        assert_eq!(
            message(&e),
            "set app.memory.high = 96M (was 64M) by rule app-stall"
        );
        let r = Event {
            kind: EventKind::Rule.into(),
            rule: Some("oom-seen".into()),
            state: Some("active".into()),
            ..Default::default()
        };
        assert_eq!(message(&r), "rule oom-seen active");
        assert_eq!(
            write_text(
                "app.memory.high",
                "67108864 (64M)",
                "100663296 (96M)",
                "rule app-stall"
            ),
            "set app.memory.high = 100663296 (96M), was 67108864 (64M), by rule app-stall"
        );
        assert_eq!(
            write_text("sysctl.vm.swappiness", "-", "90", "boost 3"),
            "set sysctl.vm.swappiness = 90 by boost 3"
        );
        let c = Event {
            kind: EventKind::ClaimExpired.into(),
            handle: Some(3),
            message: Some("its deadline passed".into()),
            ..Default::default()
        };
        assert_eq!(message(&c), "boost 3 ended (expired): its deadline passed");
        let k = Event {
            kind: EventKind::Kill.into(),
            message: Some("pid 42 in batch".into()),
            ..Default::default()
        };
        assert_eq!(message(&k), "kill pid 42 in batch");
    }
}
