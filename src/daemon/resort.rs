//! The last resorts of a rule's `then:`: `freeze G` / `thaw G`
//! write the group's `cgroup.freeze` (from the event loop: one small write
//! the kernel does not wait on), and `kill in G …` runs on a thread of its
//! own (`cgw-kill`): it reads the group's processes (comm, RSS — /proc
//! reads that can be slow under the very memory pressure that fired the
//! rule), lets [`crate::engine::resort::choose`] pick the victim, pins it
//! with a pidfd, sends SIGTERM, waits `grace` for it to exit, then SIGKILL.
//! Each is an event (`freeze`, `thaw`, `kill`, `kill_refused`: recorder
//! rows, `cgwarden events`) with its reason, and a metric.
//!
//! On a fake root nothing is signalled (its pids are not processes): the
//! choice is made and reported as `not signalled (fake root)`.

use crate::control::wire;
use crate::control::wire::EventKind;
use crate::engine::resort::{self, Candidate};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{procfs, task_attr, Op, Root};
use crate::policy::expr::KillSpec;
use crate::policy::model::Policy;
use crate::stats::LastResortStats;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::broadcast;

/// How long a SIGKILLed process is waited for before the kill is reported
/// as not seen to end.
const KILL_WAIT: Duration = Duration::from_secs(10);

fn now_text() -> String {
    crate::show::rfc3339_millis(SystemTime::now())
}

fn publish(events: &broadcast::Sender<wire::Event>, e: wire::Event) {
    // No receiver (no recorder, nobody following): nothing to tell.
    let _ = events.send(e);
}

/// `freeze G` / `thaw G`: writes `cgroup.freeze`; returns the event.
#[allow(clippy::too_many_arguments)]
pub(crate) fn freeze(
    root: &Root,
    policy: &Policy,
    rule: &str,
    group: &str,
    freeze: bool,
    reason: &str,
    dry_run: bool,
    stats: Option<&LastResortStats>,
    events: &broadcast::Sender<wire::Event>,
) {
    let verb = if freeze { "freeze" } else { "thaw" };
    let Some(g) = policy.group(group) else {
        tracing::error!(rule = %rule, "{verb}: group {group} is not in the policy");
        return;
    };
    let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
    let file = cg.file(&g.path, "cgroup.freeze");
    if dry_run {
        tracing::info!(rule = %rule, "would write {} {} ({verb}, dry run)", file.display(), u8::from(freeze));
        return;
    }
    let (kind, message) = match root.write(&file, if freeze { "1" } else { "0" }) {
        Ok(()) => {
            if freeze {
                if let Some(s) = stats {
                    LastResortStats::bump(&s.freezes, group.to_string());
                }
            }
            tracing::warn!(rule = %rule, group = %group, "{verb} {group}: {reason}");
            let kind = if freeze {
                EventKind::Freeze
            } else {
                EventKind::Thaw
            };
            (kind, format!("{verb} {group}: {reason}"))
        }
        Err(e) => {
            tracing::error!(rule = %rule, "{verb} {group}: {e}");
            let kind = if freeze {
                EventKind::FreezeFailed
            } else {
                EventKind::ThawFailed
            };
            (kind, format!("{verb} {group}: {e}"))
        }
    };
    publish(
        events,
        wire::Event {
            time: now_text(),
            kind: kind.into(),
            rule: Some(rule.to_string()),
            cause: Some(reason.to_string()),
            message: Some(message),
            ..Default::default()
        },
    );
}

/// What the kill thread needs.
pub(crate) struct Kill {
    pub(crate) root: Root,
    pub(crate) rule: String,
    pub(crate) spec: KillSpec,
    pub(crate) reason: String,
    /// The group's and its descendants' cgroup paths (relative to the root).
    pub(crate) paths: Vec<String>,
    pub(crate) cg: CgroupFs,
    pub(crate) critical: Vec<String>,
    pub(crate) stats: Option<Arc<LastResortStats>>,
    pub(crate) events: broadcast::Sender<wire::Event>,
    pub(crate) dry_run: bool,
}

