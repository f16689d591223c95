//! Event sources that wake the daemon's evaluation loop: PSI
//! triggers and inotify watches on kernel files (`memory.events`,
//! `cgroup.events`, the policy file).
//!
//! Every source delivers [`Wake`]s on a `tokio::sync::mpsc::Sender` the
//! caller provides. A wake means "evaluate now", not a count: while a
//! source waits for room in a full channel it does not poll its fd, so
//! further kernel events coalesce in the kernel (a PSI trigger keeps a single
//! pending-event flag; epoll is edge-triggered; inotify merges identical
//! queued events), and at most one wake per source is in flight beyond what
//! the channel holds. Nothing is lost and the kernel is never blocked.
//!
//! Both sources are cancel-safe: aborting a PSI task's `JoinHandle` (or
//! dropping a [`FileWatcher`]) drops the future that owns the fd, which
//! deregisters it from epoll and closes it (closing a PSI trigger's fd
//! unregisters the trigger in the kernel). They need a running tokio runtime
//! (current-thread is enough) when they are created.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use tokio::io::unix::AsyncFd;
use tokio::io::{Interest, Ready};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::task::JoinHandle;

use crate::kernel::psi_trigger::PsiTrigger;
use crate::kernel::{Error, Result, Root};

/// Why the daemon should evaluate now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// PSI trigger `id` fired (stall above its threshold within its window).
    Psi { id: usize },
    /// PSI trigger `id` is dead: its group was removed (the kernel reported
    /// POLLERR). Its task has ended; register it again once the group exists.
    PsiGone { id: usize },
    /// A watched file changed, or its watch ended because the file was
    /// removed (e.g. its group was deleted) — re-read it, and re-watch it if
    /// it is to be watched again. `path` is the device path given to
    /// [`FileWatcher::watch`].
    FileModified { path: PathBuf },
    /// A source failed and stopped; `what` says which and why.
    WatchError { what: String },
    /// Exec/exit events changed some `running()` answer.
    Presence,
    /// The policy file was written or replaced (debounced): reload if its
    /// content changed.
    PolicyChanged,
    /// A `settings.critical` process exited: the exec thread
    /// counted it; the loop publishes the `critical_exit` event.
    CriticalExit {
        pid: i32,
        comm: String,
        pattern: String,
        /// Found gone by a scan (its exit event was not seen).
        by_scan: bool,
        at: std::time::SystemTime,
    },
}

/// How long the policy watch waits after a change for more of them (an
/// editor's save is several events; a package manager may write twice).
pub(crate) const POLICY_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Watches the policy file's directory (IN_CLOSE_WRITE, IN_MOVED_TO,
/// IN_CREATE for the file's name) in a task of `services` (the
/// `cgw-services` thread), so an in-place write, an editor's
/// write-temp-then-rename and a package manager's replace all count; sends
/// [`Wake::PolicyChanged`] once the changes have been quiet for
/// [`POLICY_DEBOUNCE`] (a timer: the thread serves its other tasks
/// meanwhile). The directory (not the file) is watched: a watch on the file
/// would follow the old inode after a rename. The task ends when the
/// receiver is gone (checked at the next change).
pub(crate) fn spawn_policy_watch(
    services: &crate::kernel::runtime::Spawner,
    policy: &Path,
    tx: mpsc::Sender<Wake>,
) -> Result<()> {
    let dir = match policy.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = policy.file_name().map(|n| n.to_os_string()) else {
        return Err(Error::io(
            "policy watch",
            policy,
            io::Error::new(io::ErrorKind::InvalidInput, "no file name"),
        ));
    };
    let ino = Inotify::init().map_err(|e| Error::io("inotify_init1", &dir, e))?;
    ino.watches()
        .add(
            &dir,
            WatchMask::CLOSE_WRITE | WatchMask::MOVED_TO | WatchMask::CREATE,
        )
        .map_err(|e| Error::io("inotify_add_watch", &dir, e))?;
    let task_dir = dir.clone();
    services
        .spawn(move || async move {
            let failed = |e: io::Error| Wake::WatchError {
                what: format!("policy watch on {}: {e}", task_dir.display()),
            };
            match crate::kernel::wait::async_fd(ino, Interest::READABLE) {
                Ok(afd) => {
                    if let Err(e) = policy_loop(afd, &name, &tx).await {
                        deliver(&tx, failed(e)).await;
                    }
                }
                Err((e, _)) => {
                    deliver(&tx, failed(e)).await;
                }
            }
        })
        .map_err(|e| Error::io("policy watch", &dir, e))?;
    Ok(())
}

