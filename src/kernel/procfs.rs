//! Process scanning under a [`Root`]: `/proc/PID/{comm,exe,cmdline,status,
//! stat,cgroup}`, `/proc/PID/task`, and the user database (`/etc/passwd`)
//! for placement matches.
//!
//! Plain file reads through the injectable [`Root`] are used instead of the
//! `procfs` crate. Measured with procfs 0.18 (default
//! features off) by `benches/procfs-compare` (a package of its own, so the
//! crate is in neither Cargo.lock nor the Yocto crate list), on this
//! project's 2-core x86-64 build host under load, reading processes the
//! benchmark starts itself:
//!
//! - `--root`: the crate takes a root per process
//!   (`Process::new_with_root(DIR/proc/PID)`, `all_processes_with_root`),
//!   and stat, cmdline, exe and cgroup read a fake tree; but `status()` of
//!   the fake tree's 4-line status fails with "Internal error: bug at
//!   procfs-core status.rs:198", and the kernel version and system info
//!   (page size, clock ticks) still come from the host's /proc.
//! - Bounded reads: none. An 819,422-byte command line is read whole
//!   (288 µs) where [`read_capped`] stops at [`CMDLINE_MAX`] (65,536 bytes,
//!   8.8 µs); a command line that is not UTF-8 (`argv[0]` = `bad\377name`)
//!   is an error (`InvalidData`), so placement would lose the process,
//!   where this module reads it lossily.
//! - Vanishing pids: both hold. The crate maps ENOENT and ESRCH to
//!   `NotFound`; that cannot tell a pid gone from a file a sparse fake tree
//!   lacks, which this module tells apart (`/proc/PID` still there or not).
//! - Speed, median µs per read (open, read, parse), this module / crate with
//!   a `Process` opened per read / crate with a `Process` kept: stat
//!   4.39 / 4.12 / 3.48, status 4.61 / 18.68 / 17.37 (the crate parses every
//!   field), comm 1.64 / 4.15 / 3.50 (no `comm()`: it is stat's field),
//!   exe 0.97 / 1.39 / 0.68, cmdline 2.03 / 2.57 / 1.90, cgroup
//!   3.76 / 4.56 / 3.78 (20,000 reads each after 500 to warm up; the
//!   medians repeat within 3% across runs, the p99s do not on a loaded host).
//! - Size: the six reads through the crate make a stripped binary 135,096
//!   bytes larger than the same reads with std (344,008 → 479,104; rustix,
//!   already linked for crossterm and zlink, gains features); cgwarden
//!   stripped is 9.5 MB.
//!
//! So the readers stay: where the crate is faster it is by under 1 µs a
//! read (stat; exe and cmdline with a `Process` kept), status is 4× slower,
//! and the cap, the lossy decoding and gone-versus-missing would have to be
//! rebuilt around it.
//!
//! A process that vanishes while it is being read is never an error:
//! [`comm`] and [`user_process`] return `Ok(None)`. A file missing while `/proc/PID` still
//! exists (a sparse fake tree) leaves that field empty/`None`.
//!
//! Kernel threads are detected by the `PF_KTHREAD` flag (0x00200000) in
//! field 9 of `/proc/PID/stat`; where `stat` is absent or unparsable (fake
//! trees) the fallback is: pid 2 (kthreadd), or parent 2 with an empty
//! command line.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::root::Root;

/// `PF_KTHREAD` from include/linux/sched.h.
const PF_KTHREAD: u64 = 0x0020_0000;

/// At most this much of `/proc/PID/cmdline` is read: a
/// process can make its command line megabytes long; placement matches on
/// this prefix.
pub const CMDLINE_MAX: usize = 64 * 1024;
/// `/proc/PID/status` is ~1.5 KiB; a long `Groups:` line can grow it, but
/// the fields read (`Uid:`, `PPid:`) come first.
pub const STATUS_MAX: usize = 16 * 1024;
/// `/proc/PID/stat` is one line of ~52 numbers and a 15-byte comm.
pub(crate) const STAT_MAX: usize = 4 * 1024;
/// `/proc/PID/comm` holds at most 15 bytes and a newline; a fake tree can
/// hold anything.
pub(crate) const COMM_MAX: usize = 256;

