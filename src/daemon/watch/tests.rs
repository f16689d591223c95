//! Tests of [`super`] (`watch`).

use super::*;
use std::fs;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tempfile::TempDir;
use tokio::time::timeout;

const T: Duration = Duration::from_secs(5);

async fn recv(rx: &mut mpsc::Receiver<Wake>) -> Wake {
    timeout(T, rx.recv())
        .await
        .expect("no wake within 5s")
        .expect("channel closed")
}

async fn assert_quiet(rx: &mut mpsc::Receiver<Wake>) {
    if let Ok(w) = timeout(Duration::from_millis(200), rx.recv()).await {
        panic!("unexpected wake {w:?}");
    }
}

/// Fds of this process whose /proc/self/fd link or fdinfo mentions `needle`.
fn fds_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let n = e.file_name().into_string().unwrap();
        let link = fs::read_link(e.path()).unwrap_or_default();
        let info = fs::read_to_string(format!("/proc/self/fdinfo/{n}")).unwrap_or_default();
        if link.to_string_lossy().contains(needle) || info.contains(needle) {
            out.push(n);
        }
    }
    out
}

/// `ino:<hex>` as inotify's fdinfo shows it for a watched file.
fn ino_tag(p: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("ino:{:x} ", fs::metadata(p).unwrap().ino())
}

#[tokio::test]
async fn file_watcher_fake_root() {
    let t = TempDir::new().unwrap();
    let root = Root::fake(t.path());
    let g = Path::new("/sys/fs/cgroup/app");
    root.mkdir_all(g).unwrap();
    let events = g.join("memory.events");
    let other = g.join("cgroup.events");
    root.write(&events, "high 0").unwrap();
    root.write(&other, "populated 0").unwrap();
    root.write(&g.join("cgroup.procs"), "").unwrap();
    let ino = ino_tag(&root.host_path(&events));

    let (tx, mut rx) = mpsc::channel(8);
    let mut w = FileWatcher::new(&root, tx).unwrap();
    // Device paths are normalized.
    w.watch(Path::new("/sys/fs/cgroup/app/../app/memory.events"))
        .unwrap();
    w.watch(&events).unwrap(); // again: no-op
    w.watch(&other).unwrap();
    assert_eq!(w.watched(), [other.clone(), events.clone()]);
    assert_eq!(fds_mentioning(&ino).len(), 1, "one inotify watch");

    // A missing file: error naming the device path.
    let e = w.watch(&g.join("nope")).unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.path(), g.join("nope"));

    // A burst of writes: one wake per read batch at most, with the device path.
    root.write(&events, "high 1").unwrap();
    root.write(&events, "high 2").unwrap();
    assert_eq!(
        recv(&mut rx).await,
        Wake::FileModified {
            path: events.clone()
        }
    );
    while let Ok(Some(w)) = timeout(Duration::from_millis(200), rx.recv()).await {
        assert_eq!(
            w,
            Wake::FileModified {
                path: events.clone()
            }
        );
    }

    // Unwatched: no wakes.
    w.unwatch(&other).unwrap();
    w.unwatch(&other).unwrap();
    root.write(&other, "populated 1").unwrap();
    assert_quiet(&mut rx).await;

    // Removal (the group was deleted): a wake, and the path is forgotten.
    root.rmdir(g).unwrap();
    assert_eq!(
        recv(&mut rx).await,
        Wake::FileModified {
            path: events.clone()
        }
    );
    assert!(w.watched().is_empty());
    w.unwatch(&events).unwrap(); // already ended: no-op

    // Recreated: watch again.
    root.mkdir_all(g).unwrap();
    root.write(&events, "high 0").unwrap();
    let ino = ino_tag(&root.host_path(&events));
    w.watch(&events).unwrap();
    root.write(&events, "high 5").unwrap();
    assert_eq!(
        recv(&mut rx).await,
        Wake::FileModified {
            path: events.clone()
        }
    );
    assert_eq!(fds_mentioning(&ino).len(), 1);

    // Dropping the watcher closes the inotify fd (the task is aborted).
    drop(w);
    tokio::task::yield_now().await;
    assert!(fds_mentioning(&ino).is_empty(), "inotify fd leaked");
    // Its sender went with the task.
    assert_eq!(timeout(T, rx.recv()).await.unwrap(), None);
}

