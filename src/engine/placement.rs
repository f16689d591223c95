//! Which group a process belongs in: the placement rules compiled once, then
//! matched against each process (first matching rule wins).
//!
//! Globs are compiled at policy load, user names resolved to uids once, so
//! matching a process allocates nothing per rule.
//!
//! Facts are read in stages: the comm first (one small read; for an exec
//! event the stat, which gives the comm with the start time and threads),
//! and only when some rule can still match it the fields those rules look
//! at (exe, cmdline, uid). Most execs on a board match no rule and cost
//! one read.
//!
//! Processes are placed in batches ([`Placer::place_batch`]):
//! every pending process is identified first, then the moves are made
//! back-to-back, then sched and descendants — under an exec flood one pass
//! places everything pending instead of a round trip per process.
//!
//! A process whose cgroup belongs to a container runtime or another
//! delegated manager is left alone whatever rule matches it ([`foreign`]):
//! not moved, no sched, no attributes; [`Placed::kept`] says why.

use crate::policy::model::{Placement, Sched, UserSpec};
use glob::{MatchOptions, Pattern};

pub(crate) mod foreign;

/// What matching needs to know about a process.
#[derive(Clone, Debug, Default)]
pub struct ProcessFacts<'a> {
    pub comm: &'a str,
    pub exe: Option<&'a str>,
    /// The arguments joined by single spaces.
    pub cmdline: &'a str,
    pub uid: Option<u32>,
}

/// One compiled placement rule.
#[derive(Debug)]
pub struct Matcher {
    comm: Option<Pattern>,
    exe: Option<Pattern>,
    cmdline: Option<Pattern>,
    /// `Some(None)`: a user name that does not exist here, which never matches.
    uid: Option<Option<u32>>,
    pub(crate) group: String,
    pub(crate) sched: Option<Sched>,
    /// An RT `sched` on a match any user can fake (no `exe:`/`user:`):
    /// granted to root's processes only ([`crate::policy::rt_by_name`]).
    pub(crate) rt_by_name: bool,
    /// Index of the rule in the policy, for logs.
    pub index: usize,
    /// The rule's line in the policy file, for people.
    pub(crate) line: u32,
}

/// All placement rules, in policy order.
#[derive(Debug, Default)]
pub struct Placer {
    matchers: Vec<Matcher>,
}

/// The kernel keeps at most 15 bytes of a task's comm.
pub(crate) const COMM_LEN: usize = 15;

// `*` must cross `/` in exe and cmdline globs (`/opt/npu/bin/*` matches a
// nested path too, as a shell user would expect from `case`).
const OPTS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

impl Placer {
    /// Compiles the rules; `resolve_user` maps a user name to its uid.
    /// Patterns were validated at policy load; one that fails here is skipped.
    pub fn new(rules: &[Placement], resolve_user: impl Fn(&str) -> Option<u32>) -> Placer {
        let matchers = rules
            .iter()
            .enumerate()
            .map(|(index, p)| Matcher {
                comm: p.matcher.comm.as_deref().and_then(comm_pattern),
                exe: p.matcher.exe.as_deref().and_then(|s| Pattern::new(s).ok()),
                cmdline: p
                    .matcher
                    .cmdline
                    .as_deref()
                    .and_then(|s| Pattern::new(s).ok()),
                uid: p.matcher.user.as_ref().map(|u| match u {
                    UserSpec::Uid(uid) => Some(*uid),
                    UserSpec::Name(name) => resolve_user(name),
                }),
                group: p.group.clone(),
                sched: p.sched.clone(),
                rt_by_name: crate::policy::rt_by_name(p),
                index,
                line: p.pos.line,
            })
            .collect();
        Placer { matchers }
    }

    /// What else must be read about a process with this comm for the rules
    /// that still can match it; `None` when no rule can (allocates nothing).
    pub fn needs_for(&self, comm: &str) -> Option<FactNeeds> {
        let mut needs: Option<FactNeeds> = None;
        for m in &self.matchers {
            if let Some(c) = &m.comm {
                if !c.matches_with(comm, OPTS) {
                    continue;
                }
            }
            let n = needs.get_or_insert_with(FactNeeds::default);
            n.exe |= m.exe.is_some();
            n.cmdline |= m.cmdline.is_some();
            // The uid decides whether a name-only RT grant is made.
            n.uid |= m.uid.is_some() || m.rt_by_name;
        }
        needs
    }

