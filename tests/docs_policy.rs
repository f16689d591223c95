//! The policy reference cannot rot: every field name the decoder accepts
//! (every list handed to `Decoder::fields`, and the top-level fields) must
//! appear in docs/policy.md as `name` in backticks. The field lists are read
//! from the decoder's source, so a field added there without documentation
//! fails this test.

use std::collections::BTreeSet;

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
    // decode.rs and the modules it was split into (issue 21 item 5);
    // tuning.rs (placement attributes, documented in threads.md) was never
    // scanned.
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
