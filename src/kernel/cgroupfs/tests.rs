//! Tests of [`super`] (`cgroupfs`).

use super::*;
use std::fs;
use tempfile::TempDir;

#[test]
fn cgroup2_mount_options_from_mountinfo() {
    let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
              41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
              50 1 0:40 / /mnt/cg rw - cgroup2 none rw,favordynmods,memory_recursiveprot\n";
    let o = parse_cgroup2_options(mi, Path::new("/sys/fs/cgroup/unified")).unwrap();
    assert_eq!(o, ["rw", "nsdelegate"]);
    let o = parse_cgroup2_options(mi, Path::new("/mnt/cg")).unwrap();
    assert!(o.iter().any(|x| x == "favordynmods"));
    // A tmpfs at the path is not a cgroup2 mount; an unknown path is none.
    assert_eq!(parse_cgroup2_options(mi, Path::new("/sys/fs/cgroup")), None);
    assert_eq!(
        parse_cgroup2_options("garbage\n - \n", Path::new("/x")),
        None
    );
}

/// Fake tree with a cgroup2 mount at /sys/fs/cgroup offering cpu/memory/io.
fn tree() -> (TempDir, CgroupFs) {
    let t = TempDir::new().unwrap();
    let cg = t.path().join("sys/fs/cgroup");
    fs::create_dir_all(&cg).unwrap();
    fs::write(cg.join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
    fs::write(cg.join("cgroup.subtree_control"), "").unwrap();
    fs::write(cg.join("cgroup.procs"), "1\n100\n").unwrap();
    let fs = CgroupFs::new(Root::fake(t.path()), "/sys/fs/cgroup");
    (t, fs)
}

fn add_proc(t: &TempDir, pid: i32, cgroup: &str) {
    let d = t.path().join(format!("proc/{pid}"));
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join("cgroup"), cgroup).unwrap();
}

#[test]
fn paths() {
    let (_t, c) = tree();
    assert_eq!(c.dir(""), PathBuf::from("/sys/fs/cgroup"));
    assert_eq!(c.dir("a/b"), PathBuf::from("/sys/fs/cgroup/a/b"));
    assert_eq!(c.dir("/a//./b/"), PathBuf::from("/sys/fs/cgroup/a/b"));
    assert_eq!(c.dir("../../etc"), PathBuf::from("/sys/fs/cgroup/etc"));
    assert_eq!(
        c.file("a", "cpu.weight"),
        PathBuf::from("/sys/fs/cgroup/a/cpu.weight")
    );
    assert_eq!(
        c.file("", "cgroup.procs"),
        PathBuf::from("/sys/fs/cgroup/cgroup.procs")
    );
    assert_eq!(c.file("a", "../../x"), PathBuf::from("/sys/fs/cgroup/x"));
}

#[test]
fn controllers_and_subtree_control() {
    let (t, c) = tree();
    assert_eq!(
        c.controllers("").unwrap(),
        ["cpuset", "cpu", "io", "memory", "pids"]
    );
    assert!(c.subtree_control("").unwrap().is_empty());
    fs::write(
        t.path().join("sys/fs/cgroup/cgroup.subtree_control"),
        "+cpu +memory -io\n",
    )
    .unwrap();
    assert_eq!(c.subtree_control("").unwrap(), ["cpu", "memory"]);
    c.enable_controllers("", &["memory", "+cpuset"]).unwrap();
    assert_eq!(c.subtree_control("").unwrap(), ["cpu", "memory", "cpuset"]);
    // merged like the kernel's toggles; tokens keep their spelling
    assert_eq!(
        c.read("", "cgroup.subtree_control").unwrap(),
        "+cpu +memory +cpuset"
    );
    c.enable_controllers("", &[]).unwrap();
    // a new group inherits the parent's subtree_control as its controllers
    assert!(c.mkdir("g").unwrap());
    assert!(!c.mkdir("g").unwrap());
    assert_eq!(c.controllers("g").unwrap(), ["cpu", "memory", "cpuset"]);
    assert!(c.procs("g").unwrap().is_empty());
    assert_eq!(c.events("g").unwrap()["populated"], 0);
    assert!(c.controllers("missing").unwrap_err().is_not_found());
}

#[test]
fn real_enable_writes_plus_tokens() {
    let t = TempDir::new().unwrap();
    fs::write(t.path().join("cgroup.subtree_control"), "").unwrap();
    // A non-fake Root on a tempdir: exercises the real-kernel formatting.
    let c = CgroupFs::new(Root::real_at(t.path()), "/");
    c.enable_controllers("", &["cpu", "+memory"]).unwrap();
    assert_eq!(
        fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
        "+cpu +memory"
    );
    // real: a knob that does not exist is never created
    assert!(c.write("", "cpu.wieght", "1").unwrap_err().is_not_found());
    assert!(!t.path().join("cpu.wieght").exists());
    assert!(!c.knob_exists("", "cpu.weight"));
}

