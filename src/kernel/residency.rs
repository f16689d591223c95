//! The daemon's own resident memory (issue 29: idle RSS ≤ 6 MiB, locked).
//!
//! Measured in the x86 guest, the idle daemon's RSS was three quarters
//! *file* pages: the binary's text and read-only data (5.9 of 8.1 MiB) and
//! the C libraries' (2 MiB), not heap. Every page a fault maps stays mapped
//! — and with `mlockall(MCL_ONFAULT)` locked — for the life of the process,
//! and the kernel maps up to 64 KiB around each faulting page
//! (`fault_around_bytes`) when the file is in the page cache. Startup runs
//! code the idle loop never runs again: YAML decoding, validation, the
//! first convergence, argument parsing, the recorder's schema. So once
//! started the daemon gives those mappings back ([`shed_clean_file_pages`]):
//! the read-only, file-backed mappings with no private (anonymous) page are
//! dropped from its page tables with `madvise(MADV_DONTNEED)` — the page
//! cache keeps them, nothing is read from disk — and what the loop runs
//! faults back in (and is locked again) on first use. Freed heap goes back
//! too ([`trim_heap`]).
//!
//! Dropping is not enough: the loop's code is spread over the whole text,
//! and each page it touches maps `fault_around_bytes` (64 KiB) of it
//! again — measured in the guest, 3.1–4.0 MiB of the binary's text came
//! back resident for a loop that runs a fraction of it. Fault-around never
//! crosses a mapping (VMA) boundary, and the kernel keeps two adjacent
//! ranges of one file in separate VMAs when their flags differ. So the
//! dropped mappings are cut into [`GRANULE`]-sized pieces by alternating
//! `MADV_RANDOM` (which only turns readahead off for the range) with
//! `MADV_NORMAL` by address ([`split_fault_around`]): a fault then maps
//! at most one granule. The cost is kernel memory for the extra VMAs
//! (a few hundred bytes each; about 450 for a 7 MiB binary and its
//! libraries) and more, smaller faults when a path runs for the first
//! time. A system-wide `fault_around_bytes` (debugfs) would do the same
//! for every process; this does it for the daemon alone.
//!
//! Also here: [`disable_thp`] (a 2 MiB transparent huge page on a heap
//! that crossed 2 MiB, locked, is a quarter of the budget) and glibc
//! malloc's trim threshold ([`tune_malloc`]).

use super::error::{Error, Result};

/// `MLOCK_ONFAULT` for `mlock2(2)` (Linux 4.4, as `MCL_ONFAULT`).
const MLOCK_ONFAULT: libc::c_uint = 1;

/// The largest piece a page fault maps of the binary and libraries once
/// they were shed: four 4 KiB pages (the kernel's fault-around is 16).
pub const GRANULE: usize = 16 << 10;

/// A mapping [`droppable`] found: start address, length, resident KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: usize,
    pub len: usize,
    pub rss_kib: u64,
}

/// The mappings of a `/proc/PID/smaps` text whose resident pages can be
/// dropped and faulted back from their file unchanged: file-backed (an
/// inode), not writable, and without a single anonymous (copied-on-write)
/// page — a RELRO segment relocated before it was made read-only has
/// those, and dropping them would bring back the unrelocated file bytes.
/// Mappings with nothing resident are left out.
pub fn droppable(smaps: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    // The mapping being read: (candidate, start, len), its Rss and Anonymous.
    let mut cur: Option<(bool, usize, usize)> = None;
    let (mut rss, mut anon): (Option<u64>, Option<u64>) = (None, None);
    let mut flush = |cur: Option<(bool, usize, usize)>, rss: Option<u64>, anon: Option<u64>| {
        if let (Some((true, start, len)), Some(rss), Some(0)) = (cur, rss, anon) {
            if rss > 0 {
                out.push(Mapping {
                    start,
                    len,
                    rss_kib: rss,
                });
            }
        }
    };
    for line in smaps.lines() {
        if let Some(header) = mapping_header(line) {
            flush(cur, rss, anon);
            cur = Some(header);
            (rss, anon) = (None, None);
        } else if let Some(v) = line.strip_prefix("Rss:") {
            rss = kib(v);
        } else if let Some(v) = line.strip_prefix("Anonymous:") {
            anon = kib(v);
        }
    }
    flush(cur, rss, anon);
    out
}