/// The policy watch's task: `Ok` when the receiver is gone, the error that
/// stopped the inotify fd otherwise.
async fn policy_loop(
    mut afd: AsyncFd<Inotify>,
    name: &std::ffi::OsStr,
    tx: &mpsc::Sender<Wake>,
) -> io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        // A change to the file's name.
        let mut guard = afd.readable_mut().await?;
        match guard.try_io(|inner| {
            let events = inner.get_mut().read_events(&mut buf)?;
            Ok(events.into_iter().any(|e| e.name == Some(name)))
        }) {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) | Err(_) => continue,
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(e)) => return Err(e),
        }
        // Debounce: wait until the directory has been quiet a while.
        loop {
            tokio::time::sleep(POLICY_DEBOUNCE).await;
            let more = match afd.get_mut().read_events(&mut buf) {
                Ok(mut events) => events.next().is_some(),
                Err(_) => false,
            };
            if !more {
                break;
            }
        }
        if !deliver(tx, Wake::PolicyChanged).await {
            return Ok(());
        }
    }
}

/// Sends a wake; if the channel is full, waits for room (the caller's
/// source is not polled meanwhile, so kernel events coalesce). `false` if
/// the receiver is gone: the source should stop.
async fn deliver(tx: &mpsc::Sender<Wake>, wake: Wake) -> bool {
    match tx.try_send(wake) {
        Ok(()) => true,
        Err(TrySendError::Full(wake)) => tx.send(wake).await.is_ok(),
        Err(TrySendError::Closed(_)) => false,
    }
}

/// Waits on a registered PSI trigger in a new task and sends
/// [`Wake::Psi`]`{ id }` each time it fires, then [`Wake::PsiGone`] once
/// when the kernel reports the trigger dead (group removed), and ends.
/// The task also ends when the receiver is dropped. Aborting the returned
/// handle closes the fd (unregistering the trigger).
///
/// Errors if the fd cannot be registered with the reactor (e.g. the fd does
/// not support poll); the trigger is closed then. Panics outside a tokio
/// runtime.
///
/// # Readiness (verified against tokio 1.54 `io/interest.rs`, `io/ready.rs`)
/// The fd is registered with [`Interest::PRIORITY`] only, which maps to
/// `EPOLLPRI` (edge-triggered). `Interest::ERROR` is *not* registered:
/// tokio maps it to mio `READABLE` (`EPOLLIN`) because epoll always reports
/// `EPOLLERR` anyway, and a PSI fd is permanently readable, so that would
/// only add spurious wake-ups. `EPOLLERR` still arrives and becomes
/// `Ready::ERROR` (`Ready::from_mio`), so the task awaits
/// `PRIORITY | ERROR` readiness and checks ERROR first.
pub fn spawn_psi_trigger(
    trigger: PsiTrigger,
    id: usize,
    tx: mpsc::Sender<Wake>,
) -> Result<JoinHandle<()>> {
    let path = trigger.path().to_path_buf();
    let afd = crate::kernel::wait::async_fd(trigger, Interest::PRIORITY)
        .map_err(|(e, _)| Error::io("epoll_ctl(EPOLLPRI)", &path, e))?;
    Ok(tokio::spawn(psi_loop(afd, id, tx)))
}

/// Test instrumentation: `(id, readiness seen, wake delivered)` per Psi wake.
#[cfg(test)]
static PSI_TIMING: Mutex<Vec<(usize, std::time::Instant, std::time::Instant)>> =
    Mutex::new(Vec::new());

async fn psi_loop(afd: AsyncFd<PsiTrigger>, id: usize, tx: mpsc::Sender<Wake>) {
    loop {
        let mut guard = match afd.ready(Interest::PRIORITY | Interest::ERROR).await {
            Ok(g) => g,
            Err(e) => {
                // Only when the runtime is shutting down.
                let what = format!(
                    "PSI trigger {id} on {}: {e}",
                    afd.get_ref().path().display()
                );
                deliver(&tx, Wake::WatchError { what }).await;
                return;
            }
        };
        #[cfg(test)]
        let ready_at = std::time::Instant::now();
        let ready = guard.ready();
        if ready.is_error() || ready.is_read_closed() {
            // The kernel destroyed the trigger (group removed): poll reports
            // POLLERR|POLLPRI from now on, reads fail with ENODEV.
            tracing::debug!(id, path = %afd.get_ref().path().display(), "PSI trigger gone");
            deliver(&tx, Wake::PsiGone { id }).await;
            return;
        }
        // Edge-triggered: the next EPOLLPRI comes with the next kernel event.
        guard.clear_ready_matching(Ready::PRIORITY);
        if !deliver(&tx, Wake::Psi { id }).await {
            return;
        }
        #[cfg(test)]
        PSI_TIMING.lock().unwrap_or_else(|p| p.into_inner()).push((
            id,
            ready_at,
            std::time::Instant::now(),
        ));
    }
}