/// Reads at most `cap` bytes of `p` (a longer file is cut, never an error):
/// what a process controls never sizes the daemon's memory.
///
/// A file shorter than the first read's buffer is read with that one
/// read(2) (`/proc` files are produced whole by one `show`, so a
/// short read is the end; the exec path reads several per process under a
/// flood); only a longer one is read on to its end.
pub fn read_capped(root: &Root, p: &Path, cap: usize) -> Result<Vec<u8>> {
    let host = root.host_path(p);
    let f = std::fs::File::open(&host).map_err(|e| Error::io("open", p, e))?;
    let first = cap.min(4096);
    let mut buf = super::root::read_once(&f, first).map_err(|e| Error::io("read", p, e))?;
    let n = buf.len();
    if n == first && n < cap {
        // `cap` fits u64 on every Linux target.
        f.take((cap - n) as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", p, e))?;
    }
    Ok(buf)
}

fn read_capped_text(root: &Root, p: &Path, cap: usize) -> Result<String> {
    let bytes = read_capped(root, p, cap)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// What placement reads about a user process beyond its comm ([`comm`]);
/// a field not asked for in [`Fields`] is empty/`None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub(crate) pid: i32,
    /// Resolved executable (`/proc/PID/exe`); `None` for exited zombies,
    /// or without permission.
    pub exe: Option<PathBuf>,
    /// Arguments split at NUL (one element if the process rewrote its
    /// command line without NULs).
    pub cmdline: Vec<String>,
    /// Real uid (first field of `Uid:` in `/proc/PID/status`).
    pub uid: Option<u32>,
    pub(crate) ppid: Option<i32>,
}

/// `/proc/PID/stat`, split safely: `comm` may contain spaces and `)`, so
/// the fields are split after the *last* `)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub(crate) pid: i32,
    pub comm: String,
    /// Fields 3.. (state, ppid, ...), as the kernel printed them (one
    /// space apart): split when a field is asked for, not into a string
    /// each (that would be fifty allocations a stat, read per exec).
    rest: String,
}

impl Stat {
    /// Field `n` in proc(5) numbering (1 = pid, 2 = comm, 3 = state, ...);
    /// `None` for 1, 2, or past the end.
    pub(crate) fn field(&self, n: usize) -> Option<&str> {
        if n < 3 {
            return None;
        }
        self.rest.split_ascii_whitespace().nth(n - 3)
    }

    /// Numeric field `n` (see [`Stat::field`]).
    pub(crate) fn num<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.field(n)?.parse().ok()
    }

    /// Process flags (field 9).
    pub(crate) fn flags(&self) -> Option<u64> {
        self.num(9)
    }

    /// True if `PF_KTHREAD` is set.
    pub(crate) fn is_kernel_thread(&self) -> Option<bool> {
        self.flags().map(|f| f & PF_KTHREAD != 0)
    }
}

/// Parses `/proc/PID/stat`; `None` for garbage.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let (pid, comm, rest) = stat_parts(text)?;
    Some(Stat {
        pid,
        comm: comm.to_string(),
        rest: rest.to_string(),
    })
}

/// `/proc/PID/stat` as pid, comm and the fields after it, borrowed.
fn stat_parts(text: &str) -> Option<(i32, &str, &str)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = text[..open].trim().parse().ok()?;
    Some((pid, &text[open + 1..close], &text[close + 1..]))
}

/// Numeric fields `ns` (1-based as in proc(5), ascending, each past the
/// comm: >= 3) of stat's text after the comm, in one pass.
fn stat_nums<const N: usize>(rest: &str, ns: [usize; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    let mut want = 0;
    for (i, field) in rest.split_ascii_whitespace().enumerate() {
        while want < N && ns[want] < i + 3 {
            want += 1; // not past the comm, or not ascending: left None
        }
        if want == N {
            break;
        }
        if ns[want] == i + 3 {
            out[want] = field.parse().ok();
            want += 1;
        }
    }
    out
}

fn proc_dir(pid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}"))
}

/// `/proc/PID/NAME` (NAME may hold slashes), built by hand: the exec path
/// builds several per process, and `format!` costs some 800 instructions
/// each where pushing the digits costs a tenth.
pub(crate) fn proc_file(pid: i32, name: &str) -> PathBuf {
    let mut s = String::with_capacity(18 + name.len());
    s.push_str("/proc/");
    push_decimal(&mut s, pid);
    s.push('/');
    s.push_str(name);
    PathBuf::from(s)
}

/// `/proc/PID/task/TID/NAME` (see [`proc_file`]).
fn task_file(pid: i32, tid: i32, name: &str) -> PathBuf {
    let mut s = String::with_capacity(32 + name.len());
    s.push_str("/proc/");
    push_decimal(&mut s, pid);
    s.push_str("/task/");
    push_decimal(&mut s, tid);
    s.push('/');
    s.push_str(name);
    PathBuf::from(s)
}

