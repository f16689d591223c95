//! `cgwarden-workload`: a tiny workload generator for cgwarden's guest tests.
//!
//! It stands in for real products' processes inside the test VM: something to place
//! by `comm`/`cmdline`, something that eats memory until the kernel's OOM killer
//! steps in, something that burns CPU. std + libc only; bad arguments print usage
//! and exit 2, never panic.
//!
//! ```text
//! cgwarden-workload alloc MIB [HOLD_SECS]     allocate and touch MIB MiB, then sleep HOLD_SECS (default 0)
//! cgwarden-workload spin SECS                 burn one CPU for SECS seconds
//! cgwarden-workload sleep SECS                sleep SECS seconds
//! cgwarden-workload exec-as NAME SECS         sleep SECS under argv[0] and comm NAME
//! cgwarden-workload exec-as NAME CMD [ARG..]  run CMD (one of these commands) under NAME
//! cgwarden-workload delay SECS CMD [ARG..]    sleep SECS, then exec itself as CMD (a late exec)
//! cgwarden-workload as-uid UID CMD [ARG..]    drop to uid/gid UID (no supplementary groups), then run CMD
//! cgwarden-workload run-as UID[:GID,..] PROG [ARG..]  drop to uid UID and gid UID (no
//!     supplementary groups), or gid the first GID with the GIDs as supplementary groups; exec PROG
//! cgwarden-workload swapon DEV PRIO           swapon(2) with a priority (busybox swapon has no -p)
//! cgwarden-workload swapoff DEV               swapoff(2)
//! cgwarden-workload setsched PID POLICY PRIO  sched_setscheduler(2); POLICY other|batch|idle|fifo|rr
//! cgwarden-workload storm CHILD TARGET N LIFE_MS PAR [POLL_US]   the placement benchmark's exec storm
//! cgwarden-workload migrate-cost A B N        a migration write's cost vs. the gap before it
//! cgwarden-workload poll-file FILE PERIOD_MS SECS   pread FILE every PERIOD_MS for SECS (the idle-cost anchor)
//! cgwarden-workload poll-act PRESSURE PERIOD_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS   the reaction anchor that acts
//! cgwarden-workload trigger-act PRESSURE WINDOW_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS   the reaction floor: acts at a PSI trigger
//! cgwarden-workload psi-stamp FILE TRIGGER SECS   print a Unix time at each PSI trigger wake-up (the reaction-lag clock)
//! cgwarden-workload notify-listen SOCKET SECS  print sd_notify datagrams with monotonic times
//! cgwarden-workload flood CHILD TARGET N DEADLINE_MS POLL_US [HANDOFF]   the exec flood (all alive at once)
//! cgwarden-workload move-from HANDOFF PROCS [READS]   the floor placer: each pid HANDOFF names written to PROCS
//! cgwarden-workload boost-exit SOCKET KNOB VALUE FILE EXPECT   how soon a pid-tied boost ends after its process
//! cgwarden-workload s32 FILE                  print the first 4 bytes of FILE as a native-endian s32 (/dev/cpu_dma_latency)
//! cgwarden-workload setxattr PATH NAME VALUE  setxattr(2), as systemd marks a delegated cgroup (busybox has no setfattr)
//! cgwarden-workload threads SECS              threads ctrl, log and late→ctrl-late (renamed after 2 s); live SECS
//! cgwarden-workload stamp-exit SECS FILE      sleep SECS, write the Unix time to FILE, exit 3
//! cgwarden-workload ioprio TID                print a thread's I/O priority as CLASS LEVEL
//! cgwarden-workload since FILE TIME           ms from the Unix time in FILE to the RFC 3339 TIME
//! ```
//!
//! The last three are for the guest suite's reference implementation
//! (tests/vm/mock-cgwarden.sh), which has no other way to make these calls from busybox.
//!
//! Anything after a literal `--` is ignored, so tests can put tags into the command
//! line (`... sleep 600 -- --role=camera_pipeline`) for `cmdline:` placement matches.
//! When started under an argv[0] other than `cgwarden-workload` (through `exec-as` or a
//! symlink), the process renames its `comm` to that name (truncated to 15 bytes by the kernel).

