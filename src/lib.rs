//! cgwarden: a cgroup v2 workload orchestrator for embedded and industrial Linux.
//!
//! - [`policy`]: the YAML model, units, rule language and validation (pure);
//! - [`kernel`]: the only code that knows kernel paths, all resolved through a [`kernel::Root`];
//! - [`knobs`]: the knob registry: one module per knob family (name, file, format, merge, range,
//!   journal pattern, fake default, doc line); everything else iterates it;
//! - [`units`]: value units (sizes, durations, frequencies, CPU lists), a leaf shared by all;
//! - [`engine`]: pure decisions (value comparison, placement matching);
//! - [`converge`]: the one-shot `plan` / `apply` / `reset`;
//! - [`demo`]: `cgwarden demo`, the narrated run on a fake board;
//! - [`doctor`]: what the policy needs from the kernel's boot and build, checked;
//! - [`exit`]: the command's exit statuses;
//! - [`out`]: standard output that ends quietly on a closed pipe;
//! - [`show`]: times, hashes and counts as people read them (`1 change`, `2 changes`);
//! - `logline`: the daemon's log line on standard error when no terminal or journald takes it;
//! - `soak`: `cgwarden soak`, the load matrix beside the daemon, judged by the report;
//! - [`top`]: `cgwarden top`, the live terminal view (a control-socket client).

pub mod control;
pub mod converge;
pub mod daemon;
#[cfg(feature = "demo")]
pub mod demo;
pub mod doctor;
pub mod engine;
pub mod exit;
#[doc(hidden)]
pub mod fuzzing;
pub mod kernel;
pub mod knobs;
#[doc(hidden)]
pub mod logline;
pub mod observe;
pub mod out;
pub mod policy;
pub mod show;
#[cfg(feature = "report")]
pub mod soak; // `cgwarden soak`, the seed's validation run
pub(crate) mod stats;
#[cfg(feature = "top")]
pub mod top;
pub(crate) mod units;
