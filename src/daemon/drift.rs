//! Drift: a file cgwarden manages that no longer holds what the policy and
//! the engine say, because something else wrote it (irqbalance, tuned, an
//! operator's `echo`). Two kinds of file are compared:
//!
//! - the knobs of the engine's table (group knobs, cpufreq, devfreq,
//!   sysctls, zram's limit and priority, latency), with their *effective*
//!   value, claims included: the engine side (which file, what text) is
//!   taken on the event loop, no I/O but a governor list's resolution;
//! - what the baseline holds beyond the table ([`crate::converge::held`]):
//!   the realtime switch's files, `system.irqs`/`system.kthreads`, zram's
//!   set-up and the per-process attributes of placed processes, planned
//!   against the kernel as `plan` does.
//!
//! `settings.drift` runs both every `interval` on a blocking thread, off the
//! loop; `verify` and `health` run the first in the loop (a few small reads)
//! and the second on the same kind of thread. A drift is logged, sent as a
//! `drift` event (recorder, `cgwarden events`, `health`) and counted in
//! `cgwarden_drift_total{knob}` **once, when it begins**: a file that stays
//! drifted across checks is one drift, and one that is put back and drifts
//! again is a second. With `on_drift: restore` a table knob's effective value
//! is written back through the actuator, and a held file's step is carried
//! out as `apply` does — both journals already hold the file's original, so
//! the journal is untouched.
//!
//! Cost per interval: one small read per managed knob and held file (a few
//! dozen on the shipped policies) and, with placed processes' attributes, a
//! `/proc` scan; the check logs its count and time at debug level. A knob
//! whose write is still on its lane can read as drifted once; with `restore`
//! that rewrites the same value.

use super::Daemon;
use crate::control::wire::EventKind;
use crate::converge::held::held_label;
use crate::converge::{Converger, Step};
use crate::engine::knobs::{Cause, Write};
use crate::kernel::Root;
use crate::knobs::{Knob, KnobValue};
use crate::policy::Policy;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::mpsc;

/// The drift guard's and `verify`'s state in the daemon.
#[derive(Debug, Default)]
pub(crate) struct DriftState {
    /// A periodic check is running.
    busy: bool,
    /// Drifts seen per knob or file (`cgwarden_drift_total{knob}`).
    pub(crate) counts: BTreeMap<String, u64>,
    /// What is drifted now, by knob or file.
    open: BTreeSet<String>,
    /// Where a check off the loop sends its report.
    pub(crate) tx: Option<mpsc::UnboundedSender<DriftReport>>,
}

impl DriftState {
    /// `key` was found drifted: whether that is a new drift (counted).
    pub(crate) fn begins(&mut self, key: &str) -> bool {
        if !self.open.insert(key.to_string()) {
            return false;
        }
        *self.counts.entry(key.to_string()).or_insert(0) += 1;
        true
    }

    /// `key` was found as it should be.
    pub(crate) fn ended(&mut self, key: &str) {
        self.open.remove(key);
    }
}

/// One table knob found drifted.
#[derive(Debug)]
pub(crate) struct Drifted {
    knob: Knob,
    path: PathBuf,
    want: KnobValue,
    actual: Option<KnobValue>,
}

/// One held file or thread found drifted: its label, what it should hold,
/// what it holds.
#[derive(Debug, Clone)]
pub(crate) struct HeldDrift {
    pub(crate) label: String,
    pub(crate) path: Option<PathBuf>,
    pub(crate) want: String,
    pub(crate) actual: Option<String>,
}

/// One finished check.
#[derive(Debug)]
pub(crate) struct DriftReport {
    /// Every table knob read, drifted or not.
    checked: Vec<String>,
    drifted: Vec<Drifted>,
    held: Vec<HeldDrift>,
    micros: u128,
    /// A `Verify` or `Health` call waiting for the held check: answered
    /// once its drifts are noted. `None`: the periodic check.
    answer: Option<Answer>,
}