use std::ffi::{CString, OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod boost;
mod flood;
mod notify;
mod poll;
mod psistamp;
mod storm;
mod threads;

const SELF_NAME: &str = "cgwarden-workload";

const USAGE: &str = "\
usage: cgwarden-workload COMMAND [ARGS...] [-- IGNORED...]
  alloc MIB [HOLD_SECS]      allocate and touch MIB MiB, then sleep HOLD_SECS (default 0)
  spin SECS                  burn one CPU for SECS seconds
  sleep SECS                 sleep SECS seconds
  exec-as NAME SECS          sleep SECS under argv[0]/comm NAME
  exec-as NAME CMD [ARG...]  run CMD (one of these commands) under argv[0]/comm NAME
  delay SECS CMD [ARG...]    sleep SECS, then exec itself as CMD
  as-uid UID CMD [ARG...]    drop to uid and gid UID (no supplementary groups), then
                             run CMD (one of these commands; busybox may lack setpriv)
  run-as UID[:GID,..] PROG [ARG...]  drop to uid UID and gid UID (or the first GID, with
                             the GIDs as supplementary groups), then exec PROG
  swapon DEV PRIO            swapon(2) with priority PRIO
  swapoff DEV                swapoff(2)
  setsched PID POLICY PRIO   sched_setscheduler(2); POLICY: other|batch|idle|fifo|rr
  storm CHILD TARGET N LIFE_MS PAR [POLL_US]
                             spawn N copies of CHILD (this program renamed), PAR at a
                             time, each living LIFE_MS; print how long until each saw
                             itself in cgroup TARGET (e.g. /cgwarden-bench-a), looking
                             every POLL_US (default 100)
  migrate-cost A B N         move a child between cgroup dirs A and B, N times per gap
                             (0..50 ms since the last move); print the write's cost
  poll-file FILE PERIOD_MS SECS
                             keep FILE open and pread it every PERIOD_MS for SECS
                             (the trivial poller the idle-cost benchmark compares with)
  poll-act PRESSURE PERIOD_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS
                             the same loop acting: write HIGH to KNOB when PRESSURE's
                             some total= grew >= THRESH_US in a period, LOW after
                             HOLD_MS without; print each write's Unix time
  trigger-act PRESSURE WINDOW_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS
                             the least reactor: a PSI trigger (some THRESH_US WINDOW_MS)
                             polled; HIGH at an event, LOW once none came for
                             WINDOW_MS + HOLD_MS; prints as poll-act
  psi-stamp FILE TRIGGER SECS
                             register TRIGGER (e.g. \"some 100000 1000000\") on the
                             pressure FILE, poll it; print `trigger at UNIX_SECS` at
                             each wake-up (the reaction-lag benchmark's clock)
  notify-listen SOCKET SECS  bind a unix datagram socket at SOCKET (NOTIFY_SOCKET) for
                             SECS seconds; print each datagram with a CLOCK_MONOTONIC
                             time, then the WATCHDOG=1 count and largest gap
  flood CHILD TARGET N DEADLINE_MS POLL_US [HANDOFF]
                             start N copies of CHILD at once, all alive together, each
                             polling its /proc/self/cgroup every POLL_US; print how many
                             were not in TARGET DEADLINE_MS after launch, and p50..max;
                             with HANDOFF (a FIFO), write each child's pid there
  move-from HANDOFF PROCS [READS]
                             write each pid read from HANDOFF to PROCS (a cgroup.procs),
                             one write a pid; READS (stat,cgroup,children) adds those
                             /proc reads; at EOF print the count and wait to be killed
  boost-exit SOCKET KNOB VALUE FILE EXPECT
                             boost KNOB=VALUE tied to a short-lived child over the control
                             socket; check FILE holds EXPECT; print how soon after the
                             child's exit FILE changes back
  threads SECS               threads named ctrl and log, and one named late that renames
                             itself ctrl-late after 2 s; the process lives SECS
  stamp-exit SECS FILE       sleep SECS, write the Unix time (µs) to FILE, exit 3
  ioprio TID                 print the thread's I/O priority as CLASS LEVEL
  since FILE TIME            milliseconds from the Unix time in FILE to RFC 3339 TIME
SECS may be fractional.";

fn usage(msg: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "cgwarden-workload: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn parse_secs(s: &OsStr) -> Option<Duration> {
    let v: f64 = s.to_str()?.parse().ok()?;
    if (0.0..1e9).contains(&v) {
        Some(Duration::from_secs_f64(v))
    } else {
        None
    }
}

fn parse_mib(s: &OsStr) -> Option<usize> {
    let v: usize = s.to_str()?.parse().ok()?;
    // 1 TiB is far beyond any test VM; refuse nonsense rather than overflow.
    (v <= 1 << 20).then_some(v)
}

/// Set the calling thread's (the main thread's, so the process's) `comm`.
fn set_comm(name: &OsStr) {
    let bytes: Vec<u8> = name.as_bytes().iter().copied().take(15).collect();
    if let Ok(c) = CString::new(bytes) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from the pointer.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0);
        }
    }
}