fn push_decimal(s: &mut String, v: i32) {
    if v < 0 {
        s.push('-');
    }
    let mut digits = [0u8; 10];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        s.push(char::from(d));
    }
}

/// Reads `/proc/PID/stat`; `Ok(None)` if the process vanished.
pub fn stat(root: &Root, pid: i32) -> Result<Option<Stat>> {
    let p = proc_file(pid, "stat");
    let text = match read_capped_text(root, &p, STAT_MAX) {
        Ok(t) => t,
        Err(e) if e.is_gone() => return Ok(None),
        Err(e) => return Err(e),
    };
    parse_stat(&text)
        .map(Some)
        .ok_or_else(|| Error::parse(&p, "process stat", &text))
}

/// Whether `/proc/PID` still exists (the process has not been reaped).
pub(crate) fn alive(root: &Root, pid: i32) -> bool {
    root.is_dir(&proc_dir(pid))
}

/// Numeric entries of `/proc`, sorted.
pub(crate) fn pids(root: &Root) -> Result<Vec<i32>> {
    Ok(numeric(root.list_dir(Path::new("/proc"))?))
}

fn numeric(names: Vec<String>) -> Vec<i32> {
    let mut v: Vec<i32> = names
        .iter()
        .filter_map(|n| n.parse::<i32>().ok())
        .filter(|&p| p > 0)
        .collect();
    v.sort_unstable();
    v
}

enum Got<T> {
    Val(T),
    /// File missing but the process is still there.
    Missing,
    Vanished,
}

fn got<T>(root: &Root, pid: i32, r: Result<T>) -> Result<Got<T>> {
    match r {
        Ok(v) => Ok(Got::Val(v)),
        Err(e) if e.errno() == Some(libc::ESRCH) => Ok(Got::Vanished),
        Err(e) if e.is_not_found() => {
            if root.is_dir(&proc_dir(pid)) {
                Ok(Got::Missing)
            } else {
                Ok(Got::Vanished)
            }
        }
        Err(e) => Err(e),
    }
}

/// Splits `/proc/PID/cmdline` at NUL bytes (trailing empty parts dropped).
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    while v.last().is_some_and(|s| s.is_empty()) {
        v.pop();
    }
    v
}

/// Value of a `Key:\tvalue` line of `/proc/PID/status`.
fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then_some(v.trim())
    })
}

/// Parses real uid and ppid from `/proc/PID/status`.
pub fn parse_status(status: &str) -> (Option<u32>, Option<i32>) {
    let uid = status_field(status, "Uid")
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    let ppid = status_field(status, "PPid").and_then(|v| v.parse().ok());
    (uid, ppid)
}

