//! `settings:`: drift, metrics, recorder, report criteria and the daemon's
//! own scheduling.

use super::Decoder;
use crate::policy::diag::hint;
use crate::policy::model::*;
use crate::policy::yaml::Node;
use crate::units::{CpuList, Percent, Size};
use std::path::Path;
use std::time::Duration;

impl<'a> Decoder<'a> {
    /// `settings.drift`: `{ interval: D, on_drift: warn|restore }`;
    /// interval 1s..=1d, default 1m; on_drift default warn.
    fn drift_settings(&mut self, node: &Node) -> Option<DriftSettings> {
        let f = self.fields(node, "settings.drift", &["interval", "on_drift"])?;
        let interval = match f.get("interval") {
            None => Duration::from_secs(60),
            Some(n) => match self.duration(n, "settings.drift.interval") {
                Some(d) if d >= Duration::from_secs(1) && d <= Duration::from_secs(86400) => d,
                Some(_) => {
                    self.err(n.pos, "settings.drift.interval must be from 1s to 1d");
                    return None;
                }
                None => return None,
            },
        };
        let restore = match f.get("on_drift") {
            None => false,
            Some(n) => match self.text(n, "settings.drift.on_drift").as_deref() {
                Some("warn") => false,
                Some("restore") => true,
                Some(other) => {
                    self.err(
                        n.pos,
                        format!("settings.drift.on_drift `{other}`: expected `warn` or `restore`"),
                    );
                    return None;
                }
                None => return None,
            },
        };
        Some(DriftSettings { interval, restore })
    }

    pub(super) fn settings(&mut self, node: &Node) -> Settings {
        let mut s = Settings::default();
        let Some(f) = self.fields(
            node,
            "settings",
            &[
                "cgroup_root",
                "tick",
                "rescan",
                "state_dir",
                "on_missing",
                "socket_group",
                "metrics",
                "recorder",
                "daemon",
                "drift",
                "critical",
            ],
        ) else {
            return s;
        };
        if let Some(n) = f.get("drift") {
            s.drift = self.drift_settings(n);
        }
        if let Some(n) = f.get("critical") {
            s.critical = self.critical(n);
        }
        if let Some(n) = f.get("cgroup_root") {
            if let Some(p) = self.abs_path(n, "settings.cgroup_root") {
                s.cgroup_root = p;
            }
        }
        if let Some(n) = f.get("state_dir") {
            if let Some(p) = self.abs_path(n, "settings.state_dir") {
                // The journal and lock live here: never the root, a kernel
                // interface or a group cgwarden manages: the trust rules).
                let forbidden = if p == Path::new("/") {
                    Some("the root directory".to_string())
                } else if p.starts_with("/proc") || p.starts_with("/sys") {
                    Some("a kernel interface (/proc, /sys)".to_string())
                } else if p.starts_with(&s.cgroup_root) {
                    Some(format!(
                        "inside the cgroup root {}",
                        s.cgroup_root.display()
                    ))
                } else {
                    None
                };
                match forbidden {
                    Some(why) => self.err(
                        n.pos,
                        format!(
                            "settings.state_dir `{}` is {why}; the journal needs a private directory such as /run/cgwarden or /var/lib/cgwarden",
                            p.display()
                        ),
                    ),
                    None => s.state_dir = p,
                }
            }
        }
        if let Some(n) = f.get("tick") {
            if let Some(d) = self.duration(n, "settings.tick") {
                if d < Duration::from_millis(10) {
                    self.err(n.pos, "settings.tick must be at least 10ms");
                } else {
                    s.tick = d;
                }
            }
        }
        if let Some(n) = f.get("rescan") {
            if let Some(d) = self.duration(n, "settings.rescan") {
                if d < Duration::from_millis(100) {
                    self.err(n.pos, "settings.rescan must be at least 100ms");
                } else {
                    s.rescan = d;
                }
            }
        }
        if let Some(n) = f.get("on_missing") {
            match self.text(n, "settings.on_missing").as_deref() {
                Some("warn") => s.on_missing = OnMissing::Warn,
                Some("fail") => s.on_missing = OnMissing::Fail,
                Some(other) => {
                    let h = hint(other, ["warn", "fail"]);
                    self.err(
                        n.pos,
                        format!("settings.on_missing must be `warn` or `fail`, found `{other}`{h}"),
                    )
                }
                None => {}
            }
        }
        if let Some(v) = self.opt_text(&f, "socket_group", "settings.socket_group") {
            s.socket_group = v;
        }
        if let Some(n) = f.get("daemon") {
            s.daemon = self.daemon_settings(n);
        }
        if let Some(n) = f.get("metrics") {
            s.metrics = self.metrics_settings(n);
        }
        if let Some(n) = f.get("recorder") {
            s.recorder = self.recorder_settings(n);
        }
        s
    }