/// Replace this process with `/proc/self/exe` run as `argv0 args...` (same PID).
/// `tags` (a `--` and what follows it) are passed on, so they stay in the new cmdline.
fn reexec(argv0: &OsStr, args: &[OsString], tags: &[OsString]) -> ExitCode {
    let to_c = |s: &OsStr| CString::new(s.as_bytes().to_vec());
    let mut cargs = Vec::with_capacity(args.len() + 1);
    let rest = args.iter().chain(tags).map(OsString::as_os_str);
    for a in std::iter::once(argv0).chain(rest) {
        match to_c(a) {
            Ok(c) => cargs.push(c),
            Err(_) => return usage("argument contains a NUL byte"),
        }
    }
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let exe = c"/proc/self/exe";
    // SAFETY: `exe` and every element of `ptrs` are valid NUL-terminated strings that
    // outlive the call; `ptrs` is NULL-terminated; `environ` is the process environment.
    unsafe {
        extern "C" {
            static environ: *const *const libc::c_char;
        }
        libc::execve(exe.as_ptr(), ptrs.as_ptr(), environ);
    }
    let err = std::io::Error::last_os_error();
    let _ = writeln!(std::io::stderr(), "cgwarden-workload: exec failed: {err}");
    ExitCode::from(1)
}

/// Drops every group and sets gid and uid to `id` (real, effective, saved).
fn drop_to(id: libc::uid_t, groups: &[libc::gid_t]) -> std::io::Result<()> {
    let gid = groups.first().copied().unwrap_or(id);
    // SAFETY: setgroups reads `groups.len()` gids from a live slice;
    // setresgid and setresuid take plain integers.
    unsafe {
        if libc::setgroups(groups.len(), groups.as_ptr()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(id, id, id) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `UID` or `UID:GID,GID..` of `run-as`.
fn ids(text: &str) -> Option<(libc::uid_t, Vec<libc::gid_t>)> {
    let (uid, gids) = match text.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (text, None),
    };
    let uid = uid.parse().ok()?;
    let gids = match gids {
        Some(g) => g
            .split(',')
            .map(|g| g.parse().ok())
            .collect::<Option<Vec<_>>>()?,
        None => Vec::new(),
    };
    Some((uid, gids))
}

fn alloc(mib: usize, hold: Duration) -> ExitCode {
    const MIB: usize = 1 << 20;
    let mut chunks: Vec<Vec<u8>> = Vec::with_capacity(mib);
    for i in 0..mib {
        // Non-zero, slightly varying content: every page is really backed and not
        // trivially deduplicated.
        let mut chunk = vec![0u8; MIB];
        for (j, page) in chunk.chunks_mut(4096).enumerate() {
            page[0] = 1 + ((i + j) % 251) as u8;
            page[4095] = (i % 253) as u8;
        }
        chunks.push(chunk);
    }
    println!("allocated {mib} MiB");
    let _ = std::io::stdout().flush();
    std::thread::sleep(hold);
    // Keep the memory alive across the sleep.
    std::hint::black_box(&chunks);
    ExitCode::SUCCESS
}

fn spin(d: Duration) -> ExitCode {
    let start = Instant::now();
    let mut x: u64 = 0;
    while start.elapsed() < d {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    ExitCode::SUCCESS
}

fn path_c(s: &OsStr) -> Option<CString> {
    CString::new(s.as_bytes().to_vec()).ok()
}

fn os_result(what: &str, rc: libc::c_int) -> ExitCode {
    if rc == 0 {
        ExitCode::SUCCESS
    } else {
        let err = std::io::Error::last_os_error();
        let _ = writeln!(std::io::stderr(), "cgwarden-workload: {what}: {err}");
        ExitCode::from(1)
    }
}

// <sys/swap.h>; not exported by the libc crate.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;

fn swapon(dev: &OsStr, prio: &OsStr) -> ExitCode {
    let Some(p) = prio.to_str().and_then(|p| p.parse::<i32>().ok()) else {
        return usage("swapon: PRIO must be an integer");
    };
    if !(0..=SWAP_FLAG_PRIO_MASK).contains(&p) {
        return usage("swapon: PRIO out of range");
    }
    let Some(c) = path_c(dev) else {
        return usage("swapon: bad DEV");
    };
    let flags = SWAP_FLAG_PREFER | (p & SWAP_FLAG_PRIO_MASK);
    // SAFETY: `c` is a valid NUL-terminated path.
    os_result("swapon", unsafe { libc::swapon(c.as_ptr(), flags) })
}

fn swapoff(dev: &OsStr) -> ExitCode {
    let Some(c) = path_c(dev) else {
        return usage("swapoff: bad DEV");
    };
    // SAFETY: `c` is a valid NUL-terminated path.
    os_result("swapoff", unsafe { libc::swapoff(c.as_ptr()) })
}

fn setsched(pid: &OsStr, policy: &OsStr, prio: &OsStr) -> ExitCode {
    let Some(pid) = pid.to_str().and_then(|p| p.parse::<libc::pid_t>().ok()) else {
        return usage("setsched: PID must be a number");
    };
    let policy = match policy.to_str() {
        Some("other") => libc::SCHED_OTHER,
        Some("batch") => libc::SCHED_BATCH,
        Some("idle") => libc::SCHED_IDLE,
        Some("fifo") => libc::SCHED_FIFO,
        Some("rr") => libc::SCHED_RR,
        _ => return usage("setsched: POLICY must be other|batch|idle|fifo|rr"),
    };
    let Some(prio) = prio.to_str().and_then(|p| p.parse::<libc::c_int>().ok()) else {
        return usage("setsched: PRIO must be a number");
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call.
    os_result("sched_setscheduler", unsafe {
        libc::sched_setscheduler(pid, policy, &param)
    })
}

fn run(args: &[OsString], tags: &[OsString]) -> ExitCode {
    let Some(cmd) = args.first().and_then(|c| c.to_str()) else {
        return usage("missing command");
    };
    let rest = &args[1..];
    match (cmd, rest) {
        ("alloc", [mib]) | ("alloc", [mib, _]) => {
            let hold = match rest.get(1) {
                Some(h) => match parse_secs(h) {
                    Some(d) => d,
                    None => return usage("alloc: HOLD_SECS must be a number of seconds"),
                },
                None => Duration::ZERO,
            };
            match parse_mib(mib) {
                Some(m) => alloc(m, hold),
                None => usage("alloc: MIB must be a whole number of MiB"),
            }
        }
        ("spin", [secs]) => match parse_secs(secs) {
            Some(d) => spin(d),
            None => usage("spin: SECS must be a number"),
        },
        ("sleep", [secs]) => match parse_secs(secs) {
            Some(d) => {
                std::thread::sleep(d);
                ExitCode::SUCCESS
            }
            None => usage("sleep: SECS must be a number"),
        },
        ("exec-as", [name, tail @ ..]) if !tail.is_empty() => {
            if name.is_empty() || name.as_bytes().contains(&b'/') {
                return usage("exec-as: NAME must be non-empty and contain no '/'");
            }
            if tail.len() == 1 {
                if parse_secs(&tail[0]).is_none() {
                    return usage("exec-as: SECS must be a number");
                }
                let sleep = [OsString::from("sleep"), tail[0].clone()];
                reexec(name, &sleep, tags)
            } else {
                reexec(name, tail, tags)
            }
        }
        ("delay", [secs, tail @ ..]) if !tail.is_empty() => match parse_secs(secs) {
            Some(d) => {
                std::thread::sleep(d);
                reexec(OsStr::new(SELF_NAME), tail, tags)
            }
            None => usage("delay: SECS must be a number"),
        },
        ("as-uid", [uid, tail @ ..]) if !tail.is_empty() => match uid.to_str().and_then(ids) {
            Some((uid, groups)) => match drop_to(uid, &groups) {
                Ok(()) => reexec(OsStr::new(SELF_NAME), tail, tags),
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "cgwarden-workload: as-uid: {e}");
                    ExitCode::from(1)
                }
            },
            None => usage("as-uid: UID[:GID,..] must be numbers"),
        },
        ("run-as", [uid, prog, rest @ ..]) => match uid.to_str().and_then(ids) {
            Some((uid, groups)) => match drop_to(uid, &groups) {
                Ok(()) => {
                    use std::os::unix::process::CommandExt;
                    let e = std::process::Command::new(prog).args(rest).exec();
                    let _ = writeln!(std::io::stderr(), "cgwarden-workload: run-as: {e}");
                    ExitCode::from(127)
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "cgwarden-workload: run-as: {e}");
                    ExitCode::from(1)
                }
            },
            None => usage("run-as: UID[:GID,..] must be numbers"),
        },
        ("s32", [file]) => read_s32(file),
        ("setxattr", [path, name, value]) => set_xattr(path, name, value),
        ("threads", [secs]) => match parse_secs(secs) {
            Some(d) => threads::threads(d),
            None => usage("threads: SECS must be a number"),
        },
        ("ioprio", [tid]) => match tid.to_str() {
            Some(t) => threads::ioprio(t),
            None => usage("ioprio: TID must be a number"),
        },
        ("since", [file, time]) => match time.to_str() {
            Some(t) => threads::since(Path::new(file), t),
            None => usage("since: TIME must be text"),
        },
        ("stamp-exit", [secs, file]) => match parse_secs(secs) {
            Some(d) => threads::stamp_exit(d, Path::new(file)),
            None => usage("stamp-exit: SECS must be a number"),
        },
        ("swapon", [dev, prio]) => swapon(dev, prio),
        ("swapoff", [dev]) => swapoff(dev),
        ("setsched", [pid, policy, prio]) => setsched(pid, policy, prio),
        ("storm", [child, target, n, life, par, poll @ ..]) if poll.len() <= 1 => {
            let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok());
            let poll_us = match poll.first() {
                Some(p) => num(p),
                None => Some(100),
            };
            match (target.to_str(), num(n), num(life), num(par), poll_us) {
                (Some(t), Some(n), Some(l), Some(p), Some(poll_us))
                    if t.starts_with('/') && p > 0 =>
                {
                    let st = storm::Storm {
                        n: n as usize,
                        life_ms: l,
                        par: p as usize,
                        poll_us,
                    };
                    storm::drive(child, t, &st)
                }
                _ => usage("storm: TARGET must be a /path; N, LIFE_MS, PAR, POLL_US whole numbers"),
            }
        }
        ("poll-file", [file, period, secs]) => {
            let ms = period.to_str().and_then(|s| s.parse::<u64>().ok());
            match (file.to_str(), ms, parse_secs(secs)) {
                (Some(f), Some(ms), Some(secs)) if ms > 0 => {
                    poll::poll_file(f, Duration::from_millis(ms), secs)
                }
                _ => usage("poll-file: FILE PERIOD_MS SECS (PERIOD_MS > 0)"),
            }
        }
        ("psi-stamp", [file, trigger, secs]) => {
            match (file.to_str(), trigger.to_str(), parse_secs(secs)) {
                (Some(f), Some(t), Some(s)) => psistamp::psi_stamp(f, t, s),
                _ => usage("psi-stamp: FILE TRIGGER SECS"),
            }
        }
        (
            cmd @ ("poll-act" | "trigger-act"),
            [pressure, period, secs, knob, high, low, thresh, hold],
        ) => {
            let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok());
            match (
                pressure.to_str(),
                num(period),
                parse_secs(secs),
                knob.to_str(),
                high.to_str(),
                low.to_str(),
                num(thresh),
                num(hold),
            ) {
                (Some(pressure), Some(ms), Some(secs), Some(knob), Some(high), Some(low), Some(thresh_us), Some(hold))
                    if ms > 0 =>
                {
                    let act = poll::Act {
                        pressure,
                        period: Duration::from_millis(ms),
                        secs,
                        knob,
                        high,
                        low,
                        thresh_us,
                        hold: Duration::from_millis(hold),
                    };
                    if cmd == "poll-act" {
                        poll::poll_act(&act)
                    } else {
                        poll::trigger_act(&act)
                    }
                }
                _ => usage("poll-act | trigger-act: PRESSURE PERIOD_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS (numbers whole, PERIOD_MS > 0)"),
            }
        }
        ("migrate-cost", [a, b, n]) => {
            match (
                a.to_str(),
                b.to_str(),
                n.to_str().and_then(|s| s.parse::<usize>().ok()),
            ) {
                (Some(a), Some(b), Some(n)) if n > 0 => storm::migrate_cost(a, b, n),
                _ => usage("migrate-cost: A B N (two cgroup directories, N > 0)"),
            }
        }
        ("flood", [child, target, n, deadline, poll, rest @ ..]) if rest.len() <= 1 => {
            let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok());
            let handoff = match rest.first() {
                None => None,
                Some(h) => match std::fs::OpenOptions::new().write(true).open(h) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        eprintln!("flood: {}: {e}", h.to_string_lossy());
                        return ExitCode::from(1);
                    }
                },
            };
            match (target.to_str(), num(n), num(deadline), num(poll)) {
                (Some(t), Some(n), Some(d), Some(p)) if t.starts_with('/') && n > 0 => {
                    let mut fl = flood::Flood {
                        n: n as usize,
                        deadline_ms: d,
                        poll_us: p,
                        handoff,
                    };
                    flood::drive(child, t, &mut fl)
                }
                _ => usage(
                    "flood: TARGET must be a /path; N > 0, DEADLINE_MS, POLL_US whole numbers",
                ),
            }
        }
        ("move-from", [handoff, procs, rest @ ..]) if rest.len() <= 1 => {
            let reads = rest.first().map(|r| r.to_str());
            match (handoff.to_str(), procs.to_str(), reads) {
                (Some(h), Some(p), None) => flood::move_from(h, p, ""),
                (Some(h), Some(p), Some(Some(r))) => flood::move_from(h, p, r),
                _ => usage("move-from: HANDOFF PROCS [READS]"),
            }
        }
        ("flood-child", [target, deadline, poll, launch]) => {
            let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok());
            let launch = launch.to_str().and_then(|s| s.parse::<i64>().ok());
            match (target.to_str(), num(deadline), num(poll), launch) {
                (Some(t), Some(d), Some(p), Some(l)) => flood::child(t, d, p, l),
                _ => usage("flood-child: TARGET DEADLINE_MS POLL_US LAUNCH_NS"),
            }
        }
        ("storm-child", [target, life, poll]) => {
            let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok());
            match (target.to_str(), num(life), num(poll)) {
                (Some(t), Some(l), Some(p)) => storm::child(t, l, p),
                _ => usage("storm-child: TARGET LIFE_MS POLL_US"),
            }
        }
        ("boost-exit", [socket, knob, value, file, expect]) => {
            match (
                socket.to_str(),
                knob.to_str(),
                value.to_str(),
                file.to_str(),
                expect.to_str(),
            ) {
                (Some(s), Some(k), Some(v), Some(f), Some(e)) => boost::boost_exit(s, k, v, f, e),
                _ => usage("boost-exit: SOCKET KNOB VALUE FILE EXPECT"),
            }
        }
        ("notify-listen", [socket, secs]) => match parse_secs(secs) {
            Some(d) => notify::listen(Path::new(socket), d),
            None => usage("notify-listen: SECS must be a number of seconds"),
        },
        ("help" | "-h" | "--help", _) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => usage(&format!("bad command or arguments: {cmd}")),
    }
}

