//! The originals journal (SPEC §4): before cgwarden first changes anything,
//! what was there is appended to `state_dir/originals` and synced, so `reset`
//! can put it back even after a crash or a power cut.
//!
//! One entry a line, tab-separated, append-only. An entry is recorded once:
//! a journal left by a crashed run keeps its originals, and later runs only
//! add entries for things they touch for the first time.

use crate::kernel::{Result, Root};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One thing to undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
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
}

impl Entry {
    fn key(&self) -> String {
        match self {
            Entry::File { path, .. } | Entry::Absent { path } => format!("file {}", path.display()),
            Entry::Mkdir { path } => format!("mkdir {}", path.display()),
            Entry::ZramHotAdd { device } => format!("hotadd {device}"),
            Entry::ZramInit { device } => format!("init {device}"),
            Entry::Swapon { path } => format!("swapon {}", path.display()),
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
        }
    }

    fn parse(line: &str) -> Option<Entry> {
        let mut f = line.split('\t');
        let tag = f.next()?;
        let a = unescape(f.next()?);
        let b = f.next().map(unescape);
        Some(match (tag, b) {
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
        })
    }
}

const HEADER: &str = "# cgwarden originals journal v1: reset restores these";

/// The journal at `state_dir/originals`, resolved under the root.
pub struct Journal {
    root: Root,
    path: PathBuf,
    entries: Vec<Entry>,
    keys: BTreeSet<String>,
}

impl Journal {
    pub fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join("originals")
    }

    /// Opens the journal, reading any entries a previous run left.
    /// Lines that cannot be read (a torn last line after a power cut) are skipped.
    pub fn open(root: &Root, state_dir: &Path) -> Result<Journal> {
        let path = Self::path_in(state_dir);
        let mut j = Journal {
            root: root.clone(),
            path,
            entries: Vec::new(),
            keys: BTreeSet::new(),
        };
        if root.exists(&j.path) {
            let text = root.read(&j.path)?;
            for line in text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
            {
                if let Some(e) = Entry::parse(line) {
                    if j.keys.insert(e.key()) {
                        j.entries.push(e);
                    }
                }
            }
        }
        Ok(j)
    }

    pub fn exists(&self) -> bool {
        self.root.exists(&self.path)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether a file already has its original recorded.
    pub fn has_file(&self, path: &Path) -> bool {
        self.keys.contains(&format!("file {}", path.display()))
    }

    pub fn has(&self, e: &Entry) -> bool {
        self.keys.contains(&e.key())
    }

    /// Appends and syncs an entry unless one for the same thing is recorded.
    pub fn record(&mut self, e: Entry) -> Result<()> {
        if self.keys.contains(&e.key()) {
            return Ok(());
        }
        if !self.root.exists(&self.path) {
            if let Some(dir) = self.path.parent() {
                self.root.mkdir_all(dir)?;
            }
            self.root.append_synced(&self.path, HEADER)?;
        }
        self.root.append_synced(&self.path, &e.render())?;
        self.keys.insert(e.key());
        self.entries.push(e);
        Ok(())
    }

    pub fn remove(self) -> Result<()> {
        if self.root.exists(&self.path) {
            self.root.remove_file(&self.path)?;
        }
        Ok(())
    }
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

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records_once_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        let state = Path::new("/run/cgwarden");
        let mut j = Journal::open(&root, state).unwrap();
        assert!(!j.exists());
        let swappiness = PathBuf::from("/proc/sys/vm/swappiness");
        j.record(Entry::File {
            path: swappiness.clone(),
            content: "60\n".into(),
        })
        .unwrap();
        // A second original for the same file is ignored: the first one is the truth.
        j.record(Entry::File {
            path: swappiness.clone(),
            content: "30\n".into(),
        })
        .unwrap();
        j.record(Entry::Mkdir {
            path: "/sys/fs/cgroup/rt".into(),
        })
        .unwrap();
        let j2 = Journal::open(&root, state).unwrap();
        assert_eq!(
            j2.entries(),
            &[
                Entry::File {
                    path: swappiness,
                    content: "60\n".into()
                },
                Entry::Mkdir {
                    path: "/sys/fs/cgroup/rt".into()
                }
            ]
        );
    }

    #[test]
    fn torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        let mut j = Journal::open(&root, Path::new("/run/x")).unwrap();
        j.record(Entry::ZramInit {
            device: "zram0".into(),
        })
        .unwrap();
        let host = root.host_path(Path::new("/run/x/originals"));
        let mut text = std::fs::read_to_string(&host).unwrap();
        text.push_str("FIL");
        std::fs::write(&host, text).unwrap();
        let j2 = Journal::open(&root, Path::new("/run/x")).unwrap();
        assert_eq!(j2.entries().len(), 1);
    }

    proptest! {
        #[test]
        fn entries_round_trip(path in "/[a-z/._-]{1,40}", content in "\\PC*") {
            let e = Entry::File { path: path.clone().into(), content: content.clone() };
            prop_assert_eq!(Entry::parse(&e.render()), Some(e));
        }
    }
}
