//! The daemon's side of observability (metrics and the flight recorder):
//! serves the metrics on the `cgw-services` thread and starts the
//! `cgw-recorder` thread when `settings.metrics` / `settings.recorder` ask
//! for them (nothing runs
//! otherwise), keeps the counters of [`crate::observe::state::Book`] and
//! publishes the engine view at the top of a loop turn when something
//! changed. See `src/observe/state.rs` for why this never waits.

use super::Daemon;
use crate::engine::claims::Owner;
use crate::engine::rule_state::Phase;
use crate::observe::state::{knob_number, Book, EngineView, HookView, KnobView, RuleView};
use crate::observe::{http, recorder};
use std::path::PathBuf;
use std::time::Duration;

/// What runs for observability.
pub(crate) struct Observe {
    pub(super) book: Book,
    /// The device's identity, read when observability starts.
    device: std::sync::Arc<crate::kernel::identity::Device>,
    recorder: Option<recorder::Handle>,
    /// The input tape the recorder writes (with the recorder).
    pub(crate) tape: Option<crate::observe::tape::Tape>,
    /// Host path of the metrics socket, removed at stop.
    socket: Option<PathBuf>,
    /// What the policy asks to serve and the daemon could not (a metrics
    /// address in use): not fatal — the cgroups are supervised without it —
    /// but shown by `status`.
    pub(super) unavailable: Vec<String>,
}

impl std::fmt::Debug for Observe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observe")
            .field("recorder", &self.recorder.is_some())
            .field("socket", &self.socket)
            .finish()
    }
}

/// The identity read at start (an empty one before).
fn o_device(o: &Option<Observe>) -> std::sync::Arc<crate::kernel::identity::Device> {
    o.as_ref().map(|o| o.device.clone()).unwrap_or_default()
}

/// How long a stop waits for the recorder's last interval.
const RECORDER_GRACE: Duration = Duration::from_secs(3);

impl Daemon {
    /// Starts metrics and the recorder as the policy asks; logs (never
    /// fails the daemon) what cannot be served.
    pub(crate) fn start_observe(&mut self) {
        let m = self.loaded.policy.settings.metrics.clone();
        let r = self.loaded.policy.settings.recorder.clone();
        if !m.enabled() && r.is_none() {
            return;
        }
        // Throttle episodes of every cpufreq policy, for the
        // metric and the recorder (nothing on a board without cpufreq).
        self.telemetry
            .sampler
            .track_policies(crate::kernel::thermal::policies(&self.opts.root));
        let (book, view) = Book::new();
        self.telemetry.observe = Some(Observe {
            book,
            device: std::sync::Arc::new(crate::kernel::identity::Device::read(&self.opts.root)),
            recorder: None,
            tape: None,
            socket: None,
            unavailable: Vec::new(),
        });
        let mut unavailable = Vec::new();
        self.publish_observed();
        let root = self.opts.root.clone();
        // The recorder first: the metrics textfile's writes go to its thread.
        if let Some(s) = r {
            let path = root.host_path(&s.dir).join(recorder::DB_NAME);
            // The tape's times are Unix seconds of the engine's clock.
            let wall_base = crate::observe::state::unix_seconds(std::time::SystemTime::now())
                - self.now().as_secs_f64();
            let tape = crate::observe::tape::Tape::new(&self.loaded.policy, wall_base);
            let cfg = recorder::Config {
                settings: s,
                path: path.clone(),
                criteria: self.loaded.policy.report.clone(),
                critical: self.loaded.policy.settings.critical.clone(),
                root: root.clone(),
                cg: self.groups.cg.clone(),
                view: view.clone(),
                events: self.control.events.subscribe(),
                tape: Some(tape.shared()),
                kpi: Some(self.telemetry.kpi_store()),
            };
            match recorder::start(cfg) {
                Ok(h) => {
                    tracing::info!(db = %path.display(), "flight recorder running");
                    if let Some(o) = &mut self.telemetry.observe {
                        o.recorder = Some(h);
                        o.tape = Some(tape);
                    }
                }
                Err(e) => {
                    tracing::error!("flight recorder unavailable: {e}");
                    unavailable.push(format!("flight recorder {}: {e}", path.display()));
                }
            }
        }
        if m.enabled() {
            let mut ends = http::Endpoints {
                unix: None,
                tcp: None,
                textfile: None,
                disk: self
                    .telemetry
                    .observe
                    .as_ref()
                    .and_then(|o| o.recorder.as_ref())
                    .map(|h| h.jobs()),
            };
            if let Some(p) = &m.socket {
                let path = root.host_path(p);
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                match crate::control::server::bind(&path, self.socket_gid()) {
                    Ok(l) => {
                        tracing::info!(socket = %path.display(), "metrics socket listening");
                        ends.unix = Some(l);
                        if let Some(o) = &mut self.telemetry.observe {
                            o.socket = Some(path);
                        }
                    }
                    Err(e) => {
                        tracing::error!(socket = %path.display(), "metrics socket unavailable: {e}");
                        unavailable.push(format!("metrics socket {}: {e}", path.display()));
                    }
                }
            }
            if let Some(addr) = m.listen {
                match std::net::TcpListener::bind(addr).and_then(|l| {
                    l.set_nonblocking(true)?;
                    Ok(l)
                }) {
                    Ok(l) => {
                        tracing::info!(%addr, "metrics listening");
                        ends.tcp = Some(l);
                    }
                    Err(e) => {
                        tracing::error!(%addr, "metrics address unavailable: {e}");
                        unavailable.push(format!("metrics address {addr}: {e}"));
                    }
                }
            }
            if let Some(p) = &m.textfile {
                let path = root.host_path(p);
                if let Some(dir) = path.parent() {
                    if let Err(e) = std::fs::create_dir_all(dir) {
                        tracing::warn!(dir = %dir.display(), "metrics textfile: {e}");
                    }
                }
                ends.textfile = Some((path, m.interval));
            }
            let exposer = http::Exposer {
                cg: self.groups.cg.clone(),
                view,
                kpi: Some(self.telemetry.kpi_store()),
            };
            match self.control.services() {
                Some(services) => {
                    if let Err(e) = http::start(&services, exposer, ends) {
                        tracing::error!("metrics: {e}");
                        unavailable.push(format!("metrics: {e}"));
                    }
                }
                None => unavailable.push("metrics: no services thread".to_string()),
            }
        }
        if let Some(o) = &mut self.telemetry.observe {
            o.unavailable = unavailable;
        }
    }

