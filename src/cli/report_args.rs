//! The arguments of `cgwarden report`, `soak` and `replay` (the binary's,
//! apart from main.rs to keep it small).

use crate::control::client::DEFAULT_POLICY;
use crate::{exit, policy};
use std::path::PathBuf;

/// `cgwarden report`: where the recorder is, the window, the output.
#[cfg(feature = "report")]
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// The window: this long before now (default 72h; e.g. 30m, 7d). With
    /// --compare: the last DURATION of each database's data (default: all).
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub(crate) since: Option<std::time::Duration>,
    /// Write the report here (default: stdout) and print the verdicts.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// JSON instead of HTML (with --compare: instead of the table), for CI;
    /// fields in docs/report.md.
    #[arg(long)]
    pub(crate) json: bool,
    /// html: one self-contained page (the default); text: --compare's table
    /// (its default without --out). `--format json`, the older spelling of
    /// --json, still works.
    #[arg(long, value_name = "FORMAT", value_parser = formats(), conflicts_with = "json")]
    pub(crate) format: Option<String>,
    /// Before/after: two recorder databases or report JSONs, side by side
    /// (exit 1 when B fails a criterion).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub(crate) compare: Option<Vec<PathBuf>>,
    /// The policy naming settings.recorder.dir and report.criteria.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_POLICY)]
    pub(crate) policy: PathBuf,
    /// The recorder database itself (overrides --policy's recorder dir).
    #[arg(long, value_name = "FILE")]
    pub(crate) db: Option<PathBuf>,
    /// Resolve the recorder dir under DIR (a daemon run with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
}

#[cfg(feature = "report")]
impl ReportArgs {
    pub(crate) fn run(self) -> u8 {
        use crate::observe::report;
        // One flag for machine-readable output on every command: `--json`.
        // `--format json` was report's; scripts still use it, so it stays,
        // hidden from the help, with a word on stderr.
        let json = self.json || self.format.as_deref() == Some("json");
        if self.format.as_deref() == Some("json") {
            eprintln!("cgwarden: warning: report: --format json is deprecated; use --json");
        }
        let (db, criteria) = report::locate(self.db.as_deref(), &self.policy, self.root.as_deref());
        if let Some(ab) = self.compare {
            use report::compare::Format as F;
            let Ok([a, b]) = <[PathBuf; 2]>::try_from(ab) else {
                eprintln!("cgwarden: error: report: --compare takes two files, A and B");
                return exit::USAGE;
            };
            return report::compare::run(&report::compare::Options {
                a,
                b,
                since: self.since,
                format: match (json, self.format.as_deref(), &self.out) {
                    (true, _, _) => F::Json,
                    (_, Some("html"), _) | (_, None, Some(_)) => F::Html,
                    _ => F::Text,
                },
                out: self.out,
                criteria,
            });
        }
        report::run(&report::Options {
            db,
            since: self
                .since
                .unwrap_or(std::time::Duration::from_secs(72 * 3600)),
            out: self.out,
            format: match self.format.as_deref() {
                _ if json => report::Format::Json,
                Some("text") => {
                    eprintln!("cgwarden: error: report: --format text is for --compare");
                    return exit::USAGE;
                }
                _ => report::Format::Html,
            },
            criteria,
        })
    }
}

/// `cgwarden soak`: how long, which load, where the results go.
#[cfg(feature = "report")]
#[derive(clap::Args)]
pub(crate) struct SoakArgs {
    /// How long the soak lasts from its first start (e.g. 72h, 3m).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_since)]
    pub(crate) duration: std::time::Duration,
    /// seed: the load matrix of docs/soak.md; none: record and judge only.
    #[arg(long, value_name = "LOAD", default_value = "seed", value_parser = ["seed", "none"])]
    pub(crate) load: String,
    /// soak.json, report.html and report.json go here; the same DIR resumes an unfinished soak.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/cgwarden/soak")]
    pub(crate) out: PathBuf,
    /// A progress line this often.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_since)]
    pub(crate) progress: std::time::Duration,
    /// The daemon's policy (its socket, settings.recorder, report.criteria).
    #[arg(long, value_name = "FILE", default_value = DEFAULT_POLICY)]
    pub(crate) policy: PathBuf,
    /// Resolve the socket and recorder under DIR (a daemon run with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
}

/// `cgwarden replay`: a policy over a recording's input tape.
#[cfg(feature = "report")]
#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    /// The policy to replay (not necessarily the one recorded).
    #[arg(value_name = "POLICY")]
    pub(crate) policy: PathBuf,
    /// The flight recorder database (recorder.db).
    #[arg(long, value_name = "DB")]
    pub(crate) recording: PathBuf,
    /// Only the last DURATION of the recording (before its last evaluation).
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub(crate) since: Option<std::time::Duration>,
    /// Replay once per value: RULE.threshold|RULE.METRIC|RULE.for|RULE.hold=LO..HI/STEP.
    #[arg(long, value_name = "RULE.THRESHOLD=LO..HI/STEP")]
    pub(crate) sweep: Option<String>,
    /// JSON instead of text (fields in docs/replay.md).
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write one self-contained HTML page: each rule's inputs charted, firings and writes marked.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
}

/// `--format`'s values: `json` is accepted and hidden (`--json` replaced it).
#[cfg(feature = "report")]
fn formats() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("html"),
        PossibleValue::new("text"),
        PossibleValue::new("json").hide(true),
    ])
}

#[cfg(feature = "report")]
fn parse_since(s: &str) -> Result<std::time::Duration, String> {
    let d = policy::decode::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("the window must be longer than 0".to_string());
    }
    Ok(d)
}
