//! Tree snapshots: everything under a directory, and what changed.

use std::path::{Path, PathBuf};

/// One entry of a tree snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
}

/// Every directory, file (with its bytes) and symlink (with its target)
/// under `dir`, by path relative to it. Panics naming the path on an I/O error.
pub fn tree_snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Node> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("readdir {}: {e}", d.display()));
        for e in entries {
            let e = e.unwrap_or_else(|e| panic!("readdir {}: {e}", d.display()));
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("below dir").to_path_buf();
            let ft = e
                .file_type()
                .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
            let node = if ft.is_symlink() {
                Node::Link(
                    std::fs::read_link(&p)
                        .unwrap_or_else(|e| panic!("readlink {}: {e}", p.display())),
                )
            } else if ft.is_dir() {
                stack.push(p.clone());
                Node::Dir
            } else {
                Node::File(
                    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
                )
            };
            out.insert(rel, node);
        }
    }
    out
}

/// The differences between two snapshots, one line each. A `cgroup.procs`
/// is compared as a set of pids (the kernel lists members in no particular
/// order; a process moved out and back is listed last); everything else byte
/// for byte.
pub fn tree_diff(
    before: &std::collections::BTreeMap<PathBuf, Node>,
    after: &std::collections::BTreeMap<PathBuf, Node>,
) -> Vec<String> {
    let members = |b: &[u8]| {
        let mut v: Vec<String> = String::from_utf8_lossy(b)
            .split_whitespace()
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let mut diffs = Vec::new();
    for (path, was) in before {
        match (was, after.get(path)) {
            (_, None) => diffs.push(format!("{}: removed", path.display())),
            (Node::File(a), Some(Node::File(b))) if path.ends_with("cgroup.procs") => {
                let (a, b) = (members(a), members(b));
                if a != b {
                    let missing: Vec<&String> = a.iter().filter(|p| !b.contains(p)).collect();
                    let extra: Vec<&String> = b.iter().filter(|p| !a.contains(p)).collect();
                    diffs.push(format!(
                        "{}: pids missing {missing:?}, pids extra {extra:?}",
                        path.display()
                    ));
                }
            }
            (a, Some(b)) if a == b => {}
            (a, Some(b)) => diffs.push(format!("{}: {} -> {}", path.display(), show(a), show(b))),
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            diffs.push(format!("{}: left behind ({})", path.display(), show(now)));
        }
    }
    diffs
}

fn show(n: &Node) -> String {
    match n {
        Node::Dir => "directory".into(),
        Node::Link(t) => format!("symlink to {}", t.display()),
        Node::File(b) if b.len() > 200 => format!("{} bytes", b.len()),
        Node::File(b) => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

/// Every directory (as `REL/` with no text) and regular file (with its
/// text; unreadable as empty) under `dir` whose relative path `keep`
/// accepts; a directory not kept is not entered.
pub fn text_snapshot(
    dir: &Path,
    keep: impl Fn(&Path) -> bool,
) -> std::collections::BTreeMap<PathBuf, String> {
    fn walk(
        base: &Path,
        dir: &Path,
        keep: &dyn Fn(&Path) -> bool,
        out: &mut std::collections::BTreeMap<PathBuf, String>,
    ) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).expect("below dir").to_path_buf();
            if !keep(&rel) {
                continue;
            }
            let ft = e
                .file_type()
                .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
            if ft.is_dir() {
                out.insert(rel.join(""), String::new());
                walk(base, &p, keep, out);
            } else if ft.is_file() {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &keep, &mut out);
    out
}
