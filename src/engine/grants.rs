//! Who may boost which knobs (SPEC §5 "Identity and grants"): the policy's
//! `control:` entries turned into id-based grants, and the decision on one
//! boost request. Pure: the caller's identity comes from the socket layer
//! (SO_PEERCRED), the name lookups are passed in, nothing here reads the
//! system.
//!
//! Rules:
//! - uid 0 may boost every knob, for any duration or without a deadline.
//! - Anyone else needs a `control:` grant whose subject is its uid, its
//!   primary gid or one of its supplementary gids, and a deadline. A knob
//!   is allowed when a pattern of one of those grants matches its name; the
//!   other knobs are rejected one by one, with the reason. The deadline may
//!   be at most the largest `max_duration` among the grants that allow every
//!   allowed knob; the caller's live boosts must stay below the largest
//!   `max_boosts` of its grants. A request that breaks either, or of which
//!   nothing is allowed, is refused as a whole.

use crate::knobs::Knob;
use crate::policy::model::{ControlGrant, ControlSubject};
use crate::policy::pattern::glob_match;
use crate::units::Duration as Shown;
use std::time::Duration;

/// Who is asking, as the kernel reports it for the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Supplementary gids.
    pub groups: Vec<u32>,
}

/// A grant's subject once names are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    Uid(u32),
    Gid(u32),
}

/// One `control:` entry with its subject resolved to an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub who: Who,
    /// How the policy names the subject (`group vision`, `user alice`,
    /// `uid 1000`), for refusals.
    pub name: String,
    /// Knob globs (`*`, `?`) over knob names.
    pub patterns: Vec<String>,
    pub max_duration: Duration,
    pub max_boosts: u32,
}

impl Grant {
    fn applies_to(&self, caller: &Caller) -> bool {
        match self.who {
            Who::Uid(uid) => caller.uid == uid,
            Who::Gid(gid) => caller.gid == gid || caller.groups.contains(&gid),
        }
    }

    fn allows(&self, knob: &str) -> bool {
        self.patterns.iter().any(|p| glob_match(p, knob))
    }

    /// `group vision grants cpufreq.*.min, vision.memory.high`.
    fn describe(&self) -> String {
        format!("{} grants {}", self.name, self.patterns.join(", "))
    }
}

/// Resolves the policy's grants with the given name lookups (user name →
/// uid, group name → gid). A name that does not resolve drops its entry
/// with a warning; it is never fatal (the account may appear later, and a
/// reload resolves again).
pub(crate) fn resolve(
    policy_grants: &[ControlGrant],
    user: &dyn Fn(&str) -> Option<u32>,
    group: &dyn Fn(&str) -> Option<u32>,
) -> (Vec<Grant>, Vec<String>) {
    let mut grants = Vec::new();
    let mut warnings = Vec::new();
    for g in policy_grants {
        let who = match &g.subject {
            ControlSubject::Uid(uid) => Some(Who::Uid(*uid)),
            ControlSubject::User(name) => user(name).map(Who::Uid),
            ControlSubject::Group(name) => group(name).map(Who::Gid),
        };
        let Some(who) = who else {
            warnings.push(format!(
                "control: {} (policy line {}) does not exist on this system; its grant is ignored",
                g.subject, g.pos.line
            ));
            continue;
        };
        grants.push(Grant {
            who,
            name: g.subject.to_string(),
            patterns: g.boost.clone(),
            max_duration: g.max_duration,
            max_boosts: g.max_boosts,
        });
    }
    (grants, warnings)
}

/// What a boost request may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The knobs to boost, in request order, each once.
    pub allowed: Vec<Knob>,
    /// `(knob as asked, why)` for each knob the caller may not boost.
    pub rejected: Vec<(String, String)>,
    /// How long the boost lasts; `None`: no deadline (root only).
    pub duration: Option<Duration>,
}

/// Why a whole boost request is refused; the text names the limit or grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub reason: String,
}

fn refuse<T>(reason: String) -> Result<T, Refusal> {
    Err(Refusal { reason })
}

