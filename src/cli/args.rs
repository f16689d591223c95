//! The subcommands and their arguments, as clap parses them (their doc
//! comments are `--help`'s text and the manual's).

use super::{ClientArgs, RootArg, DEFAULT_POLICY};
#[cfg(feature = "report")]
use super::{ReplayArgs, ReportArgs, SoakArgs};
use clap::Subcommand;
use std::path::PathBuf;

/// The daemon's arguments: `cgwarden run` and `cgwardend` take the same.
#[derive(clap::Args)]
pub(super) struct RunArgs {
    #[arg(default_value = DEFAULT_POLICY)]
    pub(super) policy: PathBuf,
    #[command(flatten)]
    pub(super) root: RootArg,
    /// Run every watcher and rule, log each write it would make, make none.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Override settings.tick (e.g. 100ms), for tests and benchmarks.
    #[arg(long, value_name = "DURATION", value_parser = parse_tick)]
    pub(super) tick: Option<std::time::Duration>,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Validate a policy; no system access. With --root DIR, also judge it
    /// against that board's tree (CPUs, cpufreq/devfreq ranges, compressors).
    Check {
        #[arg(default_value = DEFAULT_POLICY)]
        policy: PathBuf,
        #[command(flatten)]
        root: RootArg,
        /// Check the base with this `targets:` entry merged over it (without it: the base and
        /// every target; with --root: the target the board names).
        #[arg(long, value_name = "NAME")]
        target: Option<String>,
    },
    /// Print every write `apply` would make; change nothing.
    Plan {
        #[arg(default_value = DEFAULT_POLICY)]
        policy: PathBuf,
        #[command(flatten)]
        root: RootArg,
    },
    /// Converge once (hierarchy, baseline knobs, placement scan), then exit.
    Apply {
        #[arg(default_value = DEFAULT_POLICY)]
        policy: PathBuf,
        #[command(flatten)]
        root: RootArg,
    },
    /// The supervisor daemon: converge, then watch pressure and apply the rules.
    Run(RunArgs),
    /// Restore every knob to the value it had before cgwarden first wrote it.
    Reset {
        /// The policy names state_dir and cgroup_root; defaults apply if it is absent.
        /// Positional as for plan/apply/run/doctor.
        #[arg(value_name = "POLICY")]
        policy: Option<PathBuf>,
        /// The same as the POLICY argument (the older spelling).
        #[arg(long = "policy", value_name = "FILE", conflicts_with = "policy")]
        policy_opt: Option<PathBuf>,
        /// A damaged journal: restore only its lines that can be trusted and set the
        /// file aside as originals.damaged-TIME (docs/journal-recovery.md).
        #[arg(long)]
        salvage: bool,
        #[command(flatten)]
        root: RootArg,
    },
    /// Check the kernel's boot parameters and build against what the policy needs
    /// (isolcpus, nohz_full, rcu_nocbs, irqaffinity, PREEMPT_RT, RT_GROUP_SCHED);
    /// one line per finding with its fix; exit 3 when something needed is missing.
    Doctor {
        #[arg(default_value = DEFAULT_POLICY)]
        policy: PathBuf,
        #[command(flatten)]
        root: RootArg,
    },
    /// Copy, read-only, the files cgwarden reads from this board into DIR, a tree
    /// `--root DIR` takes: plan and doctor on a laptop say what they say on the board.
    Capture {
        /// A new or empty directory (anything else is a usage error, exit 2).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Also copy /proc/PID (comm, exe, cmdline, status, stat, cgroup) and
        /// /etc/passwd, /etc/group: command lines may hold secrets.
        #[arg(long)]
        processes: bool,
        /// Copy from this tree instead of the board's / (a fake tree, another capture).
        #[command(flatten)]
        root: RootArg,
    },
    /// Ask the running daemon what it is doing: groups, rules, claims, recent writes.
    Status {
        /// The whole reply as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Hold knobs at values through the daemon; prints the boost's handle.
    Boost {
        /// KNOB=VALUE pairs from the closed knob set, e.g. cpufreq.policy4.min=1.8GHz.
        #[arg(required_unless_present = "caps", value_name = "KNOB=VALUE")]
        knobs: Vec<String>,
        /// Hold a ceiling that beats every raise on a ceiling-type knob,
        /// e.g. --cap cpufreq.policy7.max=1.8GHz (repeatable).
        #[arg(long = "cap", value_name = "KNOB=VALUE")]
        caps: Vec<String>,
        /// How long the boost lasts (required unless root); with CMD, at most this long.
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
        /// Why, shown in status and the log.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
        /// Run CMD and hold the boost exactly while it runs.
        #[arg(last = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// End a boost early.
    Release {
        handle: i64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Re-read the policy (as SIGHUP does) and print the difference.
    Reload {
        /// Print the difference; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// With --dry-run: preview this file (an edited copy) against the
        /// policy in force, before it replaces the watched file.
        #[arg(value_name = "CANDIDATE", requires = "dry_run")]
        candidate: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Compare every managed knob with what it should hold; exit 1 on drift.
    Verify {
        /// The whole reply as JSON (every knob: expected, actual, drift, last writer).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The post-update check for OTA frameworks: exit 0 when the daemon runs the policy on disk with no failed reload, drift or failed write since it was loaded; 1 with the reasons otherwise.
    Health {
        /// The whole reply as JSON (healthy, reasons, hashes, since).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Follow the daemon's events: rules, writes, claims, reloads; ends (exit 0) when the daemon stops.
    Events {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Report KPI samples to the daemon (docs/kpi.md): `cgwarden kpi fps 29.8 30.1`,
    /// `cgwarden kpi loop_latency 2.1ms`, or a cyclictest histogram.
    Kpi {
        /// The KPI's name ([A-Za-z0-9_.-], at most 64 characters); with
        /// --cyclictest, default `cyclictest`.
        #[arg(value_name = "NAME", required_unless_present = "cyclictest")]
        name: Option<String>,
        /// Samples: plain numbers (`29.8`) or times (`2.5ms`, `180us`).
        #[arg(value_name = "VALUE", required_unless_present = "cyclictest")]
        values: Vec<String>,
        /// Ingest cyclictest's `-h`/`--histfile` output (every thread's
        /// latencies, overflows at the thread's max) instead of VALUEs.
        #[arg(long, value_name = "FILE", conflicts_with = "values")]
        cyclictest: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The daemon on a fake board for twenty seconds of a device's life, narrated; no root needed.
    #[cfg(feature = "demo")]
    Demo {
        /// Keep the board, policy and daemon log in DIR (a new or empty directory; anything else is a usage error, exit 2).
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
    },
    /// Print shell completions (bash, zsh, fish) to stdout.
    #[cfg(feature = "docgen")]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (cgwarden.8, cgwarden-SUB.8, cgwarden-policy.5) into DIR.
    #[cfg(feature = "docgen")]
    #[command(hide = true)]
    Manpages {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Live terminal view of groups, pressure, rules, claims and actions (keys: docs/top.md).
    #[cfg(feature = "top")]
    Top {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Stability report from the flight recorder; exit 1 when a criterion fails (docs/report.md).
    #[cfg(feature = "report")]
    Report(ReportArgs),
    /// What would POLICY have done? The engine over a recording (docs/replay.md).
    #[cfg(feature = "report")]
    Replay(ReplayArgs),
    /// The validation soak beside the daemon: load matrix, progress, then the report; resumable (docs/soak.md).
    #[cfg(feature = "report")]
    Soak(SoakArgs),
    /// Print this message or the help of the given command.
    Help {
        /// The command to describe.
        command: Option<String>,
    },
}

/// `--tick`: at least 10 ms, as `settings.tick` (0 once reached a
/// zero-period timer, which panics).
fn parse_tick(s: &str) -> Result<std::time::Duration, String> {
    let d = crate::policy::decode::parse_duration(s).map_err(|e| e.to_string())?;
    if d < std::time::Duration::from_millis(10) {
        return Err("the tick must be at least 10ms".to_string());
    }
    Ok(d)
}
