//! The exec flood: N processes started at once and all alive
//! together, each checking its own `/proc/self/cgroup` every POLL_US and
//! counting itself missed when it is not in TARGET DEADLINE_MS after its
//! launch. Unlike the storm (a bounded number alive, each placed in turn),
//! the flood is the overload a placer exists for: thousands of pollers
//! compete with it for the CPU while it has thousands of moves to make.
//!
//! The driver spawns the N children back-to-back (noting when it launched
//! each, passed to the child too) with their stdin on a pipe it holds;
//! each child polls until placed or DEADLINE_MS past its launch, reports
//! `(pid, seen, first look)` in one 24-byte write to a shared pipe, then
//! waits for EOF on stdin. When every child reported (or the deadline plus
//! a grace passed) the driver closes the pipe, so all exit together, and
//! prints missed/N and placement-time percentiles (launch → the child saw
//! itself in TARGET; a missed child counts as beyond the deadline).
//!
//! The kernel's floor: with a HANDOFF file the driver also
//! writes each child's pid there (`PID\n`) the moment its spawn returns,
//! and `move-from HANDOFF PROCS` — a placer that knows every pid without
//! reading anything — writes each to PROCS, one `write(2)` a pid. Its CPU
//! is what the migrations alone cost, the floor under any placer that
//! places every process of the flood.

use std::ffi::OsStr;
use std::io::{BufRead, Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::storm::now_ns;

/// A child's report: pid, when it saw itself placed (0: missed), when it
/// first looked.
const REC: usize = 24;

/// `flood-child TARGET DEADLINE_MS POLL_US LAUNCH_NS`: polls, reports,
/// then stays alive until stdin reaches EOF (the driver closes it, or
/// dies). LAUNCH_NS is the driver's CLOCK_MONOTONIC just before the spawn
/// (the clock is system-wide): the deadline counts from the launch, not
/// from when a starved child first got to run.
pub(crate) fn child(target: &str, deadline_ms: u64, poll_us: u64, launch_ns: i64) -> ExitCode {
    let t0 = if launch_ns > 0 { launch_ns } else { now_ns() };
    let end = t0.saturating_add((deadline_ms as i64).saturating_mul(1_000_000));
    let want = format!("::{target}\n");
    let mut buf = Vec::with_capacity(512);
    let mut seen = 0i64;
    let mut first = 0i64;
    loop {
        let t = now_ns();
        if first == 0 {
            first = t;
        }
        buf.clear();
        if let Ok(mut f) = std::fs::File::open("/proc/self/cgroup") {
            let _ = f.read_to_end(&mut buf);
        }
        if buf.windows(want.len()).any(|w| w == want.as_bytes()) {
            seen = now_ns();
            break;
        }
        if t >= end {
            break;
        }
        std::thread::sleep(Duration::from_micros(poll_us));
    }
    let mut rec = [0u8; REC];
    rec[..8].copy_from_slice(&(std::process::id() as i64).to_le_bytes());
    rec[8..16].copy_from_slice(&seen.to_le_bytes());
    rec[16..].copy_from_slice(&first.to_le_bytes());
    // One write(2): atomic on a pipe (≤ PIPE_BUF), never split or interleaved.
    // SAFETY: `rec` is REC valid bytes for the duration of the call.
    let _ = unsafe { libc::write(1, rec.as_ptr().cast(), rec.len()) };
    // Alive with the others until the driver lets go.
    let mut b = [0u8; 64];
    while matches!(std::io::stdin().read(&mut b), Ok(n) if n > 0) {}
    ExitCode::SUCCESS
}

/// How the flood runs.
pub(crate) struct Flood {
    pub(crate) n: usize,
    pub(crate) deadline_ms: u64,
    pub(crate) poll_us: u64,
    /// Where each child's pid goes as it is spawned (`move-from` reads it).
    pub(crate) handoff: Option<std::fs::File>,
}

/// `flood CHILD TARGET N DEADLINE_MS POLL_US [HANDOFF]`.
pub(crate) fn drive(child_exe: &OsStr, target: &str, fl: &mut Flood) -> ExitCode {
    let (mut rd, wr) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("flood: pipe: {e}");
            return ExitCode::from(1);
        }
    };
    let (hold_rd, hold_wr) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("flood: pipe: {e}");
            return ExitCode::from(1);
        }
    };
    let wr: OwnedFd = wr.into();
    let hold_rd: OwnedFd = hold_rd.into();
    let (tx, rx) = mpsc::channel::<(i32, i64, i64)>();
    let reader = std::thread::spawn(move || {
        let mut b = [0u8; REC];
        let field = |b: &[u8; REC], i: usize| {
            i64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default())
        };
        while rd.read_exact(&mut b).is_ok() {
            if tx
                .send((field(&b, 0) as i32, field(&b, 8), field(&b, 16)))
                .is_err()
            {
                break;
            }
        }
    });
    let deadline = fl.deadline_ms.to_string();
    let poll = fl.poll_us.to_string();
    // (pid, launch: CLOCK_MONOTONIC just before its spawn)
    let mut spawned: Vec<(i32, i64)> = Vec::with_capacity(fl.n);
    let mut children = Vec::with_capacity(fl.n);
    let t0 = now_ns();
    let mut spawn_error = None;
    for _ in 0..fl.n {
        let (out, inp) = match (wr.try_clone(), hold_rd.try_clone()) {
            (Ok(o), Ok(i)) => (Stdio::from(o), Stdio::from(i)),
            (Err(e), _) | (_, Err(e)) => {
                spawn_error = Some(format!("dup: {e}"));
                break;
            }
        };
        let launch = now_ns();
        match Command::new(child_exe)
            .args(["flood-child", target, &deadline, &poll, &launch.to_string()])
            .stdin(inp)
            .stdout(out)
            .spawn()
        {
            Ok(c) => {
                if let Some(h) = &mut fl.handoff {
                    if let Err(e) = writeln!(h, "{}", c.id()) {
                        eprintln!("flood: handoff: {e}");
                        fl.handoff = None;
                    }
                }
                spawned.push((c.id() as i32, launch));
                children.push(c);
            }
            Err(e) => {
                spawn_error = Some(format!("spawn {}: {e}", child_exe.to_string_lossy()));
                break;
            }
        }
    }
    let t1 = now_ns();
    // EOF for `move-from`.
    fl.handoff = None;
    drop(wr);
    drop(hold_rd);
    if let Some(e) = &spawn_error {
        eprintln!("flood: {e}; measuring the {} started", spawned.len());
    }
    // Every report, or the last deadline plus a grace (a starved child
    // may report late; one that never does is missed).
    let mut recs = Vec::with_capacity(spawned.len());
    let give_up = t1 + (fl.deadline_ms as i64 + 10_000) * 1_000_000;
    while recs.len() < spawned.len() {
        let left = give_up - now_ns();
        if left <= 0 {
            break;
        }
        match rx.recv_timeout(Duration::from_nanos(left as u64)) {
            Ok(r) => recs.push(r),
            Err(_) => break,
        }
    }
    // All alive until here; now they exit together.
    drop(hold_wr);
    for mut c in children {
        let _ = c.wait();
    }
    drop(rx);
    let _ = reader.join();
    report(
        fl,
        &spawned,
        &recs,
        (t1 - t0) as f64 / 1e9,
        spawn_error.is_some(),
    );
    ExitCode::SUCCESS
}

