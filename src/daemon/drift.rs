//! `settings.drift` (issue 24, SPEC §6 "Coexistence"): every `interval`,
//! every managed knob is compared with its effective value. The engine
//! side (which knobs, which file, what text is wanted) is taken on the
//! event loop — no I/O but a governor list's resolution; the reads run on a
//! blocking thread, off the loop, and the result comes back to it. A
//! drift is logged, sent as a `drift` event (recorder, `cgwarden events`),
//! counted in `cgwarden_drift_total{knob}`, and with `on_drift: restore`
//! the effective value is written back through the actuator — whose journal
//! already holds the file's original, so the journal is untouched.
//!
//! Cost per interval: one small read per managed knob (a few dozen on the
//! shipped policies; the check logs its count and time at debug level).
//! A knob whose write is still on its lane can read as drifted once; with
//! `restore` that rewrites the same value.

use super::Daemon;
use crate::engine::knobs::{Cause, Write};
use crate::knobs::{Knob, KnobValue};
use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::mpsc;

/// One knob found drifted.
#[derive(Debug)]
pub(crate) struct Drifted {
    knob: Knob,
    path: PathBuf,
    want: KnobValue,
    actual: Option<KnobValue>,
}

/// One finished check: the drifted knobs, how many were read, how long.
#[derive(Debug)]
pub(crate) struct DriftReport {
    drifted: Vec<Drifted>,
    checked: usize,
    micros: u128,
}

impl Daemon {
    /// Starts a check unless one is running.
    pub(crate) fn start_drift_check(&mut self, tx: &mpsc::UnboundedSender<DriftReport>) {
        if self.drift_busy {
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
        let root = self.opts.root.clone();
        let tx = tx.clone();
        self.drift_busy = true;
        tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let checked = checks.len();
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
            let _ = tx.send(DriftReport {
                drifted,
                checked,
                micros: t0.elapsed().as_micros(),
            });
        });
    }

    /// A check's result, on the loop.
    pub(crate) fn on_drift(&mut self, r: DriftReport) {
        self.drift_busy = false;
        tracing::debug!(knobs = r.checked, micros = r.micros as u64, "drift check");
        let restore = self
            .policy
            .settings
            .drift
            .as_ref()
            .is_some_and(|d| d.restore);
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
            tracing::warn!(knob = %d.knob, path = %d.path.display(), expected = %want, actual = %actual, restore, "drift: written behind cgwarden's back");
            *self.drifts.entry(d.knob.to_string()).or_insert(0) += 1;
            self.control.publish(|| crate::control::wire::Event {
                time: crate::show::rfc3339_millis(std::time::SystemTime::now()),
                kind: "drift".into(),
                knob: Some(d.knob.to_string()),
                old: Some(want.clone()),
                new: Some(actual.clone()),
                message: Some(format!("{} holds {actual} instead", d.path.display())),
                ..Default::default()
            });
            self.observed_changed();
            if restore {
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
    }
}
