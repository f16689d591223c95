//! The policy reference cannot rot: every field name the decoder accepts
//! (every list handed to `Decoder::fields`, and the top-level fields) must
//! appear in docs/policy.md as `name` in backticks. The field lists are read
//! from the decoder's source, so a field added there without documentation
//! fails this test.

use std::collections::BTreeSet;
use std::process::Command;

mod support;

/// The string literals of every `&[...]`/`[...]` field list in decode.rs
/// that feeds `fields(`, plus `TOP_FIELDS`.
fn decoder_fields(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = src;
    // Each `fields(` call names its allowed list within a few lines; a
    // `let fields = [...]` list is passed by name.
    let markers = ["fields(", "let fields = ", "TOP_FIELDS: &[&str] = "];
    while let Some((at, m)) = markers
        .iter()
        .filter_map(|m| rest.find(m).map(|i| (i, *m)))
        .min_by_key(|(i, _)| *i)
    {
        let after = &rest[at + m.len()..];
        rest = after;
        // The list: from the first `[` (within the call) to its `]`.
        let Some(open) = after.find('[') else {
            continue;
        };
        if m == "fields(" && after[..open].contains(';') {
            continue; // a call that passes a list by name (`&fields`)
        }
        let Some(close) = after[open..].find(']') else {
            continue;
        };
        let list = &after[open + 1..open + close];
        for lit in list.split('"').skip(1).step_by(2) {
            out.insert(lit.to_string());
        }
    }
    out
}

#[test]
fn every_field_the_decoder_accepts_is_in_docs_policy_md() {
    // decode.rs and the modules it is split into; tuning.rs (placement
    // attributes, documented in threads.md) is not scanned.
    let src = [
        include_str!("../src/policy/decode.rs"),
        include_str!("../src/policy/decode/grants.rs"),
        include_str!("../src/policy/decode/groups.rs"),
        include_str!("../src/policy/decode/kpi.rs"),
        include_str!("../src/policy/decode/placement.rs"),
        include_str!("../src/policy/decode/rules.rs"),
        include_str!("../src/policy/decode/settings.rs"),
        include_str!("../src/policy/decode/system.rs"),
    ]
    .concat();
    let src = src.as_str();
    let doc = include_str!("../docs/policy.md");
    let fields = decoder_fields(src);
    // Sanity: the scan must find the lists it is about (else it proves nothing).
    for known in [
        "version",
        "cgroup_root",
        "oom_group",
        "deadline",
        "max_boosts",
        "criteria",
    ] {
        assert!(fields.contains(known), "scan missed `{known}`: {fields:?}");
    }
    let missing: Vec<&String> = fields
        .iter()
        .filter(|f| {
            !doc.contains(&format!("`{f}`"))
                && !doc.contains(&format!(".{f}`"))
                && !doc.contains(&format!("`{f}:"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/policy.md does not mention these policy fields: {missing:?}"
    );
}

/// Every relative Markdown link in README.md and docs/*.md names a file in
/// the repository: the docs travel with the code, nothing points outside.
#[test]
fn readme_and_docs_link_only_to_files_in_the_repository() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![repo.join("README.md")];
    for e in std::fs::read_dir(repo.join("docs")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            files.push(e.path());
        }
    }
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let base = f.parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let p = base.join(target);
            let inside = p
                .canonicalize()
                .map(|c| c.starts_with(repo.canonicalize().unwrap()))
                .unwrap_or(false);
            if !inside {
                bad.push(format!("{}: {target}", f.display()));
            }
        }
    }
    assert!(checked > 10, "the scan found only {checked} links");
    assert!(
        bad.is_empty(),
        "links to nothing in the repository: {bad:#?}"
    );
}

/// The text of the fenced block right after the line `mark` in `page`.
fn block_after(page: &str, mark: &str) -> Option<String> {
    let mut lines = page.lines().skip_while(|l| l.trim() != mark).skip(1);
    lines.next().filter(|l| l.starts_with("```"))?;
    let mut text = String::new();
    for l in lines {
        if l.starts_with("```") {
            return Some(text);
        }
        text.push_str(l);
        text.push('\n');
    }
    None
}

/// The README's quick start is the first policy a user copies: the boot
/// script's layout (groups `realtime`, `inference`, `vision` and `system`),
/// about twenty lines. Taken from README.md itself, it must check without an
/// error or a warning, plan on a fake board with the four processes it
/// places, converge (apply, then `0 changes`) and reset to the tree it found.
#[test]
fn readme_quick_start_policy_checks_plans_and_converges() {
    let readme = include_str!("../README.md");
    let quick = readme
        .split("\n## ")
        .find(|s| s.starts_with("Quick start"))
        .expect("README.md has a `## Quick start` section");
    let policy = block_after(quick, "<!-- file: policy.yaml -->")
        .expect("the quick start shows its policy after `<!-- file: policy.yaml -->`");
    let lines = policy.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        (10..=25).contains(&lines),
        "the quick start's policy is {lines} lines"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, &policy).unwrap();
    let (board, _tree) = support::processes_board();
    let root = board.path();
    let run = |args: &[&str]| {
        support::run(
            Command::new(support::bin())
                .args(args)
                .env_remove("CGWARDEN_LOG"),
        )
    };
    let f = file.to_str().unwrap();
    let r = root.to_str().unwrap().to_string();
    let check = run(&["check", f]);
    assert_eq!(check.code, 0, "check:\n{check}");
    assert!(
        check.stdout.contains(": ok: 4 groups") && !check.stderr.contains("warning"),
        "check:\n{check}"
    );
    let plan = run(&["plan", f, "--root", &r]);
    assert_eq!(plan.code, 0, "plan:\n{plan}");
    for group in ["realtime", "inference", "vision", "system"] {
        assert!(
            plan.stdout
                .contains(&format!("MKDIR /sys/fs/cgroup/{group}\n")),
            "plan makes no group `{group}`:\n{plan}"
        );
    }
    for (pid, group) in [
        (400, "realtime"),
        (500, "inference"),
        (600, "vision"),
        (700, "system"),
    ] {
        assert!(
            plan.stdout.contains(&format!(
                "WRITE /sys/fs/cgroup/{group}/cgroup.procs {pid} (was /)"
            )),
            "plan does not place pid {pid} in `{group}`:\n{plan}"
        );
    }
    assert!(
        plan.stdout.contains("SCHED 400 fifo priority 99"),
        "the control loop's chrt -f 99:\n{plan}"
    );
    assert!(
        plan.stdout
            .contains("WRITE /proc/sys/vm/swappiness 10 (was 60)"),
        "sysctl -w vm.swappiness=10:\n{plan}"
    );
    let before = support::tree_snapshot(root);
    let apply = run(&["apply", f, "--root", &r]);
    assert_eq!(apply.code, 0, "apply:\n{apply}");
    let again = run(&["plan", f, "--root", &r]);
    assert_eq!(
        again.stdout.lines().last(),
        Some("0 changes"),
        "a second plan:\n{again}"
    );
    let reset = run(&["reset", f, "--root", &r]);
    assert_eq!(reset.code, 0, "reset:\n{reset}");
    let left: Vec<String> = support::tree_diff(&before, &support::tree_snapshot(root))
        .into_iter()
        .filter(|d| !d.contains("run/cgwarden"))
        .collect();
    assert!(left.is_empty(), "reset left {left:#?}");
}
