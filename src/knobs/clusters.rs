//! The board's CPU clusters and the names a policy gives them, so one policy
//! means the same CPUs on boards that number them differently.
//!
//! A cluster is one cpufreq policy: the CPUs its `related_cpus` lists (the
//! CPUs that share a clock). Clusters are ordered slowest first by the
//! policy's `cpuinfo_max_freq`, then by the highest `cpu_capacity` of its
//! CPUs (the scheduler's relative performance, 1024 for the fastest), then
//! by their first CPU, and numbered `cluster0`, `cluster1`, … in that order
//! — the same ascending order Qualcomm's userspace resource manager gives
//! its logical clusters. Role names count down from the fastest cluster:
//!
//! | clusters | little | mid | big | prime |
//! |---|---|---|---|---|
//! | 1 | — | — | — | — |
//! | 2 | cluster0 | — | cluster1 | — |
//! | 3 | cluster0 | — | cluster1 | cluster2 |
//! | 4 | cluster0 | cluster1 | cluster2 | cluster3 |
//! | N ≥ 5 | cluster0 | cluster(N-3) | cluster(N-2) | cluster(N-1) |
//!
//! Every name is one cluster and so one cpufreq policy: `cpufreq.big.min` is
//! always exactly one knob. A four-cluster SoC (prime, two performance tiers,
//! efficiency cores) calls its slower performance tier `mid`; a policy that
//! wants both tiers writes `mid,big`.
//!
//! A CPU list may name clusters beside numbers, and take CPUs away: `big,prime`,
//! `little - 0` (the little cluster without CPU 0), `0-7 - prime`. The minus
//! that subtracts has a blank on each side; a range has none (`0-3`). A list
//! with no cluster name is read as it always was.

use super::board::Board;
use crate::units::CpuList;
use std::fmt::Write as _;

/// The role names, slowest first.
pub(crate) const ROLES: [&str; 4] = ["little", "mid", "big", "prime"];

/// `clusterN` goes up to `cluster63`.
pub(crate) const MAX_CLUSTERS: usize = 64;

/// One cluster: a cpufreq policy and the CPUs it drives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cluster {
    /// The cpufreq policy (`policy4`).
    pub(crate) policy: String,
    /// Its `related_cpus`.
    pub(crate) cpus: CpuList,
    /// `cpuinfo_max_freq`, kHz.
    pub(crate) max_khz: Option<u64>,
    /// The highest `cpu_capacity` of its CPUs.
    pub(crate) capacity: Option<u64>,
}

/// A board's clusters, slowest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Clusters(pub(crate) Vec<Cluster>);

/// Whether `word` is a cluster name in any board's vocabulary: a role or
/// `clusterN` (N below [`MAX_CLUSTERS`], no leading zero).
pub(crate) fn is_name(word: &str) -> bool {
    ROLES.contains(&word) || cluster_number(word).is_some()
}

/// N of `clusterN`.
fn cluster_number(word: &str) -> Option<usize> {
    let n = word.strip_prefix("cluster")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return None;
    }
    n.parse::<usize>().ok().filter(|n| *n < MAX_CLUSTERS)
}

/// The fewest clusters a board has for `name` to exist there.
pub(crate) fn needs(name: &str) -> usize {
    match name {
        "little" | "big" => 2,
        "prime" => 3,
        "mid" => 4,
        _ => cluster_number(name).map_or(1, |n| n + 1),
    }
}

/// The cluster index role `role` names on a board of `n` clusters.
pub(crate) fn role_index(role: &str, n: usize) -> Option<usize> {
    match (role, n) {
        ("little", 2..) => Some(0),
        ("big", 2) => Some(1),
        ("big", 3..) => Some(n - 2),
        ("prime", 3..) => Some(n - 1),
        ("mid", 4..) => Some(n - 3),
        _ => None,
    }
}

/// The words a cluster name may be confused with, for "did you mean".
fn vocabulary() -> Vec<String> {
    let mut v: Vec<String> = ROLES.iter().map(|r| r.to_string()).collect();
    v.extend((0..8).map(|n| format!("cluster{n}")));
    v
}

/// Why `word` is no CPU and no cluster name, with a hint.
pub(crate) fn unknown_word(word: &str) -> String {
    unknown_word_for(word, "a CPU")
}

/// Why `word` is neither `thing` nor a cluster name, with a hint.
pub(crate) fn unknown_word_for(word: &str, thing: &str) -> String {
    let words = vocabulary();
    let hint = super::suggest(word, words.iter().map(String::as_str))
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    format!(
        "`{word}` is neither {thing} nor a cluster name{hint}: clusters are named little, mid, big, prime and cluster0 to cluster{}",
        MAX_CLUSTERS - 1
    )
}