/// `START-END PERMS OFFSET DEV INODE [PATH]`: (candidate, start, len), or
/// `None` when the line is not a mapping's header.
fn mapping_header(line: &str) -> Option<(bool, usize, usize)> {
    let mut f = line.split_whitespace();
    let (start, end) = f.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = f.next()?;
    let (_offset, _dev) = (f.next()?, f.next()?);
    let inode: u64 = f.next()?.parse().ok()?;
    if perms.len() != 4 || end <= start {
        return None;
    }
    let path = f.next().unwrap_or("");
    let candidate = inode != 0
        && perms.as_bytes()[1] == b'-'
        && perms.as_bytes()[0] == b'r'
        && path.starts_with('/')
        // A deleted file cannot be read back.
        && !line.ends_with("(deleted)");
    Some((candidate, start, end - start))
}

fn kib(v: &str) -> Option<u64> {
    v.split_whitespace().next()?.parse().ok()
}

/// Drops the resident pages of this process's [`droppable`] mappings.
/// `relock`: the process was `mlockall`ed — locked pages cannot be
/// dropped, so each mapping is unlocked, dropped and locked again on fault
/// (`mlock2(MLOCK_ONFAULT)`), one at a time: the other threads' page faults
/// wait for the memory map's lock only as long as one mapping takes, and
/// `MCL_FUTURE` stays in force. Returns the KiB that were resident in the
/// dropped mappings.
pub fn shed_clean_file_pages(relock: bool) -> Result<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")
        .map_err(|e| Error::io("read", "/proc/self/smaps", e))?;
    let mut dropped = 0;
    let mut first_error = None;
    for m in droppable(&smaps) {
        let addr = m.start as *mut libc::c_void;
        // SAFETY (all three calls): the range is one of our own mappings as
        // /proc/self/smaps listed it — read-only and file-backed with no
        // private page — so unlocking, dropping and locking its pages
        // changes no content: the next access faults the same bytes back
        // from the page cache. A mapping unmapped since the read gives
        // ENOMEM, which is reported and skipped.
        if relock && unsafe { libc::munlock(addr, m.len) } != 0 {
            first_error.get_or_insert_with(|| last_os("munlock", format!("{:#x}", m.start)));
            continue;
        }
        if unsafe { libc::madvise(addr, m.len, libc::MADV_DONTNEED) } == 0 {
            dropped += m.rss_kib;
        } else {
            first_error
                .get_or_insert_with(|| last_os("madvise", format!("MADV_DONTNEED {:#x}", m.start)));
        }
        if let Err(e) = split_fault_around(m.start, m.len) {
            first_error.get_or_insert(e);
        }
        if relock && unsafe { libc::syscall(libc::SYS_mlock2, addr, m.len, MLOCK_ONFAULT) } != 0 {
            return Err(last_os(
                "mlock2",
                format!("MLOCK_ONFAULT {:#x}, again", m.start),
            ));
        }
    }
    match first_error {
        Some(e) if dropped == 0 => Err(e),
        _ => Ok(dropped),
    }
}

/// The [`GRANULE`]s of `[start, start + len)` whose index (address /
/// granule) is odd: readahead off (`MADV_RANDOM`), the even ones normal.
/// Decided by address, not by position in the range, so a second shed
/// (after a reload) over mappings already cut keeps the same pattern.
pub fn granules(start: usize, len: usize) -> impl Iterator<Item = (usize, usize, bool)> {
    let end = start.saturating_add(len);
    let first = start / GRANULE;
    let last = end.div_ceil(GRANULE);
    (first..last).map(move |g| {
        let a = (g * GRANULE).max(start);
        let b = ((g + 1) * GRANULE).min(end);
        (a, b - a, g % 2 == 1)
    })
}

