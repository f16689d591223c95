//! The `procfs` crate (0.18, default features off) against cgwarden's own
//! readers in src/kernel/procfs.rs, on what placement and the samplers read:
//! `/proc/PID/{stat,status,comm,exe,cmdline,cgroup}`.
//!
//! 1. Speed per read on this host's /proc, for processes started here
//!    (reads only): each reader opens, reads and parses the file once per
//!    call, as a scan does for a new pid.
//! 2. Bounded reads: a process with an 800 KiB command line.
//! 3. Vanishing pids: a process reaped between two reads.
//! 4. A `--root` fake tree (cgwarden::testing::FakeTree).
//!
//! Prints numbers; asserts nothing about timings.

use cgwarden::bench::pid_cgroup;
use cgwarden::testing::{FakeProcess, FakeTree};
use cgwarden::bench::procfs as hand;
use cgwarden::testing::Root;
use procfs::process::Process;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const ROUNDS: usize = 20_000;
const FIELDS: hand::Fields = hand::Fields {
    exe: true,
    cmdline: true,
    uid: true,
};

/// Median and p99 of `f` in microseconds over `ROUNDS` calls.
fn time(mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..500 {
        f();
    }
    let mut v: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

/// `sh -c 'sleep 600; :' sh ARGS…`: a shell that stays (the `:` after
/// sleep) with ARGS in its command line.
fn sleeper(args: &[String]) -> Child {
    Command::new("sh")
        .args(["-c", "sleep 600; :", "sh"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sleep")
}

/// Gives a child started just now the time to exec (its /proc/PID shows the
/// parent's command line until then).
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(300));
}

fn speed(pid: i32) {
    let root = Root::real();
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let p = |f: &str| dir.join(f);
    println!(
        "-- per read, /proc/{pid} (a shell started here), {ROUNDS} rounds; median / p99 µs --"
    );
    println!(
        "{:<10} {:>18} {:>22} {:>22}",
        "file", "hand (cgwarden)", "procfs (open+read)", "procfs (Process kept)"
    );
    let kept = Process::new(pid).expect("procfs: the sleeper");
    type Read<'a> = Box<dyn FnMut() + 'a>;
    // (file, this module, the crate opening a Process per read, the crate
    // with one Process kept)
    let rows: Vec<(&str, Read, Read, Read)> = vec![
        (
            "stat",
            Box::new(|| {
                black_box(hand::stat(&root, pid).unwrap());
            }),
            Box::new(|| {
                black_box(Process::new(pid).unwrap().stat().unwrap());
            }),
            Box::new(|| {
                black_box(kept.stat().unwrap());
            }),
        ),
        (
            "status",
            Box::new(|| {
                let b = hand::read_capped(&root, &p("status"), hand::STATUS_MAX).unwrap();
                black_box(hand::parse_status(std::str::from_utf8(&b).unwrap()));
            }),
            Box::new(|| {
                black_box(Process::new(pid).unwrap().status().unwrap());
            }),
            Box::new(|| {
                black_box(kept.status().unwrap());
            }),
        ),
        (
            "comm",
            Box::new(|| {
                black_box(hand::comm(&root, pid).unwrap());
            }),
            // The crate has no comm(): it is stat's field 2.
            Box::new(|| {
                black_box(Process::new(pid).unwrap().stat().unwrap().comm);
            }),
            Box::new(|| {
                black_box(kept.stat().unwrap().comm);
            }),
        ),
        (
            "exe",
            Box::new(|| {
                black_box(root.read_link(&p("exe")).unwrap());
            }),
            Box::new(|| {
                black_box(Process::new(pid).unwrap().exe().unwrap());
            }),
            Box::new(|| {
                black_box(kept.exe().unwrap());
            }),
        ),
        (
            "cmdline",
            Box::new(|| {
                let b = hand::read_capped(&root, &p("cmdline"), hand::CMDLINE_MAX).unwrap();
                black_box(hand::parse_cmdline(&b));
            }),
            Box::new(|| {
                black_box(Process::new(pid).unwrap().cmdline().unwrap());
            }),
            Box::new(|| {
                black_box(kept.cmdline().unwrap());
            }),
        ),
        (
            "cgroup",
            Box::new(|| {
                black_box(pid_cgroup(&root, pid).unwrap());
            }),
            Box::new(|| {
                black_box(Process::new(pid).unwrap().cgroups().unwrap());
            }),
            Box::new(|| {
                black_box(kept.cgroups().unwrap());
            }),
        ),
    ];
    for (name, mut a, mut b, mut c) in rows {
        let (a, b, c) = (time(&mut a), time(&mut b), time(&mut c));
        println!(
            "{name:<10} {:>8.2} / {:>7.2} {:>10.2} / {:>9.2} {:>10.2} / {:>9.2}",
            a.0, a.1, b.0, b.1, c.0, c.1
        );
    }
}

fn bounded() {
    // 200 arguments of 4 KiB: an 800 KiB command line.
    let args: Vec<String> = (0..200)
        .map(|i| format!("{i:04}{}", "x".repeat(4092)))
        .collect();
    let mut child = sleeper(&args);
    settle();
    let pid = child.id() as i32;
    let root = Root::real();
    let path = PathBuf::from(format!("/proc/{pid}/cmdline"));
    let full = std::fs::read(&path).unwrap().len();
    let hand_b = hand::read_capped(&root, &path, hand::CMDLINE_MAX)
        .unwrap()
        .len();
    let crate_v = Process::new(pid).unwrap().cmdline().unwrap();
    let crate_b: usize = crate_v.iter().map(|a| a.len() + 1).sum();
    let (th, tc) = (
        time(|| {
            black_box(hand::read_capped(&root, &path, hand::CMDLINE_MAX).unwrap());
        }),
        time(|| {
            black_box(Process::new(pid).unwrap().cmdline().unwrap());
        }),
    );
    println!("-- bounded reads: /proc/{pid}/cmdline is {full} bytes --");
    println!(
        "hand:   reads {hand_b} bytes (CMDLINE_MAX), median {:.1} µs",
        th.0
    );
    println!(
        "procfs: reads {crate_b} bytes (all of it, no cap in the API), median {:.1} µs",
        tc.0
    );
    let _ = child.kill();
    let _ = child.wait();
    // Not UTF-8: procfs reads cmdline with read_to_string.
    let mut child = {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        Command::new("sleep")
            .arg0(std::ffi::OsStr::from_bytes(b"bad\xffname"))
            .arg("600")
            .spawn()
            .expect("start sleep")
    };
    settle();
    let pid = child.id() as i32;
    let path = PathBuf::from(format!("/proc/{pid}/cmdline"));
    let hand_v = hand::parse_cmdline(&hand::read_capped(&root, &path, hand::CMDLINE_MAX).unwrap());
    let crate_r = Process::new(pid).unwrap().cmdline();
    println!("-- argv[0] not UTF-8 (bad\\377name) --");
    println!("hand:   {hand_v:?}");
    println!("procfs: {crate_r:?}");
    let _ = child.kill();
    let _ = child.wait();
}

fn vanishing() {
    let root = Root::real();
    let mut child = sleeper(&[]);
    settle();
    let pid = child.id() as i32;
    let kept = Process::new(pid).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    println!("-- vanishing: pid {pid} reaped after it was opened --");
    println!(
        "hand:   stat {:?}",
        hand::stat(&root, pid).map(|s| s.is_some())
    );
    println!("hand:   comm {:?}", hand::comm(&root, pid));
    println!(
        "hand:   user_process {:?}",
        hand::user_process(&root, pid, FIELDS).map(|p| p.is_some())
    );
    println!("procfs: new  {:?}", Process::new(pid).map(|_| ()));
    println!("procfs: kept stat {:?}", kept.stat().map(|s| s.pid));
    println!("procfs: kept cmdline {:?}", kept.cmdline());
}

fn fake_root() {
    let tmp = tempfile::tempdir().unwrap();
    let t = FakeTree::standard(tmp.path()).unwrap();
    t.add_process(&FakeProcess::new(400, "motion_control"))
        .unwrap();
    let root = Root::fake(tmp.path());
    println!("-- a --root fake tree (proc/400 as FakeTree lays it out: a 4-line status) --");
    println!("hand:   comm {:?}", hand::comm(&root, 400));
    println!(
        "hand:   user_process {:?}",
        hand::user_process(&root, 400, FIELDS)
    );
    println!("hand:   cgroup {:?}", pid_cgroup(&root, 400));
    let p = Process::new_with_root(tmp.path().join("proc/400")).map_err(|e| e.to_string());
    match p {
        Ok(p) => {
            println!("procfs: new_with_root(DIR/proc/400) ok, pid {}", p.pid);
            println!(
                "procfs: stat {:?}",
                p.stat().map(|s| s.comm).map_err(|e| e.to_string())
            );
            println!(
                "procfs: status {:?}",
                p.status()
                    .map(|s| (s.name, s.ruid))
                    .map_err(|e| e.to_string())
            );
            println!(
                "procfs: cmdline {:?}",
                p.cmdline().map_err(|e| e.to_string())
            );
            println!("procfs: exe {:?}", p.exe().map_err(|e| e.to_string()));
            println!(
                "procfs: cgroups {:?}",
                p.cgroups()
                    .map(|c| c.0.into_iter().map(|g| g.pathname).collect::<Vec<_>>())
                    .map_err(|e| e.to_string())
            );
        }
        Err(e) => println!("procfs: new_with_root: {e}"),
    }
    let all = procfs::process::all_processes_with_root(tmp.path().join("proc"))
        .map(|it| it.filter_map(Result::ok).map(|p| p.pid).collect::<Vec<_>>());
    println!(
        "procfs: all_processes_with_root(DIR/proc) {:?}",
        all.map_err(|e| e.to_string())
    );
}

fn main() {
    let mut child = sleeper(&[]);
    settle();
    speed(child.id() as i32);
    let _ = child.kill();
    let _ = child.wait();
    bounded();
    vanishing();
    fake_root();
}
