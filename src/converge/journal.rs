//! The originals journal: before cgwarden first changes anything,
//! what was there is appended to `state_dir/originals` and synced, so `reset`
//! can put it back even after a crash or a power cut.
//!
//! This module owns the journal's format, its check and its file I/O.
//!
//! # Format (v2)
//!
//! ```text
//! # cgwarden originals journal v2
//! ROOT<TAB>/sys/fs/cgroup
//! FILE<TAB>/proc/sys/vm/swappiness<TAB>60\n
//! MKDIR<TAB>/sys/fs/cgroup/realtime
//! ```
//!
//! Line 1 is the header (it says the file is cgwarden's), line 2 records
//! `settings.cgroup_root` of the run that created it (`reset` uses that, not
//! the current policy's). Then one entry a line, append-only, fields
//! separated by a tab (`<TAB>` above); `\\`, tab, newline and carriage return
//! are escaped as `\\`, `\t`, `\n`, `\r`. A line must be exactly what
//! [`Entry`] renders (canonical form), so a damaged line is never
//! half-understood.
//!
//! The journal is created atomically (header, root and first entry written to
//! `originals.new`, synced, renamed, directory synced), so cgwarden never
//! leaves an empty or header-less journal. An entry is recorded once: a
//! journal left by a crashed run keeps its originals, and later runs only add
//! entries for things they touch for the first time.
//!
//! An original is kept as its file takes it back, which is not always what
//! it reads ([`crate::knobs::restorable`]): zram's `comp_algorithm` reads the
//! whole list with the active algorithm in brackets and takes one name, a
//! partition the kernel holds invalid reads `isolated invalid (REASON)` and
//! takes `isolated`, `io.weight` reads a line per device and takes one. A
//! journal of an older cgwarden that kept what such a file read is read the
//! same way. Writing one sysctl of a coupled pair (`vm.dirty_bytes` and
//! `vm.dirty_ratio`, …: the kernel zeroes the other) journals both.
//!
//! # Check
//!
//! A journal is checked before it is trusted ([`Journal::open`] for writers,
//! [`Journal::load`] for `reset`): an empty file, a bad header, a missing
//! `ROOT` line or any damaged complete line is an error naming the file and
//! the line. A last line without its newline is a record whose write was
//! interrupted (a power cut mid-`write`): since a record is synced before the
//! knob is written, that knob was never changed, so the line is ignored with
//! a warning — even if it happens to parse, as a cut `FILE` line may carry a
//! truncated value. A writer cuts such a torn tail off before its first append.
//!
//! A v1 journal (header `# cgwarden originals journal v1: reset restores
//! these`, no `ROOT` line) is still accepted: `reset` uses the policy's
//! `cgroup_root` for it with a warning; writers keep appending to it as is.
//!
//! # What a journal may name
//!
//! The journal is input `reset` acts on as root, so it is never a write
//! primitive: every path it names must be canonical (absolute, no `.`, `..`
//! or empty components: such a path is refused, never normalized) and lie
//! be a file some knob family owns ([`managed`] asks the knob registry,
//! [`crate::knobs::owns_file`]: the group knob files and
//! `cgroup.subtree_control` below the `cgroup_root`, the sysctls of the
//! closed table, cpufreq's scaling files, zram's configured attributes, the
//! per-CPU resume latencies, the realtime switch's files — never a second
//! list); a swap device is `/dev/zramN`; a created directory is below the
//! `cgroup_root`. So a line naming `/proc/sys/kernel/core_pattern` or
//! `/proc/sys/kernel/modprobe` makes the journal untrusted. The recorded `cgroup_root` itself must be under
//! `/sys/fs/cgroup` or be the policy's own (and not `/`). One line outside
//! makes the whole journal untrusted ([`Journal::parse_text`] names the line),
//! and a writer never records such a path either.
//!
//! The journal file and its directory are opened without following symlinks.