    /// The first rule matching the process, if any.
    pub fn find(&self, p: &ProcessFacts) -> Option<&Matcher> {
        self.matchers.iter().find(|m| m.matches(p))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }
}

/// A comm pattern longer than the kernel keeps is cut to 15 bytes when it is
/// a plain name (validation already rejects that; this keeps matching sane).
fn comm_pattern(s: &str) -> Option<Pattern> {
    let plain = !s.contains(['*', '?', '[', ']']);
    if plain && s.len() > COMM_LEN {
        let mut cut = COMM_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        return Pattern::new(&Pattern::escape(&s[..cut])).ok();
    }
    Pattern::new(s).ok()
}

impl Matcher {
    pub(crate) fn matches(&self, p: &ProcessFacts) -> bool {
        if let Some(c) = &self.comm {
            if !c.matches_with(p.comm, OPTS) {
                return false;
            }
        }
        if let Some(e) = &self.exe {
            match p.exe {
                Some(exe) if e.matches_with(exe, OPTS) => {}
                _ => return false,
            }
        }
        if let Some(c) = &self.cmdline {
            if !c.matches_with(p.cmdline, OPTS) {
                return false;
            }
        }
        if let Some(want) = self.uid {
            if want.is_none() || want != p.uid {
                return false;
            }
        }
        true
    }
}

// ---- Per-process placement, shared by the exec path and scans ----

/// What placement needs to know about a process, owned (read from /proc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OwnedFacts {
    pub(crate) comm: String,
    pub(crate) exe: Option<String>,
    /// The arguments joined by single spaces.
    pub(crate) cmdline: String,
    pub(crate) uid: Option<u32>,
}

impl OwnedFacts {
    pub(crate) fn as_facts(&self) -> ProcessFacts<'_> {
        ProcessFacts {
            comm: &self.comm,
            exe: self.exe.as_deref(),
            cmdline: &self.cmdline,
            uid: self.uid,
        }
    }
}

/// Which facts beyond the comm a match needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FactNeeds {
    pub exe: bool,
    pub cmdline: bool,
    pub uid: bool,
}

/// Why a kernel operation on a process did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OpError {
    /// The process (or thread) exited: not an error.
    Gone,
    /// The kernel refused; the text names the file or call and the reason.
    Refused(String),
}

/// A process pinned before its facts are read, so the move and the sched
/// change act on that process and not on one that reused its pid.
#[derive(Debug, Default)]
pub(crate) struct Pin {
    /// `/proc/PID/stat` start time; `None` where it cannot be told.
    pub(crate) start: Option<u64>,
    /// A pidfd on it (real kernels from 5.3).
    pub(crate) fd: Option<std::os::fd::OwnedFd>,
    /// Its comm as read right after pinning (`/proc/PID/stat` gives it
    /// with the start time): identifying it reads no second file.
    pub(crate) comm: Option<String>,
    /// Its thread count when pinned: a single-threaded process's children
    /// are its main thread's.
    pub(crate) threads: Option<u32>,
    /// Whether it is a kernel thread, as read when pinned: a match on the
    /// comm alone then needs no other read.
    pub(crate) kernel_thread: Option<bool>,
}