/// A call answered when the held check is back.
#[derive(Debug)]
pub(crate) enum Answer {
    /// `Verify`, with the table's knobs as checked in the loop.
    Verify(
        tokio::sync::oneshot::Sender<crate::control::Response>,
        Vec<crate::control::wire::KnobCheck>,
    ),
    /// `Health`, with the reasons found in the loop.
    Health(
        tokio::sync::oneshot::Sender<crate::control::Response>,
        super::health::Pending,
    ),
}

/// The held files and threads that do not hold what the policy says now
/// ([`Converger::held_plan`]); `knob_paths` are the table's files. With
/// `restore`, they are put back (as `apply` would, through `journal`).
pub(crate) fn held_drifts(
    root: &Root,
    policy: &Policy,
    knob_paths: &BTreeSet<PathBuf>,
    restore: Option<&super::lanes::SharedJournal>,
) -> Vec<HeldDrift> {
    let conv = Converger::new(root.clone(), policy);
    let plan = conv.held_plan(knob_paths);
    let warned = plan.warnings.iter().map(|w| HeldDrift {
        label: w.clone(),
        path: None,
        want: "the policy's settings".into(),
        actual: None,
    });
    let out = plan
        .steps
        .iter()
        .map(|s| match s {
            Step::Write {
                path, value, was, ..
            } => HeldDrift {
                label: held_label(s),
                path: Some(path.clone()),
                want: value.clone(),
                actual: was.clone(),
            },
            Step::Task(ch) => HeldDrift {
                label: held_label(s),
                path: None,
                want: ch.op.to_string(),
                actual: Some(ch.was.clone()),
            },
            other => HeldDrift {
                label: held_label(other),
                path: None,
                want: other.to_string(),
                actual: None,
            },
        })
        .chain(warned)
        .collect();
    if let (Some(j), false) = (restore, plan.steps.is_empty()) {
        let mut guard = super::lanes::lock_journal(j);
        match conv.apply_journalled(&plan, &mut guard, &mut |l| {
            tracing::info!(cause = "drift", "{l}")
        }) {
            Ok(done) => {
                for f in &done.failures {
                    tracing::warn!(cause = "drift", "restore: {f}");
                }
            }
            Err(e) => tracing::error!("drift restore: the originals journal: {e}"),
        }
    }
    out
}

impl Daemon {
    /// The files of the table's knobs (left out of the held check).
    pub(crate) fn knob_paths(&self) -> BTreeSet<PathBuf> {
        self.supervisor
            .table()
            .knobs()
            .map(|k| self.actuator.read_path(k))
            .collect()
    }

