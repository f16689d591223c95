//! `cgwarden check` against the invalid-policy corpus in `tests/invalid/`,
//! the shipped policies in `policies/`, and the fuzz regressions in
//! `tests/fuzz-regressions/`.
//!
//! Every corpus file holds exactly one deliberate error and starts with
//!
//! ```text
//! # expect: LINE:COL MESSAGE-FRAGMENT
//! ```
//!
//! `check` must exit 1 and print a stderr line that starts with
//! `FILE:LINE:COL: error: ` and contains the fragment (FILE exactly as passed
//! on the command line). All mismatches are collected and reported together.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::BIN;

const MIN_CORPUS_FILES: usize = 45;
const MIN_FRAGMENT_CHARS: usize = 10;
const TIMEOUT: Duration = Duration::from_secs(20);

struct Outcome {
    /// None when the process was killed by a signal or timed out.
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cgwarden ARGS...` from the crate root, with a timeout.
fn cgwarden(args: &[&str]) -> Outcome {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(manifest_dir())
        .env_remove("RUST_LOG")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the cgwarden binary");
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let mut err_pipe = child.stderr.take().expect("stderr is piped");
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait().expect("cannot wait for cgwarden") {
            Some(status) => break status,
            None if start.elapsed() > TIMEOUT => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("cannot reap cgwarden");
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let stdout = String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned();
    Outcome {
        code: if timed_out { None } else { status.code() },
        stdout,
        stderr,
        timed_out,
    }
}

/// Files directly inside `dir` (relative to the crate root), sorted by name.
fn files_in(dir: &str) -> Vec<PathBuf> {
    let full = manifest_dir().join(dir);
    let Ok(entries) = fs::read_dir(&full) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            // Skip editor droppings and dotfiles (.gitignore, .keep).
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && !n.ends_with('~'))
        })
        .map(|p| Path::new(dir).join(p.file_name().expect("a file has a name")))
        .collect();
    files.sort();
    files
}

struct Expectation {
    line: u32,
    col: u32,
    fragment: String,
}

/// Reads `# expect: LINE:COL FRAGMENT` from the first line. The rest of the
/// file may be anything (the corpus holds a file that is not UTF-8).
fn expectation(path: &Path) -> Result<Expectation, String> {
    let bytes = fs::read(manifest_dir().join(path)).map_err(|e| format!("cannot read: {e}"))?;
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let first = std::str::from_utf8(first).map_err(|_| "first line is not UTF-8".to_string())?;
    let rest = first.strip_prefix("# expect: ").ok_or_else(|| {
        format!("first line must be `# expect: LINE:COL FRAGMENT`, found {first:?}")
    })?;
    let (pos, fragment) = rest.split_once(' ').unwrap_or((rest, ""));
    let (line, col) = pos
        .split_once(':')
        .ok_or_else(|| format!("bad LINE:COL {pos:?} in the expect line"))?;
    let line = line
        .parse()
        .map_err(|_| format!("bad LINE {line:?} in the expect line"))?;
    let col = col
        .parse()
        .map_err(|_| format!("bad COL {col:?} in the expect line"))?;
    let fragment = fragment.trim_end().to_string();
    if fragment.chars().count() < MIN_FRAGMENT_CHARS {
        return Err(format!(
            "the message fragment {fragment:?} is shorter than {MIN_FRAGMENT_CHARS} characters"
        ));
    }
    Ok(Expectation {
        line,
        col,
        fragment,
    })
}

fn describe_exit(o: &Outcome) -> String {
    match (o.timed_out, o.code) {
        (true, _) => format!("timed out after {TIMEOUT:?}"),
        (false, Some(101)) => "exit 101 (PANIC)".to_string(),
        (false, Some(c)) => format!("exit {c}"),
        (false, None) => "killed by a signal".to_string(),
    }
}

fn indent(text: &str) -> String {
    if text.trim().is_empty() {
        return "      (empty)\n".to_string();
    }
    text.lines().map(|l| format!("      {l}\n")).collect()
}

#[test]
fn invalid_corpus_reports_each_error_at_its_position() {
    let files = files_in("tests/invalid");
    assert!(
        files.len() >= MIN_CORPUS_FILES,
        "expected at least {MIN_CORPUS_FILES} files in tests/invalid, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let file = path.to_str().expect("corpus file names are UTF-8");
        let exp = match expectation(path) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{file}: bad corpus file: {e}"));
                continue;
            }
        };
        let out = cgwarden(&["check", file]);
        let prefix = format!("{file}:{}:{}: error: ", exp.line, exp.col);
        let found = out
            .stderr
            .lines()
            .any(|l| l.starts_with(&prefix) && l.contains(&exp.fragment));
        if out.code == Some(1) && found {
            continue;
        }
        let mut problem = Vec::new();
        if out.code != Some(1) {
            problem.push(format!("{} (expected exit 1)", describe_exit(&out)));
        }
        if !found {
            problem.push("no matching error line".to_string());
        }
        failures.push(format!(
            "{file}: {}\n    expected: {prefix}…{}…\n    stderr:\n{}{}",
            problem.join("; "),
            exp.fragment,
            indent(&out.stderr),
            if out.stdout.trim().is_empty() {
                String::new()
            } else {
                format!("    stdout:\n{}", indent(&out.stdout))
            }
        ));
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus files did not get the expected diagnostic:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn shipped_policies_pass_check() {
    let files: Vec<PathBuf> = files_in("policies")
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(!files.is_empty(), "no policies/*.yaml found");
    // The RT policies are among them.
    for rt in ["qcs6490-rt.yaml", "iq8275-rt.yaml"] {
        assert!(
            files.iter().any(|p| p.ends_with(rt)),
            "policies/{rt} is not checked"
        );
    }
    let mut failures = Vec::new();
    for path in &files {
        let file = path.to_str().expect("policy file names are UTF-8");
        let out = cgwarden(&["check", file]);
        let summary = out.stdout.lines().any(|l| l.contains("groups"));
        if out.code != Some(0) || !summary {
            failures.push(format!(
                "{file}: {} (expected exit 0 and a summary line naming `groups`)\n    stdout:\n{}    stderr:\n{}",
                describe_exit(&out),
                indent(&out.stdout),
                indent(&out.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "shipped policies fail `check`:\n\n{}",
        failures.join("\n")
    );
}

#[test]
fn check_on_a_missing_file_names_the_path() {
    let missing = "tests/invalid-does-not-exist/no-such-policy.yaml";
    let out = cgwarden(&["check", missing]);
    assert_eq!(
        out.code,
        Some(1),
        "`check {missing}`: {}; stderr:\n{}",
        describe_exit(&out),
        out.stderr
    );
    assert!(
        out.stderr.contains(missing),
        "`check {missing}`: the message does not name the path:\n{}",
        out.stderr
    );
}

/// Inputs the fuzzer once crashed on (`fuzz/`): `check` must answer them
/// with exit 0 or 1, never a panic (101), a signal or a hang.
#[test]
fn fuzz_regressions_do_not_panic() {
    let files = files_in("tests/fuzz-regressions");
    let mut failures = Vec::new();
    for path in &files {
        let file = path.to_str().expect("regression file names are UTF-8");
        let out = cgwarden(&["check", file]);
        if !matches!(out.code, Some(0 | 1)) {
            failures.push(format!(
                "{file}: {}\n    stderr:\n{}",
                describe_exit(&out),
                indent(&out.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "fuzz regressions crash `check`:\n\n{}",
        failures.join("\n")
    );
}

/// `cgwarden help --help` once failed (clap's own help subcommand refuses
/// flags); every form of help exits 0 and `help NOPE` is a usage error.
#[test]
fn help_in_every_form() {
    for args in [
        &["help", "--help"][..],
        &["help"],
        &["help", "check"],
        &["--help"],
        &["check", "--help"],
    ] {
        let out = cgwarden(args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("Usage: cgwarden"),
            "{args:?}: {}",
            out.stdout
        );
    }
    assert!(cgwarden(&["help", "check"])
        .stdout
        .contains("cgwarden check"));
    let out = cgwarden(&["help", "nope"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
}

/// The guest scenarios' policies pass `check` (all but `broken.yaml`, which
/// exists to fail): a rule tightened on the host side (a reserved group
/// name) otherwise surfaces only as a failing guest run.
#[test]
fn guest_policies_pass_check() {
    let files: Vec<PathBuf> = files_in("tests/vm/guest/policies")
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("broken.yaml"))
        .collect();
    assert!(files.len() > 10, "{} guest policies found", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let file = path.to_str().expect("policy file names are UTF-8");
            let out = cgwarden(&["check", file]);
            (out.code != Some(0)).then(|| format!("{file}: {}", out.stderr))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
