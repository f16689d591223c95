//! Knob writes off the event loop, so the loop never blocks on the kernel.
//!
//! Lowering `memory.high`/`memory.max` makes the kernel reclaim inside the
//! `write(2)` — seconds under a hog, unbounded in the worst case — and
//! `compact_memory` compacts inside its write. None of that may stall the
//! loop that takes PSI wakes, runs hooks and pings the watchdog. So every
//! write is queued to a *lane*: one writer thread per group, one for the
//! system knobs (sysctls, cpufreq, zram) and one for `compact_memory`,
//! started on first use. A lane writes in order; a newer value queued for a
//! file replaces an older one still waiting (the knob ends at the newest
//! value either way), so a blocked lane holds only the latest intent. One
//! blocked lane never holds up another group.
//!
//! Each write has a deadline. The loop (not the blocked thread) notices a
//! write past it — [`Lanes::next_check`] is one of its wake-up times while a
//! write is outstanding — and warns once with knob, path, value and elapsed
//! time; the loop goes on. Every finished write comes back to the loop as a
//! [`Done`] on an unbounded channel (a lane never waits for the loop), where
//! it is logged (the write's one record) and counted ([`Counters`]). Until
//! its [`Done`] is taken, the file's newest write is *awaited*
//! ([`Lanes::awaited`]): a reply that
//! stands for a write (a boost's) waits for that sequence number, or a
//! later one for the same file (the newer value that replaced it).
//!
//! The originals journal stays the actuator's rule "journal before the first
//! write, synced": the lane that is about to write a file records its
//! original first, under the journal's mutex, and only then writes. A file
//! belongs to one lane, so "first write" cannot race between lanes; the
//! mutex only serializes the appends. The mutex is never held across a knob
//! write.
//!
//! The write itself goes through a [`WriteFn`] (normally [`Root::write`]):
//! the seam through which tests make a write block or fail.
//!
//! Shutdown ([`Lanes::drain`]): queued writes get a grace period; a lane
//! still blocked then is reported and abandoned (its thread is detached; the
//! process exits anyway).

use crate::converge::journal::{Entry, Journal};
use crate::kernel::Root;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How a lane writes one file. Errors name the path (a `kernel::Error`).
pub(crate) type WriteFn = Arc<dyn Fn(&Path, &str) -> crate::kernel::Result<()> + Send + Sync>;

/// The journal as lanes share it.
pub(crate) type SharedJournal = Arc<Mutex<Journal>>;

/// A knob write past this is reported (it keeps running).
pub(crate) const WRITE_DEADLINE: Duration = Duration::from_secs(1);
/// `compact_memory` compacts all of memory inside the write.
pub(crate) const COMPACT_DEADLINE: Duration = Duration::from_secs(10);
/// Lane threads only journal and write: a small stack is plenty (locked,
/// it is resident in full).
const LANE_STACK: usize = crate::kernel::residency::STACK;

/// Which writer thread a write goes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum LaneKey {
    /// Sysctls, cpufreq, zram.
    System,
    /// `/proc/sys/vm/compact_memory`.
    Compact,
    /// The knobs of one group (by policy name).
    Group(String),
}

impl std::fmt::Display for LaneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaneKey::System => f.write_str("system"),
            LaneKey::Compact => f.write_str("compact"),
            LaneKey::Group(g) => write!(f, "group {g}"),
        }
    }
}

/// One write to make.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// What is written, for the log: the knob, or `compact_memory`.
    pub(crate) label: String,
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    /// Journal the file's original before the first write.
    pub(crate) journal: bool,
    pub(crate) deadline: Duration,
    /// For the log: old value, new value (raw and human, `knobs::human::both`), cause.
    pub(crate) old: String,
    pub(crate) new: String,
    pub(crate) cause: String,
    /// The `write` event this write is, published when it lands (`None`:
    /// compaction, a drift put back — those are logged, not events).
    pub(crate) event: Option<WriteEvent>,
}

/// A knob write's event values, in the kernel form the control socket
/// carries (`Knob::render`).
#[derive(Debug, Clone)]
pub(crate) struct WriteEvent {
    pub(crate) old: Option<String>,
    pub(crate) new: String,
}