    /// Starts a check unless one is running.
    pub(crate) fn start_drift_check(&mut self, tx: &mpsc::UnboundedSender<DriftReport>) {
        if self.telemetry.drift.busy {
            return;
        }
        let t = self.supervisor.table();
        let checks: Vec<(Knob, PathBuf, KnobValue)> = t
            .knobs()
            .filter(|k| !k.held_by_daemon())
            .filter_map(|k| {
                let effective = t.effective(k)?;
                let (path, text) = self.actuator.target(k, &effective).ok()?;
                // The text the file should read back as (a governor list resolved).
                let want = k.parse_kernel(&text).ok()?;
                Some((k.clone(), path, want))
            })
            .collect();
        let knob_paths = self.knob_paths();
        let root = self.opts.root.clone();
        let policy = self.loaded.policy.clone();
        let restore = self
            .loaded
            .policy
            .settings
            .drift
            .as_ref()
            .is_some_and(|d| d.restore);
        let journal = if restore {
            self.actuator.shared_journal()
        } else {
            None
        };
        let tx = tx.clone();
        self.telemetry.drift.busy = true;
        tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let checked = checks.iter().map(|(k, ..)| k.to_string()).collect();
            let drifted = checks
                .into_iter()
                .filter_map(|(knob, path, want)| {
                    let actual = root
                        .read(&path)
                        .ok()
                        .and_then(|text| knob.parse_kernel(&text).ok());
                    let same = actual
                        .as_ref()
                        .is_some_and(|a| a == &want || a.kernel() == want.kernel());
                    (!same).then_some(Drifted {
                        knob,
                        path,
                        want,
                        actual,
                    })
                })
                .collect();
            let held = held_drifts(&root, &policy, &knob_paths, journal.as_ref());
            let _ = tx.send(DriftReport {
                checked,
                drifted,
                held,
                micros: t0.elapsed().as_micros(),
                answer: None,
            });
        });
    }

    /// The held check for a waiting `Verify` or `Health` call, off the loop:
    /// it may scan `/proc`, which the loop that reacts must not wait for.
    /// Without a report channel (no loop), it runs here.
    pub(crate) fn check_held_then(&mut self, answer: Answer) {
        let knob_paths = self.knob_paths();
        let Some(tx) = self.telemetry.drift.tx.clone() else {
            let held = held_drifts(&self.opts.root, &self.loaded.policy, &knob_paths, None);
            self.answer_held(held, answer);
            return;
        };
        let root = self.opts.root.clone();
        let policy = self.loaded.policy.clone();
        tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let held = held_drifts(&root, &policy, &knob_paths, None);
            let _ = tx.send(DriftReport {
                checked: Vec::new(),
                drifted: Vec::new(),
                held,
                micros: t0.elapsed().as_micros(),
                answer: Some(answer),
            });
        });
    }

    /// The loop's part of `Health()`: the policy on disk, the last reload,
    /// the table's knobs now (each drift found is published, and so
    /// counted, once).
    pub(crate) fn health_pending(&mut self) -> super::health::Pending {
        let pending = super::health::pending(&self.loaded, &self.opts.policy_path);
        self.verify_knobs();
        pending
    }

    /// The `Health()` answer, once the held drifts are noted too.
    fn health_reply(&self, p: super::health::Pending) -> crate::control::wire::HealthReply {
        super::health::reply(&self.loaded, &self.control.health, p)
    }

    /// Answers `Health()` here, the held check in the loop (see the module
    /// docs). A call with a reply channel goes through
    /// [`Self::check_held_then`] instead, off the loop.
    pub(crate) fn health(&mut self) -> crate::control::wire::HealthReply {
        let pending = self.health_pending();
        let held = held_drifts(
            &self.opts.root,
            &self.loaded.policy,
            &self.knob_paths(),
            None,
        );
        self.note_held(&held, false);
        self.health_reply(pending)
    }

    /// Notes the held drifts, then answers the call that waited for them.
    fn answer_held(&mut self, held: Vec<HeldDrift>, answer: Answer) {
        self.note_held(&held, false);
        match answer {
            Answer::Verify(tx, mut knobs) => {
                knobs.extend(held.into_iter().map(held_check));
                let reply = crate::control::wire::VerifyReply {
                    drift: knobs.iter().any(|k| k.drift),
                    knobs,
                };
                let _ = tx.send(crate::control::Response::Verify(reply));
            }
            Answer::Health(tx, pending) => {
                let reply = self.health_reply(pending);
                let _ = tx.send(crate::control::Response::Health(Box::new(reply)));
            }
        }
    }

    /// A check's result, on the loop.
    pub(crate) fn on_drift(&mut self, mut r: DriftReport) {
        if let Some(answer) = r.answer.take() {
            self.answer_held(r.held, answer);
            return;
        }
        self.telemetry.drift.busy = false;
        tracing::debug!(
            knobs = r.checked.len(),
            held = r.held.len(),
            micros = r.micros as u64,
            "drift check"
        );
        let restore = self
            .loaded
            .policy
            .settings
            .drift
            .as_ref()
            .is_some_and(|d| d.restore);
        let drifted: BTreeSet<String> = r.drifted.iter().map(|d| d.knob.to_string()).collect();
        for k in r.checked.iter().filter(|k| !drifted.contains(*k)) {
            self.telemetry.drift.ended(k);
        }
        for d in r.drifted {
            // The engine may have moved on since the check started.
            let now = self.supervisor.table().effective(&d.knob);
            let still = now
                .as_ref()
                .and_then(|v| self.actuator.target(&d.knob, v).ok())
                .and_then(|(_, text)| d.knob.parse_kernel(&text).ok());
            if still.as_ref() != Some(&d.want) {
                continue;
            }
            let actual = d
                .actual
                .as_ref()
                .map(|a| d.knob.render(a))
                .unwrap_or_else(|| "nothing readable".into());
            let want = d.knob.render(&d.want);
            let key = d.knob.to_string();
            if self.telemetry.drift.begins(&key) {
                tracing::warn!(knob = %d.knob, path = %d.path.display(), expected = %want, actual = %actual, restore, "drift: written behind cgwarden's back");
                self.publish_drift(&key, &want, Some(&actual), Some(&d.path));
            }
            if restore {
                // A restored knob that holds again ends its drift at the
                // next check.
                if let Some(new) = now {
                    self.actuator.apply(&Write {
                        knob: d.knob.clone(),
                        old: d.actual.clone(),
                        new,
                        cause: Cause::Drift,
                    });
                }
            }
        }
        self.note_held(&r.held, restore);
    }

    /// Held drifts found by a complete check: new ones logged, published
    /// and counted; those no longer found ended.
    pub(crate) fn note_held(&mut self, held: &[HeldDrift], restored: bool) {
        let now: BTreeSet<&str> = held.iter().map(|h| h.label.as_str()).collect();
        let gone: Vec<String> = self
            .telemetry
            .drift
            .open
            .iter()
            .filter(|k| is_held_key(k) && !now.contains(k.as_str()))
            .cloned()
            .collect();
        for k in gone {
            self.telemetry.drift.ended(&k);
        }
        for h in held {
            if !self.telemetry.drift.begins(&h.label) {
                continue;
            }
            let actual = h.actual.as_deref().unwrap_or("nothing readable");
            match &h.path {
                Some(p) => {
                    tracing::warn!(file = %p.display(), expected = %h.want, actual, restored, "drift: written behind cgwarden's back")
                }
                None => {
                    tracing::warn!(what = %h.label, restored, "drift: changed behind cgwarden's back")
                }
            }
            self.publish_drift(&h.label, &h.want, h.actual.as_deref(), h.path.as_deref());
        }
    }

    /// The `drift` event of a drift that began.
    pub(crate) fn publish_drift(
        &mut self,
        key: &str,
        want: &str,
        actual: Option<&str>,
        path: Option<&std::path::Path>,
    ) {
        let what = match actual {
            Some(a) => format!("holds {a} instead"),
            None => "cannot be read".to_string(),
        };
        let message = match path {
            Some(p) => format!("{} {what}", p.display()),
            None => what,
        };
        self.control.publish(|| crate::control::wire::Event {
            time: crate::show::rfc3339_millis(std::time::SystemTime::now()),
            kind: EventKind::Drift.into(),
            knob: Some(key.to_string()),
            old: Some(want.to_string()),
            new: actual.map(str::to_string),
            message: Some(message),
            ..Default::default()
        });
        self.telemetry.observed_changed();
    }
}

/// Whether a drift key names a held file or thread rather than a knob
/// (held labels are absolute paths or start with a word and a blank).
fn is_held_key(key: &str) -> bool {
    key.starts_with('/') || key.contains(' ')
}

/// A held drift as `verify` lists it.
pub(crate) fn held_check(h: HeldDrift) -> crate::control::wire::KnobCheck {
    crate::control::wire::KnobCheck {
        knob: h.label,
        path: h.path.map(|p| p.display().to_string()).unwrap_or_default(),
        expected: h.want,
        actual: h.actual,
        drift: true,
        last_writer: None,
        skipped: None,
    }
}
