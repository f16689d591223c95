//! Exec detection through the netlink process-events connector
//! (`NETLINK_CONNECTOR`, multicast group `CN_IDX_PROC`, `PROC_CN_MCAST_LISTEN`).
//!
//! Sync and testable: [`Connector::open`] creates, binds and subscribes the
//! socket (through `proc-connector` 0.3.0), makes it non-blocking, sets a
//! large receive buffer, attaches a socket filter (classic BPF, any kernel)
//! that keeps only EXEC, COMM and — when the daemon asks for exits — a
//! process's EXIT ([`Connector::set_exits`] swaps it on a reload) and, on
//! kernels with connector filtering (6.6+), asks only for EXEC/COMM/EXIT;
//! [`Connector::drain`] reads what is queued (`recvmmsg`, many datagrams a
//! call) and [`parse_batch`] turns one datagram into [`ProcEvent`]s. The
//! daemon waits for readability with poll(2) (`daemon::exec`).
//!
//! Loss is detected two ways: `ENOBUFS` from `recv` (the socket overran; the
//! kernel dropped messages) gives [`ProcEvent::Overrun`], and a jump in the
//! per-CPU sequence number gives [`ProcEvent::Gap`]. The kernel numbers every
//! event it generates per CPU, including the ones a socket filter drops, so
//! sequence gaps are only meaningful when the socket is *not* filtered
//! (the socket filter could not be attached and the kernel is older than
//! 6.6); with a filter, ENOBUFS is the loss signal (an skb allocation
//! failure, the other way to lose a message, is then not seen — the
//! periodic rescan covers it). Either signal means: do a full /proc rescan.
//!
//! Only root (CAP_NET_ADMIN in the initial user namespace) may listen; the
//! kernel silently ignores LISTEN requests from other namespaces.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use proc_connector::{EventMask, ProcConnector};

/// Wire constants (include/uapi/linux/cn_proc.h, connector.h, netlink.h).
const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_OVERRUN: u16 = 4;
const CN_MSG_LEN: usize = 20;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `what`, `cpu`, `timestamp_ns`.
const EV_HEADER: usize = 16;
pub(crate) const PROC_EVENT_EXEC: u32 = 0x0000_0002;
pub(crate) const PROC_EVENT_COMM: u32 = 0x0000_0200;
pub(crate) const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// Receive buffer asked for (`SO_RCVBUFFORCE`, else `SO_RCVBUF` capped by
/// `net.core.rmem_max`). A 4 KiB buffer overran at 500 quick execs.
pub(crate) const RCVBUF: usize = 4 << 20;

/// One process event, or a loss signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcEvent {
    /// Thread `pid` of process `tgid` called exec (after exec `pid == tgid`).
    Exec { pid: i32, tgid: i32 },
    /// Thread `pid` renamed itself (`prctl(PR_SET_NAME)`, write to comm).
    /// The process's comm is the main thread's: `pid == tgid`.
    Comm { pid: i32, tgid: i32 },
    /// Thread `pid` exited; the process is gone when `pid == tgid`.
    Exit { pid: i32, tgid: i32 },
    /// The socket overran (ENOBUFS or NLMSG_OVERRUN): events were lost.
    Overrun,
    /// `missed` events of CPU `cpu` never arrived (sequence gap).
    Gap { cpu: u32, missed: u32 },
}

impl ProcEvent {
    /// True for the events that mean "something may have been missed".
    #[cfg(test)]
    pub(crate) fn is_loss(&self) -> bool {
        matches!(self, ProcEvent::Overrun | ProcEvent::Gap { .. })
    }
}

/// Per-CPU sequence tracking for gap detection.
#[derive(Debug, Default)]
pub(crate) struct SeqTracker {
    next: Vec<Option<u32>>,
}

impl SeqTracker {
    /// Records event `seq` of CPU `cpu`; returns how many events of that CPU
    /// were skipped since the last one seen (0 for the first or in order).
    /// A sequence that goes backwards (another CPU numbering restarted,
    /// or reordering) is not a loss and resynchronises.
    pub(crate) fn observe(&mut self, cpu: u32, seq: u32) -> u32 {
        let i = cpu as usize;
        if i >= 4096 {
            return 0; // nonsense cpu: ignore rather than grow without bound
        }
        if self.next.len() <= i {
            self.next.resize(i + 1, None);
        }
        let missed = match self.next[i] {
            Some(want) => {
                let d = seq.wrapping_sub(want);
                if d < (1 << 31) {
                    d
                } else {
                    0
                }
            }
            None => 0,
        };
        self.next[i] = Some(seq.wrapping_add(1));
        missed
    }

