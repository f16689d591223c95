//! Pure, deterministic decisions: what a knob should hold, whether the kernel
//! already holds it, which group a process belongs in. No I/O here.

pub(crate) mod placement;
pub(crate) mod presence;

pub(crate) mod claims;
pub(crate) mod condition;
pub(crate) mod critical;
pub(crate) mod grants;
pub(crate) mod knobs;
pub(crate) mod resort;
pub(crate) mod rule_state;
pub(crate) mod stall;
pub(crate) mod supervisor;
pub(crate) mod tuning;

/// The maps a loop turn looks up by a policy's names (PSI lines, samples):
/// foldhash instead of std's SipHash, whose keyed rounds cost a lookup
/// 600–700 instructions here. The
/// keys come from the policy, never from outside; foldhash is still seeded
/// per process.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A [`FastMap`]'s set.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
