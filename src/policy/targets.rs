//! `targets:`: partial policies merged over the base, one per board, keyed
//! by what the board says it is (`/sys/devices/soc0/machine`, else the
//! first device-tree `compatible`, else DMI's `product_name`; matched
//! exactly). One file serves a product line: the base says what every board
//! does, a target what one board does differently.
//!
//! Merge rules, applied to the YAML tree before it is decoded (so every
//! error still points at the line that says it):
//! - a mapping merges key by key into the base's mapping: `groups:`, a
//!   group, its `memory:` block, `system.sysctl`, `system.cpufreq`, …; a key
//!   the base lacks is added;
//! - a list replaces the base's list whole: `placement:`, `rules:`,
//!   `control:`, a hook's `exec:`;
//! - a scalar replaces the base's value;
//! - the value `drop` removes the key from the base: a group (with its
//!   children), a sysctl, a cpufreq policy, a hook, a whole section. Dropping
//!   a key the base does not have is an error (a typo would otherwise drop
//!   nothing);
//! - an empty value (`vision:` with nothing under it) changes nothing.
//!
//! A target holds the top-level sections of a policy except `version` and
//! `targets`, and may not change `settings.cgroup_root` or
//! `settings.state_dir`: the board is read under the first, and clients find
//! the control socket in the second, before any target is known.

use super::diag::{hint, Diagnostics};
use super::yaml::{Key, Node, Value};

/// Takes `targets:` out of `doc` (the decoder has no such section) and
/// checks its shape; returns the targets in file order.
pub(crate) fn split(doc: &mut Node, diags: &mut Diagnostics) -> Vec<(Key, Node)> {
    let Value::Map(entries) = &mut doc.value else {
        return Vec::new();
    };
    let Some(i) = entries.iter().position(|(k, _)| k.name == "targets") else {
        return Vec::new();
    };
    let (_, node) = entries.remove(i);
    let targets = match node.value {
        Value::Map(t) => t,
        Value::Null => Vec::new(),
        _ => {
            diags.error(
                node.pos,
                format!(
                    "targets must be a mapping of board names to partial policies, found {}",
                    node.kind()
                ),
            );
            return Vec::new();
        }
    };
    let allowed: Vec<&str> = super::decode::TOP_FIELDS
        .iter()
        .copied()
        .filter(|f| *f != "version")
        .collect();
    for (k, t) in &targets {
        match &t.value {
            Value::Map(fields) => {
                for (f, v) in fields {
                    if f.name == "version" || f.name == "targets" {
                        diags.error(
                            f.pos,
                            format!("target `{}`: a target cannot set `{}`", k.name, f.name),
                        );
                    } else if !allowed.contains(&f.name.as_str()) {
                        let h = hint(&f.name, allowed.iter().copied());
                        diags.error(
                            f.pos,
                            format!("target `{}`: unknown field `{}`{h}", k.name, f.name),
                        );
                    } else if f.name == "settings" {
                        fixed_settings(&k.name, v, diags);
                    }
                }
            }
            Value::Null => {}
            _ => diags.error(
                t.pos,
                format!(
                    "target `{}` must be a mapping (a partial policy), found {}",
                    k.name,
                    t.kind()
                ),
            ),
        }
    }
    targets
}

/// `settings.cgroup_root` and `settings.state_dir` are the base's.
fn fixed_settings(target: &str, settings: &Node, diags: &mut Diagnostics) {
    let Value::Map(fields) = &settings.value else {
        return;
    };
    for (f, _) in fields {
        if f.name == "cgroup_root" || f.name == "state_dir" {
            diags.error(
                f.pos,
                format!(
                    "target `{target}`: settings.{} is the base policy's: the board is read and the control socket found before a target is chosen",
                    f.name
                ),
            );
        }
    }
}

/// Merges `overlay` (target `target`) over `base` by the module's rules.
pub(crate) fn merge(base: &mut Node, overlay: &Node, target: &str, diags: &mut Diagnostics) {
    merge_at(base, overlay, target, "", diags);
}