/// Cuts a mapping into VMAs of at most one [`GRANULE`] so that a fault
/// maps no more than that ([`granules`]; the module doc says why).
fn split_fault_around(start: usize, len: usize) -> Result<()> {
    for (a, l, random) in granules(start, len) {
        let advice = if random {
            libc::MADV_RANDOM
        } else {
            libc::MADV_NORMAL
        };
        // SAFETY: advice on our own read-only file mapping as smaps listed
        // it; MADV_RANDOM and MADV_NORMAL change readahead, not content.
        if unsafe { libc::madvise(a as *mut libc::c_void, l, advice) } != 0 {
            return Err(last_os("madvise", format!("MADV_RANDOM/NORMAL {a:#x}")));
        }
    }
    Ok(())
}

fn last_os(op: &'static str, context: String) -> Error {
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    Error::os(op, "/proc/self", errno, context)
}

/// `prctl(PR_SET_THP_DISABLE, 1)`: no transparent huge pages for this
/// process. Under `transparent_hugepage=always` (Debian's default) a heap
/// that grows past 2 MiB gets whole 2 MiB pages on first touch, and with
/// `mlockall` they stay. Inherited across fork and exec: a child that
/// should not keep it clears it ([`allow_thp`]).
pub fn disable_thp() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(last_os("prctl", "PR_SET_THP_DISABLE".to_string()));
    }
    Ok(())
}

/// Clears [`disable_thp`]'s flag in a forked child before it execs (hooks
/// run with the system's default). Async-signal-safe; the result is
/// ignored (a kernel before 3.15 never set it).
pub fn allow_thp() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
}

/// Freed memory at the top of a glibc heap goes back to the kernel past
/// `trim` bytes (glibc's default is 128 KiB and grows with each large
/// free; set, it stays). Call before other threads exist. Nothing where
/// the C library is not glibc.
pub fn tune_malloc(trim: usize) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes two integers.
    unsafe {
        libc::mallopt(
            libc::M_TRIM_THRESHOLD,
            libc::c_int::try_from(trim).unwrap_or(libc::c_int::MAX),
        );
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = trim;
}

