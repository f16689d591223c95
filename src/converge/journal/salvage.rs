//! The way out of a damaged journal (`cgwarden reset --salvage`,
//! docs/journal-recovery.md), keeping the trust rules.
//!
//! A journal that fails its check ([`super::parse`]) stops `reset`, `apply`
//! and `run`. Salvage sorts its lines instead of refusing the whole file:
//!
//! - a line restored: one that parses exactly ([`Entry`]'s canonical form)
//!   and names what cgwarden manages ([`managed`]) under the cgroup root the
//!   journal records — or the policy's, when the `ROOT` line is damaged or
//!   names a root that is not trusted (the same rule as a v1 journal);
//! - a line set aside: every other one (damaged, not UTF-8, naming a file no
//!   family owns, a second header). It is never acted on;
//! - a journal that is not cgwarden's (no header, another header): nothing is
//!   restored from it, every line is set aside.
//!
//! The damaged file is renamed to `originals.damaged-YYYYMMDDTHHMMSSZ` beside
//! it (never deleted), and the lines that may be restored are written to a
//! fresh journal (header, `ROOT`, entries), which an ordinary `reset` then
//! undoes — removed when everything succeeded, kept for another `reset`
//! otherwise. A torn last line is ignored, as the check does.

use super::*;

/// What salvage found in a damaged journal and where it put it.
#[derive(Debug, Default)]
pub(crate) struct Salvaged {
    /// Host path of the damaged file, set aside.
    pub(crate) aside: PathBuf,
    /// How many lines went into the fresh journal.
    pub(crate) kept: usize,
    /// The lines not restored, one each: `line N: why: "TEXT"`.
    pub(crate) set_aside: Vec<String>,
    /// What else the sort decided (the cgroup root used, a torn last line).
    pub(crate) notes: Vec<String>,
}

/// The sorted lines of a damaged journal.
struct Sorted {
    cgroup_root: PathBuf,
    kept: Vec<Entry>,
    set_aside: Vec<String>,
    notes: Vec<String>,
}

/// Sorts a journal's lines into those that may be restored and those set
/// aside (see module docs). `policy_cgroup_root` is used when the journal's
/// own `ROOT` line cannot be.
fn sort(bytes: &[u8], policy_cgroup_root: &Path) -> Sorted {
    let policy_root = Root::normalize(policy_cgroup_root);
    let mut out = Sorted {
        cgroup_root: policy_root.clone(),
        kept: Vec::new(),
        set_aside: Vec::new(),
        notes: Vec::new(),
    };
    let valid_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines: Vec<&[u8]> = bytes[..valid_len].split(|&b| b == b'\n').collect();
    lines.pop();
    if valid_len < bytes.len() {
        out.notes.push(format!(
            "line {} is torn (no newline at its end: its knob was never written) and is ignored: {}",
            lines.len() + 1,
            snippet(&bytes[valid_len..])
        ));
    }
    let aside = |out: &mut Sorted, n: usize, why: &str, raw: &[u8]| {
        out.set_aside
            .push(format!("line {n}: {why}: {}", snippet(raw)));
    };
    let first = lines.first().copied().unwrap_or_default();
    let mut next = match first {
        h if h == HEADER.as_bytes() => 1,
        h if h == HEADER_V1.as_bytes() => {
            out.notes.push(format!(
                "a v1 journal records no cgroup_root; using the policy's {}",
                policy_root.display()
            ));
            1
        }
        _ => {
            // Not cgwarden's: nothing in it may be acted on.
            for (i, raw) in lines.iter().enumerate() {
                aside(
                    &mut out,
                    i + 1,
                    "in a file that is not a cgwarden journal (its first line is not the header)",
                    raw,
                );
            }
            return out;
        }
    };
    let mut root_unusable = false;
    if first == HEADER.as_bytes() {
        let raw = lines.get(1).copied().unwrap_or_default();
        let recorded = std::str::from_utf8(raw)
            .ok()
            .and_then(|l| l.strip_prefix(ROOT_TAG))
            .and_then(unescape)
            .map(PathBuf::from)
            .filter(|p| render_header(p).lines().nth(1).map(str::as_bytes) == Some(raw));
        match recorded {
            Some(r) if trusted_cgroup_root(&r, policy_cgroup_root) => {
                out.cgroup_root = r;
                next = 2;
            }
            Some(r) => {
                aside(
                    &mut out,
                    2,
                    &format!(
                        "records cgroup_root {}, neither under /sys/fs/cgroup nor the policy's",
                        r.display()
                    ),
                    raw,
                );
                next = 2;
                root_unusable = true;
            }
            None if raw.starts_with(b"ROOT") => {
                aside(&mut out, 2, "damaged ROOT line", raw);
                next = 2;
                root_unusable = true;
            }
            // No ROOT line at all: line 2 is read as an entry.
            None => root_unusable = true,
        }
        if root_unusable {
            out.notes.push(format!(
                "the journal's ROOT line cannot be used; using the policy's cgroup_root {}",
                policy_root.display()
            ));
        }
    }
    let mut keys = BTreeSet::new();
    for (i, raw) in lines.iter().enumerate().skip(next) {
        let n = i + 1;
        let Ok(line) = std::str::from_utf8(raw) else {
            aside(&mut out, n, "not UTF-8", raw);
            continue;
        };
        match Entry::parse(line) {
            None => aside(&mut out, n, "damaged entry", raw),
            Some(e) => match managed(&e, &out.cgroup_root) {
                Some(why) => aside(&mut out, n, &why, raw),
                None => {
                    if keys.insert(e.key()) {
                        out.kept.push(e);
                    }
                }
            },
        }
    }
    out
}

