//! The policy: YAML model, value units, the rule language and validation.
//! Pure: nothing here touches the system, so `check` runs anywhere.

pub mod decode;
pub(crate) mod diag;
pub mod expr;
pub mod knob;
pub mod model;
pub(crate) mod units;
pub(crate) mod yaml;

pub use diag::Diagnostics;
pub use model::Policy;

use std::path::Path;

/// Reads, parses and validates a policy file; every problem is in the error.
pub fn load(path: &Path) -> Result<Policy, Diagnostics> {
    let name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => load_bytes(&name, &bytes),
        Err(e) => {
            let mut d = Diagnostics::new(name);
            d.error(yaml::Pos::new(1, 1), format!("cannot read the policy: {e}"));
            Err(d)
        }
    }
}

/// Parses and validates policy text; `name` is used in diagnostics.
pub fn load_bytes(name: &str, bytes: &[u8]) -> Result<Policy, Diagnostics> {
    let mut diags = Diagnostics::new(name);
    let doc = match yaml::parse(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            diags.error(e.pos, e.message);
            return Err(diags);
        }
    };
    match decode::decode(&doc, &mut diags) {
        Some(p) if diags.is_empty() => Ok(p),
        _ => {
            if diags.is_empty() {
                diags.error(yaml::Pos::new(1, 1), "the policy could not be read");
            }
            Err(diags.sorted())
        }
    }
}

/// One-line summary printed by `check` for a valid policy.
pub fn summary(p: &Policy) -> String {
    format!(
        "ok: {} groups, {} rules, {} placements, {} hooks",
        p.all_groups().len(),
        p.rules.len(),
        p.placement.len(),
        p.hooks.len()
    )
}

/// Controllers the rules need in group `group`: `memory` to read its
/// `memory.*` metrics, `pids` for `pids.current`, and the controller of every
/// group knob a rule sets, raises or lowers there.
pub fn rule_controllers(p: &Policy, group: &str) -> Vec<&'static str> {
    use expr::{ExprKind, Metric};
    let mut out = Vec::new();
    for r in &p.rules {
        let mut stack = vec![&r.when];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Or(a, b) | ExprKind::And(a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                ExprKind::Not(a) => stack.push(a),
                ExprKind::Compare(c) => {
                    let ctrl = match &c.metric {
                        Metric::MemoryCurrent { group: g }
                        | Metric::SwapCurrent { group: g }
                        | Metric::MemoryEvent { group: g, .. } => {
                            (g.value == group).then_some("memory")
                        }
                        Metric::PidsCurrent { group: g } => (g.value == group).then_some("pids"),
                        _ => None,
                    };
                    out.extend(ctrl);
                }
                ExprKind::Running(_) | ExprKind::Exists(_) => {}
            }
        }
        for a in r.then.iter().chain(&r.while_) {
            if let Some(knob::Knob::Group { group: g, knob }) = a.knob() {
                if g == group {
                    out.push(knob.controller());
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