/// A finished write, as the loop receives it.
#[derive(Debug)]
pub(crate) struct Done {
    /// The lane that made it.
    pub(crate) lane: LaneKey,
    pub(crate) seq: u64,
    pub(crate) job: Job,
    /// `Err` names path and value.
    pub(crate) result: Result<(), String>,
    pub(crate) elapsed: Duration,
}

impl Done {
    /// How long the write took, in whole microseconds as milliseconds:
    /// three decimals at most in every sink (journald's fields too), never
    /// a binary fraction's tail (`0.6520980000000001`).
    pub(crate) fn elapsed_ms(&self) -> f64 {
        self.elapsed.as_micros() as f64 / 1000.0
    }
}

/// What the lanes did, for logs and status.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Writes the kernel accepted.
    pub(crate) writes: u64,
    /// Writes refused (by the kernel, or not journalled).
    pub(crate) rejected: u64,
    /// Writes that ran past their deadline (counted when noticed).
    pub(crate) late: u64,
    /// Queued writes replaced by a newer value for the same file.
    pub(crate) superseded: u64,
}

/// A lane with work left (see [`Lanes::busy`]).
#[derive(Debug, Clone)]
pub(crate) struct Busy {
    pub(crate) lane: LaneKey,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) queued: usize,
}

/// The write a lane is in.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    pub(crate) label: String,
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    pub(crate) elapsed: Duration,
}

#[derive(Debug)]
struct Flight {
    seq: u64,
    label: String,
    path: PathBuf,
    text: String,
    started: Instant,
    deadline: Duration,
}

#[derive(Debug, Default)]
struct LaneState {
    queue: VecDeque<(u64, Job)>,
    in_flight: Option<Flight>,
    closed: bool,
}

#[derive(Debug, Default)]
struct Lane {
    state: Mutex<LaneState>,
    cv: Condvar,
}

impl Lane {
    fn lock(&self) -> MutexGuard<'_, LaneState> {
        // Every update leaves the state consistent: a panicked holder is harmless.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What every lane thread shares.
struct Ctx {
    root: Root,
    journal: Option<SharedJournal>,
    write: WriteFn,
    done: mpsc::UnboundedSender<Done>,
}

impl Ctx {
    /// Journals (if asked) and writes one job.
    fn execute(&self, job: &Job) -> Result<(), String> {
        if job.journal {
            if let Some(j) = &self.journal {
                let mut j = lock_journal(j);
                journal_original(&self.root, &mut j, &job.path).map_err(|reason| {
                    format!(
                        "write {} {:?} not made: {reason}",
                        job.path.display(),
                        job.text
                    )
                })?;
            }
        }
        (self.write)(&job.path, &job.text)
            .map_err(|e| format!("write {} {:?} rejected: {e}", job.path.display(), job.text))
    }
}

/// Locks the shared journal (a panicked holder left it consistent: each
/// record is appended and synced before the in-memory index changes).
pub(crate) fn lock_journal(j: &SharedJournal) -> MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|p| p.into_inner())
}

/// Journals a file's original before its first write. Write-only or absent
/// files have nothing to restore and are written as they are.
fn journal_original(root: &Root, journal: &mut Journal, path: &Path) -> Result<(), String> {
    if journal.has_file(path) {
        return Ok(());
    }
    let entry = match root.read(path) {
        Ok(content) => Entry::File {
            path: path.to_path_buf(),
            content,
        },
        Err(e) if e.is_not_found() => Entry::Absent {
            path: path.to_path_buf(),
        },
        Err(e) => {
            return Err(format!(
                "cannot read the original of {}: {e}",
                path.display()
            ))
        }
    };
    journal
        .record(entry)
        .map_err(|e| format!("cannot journal the original of {}: {e}", path.display()))
}

