//! The exec storm of the placement benchmark: the same program on
//! the host (`tests/bench-placement.sh`) and in the guest, so the numbers
//! compare.
//!
//! The driver spawns N children, at most PAR alive at once, each the moment
//! another exits, and notes when each spawn returned (the exec happened).
//! Each child polls `/proc/self/cgroup` every POLL_US (100 µs) until it names TARGET
//! (the same membership `cgroup.procs` lists), reports `(pid, when)` through
//! its stdout (a pipe shared by all; 24-byte writes are atomic), and lives
//! out LIFE_MS. Placement latency = seen − spawned, on CLOCK_MONOTONIC. A
//! child that never sees itself placed within its life is "never placed".

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// A child's report: pid, when it saw itself placed (0: never), when it
/// first looked (the measurement's floor: placement cannot be seen earlier),
/// how many looks it took, and when its last look that found it not placed
/// began (0: none; the placement happened after it).
const REC: usize = 40;

/// CLOCK_MONOTONIC in ns, comparable across the driver and its children.
pub(crate) fn now_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// `storm-child TARGET LIFE_MS POLL_US`
pub(crate) fn child(target: &str, life_ms: u64, poll_us: u64) -> ExitCode {
    let t0 = now_ns();
    let end = t0 + (life_ms as i64) * 1_000_000;
    let mut seen = 0i64;
    let mut first_look = 0i64;
    let mut looks = 0i64;
    let mut last_unplaced = 0i64;
    let mut buf = Vec::with_capacity(512);
    // "0::/a/b\n": the target must be the whole path, not a prefix of it.
    let want = format!("::{target}\n");
    while now_ns() < end {
        let look = now_ns();
        if first_look == 0 {
            first_look = look;
        }
        looks += 1;
        buf.clear();
        if let Ok(mut f) = std::fs::File::open("/proc/self/cgroup") {
            let _ = f.read_to_end(&mut buf);
        }
        if buf.windows(want.len()).any(|w| w == want.as_bytes()) {
            seen = now_ns();
            break;
        }
        last_unplaced = look;
        std::thread::sleep(Duration::from_micros(poll_us));
    }
    let mut rec = [0u8; REC];
    rec[..8].copy_from_slice(&(std::process::id() as i64).to_le_bytes());
    rec[8..16].copy_from_slice(&seen.to_le_bytes());
    rec[16..24].copy_from_slice(&first_look.to_le_bytes());
    rec[24..32].copy_from_slice(&looks.to_le_bytes());
    rec[32..].copy_from_slice(&last_unplaced.to_le_bytes());
    // One write(2) (std's stdout is line-buffered and would split the record
    // at a 0x0a byte, interleaving it with other children's).
    // SAFETY: `rec` is REC valid bytes for the duration of the call.
    let _ = unsafe { libc::write(1, rec.as_ptr().cast(), rec.len()) };
    let left = end - now_ns();
    if left > 0 {
        std::thread::sleep(Duration::from_nanos(left as u64));
    }
    ExitCode::SUCCESS
}

/// How the storm runs.
pub(crate) struct Storm {
    /// Processes to spawn.
    pub(crate) n: usize,
    /// How long each lives, from its own start.
    pub(crate) life_ms: u64,
    /// How many are alive at once.
    pub(crate) par: usize,
    /// How often each child looks at its cgroup (100 µs on the host; an
    /// emulated guest needs longer or the polling starves everything else).
    pub(crate) poll_us: u64,
}

/// `storm CHILD TARGET N LIFE_MS PAR [POLL_US]`: CHILD is the program to
/// spawn (a copy of this binary under the name the placement rule matches).
pub(crate) fn drive(child: &OsStr, target: &str, st: &Storm) -> ExitCode {
    let Storm {
        n,
        life_ms,
        par,
        poll_us,
    } = *st;
    let (mut rd, wr) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("storm: pipe: {e}");
            return ExitCode::from(1);
        }
    };
    let wr: OwnedFd = wr.into();
    let reader = std::thread::spawn(move || {
        let mut recs = Vec::new();
        let mut b = [0u8; REC];
        let field = |b: &[u8; REC], i: usize| {
            i64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default())
        };
        while rd.read_exact(&mut b).is_ok() {
            recs.push((
                field(&b, 0) as i32,
                field(&b, 8),
                field(&b, 16),
                field(&b, 24),
                field(&b, 32),
            ));
        }
        recs
    });
    let life = life_ms.to_string();
    let poll = poll_us.to_string();
    let mut spawned: Vec<(i32, i64)> = Vec::with_capacity(n);
    let mut running = 0usize;
    let t0 = now_ns();
    for _ in 0..n {
        while running >= par.max(1) {
            if reap() {
                running -= 1;
            } else {
                break;
            }
        }
        let out = match wr.try_clone() {
            Ok(fd) => Stdio::from(fd),
            Err(e) => {
                eprintln!("storm: dup: {e}");
                return ExitCode::from(1);
            }
        };
        match Command::new(child)
            .args(["storm-child", target, &life, &poll])
            .stdout(out)
            .spawn()
        {
            Ok(c) => {
                spawned.push((c.id() as i32, now_ns()));
                running += 1;
            }
            Err(e) => {
                eprintln!("storm: spawn {}: {e}", child.to_string_lossy());
                return ExitCode::from(1);
            }
        }
    }
    while running > 0 && reap() {
        running -= 1;
    }
    let t1 = now_ns();
    drop(wr);
    let recs = reader.join().unwrap_or_default();
    report(&spawned, &recs, n, life_ms, (t1 - t0) as f64 / 1e9);
    ExitCode::SUCCESS
}