/// The kernel side of placement: the engine decides, these do.
pub(crate) trait PlaceOps {
    /// Pins `pid` (start time, pidfd); `None` when it is gone.
    fn pin(&mut self, pid: i32) -> Option<Pin>;
    /// Whether `pid` is still the pinned process (alive, same start time).
    fn same(&mut self, pid: i32, pin: &Pin) -> bool;
    /// The comm of a process; `None` when it is gone.
    fn comm(&mut self, pid: i32) -> Option<String>;
    /// The facts of a user process: `comm` as read, plus the fields `needs`
    /// asks for (others left empty); `None` when it is gone or a kernel thread.
    fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts>;
    /// The process's cgroup as `/proc/PID/cgroup` shows it (`/a/b`); `None` when gone.
    fn cgroup_of(&mut self, pid: i32) -> Option<String>;
    /// Who other than cgwarden manages `cgroup` (as `/proc/PID/cgroup`
    /// shows it): [`foreign::owner`] with this root's groups and the
    /// kernel's delegation marks. A process there is never moved.
    fn owner_of(&mut self, cgroup: &str) -> Option<foreign::Owner>;
    /// Group `name`'s cgroup as `/proc/PID/cgroup` would show it.
    fn group_cgroup(&self, group: &str) -> Option<String>;
    /// The process's cgroup when it is known without reading (a full
    /// scan's snapshot of the groups' members); `None` otherwise.
    fn known_cgroup(&mut self, _pid: i32) -> Option<String> {
        None
    }
    /// What [`PlaceOps::pin`] reads, without taking the pidfd: one read
    /// that names the process (comm, start time, threads). An exec event's
    /// process is looked at this way first and held ([`PlaceOps::hold`])
    /// only when its comm can match a rule.
    fn look(&mut self, pid: i32) -> Option<Pin> {
        self.pin(pid)
    }
    /// Takes the pidfd on a process [`PlaceOps::look`] read; false when it
    /// is gone by now.
    fn hold(&mut self, _pid: i32, _pin: &mut Pin) -> bool {
        true
    }
    /// Writes `pid` to group `name`'s `cgroup.procs` (the whole process).
    fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError>;
    /// Whether the process already has this scheduling.
    fn sched_is(&mut self, pid: i32, sched: &Sched) -> bool;
    /// Applies `sched` to every thread of `pid`.
    fn set_sched(&mut self, pid: i32, sched: &Sched) -> Result<(), OpError>;
    /// Direct children of `pid` (`/proc/PID/task/*/children`);
    /// `single_threaded`: it had one thread when pinned, whose children
    /// are all of them (a thread started since and forking before the
    /// move is the rescan's).
    fn children(&mut self, pid: i32, single_threaded: bool) -> Vec<i32>;
}

/// What placing one process did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The group of the matching rule; `None`: no rule matched (or gone).
    pub(crate) group: Option<String>,
    /// The matching rule's index in the policy's placement list.
    pub(crate) rule: Option<usize>,
    /// The process was moved (it was elsewhere).
    pub(crate) moved: bool,
    /// Scheduling was applied (it differed).
    pub(crate) sched: bool,
    /// Descendants left behind by the exec race and moved along.
    pub(crate) descendants: Vec<i32>,
    /// Refusals, each naming what was refused and why.
    pub(crate) errors: Vec<String>,
    /// Processes found gone (or their pid reused) between reading their
    /// facts and acting on them: nothing was done to them. Not errors.
    pub(crate) gone: u32,
    /// A rule matched, and the process was left alone: its cgroup belongs
    /// to a container runtime or another delegated manager. `group` and
    /// `rule` are then `None` (nothing of the rule applies).
    pub(crate) kept: Option<Kept>,
}

/// A process a placement matched and placement left where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The rule's index and its line in the policy file.
    pub(crate) rule: usize,
    pub(crate) line: u32,
    /// The rule's group.
    pub(crate) group: String,
    pub(crate) comm: String,
    /// Its cgroup as `/proc/PID/cgroup` shows it.
    pub(crate) cgroup: String,
    pub(crate) owner: foreign::Owner,
}

impl Kept {
    /// `pid 1234 (talker) in /system.slice/docker-….scope: placement at
    /// policy line 12 → realtime matches it, but its cgroup belongs to a
    /// container runtime (docker)`.
    pub(crate) fn describe(&self, pid: i32) -> String {
        format!(
            "pid {pid} ({}) in {}: placement at policy line {} → {} matches it, but its \
             cgroup belongs to {}",
            self.comm,
            self.cgroup,
            self.line,
            self.group,
            self.owner.what()
        )
    }
}

/// What [`Placer::place_cached`] remembers per process: the rule it falls
/// under, keyed by pid, start time and comm, so a rescan neither re-reads
/// nor re-matches a process that did not change. An
/// exec or a rename must [`FactCache::forget`] it (exec keeps the start
/// time; a comm change is also seen by the comm compare).
#[derive(Debug, Default)]
pub(crate) struct FactCache {
    entries: std::collections::HashMap<i32, Cached>,
    /// Exits reach [`FactCache::forget`] (the process-events connector is
    /// live): an entry then still names the process that made it.
    exits_tracked: bool,
}