    /// Forgets every CPU's position (after an overrun the next message of
    /// each CPU would otherwise be reported as a gap too).
    pub(crate) fn reset(&mut self) {
        self.next.clear();
    }
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    u32_at(b, off).map(|v| v as i32)
}

/// Parses one received datagram (one or more netlink messages) and appends
/// the events cgwarden cares about to `out`. FORK, UID, GID, SID, PTRACE and
/// COREDUMP events are skipped (but still counted for gap detection when
/// `seq` is given). Subscription acks (`what == 0`) and truncated or foreign
/// messages are ignored. Never panics on any input.
pub(crate) fn parse_batch(buf: &[u8], mut seq: Option<&mut SeqTracker>, out: &mut Vec<ProcEvent>) {
    let mut off = 0;
    while off + NLMSG_HDRLEN <= buf.len() {
        let Some(len) = u32_at(buf, off).map(|l| l as usize) else {
            return;
        };
        let ty = u16_at(buf, off + 4).unwrap_or(0);
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return;
        }
        let msg = &buf[off..off + len];
        // NLMSG_ALIGN(len)
        off += (len + 3) & !3;
        match ty {
            NLMSG_NOOP | NLMSG_ERROR => continue,
            NLMSG_OVERRUN => {
                out.push(ProcEvent::Overrun);
                continue;
            }
            _ => {}
        }
        let cn = &msg[NLMSG_HDRLEN..];
        let (Some(idx), Some(val), Some(cn_seq), Some(data_len)) =
            (u32_at(cn, 0), u32_at(cn, 4), u32_at(cn, 8), u16_at(cn, 16))
        else {
            continue;
        };
        if idx != CN_IDX_PROC || val != CN_VAL_PROC {
            continue;
        }
        let Some(ev) = cn.get(CN_MSG_LEN..CN_MSG_LEN + data_len as usize) else {
            continue;
        };
        let (Some(what), Some(cpu)) = (u32_at(ev, 0), u32_at(ev, 4)) else {
            continue;
        };
        if what == 0 {
            continue; // ack of our LISTEN (cpu = -1), not an event
        }
        if let Some(t) = seq.as_deref_mut() {
            let missed = t.observe(cpu, cn_seq);
            if missed > 0 {
                out.push(ProcEvent::Gap { cpu, missed });
            }
        }
        let pid_tgid = || Some((i32_at(ev, EV_HEADER)?, i32_at(ev, EV_HEADER + 4)?));
        let e = match what {
            PROC_EVENT_EXEC => pid_tgid().map(|(pid, tgid)| ProcEvent::Exec { pid, tgid }),
            PROC_EVENT_COMM => pid_tgid().map(|(pid, tgid)| ProcEvent::Comm { pid, tgid }),
            PROC_EVENT_EXIT => pid_tgid().map(|(pid, tgid)| ProcEvent::Exit { pid, tgid }),
            _ => None,
        };
        out.extend(e);
    }
}

/// Why the connector could not be opened, for the one log line.
pub(crate) fn describe_open_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("{e}: the process-events connector needs root (CAP_NET_ADMIN)")
        }
        Some(libc::EPROTONOSUPPORT) | Some(libc::EAFNOSUPPORT) => {
            format!("{e}: this kernel has no process-events connector (CONFIG_PROC_EVENTS off)")
        }
        _ => e.to_string(),
    }
}

fn to_io(e: proc_connector::Error) -> io::Error {
    match e {
        proc_connector::Error::Os(e) => e,
        proc_connector::Error::Overrun => io::Error::from_raw_os_error(libc::ENOBUFS),
        proc_connector::Error::WouldBlock => io::Error::from_raw_os_error(libc::EAGAIN),
        proc_connector::Error::Interrupted => io::Error::from_raw_os_error(libc::EINTR),
        other => io::Error::other(other.to_string()),
    }
}

