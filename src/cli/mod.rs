//! The `cgwarden` command line: argument parsing, the `--root`
//! check, the state_dir and cgroup-tree locks around `run`/`apply`/`reset`,
//! and the mapping of outcomes to exit statuses ([`crate::exit`]).

use crate::control::client::Command as ClientCommand;
use crate::converge::lock::{StateLock, TreeLock};
use crate::converge::{reset, Converger};
use crate::exit;
use crate::kernel::Root;
use crate::policy;
use anyhow::Context;
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(feature = "docgen")]
mod manual;
#[cfg(feature = "report")]
mod report_args;
#[cfg(feature = "report")]
use report_args::{ReplayArgs, ReportArgs, SoakArgs};

use crate::control::client::DEFAULT_POLICY;

mod args;
use args::Command;
pub(crate) mod daemon;

#[derive(Parser)]
#[command(
    name = "cgwarden",
    version,
    about = "cgroup v2 workload orchestrator for embedded Linux",
    // clap's own `help` subcommand refuses `help --help`; ours is an
    // ordinary subcommand, so every form works.
    disable_help_subcommand = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct RootArg {
    /// Resolve every kernel path (/sys, /proc, /run) under DIR: a fake tree or a copy of a device's files.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

impl RootArg {
    /// The root to resolve kernel paths under. `--root DIR` must exist and
    /// hold `sys/fs/cgroup`, else it is a usage error: a typo must
    /// not make cgwarden create a tree somewhere.
    fn root(&self) -> Result<Root, Exit> {
        let Some(dir) = &self.root else {
            return Ok(Root::real());
        };
        let cg = dir.join("sys/fs/cgroup");
        if !dir.is_dir() {
            let why = if dir.exists() {
                "is a file, not a directory"
            } else {
                "no such directory"
            };
            eprintln!("cgwarden: error: --root {}: {why}", dir.display());
            return Err(Exit(exit::USAGE));
        }
        if !cg.is_dir() {
            eprintln!(
                "cgwarden: error: --root {}: it holds no sys/fs/cgroup directory, so it is not a \
                 device tree",
                dir.display()
            );
            return Err(Exit(exit::USAGE));
        }
        Ok(Root::fake(dir))
    }
}

/// How a client command finds the daemon's control socket.
#[derive(clap::Args)]
struct ClientArgs {
    /// The policy whose state_dir holds the socket.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_POLICY)]
    policy: PathBuf,
    /// The control socket itself (overrides --policy).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Resolve the socket path under DIR (a daemon run with --root DIR).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

impl ClientArgs {
    fn run(&self, cmd: crate::control::client::Command) -> u8 {
        match self.socket() {
            Ok(socket) => crate::control::client::run(&socket, cmd),
            Err(code) => code,
        }
    }

    /// The socket, or the exit status after saying why there is none.
    fn socket(&self) -> Result<PathBuf, u8> {
        crate::control::client::locate(self.socket.as_deref(), &self.policy, self.root.as_deref())
            .map_err(|e| {
                eprintln!("cgwarden: error: {e}");
                exit::USAGE
            })
    }
}

/// An exit status decided on the way, its message already printed.
struct Exit(u8);

/// The locks `run`, `apply` and `reset` hold while they work: state_dir's
/// and the cgroup tree's (docs/operations.md, "One instance"). Fields drop in
/// order: the tree is let go before state_dir, so whoever takes state_dir
/// next finds the tree free.
struct Locks {
    _tree: TreeLock,
    _state: StateLock,
}

/// Takes the state_dir lock for `what` (`run`, `apply`, `reset`), then the
/// lock of the cgroup tree it writes (`cgroup_root` is asked once state_dir
/// is held: `reset` reads it from the journal), or says why not and gives
/// the exit status.
fn lock(
    root: &Root,
    state_dir: &Path,
    what: &str,
    policy: &Path,
    cgroup_root: impl FnOnce() -> PathBuf,
) -> Result<Locks, Exit> {
    let cmd = format!("cgwarden {what} {}", policy.display());
    let refused = |e: crate::converge::lock::LockError| {
        eprintln!("cgwarden: error: {what}: {e}");
        Exit(e.exit_code())
    };
    let state = StateLock::acquire(root, state_dir, &cmd).map_err(refused)?;
    let tree = TreeLock::acquire(root, &cgroup_root(), state_dir, &cmd).map_err(refused)?;
    Ok(Locks {
        _tree: tree,
        _state: state,
    })
}

pub fn main() -> ExitCode {
    init_logging();
    match parse::<Cli>() {
        Ok(cli) => exit_status(run(cli)),
        Err(code) => code,
    }
}

/// The arguments, or the exit status of `--help`, `--version` or a usage
/// error, said on the way.
fn parse<P: Parser>() -> Result<P, ExitCode> {
    P::try_parse().map_err(|e| {
        let code = if e.use_stderr() { 2 } else { 0 };
        let _ = e.print();
        ExitCode::from(code)
    })
}

/// The exit status of a command's outcome, for `cgwarden` and `cgwardend`.
fn exit_status(outcome: anyhow::Result<u8>) -> ExitCode {
    match outcome {
        // A write error other than a closed pipe was said; it is a failure.
        Ok(exit::OK) if crate::out::failed() => ExitCode::from(exit::TEMPFAIL),
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("cgwarden: error: {e:#}");
            // A kernel-layer error says whether it may pass (I/O) or not
            // (damaged journal, refusal); anything else here is a runtime failure.
            let code = match e.downcast_ref::<crate::kernel::Error>() {
                Some(k) => exit::for_kernel_error(k),
                None => exit::TEMPFAIL,
            };
            ExitCode::from(code)
        }
    }
}

/// Human-readable logs on a terminal; under systemd (JOURNAL_STREAM set)
/// structured journald records; plain lines otherwise. CGWARDEN_LOG=debug
/// raises the level; a list of directives (`info,cgwarden::daemon::triggers=debug`)
/// raises it for one module, so a field question costs one module's lines.
fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let var = std::env::var("CGWARDEN_LOG").unwrap_or_default();
    let targets = log_targets(&var);
    let journald =
        if std::env::var_os("JOURNAL_STREAM").is_some() && !std::io::stderr().is_terminal() {
            // Fields as named, upper-cased, without tracing-journald's `F_`
            // prefix: `KNOB=`, and the event records' `MESSAGE_ID=` and
            // `CGWARDEN_*=` (src/daemon/eventlog.rs, docs/operations.md).
            tracing_journald::layer()
                .ok()
                .map(|l| l.with_field_prefix(None))
        } else {
            None
        };
    let registry = tracing_subscriber::registry().with(targets);
    let _ = match journald {
        Some(j) => registry.with(j).try_init(),
        // Plain lines to a file or pipe, the level in colour on a terminal;
        // formatted with a fraction of the default's work (src/logline.rs).
        None => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .event_format(crate::logline::Line::new(std::io::stderr().is_terminal())),
            )
            .try_init(),
    };
}