#[derive(Clone, Debug)]
struct Cached {
    start: u64,
    comm: String,
    rule: Option<usize>,
    uid: Option<u32>,
}

/// Entries kept before the cache starts over (pid_max is 4M; a board has
/// hundreds of processes).
const CACHE_MAX: usize = 65_536;

impl FactCache {
    /// Drops what is known about `pid` (it exec'd or renamed itself).
    pub(crate) fn forget(&mut self, pid: i32) {
        self.entries.remove(&pid);
    }
    /// Whether exits are forgotten as they happen (the process-events
    /// connector is live). Then a scan skips even the comm read of a
    /// process it knows placed (a rescan during a flood would read
    /// a thousand comms). Entries made while exits were not tracked may
    /// name a pid's earlier owner: they go when tracking starts.
    pub(crate) fn track_exits(&mut self, live: bool) {
        if live && !self.exits_tracked {
            self.entries.clear();
        }
        self.exits_tracked = live;
    }
    /// Keeps only the pids for which `keep` is true (after a full scan).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(i32) -> bool) {
        self.entries.retain(|&pid, _| keep(pid));
    }
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// What [`Placer::identify`] found out about a process.
enum Identity {
    /// Gone, or a kernel thread.
    Gone,
    /// No placement rule matches it.
    NoRule,
    /// The first matching rule's index, the comm and the uid (if read).
    Rule(usize, Known),
}

/// What the actions need of the facts (a cache entry keeps just this).
struct Known {
    comm: String,
    uid: Option<u32>,
}

/// A process identified in a batch, waiting for its move.
struct Pending {
    pid: i32,
    pin: Pin,
    idx: usize,
    facts: Known,
    /// Its cgroup when identified, and its rule's group's.
    was: String,
    target: String,
    out: Placed,
    /// Gone (or its pid reused): nothing more is done to it.
    stop: bool,
}

/// The outcome of identifying one process.
enum Prepared {
    /// Nothing to move (no rule, gone, or an error already recorded).
    Done(Placed),
    Pending(Pending),
}

/// How deep and how many descendants are followed after a move.
const MAX_DESCENDANTS: usize = 4096;

impl Placer {
    /// Index of the first rule matching `p`.
    pub(crate) fn find_index(&self, p: &ProcessFacts) -> Option<usize> {
        self.matchers.iter().position(|m| m.matches(p))
    }

    /// Places one process: match → move if not already there → sched on
    /// every thread → descendants that stayed behind in the old group and
    /// match no other rule. A process that exits mid-way is not an error.
    /// Processes in groups cgwarden does not manage are moved only when a
    /// rule matches them (never as someone's descendant unless they are in
    /// the very group the matched parent left).
    pub(crate) fn place(&self, pid: i32, ops: &mut dyn PlaceOps) -> Placed {
        self.place_with(pid, ops, None)
    }

    /// [`Placer::place`], remembering per process which rule it falls under
    /// (see [`FactCache`]).
    #[cfg(test)]
    pub(crate) fn place_cached(
        &self,
        pid: i32,
        ops: &mut dyn PlaceOps,
        cache: &mut FactCache,
    ) -> Placed {
        self.place_with(pid, ops, Some(cache))
    }

    fn place_with(
        &self,
        pid: i32,
        ops: &mut dyn PlaceOps,
        cache: Option<&mut FactCache>,
    ) -> Placed {
        self.place_batch_with(&[pid], ops, cache, false)
            .pop()
            .map(|(_, p)| p)
            .unwrap_or_default()
    }

    /// Places a batch of processes (flood-proof placement): all
    /// are identified first (reading only what the rules need), then every
    /// move is made back-to-back — grouped by rule, while the kernel's
    /// migration lock and caches are warm and before the sched changes and
    /// descendant walks — then sched and descendants. Under an exec flood
    /// this is "place everything pending now", not a round trip per event.
    /// Returns one [`Placed`] per pid that matched a rule or was handled
    /// (order not kept); pids matching nothing may be left out.
    pub(crate) fn place_batch(
        &self,
        pids: &[i32],
        ops: &mut dyn PlaceOps,
        cache: &mut FactCache,
    ) -> Vec<(i32, Placed)> {
        self.place_batch_with(pids, ops, Some(cache), false)
    }