#[test]
fn knobs_read_write_exists() {
    let (t, c) = tree();
    c.mkdir("g").unwrap();
    assert!(!c.knob_exists("g", "memory.high"));
    c.enable_controllers("", &["cpu", "memory"]).unwrap();
    assert!(c.knob_exists("g", "memory.high"));
    assert!(c.knob_exists("g", "cpu.uclamp.min"));
    assert!(!c.knob_exists("g", "io.weight"));
    assert!(!c.knob_exists("g", "cgroup.freeze"));
    assert!(c.knob_exists("g", "cgroup.procs"));
    assert!(!c.knob_exists("nogroup", "memory.high"));
    assert!(c.read("g", "memory.high").unwrap_err().is_not_found());
    c.write("g", "memory.high", "max").unwrap();
    assert_eq!(c.read("g", "memory.high").unwrap(), "max");
    assert_eq!(
        fs::read_to_string(t.path().join("sys/fs/cgroup/g/memory.high")).unwrap(),
        "max\n"
    );
    assert!(c.exists("g"));
    assert!(!c.exists("h"));
    // write into a group that does not exist fails, creates nothing
    assert!(c.write("h", "cpu.weight", "1").unwrap_err().is_not_found());
    assert!(!c.exists("h"));
}

#[test]
fn procs_tolerates_junk() {
    let (t, c) = tree();
    fs::write(
        t.path().join("sys/fs/cgroup/cgroup.procs"),
        "1\nabc\n-5\n  42 \n\n",
    )
    .unwrap();
    assert_eq!(c.procs("").unwrap(), [1, 42]);
}

#[test]
fn move_pid_emulation() {
    let (t, c) = tree();
    c.mkdir("a").unwrap();
    c.mkdir("b").unwrap();
    add_proc(&t, 100, "0::/\n");
    c.move_pid("a", 100).unwrap();
    assert_eq!(c.procs("a").unwrap(), [100]);
    assert_eq!(c.procs("").unwrap(), [1]);
    assert_eq!(pid_cgroup(c.root(), 100).unwrap().as_deref(), Some("/a"));
    c.move_pid("a", 100).unwrap(); // idempotent
    assert_eq!(c.procs("a").unwrap(), [100]);
    c.move_pid("b", 100).unwrap();
    assert!(c.procs("a").unwrap().is_empty());
    assert_eq!(c.procs("b").unwrap(), [100]);
    // hybrid lines are kept
    add_proc(&t, 7, "12:pids:/x\n1:name=systemd:/y\n");
    c.move_pid("a", 7).unwrap();
    assert_eq!(
        fs::read_to_string(t.path().join("proc/7/cgroup")).unwrap(),
        "12:pids:/x\n1:name=systemd:/y\n0::/a\n"
    );
    // vanished pid: ESRCH, nothing written
    let e = c.move_pid("a", 999).unwrap_err();
    assert!(e.is_gone());
    assert_eq!(e.errno(), Some(libc::ESRCH));
    assert_eq!(c.procs("a").unwrap(), [7]);
    // missing group
    assert!(c.move_pid("zz", 7).unwrap_err().is_not_found());
    // back to the root
    c.move_pid("", 7).unwrap();
    assert_eq!(pid_cgroup(c.root(), 7).unwrap().as_deref(), Some("/"));
    assert!(c.procs("a").unwrap().is_empty());
}