#[tokio::test]
async fn file_watcher_full_channel_coalesces_and_stops_when_receiver_gone() {
    let t = TempDir::new().unwrap();
    let root = Root::fake(t.path());
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    root.write(a, "0").unwrap();
    root.write(b, "0").unwrap();
    let (tx, mut rx) = mpsc::channel(1);
    let mut w = FileWatcher::new(&root, tx).unwrap();
    w.watch(a).unwrap();
    w.watch(b).unwrap();
    for i in 0..50 {
        root.write(a, &i.to_string()).unwrap();
        root.write(b, &i.to_string()).unwrap();
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut got = Vec::new();
    while let Ok(Some(w)) = timeout(Duration::from_millis(200), rx.recv()).await {
        got.push(w);
    }
    // Both files were reported, far fewer wakes than writes.
    assert!(
        got.contains(&Wake::FileModified { path: a.into() }),
        "{got:?}"
    );
    assert!(
        got.contains(&Wake::FileModified { path: b.into() }),
        "{got:?}"
    );
    assert!(got.len() < 100, "{}", got.len());
    drop(rx);
    root.write(a, "x").unwrap();
    tokio::task::yield_now().await;
    drop(w);
}

fn pipe() -> (OwnedFd, OwnedFd) {
    // CLOEXEC: children forked by other tests must not hold the read end.
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap()
}

#[tokio::test]
async fn psi_task_error_means_gone_and_abort_closes_fd() {
    // The waiting side, with fds that behave like a dead trigger: the
    // write end of a pipe whose read end is closed reports EPOLLERR.
    let (r, wfd) = pipe();
    let trig = PsiTrigger::from_fd_for_test(wfd, "/test/pipe.pressure");
    let (tx, mut rx) = mpsc::channel(4);
    let h = spawn_psi_trigger(trig, 7, tx).unwrap();
    assert_quiet(&mut rx).await;
    drop(r);
    assert_eq!(recv(&mut rx).await, Wake::PsiGone { id: 7 });
    h.await.unwrap();

    // Abort: the task's fd is closed.
    let (r, wfd) = pipe();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&wfd);
    let inode = fs::read_link(format!("/proc/self/fd/{raw}")).unwrap();
    let inode = inode.to_string_lossy().into_owned(); // "pipe:[N]", unique
    let (tx, mut rx) = mpsc::channel(4);
    let h = spawn_psi_trigger(PsiTrigger::from_fd_for_test(wfd, "/p"), 1, tx).unwrap();
    assert_eq!(fds_mentioning(&inode).len(), 2); // both ends
    h.abort();
    assert!(h.await.unwrap_err().is_cancelled());
    assert_eq!(fds_mentioning(&inode).len(), 1, "only our read end is left");
    assert_eq!(rx.recv().await, None);
    drop(r);
}

#[tokio::test]
async fn psi_task_priority_wakes() {
    // EPOLLPRI without a kernel trigger: TCP urgent data.
    use std::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    s.set_nonblocking(true).unwrap();
    let (tx, mut rx) = mpsc::channel(1);
    let h = spawn_psi_trigger(PsiTrigger::from_fd_for_test(s.into(), "/tcp"), 3, tx).unwrap();
    assert_quiet(&mut rx).await;
    let oob = |c: &TcpStream| {
        let n = unsafe {
            libc::send(
                std::os::fd::AsRawFd::as_raw_fd(c),
                b"!".as_ptr().cast(),
                1,
                libc::MSG_OOB,
            )
        };
        assert_eq!(n, 1);
    };
    oob(&c);
    assert_eq!(recv(&mut rx).await, Wake::Psi { id: 3 });
    assert_quiet(&mut rx).await; // cleared: edge-triggered
    oob(&c);
    assert_eq!(recv(&mut rx).await, Wake::Psi { id: 3 });
    // Receiver gone: the task ends at its next wake.
    drop(rx);
    oob(&c);
    timeout(T, h).await.unwrap().unwrap();
    drop(c);
}

#[tokio::test]
async fn spawn_on_regular_file_fails_cleanly() {
    let t = TempDir::new().unwrap();
    let p = t.path().join("plain");
    fs::write(&p, "").unwrap();
    let f = fs::File::open(&p).unwrap();
    let (tx, _rx) = mpsc::channel(1);
    let e = spawn_psi_trigger(PsiTrigger::from_fd_for_test(f.into(), "/plain"), 0, tx).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EPERM));
    assert_eq!(e.path(), Path::new("/plain"));
    assert!(fds_mentioning(&p.to_string_lossy()).is_empty());
}