use crate::kernel::{Error, Result, Root};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One thing to undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A file's content before the first write.
    File { path: PathBuf, content: String },
    /// A file that did not exist before cgwarden wrote it (fake trees only).
    Absent { path: PathBuf },
    /// A cgroup directory cgwarden created.
    Mkdir { path: PathBuf },
    /// A zram device cgwarden created with hot_add.
    ZramHotAdd { device: String },
    /// A zram device cgwarden initialised (disksize); undone with `reset`.
    ZramInit { device: String },
    /// A swap device cgwarden enabled.
    Swapon { path: PathBuf },
    /// A kernel thread's scheduling and CPUs before cgwarden changed them
    /// (`system.irqs` IRQ threads, `system.kthreads`). `sched`
    /// is `POLICY PRIORITY` (`fifo 50`, `other 0`), `cpus` a CPU list.
    /// Restored only while `pid` is still the kernel thread `comm`.
    Kthread {
        pid: i32,
        comm: String,
        sched: String,
        cpus: String,
    },
}

/// Whether `text` is a journalled kthread scheduling: `POLICY PRIORITY`
/// with a policy name and a priority 0..=99.
pub(crate) fn kthread_sched_text(text: &str) -> Option<(&str, u32)> {
    let (policy, prio) = text.split_once(' ')?;
    let prio: u32 = prio.parse().ok().filter(|p| *p <= 99)?;
    ["other", "batch", "idle", "fifo", "rr"]
        .contains(&policy)
        .then_some((policy, prio))
}

impl Entry {
    fn key(&self) -> String {
        match self {
            Entry::File { path, .. } | Entry::Absent { path } => file_key(path),
            Entry::Mkdir { path } => format!("mkdir {}", Root::normalize(path).display()),
            Entry::ZramHotAdd { device } => format!("hotadd {device}"),
            Entry::ZramInit { device } => format!("init {device}"),
            Entry::Swapon { path } => format!("swapon {}", Root::normalize(path).display()),
            Entry::Kthread { pid, .. } => format!("kthread {pid}"),
        }
    }

    /// The entry with a file's original as the file takes it back
    /// ([`crate::knobs::restorable`]); other entries as they are.
    fn restorable(self, cgroup_root: &Path) -> Entry {
        match self {
            Entry::File { path, content } => Entry::File {
                content: crate::knobs::restorable(&path, cgroup_root, &content),
                path,
            },
            other => other,
        }
    }

    fn render(&self) -> String {
        match self {
            Entry::File { path, content } => format!(
                "FILE\t{}\t{}",
                escape(&path.to_string_lossy()),
                escape(content)
            ),
            Entry::Absent { path } => format!("ABSENT\t{}", escape(&path.to_string_lossy())),
            Entry::Mkdir { path } => format!("MKDIR\t{}", escape(&path.to_string_lossy())),
            Entry::ZramHotAdd { device } => format!("ZRAM_HOTADD\t{}", escape(device)),
            Entry::ZramInit { device } => format!("ZRAM_INIT\t{}", escape(device)),
            Entry::Swapon { path } => format!("SWAPON\t{}", escape(&path.to_string_lossy())),
            Entry::Kthread {
                pid,
                comm,
                sched,
                cpus,
            } => format!(
                "KTHREAD\t{pid}\t{}\t{}\t{}",
                escape(comm),
                escape(sched),
                escape(cpus)
            ),
        }
    }

    /// Parses one entry line; `None` unless the line is exactly what
    /// [`Entry::render`] makes of the entry (no extra fields, no stray
    /// escapes, an absolute path).
    fn parse(line: &str) -> Option<Entry> {
        let mut f = line.split('\t');
        let tag = f.next()?;
        if tag == "KTHREAD" {
            let fields: Vec<&str> = f.collect();
            let [pid, comm, sched, cpus] = fields.as_slice() else {
                return None;
            };
            let e = Entry::Kthread {
                pid: pid.parse().ok().filter(|p: &i32| *p > 0)?,
                comm: unescape(comm)?,
                sched: unescape(sched)?,
                cpus: unescape(cpus)?,
            };
            return (e.render() == line).then_some(e);
        }
        let a = unescape(f.next()?)?;
        let b = match f.next() {
            Some(s) => Some(unescape(s)?),
            None => None,
        };
        let e = match (tag, b) {
            ("FILE", Some(content)) => Entry::File {
                path: a.into(),
                content,
            },
            ("ABSENT", None) => Entry::Absent { path: a.into() },
            ("MKDIR", None) => Entry::Mkdir { path: a.into() },
            ("ZRAM_HOTADD", None) => Entry::ZramHotAdd { device: a },
            ("ZRAM_INIT", None) => Entry::ZramInit { device: a },
            ("SWAPON", None) => Entry::Swapon { path: a.into() },
            _ => return None,
        };
        let absolute = match &e {
            Entry::File { path, .. }
            | Entry::Absent { path }
            | Entry::Mkdir { path }
            | Entry::Swapon { path } => canonical(path),
            Entry::ZramHotAdd { device } | Entry::ZramInit { device } => !device.is_empty(),
            Entry::Kthread { .. } => true,
        };
        (absolute && e.render() == line).then_some(e)
    }
}