    /// [`Placer::place_batch`] for processes that just exec'd or renamed
    /// (the connector's events): each is looked at with one read that
    /// gives its comm, start time and threads ([`PlaceOps::look`]), and
    /// held by a pidfd only when its comm can match — not a comm read,
    /// then the pin's stat read again (under an exec flood, one procfs
    /// open, read and close more per process). A scan keeps the
    /// comm first: it meets thousands of processes its cache already knows.
    pub(crate) fn place_exec_batch(
        &self,
        pids: &[i32],
        ops: &mut dyn PlaceOps,
        cache: &mut FactCache,
    ) -> Vec<(i32, Placed)> {
        self.place_batch_with(pids, ops, Some(cache), true)
    }

    fn place_batch_with(
        &self,
        pids: &[i32],
        ops: &mut dyn PlaceOps,
        mut cache: Option<&mut FactCache>,
        fresh: bool,
    ) -> Vec<(i32, Placed)> {
        let mut done = Vec::new();
        let mut pending = Vec::new();
        // 1. Identify.
        for &pid in pids {
            match self.prepare(pid, ops, cache.as_deref_mut(), fresh) {
                Prepared::Done(p) => done.push((pid, p)),
                Prepared::Pending(p) => pending.push(p),
            }
        }
        // 2. Moves, back-to-back, one destination after the other.
        pending.sort_by_key(|p| p.idx);
        for p in &mut pending {
            if p.was == p.target {
                continue;
            }
            if !ops.same(p.pid, &p.pin) {
                p.out.gone += 1;
                p.stop = true;
                continue;
            }
            let group = &self.matchers[p.idx].group;
            match ops.move_pid(group, p.pid) {
                Ok(()) => p.out.moved = true,
                Err(OpError::Gone) => p.stop = true,
                Err(OpError::Refused(why)) => p.out.errors.push(format!(
                    "pid {} ({}) into {group}: {why}",
                    p.pid, p.facts.comm
                )),
            }
        }
        // 3. Sched, then the descendants the exec race left behind.
        for mut p in pending {
            if !p.stop {
                self.apply_sched(&mut p, ops);
            }
            if !p.stop && p.out.moved {
                let mut out = std::mem::take(&mut p.out);
                let single = p.pin.threads == Some(1);
                self.move_left_behind(p.pid, single, p.idx, &p.was, &p.target, ops, &mut out);
                p.out = out;
            }
            done.push((p.pid, p.out));
        }
        done
    }

    /// Step 1 of placing `pid`: match, pin, where it is and where it goes.
    fn prepare(
        &self,
        pid: i32,
        ops: &mut dyn PlaceOps,
        cache: Option<&mut FactCache>,
        fresh: bool,
    ) -> Prepared {
        if fresh {
            return self.prepare_fresh(pid, ops, cache);
        }
        let mut out = Placed::default();
        // A scan meets a process placed since its last exec or rename, with
        // no sched to check, in its rule's group: nothing to read.
        if let Some(c) = cache.as_ref().filter(|c| c.exits_tracked) {
            if let Some(g) = self.known_placed(pid, c, ops) {
                out.group = Some(g);
                return Prepared::Done(out);
            }
        }
        // Most execs match no rule by their comm: one read, no pin.
        let comm = match ops.comm(pid) {
            Some(comm) if self.needs_for(&comm).is_some() => comm,
            _ => return Prepared::Done(out),
        };
        // A scan meets every process it placed before: known to the cache
        // by pid and comm, in its rule's group by the scan's snapshot, and
        // without a sched to check, there is nothing to do — no pin, no
        // stat read (a rescan during a flood would pin thousands).
        // Its start time is not checked: a pid reused by a fork in that
        // group stays there whatever it matches, as an unmatched one would.
        if let Some(c) = cache
            .as_ref()
            .filter(|c| c.entries.get(&pid).is_some_and(|e| e.comm == comm))
        {
            if let Some(g) = self.known_placed(pid, c, ops) {
                out.group = Some(g);
                return Prepared::Done(out);
            }
        }
        // Pinned before the facts are read (the comm again too): what is
        // read and what is done below are about this process, whatever
        // happens to its pid.
        let Some(pin) = ops.pin(pid) else {
            return Prepared::Done(out);
        };
        self.prepare_pinned(pid, pin, ops, cache)
    }