fn run_lane(key: LaneKey, lane: Arc<Lane>, ctx: Arc<Ctx>) {
    loop {
        let (seq, job) = {
            let mut s = lane.lock();
            loop {
                if let Some((seq, job)) = s.queue.pop_front() {
                    s.in_flight = Some(Flight {
                        seq,
                        label: job.label.clone(),
                        path: job.path.clone(),
                        text: job.text.clone(),
                        started: Instant::now(),
                        deadline: job.deadline,
                    });
                    break (seq, job);
                }
                if s.closed {
                    return;
                }
                s = lane.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        };
        let start = Instant::now();
        let result = ctx.execute(&job);
        let elapsed = start.elapsed();
        lane.lock().in_flight = None;
        let done = Done {
            lane: key.clone(),
            seq,
            job,
            result,
            elapsed,
        };
        if ctx.done.send(done).is_err() {
            return; // the loop is gone
        }
    }
}

/// The writer lanes, owned by the event loop.
pub(crate) struct Lanes {
    ctx: Arc<Ctx>,
    lanes: BTreeMap<LaneKey, Arc<Lane>>,
    seq: u64,
    /// In-flight writes already reported late, by sequence number.
    reported_late: HashSet<u64>,
    /// Each file's newest write whose completion the loop has not taken.
    awaited: HashMap<PathBuf, u64>,
    pub(crate) counters: Counters,
}

impl Lanes {
    /// Lanes writing through `write`; completions go to the returned receiver.
    pub(crate) fn new(
        root: Root,
        journal: Option<SharedJournal>,
        write: WriteFn,
    ) -> (Lanes, mpsc::UnboundedReceiver<Done>) {
        let (done, rx) = mpsc::unbounded_channel();
        let ctx = Arc::new(Ctx {
            root,
            journal,
            write,
            done,
        });
        (
            Lanes {
                ctx,
                lanes: BTreeMap::new(),
                seq: 0,
                reported_late: HashSet::new(),
                awaited: HashMap::new(),
                counters: Counters::default(),
            },
            rx,
        )
    }

    /// Queues a write on `key`'s lane (started on first use). A write still
    /// queued there for the same file is replaced by this one. Returns the
    /// write's sequence number (its [`Done`] carries it).
    pub(crate) fn submit(&mut self, key: LaneKey, job: Job) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        self.awaited.insert(job.path.clone(), seq);
        let lane = match self.lane(&key) {
            Some(l) => l,
            None => {
                // No thread for this lane: write here rather than not at all.
                let start = Instant::now();
                let result = self.ctx.execute(&job);
                let elapsed = start.elapsed();
                let _ = self.ctx.done.send(Done {
                    lane: key,
                    seq,
                    job,
                    result,
                    elapsed,
                });
                return seq;
            }
        };
        let mut s = lane.lock();
        if let Some(i) = s.queue.iter().position(|(_, j)| j.path == job.path) {
            if let Some((_, old)) = s.queue.remove(i) {
                self.counters.superseded += 1;
                tracing::debug!(lane = %key, path = %old.path.display(), old = %old.text, new = %job.text, "queued write superseded by a newer value");
            }
        }
        s.queue.push_back((seq, job));
        drop(s);
        lane.cv.notify_one();
        seq
    }

    /// The sequence number of `path`'s newest write whose completion the
    /// loop has not taken yet (queued, in flight, or done and on its way);
    /// `None` when every write to it has come back.
    pub(crate) fn awaited(&self, path: &Path) -> Option<u64> {
        self.awaited.get(path).copied()
    }

    fn lane(&mut self, key: &LaneKey) -> Option<Arc<Lane>> {
        if let Some(l) = self.lanes.get(key) {
            return Some(l.clone());
        }
        let lane = Arc::new(Lane::default());
        let (l, c, k) = (lane.clone(), self.ctx.clone(), key.clone());
        let name = match key {
            LaneKey::System => "cgw-w-system".to_string(),
            LaneKey::Compact => "cgw-w-compact".to_string(),
            // The kernel keeps 15 bytes of a thread name; std refuses a NUL.
            LaneKey::Group(g) => format!(
                "cgw-w-{}",
                g.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .take(9)
                    .collect::<String>()
            ),
        };
        match std::thread::Builder::new()
            .name(name)
            .stack_size(LANE_STACK)
            .spawn(move || run_lane(k, l, c))
        {
            Ok(_detached) => {
                self.lanes.insert(key.clone(), lane.clone());
                Some(lane)
            }
            Err(e) => {
                tracing::error!(lane = %key, "cannot start a writer thread ({e}); writing on the event loop");
                None
            }
        }
    }

    /// Writes queued or in flight, over all lanes.
    pub(crate) fn outstanding(&self) -> usize {
        self.lanes
            .values()
            .map(|l| {
                let s = l.lock();
                s.queue.len() + usize::from(s.in_flight.is_some())
            })
            .sum()
    }

    /// The knobs (labels) with a write queued or in flight: until it is
    /// made, the file may still hold the old value (`verify`, `health`).
    pub(crate) fn pending(&self) -> std::collections::HashSet<String> {
        let mut out = std::collections::HashSet::new();
        for l in self.lanes.values() {
            let s = l.lock();
            out.extend(s.queue.iter().map(|(_, j)| j.label.clone()));
            out.extend(s.in_flight.as_ref().map(|f| f.label.clone()));
        }
        out
    }

    /// Takes a completion: counts it and forgets its late report. Returns
    /// whether the write was late (reported while in flight, or past its
    /// deadline when it finished: then it is counted here). The caller logs.
    pub(crate) fn finished(&mut self, done: &Done) -> bool {
        if self
            .awaited
            .get(&done.job.path)
            .is_some_and(|&s| s <= done.seq)
        {
            self.awaited.remove(&done.job.path);
        }
        match done.result {
            Ok(()) => self.counters.writes += 1,
            Err(_) => self.counters.rejected += 1,
        }
        if self.reported_late.remove(&done.seq) {
            return true;
        }
        if done.elapsed >= done.job.deadline {
            self.counters.late += 1;
            return true;
        }
        false
    }

    /// Reports (once each) writes in flight past their deadline.
    pub(crate) fn check_late(&mut self, now: Instant) {
        for (key, lane) in &self.lanes {
            let s = lane.lock();
            let Some(f) = &s.in_flight else { continue };
            let elapsed = now.saturating_duration_since(f.started);
            if elapsed >= f.deadline && self.reported_late.insert(f.seq) {
                self.counters.late += 1;
                tracing::warn!(
                    lane = %key,
                    knob = %f.label,
                    path = %f.path.display(),
                    value = %f.text,
                    elapsed_ms = elapsed.as_millis() as u64,
                    queued = s.queue.len(),
                    "write past its {:?} deadline; the kernel is still in it (the event loop goes on)",
                    f.deadline
                );
            }
        }
    }

    /// When the loop should next look for late writes (`None`: nothing is
    /// outstanding, or every late write was reported).
    pub(crate) fn next_check(&self, now: Instant) -> Option<Instant> {
        self.lanes
            .values()
            .filter_map(|l| {
                let s = l.lock();
                match &s.in_flight {
                    Some(f) if !self.reported_late.contains(&f.seq) => Some(f.started + f.deadline),
                    Some(_) => None,
                    // Queued, not started yet: look again soon.
                    None if !s.queue.is_empty() => Some(now + WRITE_DEADLINE / 4),
                    None => None,
                }
            })
            .min()
    }

    /// Lanes still busy (something queued or in flight).
    pub(crate) fn busy(&self, now: Instant) -> Vec<Busy> {
        self.lanes
            .iter()
            .filter_map(|(k, l)| {
                let s = l.lock();
                if s.in_flight.is_none() && s.queue.is_empty() {
                    return None;
                }
                Some(Busy {
                    lane: k.clone(),
                    in_flight: s.in_flight.as_ref().map(|f| InFlight {
                        label: f.label.clone(),
                        path: f.path.clone(),
                        text: f.text.clone(),
                        elapsed: now.saturating_duration_since(f.started),
                    }),
                    queued: s.queue.len(),
                })
            })
            .collect()
    }

    /// Tells every lane to end once its queue is empty (a blocked one ends
    /// when its write returns; nobody waits for it).
    pub(crate) fn close(&self) {
        for l in self.lanes.values() {
            l.lock().closed = true;
            l.cv.notify_all();
        }
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        self.close();
    }
}