/// True for an absolute path in canonical form: no `.`, `..` or empty
/// components, no trailing `/` (refused as written, never normalized).
fn canonical(path: &Path) -> bool {
    let Some(s) = path.to_str() else {
        return false;
    };
    match s.strip_prefix('/') {
        Some("") => true,
        Some(rest) => rest
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0')),
        None => false,
    }
}

/// True for `<prefix><digits>` (e.g. `zram0`, `cpu12`).
fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a `cgroup_root` recorded in a journal may be trusted: canonical,
/// and under `/sys/fs/cgroup` or exactly the policy's own (never `/`).
pub(crate) fn trusted_cgroup_root(recorded: &Path, policy_cgroup_root: &Path) -> bool {
    canonical(recorded)
        && recorded != Path::new("/")
        && (recorded.starts_with(crate::kernel::cgroupfs::CGROUP2_MOUNT)
            || recorded == Root::normalize(policy_cgroup_root))
}

/// Why `e` may not be journalled or restored under `cgroup_root`, or `None`
/// when it names a kernel interface cgwarden manages (see module docs).
pub(crate) fn managed(e: &Entry, cgroup_root: &Path) -> Option<String> {
    let below_cg = |p: &Path| p != cgroup_root && p.starts_with(cgroup_root);
    let (ok, what) = match e {
        Entry::File { path, .. } | Entry::Absent { path } => (
            canonical(path) && crate::knobs::owns_file(path, cgroup_root),
            path.display().to_string(),
        ),
        Entry::Mkdir { path } => (
            canonical(path) && below_cg(path),
            format!(
                "directory {} (not below the cgroup root {})",
                path.display(),
                cgroup_root.display()
            ),
        ),
        Entry::Swapon { path } => (
            canonical(path)
                && path.parent() == Some(Path::new("/dev"))
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| numbered(n, "zram")),
            format!("swap device {}", path.display()),
        ),
        Entry::ZramHotAdd { device } | Entry::ZramInit { device } => {
            (numbered(device, "zram"), format!("zram device {device:?}"))
        }
        Entry::Kthread {
            comm, sched, cpus, ..
        } => (
            // A kthread's comm is its full name (up to 64 bytes since 5.17:
            // `irq/24-virtio0-config`), not the 15 bytes of a user task's.
            !comm.is_empty()
                && comm.len() <= 64
                && kthread_sched_text(sched).is_some()
                && crate::units::CpuList::parse_kernel(cpus).is_ok(),
            format!("kernel thread {comm:?} ({sched:?}, cpus {cpus:?})"),
        ),
    };
    (!ok).then(|| {
        format!(
            "names {what}, which is not a canonical path under a kernel interface cgwarden manages"
        )
    })
}

fn file_key(path: &Path) -> String {
    format!("file {}", Root::normalize(path).display())
}

/// The first line of a journal this version writes.
pub(crate) const HEADER: &str = "# cgwarden originals journal v2";
/// The first line of a journal written before the header recorded `cgroup_root`.
const HEADER_V1: &str = "# cgwarden originals journal v1: reset restores these";
const ROOT_TAG: &str = "ROOT\t";

/// Which format a journal on disk has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// No `ROOT` line: the policy's `cgroup_root` has to be trusted.
    V1,
    /// Records `cgroup_root`.
    V2,
}