/// Whether a CPU list text names a cluster (and so is an expression to
/// resolve, not a plain list).
pub(crate) fn names_cluster(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_alphabetic())
}

impl Clusters {
    /// The clusters of `board`: its cpufreq policies that list CPUs.
    pub(crate) fn of(board: &Board) -> Clusters {
        let mut v: Vec<Cluster> = board
            .cpufreq
            .iter()
            .filter_map(|(policy, b)| {
                let cpus = b.cpus.clone().filter(|c| !c.is_empty())?;
                let capacity = cpus
                    .iter()
                    .filter_map(|c| board.cpu_capacity.get(&c).copied())
                    .max();
                Some(Cluster {
                    policy: policy.clone(),
                    cpus,
                    max_khz: b.max_khz,
                    capacity,
                })
            })
            .collect();
        v.sort_by_key(|c| {
            (
                c.max_khz.unwrap_or(0),
                c.capacity.unwrap_or(0),
                c.cpus.iter().next(),
            )
        });
        Clusters(v)
    }

    /// A board nothing is known of, with `n` clusters of four CPUs each
    /// (`policy0` 0-3, `policy4` 4-7, …): plain `check` resolves names on it,
    /// so a policy is judged on the smallest board that has every name it
    /// uses.
    pub(crate) fn notional(n: usize) -> Clusters {
        Clusters(
            (0..n.clamp(1, MAX_CLUSTERS) as u32)
                .map(|k| Cluster {
                    policy: format!("policy{}", 4 * k),
                    cpus: CpuList((4 * k..4 * k + 4).collect()),
                    max_khz: None,
                    capacity: None,
                })
                .collect(),
        )
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The role cluster `index` has, if any.
    pub(crate) fn role_of(&self, index: usize) -> Option<&'static str> {
        ROLES
            .iter()
            .copied()
            .find(|r| role_index(r, self.len()) == Some(index))
    }

    /// The cluster `name` names here, or why there is none.
    pub(crate) fn find(&self, name: &str) -> Result<&Cluster, String> {
        if !is_name(name) {
            return Err(unknown_word(name));
        }
        let index = match cluster_number(name) {
            Some(n) => Some(n).filter(|n| *n < self.len()),
            None => role_index(name, self.len()),
        };
        match index {
            Some(i) => Ok(&self.0[i]),
            None => Err(format!(
                "this board has no cluster `{name}`: {}",
                self.listing()
            )),
        }
    }

    /// The board's clusters in words, for an error naming one it lacks.
    pub(crate) fn listing(&self) -> String {
        match self.len() {
            0 => "it shows no clusters (no cpufreq policy under /sys/devices/system/cpu/cpufreq lists its related_cpus)".into(),
            1 => format!("its only cluster is {}", self.label(0)),
            _ => {
                let all: Vec<String> = (0..self.len()).map(|i| self.label(i)).collect();
                format!("its clusters are {}", all.join(", "))
            }
        }
    }

    /// `big = cluster1 (CPUs 4-6, policy4, up to 2.4GHz)`.
    pub(crate) fn label(&self, index: usize) -> String {
        let c = &self.0[index];
        let mut s = match self.role_of(index) {
            Some(r) => format!("{r} = cluster{index}"),
            None => format!("cluster{index}"),
        };
        let cpu = if c.cpus.len() == 1 { "CPU" } else { "CPUs" };
        let _ = write!(s, " ({cpu} {}, {}", c.cpus, c.policy);
        if let Some(khz) = c.max_khz {
            let _ = write!(s, ", up to {}", super::board::khz_text(khz));
        }
        s.push(')');
        s
    }

    /// The CPUs of a CPU list that may name clusters and subtract: items
    /// separated by commas (a CPU, a range `0-3`, a cluster name), then any
    /// number of ` - ITEMS` taking CPUs away. Never empty.
    pub(crate) fn cpus(&self, text: &str) -> Result<CpuList, String> {
        let parts = split_subtraction(text);
        let mut set = self.items(parts[0])?;
        for part in &parts[1..] {
            let away = self.items(part)?;
            set.0.retain(|c| !away.contains(*c));
        }
        if set.is_empty() {
            return Err(format!("`{}` leaves no CPU", text.trim()));
        }
        Ok(set)
    }

    fn items(&self, text: &str) -> Result<CpuList, String> {
        let mut set = CpuList::default();
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(format!(
                    "an empty item in `{}`: items are CPUs, ranges and cluster names separated by commas, and ` - ` (blanks around the minus) takes CPUs away",
                    text.trim()
                ));
            }
            if item.starts_with(|c: char| c.is_ascii_digit()) {
                let list = CpuList::parse(item).map_err(|e| e.to_string())?;
                set.0.extend(list.0);
            } else if let Some((a, b)) = item.split_once('-').filter(|(a, _)| is_name(a.trim())) {
                return Err(format!(
                    "`{item}`: to take CPUs away from a cluster write `{} - {}`, with a blank on each side of the minus",
                    a.trim(),
                    b.trim()
                ));
            } else {
                set.0.extend(self.find(item)?.cpus.iter());
            }
        }
        Ok(set)
    }

    /// The cpufreq policy `name` (a cluster name) is here.
    pub(crate) fn policy(&self, name: &str) -> Result<&str, String> {
        self.find(name).map(|c| c.policy.as_str())
    }
}

