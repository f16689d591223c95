//! The house has no circles: no two modules of `src/` reach each
//! other through `crate::…`/`super::…` paths, except a parent and its own
//! children. A module is a file (`src/a/b.rs` and `src/a/b/mod.rs` are
//! `a::b`); a path `crate::a::b::Item` is an arrow to the longest module
//! prefix it names. Test modules (`#[cfg(test)] mod tests`, inline or in a
//! sibling `tests.rs` or `*_tests.rs`) are left out: a test may reach anywhere.
//!
//! Also the kernel seam: `unsafe` appears only under `src/kernel/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "bin") {
                continue; // separate crates
            }
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name()
                .is_some_and(|n| !n.to_string_lossy().ends_with("tests.rs"))
        {
            out.push(p);
        }
    }
}

/// The file's text without its test modules and comments.
fn code(text: &str) -> String {
    // The first test module (`#[cfg(test)]` then `mod NAME`): test modules
    // sit at the end of a file.
    let cut = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..cut]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::a::b` and `super::x` paths in `code`, as module paths.
fn arrows(me: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        let mut v = Vec::new();
        let mut rest = s;
        loop {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            v.push(rest[..end].to_string());
            rest = &rest[end..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        v
    };
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `cgwarden_crate::` and the like
        }
        out.push(ident(&code[i + "crate::".len()..]));
    }
    for (i, _) in code.match_indices("super::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut base = me.to_vec();
        let mut rest = &code[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        base.extend(ident(rest));
        out.push(base);
    }
    out
}

struct House {
    modules: BTreeSet<Vec<String>>,
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

fn house() -> House {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut modules = BTreeSet::new();
    let mut texts = Vec::new();
    for f in &files {
        let m = module_of(f.strip_prefix(&src).unwrap());
        modules.insert(m.clone());
        texts.push((m, std::fs::read_to_string(f).unwrap()));
    }
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, text) in &texts {
        for a in arrows(m, &code(text)) {
            // The longest prefix that is a module.
            let Some(to) = (1..=a.len())
                .rev()
                .map(|n| a[..n].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            let related = to.starts_with(m) || m.starts_with(&to);
            if !related {
                edges.entry(m.clone()).or_default().insert(to);
            }
        }
    }
    House { modules, edges }
}

/// Groups of modules that all reach each other (strongly connected
/// components with more than one module): mutual reachability by search,
/// cheap for a house of a hundred rooms.
fn circles(h: &House) -> Vec<Vec<String>> {
    let reach = |from: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for t in h.edges.get(&m).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let all: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        h.modules.iter().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut placed = BTreeSet::new();
    for (m, r) in &all {
        if placed.contains(*m) || !r.contains(*m) {
            continue;
        }
        let comp: Vec<&Vec<String>> = r
            .iter()
            .filter(|o| all.get(o).is_some_and(|ro| ro.contains(*m)))
            .collect();
        if comp.len() > 1 {
            let mut names: Vec<String> = comp.iter().map(|c| c.join("::")).collect();
            names.sort();
            out.push(names);
        }
        placed.extend(comp.into_iter().cloned());
    }
    out
}

#[test]
fn no_module_reaches_back_to_a_module_that_reaches_it() {
    let h = house();
    // The scan must see the house it is about (else it proves nothing).
    assert!(h.modules.len() > 80, "{} modules", h.modules.len());
    assert!(
        h.edges
            .get(&vec!["converge".to_string(), "journal".to_string()])
            .is_some_and(|e| e.contains(&vec!["knobs".to_string()])),
        "the scan misses converge::journal → knobs"
    );
    let found = circles(&h);
    let text: Vec<String> = found
        .iter()
        .map(|c| {
            let arrows: Vec<String> = c
                .iter()
                .flat_map(|from| {
                    let f: Vec<String> = from.split("::").map(String::from).collect();
                    h.edges.get(&f).into_iter().flatten().filter_map(move |t| {
                        let t = t.join("::");
                        c.contains(&t).then(|| format!("{from} → {t}"))
                    })
                })
                .collect();
            format!("{{{}}}: {}", c.join(", "), arrows.join("; "))
        })
        .collect();
    println!("import circles: {}", found.len());
    // The last circle (kernel::{cgroupfs, fake, root}) is gone: each fake
    // backend is a child of what it backs (`root::fake`, `cgroupfs::fake`),
    // and the cgroup file formats both read are a leaf (`cgroup_text`).
    let known: Vec<Vec<String>> = Vec::new();
    assert!(found == known, "import circles:\n{}", text.join("\n"));
}

/// A self-check: the circle finder finds a planted circle.
#[test]
fn the_circle_finder_finds_a_circle() {
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    let c = vec!["c".to_string()];
    let h = House {
        modules: [a.clone(), b.clone(), c.clone()].into(),
        edges: [
            (a.clone(), [b.clone()].into()),
            (b.clone(), [a.clone()].into()),
            (c.clone(), [a.clone()].into()),
        ]
        .into(),
    };
    assert_eq!(circles(&h), vec![vec!["a".to_string(), "b".to_string()]]);
}

/// The kernel seam holds: outside `src/kernel/` (and the knob registry's
/// path templates in `src/knobs/`, and the separate test-workload binary),
/// non-test code has no `unsafe` and builds no device path from a literal.
#[test]
fn unsafe_and_device_paths_stay_behind_the_kernel_seam() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let device_path = ["Path::new(\"/", "PathBuf::from(\"/", "&str = \"/"];
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("kernel/") || rel.starts_with("knobs/") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in code(&text).lines().enumerate() {
            let l = line.trim();
            let words: Vec<&str> = l
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .collect();
            if words.contains(&"unsafe") {
                found.push(format!("{rel}:{}: unsafe: {l}", n + 1));
            }
            for p in device_path {
                if let Some(i) = l.find(p) {
                    let path = &l[i + p.len()..];
                    if ["proc/", "sys/", "dev/"]
                        .iter()
                        .any(|d| path.starts_with(d))
                    {
                        found.push(format!("{rel}:{}: device path: {l}", n + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "outside src/kernel:\n{}",
        found.join("\n")
    );
}

/// The house's floors: what each room of `src/` may import from the others. A
/// room not listed here, or an arrow not allowed, fails the test. Leaves first;
/// a room reaches only downwards (policy and the engine are pure, the kernel
/// seam is the only I/O, the daemon wires them).
const FLOORS: &[(&str, &[&str])] = &[
    ("units", &[]),
    ("out", &[]),
    ("stats", &[]),
    ("show", &[]),
    ("logline", &["show"]),
    ("knobs", &["units"]),
    ("kernel", &["knobs", "units"]),
    ("exit", &["kernel"]),
    ("policy", &["knobs", "units"]),
    ("engine", &["knobs", "policy", "units"]),
    (
        "converge",
        &["engine", "exit", "kernel", "knobs", "policy", "units"],
    ),
    (
        "doctor",
        &[
            "converge", "engine", "exit", "kernel", "knobs", "policy", "units",
        ],
    ),
    (
        "control",
        &["exit", "kernel", "knobs", "out", "policy", "show", "units"],
    ),
    (
        "observe",
        &[
            "control", "engine", "exit", "kernel", "knobs", "out", "policy", "show", "stats",
            "units",
        ],
    ),
    (
        "daemon",
        &[
            "control", "converge", "doctor", "engine", "exit", "kernel", "knobs", "observe",
            "policy", "show", "stats", "units",
        ],
    ),
    (
        "soak",
        &[
            "control", "exit", "kernel", "observe", "out", "policy", "units",
        ],
    ),
    (
        "top",
        &["control", "exit", "kernel", "knobs", "out", "show", "units"],
    ),
    (
        "demo",
        &[
            "control", "converge", "exit", "kernel", "knobs", "out", "policy", "units",
        ],
    ),
    ("fuzzing", &["control", "converge", "kernel", "policy"]),
    // The command line: every subcommand's entry point.
    (
        "cli",
        &[
            "control", "converge", "daemon", "demo", "doctor", "exit", "kernel", "knobs",
            "logline", "observe", "out", "policy", "show", "soak", "top", "units",
        ],
    ),
];

/// No arrow runs up a floor: `engine → kernel` (I/O in
/// the pure engine) or `policy → observe` fail here.
#[test]
fn no_arrow_runs_up_a_floor() {
    let h = house();
    let floors: BTreeMap<&str, &[&str]> = FLOORS.iter().copied().collect();
    let mut wrong = Vec::new();
    for m in &h.modules {
        if !m.is_empty() && !floors.contains_key(m[0].as_str()) {
            wrong.push(format!(
                "{}: room `{}` has no floor in FLOORS",
                m.join("::"),
                m[0]
            ));
        }
    }
    let mut seen = 0;
    for (from, tos) in &h.edges {
        for to in tos {
            if from[0] == to[0] {
                continue;
            }
            seen += 1;
            if from.is_empty() {
                continue;
            }
            let allowed = floors.get(from[0].as_str()).copied().unwrap_or(&[]);
            if !allowed.contains(&to[0].as_str()) {
                wrong.push(format!("{} → {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(seen > 100, "the scan saw only {seen} arrows between rooms");
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "arrows up a floor:\n{}", wrong.join("\n"));
}