/// What [`Journal::parse_text`] makes of a journal's bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) version: Version,
    /// The `cgroup_root` recorded (v2), `None` for v1.
    pub(crate) cgroup_root: Option<PathBuf>,
    /// Every entry line in file order (an entry recorded twice appears twice).
    pub(crate) entries: Vec<Entry>,
    pub(crate) warnings: Vec<String>,
    /// Length of the complete lines; bytes after it are a torn last line.
    pub(crate) valid_len: usize,
}

/// Renders a new journal's header lines (header and `ROOT`).
fn render_header(cgroup_root: &Path) -> String {
    format!(
        "{HEADER}\n{ROOT_TAG}{}\n",
        escape(&Root::normalize(cgroup_root).to_string_lossy())
    )
}

/// Checks and parses a journal's bytes; `path` (device path) names it in
/// errors. `policy_cgroup_root` is the cgroup root for a v1 journal (which
/// records none) and the one non-`/sys/fs/cgroup` root a v2 journal may name.
fn parse(bytes: &[u8], path: &Path, policy_cgroup_root: &Path) -> Result<Parsed> {
    let damaged = |line: usize, what: String| {
        Error::other(
            path,
            format!("line {line}: {what}; this journal is not trusted and was left untouched. {WAY_OUT}"),
        )
    };
    if bytes.is_empty() {
        return Err(Error::other(
            path,
            format!(
                "empty file: not a cgwarden originals journal (it has no header); left untouched. \
                 {WAY_OUT}"
            ),
        ));
    }
    // Complete lines end with '\n'; whatever follows the last one is torn.
    let valid_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines = bytes[..valid_len]
        .split(|&b| b == b'\n')
        .collect::<Vec<_>>();
    lines.pop(); // the empty piece after the final '\n'
    let text = |n: usize, raw: &[u8]| -> Result<String> {
        String::from_utf8(raw.to_vec())
            .map_err(|_| damaged(n, format!("not UTF-8: {}", snippet(raw))))
    };
    let Some(first) = lines.first() else {
        return Err(damaged(
            1,
            format!(
                "not a cgwarden originals journal: no complete header line, found {}",
                snippet(bytes)
            ),
        ));
    };
    let version = match *first {
        h if h == HEADER.as_bytes() => Version::V2,
        h if h == HEADER_V1.as_bytes() => Version::V1,
        _ => {
            return Err(damaged(
                1,
                format!(
                    "not a cgwarden originals journal: header {} (expected {HEADER:?})",
                    snippet(first)
                ),
            ))
        }
    };
    let mut next = 1;
    let cgroup_root = match version {
        Version::V1 => None,
        Version::V2 => {
            let Some(raw) = lines.get(1) else {
                return Err(damaged(2, "no complete ROOT line after the header".into()));
            };
            let line = text(2, raw)?;
            let root = line
                .strip_prefix(ROOT_TAG)
                .and_then(unescape)
                .map(PathBuf::from)
                .filter(|p| {
                    p.is_absolute() && render_header(p).lines().nth(1) == Some(line.as_str())
                });
            match root {
                Some(r) if !trusted_cgroup_root(&r, policy_cgroup_root) => {
                    return Err(damaged(
                        2,
                        format!(
                            "records cgroup_root {}, which is neither under /sys/fs/cgroup nor \
                             the policy's cgroup_root {}",
                            r.display(),
                            policy_cgroup_root.display()
                        ),
                    ))
                }
                Some(r) => {
                    next = 2;
                    Some(r)
                }
                None => {
                    return Err(damaged(
                        2,
                        format!(
                            "expected `ROOT<TAB>absolute cgroup_root`, found {}",
                            snippet(raw)
                        ),
                    ))
                }
            }
        }
    };
    let cg = cgroup_root
        .clone()
        .unwrap_or_else(|| Root::normalize(policy_cgroup_root));
    let mut entries = Vec::new();
    for (i, raw) in lines.iter().enumerate().skip(next) {
        let n = i + 1;
        let line = text(n, raw)?;
        match Entry::parse(&line) {
            Some(e) => {
                if let Some(why) = managed(&e, &cg) {
                    return Err(damaged(n, format!("{} {why}", snippet(raw))));
                }
                entries.push(e)
            }
            None => return Err(damaged(n, format!("damaged entry {}", snippet(raw)))),
        }
    }
    let mut warnings = Vec::new();
    if valid_len < bytes.len() {
        warnings.push(format!(
            "{}: line {} is torn (no newline at its end: a record was interrupted, so its knob \
             was never written) and is ignored: {}",
            path.display(),
            lines.len() + 1,
            snippet(&bytes[valid_len..])
        ));
    }
    Ok(Parsed {
        version,
        cgroup_root,
        entries,
        warnings,
        valid_len,
    })
}