/// `kill` with real-kernel semantics on a test directory: `cgroup.kill`
/// when present, else SIGKILL to every listed pid.
#[test]
fn kill_writes_cgroup_kill_or_signals_every_pid() {
    let t = TempDir::new().unwrap();
    let run = t.path().join("cg/cgwarden.hooks/h-1");
    fs::create_dir_all(&run).unwrap();
    let c = CgroupFs::new(Root::real_at(t.path()), "/cg");
    fs::write(run.join("cgroup.kill"), "").unwrap();
    c.kill("cgwarden.hooks/h-1").unwrap();
    assert_eq!(fs::read_to_string(run.join("cgroup.kill")).unwrap(), "1");
    // Before 5.14: no cgroup.kill.
    fs::remove_file(run.join("cgroup.kill")).unwrap();
    let mut a = std::process::Command::new("/bin/sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let mut b = std::process::Command::new("/bin/sleep")
        .arg("60")
        .spawn()
        .unwrap();
    fs::write(
        run.join("cgroup.procs"),
        format!("{}\n{}\n", a.id(), b.id()),
    )
    .unwrap();
    fs::write(run.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
    assert!(c.populated("cgwarden.hooks/h-1").unwrap());
    c.kill("cgwarden.hooks/h-1").unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(a.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(b.wait().unwrap().signal(), Some(libc::SIGKILL));
    fs::write(run.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
    assert!(!c.populated("cgwarden.hooks/h-1").unwrap());
    // A group that does not exist: an error naming its path.
    let e = c.kill("cgwarden.hooks/h-2").unwrap_err();
    assert!(e.to_string().contains("/cg/cgwarden.hooks/h-2"), "{e}");
}

#[test]
fn move_pid_in_delegated_subtree() {
    let (t, _) = tree();
    let sub = t.path().join("sys/fs/cgroup/cgwarden.slice");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("cgroup.controllers"), "cpu memory").unwrap();
    fs::write(sub.join("cgroup.subtree_control"), "cpu memory").unwrap();
    let c = CgroupFs::new(Root::fake(t.path()), "/sys/fs/cgroup/cgwarden.slice");
    assert_eq!(c.mount(), PathBuf::from("/sys/fs/cgroup"));
    c.mkdir("vision").unwrap();
    add_proc(&t, 55, "0::/user.slice\n");
    c.move_pid("vision", 55).unwrap();
    assert_eq!(
        pid_cgroup(c.root(), 55).unwrap().as_deref(),
        Some("/cgwarden.slice/vision")
    );
}

#[test]
fn mount_detection() {
    let t = TempDir::new().unwrap();
    let r = Root::fake(t.path());
    // nothing populated: rule-based fallback
    assert_eq!(
        CgroupFs::new(r.clone(), "/sys/fs/cgroup/x").mount(),
        PathBuf::from("/sys/fs/cgroup")
    );
    assert_eq!(
        CgroupFs::new(r.clone(), "/sys/fs/cgroup/unified/x").mount(),
        PathBuf::from("/sys/fs/cgroup/unified")
    );
    assert_eq!(
        CgroupFs::new(r.clone(), "/cg").mount(),
        PathBuf::from("/cg")
    );
    // hybrid: /sys/fs/cgroup is a tmpfs without cgroup.controllers
    let u = t.path().join("sys/fs/cgroup/unified/x");
    fs::create_dir_all(&u).unwrap();
    fs::write(u.join("cgroup.controllers"), "").unwrap();
    fs::write(u.parent().unwrap().join("cgroup.controllers"), "").unwrap();
    assert_eq!(
        CgroupFs::new(r.clone(), "/sys/fs/cgroup/unified/x").mount(),
        PathBuf::from("/sys/fs/cgroup/unified")
    );
    // custom mount point
    fs::create_dir_all(t.path().join("cg/a")).unwrap();
    fs::write(t.path().join("cg/cgroup.controllers"), "").unwrap();
    fs::write(t.path().join("cg/a/cgroup.controllers"), "").unwrap();
    assert_eq!(CgroupFs::new(r, "/cg/a").mount(), PathBuf::from("/cg"));
}

#[test]
fn events_and_flat_keyed() {
    let (t, c) = tree();
    fs::write(
        t.path().join("sys/fs/cgroup/memory.events"),
        "low 0\nhigh 12\nmax 3\noom 0\noom_kill 1\njunk\nbad x\nthree a 1\n",
    )
    .unwrap();
    let m = c.memory_events("").unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m["high"], 12);
    assert_eq!(m["oom_kill"], 1);
    assert!(c.events("").unwrap_err().is_not_found());
    assert!(parse_flat_keyed("").is_empty());
}

#[test]
fn psi_of_group() {
    let (t, c) = tree();
    fs::write(
        t.path().join("sys/fs/cgroup/cpu.pressure"),
        "some avg10=2.00 avg60=1.00 avg300=0.50 total=10\n",
    )
    .unwrap();
    let p = c.psi("", "cpu").unwrap();
    assert_eq!(p.some.unwrap().avg10, 2.0);
    assert!(p.full.is_none());
    assert!(c.psi("", "io").unwrap_err().is_not_found());
}

#[test]
fn pid_cgroup_parsing() {
    assert_eq!(parse_pid_cgroup("0::/a/b\n").as_deref(), Some("/a/b"));
    assert_eq!(
        parse_pid_cgroup("11:cpu:/x\n0::/init.scope\n").as_deref(),
        Some("/init.scope")
    );
    assert_eq!(parse_pid_cgroup("11:cpu:/x\n"), None);
    assert_eq!(parse_pid_cgroup(""), None);
    assert_eq!(parse_pid_cgroup("0::garbage"), None);
    let t = TempDir::new().unwrap();
    let r = Root::fake(t.path());
    assert!(pid_cgroup(&r, 4).unwrap_err().is_gone());
    add_proc(&t, 4, "0::/\n");
    assert_eq!(pid_cgroup(&r, 4).unwrap().as_deref(), Some("/"));
}