    /// [`Placer::prepare`] of a process that just exec'd: looked at (one
    /// read), held only when its comm can match. Its pid cannot have been
    /// reused between the look and the hold: the kernel hands pids out in
    /// turn, so a reuse needs `pid_max` forks in those microseconds.
    fn prepare_fresh(
        &self,
        pid: i32,
        ops: &mut dyn PlaceOps,
        cache: Option<&mut FactCache>,
    ) -> Prepared {
        let Some(mut pin) = ops.look(pid) else {
            return Prepared::Done(Placed::default());
        };
        if pin.comm.is_none() {
            pin.comm = ops.comm(pid);
        }
        let can_match = pin
            .comm
            .as_deref()
            .is_some_and(|c| self.needs_for(c).is_some());
        if !can_match || !ops.hold(pid, &mut pin) {
            return Prepared::Done(Placed::default());
        }
        self.prepare_pinned(pid, pin, ops, cache)
    }

    /// Step 1 once `pid` is pinned: its rule, where it is, where it goes.
    fn prepare_pinned(
        &self,
        pid: i32,
        pin: Pin,
        ops: &mut dyn PlaceOps,
        cache: Option<&mut FactCache>,
    ) -> Prepared {
        let mut out = Placed::default();
        let Identity::Rule(idx, facts) = self.identify(pid, &pin, ops, cache) else {
            return Prepared::Done(out);
        };
        let Some(was) = ops.cgroup_of(pid) else {
            return Prepared::Done(out);
        };
        // A hook run's processes stay in its cgroup until the run ends: its
        // timeout kills that cgroup (`cgroup.kill`), and a process placement
        // took out of it would escape the kill.
        if was
            .split('/')
            .any(|c| c == crate::knobs::group::HOOKS_PARENT)
        {
            return Prepared::Done(out);
        }
        let m = &self.matchers[idx];
        let Some(target) = ops.group_cgroup(&m.group) else {
            out.group = Some(m.group.clone());
            out.rule = Some(idx);
            out.errors.push(format!(
                "pid {pid} ({}): group {} unknown",
                facts.comm, m.group
            ));
            return Prepared::Done(out);
        };
        // A container's (or a delegated manager's) process stays in its
        // cgroup: out of it, the runtime's limits no longer hold and its
        // stop no longer reaches it. Nothing of the rule applies to it.
        if was != target {
            if let Some(owner) = ops.owner_of(&was) {
                out.kept = Some(Kept {
                    rule: idx,
                    line: m.line,
                    group: m.group.clone(),
                    comm: facts.comm,
                    cgroup: was,
                    owner,
                });
                return Prepared::Done(out);
            }
        }
        out.group = Some(m.group.clone());
        out.rule = Some(idx);
        Prepared::Pending(Pending {
            pid,
            pin,
            idx,
            facts,
            was,
            target,
            out,
            stop: false,
        })
    }

    /// `pid`'s group when the cache says its rule needs no sched and the
    /// scan's snapshot shows it in that rule's group.
    fn known_placed(&self, pid: i32, cache: &FactCache, ops: &mut dyn PlaceOps) -> Option<String> {
        let m = &self.matchers[cache.entries.get(&pid)?.rule?];
        if m.sched.is_some() {
            return None;
        }
        let was = ops.known_cgroup(pid)?;
        (ops.group_cgroup(&m.group)? == was).then(|| m.group.clone())
    }