/// What a refusal of a damaged journal says to do (docs/journal-recovery.md).
const WAY_OUT: &str = "`cgwarden reset --salvage POLICY` restores the lines that can be trusted \
     and sets this file aside (docs/journal-recovery.md)";

/// A short, quoted, printable rendering of raw bytes for messages.
fn snippet(raw: &[u8]) -> String {
    const MAX: usize = 80;
    let s = String::from_utf8_lossy(&raw[..raw.len().min(MAX)]);
    let more = if raw.len() > MAX { "..." } else { "" };
    format!("{s:?}{more}")
}

/// The journal at `state_dir/originals`, resolved under the root.
pub(crate) struct Journal {
    root: Root,
    /// Device path of the journal file.
    path: PathBuf,
    /// What the header records (`None` for v1 or a journal not yet created).
    recorded_root: Option<PathBuf>,
    /// What a writer records when it creates the journal.
    new_root: PathBuf,
    /// `None` while no journal exists on disk.
    version: Option<Version>,
    entries: Vec<Entry>,
    keys: BTreeSet<String>,
    /// File path (normalized) → index of its `FILE`/`ABSENT` entry.
    files: BTreeMap<PathBuf, usize>,
    warnings: Vec<String>,
    /// Bytes of complete lines on disk; a torn tail beyond it is cut before the next append.
    valid_len: usize,
    torn: bool,
}

impl Journal {
    pub(crate) fn path_in(state_dir: &Path) -> PathBuf {
        Root::normalize(state_dir).join("originals")
    }

    /// The pure check of a journal's bytes, with no file access (what
    /// [`Journal::load`] and the fuzz target use): header, `ROOT` line, every
    /// complete line canonical and naming only what cgwarden manages (see
    /// module docs). Errors name the line; `policy_cgroup_root` as in
    /// [`Journal::load`].
    pub(crate) fn parse_text(bytes: &[u8], policy_cgroup_root: &Path) -> Result<Parsed> {
        parse(bytes, Path::new("originals"), policy_cgroup_root)
    }

    /// For writers (`apply`, `run`): reads and checks the journal a previous
    /// run left, if any. A damaged journal, or one recorded for another
    /// `cgroup_root`, is an error (nothing is written then). Creates nothing
    /// until the first [`Journal::record`].
    pub(crate) fn open(root: &Root, state_dir: &Path, cgroup_root: &Path) -> Result<Journal> {
        super::lock::refuse_managed_group(state_dir, cgroup_root)?;
        let mut j = match Self::load(root, state_dir, cgroup_root)? {
            Some(j) => j,
            None => Journal::empty(root, state_dir),
        };
        j.new_root = Root::normalize(cgroup_root);
        if let Some(recorded) = &j.recorded_root {
            if *recorded != j.new_root {
                return Err(Error::other(
                    j.shown(),
                    format!(
                        "the journal was recorded for cgroup_root {} but the policy names {}; \
                         run `cgwarden reset` first (it uses {}) or restore the old cgroup_root",
                        recorded.display(),
                        j.new_root.display(),
                        recorded.display()
                    ),
                ));
            }
        }
        Ok(j)
    }

    /// For `reset`: the checked journal, or `None` when there is none.
    /// Reading never changes the file. `policy_cgroup_root` is used for a v1
    /// journal (which records none) and is the one cgroup root outside
    /// `/sys/fs/cgroup` a v2 journal may record.
    pub(crate) fn load(
        root: &Root,
        state_dir: &Path,
        policy_cgroup_root: &Path,
    ) -> Result<Option<Journal>> {
        let mut j = Journal::empty(root, state_dir);
        j.new_root = Root::normalize(policy_cgroup_root);
        let Some(bytes) = j.read_file()? else {
            return Ok(None);
        };
        // Messages name the file where it is: under `--root`.
        let p = parse(&bytes, &j.shown(), policy_cgroup_root)?;
        j.version = Some(p.version);
        j.recorded_root = p.cgroup_root;
        j.warnings = p.warnings;
        j.valid_len = p.valid_len;
        j.torn = p.valid_len < bytes.len();
        let cg = j
            .recorded_root
            .clone()
            .unwrap_or_else(|| Root::normalize(policy_cgroup_root));
        for e in p.entries {
            if j.keys.insert(e.key()) {
                // A journal of an older cgwarden may hold what a file reads
                // where it takes something else (zram's whole algorithm list).
                j.index(e.restorable(&cg));
            }
        }
        Ok(Some(j))
    }

