//! Carries out the engine's knob writes through the kernel layer: maps a
//! knob to its file and text ([`KnobFiles`], the mapping `apply` uses too)
//! in the write order `apply` follows ([`order_writes`]), writes only what
//! the engine reports as changed, logs
//! every write with its cause, old and new value, and reports a write the
//! kernel rejects once per path and value (it is retried only when the
//! effective value changes again). `--dry-run` logs the same lines and
//! writes nothing.
//!
//! The writes themselves are made off the event loop by the writer lanes
//! ([`super::lanes`]): [`Actuator::apply`] queues and returns at once; the
//! outcome comes back as a [`Done`] the loop hands to [`Actuator::finished`],
//! which logs it (with the time the write took) and counts it. Whether a
//! knob's last write has landed is [`Actuator::landing`]: what a reply that
//! stands for a write (a boost's) waits on.
//!
//! The actuator is the daemon's only writer of knobs, so it also owns their
//! originals: before the first write to any file — a claim, a `then` value,
//! a baseline restored after a crash — the file's content is appended to the
//! originals journal and synced; the lane making the write does it,
//! just before the write. A file whose original cannot be journalled is not
//! written. Files inside groups cgwarden created are journalled too: `reset`
//! removes those groups rather than restoring them, but the daemon needs
//! their originals after a crash (a claimed value left in a created group
//! must not become the baseline).
//!
//! One knob is not a file write: `latency.global` is the CPU latency request
//! the actuator holds open on `/dev/cpu_dma_latency`
//! ([`crate::kernel::pm_qos::CpuLatencyRequest`]) for as long as its
//! effective value is a tolerance, and closes when it returns to none. That
//! write is a non-blocking misc-device write (the kernel updates a priority
//! list), so it is made here, on the loop, not on a lane; it is never
//! journalled (the kernel drops the request with the descriptor, so a crash
//! leaves nothing to restore).

use super::lanes::{self, Done, Job, LaneKey, Lanes, SharedJournal, WriteFn};
use crate::converge::journal::{Entry, Journal};
use crate::engine::knobs::Write;
use crate::engine::supervisor::Effect;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::knob_files::KnobFiles;
use crate::kernel::pm_qos::{self, CpuLatencyRequest};
use crate::kernel::Root;
use crate::knobs::order::{write_order, Planned};
use crate::knobs::sysctl;
use crate::knobs::{Knob, KnobValue};
use crate::policy::model::Policy;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What happened to one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Handed to its lane; the result comes back as a [`Done`].
    Queued,
    DryRun,
    /// The knob cannot be written at runtime or maps to nothing.
    Unsupported(String),
    /// A held request (`latency.global`) was set or closed at once.
    Held,
}

/// Where a knob's last write stands, as the loop knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Landing {
    /// Nothing outstanding: the last write landed (or none was needed).
    Settled,
    /// A write to `path` is outstanding: its completion (sequence `seq`, or
    /// a later one for the same file) is still to come back.
    Pending { path: PathBuf, seq: u64 },
    /// The last write could not be made at all (no file for the value, the
    /// held request refused).
    Refused(String),
}

pub(crate) struct Actuator {
    root: Root,
    cg: CgroupFs,
    /// Group name → path below the cgroup root.
    groups: HashMap<String, String>,
    dry_run: bool,
    rejected: HashSet<(PathBuf, String)>,
    /// The originals journal; `None` in a dry run (nothing is written).
    journal: Option<SharedJournal>,
    lanes: Lanes,
    /// Completions, until the loop takes the receiver.
    completions: Option<mpsc::UnboundedReceiver<Done>>,
    /// Deadline of a knob write ([`lanes::WRITE_DEADLINE`]; tests shorten it).
    deadline: Duration,
    /// The `latency.global` request, held while its value is a tolerance.
    latency: CpuLatencyRequest,
    /// Policy → the governor last queued for it: its tunables are written
    /// into that governor's directory, though the governor's own write may
    /// still be on the lane.
    governors: HashMap<String, String>,
    /// Knobs whose last write was refused before reaching a lane, and why.
    unwritable: HashMap<Knob, String>,
}