// ---- Host cgroup2 tests (root and the host's cgroup2 mount needed) ----

const HOST_V2: &str = "/sys/fs/cgroup/unified";

/// A `cgwarden-bench-*` group on the host's cgroup2 mount, holding only
/// processes this test started; killed, reaped and removed on drop.
struct BenchGroup {
    dir: PathBuf,
    children: Vec<std::process::Child>,
}

impl BenchGroup {
    /// A fresh `cgwarden-bench-TAG-PID` group under the host's cgroup2
    /// mount. The test needs root and that mount (CI has both); without
    /// them it fails, saying so, rather than passing unrun.
    fn create(tag: &str) -> BenchGroup {
        let procs = Path::new(HOST_V2).join("cgroup.procs");
        if let Err(e) = nix::unistd::access(&procs, nix::unistd::AccessFlags::W_OK) {
            panic!(
                "{} not writable ({e}): this test needs root and the host's cgroup2 mount",
                procs.display()
            );
        }
        let dir = Path::new(HOST_V2).join(format!("cgwarden-bench-{tag}-{}", std::process::id()));
        if let Err(e) = fs::create_dir(&dir) {
            panic!("cannot create {} ({e})", dir.display());
        }
        BenchGroup {
            dir,
            children: Vec::new(),
        }
    }

    /// Starts a nice-19 busy loop and moves it into the group.
    fn spawn_busy(&mut self) {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push(child);
        // SAFETY: plain FFI call on our own child's pid.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, pid, 19) };
        fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    fn kill_children(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn remove(&mut self) -> io::Result<()> {
        self.kill_children();
        let mut last = Ok(());
        for _ in 0..100 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => last = Err(e),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        last
    }
}

impl Drop for BenchGroup {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("WARNING: could not remove {}: {e}", self.dir.display());
        }
    }
}

/// A second trigger on the same file, polled by a plain thread with
/// blocking poll(2): its wake-up times are the reference for "when the
/// kernel woke trigger pollers" (the kernel fires all triggers of a group
/// in the same pass).
fn observer(
    trig: PsiTrigger,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<(std::time::Instant, i16)>> {
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let mut seen = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let mut p = libc::pollfd {
                fd: trig.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            };
            // SAFETY: one valid pollfd, owned by `trig` for the call.
            let n = unsafe { libc::poll(&mut p, 1, 50) };
            if n > 0 {
                seen.push((std::time::Instant::now(), p.revents));
                if p.revents & libc::POLLERR != 0 {
                    break;
                }
            }
        }
        seen
    })
}