    /// The `cgroup_root` the journal in `state_dir` records, read leniently
    /// (header and `ROOT` line only; the rest is checked by whoever uses the
    /// journal): `None` when there is no journal, it is a v1 journal, or its
    /// first lines are not a trusted v2 header and root. What `reset` locks.
    pub(crate) fn recorded_root(
        root: &Root,
        state_dir: &Path,
        policy_cgroup_root: &Path,
    ) -> Option<PathBuf> {
        let bytes = Journal::empty(root, state_dir).read_file().ok()??;
        let mut lines = bytes.split(|&b| b == b'\n');
        if lines.next()? != HEADER.as_bytes() {
            return None;
        }
        let line = std::str::from_utf8(lines.next()?).ok()?;
        let r = PathBuf::from(unescape(line.strip_prefix(ROOT_TAG)?)?);
        trusted_cgroup_root(&r, policy_cgroup_root).then_some(r)
    }

    fn empty(root: &Root, state_dir: &Path) -> Journal {
        Journal {
            root: root.clone(),
            path: Self::path_in(state_dir),
            recorded_root: None,
            new_root: PathBuf::from("/"),
            version: None,
            entries: Vec::new(),
            keys: BTreeSet::new(),
            files: BTreeMap::new(),
            warnings: Vec::new(),
            valid_len: 0,
            torn: false,
        }
    }

    fn index(&mut self, e: Entry) {
        if let Entry::File { path, .. } | Entry::Absent { path } = &e {
            self.files.insert(Root::normalize(path), self.entries.len());
        }
        self.entries.push(e);
    }

    /// The file's bytes, `None` if absent; a symlink or non-regular file is refused.
    fn read_file(&self) -> Result<Option<Vec<u8>>> {
        let host = self.root.host_path(&self.path);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => return Err(Error::other(
                self.shown(),
                "not a regular file (a symlink or directory); refusing to use it as the journal",
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("stat", self.shown(), e)),
        }
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&host)
            .map_err(|e| Error::io("open", self.shown(), e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| Error::io("read", self.shown(), e))?;
        Ok(Some(buf))
    }

    /// The journal file's device path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The journal file's path on this machine (under `--root`), for messages.
    pub(crate) fn shown(&self) -> PathBuf {
        self.root.host_path(&self.path)
    }

    #[cfg(test)]
    pub(crate) fn exists(&self) -> bool {
        self.root.exists(&self.path)
    }

    /// The format on disk, `None` while no journal exists.
    #[cfg(test)]
    pub(crate) fn version(&self) -> Option<Version> {
        self.version
    }

    /// The `cgroup_root` the journal records (`None` for a v1 journal or
    /// one not yet created).
    pub(crate) fn cgroup_root(&self) -> Option<&Path> {
        self.recorded_root.as_deref()
    }

    /// What the check found and forgave (a torn last line).
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether a file already has its original recorded (content or absence).
    pub(crate) fn has_file(&self, path: &Path) -> bool {
        self.keys.contains(&file_key(path))
    }

    /// The recorded original content of a file (its `FILE` entry); `None`
    /// if none is recorded or the file did not exist before (`ABSENT`).
    pub(crate) fn original(&self, path: &Path) -> Option<&str> {
        match self.entries.get(*self.files.get(&Root::normalize(path))?)? {
            Entry::File { content, .. } => Some(content),
            _ => None,
        }
    }

