//! The docs cannot drift: every shell example in README.md and docs/*.md
//! marked runnable is run on a fake board and its output compared with the
//! doc. The convention (docs/testing.md, "Runnable examples"):
//!
//! - the line `<!-- fake-root -->` directly before a fenced block marks it;
//! - in the block, a line `$ COMMAND` is run with `sh -c` (stderr merged
//!   into stdout), the lines after it up to the next `$ ` are its output;
//! - in an output line `…` matches any text (times, pids, hashes); a line
//!   that is only `...` matches any number of lines;
//! - a command that exits non-zero ends its output with `[exit N]`;
//! - each block runs in a fresh scratch directory holding `policies/` (the
//!   repository's) and `board/root`, a fake board with a few processes
//!   (`motion_control` 412, `infer-server` 500, a camera pipeline 600,
//!   `sshd` 700), and `boards/{iq-9100,iq-8275,qcs6490}/root`, the product
//!   line's boards (tests/support/boards.rs), with `cgwarden` the binary
//!   under test first in `PATH`;
//! - the line `<!-- file: NAME -->` directly before a fenced block (a policy
//!   the page shows) makes the block's text the file NAME in the scratch
//!   directory of every runnable block after it on the same page.
//!
//! A marked block with no `$ ` line, or none marked at all, is a failure.

use cgwarden::testing::{FakeProcess, FakeTree};
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

const MARK: &str = "<!-- fake-root -->";
const FILE_MARK: (&str, &str) = ("<!-- file: ", " -->");

struct Example {
    file: String,
    line: usize,
    steps: Vec<(String, Vec<String>)>,
    /// The page's `<!-- file: NAME -->` blocks above this one: (NAME, text).
    files: Vec<(String, String)>,
}

/// NAME of a `<!-- file: NAME -->` line: a plain relative file name.
fn file_mark(line: &str) -> Option<&str> {
    let name = line
        .trim()
        .strip_prefix(FILE_MARK.0)?
        .strip_suffix(FILE_MARK.1)?;
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && !name.starts_with('.');
    Some(name).filter(|_| plain)
}

fn examples() -> Vec<Example> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = f.strip_prefix(repo).unwrap().display().to_string();
        let mut files: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            if lines[i].trim().starts_with(FILE_MARK.0) {
                let file = file_mark(lines[i])
                    .unwrap_or_else(|| panic!("{name}:{}: not a plain file name", i + 1));
                assert!(
                    lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
                    "{name}:{}: a file mark is not directly before a fenced block",
                    i + 1
                );
                let mut j = i + 2;
                let mut text = String::new();
                while j < lines.len() && !lines[j].starts_with("```") {
                    text.push_str(lines[j]);
                    text.push('\n');
                    j += 1;
                }
                assert!(j < lines.len(), "{name}:{}: the block never ends", i + 2);
                files.retain(|(n, _)| n != file);
                files.push((file.to_string(), text));
                i = j + 1;
                continue;
            }
            if lines[i].trim() != MARK {
                i += 1;
                continue;
            }
            let start = i + 1;
            assert!(
                lines.get(start).is_some_and(|l| l.starts_with("```")),
                "{name}:{}: {MARK} is not directly before a fenced block",
                i + 1
            );
            let mut steps: Vec<(String, Vec<String>)> = Vec::new();
            let mut j = start + 1;
            while j < lines.len() && !lines[j].starts_with("```") {
                let l = lines[j];
                if let Some(cmd) = l.strip_prefix("$ ") {
                    steps.push((cmd.to_string(), Vec::new()));
                } else {
                    let Some(last) = steps.last_mut() else {
                        panic!("{name}:{}: output before any `$ ` line", j + 1);
                    };
                    last.1.push(l.to_string());
                }
                j += 1;
            }
            assert!(!steps.is_empty(), "{name}:{}: no `$ ` line", start + 1);
            out.push(Example {
                file: name.clone(),
                line: start + 1,
                steps,
                files: files.clone(),
            });
            i = j;
        }
    }
    out
}