#[tokio::test]
async fn host_cgroup_psi_trigger_and_removal() {
    use crate::kernel::psi_trigger::{self, pressure_path, TriggerError};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    let mut g = BenchGroup::create("psi");
    let root = Root::real();
    let file = pressure_path(Some(&g.dir), "cpu");
    let ms = Duration::from_millis;
    const ID: usize = 1001;

    // A 1 s window: only with CAP_SYS_RESOURCE.
    let cap = psi_trigger::has_cap_sys_resource(&root);
    match psi_trigger::open(&root, &file, "some", ms(100), ms(1000)) {
        Ok(_) => {
            eprintln!("1s window accepted (CAP_SYS_RESOURCE={cap:?})");
            assert_ne!(cap, Some(false));
        }
        Err(TriggerError::Unsupported { reason, .. }) => {
            eprintln!("1s window: Unsupported: {reason} (CAP_SYS_RESOURCE={cap:?})");
            assert_ne!(cap, Some(true));
        }
        Err(e) => panic!("unexpected: {e}"),
    }
    // A 2 s window works unprivileged too (kernel >= 6.4).
    let trig = psi_trigger::open(&root, &file, "some", ms(100), ms(2000)).unwrap();
    assert_eq!(trig.spec(), "some 100000 2000000");
    let fd_link = file.to_string_lossy().into_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let obs = observer(
        psi_trigger::open(&root, &file, "some", ms(100), ms(2000)).unwrap(),
        stop.clone(),
    );

    let (tx, mut rx) = mpsc::channel(16);
    let t0 = Instant::now();
    let h = spawn_psi_trigger(trig, ID, tx.clone()).unwrap();
    let mut fw = FileWatcher::new(&root, tx).unwrap();
    let events_file = g.dir.join("cgroup.events");
    fw.watch(&events_file).unwrap();

    // Idle group: no stall, no trigger.
    let mut log: Vec<(Duration, Wake)> = Vec::new();
    while let Ok(Some(w)) = timeout(ms(300), rx.recv()).await {
        log.push((t0.elapsed(), w));
    }
    assert!(
        !log.iter().any(|(_, w)| matches!(w, Wake::Psi { .. })),
        "{log:?}"
    );

    // 4 busy loops on this machine's CPUs: CPU pressure inside the group.
    let t_load = Instant::now();
    for _ in 0..4 {
        g.spawn_busy();
    }
    let mut psi_at = Vec::new();
    let deadline = t_load + Duration::from_secs(7);
    while Instant::now() < deadline {
        if let Ok(Some(w)) = timeout(deadline - Instant::now(), rx.recv()).await {
            let now = Instant::now();
            if w == (Wake::Psi { id: ID }) {
                psi_at.push(now);
            }
            log.push((t0.elapsed(), w));
        }
    }
    assert!(
        !psi_at.is_empty(),
        "no Psi wake within 7s of CPU load: {log:?}"
    );
    let first = psi_at[0] - t_load;

    // Stop the load; then remove the group while both triggers are open.
    g.kill_children();
    while let Ok(Some(w)) = timeout(ms(500), rx.recv()).await {
        log.push((t0.elapsed(), w));
    }
    let before_rm = log.len();
    let t_rm = Instant::now();
    g.remove().unwrap();
    let (mut gone_after, mut removed_after) = (None, None);
    let deadline = t_rm + Duration::from_secs(5);
    while Instant::now() < deadline {
        match timeout(deadline - Instant::now(), rx.recv()).await {
            Ok(Some(w)) => {
                if w == (Wake::PsiGone { id: ID }) {
                    gone_after = Some(t_rm.elapsed());
                }
                if matches!(&w, Wake::FileModified { path } if *path == events_file) {
                    removed_after = Some(t_rm.elapsed());
                }
                log.push((t0.elapsed(), w));
                if gone_after.is_some() && removed_after.is_some() {
                    break;
                }
            }
            _ => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let seen = obs.join().unwrap();

    eprintln!(
        "first Psi wake {first:?} after load start; {} Psi wakes in 7s",
        psi_at.len()
    );
    eprintln!("after rmdir: PsiGone {gone_after:?}, FileModified(cgroup.events) {removed_after:?}");
    let changed = Wake::FileModified {
        path: events_file.clone(),
    };
    let populated_wakes = log[..before_rm]
        .iter()
        .filter(|(_, w)| *w == changed)
        .count();
    let removal_wake = log[before_rm..].iter().any(|(_, w)| *w == changed);
    for (t, w) in &log {
        eprintln!("  +{t:?} {w:?}");
    }
    let rel = |t: Instant| t.saturating_duration_since(t0);
    for (t, rev) in &seen {
        eprintln!("  observer +{:?} revents={rev:#x}", rel(*t));
    }
    // In-task latency: readiness seen -> Wake in the channel.
    for (id, ready, sent) in PSI_TIMING.lock().unwrap().iter() {
        if *id == ID {
            eprintln!(
                "  in-task latency (readiness -> try_send done): {:?}",
                *sent - *ready
            );
        }
    }
    // End to end, against the observer's poll(2) return for the same
    // kernel pass (the nearest observer wake-up within 100ms).
    for r in &psi_at {
        let near = seen
            .iter()
            .map(|(o, _)| *o)
            .min_by_key(|o| if o <= r { *r - *o } else { *o - *r });
        match near {
            Some(o) if o <= *r && *r - o < ms(100) => {
                eprintln!(
                    "  observer poll returned {:?} before the Wake was received",
                    *r - o
                )
            }
            Some(o) if o > *r && o - *r < ms(100) => {
                eprintln!(
                    "  Wake received {:?} before the observer's poll returned",
                    o - *r
                )
            }
            _ => eprintln!("  no observer wake-up near this Wake"),
        }
    }
    assert!(
        gone_after.is_some(),
        "no PsiGone within 5s of rmdir: {log:?}"
    );
    // populated 0->1 and 1->0 (IN_MODIFY from cgroupfs) ...
    assert!(populated_wakes >= 2, "{log:?}");
    // ... and the removal (seen by the guard watch on the parent).
    assert!(removal_wake, "{log:?}");
    assert!(fw.watched().is_empty(), "removal not noticed: {log:?}");
    timeout(T, h).await.unwrap().unwrap();
    assert!(fds_mentioning(&fd_link).is_empty(), "trigger fd leaked");
    drop(fw);
}