    /// `settings.metrics`: unix socket, TCP address, textfile, interval.
    fn metrics_settings(&mut self, node: &Node) -> MetricsSettings {
        let mut m = MetricsSettings::default();
        let Some(f) = self.fields(
            node,
            "settings.metrics",
            &["socket", "listen", "allow_remote", "textfile", "interval"],
        ) else {
            return m;
        };
        if let Some(n) = f.get("socket") {
            m.socket = self.abs_path(n, "settings.metrics.socket");
        }
        if let Some(n) = f.get("textfile") {
            m.textfile = self.abs_path(n, "settings.metrics.textfile");
        }
        if let Some(n) = f.get("allow_remote") {
            m.allow_remote = self
                .bool(n, "settings.metrics.allow_remote")
                .unwrap_or(false);
        }
        if let Some(n) = f.get("interval") {
            if let Some(d) = self.duration(n, "settings.metrics.interval") {
                if d < Duration::from_secs(1) {
                    self.err(n.pos, "settings.metrics.interval must be at least 1s");
                } else {
                    m.interval = d;
                }
            }
        }
        if let Some(n) = f.get("listen") {
            if let Some(text) = self.text(n, "settings.metrics.listen") {
                match text.parse::<std::net::SocketAddr>() {
                    Err(_) => self.err(
                        n.pos,
                        format!("settings.metrics.listen `{text}` is not an address:port like 127.0.0.1:9622"),
                    ),
                    // Metrics show the box's workload and limits: they stay
                    // on the box unless the policy says otherwise.
                    Ok(a) if !a.ip().is_loopback() && !m.allow_remote => self.err(
                        n.pos,
                        format!("settings.metrics.listen `{text}` is not a loopback address; set `allow_remote: true` to expose metrics beyond this machine"),
                    ),
                    Ok(a) => m.listen = Some(a),
                }
            }
        }
        m
    }

    /// `settings.recorder`: dir (required), interval, retention, max_size.
    fn recorder_settings(&mut self, node: &Node) -> Option<RecorderSettings> {
        let f = self.fields(
            node,
            "settings.recorder",
            &["dir", "interval", "retention", "max_size"],
        )?;
        let Some(dir_node) = f.get("dir") else {
            self.err(
                node.pos,
                "settings.recorder needs `dir:`, the directory of the database (e.g. /var/lib/cgwarden)",
            );
            return None;
        };
        let mut r = RecorderSettings::new(self.abs_path(dir_node, "settings.recorder.dir")?);
        if let Some(n) = f.get("interval") {
            if let Some(d) = self.duration(n, "settings.recorder.interval") {
                if d < Duration::from_secs(1) {
                    self.err(n.pos, "settings.recorder.interval must be at least 1s");
                } else {
                    r.interval = d;
                }
            }
        }
        if let Some(n) = f.get("retention") {
            if let Some(d) = self.duration(n, "settings.recorder.retention") {
                if d < r.interval {
                    self.err(
                        n.pos,
                        "settings.recorder.retention must be at least one recorder interval",
                    );
                } else {
                    r.retention = d;
                }
            }
        }
        if let Some(n) = f.get("max_size") {
            if let Some(sz) = self.unit(n, "settings.recorder.max_size", Size::parse) {
                match sz.bytes() {
                    Some(b) if b >= 1 << 20 => r.max_size = b,
                    _ => self.err(
                        n.pos,
                        format!("settings.recorder.max_size must be a size of at least 1M, found `{sz}`"),
                    ),
                }
            }
        }
        Some(r)
    }

    /// `report: { criteria: {...} }`: what `cgwarden report` judges.
    pub(super) fn report(&mut self, node: &Node) -> ReportCriteria {
        let mut c = ReportCriteria::default();
        let Some(top) = self.fields(node, "report", &["criteria"]) else {
            return c;
        };
        let Some(n) = top.get("criteria") else {
            return c;
        };
        let Some(f) = self.fields(
            n,
            "report.criteria",
            &[
                "oom_kills",
                "memory_growth",
                "processes",
                "thermal_zones",
                "thermal_events",
                "restarts",
                "memory_full_avg10",
                "loop_p99",
                "loop_kpi",
                "fps_stddev",
                "fps_kpi",
            ],
        ) else {
            return c;
        };
        self.report_kpi(&f, &mut c); // decode/kpi.rs
        let count = |d: &mut Self, name: &str| {
            f.get(name)
                .and_then(|n| d.int(n, &format!("report.criteria.{name}"), 0, i64::MAX))
                .and_then(|i| u64::try_from(i).ok())
        };
        if let Some(v) = count(self, "oom_kills") {
            c.oom_kills = v;
        }
        if let Some(v) = count(self, "thermal_events") {
            c.thermal_events_per_72h = v;
        }
        if let Some(v) = count(self, "restarts") {
            c.restarts = v;
        }
        if let Some(n) = f.get("memory_growth") {
            if let Some(sz) = self.unit(n, "report.criteria.memory_growth", Size::parse) {
                match sz.bytes() {
                    Some(b) => c.memory_growth = b,
                    None => self.err(
                        n.pos,
                        "report.criteria.memory_growth must be a size like 50M, not `max`",
                    ),
                }
            }
        }
        if let Some(n) = f.get("memory_full_avg10") {
            if let Some(p) = self.unit(n, "report.criteria.memory_full_avg10", Percent::parse) {
                c.memory_full_avg10 = p.value();
            }
        }
        for (name, out) in [
            ("processes", &mut c.processes),
            ("thermal_zones", &mut c.thermal_zones),
        ] {
            if let Some(n) = f.get(name) {
                let what = format!("report.criteria.{name}");
                for item in self.seq(n, &what) {
                    if let Some(t) = self.text(item, &what) {
                        if t.is_empty() || t.len() > 64 || t.contains('/') {
                            self.err(
                                item.pos,
                                format!("{what}: `{t}` is not a name (1–64 characters, no `/`)"),
                            );
                        } else {
                            out.push(t);
                        }
                    }
                }
            }
        }
        c
    }

