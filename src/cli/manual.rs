//! What the binary says about itself outside `--help`: shell completions
//! (`cgwarden completions SHELL`) and man pages (`cgwarden manpages DIR`,
//! hidden; packaging runs it). Both come from the clap definitions, so they
//! cannot drift from the parser; `cgwarden-policy(5)` is rendered from
//! docs/policy.md, the one policy reference, compiled into the binary.
//!
//! The Markdown → roff step is hand-written: docs/policy.md uses only
//! headings, paragraphs, lists, fenced code and pipe tables, and the crates
//! that convert full CommonMark to man pages pull a Markdown parser in for
//! 60 lines of work.

use clap::Command;
use std::io::Write;
use std::path::Path;

/// The policy reference, rendered into `cgwarden-policy.5`: docs/policy.md
/// gzip-compressed by build.rs (20 KB less binary, docs/size.md).
const POLICY_MD_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/policy.md.gz"));

/// docs/policy.md, inflated.
fn policy_md() -> std::io::Result<String> {
    let mut md = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(POLICY_MD_GZ), &mut md)?;
    Ok(md)
}

/// Writes completions for `shell` (bash, zsh, fish) to stdout.
pub(super) fn completions(cmd: &mut Command, shell: clap_complete::Shell) {
    let name = cmd.get_name().to_string();
    // Into memory first: clap_complete panics when its writer fails.
    let mut buf = Vec::new();
    clap_complete::generate(shell, cmd, name, &mut buf);
    crate::out::bytes(&buf);
}

/// Writes `cgwarden.8`, one `cgwarden-SUB.8` per visible subcommand and
/// `cgwarden-policy.5` into `dir` (created if absent). Returns the files.
pub(super) fn manpages(cmd: Command, dir: &Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd;
    cmd.build();
    let mut written = Vec::new();
    let mut emit = |name: String, render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut buf = Vec::new();
        render(&mut buf)?;
        std::fs::write(dir.join(&name), buf)?;
        written.push(name);
        Ok::<(), std::io::Error>(())
    };
    emit("cgwarden.8".into(), &|b| {
        clap_mangen::Man::new(cmd.clone()).section("8").render(b)
    })?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let full = format!("cgwarden-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(full.clone())
            .bin_name(format!("cgwarden {}", sub.get_name()));
        emit(format!("{full}.8"), &|b| {
            clap_mangen::Man::new(page.clone()).section("8").render(b)
        })?;
    }
    emit("cgwarden-policy.5".into(), &|b| {
        b.write_all(policy_page(&policy_md()?, env!("CARGO_PKG_VERSION")).as_bytes())
    })?;
    Ok(written)
}

/// Escapes a line of text for roff: backslashes, and a leading `.` or `'`
/// that would be read as a request.
fn roff_text(line: &str) -> String {
    let s = line.replace('\\', "\\e");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// Inline Markdown that reads badly in a terminal: `code` and **bold**
/// become bold, links keep their text.
fn inline(line: &str) -> String {
    let mut out = String::new();
    let mut bold = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                out.push_str(if bold { "\\fR" } else { "\\fB" });
                bold = !bold;
            }
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                out.push_str(if bold { "\\fR" } else { "\\fB" });
                bold = !bold;
            }
            _ => out.push(c),
        }
    }
    if bold {
        out.push_str("\\fR");
    }
    out
}

/// A Markdown table's separator row (`|---|:--|`).
fn is_table_rule(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// Renders the policy reference as a section-5 man page.
pub(super) fn policy_page(md: &str, version: &str) -> String {
    let mut out = format!(
        ".TH CGWARDEN-POLICY 5 \"\" \"cgwarden {version}\" \"File Formats\"\n.SH NAME\ncgwarden-policy \\- the cgwarden policy file (/etc/cgwarden/policy.yaml)\n"
    );
    let mut in_code = false;
    let lines: Vec<&str> = md.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        if raw.trim_start().starts_with("```") {
            out.push_str(if in_code {
                ".fi\n.RE\n"
            } else {
                ".RS 2\n.nf\n"
            });
            in_code = !in_code;
            continue;
        }
        if in_code {
            out.push_str(&roff_text(raw));
            out.push('\n');
            continue;
        }
        let line = raw.trim_end();
        if let Some(h) = line.strip_prefix("# ") {
            // The document title is the NAME line already.
            let _ = h;
        } else if let Some(h) = line.strip_prefix("## ") {
            out.push_str(&format!(".SH {}\n", roff_text(&h.to_uppercase())));
        } else if let Some(h) = line.strip_prefix("### ") {
            out.push_str(&format!(".SS {}\n", roff_text(h)));
        } else if line.is_empty() {
            out.push_str(".PP\n");
        } else if line.starts_with('|') {
            // Tables: the header row and the separator are dropped; each
            // row becomes a tagged paragraph, first cell as the tag.
            let next_is_rule = lines.get(i + 1).is_some_and(|n| is_table_rule(n));
            if is_table_rule(line) || next_is_rule {
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let (tag, rest) = cells.split_first().unwrap_or((&"", &[]));
            out.push_str(&format!(
                ".TP\n{}\n{}\n",
                inline(&roff_text(tag)),
                inline(&roff_text(&rest.join(" — ")))
            ));
        } else if let Some(item) = line.strip_prefix("- ") {
            out.push_str(&format!(".IP \\(bu 2\n{}\n", inline(&roff_text(item))));
        } else {
            out.push_str(&inline(&roff_text(line.trim_start())));
            out.push('\n');
        }
    }
    if in_code {
        out.push_str(".fi\n.RE\n");
    }
    out.push_str(".SH SEE ALSO\n.BR cgwarden (8)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_dot_and_backslashes_never_become_roff_requests() {
        let page = policy_page("## A\n.hidden\n```\n.x \\y\n```\n", "0");
        assert!(page.contains("\\&.hidden"));
        assert!(page.contains("\\&.x \\ey"));
        assert!(!page.lines().any(|l| l == ".hidden"));
    }

    #[test]
    fn code_spans_are_bold_and_always_closed() {
        assert_eq!(inline("a `b` c"), "a \\fBb\\fR c");
        assert_eq!(inline("open `b"), "open \\fBb\\fR");
    }
}
