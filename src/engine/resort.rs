//! The choice of a last resort's victim (`kill in G prefer … avoid …`): pure,
//! proptested. Never a critical or an avoided process; the largest RSS among
//! the preferred, else among the rest.

use glob::Pattern;

/// A process of the group, as read when the kill was decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    /// Resident set, bytes (0 when unreadable).
    pub(crate) rss: u64,
    /// Matches `settings.critical`.
    pub(crate) critical: bool,
}

/// Why a process was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    pub(crate) rss: u64,
    /// It matched `prefer` (else it was the largest of the rest).
    pub(crate) preferred: bool,
}

fn any_of(pats: &[Pattern], comm: &str) -> bool {
    pats.iter().any(|p| p.matches(comm))
}

/// Compiles `prefer`/`avoid` globs (validated at policy load; an invalid
/// one matches its literal text).
pub(crate) fn compile(globs: &[String]) -> Vec<Pattern> {
    globs
        .iter()
        .map(|g| {
            Pattern::new(g)
                .unwrap_or_else(|_| Pattern::new(&Pattern::escape(g)).unwrap_or_default())
        })
        .collect()
}

/// The victim: among candidates neither critical nor avoided, the largest
/// RSS of those matching `prefer`, else the largest of all of them; ties go
/// to the higher pid (the younger process, usually). `None` when every
/// candidate is protected.
pub(crate) fn choose(cands: &[Candidate], prefer: &[Pattern], avoid: &[Pattern]) -> Option<Choice> {
    let eligible = cands
        .iter()
        .filter(|c| !c.critical && !any_of(avoid, &c.comm));
    let best = |it: &mut dyn Iterator<Item = &Candidate>| {
        it.max_by(|a, b| a.rss.cmp(&b.rss).then(a.pid.cmp(&b.pid)))
            .cloned()
    };
    let preferred = best(&mut eligible.clone().filter(|c| any_of(prefer, &c.comm)));
    let (c, preferred) = match preferred {
        Some(c) => (c, true),
        None => (best(&mut eligible.clone())?, false),
    };
    Some(Choice {
        pid: c.pid,
        comm: c.comm,
        rss: c.rss,
        preferred,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(pid: i32, comm: &str, rss: u64, critical: bool) -> Candidate {
        Candidate {
            pid,
            comm: comm.into(),
            rss,
            critical,
        }
    }

    #[test]
    fn preferred_first_then_the_largest_of_the_rest_never_protected() {
        let cands = [
            c(1, "batch-a", 10, false),
            c(2, "batch-b", 30, false),
            c(3, "ui", 100, false),
            c(4, "motion", 500, true),
            c(5, "recorder", 400, false),
        ];
        let prefer = compile(&["batch-*".into()]);
        let avoid = compile(&["recorder".into()]);
        let v = choose(&cands, &prefer, &avoid).unwrap();
        assert_eq!((v.pid, v.preferred), (2, true));
        let v = choose(&cands, &compile(&["none".into()]), &avoid).unwrap();
        assert_eq!((v.pid, v.preferred), (3, false));
        assert_eq!(choose(&[c(4, "motion", 1, true)], &[], &[]), None);
    }

    fn arb() -> impl Strategy<Value = Vec<Candidate>> {
        proptest::collection::vec((1i32..50, 0usize..4, 0u64..1000, any::<bool>()), 0..12).prop_map(
            |v| {
                v.into_iter()
                    .map(|(pid, name, rss, critical)| Candidate {
                        pid,
                        comm: ["batch", "ui", "rec", "motion"][name].into(),
                        rss,
                        critical,
                    })
                    .collect()
            },
        )
    }

    proptest! {
        #[test]
        fn the_victim_is_never_protected_and_is_the_largest_of_its_tier(
            cands in arb(), prefer_i in 0usize..4, avoid_i in 0usize..4
        ) {
            let names = ["batch", "ui", "rec", "motion"];
            let prefer = compile(&[names[prefer_i].to_string()]);
            let avoid = compile(&[names[avoid_i].to_string()]);
            let eligible: Vec<&Candidate> = cands
                .iter()
                .filter(|c| !c.critical && c.comm != names[avoid_i])
                .collect();
            let tier: Vec<&&Candidate> = eligible.iter().filter(|c| c.comm == names[prefer_i]).collect();
            match choose(&cands, &prefer, &avoid) {
                None => prop_assert!(eligible.is_empty()),
                Some(v) => {
                    let victim = cands.iter().find(|c| c.pid == v.pid && c.comm == v.comm && c.rss == v.rss);
                    prop_assert!(victim.is_some_and(|c| !c.critical));
                    prop_assert_ne!(v.comm.as_str(), names[avoid_i]);
                    if tier.is_empty() {
                        prop_assert!(!v.preferred);
                        prop_assert!(eligible.iter().all(|c| c.rss <= v.rss));
                    } else {
                        prop_assert!(v.preferred);
                        prop_assert_eq!(v.comm.as_str(), names[prefer_i]);
                        prop_assert!(tier.iter().all(|c| c.rss <= v.rss));
                    }
                }
            }
        }
    }
}