    /// Step 3: the rule's scheduling, unless already in place or not granted.
    fn apply_sched(&self, p: &mut Pending, ops: &mut dyn PlaceOps) {
        let (pid, m) = (p.pid, &self.matchers[p.idx]);
        let Some(s) = &m.sched else {
            return;
        };
        if m.rt_by_name && p.facts.uid != Some(0) {
            // comm and cmdline are the process's to choose: a name-only
            // match does not get an unprivileged process real-time.
            let uid = p.facts.uid.map_or("unknown".to_string(), |u| u.to_string());
            p.out.errors.push(format!(
                "pid {pid} ({}) sched {}: not granted: the match is by name only \
                 (comm/cmdline can be set by any user) and the process's uid is {uid}, \
                 not 0; add exe: or user: to the match",
                p.facts.comm,
                s.policy.as_str()
            ));
        } else if !ops.sched_is(pid, s) {
            if !ops.same(pid, &p.pin) {
                p.out.gone += 1;
                p.stop = true;
                return;
            }
            match ops.set_sched(pid, s) {
                Ok(()) => p.out.sched = true,
                Err(OpError::Gone) => p.stop = true,
                Err(OpError::Refused(why)) => p.out.errors.push(format!(
                    "pid {pid} ({}) sched {}: {why}",
                    p.facts.comm,
                    s.policy.as_str()
                )),
            }
        }
    }

    /// Which rule `pid` falls under, reading past the comm only when some
    /// rule can still match; from the cache when the process (pid, start
    /// time, comm) is known there.
    fn identify(
        &self,
        pid: i32,
        pin: &Pin,
        ops: &mut dyn PlaceOps,
        cache: Option<&mut FactCache>,
    ) -> Identity {
        let comm = match &pin.comm {
            Some(c) => c.clone(),
            None => match ops.comm(pid) {
                Some(c) => c,
                None => return Identity::Gone,
            },
        };
        // Only a process with a known start time can be told from its
        // pid's next owner, so only those are cached.
        let cache = cache.filter(|_| pin.start.is_some());
        let start = pin.start.unwrap_or_default();
        if let Some(c) = cache.as_ref().and_then(|c| c.entries.get(&pid)) {
            if c.start == start && c.comm == comm {
                return match c.rule {
                    Some(idx) => Identity::Rule(idx, Known { comm, uid: c.uid }),
                    None => Identity::NoRule,
                };
            }
        }
        let (rule, uid) = match self.needs_for(&comm) {
            None => (None, None),
            // The comm decides and the pin's stat said it is a user
            // process: nothing more to read.
            Some(needs) if needs == FactNeeds::default() && pin.kernel_thread == Some(false) => {
                let facts = OwnedFacts {
                    comm: comm.clone(),
                    ..OwnedFacts::default()
                };
                (self.find_index(&facts.as_facts()), None)
            }
            Some(needs) => {
                let Some(facts) = ops.facts(pid, comm.clone(), needs) else {
                    return Identity::Gone;
                };
                (self.find_index(&facts.as_facts()), facts.uid)
            }
        };
        if let Some(c) = cache {
            if c.entries.len() >= CACHE_MAX {
                c.entries.clear();
            }
            c.entries.insert(
                pid,
                Cached {
                    start,
                    comm: comm.clone(),
                    rule,
                    uid,
                },
            );
        }
        match rule {
            Some(idx) => Identity::Rule(idx, Known { comm, uid }),
            None => Identity::NoRule,
        }
    }

