//! cgwarden: a cgroup v2 workload orchestrator for embedded and industrial Linux.
//!
//! - [`policy`]: the YAML model, units, rule language and validation (pure);
//! - [`kernel`]: the only code that knows kernel paths, all resolved through a [`kernel::Root`];
//! - [`engine`]: pure decisions (value comparison, placement matching);
//! - [`converge`]: the one-shot `plan` / `apply` / `reset`;
//! - [`demo`]: `cgwarden demo`, the narrated run on a fake board;
//! - [`doctor`]: what the policy needs from the kernel's boot and build, checked;
//! - [`exit`]: the command's exit statuses;
//! - [`out`]: standard output that ends quietly on a closed pipe;
//! - [`top`]: `cgwarden top`, the live terminal view (a control-socket client).

pub mod control;
pub mod converge;
pub mod daemon;
pub mod demo;
pub mod doctor;
pub mod engine;
pub mod exit;
pub mod kernel;
pub mod observe;
pub mod out;
pub mod policy;
pub mod top;