/// Decides a boost of `knobs` for `asked` (None: no deadline) by `caller`,
/// which already holds `live_boosts` boosts.
pub(crate) fn decide(
    grants: &[Grant],
    caller: &Caller,
    knobs: &[Knob],
    asked: Option<Duration>,
    live_boosts: usize,
) -> Result<Decision, Refusal> {
    if knobs.is_empty() {
        return refuse("a boost needs at least one knob".into());
    }
    if asked.is_some_and(|d| d.is_zero()) {
        return refuse("a boost must last longer than 0s".into());
    }
    let mut unique: Vec<&Knob> = Vec::with_capacity(knobs.len());
    for k in knobs {
        if !unique.contains(&k) {
            unique.push(k);
        }
    }
    if caller.uid == 0 {
        return Ok(Decision {
            allowed: unique.into_iter().cloned().collect(),
            rejected: Vec::new(),
            duration: asked,
        });
    }

    let who = format!("uid {}", caller.uid);
    let mine: Vec<&Grant> = grants.iter().filter(|g| g.applies_to(caller)).collect();
    // Non-empty from here on: every `max_by_key` below has a result.
    let (Some(longest), Some(most)) = (
        mine.iter().max_by_key(|g| g.max_duration),
        mine.iter().max_by_key(|g| g.max_boosts),
    ) else {
        return refuse(format!(
            "{who} has no control: grant (only root may boost without one)"
        ));
    };
    let Some(asked) = asked else {
        return refuse(format!(
            "non-root boosts need --for (a deadline); {} may hold a boost for at most {}",
            longest.name,
            Shown(longest.max_duration)
        ));
    };
    if live_boosts >= most.max_boosts as usize {
        let n = most.max_boosts;
        return refuse(format!(
            "{n} live boost{} is the limit for {}; release one or wait for one to expire",
            if n == 1 { "" } else { "s" },
            most.name
        ));
    }

    let granted = || {
        mine.iter()
            .map(|g| g.describe())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut allowed = Vec::new();
    let mut rejected = Vec::new();
    for knob in unique {
        let name = knob.to_string();
        if mine.iter().any(|g| g.allows(&name)) {
            allowed.push(knob.clone());
        } else {
            rejected.push((name, format!("not granted to {who} ({})", granted())));
        }
    }
    if allowed.is_empty() {
        let names: Vec<&str> = rejected.iter().map(|(k, _)| k.as_str()).collect();
        return refuse(format!(
            "{who} may boost none of {}: {}",
            names.join(", "),
            granted()
        ));
    }

    let names: Vec<String> = allowed.iter().map(|k| k.to_string()).collect();
    let holder = mine
        .iter()
        .filter(|g| names.iter().all(|n| g.allows(n)))
        .max_by_key(|g| g.max_duration);
    let Some(holder) = holder else {
        return refuse(format!(
            "no single control: grant of {who} allows {} together ({}); boost them separately",
            names.join(", "),
            granted()
        ));
    };
    if asked > holder.max_duration {
        return refuse(format!(
            "{} is the most {} may hold a boost of {} (asked for {})",
            Shown(holder.max_duration),
            holder.name,
            names.join(", "),
            Shown(asked)
        ));
    }
    Ok(Decision {
        allowed,
        rejected,
        duration: Some(asked),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::yaml::Pos;
    use proptest::prelude::*;

    fn knob(s: &str) -> Knob {
        Knob::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn grant(who: Who, name: &str, patterns: &[&str], mins: u64, max_boosts: u32) -> Grant {
        Grant {
            who,
            name: name.into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            max_duration: Duration::from_secs(mins * 60),
            max_boosts,
        }
    }

    fn vision() -> Vec<Grant> {
        vec![grant(
            Who::Gid(44),
            "group vision",
            &["cpufreq.*.min", "vision.memory.high"],
            10,
            4,
        )]
    }

    fn member() -> Caller {
        Caller {
            uid: 1000,
            gid: 1000,
            groups: vec![27, 44],
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn resolve_maps_names_and_warns_on_unknown_ones() {
        let pos = Pos::new(7, 5);
        let entry = |subject| ControlGrant {
            subject,
            boost: vec!["*".into()],
            max_duration: MIN,
            max_boosts: 2,
            pos,
        };
        let policy = [
            entry(ControlSubject::Group("vision".into())),
            entry(ControlSubject::User("alice".into())),
            entry(ControlSubject::Uid(1234)),
            entry(ControlSubject::User("ghost".into())),
        ];
        let user = |n: &str| (n == "alice").then_some(1001);
        let group = |n: &str| (n == "vision").then_some(44);
        let (grants, warnings) = resolve(&policy, &user, &group);
        let who: Vec<Who> = grants.iter().map(|g| g.who).collect();
        assert_eq!(who, [Who::Gid(44), Who::Uid(1001), Who::Uid(1234)]);
        assert_eq!(grants[0].name, "group vision");
        assert_eq!(grants[1].max_boosts, 2);
        assert_eq!(
            warnings,
            ["control: user ghost (policy line 7) does not exist on this system; its grant is ignored"]
        );
    }

    #[test]
    fn root_may_do_everything_without_a_deadline() {
        let root = Caller {
            uid: 0,
            gid: 0,
            groups: vec![],
        };
        let knobs = [knob("sysctl.vm.swappiness"), knob("x.cpu.weight")];
        let d = decide(&[], &root, &knobs, None, 10_000).unwrap();
        assert_eq!(d.allowed, knobs);
        assert!(d.rejected.is_empty());
        assert_eq!(d.duration, None);
        let d = decide(&[], &root, &knobs, Some(MIN * 60 * 48), 0).unwrap();
        assert_eq!(d.duration, Some(MIN * 60 * 48));
    }

    #[test]
    fn a_member_of_the_group_gets_the_granted_knobs() {
        let knobs = [
            knob("cpufreq.policy4.min"),
            knob("vision.memory.high"),
            knob("cpufreq.policy4.min"),
        ];
        let d = decide(&vision(), &member(), &knobs, Some(MIN * 10), 3).unwrap();
        assert_eq!(d.allowed, knobs[..2]);
        assert!(d.rejected.is_empty());
        assert_eq!(d.duration, Some(MIN * 10));
        // Primary gid counts as much as a supplementary one.
        let primary = Caller {
            uid: 1000,
            gid: 44,
            groups: vec![],
        };
        assert!(decide(&vision(), &primary, &knobs, Some(MIN), 0).is_ok());
    }

    #[test]
    fn knobs_outside_the_grant_are_rejected_one_by_one() {
        let knobs = [knob("vision.memory.high"), knob("vision.memory.max")];
        let d = decide(&vision(), &member(), &knobs, Some(MIN), 0).unwrap();
        assert_eq!(d.allowed, [knob("vision.memory.high")]);
        assert_eq!(
            d.rejected,
            [(
                "vision.memory.max".to_string(),
                "not granted to uid 1000 (group vision grants cpufreq.*.min, vision.memory.high)"
                    .to_string()
            )]
        );
        let none = decide(&vision(), &member(), &knobs[1..], Some(MIN), 0).unwrap_err();
        assert_eq!(
            none.reason,
            "uid 1000 may boost none of vision.memory.max: group vision grants cpufreq.*.min, vision.memory.high"
        );
    }

    #[test]
    fn refusals_say_why_and_name_the_limit() {
        let k = [knob("vision.memory.high")];
        let stranger = Caller {
            uid: 1000,
            gid: 1000,
            groups: vec![],
        };
        let r = |res: Result<Decision, Refusal>| res.unwrap_err().reason;
        assert_eq!(
            r(decide(&vision(), &stranger, &k, Some(MIN), 0)),
            "uid 1000 has no control: grant (only root may boost without one)"
        );
        assert_eq!(
            r(decide(&vision(), &member(), &k, None, 0)),
            "non-root boosts need --for (a deadline); group vision may hold a boost for at most 10m"
        );
        assert_eq!(
            r(decide(&vision(), &member(), &k, Some(MIN * 11), 0)),
            "10m is the most group vision may hold a boost of vision.memory.high (asked for 11m)"
        );
        assert_eq!(
            r(decide(&vision(), &member(), &k, Some(MIN), 4)),
            "4 live boosts is the limit for group vision; release one or wait for one to expire"
        );
        assert_eq!(
            r(decide(&vision(), &member(), &k, Some(Duration::ZERO), 0)),
            "a boost must last longer than 0s"
        );
        assert_eq!(
            r(decide(&vision(), &member(), &[], Some(MIN), 0)),
            "a boost needs at least one knob"
        );
    }

    #[test]
    fn the_duration_limit_comes_from_a_grant_that_allows_every_knob() {
        let grants = vec![
            grant(Who::Gid(44), "group vision", &["vision.*"], 10, 4),
            grant(
                Who::Uid(1000),
                "uid 1000",
                &["vision.memory.high", "cpufreq.*.min"],
                60,
                1,
            ),
        ];
        let both = [knob("vision.memory.high"), knob("cpufreq.policy0.min")];
        // Only the uid grant covers both: its 60m applies.
        assert!(decide(&grants, &member(), &both, Some(MIN * 60), 0).is_ok());
        // vision.cpu.weight is only in the group grant: 10m.
        let k = [knob("vision.cpu.weight"), knob("vision.memory.high")];
        assert_eq!(
            decide(&grants, &member(), &k, Some(MIN * 11), 0)
                .unwrap_err()
                .reason,
            "10m is the most group vision may hold a boost of vision.cpu.weight, vision.memory.high (asked for 11m)"
        );
        // Spread over two grants with neither covering all: refused.
        let apart = [knob("vision.cpu.weight"), knob("cpufreq.policy0.min")];
        let why = decide(&grants, &member(), &apart, Some(MIN), 0)
            .unwrap_err()
            .reason;
        assert!(
            why.starts_with("no single control: grant of uid 1000 allows vision.cpu.weight, cpufreq.policy0.min together"),
            "{why}"
        );
        // The live limit is the largest max_boosts among the caller's grants.
        assert!(decide(&grants, &member(), &both, Some(MIN), 3).is_ok());
        let one = vec![grant(Who::Uid(1000), "user alice", &["*"], 5, 1)];
        assert_eq!(
            decide(&one, &member(), &both, Some(MIN), 1)
                .unwrap_err()
                .reason,
            "1 live boost is the limit for user alice; release one or wait for one to expire"
        );
    }

    const KNOBS: &[&str] = &[
        "vision.memory.high",
        "vision.memory.max",
        "vision.cpu.weight",
        "inference.memory.high",
        "cpufreq.policy0.min",
        "cpufreq.policy4.min",
        "cpufreq.policy4.governor",
        "sysctl.vm.swappiness",
        "sysctl.kernel.sched_rt_runtime_us",
        "zram.zram0.mem_limit",
        "latency.cpu7",
        "latency.global",
    ];
    const PATTERNS: &[&str] = &[
        "latency.*",
        "vision.memory.high",
        "vision.*",
        "*.memory.*",
        "cpufreq.*.min",
        "cpufreq.policy?.*",
        "sysctl.vm.*",
        "*",
        "zram.zram0.mem_limit",
        "inference.memory.high",
    ];

    fn arb_grant() -> impl Strategy<Value = Grant> {
        (
            prop_oneof![(1u32..4).prop_map(Who::Uid), (1u32..4).prop_map(Who::Gid)],
            proptest::collection::vec(0..PATTERNS.len(), 1..4),
            1u64..120,
            1u32..6,
        )
            .prop_map(|(who, pats, mins, max_boosts)| Grant {
                who,
                name: format!("{who:?}"),
                patterns: pats.iter().map(|&i| PATTERNS[i].to_string()).collect(),
                max_duration: Duration::from_secs(mins * 60),
                max_boosts,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// A non-root caller never gets a knob no pattern of its own grants
        /// matches, never a duration above the limit of a grant that allows
        /// all it gets, never more live boosts than a grant of its allows,
        /// and never a boost without a deadline; every knob asked is either
        /// allowed or rejected.
        #[test]
        fn non_root_stays_within_its_grants(
            grants in proptest::collection::vec(arb_grant(), 1..5),
            uid in 1u32..3,
            gid in 1u32..3,
            groups in proptest::collection::vec(1u32..4, 0..3),
            asked in proptest::option::weighted(0.9, 0u64..150),
            picks in proptest::collection::vec(0..KNOBS.len(), 1..5),
            live in 0usize..4,
        ) {
            let caller = Caller { uid, gid, groups };
            let knobs: Vec<Knob> = picks.iter().map(|&i| knob(KNOBS[i])).collect();
            let asked = asked.map(|m| Duration::from_secs(m * 60));
            let mine: Vec<&Grant> = grants.iter().filter(|g| g.applies_to(&caller)).collect();
            match decide(&grants, &caller, &knobs, asked, live) {
                Err(r) => prop_assert!(!r.reason.is_empty()),
                Ok(d) => {
                    prop_assert!(!d.allowed.is_empty());
                    let Some(duration) = d.duration else {
                        return Err(TestCaseError::fail("non-root got no deadline"));
                    };
                    prop_assert_eq!(Some(duration), asked);
                    for k in &d.allowed {
                        let name = k.to_string();
                        prop_assert!(
                            mine.iter().any(|g| g.patterns.iter().any(|p| glob_match(p, &name))),
                            "{} allowed without a matching grant", name
                        );
                    }
                    let covering = mine.iter().filter(|g| {
                        d.allowed.iter().all(|k| g.allows(&k.to_string()))
                    });
                    prop_assert!(
                        covering.clone().any(|g| duration <= g.max_duration),
                        "{:?} is above every covering grant's limit", duration
                    );
                    prop_assert!(mine.iter().any(|g| live < g.max_boosts as usize));
                    for k in &knobs {
                        let name = k.to_string();
                        prop_assert!(
                            d.allowed.contains(k) || d.rejected.iter().any(|(n, _)| *n == name)
                        );
                    }
                }
            }
        }
    }
}