/// `text` cut at each minus that has a blank before it and after it.
fn split_subtraction(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        let blank = |j: Option<&u8>| j.is_some_and(|c| c.is_ascii_whitespace());
        if *b == b'-' && i > 0 && blank(bytes.get(i - 1)) && blank(bytes.get(i + 1)) {
            parts.push(&text[start..i]);
            start = i + 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::board::CpufreqBounds;
    use proptest::prelude::*;

    fn list(t: &str) -> CpuList {
        CpuList::parse(t).unwrap()
    }

    /// A board of (policy, related_cpus, cpuinfo_max_freq) and capacities.
    fn board(policies: &[(&str, &str, Option<u64>)], capacity: &[(u32, u64)]) -> Board {
        let mut b = Board::default();
        for (p, cpus, max) in policies {
            b.cpufreq.insert(
                p.to_string(),
                CpufreqBounds {
                    max_khz: *max,
                    cpus: Some(list(cpus)),
                    ..CpufreqBounds::default()
                },
            );
        }
        b.cpu_capacity = capacity.iter().copied().collect();
        b
    }

    fn shape(c: &Clusters) -> Vec<String> {
        (0..c.len())
            .map(|i| {
                format!(
                    "{}={}:{}",
                    c.role_of(i).unwrap_or("-"),
                    c.0[i].policy,
                    c.0[i].cpus
                )
            })
            .collect()
    }

    #[test]
    fn one_two_three_and_four_clusters_are_named_from_the_fastest_down() {
        let one = Clusters::of(&board(&[("policy0", "0-3", Some(1_800_000))], &[]));
        assert_eq!(shape(&one), ["-=policy0:0-3"]);
        assert!(one.find("cluster0").is_ok());
        for name in ["little", "big", "prime", "mid", "cluster1"] {
            let e = one.find(name).unwrap_err();
            assert!(
                e.contains("its only cluster is cluster0 (CPUs 0-3, policy0, up to 1.8GHz)"),
                "{e}"
            );
        }

        let two = Clusters::of(&board(
            &[
                ("policy4", "4-7", Some(2_400_000)),
                ("policy0", "0-3", Some(1_800_000)),
            ],
            &[],
        ));
        assert_eq!(shape(&two), ["little=policy0:0-3", "big=policy4:4-7"]);
        let e = two.find("prime").unwrap_err();
        assert!(
            e.contains("no cluster `prime`")
                && e.contains(
                    "little = cluster0 (CPUs 0-3, policy0, up to 1.8GHz), big = cluster1 (CPUs 4-7"
                ),
            "{e}"
        );

        let three = Clusters::of(&board(
            &[
                ("policy0", "0-3", Some(1_958_400)),
                ("policy4", "4-6", Some(2_400_000)),
                ("policy7", "7", Some(2_841_600)),
            ],
            &[],
        ));
        assert_eq!(
            shape(&three),
            ["little=policy0:0-3", "big=policy4:4-6", "prime=policy7:7"]
        );
        assert_eq!(three.policy("big").unwrap(), "policy4");
        assert_eq!(three.policy("cluster2").unwrap(), "policy7");
        assert!(three.find("mid").is_err());

        // A 1+3+2+2 SoC: prime, two performance tiers, efficiency cores.
        let four = Clusters::of(&board(
            &[
                ("policy0", "0-1", Some(2_265_600)),
                ("policy2", "2-4", Some(3_148_800)),
                ("policy5", "5-6", Some(2_956_800)),
                ("policy7", "7", Some(3_302_400)),
            ],
            &[],
        ));
        assert_eq!(
            shape(&four),
            [
                "little=policy0:0-1",
                "mid=policy5:5-6",
                "big=policy2:2-4",
                "prime=policy7:7"
            ]
        );
        assert_eq!(four.cpus("mid,big").unwrap(), list("2-6"));

        let five = Clusters::notional(5);
        assert_eq!(
            (0..5).map(|i| five.role_of(i)).collect::<Vec<_>>(),
            [
                Some("little"),
                None,
                Some("mid"),
                Some("big"),
                Some("prime")
            ]
        );
    }

    #[test]
    fn ties_go_to_capacity_then_to_the_first_cpu() {
        // Same top frequency: the higher cpu_capacity is the faster cluster.
        let b = board(
            &[
                ("policy0", "0-3", Some(2_000_000)),
                ("policy4", "4-7", Some(2_000_000)),
            ],
            &[(0, 1024), (1, 1024), (4, 512)],
        );
        let c = Clusters::of(&b);
        assert_eq!(shape(&c), ["little=policy4:4-7", "big=policy0:0-3"]);
        // Nothing to tell them apart: CPU order.
        let b = board(
            &[
                ("policy4", "4-7", Some(2_000_000)),
                ("policy0", "0-3", Some(2_000_000)),
            ],
            &[],
        );
        assert_eq!(
            shape(&Clusters::of(&b)),
            ["little=policy0:0-3", "big=policy4:4-7"]
        );
        // A policy without related_cpus is no cluster; no cpufreq, none.
        let mut b = board(&[("policy0", "0-3", Some(1))], &[]);
        b.cpufreq.insert("policy9".into(), CpufreqBounds::default());
        assert_eq!(Clusters::of(&b).len(), 1);
        let none = Clusters::of(&Board::default());
        assert!(none
            .find("little")
            .unwrap_err()
            .contains("shows no clusters"));
    }

    #[test]
    fn lists_combine_names_numbers_and_subtraction() {
        let c = Clusters::of(&board(
            &[
                ("policy0", "0-3", Some(1)),
                ("policy4", "4-6", Some(2)),
                ("policy7", "7", Some(3)),
            ],
            &[],
        ));
        for (text, want) in [
            ("big,prime", "4-7"),
            ("little - 0", "1-3"),
            ("little -  0,1", "2-3"),
            ("0-7 - prime", "0-6"),
            ("big, 0", "0,4-6"),
            ("little,big - 4 - 0", "1-3,5-6"),
            ("cluster1", "4-6"),
        ] {
            assert_eq!(c.cpus(text).unwrap(), list(want), "{text}");
        }
        for (text, why) in [
            ("prime7", "did you mean `prime`?"),
            ("little-0", "write `little - 0`"),
            ("big,,prime", "an empty item"),
            ("prime - 7", "leaves no CPU"),
            ("mid", "no cluster `mid`"),
            ("cluster64", "neither a CPU nor a cluster name"),
            ("big, 9-3", "reversed"),
        ] {
            let e = c.cpus(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn the_vocabulary() {
        for ok in ["little", "mid", "big", "prime", "cluster0", "cluster63"] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in [
            "prime7",
            "cluster",
            "cluster01",
            "cluster64",
            "Big",
            "policy4",
        ] {
            assert!(!is_name(bad), "{bad}");
        }
        assert_eq!(
            [
                needs("little"),
                needs("prime"),
                needs("mid"),
                needs("cluster5")
            ],
            [2, 3, 4, 6]
        );
    }

    proptest! {
        /// Whatever the board, clusters come out slowest first, every name
        /// a board of that size has finds exactly one cluster, and names
        /// beyond it are refused with the board's clusters listed.
        #[test]
        fn names_resolve_to_one_cluster_each(
            maxes in proptest::collection::vec(1u64..4, 1..7),
            caps in proptest::collection::vec(0u64..3, 7),
        ) {
            let mut b = Board::default();
            for (k, max) in maxes.iter().enumerate() {
                let first = 2 * k as u32;
                b.cpufreq.insert(format!("policy{first}"), CpufreqBounds {
                    max_khz: Some(*max * 1_000_000),
                    cpus: Some(CpuList([first, first + 1].into())),
                    ..CpufreqBounds::default()
                });
                b.cpu_capacity.insert(first, caps[k]);
            }
            let c = Clusters::of(&b);
            prop_assert_eq!(c.len(), maxes.len());
            let keys: Vec<_> = c.0.iter().map(|x| (x.max_khz, x.capacity.unwrap_or(0))).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            prop_assert_eq!(keys, sorted);
            let mut seen = std::collections::BTreeSet::new();
            for name in ROLES {
                match c.find(name) {
                    Ok(cl) => {
                        prop_assert!(needs(name) <= c.len());
                        prop_assert!(seen.insert(cl.policy.clone()), "{} shares a cluster", name);
                        prop_assert_eq!(c.cpus(name).unwrap(), cl.cpus.clone());
                    }
                    Err(e) => {
                        prop_assert!(needs(name) > c.len());
                        prop_assert!(e.contains(&c.label(0)), "{}", e);
                    }
                }
            }
            let all: Vec<String> = (0..c.len()).map(|i| format!("cluster{i}")).collect();
            let every = c.0.iter().fold(CpuList::default(), |mut s, x| { s.0.extend(x.cpus.iter()); s });
            prop_assert_eq!(c.cpus(&all.join(",")).unwrap(), every);
        }
    }
}