/// The log filter `CGWARDEN_LOG` asks for: one level (`debug`, `trace`,
/// `warn`; anything else is info) or tracing directives
/// (`info,cgwarden::daemon::triggers=debug`). zlink's server warns on every
/// failed write to a client, which is mostly a client that went away; the
/// control socket's own layer logs what matters (src/control/server.rs), so
/// below debug only its errors pass, unless a directive names zlink.
fn log_targets(var: &str) -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::Targets;
    let level = match var {
        "debug" => tracing::Level::DEBUG,
        "trace" => tracing::Level::TRACE,
        "warn" => tracing::Level::WARN,
        _ => tracing::Level::INFO,
    };
    let targets = match var.contains([',', '=']) {
        true => var.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!("cgwarden: CGWARDEN_LOG={var:?}: {e}; logging at info");
            Targets::new().with_default(tracing::Level::INFO)
        }),
        false => Targets::new().with_default(level),
    };
    if targets
        .iter()
        .any(|(target, _)| target.starts_with("zlink"))
    {
        return targets;
    }
    let zlink = if level >= tracing::Level::DEBUG {
        level
    } else {
        tracing::Level::ERROR
    };
    targets.with_target("zlink_core::server", zlink)
}

/// The trust rules: running as root, `apply` and `run` refuse a policy
/// file or hook program that is not root-owned or is group/other-writable
/// (the check a reload makes too: [`crate::converge::trust::refusals`]).
fn refuse_untrusted(path: &Path, p: &policy::Policy, what: &str) -> Result<(), Exit> {
    let refused = crate::converge::trust::refusals(path, p);
    for why in &refused {
        eprintln!("cgwarden: error: {what}: {why}");
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Exit(exit::REFUSED))
    }
}