/// Which `/proc` reads `move-from` makes around each write.
#[derive(Debug, Default, PartialEq, Eq)]
struct Reads {
    stat: bool,
    cgroup: bool,
    children: bool,
}

impl Reads {
    /// A comma list of `stat`, `cgroup`, `children` (empty: none).
    fn parse(list: &str) -> Result<Reads, String> {
        let mut r = Reads::default();
        for w in list.split(',').filter(|w| !w.is_empty()) {
            match w {
                "stat" => r.stat = true,
                "cgroup" => r.cgroup = true,
                "children" => r.children = true,
                _ => return Err(format!("{w}? (stat, cgroup, children)")),
            }
        }
        Ok(r)
    }
}

/// `move-from HANDOFF PROCS [READS]`: the floor placer. Reads pids from
/// HANDOFF (a FIFO the flood driver writes) and writes each to PROCS (a
/// `cgroup.procs`, opened once), as soon as it arrives. READS, a comma
/// list, adds the `/proc` reads a placer that must identify the process
/// makes around the write, so each one's kernel cost can be told apart:
/// `stat` (`/proc/PID/stat`: comm, start time), `cgroup`
/// (`/proc/PID/cgroup`: where it is) before it, `children`
/// (`/proc/PID/task/PID/children`: what it forked before the move) after.
/// At EOF it prints how many it moved and stays alive, so its CPU can
/// still be read from `/proc/PID/stat`, until it is killed.
pub(crate) fn move_from(handoff: &str, procs: &str, reads: &str) -> ExitCode {
    let Reads {
        stat,
        cgroup,
        children,
    } = match Reads::parse(reads) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("move-from: READS: {e}");
            return ExitCode::from(2);
        }
    };
    let src = match std::fs::File::open(handoff) {
        Ok(f) => std::io::BufReader::new(f),
        Err(e) => {
            eprintln!("move-from: {handoff}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut dst = match std::fs::OpenOptions::new().write(true).open(procs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("move-from: {procs}: {e}");
            return ExitCode::from(1);
        }
    };
    let (mut moved, mut failed, mut unread) = (0usize, 0usize, 0usize);
    let mut buf = Vec::with_capacity(4096);
    let mut read = |path: &str| {
        buf.clear();
        match std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut buf)) {
            Ok(_) => 0,
            Err(_) => 1,
        }
    };
    for line in src.lines() {
        let Ok(pid) = line else { break };
        let pid = pid.trim();
        if stat {
            unread += read(&format!("/proc/{pid}/stat"));
        }
        if cgroup {
            unread += read(&format!("/proc/{pid}/cgroup"));
        }
        // One write a pid: cgroup.procs takes one per write(2).
        match dst.write_all(pid.as_bytes()) {
            Ok(()) => moved += 1,
            Err(_) => failed += 1,
        }
        if children {
            unread += read(&format!("/proc/{pid}/task/{pid}/children"));
        }
    }
    eprintln!("move-from: moved {moved}, failed {failed}, reads failed {unread}");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Placement times in ns (sorted; `i64::MAX` = missed) → `p50 … max` in ms,