/// `(major, minor)` of a kernel release string like `6.18.44-fc`.
pub(crate) fn parse_release(rel: &str) -> Option<(u32, u32)> {
    let mut it = rel.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Connector event filtering (`struct proc_input`) arrived in Linux 6.6.
pub(crate) fn kernel_filters(release: Option<(u32, u32)>) -> bool {
    release.is_some_and(|r| r >= (6, 6))
}

fn running_release() -> Option<(u32, u32)> {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname; uname only writes into it.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    // SAFETY: uname NUL-terminates `release` within its array.
    let rel = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    parse_release(&rel.to_string_lossy())
}

/// An open, subscribed, non-blocking process-events socket.
pub(crate) struct Connector {
    conn: ProcConnector,
    filtered: bool,
    /// Whether a process's EXIT passes the filters (see [`Connector::open`]).
    exits: bool,
    rcvbuf: usize,
    seq: SeqTracker,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("fd", &self.conn.as_raw_fd())
            .field("filtered", &self.filtered)
            .field("rcvbuf", &self.rcvbuf)
            .finish()
    }
}

impl Connector {
    /// Opens, binds, subscribes. Errors keep the errno; see
    /// [`describe_open_error`] for the message to log.
    ///
    /// `exits`: whether a process's EXIT is wanted. Each exit wakes the
    /// exec thread a second time per process of a flood, though
    /// only `running()` presence, `settings.critical` and `threads:` rules
    /// need exits (the placement cache does without: see
    /// `engine::placement::FactCache::track_exits`).
    pub(crate) fn open(exits: bool) -> io::Result<Connector> {
        let conn = ProcConnector::new().map_err(to_io)?;
        // Non-blocking before anything else reads: the filtered LISTEN below
        // reads its ack, and must never hang on a kernel that sends none.
        conn.set_nonblocking().map_err(to_io)?;
        // CGWARDEN_PROC_EVENTS_RCVBUF: tests force overruns with a tiny buffer.
        let want = std::env::var("CGWARDEN_PROC_EVENTS_RCVBUF")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(RCVBUF);
        let rcvbuf = set_rcvbuf(conn.as_raw_fd(), want);
        // A socket filter drops what the daemon never reads before it is
        // queued (every kernel; see `attach_filter`). Filtered events still
        // take sequence numbers, so gaps stop meaning loss: ENOBUFS is the
        // loss signal from here on, as with the 6.6+ filter below.
        let mut filtered = match attach_filter(conn.as_raw_fd(), exits) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("process-events socket filter not attached: {e}");
                false
            }
        };
        if kernel_filters(running_release()) {
            // On 6.6+ a second LISTEN on the same socket only replaces the
            // filter (the listener count is not raised twice).
            // The kernel's ack has `what = 0`, which the new filter itself
            // drops: "would block" is the normal answer of a filtered LISTEN
            // (measured on 6.18: fork events vanished from the socket). EXIT
            // stays in: the socket filter drops it when exits are not
            // wanted, and only it is swapped on a reload.
            match conn.subscribe_filtered(EventMask::EXEC | EventMask::COMM | EventMask::EXIT) {
                Ok(()) | Err(proc_connector::Error::WouldBlock) => filtered = true,
                Err(e) => tracing::debug!("process-events filter not set: {e}"),
            }
        }
        Ok(Connector {
            conn,
            filtered,
            exits,
            rcvbuf,
            seq: SeqTracker::default(),
            buf: vec![0u8; RECV_BATCH * RECV_SLOT],
        })
    }

    /// Whether the kernel filters events for this socket (then sequence
    /// gaps are not reported: filtered events also consume numbers).
    pub(crate) fn filtered(&self) -> bool {
        self.filtered
    }

    /// Whether a process's EXIT is delivered.
    pub(crate) fn exits(&self) -> bool {
        self.exits
    }

    /// Asks for a process's EXIT, or stops asking (a reload changed what
    /// the policy needs): the socket filter is replaced (the 6.6+ kernel
    /// mask always has EXIT). Exits already queued may still be read.
    pub(crate) fn set_exits(&mut self, exits: bool) -> io::Result<()> {
        attach_filter(self.conn.as_raw_fd(), exits)?;
        self.exits = exits;
        Ok(())
    }

    /// The receive buffer the kernel granted (bytes, as `SO_RCVBUF` reads).
    pub(crate) fn rcvbuf(&self) -> usize {
        self.rcvbuf
    }

    /// Reads up to `max_datagrams` queued datagrams into `out`. Returns
    /// `Ok(true)` when the socket is drained (would block), `Ok(false)` when
    /// the limit was hit first (call again). ENOBUFS becomes
    /// [`ProcEvent::Overrun`] (and reading continues: the socket stays usable).
    ///
    /// Datagrams are read [`RECV_BATCH`] at a time with one `recvmmsg(2)`
    /// (a flood of N processes queues about 3N datagrams — fork, exec, exit
    /// — and on kernels before 6.6, which cannot filter, one `recv` each
    /// would be a third of the exec thread's system calls). A short
    /// batch means the queue was empty: no closing `EAGAIN` call.
    pub(crate) fn drain(
        &mut self,
        out: &mut Vec<ProcEvent>,
        max_datagrams: usize,
    ) -> io::Result<bool> {
        let mut read = 0;
        while read < max_datagrams {
            let want = RECV_BATCH.min(max_datagrams - read);
            let mut got = [(0, false); RECV_BATCH];
            match recv_many(self.conn.as_raw_fd(), &mut self.buf, want, &mut got) {
                Ok(n) => {
                    for (i, &(len, truncated)) in got[..n].iter().enumerate() {
                        if truncated {
                            // Never for proc events (< 100 bytes); if it
                            // happens, what was cut is lost: rescan.
                            out.push(ProcEvent::Overrun);
                        }
                        let seq = (!self.filtered).then_some(&mut self.seq);
                        parse_batch(&self.buf[i * RECV_SLOT..][..len], seq, out);
                    }
                    read += n;
                    if n < want {
                        return Ok(true);
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(true),
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        self.seq.reset();
                        out.push(ProcEvent::Overrun);
                    }
                    _ => return Err(e),
                },
            }
        }
        Ok(false)
    }
}