/// The comm of `pid`; `Ok(None)` if the process vanished.
pub fn comm(root: &Root, pid: i32) -> Result<Option<String>> {
    match read_capped_text(root, &proc_file(pid, "comm"), COMM_MAX) {
        Ok(s) => Ok(Some(s.strip_suffix('\n').unwrap_or(&s).to_string())),
        Err(e) if e.is_gone() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `VmRSS` of `pid` in bytes (`/proc/PID/status`); `Ok(None)` if the
/// process vanished or has no such line (a kernel thread).
pub(crate) fn rss_bytes(root: &Root, pid: i32) -> Result<Option<u64>> {
    let text = match read_capped_text(root, &proc_file(pid, "status"), STATUS_MAX) {
        Ok(t) => t,
        Err(e) if e.is_gone() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(status_field(&text, "VmRSS")
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .and_then(|kib| kib.checked_mul(1024)))
}

/// `/proc/PID/smaps_rollup` is ~25 lines (~800 bytes) on 5.x/6.x kernels.
pub(crate) const SMAPS_ROLLUP_MAX: usize = 4 * 1024;

/// `Pss:` of `pid` in bytes (`/proc/PID/smaps_rollup`, Linux ≥ 4.14, issue
/// 26): its resident pages, each shared one divided by its sharers.
/// `Ok(None)` if the process vanished, the file is absent (an older kernel)
/// or has no `Pss:` line (a kernel thread's is empty).
///
/// The read is capped in size, not in time: the kernel walks the process's
/// page tables to produce it, so its cost grows with the resident set
/// (measured on the x86-64 CI host: ~80 µs for `sleep`, ~50 ms for a
/// 2.5 GiB process with 2 100 mappings). Callers sample it sparingly.
pub(crate) fn pss_bytes(root: &Root, pid: i32) -> Result<Option<u64>> {
    let text = match read_capped_text(root, &proc_file(pid, "smaps_rollup"), SMAPS_ROLLUP_MAX) {
        Ok(t) => t,
        Err(e) if e.is_gone() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(parse_pss(&text))
}

/// The `Pss:` line of smaps_rollup text, in bytes.
pub(crate) fn parse_pss(text: &str) -> Option<u64> {
    status_field(text, "Pss")
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .and_then(|kib| kib.checked_mul(1024))
}

/// This boot's random id.
pub(crate) const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This boot's id (`/proc/sys/kernel/random/boot_id`), trimmed.
pub(crate) fn boot_id(root: &Root) -> Result<String> {
    root.read_trimmed(Path::new(BOOT_ID))
}

/// How long ago `pid` was started (`/proc/PID/stat` field 22 against
/// CLOCK_BOOTTIME); `None` when it cannot be told (vanished, a fake tree
/// without it). Only meaningful on the real kernel.
pub(crate) fn age(root: &Root, pid: i32) -> Option<std::time::Duration> {
    let start_ticks: u64 = stat(root, pid).ok()??.num(22)?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) } != 0 {
        return None;
    }
    let now = std::time::Duration::new(u64::try_from(t.tv_sec).ok()?, t.tv_nsec as u32);
    let started = std::time::Duration::from_millis(start_ticks.checked_mul(1000)? / hz);
    now.checked_sub(started)
}

/// When `pid` started (`/proc/PID/stat` field 22, clock ticks since boot):
/// with the pid, it names one process for its whole life (a reused pid has
/// a later start). `Ok(None)`: the process is gone; `Ok(Some(None))`: it is
/// there but the start cannot be told (a sparse fake tree).
pub(crate) fn start_time(root: &Root, pid: i32) -> Result<Option<Option<u64>>> {
    if pid <= 0 {
        return Ok(None);
    }
    match got(
        root,
        pid,
        read_capped_text(root, &proc_file(pid, "stat"), STAT_MAX),
    )? {
        Got::Val(s) => Ok(Some(
            stat_parts(&s).and_then(|(_, _, rest)| stat_nums(rest, [22])[0]),
        )),
        Got::Missing => Ok(Some(None)),
        Got::Vanished => Ok(None),
    }
}

/// What one `/proc/PID/stat` read tells the exec path about a process it
/// just pinned (one read instead of a `comm` read beside it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PinFacts {
    /// Field 22, clock ticks since boot ([`start_time`]).
    pub(crate) start: Option<u64>,
    /// Field 2: the same bytes as `/proc/PID/comm`.
    pub(crate) comm: Option<String>,
    /// Field 20, `num_threads`.
    pub(crate) threads: Option<u32>,
    /// `PF_KTHREAD` in field 9.
    pub(crate) kernel_thread: Option<bool>,
}

/// [`PinFacts`] of `pid`: `Ok(None)` when the process is gone; all `None`
/// when it is there but its stat cannot be read (a sparse fake tree).
pub(crate) fn pin_facts(root: &Root, pid: i32) -> Result<Option<PinFacts>> {
    if pid <= 0 {
        return Ok(None);
    }
    match got(
        root,
        pid,
        read_capped_text(root, &proc_file(pid, "stat"), STAT_MAX),
    )? {
        Got::Val(s) => Ok(Some(match stat_parts(&s) {
            Some((_, comm, rest)) => {
                let [flags, threads, start] = stat_nums(rest, [9, 20, 22]);
                PinFacts {
                    start,
                    threads: threads.and_then(|t| u32::try_from(t).ok()),
                    kernel_thread: flags.map(|f| f & PF_KTHREAD != 0),
                    comm: Some(comm.to_string()),
                }
            }
            None => PinFacts::default(),
        })),
        Got::Missing => Ok(Some(PinFacts::default())),
        Got::Vanished => Ok(None),
    }
}

/// A pidfd (`pidfd_open(2)`, Linux 5.3+): a handle on one process that a
/// reused pid cannot take over.
#[derive(Debug)]
pub(crate) struct PidFd(OwnedFd);

/// Why [`pidfd_open`] gave no handle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PidFdError {
    /// The process is gone.
    Gone,
    /// The kernel has no pidfd_open (before 5.3) or refused it otherwise.
    Unavailable(i32),
}

/// Opens a pidfd on `pid` (never on a fake root: the caller decides).
pub(crate) fn pidfd_open(pid: i32) -> std::result::Result<PidFd, PidFdError> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if r < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(if errno == libc::ESRCH {
            PidFdError::Gone
        } else {
            PidFdError::Unavailable(errno)
        });
    }
    let Ok(fd) = i32::try_from(r) else {
        return Err(PidFdError::Unavailable(libc::EBADF));
    };
    // SAFETY: `fd` is a fresh pidfd that nothing else owns.
    Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd) }))
}

