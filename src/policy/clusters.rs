//! Cluster names in a policy resolved on a board, in the YAML tree, before
//! it is decoded: every CPU list that names a cluster becomes the board's
//! CPUs (`big,prime` → `4-7`), every cpufreq policy named by role becomes
//! the board's policy (`system.cpufreq.big` → `policy4`, `cpufreq.big.min`
//! in a rule, a grant pattern or a condition → `cpufreq.policy4.min`). The
//! decoder, the board bounds and everything after them see concrete CPUs and
//! policies only; the names, the board's clusters and what each became are
//! kept in the policy's [`super::Binding`] for `check`, `plan`, `status` and
//! `doctor` to show.
//!
//! The places that take a CPU list: `settings.daemon.cpus`, a group's
//! `cpuset.cpus` (nested groups too), a placement's and its threads' `cpus`,
//! `system.irqs` and `system.kthreads` `cpus`,
//! `system.realtime.housekeeping_cpus` and `cpuidle_disable.cpus`, the keys
//! of `system.latency.cpus`, and the value of a rule's `set G.cpuset.cpus`.
//! The places that take a cpufreq policy: the keys of `system.cpufreq`,
//! `cpufreq.POLICY.…` in rule conditions and actions and in `control:`
//! patterns, and `throttled(POLICY)`.
//!
//! A replaced word keeps its column: the node's line breaks are shifted so
//! an error later in the same text still points at what was written.

use super::diag::Diagnostics;
use super::yaml::{Node, Pos, Value};
use crate::knobs::clusters::{self, Clusters};

/// What a resolution did: each distinct text that named a cluster and what
/// it became, in file order.
pub(crate) type Uses = Vec<(String, String)>;

/// The fewest clusters a board needs for every name `doc` uses to exist
/// (at least one): the size of the notional board plain `check` uses.
pub(crate) fn needed(doc: &mut Node) -> usize {
    let mut r = Resolver {
        clusters: &Clusters::default(),
        diags: None,
        uses: Vec::new(),
        needed: 1,
        errors: Vec::new(),
    };
    walk(doc, &mut r);
    r.needed
}

/// Resolves every cluster name in `doc` on `clusters`, reporting a name the
/// board lacks (or a word no board has) at its position. Returns what was
/// resolved, and the positions of the errors (so the decoder's own error at
/// the same place can be dropped).
pub(crate) fn resolve(
    doc: &mut Node,
    clusters: &Clusters,
    diags: &mut Diagnostics,
) -> (Uses, Vec<Pos>) {
    let mut r = Resolver {
        clusters,
        diags: Some(diags),
        uses: Vec::new(),
        needed: 1,
        errors: Vec::new(),
    };
    walk(doc, &mut r);
    (r.uses, r.errors)
}

struct Resolver<'a> {
    clusters: &'a Clusters,
    /// `None`: only count what the names need.
    diags: Option<&'a mut Diagnostics>,
    uses: Uses,
    needed: usize,
    errors: Vec<Pos>,
}

