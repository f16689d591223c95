//! The `control:` grants: who may ask for what (subjects, knob patterns).

use super::{describe, valid_account_name, Decoder, Fields};
use crate::policy::model::*;
use crate::policy::yaml::{Key, Node, Value};

impl<'a> Decoder<'a> {
    /// One `control:` entry: exactly one of
    /// `group:`/`user:`/`uid:`, a non-empty `boost:` list of knob patterns
    /// that can each match some knob of this policy, `max_duration`
    /// (default 1h, at most 24h) and `max_boosts` (default 4, 1..=1000).
    pub(super) fn control_grant(&mut self, node: &Node, groups: &[&str]) -> Option<ControlGrant> {
        const WHAT: &str = "control entry";
        let f = self.fields(
            node,
            WHAT,
            &[
                "group",
                "user",
                "uid",
                "boost",
                "cap",
                "max_duration",
                "max_boosts",
            ],
        )?;
        let mut given: Vec<&Key> = ["group", "user", "uid"]
            .iter()
            .filter_map(|k| f.key(k))
            .collect();
        given.sort_by_key(|k| k.pos);
        let subject = match given.as_slice() {
            [] => {
                self.err(
                    node.pos,
                    "control entry needs exactly one of `group:`, `user:` or `uid:` (whom it grants to)",
                );
                None
            }
            [_] => self.control_subject(&f),
            [_, second, ..] => {
                let names: Vec<String> = given.iter().map(|k| format!("`{}:`", k.name)).collect();
                self.err(
                    second.pos,
                    format!(
                        "control entry has {}; give exactly one of `group:`, `user:` or `uid:` (one entry per subject)",
                        names.join(" and ")
                    ),
                );
                None
            }
        };

        // `cap:`: knob patterns this entry may cap, apart from raises.
        let mut cap = Vec::new();
        if let Some(c) = f.get("cap") {
            for item in self.seq(c, "control.cap") {
                if let Some(p) = self.knob_pattern(item, groups) {
                    cap.push(p);
                }
            }
        }
        let mut boost = Vec::new();
        match f.get("boost") {
            None if f.get("cap").is_some() => {}
            None => self.err(
                node.pos,
                "control entry needs `boost:`, a list of knob patterns such as [\"cpufreq.*.min\", \"vision.memory.high\"]",
            ),
            Some(b) => {
                let items = self.seq(b, "control.boost");
                if items.is_empty() && matches!(b.value, Value::Seq(_) | Value::Null) {
                    self.err(
                        b.pos,
                        "control.boost is empty; list the knob patterns this entry may boost (an entry that grants nothing is a mistake)",
                    );
                }
                for item in items {
                    if let Some(p) = self.knob_pattern(item, groups) {
                        boost.push(p);
                    }
                }
            }
        }

        let max_duration = match f.get("max_duration") {
            None => DEFAULT_CONTROL_MAX_DURATION,
            Some(n) => match self.duration(n, "control.max_duration") {
                Some(d) if d.is_zero() => {
                    self.err(n.pos, "control.max_duration must be longer than 0");
                    DEFAULT_CONTROL_MAX_DURATION
                }
                Some(d) if d > MAX_CONTROL_MAX_DURATION => {
                    self.err(
                        n.pos,
                        format!(
                            "control.max_duration {} is longer than 24h, the most a boost may be granted; a change meant to last belongs in the policy",
                            describe(n)
                        ),
                    );
                    DEFAULT_CONTROL_MAX_DURATION
                }
                Some(d) => d,
                None => DEFAULT_CONTROL_MAX_DURATION,
            },
        };
        let max_boosts = f
            .get("max_boosts")
            .and_then(|n| {
                self.int(
                    n,
                    "control.max_boosts",
                    1,
                    i64::from(MAX_CONTROL_MAX_BOOSTS),
                )
            })
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(DEFAULT_CONTROL_MAX_BOOSTS);

        Some(ControlGrant {
            subject: subject?,
            boost,
            cap,
            max_duration,
            max_boosts,
            pos: node.pos,
        })
    }

    /// The subject of a control entry that has exactly one of group/user/uid.
    fn control_subject(&mut self, f: &Fields) -> Option<ControlSubject> {
        if let Some(n) = f.get("uid") {
            // (uid_t)-1 is "no uid"; 0 is root, which needs no grant.
            return match self.int(n, "control.uid", 0, i64::from(u32::MAX - 1)) {
                Some(0) => {
                    self.err(
                        n.pos,
                        "control.uid 0 is root, which may boost every knob without a grant",
                    );
                    None
                }
                Some(i) => u32::try_from(i).ok().map(ControlSubject::Uid),
                None => None,
            };
        }
        let (key, n, make): (&str, &Node, fn(String) -> ControlSubject) =
            match (f.get("user"), f.get("group")) {
                (Some(n), _) => ("user", n, ControlSubject::User),
                (None, Some(n)) => ("group", n, ControlSubject::Group),
                (None, None) => return None,
            };
        let what = format!("control.{key}");
        let name = self.text(n, &what)?;
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            let fix = if key == "user" {
                format!("; for a uid write `uid: {name}`")
            } else {
                "; give the group's name".to_string()
            };
            self.err(
                n.pos,
                format!("{what} `{name}` is a number, not a name{fix}"),
            );
            return None;
        }
        if !valid_account_name(&name) {
            self.err(
                n.pos,
                format!(
                    "{what} `{name}` is not a valid {key} name (letters, digits, `_`, `-`, `.`, at most 32 characters, not starting with `-`)"
                ),
            );
            return None;
        }
        Some(make(name))
    }

    /// One knob pattern of `control.boost`; must be able to match some knob
    /// of the closed set given this policy's groups.
    fn knob_pattern(&mut self, node: &Node, groups: &[&str]) -> Option<String> {
        use crate::policy::pattern;
        let text = self.text(node, "control.boost pattern")?;
        if text.chars().count() > pattern::MAX_PATTERN_LEN {
            self.err(
                node.pos,
                format!(
                    "control.boost pattern is longer than {} characters; no knob name is that long",
                    pattern::MAX_PATTERN_LEN
                ),
            );
            return None;
        }
        if pattern::could_match(&text, groups) {
            return Some(text);
        }
        let why = match pattern::suggestion(&text, groups) {
            Some(s) => format!("; did you mean `{s}`?"),
            None => "; knobs are GROUP.KNOB for this policy's groups, cpufreq.policyN.{min,max,governor}, sysctl.vm.NAME, sysctl.kernel.sched_NAME, sysctl.kernel.timer_migration, zram.zramN.{mem_limit,swap_priority}, latency.cpuN and latency.global (`*` and `?` are the only wildcards)".to_string(),
        };
        self.err(
            node.pos,
            format!("control.boost pattern `{text}`: no knob of the closed set matches{why}"),
        );
        None
    }
}
