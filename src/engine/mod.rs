//! Pure, deterministic decisions: what a knob should hold, whether the kernel
//! already holds it, which group a process belongs in. No I/O here.

pub mod placement;
pub(crate) mod presence;

pub(crate) mod claims;
pub mod condition;
pub(crate) mod critical;
// Used by the control socket (SPEC §5), which is wired in separately; until
// then only the tests call it.
pub(crate) mod grants;
pub(crate) mod knobs;
pub(crate) mod resort;
pub(crate) mod rule_state;
pub(crate) mod stall;
pub mod supervisor;
pub(crate) mod tuning;