/// Watch bookkeeping shared by [`FileWatcher`] and its task.
///
/// Each watched file has its own IN_MODIFY watch and shares a *guard* watch
/// (IN_DELETE | IN_MOVED_FROM) on its directory's parent: on cgroupfs a
/// removed group produces no event at all on its files or on itself (no
/// IN_DELETE_SELF, no IN_IGNORED — kernfs never unlinks the inodes the
/// watches pin; verified on 6.18), only IN_DELETE|IN_ISDIR with the group's
/// name on the parent directory, from rmdir(2).
#[derive(Default)]
struct WatchMap {
    files: HashMap<PathBuf, (WatchDescriptor, Option<PathBuf>)>,
    file_wds: HashMap<WatchDescriptor, PathBuf>,
    guards: HashMap<PathBuf, (WatchDescriptor, usize)>,
    guard_wds: HashMap<WatchDescriptor, PathBuf>,
}

impl WatchMap {
    /// Forgets a file; returns the watches to remove from the kernel (its own,
    /// and its guard's once no file needs it).
    fn forget(&mut self, file: &Path) -> Vec<WatchDescriptor> {
        let mut rm = Vec::new();
        let Some((wd, guard)) = self.files.remove(file) else {
            return rm;
        };
        if self.file_wds.get(&wd).is_some_and(|p| p == file) {
            self.file_wds.remove(&wd);
        }
        rm.push(wd);
        if let Some(g) = guard {
            if let Some((gwd, n)) = self.guards.get_mut(&g) {
                *n -= 1;
                if *n == 0 {
                    let gwd = gwd.clone();
                    self.guards.remove(&g);
                    self.guard_wds.remove(&gwd);
                    rm.push(gwd);
                }
            }
        }
        rm
    }

    /// Watched files at or below `removed`.
    fn under(&self, removed: &Path) -> Vec<PathBuf> {
        self.files
            .keys()
            .filter(|f| f.starts_with(removed))
            .cloned()
            .collect()
    }
}

fn lock(m: &Mutex<WatchMap>) -> MutexGuard<'_, WatchMap> {
    // Every update leaves the map consistent, so a panicked holder is harmless.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// inotify watches on files (IN_MODIFY), delivering [`Wake::FileModified`]
/// with the device path. cgroupfs raises IN_MODIFY on `memory.events`,
/// `cgroup.events` etc. when their content changes; on a fake root plain
/// writes do the same, so one code path serves both.
///
/// When a watched file goes away — its group is removed (IN_DELETE of the
/// group directory, seen through a watch on the group's parent), the file is
/// unlinked or replaced by a rename (IN_IGNORED), or the group directory is
/// renamed (IN_MOVED_FROM) — the watcher sends `FileModified` for the path
/// and forgets it, so the caller notices and can [`watch`](Self::watch) it
/// again after recreating the group. A queue overflow (events lost) wakes
/// every watched path.
///
/// Not caught (no event exists for it): knob files disappearing because a
/// controller was disabled in the parent's `cgroup.subtree_control`.
///
/// The inotify fd is read through a tokio `AsyncFd` in a task spawned by
/// [`FileWatcher::new`] (the crate `inotify`'s `EventStream` does the same
/// internally, but polling it needs the `futures` `Stream` trait, which is
/// not a dependency of this crate). Dropping the watcher aborts the task and
/// closes the fd.
pub(crate) struct FileWatcher {
    root: Root,
    watches: Watches,
    map: Arc<Mutex<WatchMap>>,
    task: JoinHandle<()>,
}

impl FileWatcher {
    /// A watcher with no watches. Panics outside a tokio runtime.
    pub(crate) fn new(root: &Root, tx: mpsc::Sender<Wake>) -> Result<Self> {
        let inotify = Inotify::init().map_err(|e| Error::io("inotify_init", "inotify", e))?;
        let watches = inotify.watches();
        let afd = crate::kernel::wait::async_fd(inotify, Interest::READABLE)
            .map_err(|(e, _)| Error::io("epoll_ctl(EPOLLIN)", "inotify", e))?;
        let map = Arc::new(Mutex::new(WatchMap::default()));
        let task = tokio::spawn(inotify_loop(afd, map.clone(), tx));
        Ok(FileWatcher {
            root: root.clone(),
            watches,
            map,
            task,
        })
    }