/// What `apply` and `run` do before any work: the root checked, the policy
/// loaded and trusted, the state_dir lock taken.
fn prepare(
    root: &RootArg,
    policy: &Path,
    what: &str,
) -> Result<(Root, policy::Policy, Locks), Exit> {
    let root = root.root()?;
    let p = load_on(policy, &root).map_err(Exit)?;
    refuse_untrusted(policy, &p, what)?;
    let lock = lock(&root, &p.settings.state_dir, what, policy, || {
        p.settings.cgroup_root.clone()
    })?;
    Ok((root, p, lock))
}

/// [`load`], judged against the board under `root`: a value outside it (a
/// CPU it lacks, a frequency out of its range) is refused with its range.
fn load_on(path: &Path, root: &Root) -> Result<policy::Policy, u8> {
    let board = |p: &policy::Policy| crate::kernel::board::read(root, &p.settings.cgroup_root);
    let p = policy::load_on(path, board).map_err(|d| {
        eprint!("{d}");
        exit::REFUSED
    })?;
    // A board no target names runs the base policy: say so.
    if let Some(w) = p.binding.warning() {
        eprintln!("cgwarden: warning: {w}");
    }
    Ok(p)
}

/// `cgwarden check`: the file alone (the base and every target, cluster
/// names on a notional board), or judged against the board under `--root`
/// (the target it names), or one `--target`.
fn check(path: &Path, root: &RootArg, target: Option<String>) -> u8 {
    use crate::policy::Target;
    let board_root = match &root.root {
        None => None,
        Some(_) => match root.root() {
            Ok(r) => Some(r),
            Err(Exit(code)) => return code,
        },
    };
    let board = |p: &policy::Policy| match &board_root {
        Some(r) => crate::kernel::board::read(r, &p.settings.cgroup_root),
        None => policy::Board::unknown(),
    };
    let choice = target.clone().map_or(Target::Board, Target::Named);
    let file = path.display();
    let p = match policy::load_with(path, board, &choice) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return exit::REFUSED;
        }
    };
    for w in policy::warnings(&p) {
        let (l, c) = (w.pos.line, w.pos.col);
        eprintln!("{file}:{l}:{c}: warning: {}", w.message);
    }
    if let Some(w) = p.binding.warning() {
        eprintln!("cgwarden: warning: {w}");
    }
    crate::outln!("{file}: {}", policy::summary(&p));
    for line in p.binding.lines() {
        crate::outln!("{file}: {line}");
    }
    if let Some(r) = board_root {
        // On a board (or its copy): the processes a placement matches that
        // stay where they are, in a container or a delegated subtree.
        print_kept(&Converger::new(r, &p).plan());
        return exit::OK;
    }
    if target.is_some() {
        return exit::OK;
    }
    // The file alone: every target merged over the base is a policy too.
    let mut code = exit::OK;
    for t in &p.binding.targets {
        match policy::load_with(
            path,
            |_| policy::Board::unknown(),
            &Target::Named(t.clone()),
        ) {
            Ok(tp) => crate::outln!("{file}: target {t}: {}", policy::summary(&tp)),
            Err(d) => {
                eprint!("{d}");
                code = exit::REFUSED;
            }
        }
    }
    code
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Help { command } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            cmd.build();
            let target = match &command {
                None => &mut cmd,
                Some(name) => match cmd.find_subcommand_mut(name) {
                    Some(sub) => sub,
                    None => {
                        eprintln!("cgwarden: error: help: no command `{name}`");
                        return Ok(exit::USAGE);
                    }
                },
            };
            crate::out!("{}", target.render_help());
            Ok(exit::OK)
        }
        #[cfg(feature = "demo")]
        Command::Demo { keep } => Ok(crate::demo::run(keep.as_deref())),
        #[cfg(feature = "docgen")]
        Command::Completions { shell } => {
            use clap::CommandFactory;
            manual::completions(&mut Cli::command(), shell);
            Ok(exit::OK)
        }
        #[cfg(feature = "docgen")]
        Command::Manpages { dir } => {
            use clap::CommandFactory;
            let written = manual::manpages(Cli::command(), &dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            for name in written {
                crate::outln!("{}", dir.join(name).display());
            }
            Ok(exit::OK)
        }
        Command::Status { json, client } => Ok(client.run(ClientCommand::Status { json })),
        Command::Boost {
            mut knobs,
            caps,
            duration,
            reason,
            client,
            cmd,
        } => {
            // A cap travels as the key `cap KNOB` (docs/control.md).
            knobs.extend(
                caps.iter()
                    .map(|c| format!("{}{c}", crate::knobs::CAP_KEY_PREFIX)),
            );
            Ok(client.run(ClientCommand::Boost {
                knobs,
                duration,
                reason,
                cmd,
            }))
        }
        Command::Release { handle, client } => Ok(client.run(ClientCommand::Release { handle })),
        Command::Reload {
            dry_run,
            candidate,
            client,
        } => Ok(client.run(ClientCommand::Reload { dry_run, candidate })),
        Command::Verify { json, client } => Ok(client.run(ClientCommand::Verify { json })),
        Command::Health { json, client } => Ok(client.run(ClientCommand::Health { json })),
        Command::Events { json, client } => Ok(client.run(ClientCommand::Events { json })),
        Command::Kpi {
            name,
            values,
            cyclictest,
            client,
        } => Ok(kpi_command(name, &values, cyclictest.as_deref(), &client)),
        #[cfg(feature = "top")]
        Command::Top { client } => Ok(match client.socket() {
            Ok(socket) => crate::top::run(&socket),
            Err(code) => code,
        }),
        #[cfg(feature = "report")]
        Command::Report(r) => Ok(r.run()),
        #[cfg(feature = "report")]
        Command::Soak(a) => Ok(crate::soak::run(&crate::soak::Options {
            duration: a.duration,
            load: a.load,
            out: a.out,
            policy: a.policy,
            root: a.root,
            progress: a.progress,
        })),
        #[cfg(feature = "report")]
        Command::Replay(r) => Ok(crate::observe::replay::run(
            &crate::observe::replay::Options {
                policy: r.policy,
                recording: r.recording,
                since: r.since,
                sweep: r.sweep,
                json: r.json,
                html: r.html,
            },
        )),
        Command::Check {
            policy,
            root,
            target,
        } => Ok(check(&policy, &root, target)),
        Command::Doctor { policy, root } => {
            let root = match root.root() {
                Ok(r) => r,
                Err(Exit(code)) => return Ok(code),
            };
            match load_on(&policy, &root) {
                Ok(p) => Ok(crate::doctor::command(&root, &p)),
                Err(code) => Ok(code),
            }
        }
        Command::Capture {
            dir,
            processes,
            root,
        } => Ok(match root.root() {
            Ok(src) => capture_command(&src, &dir, processes),
            Err(Exit(code)) => code,
        }),
        Command::Plan { policy, root } => {
            let root = match root.root() {
                Ok(r) => r,
                Err(Exit(code)) => return Ok(code),
            };
            let p = match load_on(&policy, &root) {
                Ok(p) => p,
                Err(code) => return Ok(code),
            };
            for line in p.binding.lines() {
                eprintln!("cgwarden: {line}");
            }
            let conv = Converger::new(root, &p);
            let plan = conv.plan();
            report_missing(&plan);
            let mut changes = 0;
            for step in &plan.steps {
                if conv.skips(step) {
                    crate::outln!("# skipped on a fake root: {step}");
                } else {
                    crate::outln!("{step}");
                    changes += 1;
                }
            }
            print_kept(&plan);
            if plan.no_groups.is_some() {
                // Not the converged system's `0 changes` (docs/cli.md).
                crate::outln!(
                    "no group can be built; {}",
                    crate::show::count(changes, "other change")
                );
                return Ok(exit::MISSING);
            }
            crate::outln!("{}", crate::show::count(changes, "change"));
            Ok(if conv.refuse_missing(&plan) {
                exit::MISSING
            } else {
                exit::OK
            })
        }
        Command::Apply { policy, root } => {
            // The lock is held until apply returns: the plan is read and
            // carried out alone.
            let (root, p, _lock) = match prepare(&root, &policy, "apply") {
                Ok(t) => t,
                Err(Exit(code)) => return Ok(code),
            };
            let conv = Converger::new(root, &p);
            let plan = conv.plan();
            report_missing(&plan);
            if plan.no_groups.is_some() {
                conv.check_journal().context("the originals journal")?;
                eprintln!("cgwarden: no group can be built; nothing was written");
                return Ok(exit::MISSING);
            }
            if conv.refuse_missing(&plan) {
                eprintln!("cgwarden: on_missing: fail: the system lacks what the policy needs; nothing was written");
                return Ok(exit::MISSING);
            }
            let done = conv
                .apply(&plan, &mut |line| crate::outln!("{line}"))
                .context("the originals journal")?;
            for m in &done.missing {
                eprintln!("cgwarden: missing: {m}");
            }
            if done.refused_missing {
                eprintln!("cgwarden: on_missing: fail: the system lacks what the policy needs; nothing was written");
                return Ok(exit::MISSING);
            }
            for f in &done.failures {
                eprintln!("cgwarden: error: {f}");
            }
            print_kept(&plan);
            crate::outln!("{}", crate::show::count(done.changes, "change"));
            Ok(if done.failures.is_empty() {
                exit::OK
            } else {
                exit::REFUSED
            })
        }
        Command::Run(args) => Ok(daemon::run(args)),
        Command::Reset {
            policy,
            policy_opt,
            salvage,
            root,
        } => {
            let policy = policy
                .or(policy_opt)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_POLICY));
            let root = match root.root() {
                Ok(r) => r,
                Err(Exit(code)) => return Ok(code),
            };
            // reset must work even when the policy has since become invalid or
            // was removed: fall back to the default locations then.
            let settings = match policy::load(&policy) {
                Ok(p) => p.settings,
                Err(d) => {
                    if policy.exists() {
                        eprint!("{d}");
                        eprintln!("cgwarden: warning: using default state_dir and cgroup_root");
                    }
                    policy::model::Settings::default()
                }
            };
            // The tree reset writes is the one its journal records.
            let tree =
                || reset::journal_cgroup_root(&root, &settings.state_dir, &settings.cgroup_root);
            let _lock = match lock(&root, &settings.state_dir, "reset", &policy, tree) {
                Ok(l) => l,
                Err(Exit(code)) => return Ok(code),
            };
            // The sockets a killed daemon left: the lock says none serves them.
            crate::daemon::remove_sockets(&root.host_path(&settings.state_dir));
            let undo = if salvage {
                reset::salvage
            } else {
                reset::reset
            };
            let rep = undo(&root, &settings.state_dir, &settings.cgroup_root)
                .context("cannot use the originals journal")?;
            for m in rep.salvage_messages() {
                eprintln!("cgwarden: {m}");
            }
            for w in &rep.warnings {
                eprintln!("cgwarden: warning: {w}");
            }
            if !rep.had_journal && rep.salvaged.is_some() {
                crate::outln!("nothing restored: no line of the damaged journal can be trusted");
                return Ok(exit::OK);
            }
            if !rep.had_journal {
                crate::outln!(
                    "nothing to reset: no journal at {}",
                    root.host_path(&settings.state_dir.join("originals"))
                        .display()
                );
                return Ok(exit::OK);
            }
            if Root::normalize(&rep.cgroup_root) != Root::normalize(&settings.cgroup_root) {
                eprintln!(
                    "cgwarden: note: using cgroup_root {} recorded in the journal (the policy names {})",
                    rep.cgroup_root.display(),
                    settings.cgroup_root.display()
                );
            }
            for l in &rep.lines {
                crate::outln!("{l}");
            }
            for f in &rep.failures {
                eprintln!("cgwarden: error: could not restore: {f}");
            }
            crate::outln!("{}", rep.summary());
            if rep.failures.is_empty() {
                crate::outln!("reset complete; journal removed");
                Ok(exit::OK)
            } else {
                eprintln!(
                    "cgwarden: reset incomplete; the journal is kept so reset can be run again"
                );
                Ok(exit::REFUSED)
            }
        }
    }
}

