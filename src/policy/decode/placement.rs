//! `hooks:` and `placement:`: hooks, placement rules, their matchers and
//! scheduling, and the kernel-thread/IRQ rule lists.

use super::tuning;
use super::{name_problem, truncate_bytes, valid_name, Decoder, Fields};
use crate::policy::diag::hint;
use crate::policy::model::*;
use crate::policy::yaml::{Key, Node, Value};
use crate::units::CpuList;
use std::collections::BTreeMap;
use std::time::Duration;

impl<'a> Decoder<'a> {
    pub(super) fn hook(&mut self, key: &Key, node: &Node) -> Option<Hook> {
        if !valid_name(&key.name) {
            self.err(key.pos, name_problem("hook", &key.name));
        }
        let what = format!("hook `{}`", key.name);
        let f = self.fields(node, &what, &["exec", "timeout", "min_interval", "user"])?;
        let mut exec = Vec::new();
        match f.get("exec") {
            None => self.err(key.pos, format!("{what} needs `exec: [program, args…]`")),
            Some(n) => {
                for item in self.seq(n, &format!("{what}.exec")) {
                    if let Some(t) = self.text(item, &format!("{what}.exec item")) {
                        exec.push(t);
                    }
                }
                if exec.is_empty() && matches!(n.value, Value::Seq(_) | Value::Null) {
                    self.err(n.pos, format!("{what}.exec must name a program"));
                } else if let Some(prog) = exec.first() {
                    if !prog.starts_with('/') {
                        let at = match &n.value {
                            Value::Seq(items) => items.first().map(|i| i.pos).unwrap_or(n.pos),
                            _ => n.pos,
                        };
                        self.err(at, format!("{what}.exec program `{prog}` must be an absolute path (hooks run without a shell or PATH search)"));
                    }
                }
            }
        }
        let timeout = f
            .get("timeout")
            .and_then(|n| self.duration(n, &format!("{what}.timeout")))
            .unwrap_or(Duration::from_secs(10));
        let min_interval = f
            .get("min_interval")
            .and_then(|n| self.duration(n, &format!("{what}.min_interval")));
        let user = self.opt_text(&f, "user", &format!("{what}.user"));
        Some(Hook {
            name: key.name.clone(),
            exec,
            timeout,
            min_interval,
            user,
        })
    }

    pub(super) fn placement(
        &mut self,
        node: &Node,
        groups: &[&str],
        leaf: &BTreeMap<&str, bool>,
    ) -> Option<Placement> {
        let allowed: Vec<&str> = ["match", "group", "sched"]
            .into_iter()
            .chain(tuning::PLACEMENT_FIELDS.iter().copied())
            .collect();
        let f = self.fields(node, "placement entry", &allowed)?;
        let mut matcher = Match::default();
        match f.get("match") {
            None => self.err(node.pos, "placement entry needs `match:`"),
            Some(m) => {
                if let Some(mf) =
                    self.fields(m, "placement match", &["comm", "exe", "cmdline", "user"])
                {
                    matcher.comm = self.glob_field(&mf, "comm");
                    matcher.exe = self.glob_field(&mf, "exe");
                    matcher.cmdline = self.glob_field(&mf, "cmdline");
                    if let Some(u) = mf.get("user") {
                        matcher.user = match &u.value {
                            Value::Int(i) => u32::try_from(*i).ok().map(UserSpec::Uid),
                            _ => self.text(u, "match.user").map(|s| match s.parse::<u32>() {
                                Ok(uid) => UserSpec::Uid(uid),
                                Err(_) => UserSpec::Name(s),
                            }),
                        };
                        if matcher.user.is_none() {
                            self.err(u.pos, "match.user must be a user name or a uid");
                        }
                    }
                    if let (Some(comm), Some(n)) = (&matcher.comm, mf.get("comm")) {
                        let is_glob = comm.contains(['*', '?', '[']);
                        if !is_glob && comm.len() > 15 {
                            self.err(
                                n.pos,
                                format!(
                                    "match.comm `{comm}` is longer than 15 bytes; the kernel truncates comm, so it would never match (use `{}` or match `exe`)",
                                    truncate_bytes(comm, 15)
                                ),
                            );
                        }
                    }
                    if mf.entries.is_empty() {
                        self.err(
                            m.pos,
                            "placement match needs at least one of comm, exe, cmdline, user",
                        );
                    }
                }
            }
        }
        let group = match f.get("group") {
            None => {
                self.err(node.pos, "placement entry needs `group:`");
                String::new()
            }
            Some(n) => {
                let name = self.text(n, "placement group").unwrap_or_default();
                if !groups.contains(&name.as_str()) {
                    let h = hint(&name, groups.iter().copied());
                    self.err(n.pos, format!("placement names unknown group `{name}`{h}"));
                } else if leaf.get(name.as_str()) == Some(&false) {
                    self.err(n.pos, format!("placement group `{name}` has children; processes can only be placed in leaf groups (the kernel forbids processes in a group whose controllers are handed to children)"));
                }
                name
            }
        };
        let sched = f.get("sched").and_then(|n| self.sched(n));
        let tuning = self.tuning(&f);
        Some(Placement {
            matcher,
            group,
            sched,
            pos: node.pos,
            tuning,
        })
    }