impl Kill {
    /// From the policy in force; `None` when the group is not in it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        root: &Root,
        policy: &Policy,
        rule: &str,
        spec: KillSpec,
        reason: String,
        stats: Option<Arc<LastResortStats>>,
        events: broadcast::Sender<wire::Event>,
        dry_run: bool,
    ) -> Option<Kill> {
        let g = policy.group(&spec.group)?;
        Some(Kill {
            root: root.clone(),
            rule: rule.to_string(),
            paths: g.walk().iter().map(|c| c.path.clone()).collect(),
            cg: CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone()),
            critical: policy.settings.critical.clone(),
            spec,
            reason,
            stats,
            events,
            dry_run,
        })
    }

    /// Runs the kill on `cgw-kill` (one thread per kill; a rule's cooldown
    /// or hold bounds how often).
    pub(crate) fn spawn(self) {
        let r = std::thread::Builder::new()
            .name("cgw-kill".into())
            .stack_size(crate::kernel::residency::STACK)
            .spawn(move || self.run());
        if let Err(e) = r {
            tracing::error!("kill: cannot start its thread: {e}");
        }
    }

    fn candidates(&self) -> Vec<Candidate> {
        let me = std::process::id() as i32;
        let critical = resort::compile(&self.critical);
        let mut out = Vec::new();
        for p in &self.paths {
            for pid in self.cg.procs(p).unwrap_or_default() {
                if pid == me || pid <= 1 {
                    continue;
                }
                let Ok(Some(comm)) = procfs::comm(&self.root, pid) else {
                    continue; // gone
                };
                let rss = procfs::rss_bytes(&self.root, pid)
                    .ok()
                    .flatten()
                    .unwrap_or(0);
                out.push(Candidate {
                    pid,
                    critical: critical.iter().any(|c| c.matches(&comm)),
                    comm,
                    rss,
                });
            }
        }
        out
    }

    fn event(&self, kind: EventKind, message: String) {
        tracing::warn!(rule = %self.rule, "{message}");
        publish(
            &self.events,
            wire::Event {
                time: now_text(),
                kind: kind.into(),
                rule: Some(self.rule.clone()),
                cause: Some(self.reason.clone()),
                message: Some(message),
                ..Default::default()
            },
        );
    }

    fn run(self) {
        let decided = Instant::now();
        let cands = self.candidates();
        let prefer = resort::compile(&self.spec.prefer);
        let avoid = resort::compile(&self.spec.avoid);
        let g = &self.spec.group;
        let Some(v) = resort::choose(&cands, &prefer, &avoid) else {
            self.event(
                EventKind::KillRefused,
                format!(
                    "kill in {g}: no process may be killed ({} in the group, all critical or avoided): {}",
                    cands.len(),
                    self.reason
                ),
            );
            return;
        };
        let who = format!(
            "{} (pid {}, RSS {} KiB, {})",
            v.comm,
            v.pid,
            v.rss / 1024,
            if v.preferred {
                "preferred"
            } else {
                "largest of the rest"
            }
        );
        if self.dry_run || !self.root.supports(Op::ProcConnector) {
            let why = if self.dry_run { "dry run" } else { "fake root" };
            self.event(
                EventKind::Kill,
                format!(
                    "kill in {g}: would kill {who}: {} (not signalled: {why})",
                    self.reason
                ),
            );
            return;
        }
        // Pinned, then checked to be the process chosen (same comm).
        let Some(pin) = task_attr::pin(v.pid) else {
            self.event(
                EventKind::KillRefused,
                format!("kill in {g}: {who} is gone already"),
            );
            return;
        };
        if procfs::comm(&self.root, v.pid).ok().flatten().as_deref() != Some(v.comm.as_str()) {
            self.event(
                EventKind::KillRefused,
                format!("kill in {g}: {who} is gone already"),
            );
            return;
        }
        if let Some(s) = &self.stats {
            LastResortStats::bump(&s.kills, (g.clone(), self.rule.clone()));
        }
        let how = match pin.signal(libc::SIGTERM) {
            Err(e) => format!("SIGTERM refused: {e}"),
            Ok(false) => "gone before SIGTERM".to_string(),
            Ok(true) if pin.wait_exit(self.spec.grace) => format!(
                "SIGTERM; it ended {} ms after the decision",
                decided.elapsed().as_millis()
            ),
            Ok(true) => {
                let _ = pin.signal(libc::SIGKILL);
                if pin.wait_exit(KILL_WAIT) {
                    format!(
                        "SIGTERM, SIGKILL after the {} grace; it ended {} ms after the decision",
                        crate::units::Duration(self.spec.grace),
                        decided.elapsed().as_millis()
                    )
                } else {
                    format!(
                        "SIGTERM, SIGKILL after the {} grace; not seen to end within {}s",
                        crate::units::Duration(self.spec.grace),
                        KILL_WAIT.as_secs()
                    )
                }
            }
        };
        self.event(
            EventKind::Kill,
            format!("kill in {g}: killed {who}: {}; {how}", self.reason),
        );
    }
}
