//! `cgwardend`, the supervisor daemon alone: `cgwarden run`'s arguments and
//! code, in a binary of its own. The daemon locks every page it maps
//! (`settings.daemon.mlock`), so the command line's other commands (`check`,
//! `plan`, `doctor`, the clients, `top`, `report`) would be locked memory it
//! never runs; linked without them it maps and locks about 0.8 MB less, and
//! the packages' units run it (docs/size.md).

use super::args::RunArgs;
use super::{exit_status, init_logging, parse, prepare, Exit};
use std::process::ExitCode;

#[derive(clap::Parser)]
#[command(
    name = "cgwardend",
    version,
    about = "The cgwarden supervisor daemon: `cgwarden run` in a binary of its own"
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

pub fn main() -> ExitCode {
    init_logging();
    match parse::<Cli>() {
        Ok(cli) => exit_status(Ok(run(cli.run))),
        Err(code) => code,
    }
}

/// `cgwarden run` and `cgwardend`: the root checked, the policy loaded and
/// trusted, the locks taken and held until the daemon returns (a reload
/// that moves state_dir keeps the lock where it was taken).
pub(super) fn run(args: RunArgs) -> u8 {
    let RunArgs {
        policy,
        root,
        dry_run,
        tick,
    } = args;
    // The daemon loads the policy again; this load finds state_dir.
    let (root, _, _lock) = match prepare(&root, &policy, "run") {
        Ok(t) => t,
        Err(Exit(code)) => return code,
    };
    crate::daemon::run(crate::daemon::Options {
        policy_path: policy,
        root,
        dry_run,
        tick,
    })
}