/// Datagrams one `recvmmsg(2)` reads at most, each into its own
/// [`RECV_SLOT`]-byte slot of the connector's buffer.
const RECV_BATCH: usize = 64;
const RECV_SLOT: usize = 1024;

/// One non-blocking `recvmmsg(2)` of up to `want` datagrams (≤ [`RECV_BATCH`])
/// into `buf`'s slots; `got[i]` is datagram i's length and whether it was
/// cut short; returns how many were read. The headers live on the stack:
/// no allocation per call. An empty queue is `EAGAIN`; `ENOBUFS` (an
/// overrun) comes back as the error of the call after the one that read
/// what was queued before it.
fn recv_many(
    fd: RawFd,
    buf: &mut [u8],
    want: usize,
    got: &mut [(usize, bool); RECV_BATCH],
) -> io::Result<usize> {
    // SAFETY: iovec and mmsghdr are plain data; all-zero is a valid value.
    let mut iov: [libc::iovec; RECV_BATCH] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; RECV_BATCH] = unsafe { std::mem::zeroed() };
    let mut n = 0;
    for ((slot, v), m) in buf
        .chunks_exact_mut(RECV_SLOT)
        .zip(&mut iov)
        .zip(&mut msgs)
        .take(want)
    {
        v.iov_base = slot.as_mut_ptr().cast();
        v.iov_len = slot.len();
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        n += 1;
    }
    // SAFETY: the first `n` headers each point at one live iovec over a
    // distinct RECV_SLOT-byte slot of `buf`; nothing else touches them
    // during the call; no timeout.
    let rc = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let rc = (rc as usize).min(n);
    for (g, m) in got.iter_mut().zip(&msgs).take(rc) {
        *g = (
            (m.msg_len as usize).min(RECV_SLOT),
            m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        );
    }
    Ok(rc)
}

impl AsRawFd for Connector {
    fn as_raw_fd(&self) -> RawFd {
        self.conn.as_raw_fd()
    }
}

/// Offsets in a process-events datagram: the event's `what`, then (after
/// `cpu` and `timestamp_ns`) the first two fields of every event's data,
/// `process_pid` and `process_tgid`.
const OFF_WHAT: u32 = (NLMSG_HDRLEN + CN_MSG_LEN) as u32;
const OFF_PID: u32 = OFF_WHAT + EV_HEADER as u32;