    /// Watches `device_path` for IN_MODIFY (and its removal, see the type
    /// docs). Watching a path again is a no-op. A missing file is an error
    /// naming the device path.
    pub(crate) fn watch(&mut self, device_path: &Path) -> Result<()> {
        let dev = Root::normalize(device_path);
        // Held across the adds: the task cannot see an event for a new wd
        // before it is mapped.
        let mut map = lock(&self.map);
        if map.files.contains_key(&dev) {
            return Ok(());
        }
        let wd = self
            .watches
            .add(self.root.host_path(&dev), WatchMask::MODIFY)
            .map_err(|e| Error::io("inotify_add_watch", &dev, e))?;
        if let Some(other) = map.file_wds.insert(wd.clone(), dev.clone()) {
            // Two device paths naming one inode (a symlink) share a wd: the
            // latest path gets the wakes, the older one is forgotten.
            let rm = map.forget(&other);
            remove_watches(&mut self.watches, rm.into_iter().filter(|w| *w != wd));
            map.file_wds.insert(wd.clone(), dev.clone());
        }
        let guard_dir = dev.parent().and_then(Path::parent).map(Path::to_path_buf);
        let guard = match guard_dir {
            Some(g) if map.guards.contains_key(&g) => {
                if let Some((_, n)) = map.guards.get_mut(&g) {
                    *n += 1;
                }
                Some(g)
            }
            Some(g) => {
                let mask = WatchMask::DELETE | WatchMask::MOVED_FROM | WatchMask::ONLYDIR;
                match self.watches.add(self.root.host_path(&g), mask) {
                    Ok(gwd) => {
                        map.guard_wds.insert(gwd.clone(), g.clone());
                        map.guards.insert(g.clone(), (gwd, 1));
                        Some(g)
                    }
                    Err(e) => {
                        tracing::warn!(
                            dir = %g.display(),
                            file = %dev.display(),
                            "cannot watch for group removal: {e}"
                        );
                        None
                    }
                }
            }
            None => None,
        };
        map.files.insert(dev, (wd, guard));
        Ok(())
    }

    /// Stops watching `device_path`. Not watched (or already forgotten
    /// because the file went away): no-op.
    pub(crate) fn unwatch(&mut self, device_path: &Path) -> Result<()> {
        let dev = Root::normalize(device_path);
        let rm = lock(&self.map).forget(&dev);
        for wd in rm {
            match self.watches.remove(wd) {
                Ok(()) => {}
                // The kernel already ended the watch (file removed).
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(Error::io("inotify_rm_watch", &dev, e)),
            }
        }
        Ok(())
    }

    /// Device paths currently watched, sorted.
    pub(crate) fn watched(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = lock(&self.map).files.keys().cloned().collect();
        v.sort();
        v
    }
}

fn remove_watches(watches: &mut Watches, wds: impl IntoIterator<Item = WatchDescriptor>) {
    for wd in wds {
        // EINVAL: the kernel already ended it.
        let _ = watches.remove(wd);
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        // Drops the task's future (and with it the inotify fd) at the
        // runtime's next turn; `watches` holds the fd only until then.
        self.task.abort();
    }
}

async fn inotify_loop(
    mut afd: AsyncFd<Inotify>,
    map: Arc<Mutex<WatchMap>>,
    tx: mpsc::Sender<Wake>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let mut guard = match afd.readable_mut().await {
            Ok(g) => g,
            Err(e) => {
                let what = format!("inotify: {e}");
                deliver(&tx, Wake::WatchError { what }).await;
                return;
            }
        };
        // Paths to wake, deduplicated per read (a write burst is one wake).
        let mut wake = BTreeSet::new();
        let res = guard.try_io(|inner| {
            let inotify = inner.get_mut();
            let mut rm = Vec::new();
            let events = inotify.read_events(&mut buf)?;
            let mut map = lock(&map);
            for ev in events {
                if ev.mask.contains(EventMask::Q_OVERFLOW) {
                    tracing::warn!("inotify queue overflow: waking every watched file");
                    wake.extend(map.files.keys().cloned());
                } else if let Some(file) = map.file_wds.get(&ev.wd).cloned() {
                    if ev.mask.contains(EventMask::IGNORED) {
                        // Unlinked or replaced; the kernel ended the watch.
                        rm.extend(map.forget(&file));
                    }
                    wake.insert(file);
                } else if let Some(dir) = map.guard_wds.get(&ev.wd).cloned() {
                    // A child of a guard directory was deleted or renamed
                    // away (or the guard itself ended: IGNORED).
                    let removed = match ev.name {
                        Some(name) if !ev.mask.contains(EventMask::IGNORED) => dir.join(name),
                        _ => dir,
                    };
                    for file in map.under(&removed) {
                        rm.extend(map.forget(&file));
                        wake.insert(file);
                    }
                }
                // Anything else: a watch unwatch() already forgot (its IGNORED).
            }
            drop(map);
            remove_watches(&mut inotify.watches(), rm);
            Ok(())
        });
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => {
                let what = format!("inotify read: {e}");
                deliver(&tx, Wake::WatchError { what }).await;
                return;
            }
            Err(_would_block) => continue,
        }
        for path in wake {
            if !deliver(&tx, Wake::FileModified { path }).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