impl From<PidFd> for OwnedFd {
    fn from(p: PidFd) -> OwnedFd {
        p.0
    }
}

impl From<OwnedFd> for PidFd {
    /// The caller vouches that `fd` is a pidfd.
    fn from(fd: OwnedFd) -> PidFd {
        PidFd(fd)
    }
}

impl PidFd {
    /// [`PidFd::alive`] on a borrowed pidfd.
    pub(crate) fn alive_fd(fd: std::os::fd::BorrowedFd<'_>) -> bool {
        // SAFETY: signal 0 with a null siginfo only checks the target.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }

    /// False once the process has exited (its pid may then be reused):
    /// `pidfd_send_signal(fd, 0)` says ESRCH.
    #[cfg(test)]
    pub(crate) fn alive(&self) -> bool {
        use std::os::fd::AsFd;
        Self::alive_fd(self.0.as_fd())
    }
}

/// Which optional fields [`user_process`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub exe: bool,
    pub cmdline: bool,
    pub uid: bool,
}

#[cfg(test)]
impl Fields {
    pub(crate) const ALL: Fields = Fields {
        exe: true,
        cmdline: true,
        uid: true,
    };
}

/// What placement reads after the comm: only the fields asked for, plus
/// `stat` to tell kernel threads apart. `Ok(None)` if the process vanished
/// (ENOENT/ESRCH at any step) or is a kernel thread; fields not asked for
/// are empty/`None`. One to four files, so an exec only matched by comm
/// costs little.
pub fn user_process(root: &Root, pid: i32, want: Fields) -> Result<Option<ProcessInfo>> {
    if pid <= 0 {
        return Ok(None);
    }
    let dir = proc_dir(pid);
    let stat = match got(
        root,
        pid,
        read_capped_text(root, &dir.join("stat"), STAT_MAX),
    )? {
        Got::Val(s) => parse_stat(&s),
        Got::Missing => None,
        Got::Vanished => return Ok(None),
    };
    let kthread = stat.as_ref().and_then(Stat::is_kernel_thread);
    if kthread == Some(true) {
        return Ok(None);
    }
    // Without a usable stat (sparse fake trees) the fallback needs both.
    let want_cmdline = want.cmdline || kthread.is_none();
    let want_status = want.uid || kthread.is_none();
    let cmdline = if want_cmdline {
        match got(
            root,
            pid,
            read_capped(root, &dir.join("cmdline"), CMDLINE_MAX),
        )? {
            Got::Val(b) => parse_cmdline(&b),
            Got::Missing => Vec::new(),
            Got::Vanished => return Ok(None),
        }
    } else {
        Vec::new()
    };
    let (uid, mut ppid) = if want_status {
        match got(
            root,
            pid,
            read_capped_text(root, &dir.join("status"), STATUS_MAX),
        )? {
            Got::Val(s) => parse_status(&s),
            Got::Missing => (None, None),
            Got::Vanished => return Ok(None),
        }
    } else {
        (None, None)
    };
    if ppid.is_none() {
        ppid = stat.as_ref().and_then(|s| s.num(4));
    }
    if kthread.is_none() && (pid == 2 || (ppid == Some(2) && cmdline.is_empty())) {
        return Ok(None);
    }
    let exe = if want.exe {
        // ENOENT for zombies, EACCES without ptrace rights.
        match root.read_link(&dir.join("exe")) {
            Ok(p) => Some(p),
            Err(e) if e.errno() == Some(libc::ESRCH) => return Ok(None),
            Err(_) => None,
        }
    } else {
        None
    };
    Ok(Some(ProcessInfo {
        pid,
        exe,
        cmdline,
        uid: if want.uid { uid } else { None },
        ppid,
    }))
}

/// Thread ids of `pid` (`/proc/PID/task`), sorted; empty if missing.
pub(crate) fn threads(root: &Root, pid: i32) -> Vec<i32> {
    root.list_dir(&proc_file(pid, "task"))
        .map(numeric)
        .unwrap_or_default()
}