impl Actuator {
    pub(crate) fn new(root: Root, policy: &Policy, journal: Option<Journal>) -> Self {
        let r = root.clone();
        let write: WriteFn = Arc::new(move |p, v| r.write(p, v));
        Self::with_writer(root, policy, journal, write)
    }

    /// An actuator whose lanes write through `write` (the test seam: a
    /// write that blocks or fails).
    pub(crate) fn with_writer(
        root: Root,
        policy: &Policy,
        journal: Option<Journal>,
        write: WriteFn,
    ) -> Self {
        let dry_run = journal.is_none();
        let journal = journal.map(|j| Arc::new(Mutex::new(j)));
        let (lanes, rx) = Lanes::new(root.clone(), journal.clone(), write);
        Actuator {
            cg: CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone()),
            root: root.clone(),
            groups: group_paths(policy),
            dry_run,
            rejected: HashSet::new(),
            journal,
            lanes,
            completions: Some(rx),
            deadline: lanes::WRITE_DEADLINE,
            latency: CpuLatencyRequest::new(root.clone()),
            governors: HashMap::new(),
            unwritable: HashMap::new(),
        }
    }

    /// A reload: knobs of the new policy's groups resolve from now on. The
    /// groups it no longer has keep resolving (their directories stay; a
    /// released boost writes their baseline back).
    pub(crate) fn add_groups(&mut self, policy: &Policy) {
        self.groups.extend(group_paths(policy));
    }

    /// The journal the lanes write, for other writers of the daemon (the
    /// IRQ watcher); `None` in a dry run.
    pub(crate) fn shared_journal(&self) -> Option<SharedJournal> {
        self.journal.clone()
    }

    /// Sets the deadline of knob writes (tests).
    #[cfg(test)]
    pub(crate) fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The receiver of finished writes, for the event loop (once).
    pub(crate) fn take_completions(&mut self) -> Option<mpsc::UnboundedReceiver<Done>> {
        self.completions.take()
    }

    /// Records an entry in the originals journal (a group a repair creates).
    /// No journal (dry run): nothing to do.
    pub(crate) fn record(&self, e: Entry) -> crate::kernel::Result<()> {
        match &self.journal {
            Some(j) => lanes::lock_journal(j).record(e),
            None => Ok(()),
        }
    }

    /// Where this daemon's knobs live ([`KnobFiles`]: the one mapping
    /// `apply` uses too), tunables under the governors queued.
    fn files(&self) -> KnobFiles<'_> {
        KnobFiles {
            root: &self.root,
            cg: &self.cg,
            groups: &self.groups,
            governors: &self.governors,
        }
    }

    /// The file a knob lives in and the text to write for `value`.
    pub(crate) fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
    ) -> Result<(PathBuf, String), String> {
        self.files().target(knob, value)
    }

    /// Reads a knob's current value from the kernel, in the kernel's
    /// rendering (for `raise`/`lower` of a knob with no baseline).
    pub(crate) fn read(&self, knob: &Knob) -> Option<KnobValue> {
        if knob.held_by_daemon() {
            // What this daemon's request holds (the device reads the
            // aggregate of every process's requests).
            return Some(KnobValue::Latency(self.latency.held()));
        }
        self.files().read(knob)
    }

    /// Where `verify` reads the knob: its file, or `/proc/swaps` for a zram
    /// swap priority.
    pub(crate) fn read_path(&self, knob: &Knob) -> PathBuf {
        self.files().read_path(knob)
    }

    /// Why the knob cannot be read back on this root, if it cannot: a zram
    /// swap priority on a fake root, where `apply` skips `swapon` (so `verify`
    /// does not call it drift).
    pub(crate) fn unverifiable(&self, knob: &Knob) -> Option<&'static str> {
        if self.root.supports(crate::kernel::Op::Swap) {
            return None;
        }
        knob.family().unverifiable_without_swap(knob)
    }

    /// What the knob held before cgwarden first wrote it, from the journal:
    /// the baseline of a knob the policy leaves alone (never the live value a
    /// crashed predecessor may have left behind).
    pub(crate) fn original(&self, knob: &Knob) -> Option<KnobValue> {
        if knob.held_by_daemon() {
            return None;
        }
        let path = self.files().path(knob).ok()?;
        let j = lanes::lock_journal(self.journal.as_ref()?);
        let original = j.original(&path)?;
        knob.parse_kernel(original).ok()
    }

    /// Queues one write on its lane (the group's, or the system knobs').
    pub(crate) fn apply(&mut self, w: &Write) -> Outcome {
        let outcome = self.make(w);
        match &outcome {
            Outcome::Unsupported(why) => {
                self.unwritable.insert(w.knob.clone(), why.clone());
            }
            _ => {
                self.unwritable.remove(&w.knob);
            }
        }
        outcome
    }

    /// Where `knob`'s last write stands (module docs).
    pub(crate) fn landing(&self, knob: &Knob) -> Landing {
        let pending = if knob.held_by_daemon() {
            None
        } else {
            self.files()
                .path(knob)
                .ok()
                .and_then(|p| self.lanes.awaited(&p).map(|seq| (p, seq)))
        };
        match (pending, self.unwritable.get(knob)) {
            (Some((path, seq)), _) => Landing::Pending { path, seq },
            (None, Some(why)) => Landing::Refused(why.clone()),
            (None, None) => Landing::Settled,
        }
    }

    /// How long a knob write may take before it is late.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    fn make(&mut self, w: &Write) -> Outcome {
        let (path, text) = match self.target(&w.knob, &w.new) {
            Ok(t) => t,
            Err(reason) => {
                tracing::warn!(knob = %w.knob, cause = %w.cause, "{reason}");
                return Outcome::Unsupported(reason);
            }
        };
        // Logs say the raw value and the human one (knobs::human).
        let old = w
            .old
            .as_ref()
            .map(|v| crate::knobs::human::both(&w.knob, v))
            .unwrap_or_else(|| "-".into());
        let new = crate::knobs::human::both(&w.knob, &w.new);
        if self.dry_run {
            tracing::info!(knob = %w.knob, path = %path.display(), old = %old, new = %new, cause = %w.cause, "would write (dry run)");
            return Outcome::DryRun;
        }
        if w.knob.held_by_daemon() {
            return self.hold_latency(w, &old, &new);
        }
        if let Some(policy) = w.knob.family().switches_governor(&w.knob) {
            self.governors.insert(policy.to_string(), text.clone());
        }
        let drift = matches!(w.cause, crate::engine::knobs::Cause::Drift);
        let lane = match w.knob.group() {
            Some(group) => LaneKey::Group(group.to_string()),
            None => LaneKey::System,
        };
        self.lanes.submit(
            lane,
            Job {
                label: w.knob.to_string(),
                path,
                text,
                // A drift put back leaves the journal untouched:
                // the file's original is in it from before, or it lies in a
                // group cgwarden created (reset removes the group).
                journal: !drift,
                deadline: self.deadline,
                old,
                new,
                cause: w.cause.to_string(),
                event: (!drift).then(|| lanes::WriteEvent {
                    old: w.old.as_ref().map(|v| w.knob.render(v)),
                    new: w.knob.render(&w.new),
                }),
            },
        );
        Outcome::Queued
    }

    /// Holds, changes or closes the `latency.global` request (module docs).
    fn hold_latency(&mut self, w: &Write, old: &str, new: &str) -> Outcome {
        let KnobValue::Latency(us) = w.new else {
            let why = format!("`{}` is not a latency", w.new);
            tracing::warn!(knob = %w.knob, cause = %w.cause, "{why}");
            return Outcome::Unsupported(why);
        };
        let path = pm_qos::CPU_DMA_LATENCY;
        match self.latency.set(us) {
            Ok(()) => {
                match us {
                    Some(_) => {
                        tracing::info!(knob = %w.knob, path, old = %old, new = %new, cause = %w.cause, "write (request held open)")
                    }
                    None => {
                        tracing::info!(knob = %w.knob, path, old = %old, new = %new, cause = %w.cause, "write (request closed)")
                    }
                }
                Outcome::Held
            }
            Err(e) => {
                tracing::error!(knob = %w.knob, cause = %w.cause, value = %w.new, "{e}");
                Outcome::Unsupported(e.to_string())
            }
        }
    }

    /// Queues a write of 1 to /proc/sys/vm/compact_memory (its own lane:
    /// compaction runs inside the write).
    pub(crate) fn compact_memory(&mut self, rule: &str) -> Outcome {
        let path = PathBuf::from(sysctl::COMPACT_MEMORY);
        if self.dry_run {
            tracing::info!(rule, path = %path.display(), "would compact memory (dry run)");
            return Outcome::DryRun;
        }
        self.lanes.submit(
            LaneKey::Compact,
            Job {
                label: "compact_memory".into(),
                path,
                text: "1".into(),
                journal: false,
                deadline: lanes::COMPACT_DEADLINE,
                old: "-".into(),
                new: "1".into(),
                cause: format!("rule {rule}"),
                event: None,
            },
        );
        Outcome::Queued
    }

    /// Logs and counts a finished write.
    pub(crate) fn finished(&mut self, d: Done) {
        let was_late = self.lanes.finished(&d);
        let elapsed_ms = d.elapsed_ms();
        let j = &d.job;
        match &d.result {
            Ok(()) => {
                self.rejected.retain(|(p, _)| p != &j.path);
                if was_late {
                    tracing::warn!(knob = %j.label, path = %j.path.display(), value = %j.text, elapsed_ms, "late write finished");
                }
                if j.event.is_some() {
                    // Logged once, as the `write` event's record, which
                    // the control plane published for this completion.
                } else if d.lane != LaneKey::Compact {
                    // A drift put back.
                    tracing::info!(knob = %j.label, path = %j.path.display(), old = %j.old, new = %j.new, cause = %j.cause, elapsed_ms, "write");
                } else {
                    tracing::info!(path = %j.path.display(), cause = %j.cause, elapsed_ms, "compact memory");
                }
            }
            Err(msg) => {
                if self.rejected.insert((j.path.clone(), j.text.clone())) || was_late {
                    tracing::error!(knob = %j.label, cause = %j.cause, elapsed_ms, "{msg}");
                }
            }
        }
    }

    /// Reports writes past their deadline (call when [`next_check`](Self::next_check) is due).
    pub(crate) fn check_late(&mut self, now: Instant) {
        self.lanes.check_late(now);
    }

    /// The knobs with a write queued or in flight (see [`Lanes::pending`]).
    pub(crate) fn pending(&self) -> std::collections::HashSet<String> {
        self.lanes.pending()
    }

    /// When the loop should look for late writes again.
    pub(crate) fn next_check(&self, now: Instant) -> Option<Instant> {
        self.lanes.next_check(now)
    }

    /// Writes made, refused, late, superseded, and outstanding now.
    pub(crate) fn counters(&self) -> (lanes::Counters, usize) {
        (self.lanes.counters, self.lanes.outstanding())
    }

    /// Waits up to `grace` for every queued write (the stop's releases),
    /// taking completions from `rx`; then reports what is still blocked and
    /// lets the lanes go. Returns how many writes were left unfinished.
    pub(crate) async fn drain(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<Done>,
        grace: Duration,
    ) -> usize {
        let until = tokio::time::Instant::now() + grace;
        while self.lanes.outstanding() > 0 {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(d)) => self.finished(d),
                Ok(None) | Err(_) => break,
            }
        }
        // Completions that raced the last check.
        while let Ok(d) = rx.try_recv() {
            self.finished(d);
        }
        let now = Instant::now();
        let mut left = 0;
        for b in self.lanes.busy(now) {
            left += b.queued + usize::from(b.in_flight.is_some());
            match b.in_flight {
                Some(f) => tracing::error!(
                    lane = %b.lane,
                    knob = %f.label,
                    path = %f.path.display(),
                    value = %f.text,
                    elapsed_ms = f.elapsed.as_millis() as u64,
                    queued = b.queued,
                    "write still blocked in the kernel after the {grace:?} grace period; exiting anyway"
                ),
                None => {
                    tracing::error!(lane = %b.lane, queued = b.queued, "writes not made within the {grace:?} grace period; exiting anyway")
                }
            }
        }
        self.lanes.close();
        left
    }
}