    fn glob_field(&mut self, f: &Fields, name: &str) -> Option<String> {
        let n = f.get(name)?;
        let text = self.text(n, &format!("match.{name}"))?;
        if text.is_empty() {
            self.err(n.pos, format!("match.{name} must not be empty"));
            return None;
        }
        if let Err(e) = glob::Pattern::new(&text) {
            self.err(
                n.pos,
                format!("match.{name} `{text}` is not a valid glob: {e}"),
            );
            return None;
        }
        Some(text)
    }

    pub(super) fn sched(&mut self, node: &Node) -> Option<Sched> {
        let f = self.fields(node, "sched", &["policy", "priority", "nice", "deadline"])?;
        let policy = match f.get("policy") {
            None => {
                self.err(
                    node.pos,
                    "sched needs `policy:` (other, batch, idle, fifo, rr or deadline)",
                );
                return None;
            }
            Some(n) => {
                let text = self.text(n, "sched.policy")?;
                let names = ["other", "batch", "idle", "fifo", "rr", "deadline"];
                let p = match text.as_str() {
                    "other" => SchedPolicy::Other,
                    "batch" => SchedPolicy::Batch,
                    "idle" => SchedPolicy::Idle,
                    "fifo" => SchedPolicy::Fifo,
                    "rr" => SchedPolicy::Rr,
                    "deadline" => SchedPolicy::Deadline,
                    other => {
                        let h = policy_hint(other, &names);
                        self.err(
                            n.pos,
                            format!("unknown sched.policy `{other}`: expected other, batch, idle, fifo, rr or deadline{h}"),
                        );
                        return None;
                    }
                };
                (p, n.pos)
            }
        };
        let (policy, ppos) = policy;
        let priority = f
            .get("priority")
            .and_then(|n| self.int(n, "sched.priority", 1, 99))
            .map(|v| v as u32);
        let nice = f
            .get("nice")
            .and_then(|n| self.int(n, "sched.nice", -20, 19))
            .map(|v| v as i32);
        let realtime = matches!(policy, SchedPolicy::Fifo | SchedPolicy::Rr);
        if realtime && priority.is_none() && f.get("priority").is_none() {
            self.err(
                ppos,
                format!("sched.policy {} needs `priority:` (1-99)", policy.as_str()),
            );
        }
        if !realtime {
            if let Some(k) = f.key("priority") {
                self.err(
                    k.pos,
                    format!(
                        "sched.priority applies to fifo and rr only, not {}",
                        policy.as_str()
                    ),
                );
            }
        }
        if realtime || policy == SchedPolicy::Deadline {
            if let Some(k) = f.key("nice") {
                self.err(
                    k.pos,
                    format!("sched.nice does not apply to {}", policy.as_str()),
                );
            }
        }
        let mut deadline = None;
        match (policy, f.get("deadline")) {
            (SchedPolicy::Deadline, None) => self.err(
                ppos,
                "sched.policy deadline needs `deadline: { runtime, deadline, period }`",
            ),
            (SchedPolicy::Deadline, Some(n)) => {
                if let Some(d) =
                    self.fields(n, "sched.deadline", &["runtime", "deadline", "period"])
                {
                    let get = |s: &mut Self, k: &str| match d.get(k) {
                        Some(v) => s.duration(v, &format!("sched.deadline.{k}")),
                        None => {
                            s.err(n.pos, format!("sched.deadline needs `{k}:`"));
                            None
                        }
                    };
                    let (r, dl, p) = (
                        get(self, "runtime"),
                        get(self, "deadline"),
                        get(self, "period"),
                    );
                    if let (Some(runtime), Some(dl), Some(period)) = (r, dl, p) {
                        if !(runtime <= dl && dl <= period) || runtime.is_zero() {
                            self.err(
                                n.pos,
                                "sched.deadline needs 0 < runtime <= deadline <= period",
                            );
                        } else {
                            deadline = Some(DeadlineParams {
                                runtime,
                                deadline: dl,
                                period,
                            });
                        }
                    }
                }
            }
            (_, Some(_)) => {
                if let Some(k) = f.key("deadline") {
                    self.err(k.pos, "sched.deadline applies to policy deadline only");
                }
            }
            (_, None) => {}
        }
        Some(Sched {
            policy,
            priority,
            nice,
            deadline,
        })
    }