/// Children of a single-threaded `pid`: its main thread's
/// `/proc/PID/task/PID/children` only (one read instead of listing `task/`).
pub(crate) fn main_thread_children(root: &Root, pid: i32) -> Vec<i32> {
    let p = task_file(pid, pid, "children");
    let mut v: Vec<i32> = root
        .read_small(&p)
        .map(|text| {
            text.split_whitespace()
                .filter_map(|t| t.parse::<i32>().ok())
                .filter(|&c| c > 0)
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v.dedup();
    v
}

/// Children of `pid`: union of `/proc/PID/task/*/children`, sorted.
/// Missing files give an empty list (the files need CONFIG_PROC_CHILDREN).
pub(crate) fn children(root: &Root, pid: i32) -> Vec<i32> {
    let mut set = BTreeSet::new();
    for tid in threads(root, pid) {
        let p = task_file(pid, tid, "children");
        if let Ok(text) = root.read(&p) {
            set.extend(
                text.split_whitespace()
                    .filter_map(|t| t.parse::<i32>().ok())
                    .filter(|&c| c > 0),
            );
        }
    }
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    proptest::proptest! {
        /// The one-pass field reader agrees with [`Stat::num`], whatever
        /// the comm holds (spaces, parentheses) and however many fields.
        #[test]
        fn one_pass_fields_agree_with_stat_num(
            comm in "[ a-z()0-9]{0,15}",
            fields in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Strategy::prop_map(0u64..u64::MAX, |v| v.to_string()),
                    proptest::prelude::Strategy::prop_map(-99i64..0, |v| v.to_string()),
                    proptest::prelude::Just("S".to_string()),
                ],
                0..40,
            ),
        ) {
            let text = format!("42 ({comm}) {}\n", fields.join(" "));
            let st = parse_stat(&text).expect("parses");
            let (_, c, rest) = stat_parts(&text).expect("parts");
            proptest::prop_assert_eq!(c, st.comm.as_str());
            let [a, b, c] = stat_nums(rest, [9, 20, 22]);
            proptest::prop_assert_eq!(a, st.num::<u64>(9));
            proptest::prop_assert_eq!(b, st.num::<u64>(20));
            proptest::prop_assert_eq!(c, st.num::<u64>(22));
        }
    }

    proptest::proptest! {
        #[test]
        fn hand_built_proc_paths_are_what_format_makes(pid in proptest::prelude::any::<i32>(), tid in proptest::prelude::any::<i32>()) {
            proptest::prop_assert_eq!(proc_file(pid, "stat"), PathBuf::from(format!("/proc/{pid}/stat")));
            proptest::prop_assert_eq!(task_file(pid, tid, "children"), PathBuf::from(format!("/proc/{pid}/task/{tid}/children")));
        }
    }

    #[test]
    fn read_capped_reads_short_long_and_capped_files() {
        let dir = TempDir::new().unwrap();
        let root = Root::fake(dir.path());
        fs::write(dir.path().join("short"), "1 2 3\n").unwrap();
        let long: String = (0..3000).map(|i| format!("{i} ")).collect();
        fs::write(dir.path().join("long"), &long).unwrap();
        assert_eq!(
            read_capped(&root, Path::new("/short"), 4096).unwrap(),
            b"1 2 3\n"
        );
        assert_eq!(
            read_capped(&root, Path::new("/long"), 1 << 20).unwrap(),
            long.as_bytes()
        );
        assert_eq!(
            read_capped(&root, Path::new("/long"), 5000).unwrap(),
            &long.as_bytes()[..5000]
        );
        assert_eq!(
            read_capped(&root, Path::new("/long"), 10).unwrap(),
            &long.as_bytes()[..10]
        );
        assert!(read_capped(&root, Path::new("/none"), 10).is_err());
    }

    #[test]
    fn age_of_a_fresh_child_is_small_and_of_a_missing_pid_none() {
        // Reads the host's own /proc (read-only).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let a = age(&Root::real(), pid);
        let _ = child.kill();
        let _ = child.wait();
        let a = a.expect("age of a live child");
        assert!(a < std::time::Duration::from_secs(3), "{a:?}");
        let init = age(&Root::real(), 1).expect("age of pid 1");
        assert!(init > a, "pid 1 is older than a fresh child");
        assert_eq!(age(&Root::real(), i32::MAX), None);
    }

    fn add(t: &TempDir, pid: i32, files: &[(&str, &[u8])]) {
        let d = t.path().join(format!("proc/{pid}"));
        fs::create_dir_all(&d).unwrap();
        for (n, c) in files {
            fs::write(d.join(n), c).unwrap();
        }
    }

    fn stat_line(pid: i32, comm: &str, ppid: i32, flags: u64) -> String {
        // fields 3..=41 with rt_priority (40) = 0 and policy (41) = 0
        let mut f: Vec<String> = vec!["S".into(), ppid.to_string()];
        f.extend((5..=41).map(|n| {
            if n == 9 {
                flags.to_string()
            } else {
                "0".into()
            }
        }));
        format!("{pid} ({comm}) {}\n", f.join(" "))
    }

    #[test]
    fn full_process() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        let stat = stat_line(100, "cam (x) y", 1, 0x400100);
        add(
            &t,
            100,
            &[
                ("comm", b"camera_pipe\n"),
                ("cmdline", b"/usr/bin/camera_pipeline\0--fast\0\0"),
                (
                    "status",
                    b"Name:\tcamera_pipe\nState:\tS\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\n",
                ),
                ("stat", stat.as_bytes()),
            ],
        );
        std::os::unix::fs::symlink("/usr/bin/camera_pipeline", t.path().join("proc/100/exe"))
            .unwrap();
        let p = user_process(&r, 100, Fields::ALL).unwrap().unwrap();
        assert_eq!(
            p.exe.as_deref(),
            Some(Path::new("/usr/bin/camera_pipeline"))
        );
        assert_eq!(p.cmdline, ["/usr/bin/camera_pipeline", "--fast"]);
        assert_eq!(p.uid, Some(1000));
        assert_eq!(p.ppid, Some(1));
        // Only what is asked for is read.
        let q = user_process(&r, 100, Fields::default()).unwrap().unwrap();
        assert_eq!((q.exe, q.cmdline.len(), q.uid), (None, 0, None));
        assert_eq!(comm(&r, 100).unwrap().as_deref(), Some("camera_pipe"));
        assert_eq!(comm(&r, 101).unwrap(), None);
        let s = stat_fn(&r, 100);
        assert_eq!(s.comm, "cam (x) y");
        assert_eq!(s.field(3), Some("S"));
        assert_eq!(s.num::<i32>(4), Some(1));
        assert_eq!(s.flags(), Some(0x400100));
    }

    fn stat_fn(r: &Root, pid: i32) -> Stat {
        stat(r, pid).unwrap().unwrap()
    }

    #[test]
    fn sparse_and_vanished() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert_eq!(user_process(&r, 5, Fields::ALL).unwrap(), None);
        assert_eq!(user_process(&r, -1, Fields::ALL).unwrap(), None);
        assert_eq!(stat(&r, 5).unwrap(), None);
        // only comm: other fields empty
        add(&t, 6, &[("comm", b"motion_control\n")]);
        assert_eq!(comm(&r, 6).unwrap().as_deref(), Some("motion_control"));
        let p = user_process(&r, 6, Fields::ALL).unwrap().unwrap();
        assert_eq!(p.exe, None);
        assert!(p.cmdline.is_empty());
        assert_eq!(p.uid, None);
        // garbage content is tolerated
        add(
            &t,
            7,
            &[
                ("comm", b"x"),
                ("status", b"\xff\xfegarbage\nUid: abc\nPPid:\n"),
                ("stat", b"garbage"),
                ("cmdline", b"no nuls here"),
            ],
        );
        let p = user_process(&r, 7, Fields::ALL).unwrap().unwrap();
        assert_eq!(p.uid, None);
        assert_eq!(p.ppid, None);
        assert_eq!(p.cmdline, ["no nuls here"]);
        assert!(matches!(stat(&r, 7).unwrap_err(), Error::Parse { .. }));
    }

    #[test]
    fn kernel_threads() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        // by PF_KTHREAD
        let st = stat_line(30, "kworker/0:1", 2, 0x04208060);
        add(
            &t,
            30,
            &[
                ("comm", b"kworker/0:1\n"),
                ("cmdline", b""),
                ("stat", st.as_bytes()),
            ],
        );
        assert_eq!(user_process(&r, 30, Fields::ALL).unwrap(), None);
        // ppid comes from stat where status lacks it
        let st = stat_line(33, "worker", 2, 0x400100);
        add(&t, 33, &[("comm", b"worker\n"), ("stat", st.as_bytes())]);
        assert_eq!(
            user_process(&r, 33, Fields::ALL).unwrap().unwrap().ppid,
            Some(2)
        );
        // fallback heuristic without stat
        add(&t, 2, &[("comm", b"kthreadd\n")]);
        assert_eq!(user_process(&r, 2, Fields::ALL).unwrap(), None);
        add(
            &t,
            31,
            &[("comm", b"ksoftirqd/0\n"), ("status", b"PPid:\t2\n")],
        );
        assert_eq!(user_process(&r, 31, Fields::ALL).unwrap(), None);
        add(
            &t,
            32,
            &[
                ("comm", b"sh\n"),
                ("status", b"PPid:\t2\n"),
                ("cmdline", b"sh\0"),
            ],
        );
        assert!(user_process(&r, 32, Fields::ALL).unwrap().is_some());
    }

    #[test]
    fn pids_threads_children() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        for d in [
            "proc/10/task/10",
            "proc/10/task/12",
            "proc/2",
            "proc/self",
            "proc/sys",
        ] {
            fs::create_dir_all(t.path().join(d)).unwrap();
        }
        fs::write(t.path().join("proc/10/task/10/children"), "20 21 ").unwrap();
        fs::write(t.path().join("proc/10/task/12/children"), "21 5 x\n").unwrap();
        assert_eq!(pids(&r).unwrap(), [2, 10]);
        assert_eq!(threads(&r, 10), [10, 12]);
        assert_eq!(children(&r, 10), [5, 20, 21]);
        assert!(children(&r, 2).is_empty());
        assert!(threads(&r, 99).is_empty());
    }

    #[test]
    fn cmdline_read_is_capped_and_start_time_read() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        let mut big = b"/usr/bin/camera_pipeline\0--cam\0".to_vec();
        big.resize(10 * 1024 * 1024, b'x');
        let st = stat_line(40, "cam", 1, 0x400100);
        add(
            &t,
            40,
            &[
                ("comm", b"cam\n"),
                ("cmdline", &big),
                ("stat", st.as_bytes()),
            ],
        );
        let p = user_process(&r, 40, Fields::ALL).unwrap().unwrap();
        let len: usize = p.cmdline.iter().map(|a| a.len() + 1).sum();
        assert!(len <= CMDLINE_MAX + 1, "read {len} bytes");
        assert_eq!(p.cmdline[..2], ["/usr/bin/camera_pipeline", "--cam"]);
        assert_eq!(
            read_capped(&r, Path::new("/proc/40/cmdline"), 10)
                .unwrap()
                .len(),
            10
        );
        // field 22 of stat_line is 0; a real one is read as such
        assert_eq!(start_time(&r, 40).unwrap(), Some(Some(0)));
        let mut f: Vec<String> = (3..=41)
            .map(|n| if n == 22 { "777".into() } else { "0".into() })
            .collect();
        f[0] = "S".into();
        add(
            &t,
            41,
            &[("stat", format!("41 (x) {}", f.join(" ")).as_bytes())],
        );
        assert_eq!(start_time(&r, 41).unwrap(), Some(Some(777)));
        add(&t, 42, &[("comm", b"y")]);
        assert_eq!(start_time(&r, 42).unwrap(), Some(None), "sparse: unknown");
        assert_eq!(start_time(&r, 43).unwrap(), None, "gone");
    }

    #[test]
    fn pidfd_tells_an_exited_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            // A kernel before 5.3 (or a seccomp filter): nothing to test here.
            Err(PidFdError::Unavailable(_)) => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Err(e) => panic!("{e:?}"),
        };
        assert!(fd.alive());
        let _ = child.kill();
        let _ = child.wait();
        assert!(!fd.alive(), "a reaped child's pidfd says it is gone");
        assert_eq!(pidfd_open(pid).unwrap_err(), PidFdError::Gone);
    }

    #[test]
    fn stat_parsing_edge_cases() {
        assert!(parse_stat("").is_none());
        assert!(parse_stat("1 x) (y").is_none());
        let s = parse_stat("1 (a)) b) R 0").unwrap();
        assert_eq!(s.comm, "a)) b");
        assert_eq!(s.field(3), Some("R"));
        assert_eq!(s.field(2), None);
        assert_eq!(s.field(99), None);
        assert_eq!(s.is_kernel_thread(), None);
    }

    #[test]
    fn pss_from_smaps_rollup_as_the_kernel_prints_it() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        fs::create_dir_all(t.path().join("proc/7")).unwrap();
        let text = crate::kernel::fake_tree::smaps_rollup_text(1756, 280);
        fs::write(t.path().join("proc/7/smaps_rollup"), text).unwrap();
        assert_eq!(pss_bytes(&r, 7).unwrap(), Some(280 * 1024));
        // Vanished process, kernel thread (empty file), junk: None.
        assert_eq!(pss_bytes(&r, 8).unwrap(), None);
        fs::write(t.path().join("proc/7/smaps_rollup"), "").unwrap();
        assert_eq!(pss_bytes(&r, 7).unwrap(), None);
        assert_eq!(parse_pss("Pss: lots kB\n"), None);
        assert_eq!(parse_pss("Rss: 5 kB\nPss_Anon: 9 kB\n"), None);
    }
}