/// `originals.damaged-20250102T030405Z` for now (UTC), or with `-N` added
/// when that name is taken.
fn aside_name(root: &Root, state_dir: &Path) -> PathBuf {
    let stamp: String = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let base = Journal::path_in(state_dir).with_file_name(format!("originals.damaged-{stamp}"));
    let mut p = base.clone();
    let mut n = 1;
    while root.exists(&p) {
        p = base.with_file_name(format!(
            "{}-{n}",
            base.file_name().unwrap_or_default().to_string_lossy()
        ));
        n += 1;
    }
    p
}

impl Journal {
    /// Salvages the journal in `state_dir` when it fails its check (see
    /// module docs): sets the file aside and writes the lines that may be
    /// restored to a fresh journal. `None` when there is no journal or it
    /// passes its check (an ordinary `reset` is all it needs). The caller
    /// holds the state_dir lock.
    pub(crate) fn salvage(
        root: &Root,
        state_dir: &Path,
        policy_cgroup_root: &Path,
    ) -> Result<Option<Salvaged>> {
        let mut old = Journal::empty(root, state_dir);
        let Some(bytes) = old.read_file()? else {
            return Ok(None);
        };
        if parse(&bytes, &old.shown(), policy_cgroup_root).is_ok() {
            return Ok(None);
        }
        let sorted = sort(&bytes, policy_cgroup_root);
        let aside_dev = aside_name(root, state_dir);
        let aside_host = root.host_path(&aside_dev);
        fs::rename(root.host_path(&old.path), &aside_host)
            .map_err(|e| Error::io("rename", old.shown(), e))?;
        let dir = old.path.parent().unwrap_or(Path::new("/")).to_path_buf();
        sync_dir(root, &dir)?;
        old.new_root = sorted.cgroup_root.clone();
        let mut kept = 0;
        for e in sorted.kept {
            old.record_one(e)?;
            kept += 1;
        }
        Ok(Some(Salvaged {
            aside: aside_host,
            kept,
            set_aside: sorted.set_aside,
            notes: sorted.notes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CG: &str = "/sys/fs/cgroup";

    #[test]
    fn damaged_and_foreign_lines_are_set_aside_the_rest_kept() {
        let head = render_header(Path::new(CG));
        let text = format!(
            "{head}FILE\t/proc/sys/vm/swappiness\t60\\n\n\
             FILE\t/proc/sys/vm/swa\n\
             FILE\t/proc/sys/kernel/core_pattern\tcore\\n\n\
             MKDIR\t/sys/fs/cgroup/rt\n\
             \u{1}garbage\n\
             MKDIR\t/etc/evil\n\
             FILE\t/proc/sys/vm/dirty_rat"
        );
        let s = sort(text.as_bytes(), Path::new(CG));
        assert_eq!(s.cgroup_root, Path::new(CG));
        assert_eq!(
            s.kept,
            vec![
                Entry::File {
                    path: "/proc/sys/vm/swappiness".into(),
                    content: "60\n".into()
                },
                Entry::Mkdir {
                    path: "/sys/fs/cgroup/rt".into()
                }
            ]
        );
        let lines: Vec<&str> = s.set_aside.iter().map(String::as_str).collect();
        assert!(
            lines[0].starts_with("line 4: damaged entry: \"FILE\\t/proc/sys/vm/swa\""),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("line 5: names /proc/sys/kernel/core_pattern"),
            "{lines:?}"
        );
        assert!(lines[2].starts_with("line 7: damaged entry"), "{lines:?}");
        assert!(
            lines[3].starts_with("line 8: names directory /etc/evil"),
            "{lines:?}"
        );
        assert_eq!(lines.len(), 4);
        assert!(s.notes[0].contains("line 9 is torn"), "{:?}", s.notes);
    }

    #[test]
    fn a_file_that_is_not_a_journal_gives_nothing_to_restore() {
        let s = sort(
            b"# someone else's\nFILE\t/proc/sys/vm/swappiness\t60\\n\n",
            Path::new(CG),
        );
        assert!(s.kept.is_empty());
        assert_eq!(s.set_aside.len(), 2);
        assert!(
            s.set_aside[1].contains("not a cgwarden journal"),
            "{:?}",
            s.set_aside
        );
        assert!(sort(b"", Path::new(CG)).kept.is_empty());
    }

    #[test]
    fn an_untrusted_or_damaged_root_line_falls_back_to_the_policys_root() {
        for root_line in ["ROOT\t/etc", "ROOT\trelative", "ROOT\t/sys/fs/cgroup\\q"] {
            let text = format!(
                "{HEADER}\n{root_line}\nMKDIR\t/sys/fs/cgroup/app/rt\nMKDIR\t/sys/fs/cgroup/other\n"
            );
            let s = sort(text.as_bytes(), Path::new("/sys/fs/cgroup/app"));
            assert_eq!(
                s.cgroup_root,
                Path::new("/sys/fs/cgroup/app"),
                "{root_line}"
            );
            assert_eq!(
                s.kept,
                vec![Entry::Mkdir {
                    path: "/sys/fs/cgroup/app/rt".into()
                }],
                "{root_line}"
            );
            assert!(s.set_aside[0].starts_with("line 2:"), "{:?}", s.set_aside);
            assert!(s.set_aside[1].starts_with("line 4:"), "{:?}", s.set_aside);
            assert!(s.notes.iter().any(|n| n.contains("policy's cgroup_root")));
        }
    }

    #[test]
    fn salvage_sets_the_file_aside_and_keeps_what_may_be_restored() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        let state = Path::new("/run/cgwarden");
        let mut j = Journal::open(&root, state, Path::new(CG)).unwrap();
        j.record(Entry::File {
            path: "/proc/sys/vm/swappiness".into(),
            content: "60\n".into(),
        })
        .unwrap();
        let host = root.host_path(&Journal::path_in(state));
        // A good journal needs no salvage.
        assert!(Journal::salvage(&root, state, Path::new(CG))
            .unwrap()
            .is_none());
        let mut bytes = std::fs::read(&host).unwrap();
        bytes.extend_from_slice(b"FILE\t/proc/sys/kernel/modprobe\t/sbin/modprobe\\n\nZAP\n");
        std::fs::write(&host, &bytes).unwrap();
        let s = Journal::salvage(&root, state, Path::new(CG))
            .unwrap()
            .unwrap();
        assert_eq!(s.kept, 1);
        assert_eq!(s.set_aside.len(), 2, "{:?}", s.set_aside);
        assert_eq!(
            std::fs::read(&s.aside).unwrap(),
            bytes,
            "set aside byte for byte"
        );
        let name = s.aside.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("originals.damaged-") && name.ends_with('Z'),
            "{name}"
        );
        let fresh = Journal::load(&root, state, Path::new(CG)).unwrap().unwrap();
        assert_eq!(
            fresh.entries(),
            &[Entry::File {
                path: "/proc/sys/vm/swappiness".into(),
                content: "60\n".into()
            }]
        );
        // A second damaged journal the same second gets another name.
        std::fs::write(&host, b"not a journal\n").unwrap();
        let s2 = Journal::salvage(&root, state, Path::new(CG))
            .unwrap()
            .unwrap();
        assert_ne!(s2.aside, s.aside);
        assert_eq!(s2.kept, 0);
        assert!(!host.exists(), "nothing to restore: no fresh journal");
        assert!(s.aside.exists() && s2.aside.exists(), "never deleted");
    }
}