    /// `system.irqs` / `system.kthreads`: a list of
    /// `{ name: GLOB, cpus: LIST, sched: {policy, priority} }`; each entry
    /// sets `cpus`, `sched` or both; sched is fifo/rr with a priority, or
    /// other (no deadline, no nice: kernel threads run at nice 0).
    pub(super) fn thread_rules(&mut self, node: &Node, what: &str) -> Vec<KthreadRule> {
        let mut out = Vec::new();
        for item in self.seq(node, what) {
            let Some(f) = self.fields(item, &format!("{what} entry"), &["name", "cpus", "sched"])
            else {
                continue;
            };
            let Some(name) = f
                .get("name")
                .and_then(|n| self.text(n, &format!("{what}.name")))
            else {
                self.err(item.pos, format!("{what} entry needs `name:` (a glob)"));
                continue;
            };
            if name.is_empty()
                || name.len() > 64
                || name.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                self.err(
                    item.pos,
                    format!("{what}.name `{name}` must be 1–64 characters without blanks"),
                );
                continue;
            }
            let cpus = f
                .get("cpus")
                .and_then(|n| self.unit(n, &format!("{what}.cpus"), CpuList::parse));
            let sched = f.get("sched").and_then(|n| self.sched(n));
            if let Some(s) = &sched {
                let ok = matches!(
                    s.policy,
                    SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Other
                ) && s.nice.unwrap_or(0) == 0;
                if !ok {
                    self.err(item.pos, format!("{what} `{name}`: sched is fifo/rr with a priority, or other (kernel threads take no nice and no deadline)"));
                    continue;
                }
            }
            if cpus.is_none() && sched.is_none() {
                self.err(
                    item.pos,
                    format!("{what} `{name}` sets nothing: give `cpus:`, `sched:` or both"),
                );
                continue;
            }
            out.push(KthreadRule { name, cpus, sched });
        }
        out
    }
}

/// The hint for a scheduling policy spelt as the kernel's constants or
/// `chrt` print it (`FIFO`, `SCHED_FIFO`, `sched_fifo`): the names are lower
/// case, one spelling each, so these are refused naming the one to write;
/// else the nearest of `names`, or nothing.
pub(super) fn policy_hint(text: &str, names: &[&str]) -> String {
    let lower = text.to_ascii_lowercase();
    let bare = lower.strip_prefix("sched_").unwrap_or(&lower);
    match names.iter().find(|n| **n == bare) {
        Some(n) if lower != text => {
            format!("; policy names are lower case: did you mean `{n}`?")
        }
        Some(n) => format!(", did you mean `{n}`?"),
        None => hint(text, names.iter().copied()),
    }
}
