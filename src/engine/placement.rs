//! Which group a process belongs in: the placement rules compiled once, then
//! matched against each process (first matching rule wins, SPEC §2).
//!
//! Globs are compiled at policy load, user names resolved to uids once, so
//! matching a process allocates nothing per rule.

use crate::policy::model::{Placement, Sched, UserSpec};
use glob::{MatchOptions, Pattern};

/// What matching needs to know about a process.
#[derive(Clone, Debug, Default)]
pub struct ProcessFacts<'a> {
    pub comm: &'a str,
    pub exe: Option<&'a str>,
    /// The arguments joined by single spaces.
    pub cmdline: &'a str,
    pub uid: Option<u32>,
}

/// One compiled placement rule.
#[derive(Debug)]
pub struct Matcher {
    comm: Option<Pattern>,
    exe: Option<Pattern>,
    cmdline: Option<Pattern>,
    /// `Some(None)`: a user name that does not exist here, which never matches.
    uid: Option<Option<u32>>,
    pub group: String,
    pub sched: Option<Sched>,
    /// Index of the rule in the policy, for logs.
    pub index: usize,
}

/// All placement rules, in policy order.
#[derive(Debug, Default)]
pub struct Placer {
    matchers: Vec<Matcher>,
}

/// The kernel keeps at most 15 bytes of a task's comm.
pub const COMM_LEN: usize = 15;

// `*` must cross `/` in exe and cmdline globs (`/opt/npu/bin/*` matches a
// nested path too, as a shell user would expect from `case`).
const OPTS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

impl Placer {
    /// Compiles the rules; `resolve_user` maps a user name to its uid.
    /// Patterns were validated at policy load; one that fails here is skipped.
    pub fn new(rules: &[Placement], resolve_user: impl Fn(&str) -> Option<u32>) -> Placer {
        let matchers = rules
            .iter()
            .enumerate()
            .map(|(index, p)| Matcher {
                comm: p.matcher.comm.as_deref().and_then(comm_pattern),
                exe: p.matcher.exe.as_deref().and_then(|s| Pattern::new(s).ok()),
                cmdline: p
                    .matcher
                    .cmdline
                    .as_deref()
                    .and_then(|s| Pattern::new(s).ok()),
                uid: p.matcher.user.as_ref().map(|u| match u {
                    UserSpec::Uid(uid) => Some(*uid),
                    UserSpec::Name(name) => resolve_user(name),
                }),
                group: p.group.clone(),
                sched: p.sched.clone(),
                index,
            })
            .collect();
        Placer { matchers }
    }

    /// The first rule matching the process, if any.
    pub fn find(&self, p: &ProcessFacts) -> Option<&Matcher> {
        self.matchers.iter().find(|m| m.matches(p))
    }

    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }
}

/// A comm pattern longer than the kernel keeps is cut to 15 bytes when it is
/// a plain name (validation already rejects that; this keeps matching sane).
fn comm_pattern(s: &str) -> Option<Pattern> {
    Pattern::new(s).ok()
}

impl Matcher {
    pub fn matches(&self, p: &ProcessFacts) -> bool {
        if let Some(c) = &self.comm {
            if !c.matches_with(p.comm, OPTS) {
                return false;
            }
        }
        if let Some(e) = &self.exe {
            match p.exe {
                Some(exe) if e.matches_with(exe, OPTS) => {}
                _ => return false,
            }
        }
        if let Some(c) = &self.cmdline {
            if !c.matches_with(p.cmdline, OPTS) {
                return false;
            }
        }
        if let Some(want) = self.uid {
            if want.is_none() || want != p.uid {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::Match;
    use crate::policy::yaml::Pos;

    fn rule(m: Match, group: &str) -> Placement {
        Placement {
            matcher: m,
            group: group.into(),
            sched: None,
            pos: Pos::default(),
        }
    }

    fn facts<'a>(
        comm: &'a str,
        exe: Option<&'a str>,
        cmdline: &'a str,
        uid: u32,
    ) -> ProcessFacts<'a> {
        ProcessFacts {
            comm,
            exe,
            cmdline,
            uid: Some(uid),
        }
    }

    #[test]
    fn first_match_wins() {
        let rules = vec![
            rule(
                Match {
                    comm: Some("motion_*".into()),
                    ..Default::default()
                },
                "realtime",
            ),
            rule(
                Match {
                    comm: Some("*".into()),
                    ..Default::default()
                },
                "system",
            ),
        ];
        let p = Placer::new(&rules, |_| None);
        assert_eq!(
            p.find(&facts("motion_control", None, "", 0))
                .map(|m| m.group.as_str()),
            Some("realtime")
        );
        assert_eq!(
            p.find(&facts("sshd", None, "", 0))
                .map(|m| m.group.as_str()),
            Some("system")
        );
    }

    #[test]
    fn exe_glob_crosses_directories_and_needs_an_exe() {
        let rules = vec![rule(
            Match {
                exe: Some("/opt/npu/bin/*".into()),
                ..Default::default()
            },
            "inference",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p
            .find(&facts("x", Some("/opt/npu/bin/infer"), "", 0))
            .is_some());
        assert!(p
            .find(&facts("x", Some("/opt/npu/bin/sub/infer"), "", 0))
            .is_some());
        assert!(p.find(&facts("x", Some("/usr/bin/infer"), "", 0)).is_none());
        // Kernel threads and vanished exe links have no exe.
        assert!(p.find(&facts("x", None, "", 0)).is_none());
    }

    #[test]
    fn all_keys_must_match_including_user() {
        let rules = vec![rule(
            Match {
                cmdline: Some("*camera_pipeline*".into()),
                user: Some(UserSpec::Name("vision".into())),
                ..Default::default()
            },
            "vision",
        )];
        let p = Placer::new(&rules, |n| (n == "vision").then_some(1001));
        assert!(p
            .find(&facts(
                "python3",
                None,
                "python3 /opt/camera_pipeline.py",
                1001
            ))
            .is_some());
        assert!(p
            .find(&facts(
                "python3",
                None,
                "python3 /opt/camera_pipeline.py",
                0
            ))
            .is_none());
        assert!(p
            .find(&facts("python3", None, "python3 other.py", 1001))
            .is_none());
    }

    #[test]
    fn unknown_user_never_matches() {
        let rules = vec![rule(
            Match {
                user: Some(UserSpec::Name("ghost".into())),
                ..Default::default()
            },
            "g",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p.find(&facts("a", None, "", 0)).is_none());
    }

    #[test]
    fn comm_exact_and_truncated_names() {
        // The kernel shows `camera_pipeline_main` as `camera_pipelin` + `e` (15 bytes).
        let rules = vec![rule(
            Match {
                comm: Some("camera_pipeline".into()),
                ..Default::default()
            },
            "v",
        )];
        let p = Placer::new(&rules, |_| None);
        assert!(p.find(&facts("camera_pipeline", None, "", 0)).is_some());
        assert!(p.find(&facts("camera_pipelin", None, "", 0)).is_none());
    }
}