/// The processes a placement matches and leaves in their container's (or
/// delegated manager's) cgroup: notes, marked `#` like the other lines that
/// are not changes.
fn print_kept(plan: &crate::converge::Plan) {
    for k in &plan.kept {
        crate::outln!("# left alone: {k}");
    }
}

/// `cgwarden capture`: the copy, then what it holds and what it left out.
fn capture_command(src: &Root, dir: &Path, processes: bool) -> u8 {
    use crate::kernel::capture::{capture, Refused};
    let s = match capture(src, dir, processes) {
        Ok(s) => s,
        Err(Refused::Usage(why)) => {
            eprintln!("cgwarden: error: capture: {why}");
            return exit::USAGE;
        }
        Err(Refused::Failed(e)) => {
            eprintln!("cgwarden: error: capture: {e}");
            return exit::for_kernel_error(&e);
        }
    };
    for p in &s.unreadable {
        eprintln!("cgwarden: note: capture: could not read {}", p.display());
    }
    crate::outln!("{}", s.line(dir));
    exit::OK
}

fn report_missing(plan: &crate::converge::Plan) {
    for m in &plan.missing {
        eprintln!("cgwarden: missing: {m}");
    }
    for w in &plan.warnings {
        eprintln!("cgwarden: warning: {w}");
    }
}

