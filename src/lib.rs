//! cgwarden: a cgroup v2 workload orchestrator for embedded and industrial Linux.
//!
//! The crate is one program: its modules are private and its items
//! `pub(crate)` or narrower, so the compiler reports code that nothing calls.
//! Only this facade and what its users call on the types it exports are
//! `pub` (`#![warn(unreachable_pub)]` flags a new `pub` nothing outside can
//! reach). The facade is what the crate's outside users reach, and nothing
//! else:
//!
//! - [`main`]: the `cgwarden` command (`src/main.rs`);
//! - [`testing`]: the fake tree and the few pieces integration tests and
//!   examples drive directly;
//! - [`bench`]: the engine, sampler and readers the benchmarks time;
//! - [`fuzzing`]: one function per fuzz target (`fuzz/`).
//!
//! None of these is an API: the last three are hidden from the docs.
//!
//! The modules:
//!
//! - `policy`: the YAML model, units, rule language and validation (pure);
//! - `kernel`: the only code that knows kernel paths, all resolved through a `kernel::Root`;
//! - `knobs`: the knob registry: one module per knob family (name, file, format, merge, range,
//!   journal pattern, fake default, doc line); everything else iterates it;
//! - `units`: value units (sizes, durations, frequencies, CPU lists), a leaf shared by all;
//! - `engine`: pure decisions (value comparison, placement matching);
//! - `converge`: the one-shot `plan` / `apply` / `reset`;
//! - `daemon`: `cgwarden run`, components wired by an event loop;
//! - `control`, `observe`: the control socket and its clients; metrics, recorder, report, replay;
//! - `cli`: the command line (argument parsing, locks, exit statuses);
//! - `demo`: `cgwarden demo`, the narrated run on a fake board;
//! - `doctor`: what the policy needs from the kernel's boot and build, checked;
//! - `exit`: the command's exit statuses;
//! - `out`: standard output that ends quietly on a closed pipe;
//! - `show`: times, hashes and counts as people read them (`1 change`, `2 changes`);
//! - `logline`: the daemon's log line on standard error when no terminal or journald takes it;
//! - `soak`: `cgwarden soak`, the load matrix beside the daemon, judged by the report;
//! - `top`: `cgwarden top`, the live terminal view (a control-socket client).

#![warn(unreachable_pub)]

mod cli;
mod control;
mod converge;
mod daemon;
#[cfg(feature = "demo")]
mod demo;
mod doctor;
mod engine;
mod exit;
mod kernel;
mod knobs;
mod logline;
mod observe;
mod out;
use out::{out, outln};
mod policy;
mod show;
#[cfg(feature = "report")]
mod soak; // `cgwarden soak`, the seed's validation run
mod stats;
#[cfg(feature = "top")]
mod top;
mod units;

// Each re-export names the item where it is defined, not a `pub use` on the
// way: `unreachable_pub` would make that one crate-private.

/// The `cgwarden` command: parses the arguments, runs the subcommand and
/// maps its outcome to an exit status.
pub use cli::main;

/// `cgwardend`: the supervisor daemon alone, with `cgwarden run`'s arguments.
pub use cli::daemon::main as daemon_main;

/// The fuzz targets' bodies (`fuzz/fuzz_targets/`, `tests/fuzz_targets.rs`).
#[doc(hidden)]
pub mod fuzzing;

/// What the integration tests (`tests/`) and `examples/demo_root.rs` use
/// beside the binary: the fake tree they lay out, and the pieces a test
/// drives without a daemon (placement, the `/proc` reader's caps, the
/// recorder's schema, the names a policy may not use). Not an API.
#[doc(hidden)]
pub mod testing {
    pub use crate::engine::placement::{Placer, ProcessFacts};
    pub use crate::kernel::fake_tree::{smaps_rollup_text, FakeProcess, FakeTree};
    pub use crate::kernel::procfs::{read_capped, CMDLINE_MAX};
    pub use crate::kernel::root::Root;
    pub use crate::knobs::reserved_group_names;
    pub use crate::observe::SCHEMA;
    pub use crate::policy::model::{Match, Placement, UserSpec};
}

/// What the benchmarks (`benches/`) time: one supervisor step on synthetic
/// metrics, the sampler and converger on a fake tree, the PSI trigger's
/// wake-up, and the `/proc` readers (`benches/procfs-compare`). Not an API.
#[doc(hidden)]
pub mod bench {
    pub use crate::converge::Converger;
    pub use crate::daemon::actuator::group_paths;
    pub use crate::daemon::sample::{Sampler, View};
    pub use crate::daemon::watch::{spawn_psi_trigger, Wake};
    pub use crate::engine::condition::{sampled_needs, Metrics};
    pub use crate::engine::supervisor::{Effect, Supervisor};
    pub use crate::kernel::cgroupfs::{pid_cgroup, CgroupFs};
    pub use crate::kernel::{procfs, psi_trigger};
    pub use crate::knobs::value::KnobValue;
    pub use crate::knobs::Knob;
    pub use crate::policy::expr::{Avg, MemEvent, Resource, Stall, Target};
    pub use crate::policy::load_bytes;
    pub use crate::policy::model::Policy;
}