fn merge_at(base: &mut Node, overlay: &Node, target: &str, path: &str, diags: &mut Diagnostics) {
    match (&mut base.value, &overlay.value) {
        (_, Value::Null) => {}
        (Value::Map(b), Value::Map(o)) => {
            for (k, v) in o {
                let here = if path.is_empty() {
                    k.name.clone()
                } else {
                    format!("{path}.{}", k.name)
                };
                let at = b.iter().position(|(bk, _)| bk.name == k.name);
                match (at, is_drop(v)) {
                    (Some(i), true) => {
                        b.remove(i);
                    }
                    (None, true) => diags.error(
                        v.pos,
                        format!(
                            "target `{target}`: drops `{here}`, which the base policy does not have"
                        ),
                    ),
                    (Some(i), false) => merge_at(&mut b[i].1, v, target, &here, diags),
                    (None, false) => b.push((k.clone(), v.clone())),
                }
            }
        }
        _ => *base = overlay.clone(),
    }
}

fn is_drop(node: &Node) -> bool {
    matches!(&node.value, Value::Str(s) if s == "drop")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::yaml::parse;
    use proptest::prelude::*;

    fn merged(base: &str, overlay: &str) -> (Node, Vec<String>) {
        let mut b = parse(base.as_bytes()).unwrap();
        let o = parse(overlay.as_bytes()).unwrap();
        let mut d = Diagnostics::new("p");
        merge(&mut b, &o, "T", &mut d);
        (b, d.items.into_iter().map(|i| i.message).collect())
    }

    fn keys(n: &Node) -> Vec<String> {
        match &n.value {
            Value::Map(e) => e.iter().map(|(k, _)| k.name.clone()).collect(),
            _ => Vec::new(),
        }
    }

    fn get<'n>(n: &'n Node, path: &str) -> &'n Node {
        path.split('.').fold(n, |n, k| match &n.value {
            Value::Map(e) => &e.iter().find(|(x, _)| x.name == k).unwrap().1,
            _ => panic!("{k}"),
        })
    }

    #[test]
    fn maps_merge_lists_replace_and_drop_removes() {
        let base = "groups:\n  a: { memory: { high: 1G, max: 2G }, cpu: { weight: 10 } }\n  b: { cpu: { weight: 20 } }\nplacement:\n  - { match: { comm: x }, group: a }\n  - { match: { comm: y }, group: b }\nsystem:\n  sysctl: { vm.swappiness: 10, vm.dirty_ratio: 5 }\n";
        let over = "groups:\n  a: { memory: { high: 3G } }\n  b: drop\n  c: { cpu: { weight: 5 } }\nplacement:\n  - { match: { comm: z }, group: a }\nsystem:\n  sysctl: { vm.dirty_ratio: drop, vm.swappiness: 60 }\n";
        let (m, errs) = merged(base, over);
        assert!(errs.is_empty(), "{errs:?}");
        // The map merged: `a` keeps max and cpu, takes the new high.
        assert_eq!(
            get(&m, "groups.a.memory.high").value,
            Value::Str("3G".into())
        );
        assert_eq!(
            get(&m, "groups.a.memory.max").value,
            Value::Str("2G".into())
        );
        assert_eq!(get(&m, "groups.a.cpu.weight").value, Value::Int(10));
        // `b` dropped, `c` added after the base's groups.
        assert_eq!(keys(get(&m, "groups")), ["a", "c"]);
        // The list replaced whole.
        let Value::Seq(p) = &get(&m, "placement").value else {
            panic!()
        };
        assert_eq!(p.len(), 1);
        assert_eq!(keys(get(&m, "system.sysctl")), ["vm.swappiness"]);
        let sysctl = get(&m, "system.sysctl");
        assert_eq!(sub(sysctl, "vm.swappiness").unwrap().value, Value::Int(60));
        // What came from the target keeps the target's lines.
        assert_eq!(get(&m, "groups.c").pos.line, 4);
    }

    #[test]
    fn dropping_what_the_base_lacks_is_an_error_and_empty_changes_nothing() {
        let (m, errs) = merged(
            "groups:\n  a: { cpu: { weight: 10 } }\n",
            "groups:\n  vison: drop\n  a:\n",
        );
        assert_eq!(
            errs,
            ["target `T`: drops `groups.vison`, which the base policy does not have"]
        );
        assert_eq!(get(&m, "groups.a.cpu.weight").value, Value::Int(10));
    }

    #[test]
    fn a_target_is_a_partial_policy_without_version_root_or_state_dir() {
        let text = "version: 1\ntargets:\n  QCS9100: { version: 1, group: {}, settings: { cgroup_root: /x, tick: 2s } }\n  QCS6490: 7\n  QCS8275:\n";
        let mut doc = parse(text.as_bytes()).unwrap();
        let mut d = Diagnostics::new("p");
        let t = split(&mut doc, &mut d);
        let names: Vec<&str> = t.iter().map(|(k, _)| k.name.as_str()).collect();
        assert_eq!(names, ["QCS9100", "QCS6490", "QCS8275"]);
        assert_eq!(keys(&doc), ["version"]);
        let errs: Vec<String> = d.items.into_iter().map(|i| i.message).collect();
        assert_eq!(errs.len(), 4, "{errs:#?}");
        assert!(errs[0].contains("cannot set `version`"), "{errs:#?}");
        assert!(
            errs[1].contains("unknown field `group`") && errs[1].contains("did you mean `groups`"),
            "{errs:#?}"
        );
        assert!(
            errs[2].contains("settings.cgroup_root is the base policy's"),
            "{errs:#?}"
        );
        assert!(
            errs[3].contains("target `QCS6490` must be a mapping"),
            "{errs:#?}"
        );
    }

    /// A small policy-like tree: maps of maps, lists and scalars.
    fn tree() -> impl Strategy<Value = String> {
        let scalar = prop_oneof![
            Just("1".to_string()),
            Just("x".to_string()),
            Just("[1, 2]".to_string())
        ];
        let leaf = proptest::collection::btree_map("[a-d]", scalar, 0..4);
        proptest::collection::btree_map("[a-d]", leaf, 0..4).prop_map(|m| {
            let mut s = String::new();
            for (k, v) in m {
                s.push_str(&format!("{k}:\n"));
                for (k2, v2) in v {
                    s.push_str(&format!("  {k2}: {v2}\n"));
                }
            }
            if s.is_empty() {
                "{}\n".to_string()
            } else {
                s
            }
        })
    }

    proptest! {
        /// Whatever the two trees: every key of either is in the result
        /// (none dropped without `drop`), each leaf is the overlay's where
        /// the overlay has it and the base's otherwise, and merging the same
        /// overlay twice changes nothing more.
        #[test]
        fn merge_keeps_every_key_and_the_overlay_wins(base in tree(), over in tree()) {
            let (m, errs) = merged(&base, &over);
            prop_assert!(errs.is_empty());
            let b = parse(base.as_bytes()).unwrap();
            let o = parse(over.as_bytes()).unwrap();
            for top in keys(&b).into_iter().chain(keys(&o)) {
                let mk = keys(get(&m, &top));
                let (bt, ot) = (sub(&b, &top), sub(&o, &top));
                let from_b = bt.map(keys).unwrap_or_default();
                let from_o = ot.map(keys).unwrap_or_default();
                for k in from_b.iter().chain(&from_o) {
                    prop_assert!(mk.contains(k), "{}.{} lost", top, k);
                    let want = ot.and_then(|n| sub(n, k)).or_else(|| bt.and_then(|n| sub(n, k))).unwrap();
                    let got = get(&m, &format!("{top}.{k}"));
                    match (&got.value, &want.value) {
                        (Value::Seq(g), Value::Seq(w)) => prop_assert_eq!(g.len(), w.len()),
                        (g, w) => prop_assert_eq!(g, w),
                    }
                }
            }
            let mut again = m.clone();
            let mut d = Diagnostics::new("p");
            merge(&mut again, &o, "T", &mut d);
            prop_assert_eq!(format!("{again:?}"), format!("{m:?}"));
        }
    }

    fn sub<'n>(n: &'n Node, key: &str) -> Option<&'n Node> {
        match &n.value {
            Value::Map(e) => e.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }
}