/// `cgwarden kpi`: the values or the cyclictest file, checked
/// here, sent by `RecordKpi`.
fn kpi_command(
    name: Option<String>,
    values: &[String],
    cyclictest: Option<&std::path::Path>,
    client: &ClientArgs,
) -> u8 {
    use crate::observe::kpi;
    let parsed = match cyclictest {
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| format!("{}: {e}", f.display()))
            .and_then(|t| kpi::parse::cyclictest(&t).map_err(|e| format!("{}: {e}", f.display())))
            .map(|c| {
                (
                    name.unwrap_or_else(|| "cyclictest".into()),
                    kpi::Unit::Seconds,
                    c.samples(),
                    f.display().to_string(),
                )
            }),
        None => kpi::parse_values(values).map(|(u, s)| {
            (
                name.unwrap_or_default(),
                u,
                s,
                "the command line".to_string(),
            )
        }),
    };
    let (name, unit, samples, source) = match parsed.and_then(|p| {
        kpi::check_name(&p.0)?;
        Ok(p)
    }) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cgwarden: error: {e}");
            return exit::USAGE;
        }
    };
    client.run(ClientCommand::Kpi {
        name,
        unit: unit.name().to_string(),
        samples,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::log_targets;
    use tracing::Level;

    #[test]
    fn zlinks_write_warnings_pass_only_at_debug_or_when_a_directive_names_zlink() {
        let server = "zlink_core::server";
        assert!(!log_targets("").would_enable(server, &Level::WARN));
        assert!(log_targets("").would_enable(server, &Level::ERROR));
        assert!(log_targets("").would_enable("cgwarden::daemon", &Level::INFO));
        assert!(log_targets("debug").would_enable(server, &Level::DEBUG));
        assert!(!log_targets("info,cgwarden::daemon=debug").would_enable(server, &Level::WARN));
        assert!(log_targets("info,zlink_core::server=debug").would_enable(server, &Level::DEBUG));
        assert!(log_targets("info,zlink_core=warn").would_enable(server, &Level::WARN));
    }

    #[test]
    fn a_directive_list_raises_one_module() {
        let t = log_targets("info,cgwarden::daemon::triggers=debug");
        assert!(t.would_enable("cgwarden::daemon::triggers", &Level::DEBUG));
        assert!(!t.would_enable("cgwarden::daemon::actuator", &Level::DEBUG));
        assert!(log_targets("warn").would_enable("cgwarden", &Level::WARN));
        assert!(!log_targets("warn").would_enable("cgwarden", &Level::INFO));
        // Unparsable directives log at info, zlink's warnings held back.
        assert!(log_targets("x=nolevel").would_enable("cgwarden", &Level::INFO));
        let bad = log_targets("zlink_core=nolevel");
        assert!(!bad.would_enable("zlink_core::server", &Level::WARN));
    }
}
