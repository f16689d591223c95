//! The file descriptors the daemon's threads wait on, behind safe calls:
//! an eventfd to wake a thread, `poll(2)` over a few descriptors, and the
//! registration of a descriptor with tokio's reactor. The `unsafe` these
//! need lives here (the kernel seam), with its reasons.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A non-blocking, close-on-exec eventfd used as a doorbell.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: plain eventfd(2); the returned fd is checked and owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a fresh, valid fd that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(efd) }))
    }

    /// Makes the eventfd readable (never blocks: a full counter is readable too).
    pub(crate) fn poke(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Clears the eventfd.
    pub(crate) fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from a non-blocking eventfd we own.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A non-blocking, close-on-exec `CLOCK_MONOTONIC` timerfd: a one-shot
/// alarm the daemon's loop waits on through tokio's reactor. A
/// tokio timer set from the runtime's own thread wakes the runtime's eventfd
/// when it is earlier than the driver's next wake-up, and one more than 64 ms
/// away fires in two parks (the timer wheel's coarser level first); the
/// kernel's timer costs one `timerfd_settime` when set and wakes the
/// reactor's `epoll_wait` once, when due.
#[derive(Debug)]
pub(crate) struct TimerFd(OwnedFd);

impl TimerFd {
    pub(crate) fn new() -> io::Result<TimerFd> {
        // SAFETY: plain timerfd_create(2); the returned fd is checked and owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh, valid fd that nothing else owns.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Fires once `after` from now (at least 1 ns: zero would disarm it);
    /// `None` disarms it.
    pub(crate) fn set(&self, after: Option<std::time::Duration>) -> io::Result<()> {
        let value = match after {
            Some(d) => {
                let d = d.max(std::time::Duration::from_nanos(1));
                // `c_long` is 32 bits on 32-bit targets: no `From<u32>` there.
                #[allow(clippy::unnecessary_fallible_conversions)]
                let nsec = libc::c_long::try_from(d.subsec_nanos()).unwrap_or(0);
                libc::timespec {
                    tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                    tv_nsec: nsec,
                }
            }
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        let r =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Takes the expiration count, so the fd is no longer readable.
    pub(crate) fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from a non-blocking timerfd we own.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

// SAFETY: a TimerFd owns its fd (an `OwnedFd` never replaced or closed while
// the value lives) and `as_raw_fd` returns it.
unsafe impl OwnsItsFd for TimerFd {}

/// `poll(2)` over `fds` (a negative fd is skipped, as the kernel does);
/// `timeout_ms` -1 waits for ever. The number of ready entries.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    let n = libc::nfds_t::try_from(fds.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fds` is a valid, exclusively borrowed array of `n` pollfds.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), n, timeout_ms) };
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// A value that owns one file descriptor for its whole life: `as_raw_fd`
/// always returns the same open descriptor until the value is dropped.
///
/// # Safety
/// Implement only for types that never close or replace their descriptor
/// while they live (tokio's reactor keeps it registered until the
/// [`AsyncFd`] is dropped).
pub(crate) unsafe trait OwnsItsFd: AsRawFd {}

// SAFETY: an OwnedFd closes its descriptor only on drop.
unsafe impl OwnsItsFd for OwnedFd {}
// SAFETY: `Inotify` owns its fd (shared with `Watches` through an `Arc`: it
// is closed only when the last of them is dropped, and the `Inotify` is
// dropped only together with the AsyncFd), and `as_raw_fd` always returns it.
unsafe impl OwnsItsFd for inotify::Inotify {}
// SAFETY: `PsiTrigger` owns its fd (an `OwnedFd` field that is never
// replaced or closed while the value lives) and `as_raw_fd` returns it.
unsafe impl OwnsItsFd for super::psi_trigger::PsiTrigger {}

/// Registers `inner`'s descriptor with tokio's reactor for `interest`.
pub(crate) fn async_fd<T: OwnsItsFd>(
    inner: T,
    interest: Interest,
) -> Result<AsyncFd<T>, (io::Error, T)> {
    // SAFETY: `register_with_interest` requires that the fd stays open and
    // refers to the same file description for the AsyncFd's whole life,
    // which `OwnsItsFd` promises; the AsyncFd owns `inner`, so the fd is
    // closed only after it deregistered the fd.
    unsafe { AsyncFd::register_with_interest(inner, interest) }.map_err(|e| {
        let (inner, err) = e.into_parts();
        (err, inner)
    })
}

/// The size of a memory page (cgroup memory limits are kept in pages, so a
/// written size reads back rounded down to one). 4 KiB if sysconf cannot say.
pub(crate) fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(v).ok().filter(|&p| p > 0).unwrap_or(4096)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eventfd_rings_until_cleared() {
        let e = EventFd::new().unwrap();
        let mut fds = [libc::pollfd {
            fd: e.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        assert_eq!(poll(&mut fds, 0).unwrap(), 0);
        e.poke();
        assert_eq!(poll(&mut fds, 0).unwrap(), 1);
        e.clear();
        fds[0].revents = 0;
        assert_eq!(poll(&mut fds, 0).unwrap(), 0);
        assert!(page_size() >= 4096);
    }

    #[test]
    fn a_timerfd_fires_once_when_set_and_not_when_disarmed() {
        let t = TimerFd::new().unwrap();
        let mut fds = [libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        assert_eq!(poll(&mut fds, 0).unwrap(), 0, "not armed");
        t.set(Some(std::time::Duration::ZERO)).unwrap();
        assert_eq!(poll(&mut fds, 1000).unwrap(), 1, "fires at once");
        t.clear();
        fds[0].revents = 0;
        assert_eq!(poll(&mut fds, 0).unwrap(), 0, "one shot, cleared");
        t.set(Some(std::time::Duration::from_millis(20))).unwrap();
        t.set(None).unwrap();
        assert_eq!(poll(&mut fds, 60).unwrap(), 0, "disarmed");
    }
}