/// Puts the writes of knobs that depend on each other (one cpufreq
/// policy's or devfreq device's min and max, one group's knobs) in the
/// order the kernel accepts: [`crate::knobs::order::write_order`], the rule
/// `apply` follows too, judged against the values last written. Other
/// effects keep their places.
pub(crate) fn order_writes(effects: &mut Vec<Effect>) {
    let slots: Vec<usize> = (0..effects.len())
        .filter(|&i| matches!(effects[i], Effect::Write(_)))
        .collect();
    let order = {
        let planned: Vec<Planned> = slots
            .iter()
            .filter_map(|&i| match &effects[i] {
                Effect::Write(w) => Some(Planned {
                    knob: &w.knob,
                    new: &w.new,
                    now: w.old.as_ref(),
                }),
                _ => None,
            })
            .collect();
        write_order(&planned)
    };
    // Slot i takes the effect that was at `from[i]`.
    let mut from: Vec<usize> = (0..effects.len()).collect();
    for (&slot, k) in slots.iter().zip(order) {
        from[slot] = slots[k];
    }
    let mut old: Vec<Option<Effect>> = std::mem::take(effects).into_iter().map(Some).collect();
    effects.extend(from.into_iter().filter_map(|i| old[i].take()));
}

/// Group name → path below the cgroup root, for every group in the policy.
pub fn group_paths(policy: &Policy) -> HashMap<String, String> {
    policy.group_paths()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::knobs::Cause;
    use crate::knobs::CpufreqAttr;
    use crate::units::Frequency;
    use lanes::LaneKey;

    fn w(attr: CpufreqAttr, old: u64, new: u64) -> Effect {
        Effect::Write(Write {
            knob: Knob::Cpufreq {
                policy: "policy4".into(),
                attr,
            },
            old: Some(KnobValue::Frequency(Frequency { khz: old })),
            new: KnobValue::Frequency(Frequency { khz: new }),
            cause: Cause::Baseline,
        })
    }

    fn attrs(e: &[Effect]) -> Vec<CpufreqAttr> {
        e.iter()
            .filter_map(|e| match e {
                Effect::Write(Write {
                    knob: Knob::Cpufreq { attr, .. },
                    ..
                }) => Some(*attr),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ceiling_goes_up_before_a_floor_above_it() {
        let mut e = vec![
            w(CpufreqAttr::Min, 300_000, 2_000_000),
            w(CpufreqAttr::Max, 1_500_000, 2_400_000),
        ];
        order_writes(&mut e);
        assert_eq!(attrs(&e), vec![CpufreqAttr::Max, CpufreqAttr::Min]);
    }

    #[test]
    fn floor_comes_down_before_a_lower_ceiling() {
        let mut e = vec![
            w(CpufreqAttr::Min, 1_800_000, 300_000),
            w(CpufreqAttr::Max, 2_400_000, 1_000_000),
        ];
        order_writes(&mut e);
        assert_eq!(attrs(&e), vec![CpufreqAttr::Min, CpufreqAttr::Max]);
    }

    /// The daemon orders a devfreq device's min and max by the same rule,
    /// and leaves other effects in place.
    #[test]
    fn devfreq_ceiling_goes_up_before_a_floor_above_it_and_back() {
        let d = |attr, old: u64, new: u64| {
            Effect::Write(Write {
                knob: Knob::Devfreq {
                    device: "gpu".into(),
                    attr,
                },
                old: Some(KnobValue::Hz(old)),
                new: KnobValue::Hz(new),
                cause: Cause::Baseline,
            })
        };
        let phase = || Effect::CompactMemory { rule: "r".into() };
        let knobs = |e: &[Effect]| -> Vec<String> {
            e.iter()
                .map(|e| match e {
                    Effect::Write(w) => w.knob.to_string(),
                    _ => "other".into(),
                })
                .collect()
        };
        use crate::knobs::DevfreqAttr::{Max, Min};
        let mut up = vec![
            d(Min, 100_000_000, 600_000_000),
            phase(),
            d(Max, 500_000_000, 900_000_000),
        ];
        order_writes(&mut up);
        assert_eq!(knobs(&up), ["devfreq.gpu.max", "other", "devfreq.gpu.min"]);
        let mut down = vec![
            d(Max, 900_000_000, 200_000_000),
            d(Min, 600_000_000, 100_000_000),
            phase(),
        ];
        order_writes(&mut down);
        assert_eq!(
            knobs(&down),
            ["devfreq.gpu.min", "devfreq.gpu.max", "other"]
        );
    }

    /// A group's knobs go in the shared group order (`memory.high` before
    /// `memory.max`), whatever order they come in.
    #[test]
    fn memory_high_goes_before_memory_max() {
        let g = |f: &str| {
            let k = knob("app", f);
            Effect::Write(write(&k, "1048576"))
        };
        let mut e = vec![g("memory.max"), g("memory.high")];
        order_writes(&mut e);
        let files: Vec<String> = e
            .iter()
            .filter_map(|e| match e {
                Effect::Write(w) => Some(w.knob.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(files, ["app.memory.high", "app.memory.max"]);
    }

    /// A writer that blocks writes to files under `blocked` until the gate
    /// opens, and refuses writes of the text "refuse"; others go to the root.
    struct Gate {
        open: Mutex<bool>,
        cv: std::sync::Condvar,
    }

    fn gated_writer(root: Root, blocked: &'static str, gate: Arc<Gate>) -> WriteFn {
        Arc::new(move |p: &std::path::Path, v: &str| {
            if p.to_string_lossy().contains(blocked) {
                let mut open = gate.open.lock().unwrap_or_else(|e| e.into_inner());
                while !*open {
                    open = gate.cv.wait(open).unwrap_or_else(|e| e.into_inner());
                }
            }
            if v == "refuse" {
                return Err(crate::kernel::Error::other(p, "refused by the test"));
            }
            root.write(p, v)
        })
    }

    fn knob(group: &str, file: &str) -> Knob {
        Knob::parse(&format!("{group}.{file}")).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn write(k: &Knob, bytes: &str) -> Write {
        Write {
            knob: k.clone(),
            old: None,
            new: k.parse_kernel(bytes).unwrap(),
            cause: Cause::Baseline,
        }
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<Done>) -> Done {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("no completion within 5 s")
            .expect("channel closed")
    }

    #[tokio::test]
    async fn a_blocked_lane_holds_up_no_other_group_and_is_reported_late() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        for g in ["slow", "fast"] {
            root.mkdir_all(&std::path::Path::new("/sys/fs/cgroup").join(g))
                .unwrap();
            for f in ["memory.high", "memory.max"] {
                root.write(
                    &std::path::Path::new("/sys/fs/cgroup").join(g).join(f),
                    "max",
                )
                .unwrap();
            }
        }
        let policy =
            crate::policy::load_bytes("t.yaml", b"version: 1\ngroups:\n  slow: {}\n  fast: {}\n")
                .unwrap_or_else(|d| panic!("{d}"));
        let journal = Journal::open(
            &root,
            std::path::Path::new("/run/cgw"),
            std::path::Path::new("/sys/fs/cgroup"),
        )
        .unwrap();
        let gate = Arc::new(Gate {
            open: Mutex::new(false),
            cv: std::sync::Condvar::new(),
        });
        let writer = gated_writer(root.clone(), "/slow/", gate.clone());
        let mut a = Actuator::with_writer(root.clone(), &policy, Some(journal), writer)
            .with_deadline(Duration::from_millis(100));
        let mut rx = a.take_completions().unwrap();
        let (slow_high, slow_max) = (knob("slow", "memory.high"), knob("slow", "memory.max"));
        let fast_high = knob("fast", "memory.high");

        let t0 = Instant::now();
        assert_eq!(a.apply(&write(&slow_high, "1048576")), Outcome::Queued);
        assert!(
            t0.elapsed() < Duration::from_millis(50),
            "apply waited for the write"
        );
        a.apply(&write(&slow_max, "4194304"));
        a.apply(&write(&slow_max, "2097152")); // replaces the queued 4 MiB
        a.apply(&write(&fast_high, "8388608"));
        let d = next(&mut rx).await;
        assert_eq!(d.lane, LaneKey::Group("fast".into()));
        assert_eq!(d.result, Ok(()));
        a.finished(d);
        assert_eq!(
            root.read_trimmed(std::path::Path::new("/sys/fs/cgroup/fast/memory.high"))
                .unwrap(),
            "8388608"
        );

        // The slow write passes its deadline: reported once, counted once.
        let check = a.next_check(Instant::now()).expect("a write is in flight");
        tokio::time::sleep_until(tokio::time::Instant::from_std(check)).await;
        a.check_late(Instant::now());
        a.check_late(Instant::now());
        let (c, outstanding) = a.counters();
        assert_eq!((c.writes, c.late, c.superseded, outstanding), (1, 1, 1, 2));
        assert_eq!(
            a.next_check(Instant::now()),
            None,
            "reported: no more checks"
        );

        // A stop with the lane still blocked gives up after the grace period.
        let t1 = Instant::now();
        let left = a.drain(&mut rx, Duration::from_millis(200)).await;
        assert_eq!(left, 2);
        assert!(t1.elapsed() < Duration::from_secs(2));

        // The kernel lets go: the queued writes still land, in order, and
        // each file's original was journalled before its first write.
        *gate.open.lock().unwrap() = true;
        gate.cv.notify_all();
        let d1 = next(&mut rx).await;
        assert_eq!(
            d1.job.path,
            std::path::Path::new("/sys/fs/cgroup/slow/memory.high")
        );
        let d2 = next(&mut rx).await;
        assert_eq!(d2.job.text, "2097152");
        assert!(d1.elapsed >= Duration::from_millis(100), "{:?}", d1.elapsed);
        let j = a.journal.as_ref().unwrap();
        let j = lanes::lock_journal(j);
        for f in ["slow/memory.high", "slow/memory.max", "fast/memory.high"] {
            let p = std::path::Path::new("/sys/fs/cgroup").join(f);
            assert_eq!(j.original(&p).map(str::trim), Some("max"), "{f}");
        }
    }

    #[tokio::test]
    async fn a_refused_write_comes_back_and_is_counted() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        root.mkdir_all(std::path::Path::new("/proc/sys/vm"))
            .unwrap();
        root.write(std::path::Path::new("/proc/sys/vm/swappiness"), "60")
            .unwrap();
        let policy =
            crate::policy::load_bytes("t.yaml", b"version: 1\n").unwrap_or_else(|d| panic!("{d}"));
        let journal = Journal::open(
            &root,
            std::path::Path::new("/run/cgw"),
            std::path::Path::new("/sys/fs/cgroup"),
        )
        .unwrap();
        let r = root.clone();
        let writer: WriteFn = Arc::new(move |p: &std::path::Path, v: &str| {
            if v == "7" {
                Err(crate::kernel::Error::other(p, "refused by the test"))
            } else {
                r.write(p, v)
            }
        });
        let mut a = Actuator::with_writer(root.clone(), &policy, Some(journal), writer);
        let mut rx = a.take_completions().unwrap();
        let k = Knob::Sysctl("vm.swappiness".into());
        a.apply(&write(&k, "7"));
        let d = next(&mut rx).await;
        assert_eq!(d.lane, LaneKey::System);
        let msg = d.result.clone().unwrap_err();
        assert!(
            msg.contains("/proc/sys/vm/swappiness") && msg.contains("\"7\""),
            "{msg}"
        );
        a.finished(d);
        a.apply(&write(&k, "10"));
        a.finished(next(&mut rx).await);
        let (c, outstanding) = a.counters();
        assert_eq!((c.writes, c.rejected, outstanding), (1, 1, 0));
        assert_eq!(
            root.read_trimmed(std::path::Path::new("/proc/sys/vm/swappiness"))
                .unwrap(),
            "10"
        );
        assert_eq!(a.drain(&mut rx, Duration::from_millis(100)).await, 0);
    }

    #[test]
    fn dry_run_queues_nothing() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        let policy =
            crate::policy::load_bytes("t.yaml", b"version: 1\n").unwrap_or_else(|d| panic!("{d}"));
        let mut a = Actuator::new(root.clone(), &policy, None);
        let k = Knob::Sysctl("vm.swappiness".into());
        assert_eq!(a.apply(&write(&k, "7")), Outcome::DryRun);
        assert_eq!(a.compact_memory("r"), Outcome::DryRun);
        assert_eq!(a.counters().1, 0);
        assert!(!root.exists(std::path::Path::new("/proc/sys/vm/swappiness")));
    }
}