impl Resolver<'_> {
    fn error(&mut self, pos: Pos, message: String) {
        if let Some(d) = self.diags.as_deref_mut() {
            d.error(pos, message);
            self.errors.push(pos);
        }
    }

    fn used(&mut self, text: &str, resolved: &str) {
        if !self.uses.iter().any(|(t, r)| t == text && r == resolved) {
            self.uses.push((text.to_string(), resolved.to_string()));
        }
    }

    /// Counts the names in a CPU list text.
    fn count(&mut self, text: &str) {
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric())) {
            if clusters::is_name(word) {
                self.needed = self.needed.max(clusters::needs(word));
            }
        }
    }

    /// A CPU list text resolved, or `None` (nothing to do, or an error
    /// reported at `pos`).
    fn cpu_text(&mut self, text: &str, pos: Pos, what: &str) -> Option<String> {
        if !clusters::names_cluster(text) {
            return None;
        }
        if self.diags.is_none() {
            self.count(text);
            return None;
        }
        match self.clusters.cpus(text) {
            Ok(list) => {
                let out = list.to_string();
                self.used(text.trim(), &out);
                Some(out)
            }
            Err(why) => {
                self.error(pos, format!("{what} `{}`: {why}", text.trim()));
                None
            }
        }
    }

    /// A CPU list node.
    fn cpus(&mut self, node: &mut Node, what: &str) {
        let Value::Str(text) = &node.value else {
            return;
        };
        let text = text.clone();
        if let Some(out) = self.cpu_text(&text, node.pos, what) {
            node.value = Value::Str(out);
            node.breaks.clear();
        }
    }

    /// A mapping whose keys are CPU lists (`system.latency.cpus`).
    fn cpu_keys(&mut self, map: &mut Node, what: &str) {
        let Value::Map(entries) = &mut map.value else {
            return;
        };
        for (k, _) in entries.iter_mut() {
            let text = k.name.clone();
            if let Some(out) = self.cpu_text(&text, k.pos, what) {
                k.name = out;
            }
        }
    }

    /// The cpufreq policy a word in a policy's place names: `None` for a
    /// `policyN` (or a word left to the decoder), the policy for a cluster
    /// name, an error for a word no board has.
    fn policy_word(&mut self, word: &str, pos: Pos, what: &str) -> Option<String> {
        if crate::knobs::is_numbered(word, "policy") {
            return None;
        }
        if self.diags.is_none() {
            if clusters::is_name(word) {
                self.needed = self.needed.max(clusters::needs(word));
            }
            return None;
        }
        if !clusters::is_name(word) && word.starts_with("policy") {
            return None; // `policy` alone, `policyx`: the decoder says why
        }
        match self.clusters.policy(word) {
            Ok(p) => {
                let p = p.to_string();
                self.used(word, &p);
                Some(p)
            }
            Err(why) => {
                let msg = if clusters::is_name(word) {
                    format!("{what} `{word}`: {why}")
                } else {
                    let why = clusters::unknown_word_for(
                        word,
                        "a cpufreq policy (`policyN`, as in /sys/devices/system/cpu/cpufreq)",
                    );
                    format!("{what}: {why}")
                };
                self.error(pos, msg);
                None
            }
        }
    }

    /// `system.cpufreq`: keys are policies or cluster names. Two keys that
    /// come to name the same policy are an error.
    fn policy_keys(&mut self, map: &mut Node) {
        let Value::Map(entries) = &mut map.value else {
            return;
        };
        for i in 0..entries.len() {
            let (word, pos) = (entries[i].0.name.clone(), entries[i].0.pos);
            let Some(p) = self.policy_word(&word, pos, "system.cpufreq:") else {
                continue;
            };
            if let Some((k, _)) = entries.iter().find(|(k, _)| k.name == p) {
                let line = k.pos.line;
                self.error(
                    pos,
                    format!(
                        "system.cpufreq: `{word}` is {p} on this board, which line {line} sets too"
                    ),
                );
                continue;
            }
            entries[i].0.name = p;
        }
    }

    /// A rule condition or action, or a grant pattern: `cpufreq.WORD.` and
    /// `throttled(WORD)` name policies; in an action, the value of
    /// `set G.cpuset.cpus = …` is a CPU list.
    fn text(&mut self, node: &mut Node, what: &str) {
        let Value::Str(text) = &node.value else {
            return;
        };
        let text = text.clone();
        // (start, end, replacement), byte offsets.
        let mut edits: Vec<(usize, usize, String)> = Vec::new();
        let chars = |b: usize| text[..b].chars().count();
        let policy_at = |r: &mut Self, start: usize, end: usize| {
            let word = &text[start..end];
            let pos = node.pos_at(chars(start));
            r.policy_word(word, pos, what).map(|p| (start, end, p))
        };
        for (at, _) in text.match_indices("cpufreq.") {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
                continue;
            }
            let start = at + "cpufreq.".len();
            let end = start
                + text[start..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(text.len() - start);
            if end > start && text[end..].starts_with('.') {
                edits.extend(policy_at(self, start, end));
            }
        }
        for (at, _) in text.match_indices("throttled(") {
            let open = at + "throttled(".len();
            let Some(close) = text[open..].find(')') else {
                continue;
            };
            let inner = &text[open..open + close];
            let start = open + (inner.len() - inner.trim_start().len());
            let end = open + inner.trim_end().len();
            if end > start {
                edits.extend(policy_at(self, start, end));
            }
        }
        if let Some(at) = text.find(".cpuset.cpus") {
            let after = at + ".cpuset.cpus".len();
            if let Some(eq) = text[after..].trim_start().strip_prefix('=') {
                let start = text.len() - eq.trim_start().len();
                let end = start + text[start..].trim_end().len();
                let pos = node.pos_at(chars(start));
                if let Some(out) = self.cpu_text(&text[start..end], pos, what) {
                    edits.push((start, end, out));
                }
            }
        }
        edits.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (start, end, with) in edits {
            let (s, e) = (chars(start), chars(end));
            splice(node, s, e, &with);
        }
    }
}