/// Waits for any child; false when there is none left.
fn reap() -> bool {
    let mut status = 0;
    // SAFETY: plain waitpid on any child; `status` is a valid int to write.
    loop {
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r > 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// `p50 … p90 … p99 … max …` in ms of sorted, non-empty nanoseconds.
fn quantiles(v: &[i64]) -> String {
    let ms = |i: usize| v[i.min(v.len() - 1)] as f64 / 1e6;
    let l = v.len();
    format!(
        "p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}",
        ms(l / 2),
        ms(l * 9 / 10),
        ms(l * 99 / 100),
        ms(l - 1)
    )
}

/// One child's report, as read: (pid, seen, first look, looks, last
/// unplaced look).
type Rec = (i32, i64, i64, i64, i64);

fn report(spawned: &[(i32, i64)], recs: &[Rec], n: usize, life_ms: u64, secs: f64) {
    let mut lat = Vec::with_capacity(recs.len());
    let mut floor = Vec::with_capacity(recs.len());
    // How long after its first look a child still waited, and how many
    // were not placed when they first looked.
    let mut beyond = Vec::with_capacity(recs.len());
    // Spawn -> the last look that found a placed child not yet placed: the
    // placement came after it (and before `seen`).
    let mut unplaced = Vec::with_capacity(recs.len());
    let mut late = 0;
    let mut never = 0;
    for &(pid, seen, first, looks, last_unplaced) in recs {
        // Pids are not reused within one storm (pid_max ≥ 32768 > N + the
        // rest of the system; the latest spawn is taken all the same). A
        // child can see itself placed before its parent's spawn returned
        // (the parent was not scheduled): latency 0.
        let Some(&(_, at)) = spawned.iter().rev().find(|(p, _)| *p == pid) else {
            continue;
        };
        if first > 0 {
            floor.push((first - at).max(0));
        }
        if seen == 0 {
            never += 1;
        } else {
            lat.push((seen - at).max(0));
            if looks > 1 {
                late += 1;
                beyond.push((seen - first).max(0));
                if last_unplaced > 0 {
                    unplaced.push((last_unplaced - at).max(0));
                }
            } else {
                beyond.push(0);
            }
        }
    }
    lat.sort_unstable();
    floor.sort_unstable();
    beyond.sort_unstable();
    unplaced.sort_unstable();
    println!(
        "execs {n} in {secs:.2}s ({:.0}/s), reports {}, placed {}, never placed {never} (alive {life_ms} ms each)",
        n as f64 / secs,
        recs.len(),
        lat.len()
    );
    if !lat.is_empty() {
        println!("latency ms: {}", quantiles(&lat));
    }
    if !floor.is_empty() {
        println!(
            "floor ms (spawn returned -> the child's first look; nothing can be seen sooner): {}",
            quantiles(&floor)
        );
    }
    if !beyond.is_empty() {
        println!(
            "beyond the floor: {late} of {} not yet placed at their first look; wait after it, ms: {}",
            beyond.len(),
            quantiles(&beyond)
        );
    }
    if !unplaced.is_empty() {
        println!(
            "last unplaced look ms (spawn returned -> the last look that found a child not yet placed; placed after it): {}",
            quantiles(&unplaced)
        );
    }
}

/// `migrate-cost A B N`: what one migration write costs the writer,
/// depending on how long the kernel had no migration before it. Moves a
/// sleeping child of its own between cgroup directories A and B, N times
/// for each gap, and prints the write's duration quantiles. Without
/// `favordynmods`, writes after a gap longer than an RCU grace period wait
/// for a new one.
pub(crate) fn migrate_cost(a: &str, b: &str, n: usize) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    // Killed and reaped however this function ends (a closed stdout too).
    let child = match Command::new(exe).args(["sleep", "100000"]).spawn() {
        Ok(c) => KillOnDrop(c),
        Err(e) => {
            eprintln!("migrate-cost: spawn: {e}");
            return ExitCode::from(1);
        }
    };
    let pid = child.0.id().to_string();
    let mut out = std::io::stdout();
    let procs = [format!("{a}/cgroup.procs"), format!("{b}/cgroup.procs")];
    let mut rc = ExitCode::SUCCESS;
    'gaps: for gap_ms in [0u64, 1, 2, 5, 10, 20, 50] {
        let mut d = Vec::with_capacity(n);
        for i in 0..n {
            if gap_ms > 0 {
                std::thread::sleep(Duration::from_millis(gap_ms));
            }
            let path = &procs[i % 2];
            let mut f = match std::fs::OpenOptions::new().write(true).open(path) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("migrate-cost: {path}: {e}");
                    rc = ExitCode::from(1);
                    break 'gaps;
                }
            };
            let t = now_ns();
            if let Err(e) = std::io::Write::write_all(&mut f, pid.as_bytes()) {
                eprintln!("migrate-cost: write {pid} to {path}: {e}");
                rc = ExitCode::from(1);
                break 'gaps;
            }
            d.push(now_ns() - t);
        }
        d.sort_unstable();
        let slow = d.iter().filter(|&&x| x > 2_000_000).count();
        let line = format!(
            "gap {gap_ms:2} ms: write {} ms, > 2 ms: {slow}/{n}",
            quantiles(&d)
        );
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    drop(child);
    rc
}

/// A child process that is killed and reaped when this goes out of scope.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
