//! Tests of [`super`] (`grants`).

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
        caps: Vec::new(),
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
        cap: Vec::new(),
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
            caps: Vec::new(),
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

/// `cap:` patterns grant caps apart from raises.
#[test]
fn caps_are_granted_by_cap_patterns_only() {
    let g = Grant {
        caps: vec!["cpufreq.*.max".into()],
        ..grant(Who::Gid(1001), "group vision", &["cpufreq.*.min"], 60, 4)
    };
    let who = Caller {
        uid: 1000,
        gid: 1001,
        groups: vec![],
    };
    let ten = Some(Duration::from_secs(600));
    // As a raise, max is not granted; as a cap it is.
    let raise = decide(
        std::slice::from_ref(&g),
        &who,
        &[knob("cpufreq.policy7.max")],
        ten,
        0,
    );
    assert!(raise.is_err(), "{raise:?}");
    let caps = for_caps(std::slice::from_ref(&g));
    let d = decide(&caps, &who, &[knob("cpufreq.policy7.max")], ten, 0).unwrap();
    assert_eq!(d.allowed, vec![knob("cpufreq.policy7.max")]);
    // And min, granted as a raise, is not a cap.
    assert!(decide(&caps, &who, &[knob("cpufreq.policy7.min")], ten, 0).is_err());
}