/// The classic BPF program [`attach_filter`] attaches: keep EXEC, COMM,
/// the subscription ack (`what == 0`) and, with `exits`, the EXIT of a
/// process (its main thread: `pid == tgid`); drop the rest — FORK (every
/// thread and process created), UID, GID, SID, PTRACE, COREDUMP, a
/// thread's EXIT (and every EXIT without `exits`). A datagram
/// too short to hold the fields is dropped. BPF loads words big-endian, so
/// the `what` constants are compared as the kernel's native bytes read that
/// way; `pid == tgid` compares two words loaded alike.
fn filter_program(exits: bool) -> [libc::sock_filter; 11] {
    use libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_MISC, BPF_RET, BPF_TAX, BPF_W, BPF_X,
    };
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |src: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (BPF_JMP | BPF_JEQ | src) as u16,
        jt,
        jf,
        k,
    };
    let what = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
    // Without exits an EXIT jumps straight to the drop.
    let exit_jt = if exits { 0 } else { 5 };
    [
        stmt(BPF_LD | BPF_W | BPF_ABS, OFF_WHAT),      // 0: A = what
        jeq(BPF_K, what(PROC_EVENT_EXEC), 7, 0),       // 1: → 9 keep
        jeq(BPF_K, what(PROC_EVENT_COMM), 6, 0),       // 2: → 9 keep
        jeq(BPF_K, 0, 5, 0),                           // 3: the ack → 9 keep
        jeq(BPF_K, what(PROC_EVENT_EXIT), exit_jt, 5), // 4: not EXIT (or exits unwanted) → 10 drop
        stmt(BPF_LD | BPF_W | BPF_ABS, OFF_PID + 4),   // 5: A = tgid
        stmt(BPF_MISC | BPF_TAX, 0),                   // 6: X = tgid
        stmt(BPF_LD | BPF_W | BPF_ABS, OFF_PID),       // 7: A = pid
        jeq(BPF_X, 0, 0, 1),                           // 8: pid == tgid → 9, else 10
        stmt(BPF_RET | BPF_K, u32::MAX),               // 9: keep the whole datagram
        stmt(BPF_RET | BPF_K, 0),                      // 10: drop
    ]
}

/// Attaches [`filter_program`] (`SO_ATTACH_FILTER`: before 6.6 the kernel
/// cannot filter by event, and each FORK of a flood, and each thread a busy
/// board starts and ends, would wake the exec thread for nothing — a third
/// of its wake-ups in a flood).
fn attach_filter(fd: RawFd, exits: bool) -> io::Result<()> {
    let mut prog = filter_program(exits);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, alive for the call; the kernel
    // copies the program.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `SO_RCVBUFFORCE` (root may exceed `net.core.rmem_max`), else `SO_RCVBUF`;
/// returns what the kernel reports back.
fn set_rcvbuf(fd: RawFd, bytes: usize) -> usize {
    let size = bytes.min(i32::MAX as usize) as libc::c_int;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `size` is a live c_int and `len` its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &size as *const libc::c_int as *const libc::c_void,
                len,
            )
        };
        if rc == 0 {
            break;
        }
    }
    let mut got: libc::c_int = 0;
    let mut got_len = len;
    // SAFETY: `got`/`got_len` are valid for writes of a c_int.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &mut got as *mut libc::c_int as *mut libc::c_void,
            &mut got_len,
        )
    };
    if rc == 0 {
        got.max(0) as usize
    } else {
        0
    }
}

