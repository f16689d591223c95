//! What a policy was bound to on the board it was loaded for: the target in
//! force, what the board says it is, its clusters and what each cluster name
//! in the policy became. `check --root`, `plan`, `doctor`, `status` and
//! `health` show it; a boost resolves a knob named by cluster with it.

use crate::knobs::board::Identity;
use crate::knobs::clusters::{self, Clusters};

/// How a policy met its board.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Binding {
    /// The `targets:` keys, in file order.
    pub(crate) targets: Vec<String>,
    /// The target merged over the base, if any.
    pub(crate) target: Option<String>,
    /// What the board says it is.
    pub(crate) identity: Option<Identity>,
    /// The clusters names were resolved on, slowest first.
    pub(crate) clusters: Clusters,
    /// No board was known (plain `check`): names were resolved on a
    /// notional board, the smallest that has every name the policy uses.
    pub(crate) notional: bool,
    /// Each distinct text that named a cluster and what it became, in file
    /// order (`big,prime` → `4-7`, `big` → `policy4`).
    pub(crate) names: Vec<(String, String)>,
}

impl Binding {
    /// Whether the policy names a cluster anywhere.
    pub(crate) fn uses_names(&self) -> bool {
        !self.names.is_empty()
    }

    /// The warning for a board the policy's targets do not know: it runs
    /// the base policy.
    pub(crate) fn warning(&self) -> Option<String> {
        if self.notional || self.targets.is_empty() || self.target.is_some() {
            return None;
        }
        let targets = self.targets.join(", ");
        Some(match &self.identity {
            Some(id) => format!(
                "this board is `{}` ({}), which no target names (targets: {targets}): the base policy is in force",
                id.name, id.source
            ),
            None => format!(
                "this board does not say what it is (no /sys/devices/soc0/machine, device-tree compatible or DMI product_name), so no target applies (targets: {targets}): the base policy is in force"
            ),
        })
    }

    /// The target in force in words: `QCS9100 (/sys/devices/soc0/machine)`,
    /// `QCS9100 (chosen by --target)`, `none (the base policy)`.
    pub(crate) fn target_text(&self) -> Option<String> {
        // Plain `check` of the base knows no board to name a target.
        if self.targets.is_empty() || (self.notional && self.target.is_none()) {
            return None;
        }
        Some(match (&self.target, &self.identity) {
            (Some(t), Some(id)) if id.name == *t => format!("{t} (the board's {})", id.source),
            (Some(t), _) => format!("{t} (chosen by --target)"),
            (None, _) => "none: the base policy".to_string(),
        })
    }

    /// The lines that say how the policy met the board: the target, the
    /// board's clusters and what each name became. Nothing for a policy
    /// with neither targets nor cluster names.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = self.target_text() {
            out.push(format!("target: {t}"));
        }
        if !self.uses_names() {
            return out;
        }
        if self.notional {
            let mut words: Vec<&str> = Vec::new();
            for (text, _) in &self.names {
                for w in text.split(|c: char| !c.is_ascii_alphanumeric()) {
                    if clusters::is_name(w) && !words.contains(&w) {
                        words.push(w);
                    }
                }
            }
            // Roles slowest first, then clusterN by number.
            words.sort_by_key(|w| {
                let role = clusters::ROLES.iter().position(|r| r == w);
                let n = w.trim_start_matches("cluster").parse::<usize>().ok();
                (role.is_none(), role, n)
            });
            out.push(format!(
                "clusters: {} resolve on the board at start (`check --root DIR` resolves them on a board's tree)",
                words.join(", ")
            ));
            return out;
        }
        out.push(format!("clusters: {}", self.cluster_list()));
        let names: Vec<String> = self
            .names
            .iter()
            .map(|(text, to)| format!("{text} = {to}"))
            .collect();
        out.push(format!("names: {}", names.join("; ")));
        out
    }

    /// The board's clusters, one after the other.
    pub(crate) fn cluster_list(&self) -> String {
        if self.clusters.is_empty() {
            return "none".into();
        }
        (0..self.clusters.len())
            .map(|i| self.clusters.label(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A knob name with a cluster name in a cpufreq policy's place
    /// (`cpufreq.big.min`) as this board names it (`cpufreq.policy4.min`);
    /// any other name unchanged.
    pub(crate) fn knob_name(&self, name: &str) -> Result<String, String> {
        let mut parts = name.splitn(3, '.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("cpufreq"), Some(word), Some(rest)) if clusters::is_name(word) => {
                if self.notional {
                    return Err(format!("`{word}` names a cluster, and no board is known"));
                }
                let policy = self.clusters.policy(word)?;
                Ok(format!("cpufreq.{policy}.{rest}"))
            }
            _ => Ok(name.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::board::{Board, CpufreqBounds};

    fn binding() -> Binding {
        let mut b = Board::default();
        for (p, cpus, max) in [("policy0", "0-3", 1_958_400), ("policy4", "4-7", 2_400_000)] {
            b.cpufreq.insert(
                p.into(),
                CpufreqBounds {
                    max_khz: Some(max),
                    cpus: Some(crate::units::CpuList::parse(cpus).unwrap()),
                    ..CpufreqBounds::default()
                },
            );
        }
        Binding {
            targets: vec!["QCS9100".into(), "QCS6490".into()],
            target: None,
            identity: Some(Identity {
                name: "QCS8275".into(),
                source: "/sys/devices/soc0/machine".into(),
            }),
            clusters: Clusters::of(&b),
            notional: false,
            names: vec![
                ("big".into(), "4-7".into()),
                ("big".into(), "policy4".into()),
            ],
        }
    }

    #[test]
    fn an_unknown_board_runs_the_base_with_a_warning() {
        let b = binding();
        let w = b.warning().unwrap();
        assert!(
            w.contains("`QCS8275` (/sys/devices/soc0/machine)")
                && w.contains("targets: QCS9100, QCS6490")
                && w.contains("base policy is in force"),
            "{w}"
        );
        assert_eq!(
            b.lines(),
            [
                "target: none: the base policy",
                "clusters: little = cluster0 (CPUs 0-3, policy0, up to 1.9584GHz), big = cluster1 (CPUs 4-7, policy4, up to 2.4GHz)",
                "names: big = 4-7; big = policy4",
            ]
        );
        let matched = Binding {
            target: Some("QCS8275".into()),
            ..binding()
        };
        assert_eq!(matched.warning(), None);
        assert_eq!(
            matched.lines()[0],
            "target: QCS8275 (the board's /sys/devices/soc0/machine)"
        );
        // Plain check knows no board: no warning, names said to resolve later.
        let plain = Binding {
            notional: true,
            identity: None,
            ..binding()
        };
        assert_eq!(plain.warning(), None);
        assert_eq!(plain.lines().len(), 1);
        assert!(plain.lines()[0].contains("big resolve on the board at start"));
    }

    #[test]
    fn boost_knob_names_resolve_on_the_board() {
        let b = binding();
        assert_eq!(
            b.knob_name("cpufreq.big.min").unwrap(),
            "cpufreq.policy4.min"
        );
        assert_eq!(
            b.knob_name("cpufreq.policy0.max").unwrap(),
            "cpufreq.policy0.max"
        );
        assert_eq!(
            b.knob_name("vision.memory.high").unwrap(),
            "vision.memory.high"
        );
        let e = b.knob_name("cpufreq.prime.min").unwrap_err();
        assert!(e.contains("no cluster `prime`"), "{e}");
    }
}