    /// `settings.daemon: { cpus, sched, mlock }`; what is absent or invalid
    /// keeps its default (the errors stop the policy anyway).
    fn daemon_settings(&mut self, node: &Node) -> DaemonSettings {
        let mut d = DaemonSettings::default();
        let Some(f) = self.fields(node, "settings.daemon", &["cpus", "sched", "mlock"]) else {
            return d;
        };
        if let Some(n) = f.get("cpus") {
            d.cpus = self.unit(n, "settings.daemon.cpus", CpuList::parse);
        }
        if let Some(n) = f.get("mlock") {
            if let Some(b) = self.bool(n, "settings.daemon.mlock") {
                d.mlock = b;
            }
        }
        if let Some(n) = f.get("sched") {
            if let Some(s) = self.daemon_sched(n) {
                d.sched = s;
            }
        }
        d
    }

    /// `settings.daemon.sched`: `{ policy: fifo|rr, priority: 1-99 }` or
    /// `{ policy: other, nice: -20..19 }` (batch, idle and deadline make no
    /// sense for threads that must react first).
    fn daemon_sched(&mut self, node: &Node) -> Option<Sched> {
        const WHAT: &str = "settings.daemon.sched";
        let f = self.fields(node, WHAT, &["policy", "priority", "nice"])?;
        let Some(pn) = f.get("policy") else {
            self.err(
                node.pos,
                format!("{WHAT} needs `policy:` (fifo, rr or other)"),
            );
            return None;
        };
        let text = self.text(pn, "settings.daemon.sched.policy")?;
        let policy = match text.as_str() {
            "fifo" => SchedPolicy::Fifo,
            "rr" => SchedPolicy::Rr,
            "other" => SchedPolicy::Other,
            other => {
                let h = super::placement::policy_hint(other, &["fifo", "rr", "other"]);
                let why = if matches!(other, "batch" | "idle" | "deadline") {
                    " (the daemon's reacting threads must run first: use fifo, rr or other)"
                        .to_string()
                } else {
                    format!(" (expected fifo, rr or other){h}")
                };
                self.err(
                    pn.pos,
                    format!("settings.daemon.sched.policy `{other}` is not allowed{why}"),
                );
                return None;
            }
        };
        let rt = policy != SchedPolicy::Other;
        let priority = f
            .get("priority")
            .and_then(|n| self.int(n, "settings.daemon.sched.priority", 1, 99))
            .map(|v| v as u32);
        let nice = f
            .get("nice")
            .and_then(|n| self.int(n, "settings.daemon.sched.nice", -20, 19))
            .map(|v| v as i32);
        if rt {
            if let Some(k) = f.key("nice") {
                self.err(
                    k.pos,
                    format!(
                        "settings.daemon.sched.nice does not apply to {text}; give `priority:` (1-99)"
                    ),
                );
                return None;
            }
            if f.get("priority").is_none() {
                self.err(
                    pn.pos,
                    format!("settings.daemon.sched.policy {text} needs `priority:` (1-99; 1 is below every real RT task)"),
                );
                return None;
            }
            priority?;
        } else {
            if let Some(k) = f.key("priority") {
                self.err(
                    k.pos,
                    "settings.daemon.sched.priority applies to fifo and rr only; other takes `nice:` (-20..19)",
                );
                return None;
            }
            if f.get("nice").is_some() && nice.is_none() {
                return None;
            }
        }
        Some(Sched {
            policy,
            priority: if rt { priority } else { None },
            nice: if rt { None } else { Some(nice.unwrap_or(0)) },
            deadline: None,
        })
    }
}