    /// The gid of `settings.socket_group`, 0 (root's) when it is none.
    fn socket_gid(&self) -> u32 {
        match crate::kernel::accounts::group(
            &self.opts.root,
            &self.loaded.policy.settings.socket_group,
        ) {
            Ok(Some(g)) => g,
            _ => 0,
        }
    }

    /// Publishes the engine view when something changed since the last time.
    pub(crate) fn publish_observed(&mut self) {
        if !self
            .telemetry
            .observe
            .as_ref()
            .is_some_and(|o| o.book.dirty)
        {
            return;
        }
        let t = self.supervisor.table();
        let knobs = t
            .knobs()
            .map(|k| KnobView {
                name: k.to_string(),
                value: t.effective(k).and_then(|v| knob_number(&k.render(&v))),
                ok: 0,
                failed: 0,
            })
            .collect();
        let mut claims_live = std::collections::BTreeMap::new();
        for c in t.claims().live() {
            let kind = match c.owner {
                Owner::Boost { .. } => "boost",
                _ => "rule",
            };
            *claims_live.entry(kind).or_insert(0) += 1;
        }
        let rules = self
            .loaded
            .policy
            .rules
            .iter()
            .zip(self.supervisor.phases())
            .map(|(r, (phase, _))| RuleView {
                name: r.name.clone(),
                active: matches!(phase, Phase::Active | Phase::Clearing),
                max_active: r.max_active.map(|d| d.as_secs_f64()),
                ..Default::default()
            })
            .collect();
        let view = EngineView {
            product: self.loaded.policy.product.clone(),
            policy_hash: self.loaded.hash.clone(),
            groups: self
                .loaded
                .policy
                .all_groups()
                .into_iter()
                .map(|g| (g.name.clone(), g.path.clone()))
                .collect(),
            rules,
            knobs,
            claims_live,
            exec: self.groups.exec.as_ref().map(|x| x.shared.stats()),
            hooks: self
                .hooks
                .counters()
                .into_iter()
                .map(|(name, counters)| HookView { name, counters })
                .collect(),
            throttle_episodes: self.telemetry.throttle.episodes.clone(),
            drifts: self.telemetry.drift.counts.clone(),
            cpufreq_limits: self.telemetry.cpufreq_limits.clone(),
            device: o_device(&self.telemetry.observe),
            ..Default::default()
        };
        if let Some(o) = &mut self.telemetry.observe {
            o.book.publish(view);
        }
    }

    /// Daemon stop: the recorder records its last interval and `stop`; the
    /// metrics socket file goes.
    pub(crate) fn stop_observe(&mut self) {
        self.telemetry.observed_changed();
        self.publish_observed();
        if let Some(o) = self.telemetry.observe.take() {
            if let Some(r) = o.recorder {
                r.stop(RECORDER_GRACE);
            }
            if let Some(p) = o.socket {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}