/// Replaces characters `start..end` of a string node's value with `with`,
/// keeping the positions of what follows: [`Node::pos_at`] of a character
/// after the replacement still gives where it was written.
fn splice(node: &mut Node, start: usize, end: usize, with: &str) {
    let Value::Str(text) = &node.value else {
        return;
    };
    let after = node.pos_at(end);
    let new_len = with.chars().count();
    let mut out: String = text.chars().take(start).collect();
    out.push_str(with);
    out.extend(text.chars().skip(end));
    let mut breaks: Vec<(usize, Pos)> = Vec::new();
    for (k, p) in &node.breaks {
        if *k <= start {
            breaks.push((*k, *p));
        } else if *k >= end {
            breaks.push((*k - (end - start) + new_len, *p));
        }
    }
    breaks.push((start + new_len, after));
    breaks.sort_by_key(|(k, _)| *k);
    node.value = Value::Str(out);
    node.breaks = breaks;
}

fn field<'n>(node: &'n mut Node, key: &str) -> Option<&'n mut Node> {
    match &mut node.value {
        Value::Map(entries) => entries
            .iter_mut()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v),
        _ => None,
    }
}

fn items(node: &mut Node) -> &mut [Node] {
    match &mut node.value {
        Value::Seq(items) => items,
        _ => &mut [],
    }
}

/// Every place of `doc` that takes a CPU list or a cpufreq policy.
fn walk(doc: &mut Node, r: &mut Resolver) {
    if let Some(c) = field(doc, "settings")
        .and_then(|s| field(s, "daemon"))
        .and_then(|d| field(d, "cpus"))
    {
        r.cpus(c, "settings.daemon.cpus");
    }
    if let Some(g) = field(doc, "groups") {
        groups(g, r);
    }
    if let Some(list) = field(doc, "placement") {
        for p in items(list) {
            if let Some(c) = field(p, "cpus") {
                r.cpus(c, "placement cpus");
            }
            if let Some(threads) = field(p, "threads") {
                for t in items(threads) {
                    if let Some(c) = field(t, "cpus") {
                        r.cpus(c, "threads cpus");
                    }
                }
            }
        }
    }
    if let Some(sys) = field(doc, "system") {
        for key in ["irqs", "kthreads"] {
            if let Some(list) = field(sys, key) {
                for i in items(list) {
                    if let Some(c) = field(i, "cpus") {
                        r.cpus(c, &format!("system.{key} cpus"));
                    }
                }
            }
        }
        if let Some(rt) = field(sys, "realtime") {
            if let Some(c) = field(rt, "housekeeping_cpus") {
                r.cpus(c, "realtime.housekeeping_cpus");
            }
            if let Some(c) = field(rt, "cpuidle_disable").and_then(|n| field(n, "cpus")) {
                r.cpus(c, "realtime.cpuidle_disable.cpus");
            }
        }
        if let Some(m) = field(sys, "latency").and_then(|n| field(n, "cpus")) {
            r.cpu_keys(m, "system.latency.cpus");
        }
        if let Some(m) = field(sys, "cpufreq") {
            r.policy_keys(m);
        }
    }
    if let Some(rules) = field(doc, "rules") {
        for rule in items(rules) {
            if let Some(w) = field(rule, "when") {
                r.text(w, "when: cpufreq policy");
            }
            for key in ["then", "while"] {
                let Some(block) = field(rule, key) else {
                    continue;
                };
                if matches!(block.value, Value::Str(_)) {
                    r.text(block, "cpufreq policy");
                }
                for a in items(block) {
                    r.text(a, "cpufreq policy");
                }
            }
        }
    }
    if let Some(control) = field(doc, "control") {
        for grant in items(control) {
            for key in ["boost", "cap"] {
                if let Some(list) = field(grant, key) {
                    for p in items(list) {
                        r.text(p, &format!("control.{key}: cpufreq policy"));
                    }
                }
            }
        }
    }
}