/// Builds one connector datagram as the kernel sends it (test fixtures).
#[cfg(test)]
pub(crate) fn encode_event(what: u32, cpu: u32, seq: u32, pid: i32, tgid: i32) -> Vec<u8> {
    let data_len = match what {
        PROC_EVENT_EXEC => EV_HEADER + 8,
        PROC_EVENT_COMM => EV_HEADER + 24,
        _ => EV_HEADER + 24,
    };
    let total = NLMSG_HDRLEN + CN_MSG_LEN + data_len;
    let mut b = vec![0u8; (total + 3) & !3];
    b[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&3u16.to_ne_bytes()); // NLMSG_DONE, as cn_netlink_send uses
    let cn = NLMSG_HDRLEN;
    b[cn..cn + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
    b[cn + 4..cn + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
    b[cn + 8..cn + 12].copy_from_slice(&seq.to_ne_bytes());
    b[cn + 16..cn + 18].copy_from_slice(&(data_len as u16).to_ne_bytes());
    let ev = cn + CN_MSG_LEN;
    b[ev..ev + 4].copy_from_slice(&what.to_ne_bytes());
    b[ev + 4..ev + 8].copy_from_slice(&cpu.to_ne_bytes());
    b[ev + 16..ev + 20].copy_from_slice(&pid.to_ne_bytes());
    b[ev + 20..ev + 24].copy_from_slice(&tgid.to_ne_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exec_comm_exit_and_skips_others() {
        let mut b = encode_event(PROC_EVENT_EXEC, 0, 0, 10, 10);
        b.extend(encode_event(0x1, 0, 1, 11, 11)); // FORK: skipped
        b.extend(encode_event(PROC_EVENT_COMM, 0, 2, 12, 10));
        b.extend(encode_event(PROC_EVENT_EXIT, 1, 0, 10, 10));
        let mut out = Vec::new();
        let mut seq = SeqTracker::default();
        parse_batch(&b, Some(&mut seq), &mut out);
        assert_eq!(
            out,
            [
                ProcEvent::Exec { pid: 10, tgid: 10 },
                ProcEvent::Comm { pid: 12, tgid: 10 },
                ProcEvent::Exit { pid: 10, tgid: 10 },
            ]
        );
    }

    /// The socket filter, run by this machine's kernel on a datagram
    /// socket pair (its own sockets; no privilege, nothing global touched):
    /// the events that pass each filter in turn (attached in that order to
    /// the same socket, as [`Connector::set_exits`] replaces one).
    fn through_filters(exits: &[bool]) -> Vec<Vec<ProcEvent>> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "socketpair: {}", io::Error::last_os_error());
        let sent = [
            encode_event(PROC_EVENT_EXEC, 0, 0, 10, 10),
            encode_event(0x1, 0, 1, 11, 11),             // FORK
            encode_event(PROC_EVENT_COMM, 0, 2, 12, 10), // a thread's rename
            encode_event(0x4, 0, 3, 10, 10),             // UID
            encode_event(PROC_EVENT_EXIT, 0, 4, 12, 10), // a thread's exit
            encode_event(0, 0, 5, 0, 0),                 // the LISTEN ack
            encode_event(PROC_EVENT_EXIT, 0, 6, 10, 10), // the process's exit
            vec![1u8; 20],                               // too short
        ];
        let mut buf = vec![0u8; RECV_BATCH * RECV_SLOT];
        let mut got = [(0, false); RECV_BATCH];
        let mut each = Vec::new();
        for &x in exits {
            attach_filter(fds[1], x).expect("SO_ATTACH_FILTER");
            for d in &sent {
                // SAFETY: `d` is a live buffer of `d.len()` bytes.
                let n = unsafe { libc::send(fds[0], d.as_ptr().cast(), d.len(), 0) };
                assert_eq!(n, d.len() as isize);
            }
            let n = recv_many(fds[1], &mut buf, RECV_BATCH, &mut got).expect("recvmmsg");
            let mut out = Vec::new();
            let mut whats = Vec::new();
            for (i, &(len, truncated)) in got[..n].iter().enumerate() {
                assert!(!truncated);
                let d = &buf[i * RECV_SLOT..][..len];
                whats.push(u32_at(d, OFF_WHAT as usize).unwrap());
                parse_batch(d, None, &mut out);
            }
            // The ack passes too (parse_batch skips it).
            assert_eq!(whats.iter().filter(|&&w| w == 0).count(), 1, "{whats:?}");
            // Drained: the next call finds nothing.
            let e = recv_many(fds[1], &mut buf, RECV_BATCH, &mut got).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
            each.push(out);
        }
        for fd in fds {
            // SAFETY: both descriptors are ours and closed once.
            unsafe { libc::close(fd) };
        }
        each
    }

    #[test]
    fn socket_filter_keeps_exec_comm_ack_and_process_exits_when_asked() {
        let with = [
            ProcEvent::Exec { pid: 10, tgid: 10 },
            ProcEvent::Comm { pid: 12, tgid: 10 },
            ProcEvent::Exit { pid: 10, tgid: 10 },
        ];
        let without = &with[..2];
        // Replaced in place both ways, as a reload does.
        let got = through_filters(&[true, false, true]);
        assert_eq!(got[0], with);
        assert_eq!(got[1], without);
        assert_eq!(got[2], with);
        assert_eq!(through_filters(&[false])[0], without);
    }

    #[test]
    fn per_cpu_sequence_gaps() {
        let mut seq = SeqTracker::default();
        let mut out = Vec::new();
        for (cpu, s) in [(0, 5), (1, 100), (0, 6), (1, 101), (0, 9), (1, 102)] {
            parse_batch(
                &encode_event(PROC_EVENT_EXEC, cpu, s, 1, 1),
                Some(&mut seq),
                &mut out,
            );
        }
        let gaps: Vec<_> = out.iter().filter(|e| e.is_loss()).collect();
        assert_eq!(gaps, [&ProcEvent::Gap { cpu: 0, missed: 2 }]);
        // wrap-around is in order
        let mut t = SeqTracker::default();
        assert_eq!(t.observe(3, u32::MAX), 0);
        assert_eq!(t.observe(3, 0), 0);
        assert_eq!(t.observe(3, 2), 1);
        // backwards resynchronises without a gap
        assert_eq!(t.observe(3, 1), 0);
        assert_eq!(t.observe(3, 2), 0);
        t.reset();
        assert_eq!(t.observe(3, 50), 0);
        // without a tracker (filtered socket), no gaps are reported
        let mut out = Vec::new();
        parse_batch(&encode_event(PROC_EVENT_EXEC, 0, 0, 1, 1), None, &mut out);
        parse_batch(&encode_event(PROC_EVENT_EXEC, 0, 9, 1, 1), None, &mut out);
        assert!(out.iter().all(|e| !e.is_loss()));
    }

    #[test]
    fn overrun_ack_and_garbage() {
        let mut out = Vec::new();
        // NLMSG_OVERRUN
        let mut b = vec![0u8; 16];
        b[0..4].copy_from_slice(&16u32.to_ne_bytes());
        b[4..6].copy_from_slice(&NLMSG_OVERRUN.to_ne_bytes());
        parse_batch(&b, None, &mut out);
        assert_eq!(out, [ProcEvent::Overrun]);
        // ack (what = 0) is not an event and not a sequence point
        out.clear();
        let mut seq = SeqTracker::default();
        parse_batch(
            &encode_event(0, u32::MAX, 77, 0, 0),
            Some(&mut seq),
            &mut out,
        );
        assert!(out.is_empty());
        // truncated, zero-length, foreign connector, random bytes: no panic
        let good = encode_event(PROC_EVENT_EXEC, 0, 0, 5, 5);
        for cut in 0..good.len() {
            parse_batch(&good[..cut], None, &mut out);
        }
        let mut foreign = good.clone();
        foreign[16..20].copy_from_slice(&7u32.to_ne_bytes());
        parse_batch(&foreign, None, &mut out);
        parse_batch(&[0u8; 64], None, &mut out);
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        parse_batch(&noise, Some(&mut seq), &mut out);
        assert!(!out.contains(&ProcEvent::Exec { pid: 5, tgid: 5 }));
    }

    #[test]
    fn releases_and_filter_support() {
        assert_eq!(parse_release("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_release("6.1.0-57-amd64"), Some((6, 1)));
        assert_eq!(parse_release("garbage"), None);
        assert!(kernel_filters(Some((6, 6))));
        assert!(kernel_filters(Some((7, 0))));
        assert!(!kernel_filters(Some((6, 1))));
        assert!(!kernel_filters(None));
    }

    #[test]
    fn open_errors_are_explained() {
        let m = describe_open_error(&io::Error::from_raw_os_error(libc::EPERM));
        assert!(m.contains("needs root (CAP_NET_ADMIN)"), "{m}");
        let m = describe_open_error(&io::Error::from_raw_os_error(libc::EPROTONOSUPPORT));
        assert!(m.contains("CONFIG_PROC_EVENTS"), "{m}");
    }
}
