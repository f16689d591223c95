//! The kernel's device events (`NETLINK_KOBJECT_UEVENT`, multicast group
//! 1: what udev listens to), used as a wake-up only: a driver
//! binding (`bind`), a device added or brought online is when its IRQs are
//! requested, so `system.irqs` is re-applied then instead of polling
//! `/proc/interrupts`. The messages' content is not parsed: any event
//! wakes the caller, which rescans.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use super::error::{Error, Result};

/// `NETLINK_KOBJECT_UEVENT` (include/uapi/linux/netlink.h).
const NETLINK_KOBJECT_UEVENT: libc::c_int = 15;

/// A bound uevent socket.
pub(crate) struct Uevents {
    fd: OwnedFd,
}

impl Uevents {
    /// Opens and binds the socket (root, or CAP_NET_ADMIN on old kernels).
    pub(crate) fn open() -> Result<Uevents> {
        // SAFETY: plain socket(2); the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                NETLINK_KOBJECT_UEVENT,
            )
        };
        if raw < 0 {
            return Err(last("socket"));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; zeroed then filled.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = 1;
        // SAFETY: `addr` is a valid sockaddr_nl of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(last("bind"));
        }
        Ok(Uevents { fd })
    }

    /// Waits up to `timeout` for an event; drains every queued message.
    /// `Ok(true)` when at least one arrived.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(Error::io("poll", "uevent socket", e));
        }
        if rc == 0 {
            return Ok(false);
        }
        self.drain();
        Ok(true)
    }

    /// Reads and drops every queued message (ENOBUFS after an overrun
    /// included: the caller rescans anyway).
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if e == Some(libc::ENOBUFS) || e == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if n == 0 {
                return;
            }
        }
    }
}

fn last(op: &'static str) -> Error {
    Error::io(
        op,
        "NETLINK_KOBJECT_UEVENT",
        std::io::Error::last_os_error(),
    )
}