/// `malloc_trim(0)`: glibc gives the free pages inside every heap (not only
/// at the top) back to the kernel. Nothing where the C library is not glibc.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes a size and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the guest's 6.1 kernel printed them for the daemon
    /// (abridged: the fields between Rss and Anonymous are left out).
    const SMAPS: &str = "\
55bad8c5d000-55bad8e0c000 r--p 00000000 00:02 1058 /usr/local/bin/cgwarden
Size:               1724 kB
Rss:                 716 kB
Anonymous:             0 kB
55bad8e0c000-55bad9521000 r-xp 001af000 00:02 1058 /usr/local/bin/cgwarden
Size:               7252 kB
Rss:                5248 kB
Anonymous:             0 kB
55bad9521000-55bad954a000 r--p 008c4000 00:02 1058 /usr/local/bin/cgwarden
Size:                164 kB
Rss:                 164 kB
Anonymous:           164 kB
55bad954a000-55bad9551000 rw-p 008ed000 00:02 1058 /usr/local/bin/cgwarden
Rss:                  28 kB
Anonymous:            28 kB
55bb126ee000-55bb12730000 rw-p 00000000 00:00 0 [heap]
Rss:                 212 kB
Anonymous:           212 kB
7f0b92134000-7f0b9228a000 r-xp 00026000 00:02 977 /lib/x86_64-linux-gnu/libc.so.6
Rss:                 944 kB
Anonymous:             0 kB
7f0b922f0000-7f0b92300000 r--p 00000000 00:02 990 /lib/x86_64-linux-gnu/libm.so.6
Rss:                   0 kB
Anonymous:             0 kB
7f0b92400000-7f0b92401000 r--s 00000000 00:05 12 /dev/shm/x (deleted)
Rss:                   4 kB
Anonymous:             0 kB
7ffd1a5df000-7ffd1a5e1000 r-xp 00000000 00:00 0 [vdso]
Rss:                   8 kB
Anonymous:             0 kB
";

    #[test]
    fn granules_alternate_by_address_and_cover_the_range() {
        let g = GRANULE;
        // A range starting mid-granule, on an odd granule.
        let v: Vec<_> = granules(3 * g + 4096, 2 * g).collect();
        assert_eq!(
            v,
            [
                (3 * g + 4096, g - 4096, true),
                (4 * g, g, false),
                (5 * g, 4096, true)
            ]
        );
        // The same granules seen as separate one-granule mappings (a second
        // shed): the same advice each, so adjacent pieces never merge back.
        for (a, l, r) in v {
            assert_eq!(granules(a, l).collect::<Vec<_>>(), [(a, l, r)]);
        }
        assert_eq!(granules(0, 0).count(), 0);
    }

    #[test]
    fn a_shed_mapping_faults_back_one_granule_at_a_time() {
        // A private read-only mapping of a file in the page cache, shed as
        // the daemon sheds its text: touching one byte per 64 KiB maps one
        // granule each, not the kernel's 64 KiB of fault-around.
        let path = std::env::temp_dir().join(format!("cgw-residency-{}", std::process::id()));
        let len = 64 * GRANULE;
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh read-only private mapping of our own file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let start = p as usize;
        split_fault_around(start, len).unwrap();
        let touches = len / (64 << 10);
        for i in 0..touches {
            // SAFETY: within the mapping.
            let b = unsafe { std::ptr::read_volatile((start + i * (64 << 10)) as *const u8) };
            assert_eq!(b, 7);
        }
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let resident: u64 = droppable(&smaps)
            .iter()
            .filter(|m| m.start >= start && m.start < start + len)
            .map(|m| m.rss_kib)
            .sum();
        // SAFETY: our mapping, unmapped once.
        unsafe { libc::munmap(p, len) };
        let _ = std::fs::remove_file(&path);
        assert!(
            resident <= (touches * GRANULE / 1024) as u64,
            "{resident} KiB resident after {touches} touches: fault-around crossed the granules"
        );
        assert!(resident > 0, "the touched pages are resident");
    }

    #[test]
    fn only_clean_read_only_file_mappings_with_pages_are_dropped() {
        let m = droppable(SMAPS);
        assert_eq!(
            m,
            [
                Mapping {
                    start: 0x55bad8c5d000,
                    len: 0x55bad8e0c000 - 0x55bad8c5d000,
                    rss_kib: 716
                },
                Mapping {
                    start: 0x55bad8e0c000,
                    len: 0x55bad9521000 - 0x55bad8e0c000,
                    rss_kib: 5248
                },
                Mapping {
                    start: 0x7f0b92134000,
                    len: 0x7f0b9228a000 - 0x7f0b92134000,
                    rss_kib: 944
                },
            ],
            "not the relocated RELRO (anonymous pages), data, heap, an empty \
             mapping, a deleted file or the vdso"
        );
    }

    #[test]
    fn garbage_and_truncated_text_drop_nothing() {
        assert!(droppable("").is_empty());
        assert!(droppable("garbage\nRss: 5 kB\nAnonymous: 0 kB\n").is_empty());
        // A header without its Anonymous line (cut short): not trusted.
        assert!(droppable(
            "7f0b92134000-7f0b9228a000 r-xp 00026000 00:02 977 /lib/libc.so.6\nRss: 944 kB\n"
        )
        .is_empty());
        assert!(droppable("zz-yy r-xp 0 00:02 977 /x\nRss: 4 kB\nAnonymous: 0 kB\n").is_empty());
    }

    /// On this host's own process: the test binary's text is resident,
    /// shedding drops it, and the code keeps running (it faults back).
    #[test]
    fn shedding_our_own_text_keeps_us_running() {
        let before = std::fs::read_to_string("/proc/self/smaps").unwrap();
        assert!(
            !droppable(&before).is_empty(),
            "no droppable mapping in our own smaps"
        );
        let kib = shed_clean_file_pages(false).unwrap();
        assert!(kib > 0);
        // Still here, and a second shed finds less resident.
        assert_eq!(format!("{}", 6 * 7), "42");
        trim_heap();
    }
}