/// a missed quantile shown as `>DEADLINE`.
fn quantiles(v: &[i64], deadline_ms: u64) -> String {
    let at = |q: usize| {
        let x = v[(v.len() * q / 100).min(v.len() - 1)];
        if x == i64::MAX {
            format!(">{deadline_ms}")
        } else {
            format!("{:.1}", x as f64 / 1e6)
        }
    };
    format!(
        "p50 {} p90 {} p99 {} max {}",
        at(50),
        at(90),
        at(99),
        at(100)
    )
}

fn report(fl: &Flood, spawned: &[(i32, i64)], recs: &[(i32, i64, i64)], secs: f64, short: bool) {
    let started: std::collections::HashMap<i32, i64> = spawned.iter().copied().collect();
    let mut times = Vec::with_capacity(spawned.len());
    let mut missed = 0usize;
    let mut reported = std::collections::HashSet::new();
    // Launch → the child's first look: nothing can be seen sooner.
    let mut floor = Vec::with_capacity(recs.len());
    // Children that first looked after their deadline (starved): already
    // placed then, but when is unknown; not counted as missed.
    let mut late = 0usize;
    let deadline_ns = (fl.deadline_ms as i64).saturating_mul(1_000_000);
    for &(pid, seen, first) in recs {
        let Some(&at) = started.get(&pid) else {
            continue;
        };
        reported.insert(pid);
        if first > 0 {
            floor.push((first - at).max(0));
            late += usize::from(first - at > deadline_ns);
        }
        if seen == 0 {
            missed += 1;
            times.push(i64::MAX);
        } else {
            times.push((seen - at).max(0));
        }
    }
    // No report at all: starved past the grace; missed too.
    let silent = spawned.len() - reported.len();
    missed += silent;
    times.extend(std::iter::repeat_n(i64::MAX, silent));
    times.sort_unstable();
    println!(
        "flood: started {} of {} in {secs:.2}s{}, deadline {} ms, poll {} us",
        spawned.len(),
        fl.n,
        if short { " (spawning failed)" } else { "" },
        fl.deadline_ms,
        fl.poll_us
    );
    println!("missed {missed}/{} (no report: {silent})", spawned.len());
    if !times.is_empty() {
        println!(
            "placement ms (launch -> the child saw itself placed): {}",
            quantiles(&times, fl.deadline_ms)
        );
    }
    if !floor.is_empty() {
        floor.sort_unstable();
        println!(
            "floor ms (launch -> the child's first look; nothing can be seen sooner): {}; \
             first look after the deadline: {late}",
            quantiles(&floor, fl.deadline_ms)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_from_reads_name_the_proc_files_and_refuse_others() {
        assert_eq!(Reads::parse(""), Ok(Reads::default()));
        assert_eq!(
            Reads::parse("stat,children"),
            Ok(Reads {
                stat: true,
                cgroup: false,
                children: true
            })
        );
        assert!(Reads::parse("stat,comm").unwrap_err().starts_with("comm?"));
    }

    #[test]
    fn quantiles_show_missed_as_beyond_the_deadline() {
        let mut v: Vec<i64> = (1..=98).map(|i| i * 1_000_000).collect();
        v.push(i64::MAX);
        v.push(i64::MAX);
        assert_eq!(quantiles(&v, 3000), "p50 51.0 p90 91.0 p99 >3000 max >3000");
        assert_eq!(
            quantiles(&[2_000_000], 3000),
            "p50 2.0 p90 2.0 p99 2.0 max 2.0"
        );
    }
}