fn groups(map: &mut Node, r: &mut Resolver) {
    let Value::Map(entries) = &mut map.value else {
        return;
    };
    for (k, g) in entries.iter_mut() {
        if let Some(c) = field(g, "cpuset").and_then(|c| field(c, "cpus")) {
            r.cpus(c, &format!("{}.cpuset.cpus", k.name));
        }
        if let Some(children) = field(g, "children") {
            groups(children, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::board::{Board, CpufreqBounds};
    use crate::units::CpuList;

    fn iq9100() -> Clusters {
        let mut b = Board::default();
        for (p, cpus, max) in [
            ("policy0", "0-3", 1_958_400),
            ("policy4", "4-6", 2_400_000),
            ("policy7", "7", 2_841_600),
        ] {
            b.cpufreq.insert(
                p.into(),
                CpufreqBounds {
                    max_khz: Some(max),
                    cpus: Some(CpuList::parse(cpus).unwrap()),
                    ..CpufreqBounds::default()
                },
            );
        }
        Clusters::of(&b)
    }

    fn run(text: &str, c: &Clusters) -> (String, Uses, Vec<String>) {
        let mut doc = crate::policy::yaml::parse(text.as_bytes()).unwrap();
        let mut d = Diagnostics::new("p.yaml");
        let (uses, _) = resolve(&mut doc, c, &mut d);
        let errs = d
            .items
            .iter()
            .map(|i| format!("{}:{}: {}", i.pos.line, i.pos.col, i.message))
            .collect();
        (texts(&doc).join(" "), uses, errs)
    }

    /// Every key and string value of a tree.
    fn texts(n: &Node) -> Vec<String> {
        match &n.value {
            Value::Str(s) => vec![s.clone()],
            Value::Seq(items) => items.iter().flat_map(texts).collect(),
            Value::Map(e) => e
                .iter()
                .flat_map(|(k, v)| std::iter::once(k.name.clone()).chain(texts(v)))
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn every_place_that_takes_cpus_or_a_policy_is_resolved() {
        let text = "version: 1\nsettings:\n  daemon: { cpus: \"little - 0\" }\ngroups:\n  rt:\n    cpuset: { cpus: prime }\n    children:\n      leaf: { cpuset: { cpus: \"cluster2\" } }\nplacement:\n  - match: { comm: a }\n    group: leaf\n    cpus: prime\n    threads: [{ name: t, cpus: \"cluster2\" }]\nsystem:\n  irqs: [{ name: eth0, cpus: little }]\n  kthreads: [{ name: \"ksoftirqd/*\", cpus: little }]\n  realtime: { housekeeping_cpus: \"0-7 - prime\", cpuidle_disable: { cpus: prime } }\n  latency: { cpus: { prime: 0us } }\n  cpufreq: { big: { min: 1.2GHz }, policy0: { max: 1.5GHz } }\nrules:\n  - name: r\n    when: cpufreq.prime.limit < 2GHz and throttled(big)\n    while: [\"set cpufreq.big.min = 1.8GHz\", \"set rt.cpuset.cpus = big,prime\"]\ncontrol:\n  - group: g\n    boost: [\"cpufreq.big.*\", \"cpufreq.*.min\"]\n";
        let (doc, uses, errs) = run(text, &iq9100());
        assert!(errs.is_empty(), "{errs:#?}");
        for gone in ["little", "big", "prime", "cluster2"] {
            assert!(!doc.contains(gone), "{gone} left in {doc}");
        }
        let got: Vec<String> = uses.iter().map(|(a, b)| format!("{a}={b}")).collect();
        assert_eq!(
            got,
            [
                "little - 0=1-3",
                "prime=7",
                "cluster2=7",
                "little=0-3",
                "0-7 - prime=0-6",
                "big=policy4",
                "prime=policy7",
                "big,prime=4-7",
            ]
        );
        // The decoded policy holds only concrete CPUs and policies.
        let b = {
            let mut b = Board::default();
            for c in &iq9100().0 {
                b.cpufreq.insert(
                    c.policy.clone(),
                    CpufreqBounds {
                        max_khz: c.max_khz,
                        cpus: Some(c.cpus.clone()),
                        ..CpufreqBounds::default()
                    },
                );
            }
            b
        };
        let text = text.replace("group: g", "user: alice");
        let p = crate::policy::load_bytes_on("p.yaml", text.as_bytes(), |_| b.clone())
            .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(p.settings.daemon.cpus.unwrap().to_string(), "1-3");
        assert_eq!(p.groups[0].cpuset.cpus.as_ref().unwrap().to_string(), "7");
        assert_eq!(p.system.cpufreq[0].policy, "policy4");
        assert_eq!(p.system.latency.as_ref().unwrap().cpus[0].0, 7);
        let actions: Vec<String> = p.rules[0].while_.iter().map(|a| a.to_string()).collect();
        assert!(actions[0].contains("cpufreq.policy4.min"), "{actions:?}");
        assert!(actions[1].contains("4-7"), "{actions:?}");
        assert_eq!(p.control[0].boost[0], "cpufreq.policy4.*");
    }

    #[test]
    fn names_the_board_lacks_are_errors_at_their_column_listing_its_clusters() {
        let text = "version: 1\ngroups:\n  a: { cpuset: { cpus: \"mid,big\" } }\nsystem:\n  cpufreq: { prime7: { min: 1GHz } }\nrules:\n  - name: r\n    when: running(x)\n    while: [\"set cpufreq.mid.min = 1GHz\"]\n";
        let (_, _, errs) = run(text, &iq9100());
        assert_eq!(errs.len(), 3, "{errs:#?}");
        assert!(
            errs[0].starts_with("3:24:")
                && errs[0].contains("a.cpuset.cpus `mid,big`: this board has no cluster `mid`: its clusters are little = cluster0 (CPUs 0-3, policy0, up to 1.9584GHz), big = cluster1 (CPUs 4-6, policy4, up to 2.4GHz), prime = cluster2 (CPU 7, policy7, up to 2.8416GHz)"),
            "{errs:#?}"
        );
        assert!(
            errs[1].starts_with("5:14:") && errs[1].contains("did you mean `prime`?"),
            "{errs:#?}"
        );
        // `set cpufreq.mid.min`: the word itself, inside the string.
        assert!(
            errs[2].starts_with("9:26:") && errs[2].contains("no cluster `mid`"),
            "{errs:#?}"
        );
    }

    #[test]
    fn a_replaced_word_keeps_the_columns_after_it() {
        let text = "version: 1\nrules:\n  - name: r\n    when: running(x)\n    while: [\"set cpufreq.big.min = 3GHz\"]\n";
        let mut doc = crate::policy::yaml::parse(text.as_bytes()).unwrap();
        let item = |doc: &mut Node| -> Node {
            let rules = field(doc, "rules").unwrap();
            let r = &mut items(rules)[0];
            items(field(r, "while").unwrap())[0].clone()
        };
        let before = item(&mut doc);
        let at = |n: &Node, s: &str| {
            let Value::Str(t) = &n.value else { panic!() };
            n.pos_at(t[..t.find(s).unwrap()].chars().count())
        };
        let three = at(&before, "3GHz");
        let mut d = Diagnostics::new("p");
        resolve(&mut doc, &iq9100(), &mut d);
        let after = item(&mut doc);
        assert_eq!(
            after.value,
            Value::Str("set cpufreq.policy4.min = 3GHz".into())
        );
        assert_eq!(at(&after, "3GHz"), three);
        assert_eq!(at(&after, "set"), at(&before, "set"));
    }

    #[test]
    fn two_keys_naming_one_policy_are_an_error() {
        let text =
            "version: 1\nsystem:\n  cpufreq:\n    policy4: { min: 1GHz }\n    big: { max: 2GHz }\n";
        let (_, _, errs) = run(text, &iq9100());
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(
            errs[0].starts_with("5:5:")
                && errs[0].contains("`big` is policy4 on this board, which line 4 sets too"),
            "{errs:#?}"
        );
    }

    #[test]
    fn the_notional_board_is_the_smallest_with_every_name() {
        for (cpus, n) in [
            ("\"0-3\"", 1),
            ("little", 2),
            ("\"big,prime\"", 3),
            ("\"mid - 4\"", 4),
            ("cluster6", 7),
        ] {
            let text = format!("version: 1\ngroups:\n  a: {{ cpuset: {{ cpus: {cpus} }} }}\n");
            let mut doc = crate::policy::yaml::parse(text.as_bytes()).unwrap();
            assert_eq!(needed(&mut doc), n, "{cpus}");
        }
        let text =
            "version: 1\nrules:\n  - name: r\n    when: throttled(prime)\n    then: [\"hook a\"]\n";
        let mut doc = crate::policy::yaml::parse(text.as_bytes()).unwrap();
        assert_eq!(needed(&mut doc), 3);
    }
}