    /// Appends and syncs an entry unless one for the same thing is recorded.
    /// The first record creates the journal (atomically, with its header).
    /// A file's original is kept as the file takes it back
    /// ([`crate::knobs::restorable`]: zram's active algorithm, not the list);
    /// a sysctl the kernel couples with another ([`crate::knobs::coupled`])
    /// has the other's original recorded first, since the kernel changes it
    /// behind the write.
    pub(crate) fn record(&mut self, e: Entry) -> Result<()> {
        if self.keys.contains(&e.key()) {
            return Ok(());
        }
        if let Entry::File { path, .. } | Entry::Absent { path } = &e {
            if let Some((amount, ratio)) = crate::knobs::coupled(path) {
                let other = if Root::normalize(path) == amount {
                    ratio
                } else {
                    amount
                };
                if !self.has_file(&other) {
                    match self.root.read(&other) {
                        Ok(content) => self.record_one(Entry::File {
                            path: other,
                            content,
                        })?,
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        self.record_one(e)
    }

    /// [`Journal::record`] of exactly this entry.
    fn record_one(&mut self, e: Entry) -> Result<()> {
        if self.keys.contains(&e.key()) {
            return Ok(());
        }
        let cg = self
            .recorded_root
            .clone()
            .unwrap_or_else(|| self.new_root.clone());
        let e = e.restorable(&cg);
        if let Some(why) = managed(&e, &cg) {
            return Err(Error::other(
                self.shown(),
                format!("refusing to record an entry that {why}"),
            ));
        }
        let line = format!("{}\n", e.render());
        if self.version.is_none() {
            self.create(&line)?;
        } else {
            self.append(&line)?;
        }
        self.keys.insert(e.key());
        self.index(e);
        Ok(())
    }

    /// Writes header, root and first line to `originals.new`, syncs it and
    /// renames it into place, then syncs the directory.
    fn create(&mut self, first: &str) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("/")).to_path_buf();
        super::lock::prepare_state_dir(&self.root, &dir)?;
        let tmp_dev = self.path.with_file_name("originals.new");
        let tmp = self.root.host_path(&tmp_dev);
        let data = format!("{}{first}", render_header(&self.new_root));
        // A leftover from an interrupted create is ours and incomplete.
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("unlink", &tmp, e)),
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| Error::io("open", &tmp, e))?;
        f.write_all(data.as_bytes())
            .map_err(|e| Error::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        drop(f);
        let host = self.root.host_path(&self.path);
        // rename(2) replaces a journal that appeared meanwhile only if none
        // did: writers hold the state_dir lock, so none can.
        fs::rename(&tmp, &host).map_err(|e| Error::io("rename", self.shown(), e))?;
        sync_dir(&self.root, &dir)?;
        self.version = Some(Version::V2);
        self.recorded_root = Some(self.new_root.clone());
        self.valid_len = data.len();
        Ok(())
    }

    /// Appends one line and syncs; a torn tail left by a crash is cut first
    /// so the new line does not glue onto it.
    fn append(&mut self, line: &str) -> Result<()> {
        let host = self.root.host_path(&self.path);
        let mut f = fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&host)
            .map_err(|e| Error::io("open", self.shown(), e))?;
        if self.torn {
            f.set_len(self.valid_len as u64)
                .map_err(|e| Error::io("truncate", self.shown(), e))?;
            self.torn = false;
        }
        f.write_all(line.as_bytes())
            .map_err(|e| Error::io("write", self.shown(), e))?;
        f.sync_all()
            .map_err(|e| Error::io("fsync", self.shown(), e))?;
        self.valid_len += line.len();
        Ok(())
    }

    /// Deletes the journal (after a complete reset) and syncs its directory.
    pub(crate) fn remove(self) -> Result<()> {
        let host = self.root.host_path(&self.path);
        match fs::remove_file(&host) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("unlink", self.shown(), e)),
        }
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        sync_dir(&self.root, dir)
    }
}

/// fsyncs a directory so a created, renamed or removed entry survives a power cut.
fn sync_dir(root: &Root, dir: &Path) -> Result<()> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(root.host_path(dir))
        .map_err(|e| Error::io("open", dir, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", dir, e))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The inverse of [`escape`]; `None` for an escape `escape` never makes.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next()? {
                't' => out.push('\t'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                '\\' => out.push('\\'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

mod salvage;
pub(crate) use salvage::Salvaged;

#[cfg(test)]
mod tests;
