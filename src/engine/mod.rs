//! Pure, deterministic decisions: what a knob should hold, whether the kernel
//! already holds it, which group a process belongs in. No I/O here.

pub mod normalize;
pub mod placement;
pub mod presence;

pub mod claims;
pub mod condition;
pub mod knobs;
pub mod rule_state;
pub mod stall;
pub mod supervisor;