fn main() -> ExitCode {
    let mut all: Vec<OsString> = std::env::args_os().collect();
    if all.is_empty() {
        return usage("missing argv[0]");
    }
    let argv0 = all.remove(0);
    if let Some(base) = Path::new(&argv0).file_name() {
        // Renaming fires a COMM process event; skip it when exec already
        // gave the right name (the storm's children must exec only).
        let cut = &base.as_bytes()[..base.len().min(15)];
        let current = std::fs::read("/proc/self/comm").unwrap_or_default();
        if base != OsStr::new(SELF_NAME) && current.strip_suffix(b"\n") != Some(cut) {
            set_comm(base);
        }
    }
    // Everything after `--` is a tag for cmdline matching, not an argument.
    let tags = match all.iter().position(|a| a.as_bytes() == b"--") {
        Some(pos) => all.split_off(pos),
        None => Vec::new(),
    };
    run(&all, &tags)
}

/// `setxattr PATH NAME VALUE`: sets one extended attribute, as systemd marks
/// a delegated cgroup (`trusted.delegate`); the guest's busybox has no
/// setfattr.
fn set_xattr(path: &OsStr, name: &OsStr, value: &OsStr) -> ExitCode {
    let (Ok(p), Ok(n)) = (CString::new(path.as_bytes()), CString::new(name.as_bytes())) else {
        return usage("setxattr: PATH and NAME must not contain NUL");
    };
    let v = value.as_bytes();
    // SAFETY: NUL-terminated strings and a live buffer of `v.len()` bytes.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    if r == 0 {
        return ExitCode::SUCCESS;
    }
    let _ = writeln!(
        std::io::stderr(),
        "cgwarden-workload: setxattr {} {}: {}",
        Path::new(path).display(),
        name.to_string_lossy(),
        std::io::Error::last_os_error()
    );
    ExitCode::from(1)
}

/// `s32 FILE`: reads exactly 4 bytes (as the CPU latency QoS device wants)
/// and prints them as a native-endian s32.
fn read_s32(file: &OsStr) -> ExitCode {
    use std::io::Read;
    let mut buf = [0u8; 4];
    match std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut buf)) {
        Ok(()) => {
            println!("{}", i32::from_ne_bytes(buf));
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "cgwarden-workload: s32: {}: {e}",
                Path::new(file).display()
            );
            ExitCode::from(1)
        }
    }
}