/// Whether `got` matches the pattern line `want` (`…` = any text).
fn line_matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split('…').collect();
    if parts.len() == 1 {
        return want.trim_end() == got.trim_end();
    }
    let got = got.trim_end();
    let (first, last) = (parts[0], parts[parts.len() - 1].trim_end());
    if !got.starts_with(first) {
        return false;
    }
    let mut at = first.len();
    for p in &parts[1..parts.len() - 1] {
        match got[at..].find(p) {
            Some(k) => at += k + p.len(),
            None => return false,
        }
    }
    got.len() >= at + last.len() && got[at..].ends_with(last)
}

/// Whether the lines `got` match the pattern lines `want` (`...` = any lines).
fn block_matches(want: &[String], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w.trim() == "..." => {
            (0..=got.len()).any(|k| block_matches(rest, &got[k..]))
        }
        Some((w, rest)) => {
            !got.is_empty() && line_matches(w, got[0]) && block_matches(rest, &got[1..])
        }
    }
}

fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    for e in std::fs::read_dir(repo.join("policies")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join("policies").join(p.file_name().unwrap())).unwrap();
    }
    let t = FakeTree::standard(dir.path().join("board/root")).unwrap();
    t.add_process(&FakeProcess::new(412, "motion_control"))
        .unwrap();
    t.add_process(&FakeProcess {
        exe: Some("/opt/npu/bin/infer-server".into()),
        cmdline: vec![
            "/opt/npu/bin/infer-server".into(),
            "--model".into(),
            "yolo".into(),
        ],
        ..FakeProcess::new(500, "infer-server")
    })
    .unwrap();
    t.add_process(&FakeProcess {
        exe: Some("/usr/bin/python3.11".into()),
        cmdline: vec!["python3".into(), "/opt/vision/camera_pipeline.py".into()],
        uid: 1001,
        ..FakeProcess::new(600, "python3")
    })
    .unwrap();
    t.add_process(&FakeProcess::new(700, "sshd")).unwrap();
    support::boards::lay_out_all(dir.path());
    dir
}

#[test]
fn runnable_doc_examples_print_what_the_docs_say() {
    let all = examples();
    let bin = support::bin();
    let bindir = bin.parent().unwrap().to_path_buf();
    // The binary must be called `cgwarden` in PATH.
    let link_dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&bin, link_dir.path().join("cgwarden")).unwrap();
    let path = format!(
        "{}:{}:{}",
        link_dir.path().display(),
        bindir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for ex in &all {
        let dir = scratch();
        for (name, text) in &ex.files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        for (cmd, want) in &ex.steps {
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("exec 2>&1; {cmd}"))
                .current_dir(dir.path())
                .env("PATH", &path)
                .env_remove("CGWARDEN_LOG")
                .output()
                .unwrap();
            let mut got = String::from_utf8_lossy(&o.stdout).into_owned();
            let code = o.status.code().unwrap_or(-1);
            if code != 0 {
                got.push_str(&format!("[exit {code}]\n"));
            }
            let got_lines: Vec<&str> = got.lines().collect();
            if !block_matches(want, &got_lines) {
                failures.push(format!(
                    "{}:{}: `$ {cmd}`\n--- the doc says:\n{}\n--- it printed:\n{got}",
                    ex.file,
                    ex.line,
                    want.join("\n")
                ));
            }
        }
    }
    eprintln!("{} runnable examples checked", all.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(all.len() >= 5, "only {} runnable examples", all.len());
}

#[test]
fn the_matcher_itself() {
    assert!(line_matches("pid … up …s", "pid 412 up 3s"));
    assert!(!line_matches("pid … up …s", "pid 412 down 3s"));
    assert!(line_matches("exact", "exact  "));
    assert!(!line_matches("exact", "exactly"));
    let w: Vec<String> = ["a", "...", "z"].iter().map(|s| s.to_string()).collect();
    assert!(block_matches(&w, &["a", "b", "c", "z"]));
    assert!(block_matches(&w, &["a", "z"]));
    assert!(!block_matches(&w, &["a", "b"]));
    assert_eq!(file_mark("<!-- file: policy.yaml -->"), Some("policy.yaml"));
    assert_eq!(file_mark("<!-- file: ../x -->"), None);
    assert_eq!(file_mark("<!-- file: .hidden -->"), None);
    assert_eq!(file_mark("<!-- file:  -->"), None);
}
