//! Who may boost which knobs: the policy's
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
    pub(crate) uid: u32,
    /// Primary gid.
    pub(crate) gid: u32,
    /// Supplementary gids.
    pub(crate) groups: Vec<u32>,
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
    pub(crate) who: Who,
    /// How the policy names the subject (`group vision`, `user alice`,
    /// `uid 1000`), for refusals.
    pub(crate) name: String,
    /// Knob globs (`*`, `?`) over knob names.
    pub(crate) patterns: Vec<String>,
    /// Knob globs this grant may cap (`control.cap`).
    pub(crate) caps: Vec<String>,
    pub(crate) max_duration: Duration,
    pub(crate) max_boosts: u32,
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
            caps: g.cap.clone(),
            max_duration: g.max_duration,
            max_boosts: g.max_boosts,
        });
    }
    (grants, warnings)
}

/// The grants as they apply to caps (`boost --cap`): each grant's `cap:`
/// patterns in place of its `boost:` ones, so [`decide`] judges caps apart
/// from raises.
pub(crate) fn for_caps(grants: &[Grant]) -> Vec<Grant> {
    grants
        .iter()
        .map(|g| Grant {
            patterns: g.caps.clone(),
            ..g.clone()
        })
        .collect()
}

/// What a boost request may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The knobs to boost, in request order, each once.
    pub(crate) allowed: Vec<Knob>,
    /// `(knob as asked, why)` for each knob the caller may not boost.
    pub(crate) rejected: Vec<(String, String)>,
    /// How long the boost lasts; `None`: no deadline (root only).
    pub(crate) duration: Option<Duration>,
}

/// Why a whole boost request is refused; the text names the limit or grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) reason: String,
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
mod tests;