    /// The exec race: children forked before the move stay in `was`.
    #[allow(clippy::too_many_arguments)]
    fn move_left_behind(
        &self,
        pid: i32,
        single_threaded: bool,
        idx: usize,
        was: &str,
        target: &str,
        ops: &mut dyn PlaceOps,
        out: &mut Placed,
    ) {
        let group = &self.matchers[idx].group;
        let mut stack = ops.children(pid, single_threaded);
        let mut seen = 0;
        while let Some(c) = stack.pop() {
            seen += 1;
            if seen > MAX_DESCENDANTS {
                break;
            }
            let Some(pin) = ops.pin(c) else {
                continue;
            };
            match self.identify(c, &pin, ops, None) {
                Identity::Gone => continue,
                // A descendant matching another rule is that rule's business.
                Identity::Rule(j, _) if j != idx => continue,
                Identity::Rule(..) | Identity::NoRule => {}
            }
            match ops.cgroup_of(c) {
                Some(cur) if cur == was && !ops.same(c, &pin) => {
                    out.gone += 1;
                    continue;
                }
                Some(cur) if cur == was => match ops.move_pid(group, c) {
                    Ok(()) => out.descendants.push(c),
                    Err(OpError::Gone) => continue,
                    Err(OpError::Refused(why)) => {
                        out.errors
                            .push(format!("pid {c} (child of {pid}) into {group}: {why}"));
                        continue;
                    }
                },
                Some(cur) if cur == target => {}
                // Elsewhere (a group someone else manages) or gone: leave it.
                _ => continue,
            }
            stack.extend(ops.children(c, pin.threads == Some(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::Match;
    use crate::policy::yaml::Pos;

    fn rule(m: Match, group: &str) -> Placement {
        Placement {
            matcher: m,
            group: group.into(),
            sched: None,
            pos: Pos::default(),
            tuning: Default::default(),
        }
    }

    fn facts<'a>(
        comm: &'a str,
        exe: Option<&'a str>,
        cmdline: &'a str,
        uid: u32,
    ) -> ProcessFacts<'a> {
        ProcessFacts {
            comm,
            exe,
            cmdline,
            uid: Some(uid),
        }
    }

    #[test]
    fn first_match_wins() {
        let rules = vec![
            rule(
                Match {
                    comm: Some("motion_*".into()),
                    ..Default::default()
                },
                "realtime",
            ),
            rule(
                Match {
                    comm: Some("*".into()),
                    ..Default::default()
                },
                "system",
            ),
        ];
        let p = Placer::new(&rules, |_| None);
        assert_eq!(
            p.find(&facts("motion_control", None, "", 0))
                .map(|m| m.group.as_str()),
            Some("realtime")
        );
        assert_eq!(
            p.find(&facts("sshd", None, "", 0))
                .map(|m| m.group.as_str()),
            Some("system")
        );
    }

    #[test]
    fn exe_glob_crosses_directories_and_needs_an_exe() {
        let rules = vec![rule(
            Match {
                exe: Some("/opt/npu/bin/*".into()),
                ..Default::default()
            },
            "inference",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p
            .find(&facts("x", Some("/opt/npu/bin/infer"), "", 0))
            .is_some());
        assert!(p
            .find(&facts("x", Some("/opt/npu/bin/sub/infer"), "", 0))
            .is_some());
        assert!(p.find(&facts("x", Some("/usr/bin/infer"), "", 0)).is_none());
        // Kernel threads and vanished exe links have no exe.
        assert!(p.find(&facts("x", None, "", 0)).is_none());
    }

    #[test]
    fn all_keys_must_match_including_user() {
        let rules = vec![rule(
            Match {
                cmdline: Some("*camera_pipeline*".into()),
                user: Some(UserSpec::Name("vision".into())),
                ..Default::default()
            },
            "vision",
        )];
        let p = Placer::new(&rules, |n| (n == "vision").then_some(1001));
        assert!(p
            .find(&facts(
                "python3",
                None,
                "python3 /opt/camera_pipeline.py",
                1001
            ))
            .is_some());
        assert!(p
            .find(&facts(
                "python3",
                None,
                "python3 /opt/camera_pipeline.py",
                0
            ))
            .is_none());
        assert!(p
            .find(&facts("python3", None, "python3 other.py", 1001))
            .is_none());
    }

    #[test]
    fn unknown_user_never_matches() {
        let rules = vec![rule(
            Match {
                user: Some(UserSpec::Name("ghost".into())),
                ..Default::default()
            },
            "g",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p.find(&facts("a", None, "", 0)).is_none());
    }

    #[test]
    fn comm_exact_and_truncated_names() {
        // The kernel shows `camera_pipeline_main` as `camera_pipelin` + `e` (15 bytes).
        let rules = vec![rule(
            Match {
                comm: Some("camera_pipeline".into()),
                ..Default::default()
            },
            "v",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p.find(&facts("camera_pipeline", None, "", 0)).is_some());
        assert!(p.find(&facts("camera_pipelin", None, "", 0)).is_none());
    }
}

// ---- Tests of matcher forms and per-process placement ----
#[cfg(test)]
mod place_tests;
