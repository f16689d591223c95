//! `status` and `verify`: the groups, knobs, claims and boosts as the control
//! socket shows them, read in the loop (a few small reads, never a write).

use crate::control::wire;
use crate::daemon::Daemon;
use crate::engine::claims::Owner;
use crate::engine::rule_state::Time;
use std::time::SystemTime;

impl Daemon {
    /// Engine time `t` on the wall clock.
    fn wall(&self, t: Time) -> SystemTime {
        let now = self.now();
        let n = SystemTime::now();
        if t >= now {
            n + (t - now)
        } else {
            n - (now - t)
        }
    }

    pub(super) fn claim_infos(&self) -> Vec<wire::ClaimInfo> {
        self.supervisor
            .table()
            .claims()
            .live()
            .map(|c| {
                let mut info = wire::ClaimInfo {
                    owner: c.owner.to_string(),
                    // A cap shows as `cap KNOB`.
                    knob: match c.cap {
                        true => format!("{}{}", crate::knobs::CAP_KEY_PREFIX, c.knob),
                        false => c.knob.to_string(),
                    },
                    value: c.knob.render(&c.value),
                    expires_at: c
                        .deadline
                        .map(|d| crate::show::rfc3339_millis(self.wall(d))),
                    ..Default::default()
                };
                if let Owner::Boost { handle } = &c.owner {
                    info.handle = Some(*handle as i64);
                    if let Some(b) = self.control.boosts.get(handle) {
                        info.uid = Some(i64::from(b.uid));
                        info.pid = Some(i64::from(b.pid));
                        info.reason = b.reason.clone();
                        info.tied_to = match (b.tied_pid, b.conn) {
                            (Some(p), _) => Some(format!("process {p}")),
                            (None, Some(_)) => Some("connection".into()),
                            _ => None,
                        };
                        info.expires_at = b.expires_at.map(crate::show::rfc3339_millis);
                    }
                }
                info
            })
            .collect()
    }

    fn group_status(&self, g: &crate::policy::model::Group) -> wire::GroupStatus {
        let root = &self.opts.root;
        let read = |f: &str| {
            root.read_small(&self.groups.cg.file(&g.path, f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let psi =
            |f: &str| read(f).and_then(|t| crate::kernel::psi::parse_psi(&t).some.map(|l| l.avg10));
        let memory_events = read("memory.events")
            .map(|t| {
                crate::kernel::cgroupfs::parse_flat_keyed(&t)
                    .into_iter()
                    .map(|(k, v)| (k, i64::try_from(v).unwrap_or(i64::MAX)))
                    .collect()
            })
            .unwrap_or_default();
        wire::GroupStatus {
            name: g.name.clone(),
            path: self.groups.cg.dir(&g.path).display().to_string(),
            exists: self.groups.cg.exists(&g.path),
            cpuset: read("cpuset.cpus.effective").or_else(|| read("cpuset.cpus")),
            memory_current: read("memory.current").and_then(|t| t.parse().ok()),
            memory_high: read("memory.high"),
            memory_max: read("memory.max"),
            cpu_some_avg10: psi("cpu.pressure"),
            memory_some_avg10: psi("memory.pressure"),
            io_some_avg10: psi("io.pressure"),
            memory_events,
        }
    }

    fn knob_statuses(&self) -> Vec<wire::KnobStatus> {
        let t = self.supervisor.table();
        t.knobs()
            .map(|k| {
                let (effective, winner) = match t.effective_ref(k) {
                    Some((v, o)) => (Some(k.render(v)), o.map(|o| o.to_string())),
                    None => (None, None),
                };
                let mut contenders: Vec<wire::Contender> = t
                    .claims()
                    .on_knob(k)
                    .iter()
                    .map(|c| wire::Contender {
                        owner: c.owner.to_string(),
                        value: k.render(&c.value),
                    })
                    .collect();
                if let Some(w) = &winner {
                    if let Some(i) = contenders.iter().position(|c| &c.owner == w) {
                        let c = contenders.remove(i);
                        contenders.insert(0, c);
                    }
                }
                wire::KnobStatus {
                    knob: k.to_string(),
                    baseline: t.baseline(k).map(|v| k.render(v)),
                    effective,
                    winner,
                    contenders,
                }
            })
            .collect()
    }

    pub(crate) fn status(&self) -> wire::StatusReply {
        let (c, _) = self.actuator.counters();
        let rules = self
            .loaded
            .policy
            .rules
            .iter()
            .zip(self.supervisor.phases())
            .map(|(r, (phase, since))| wire::RuleStatus {
                name: r.name.clone(),
                state: phase.to_string(),
                since: since.map(|t| crate::show::rfc3339_millis(self.wall(t))),
            })
            .collect();
        wire::StatusReply {
            product: self.loaded.policy.product.clone(),
            policy: wire::PolicyInfo {
                path: self.opts.policy_path.display().to_string(),
                hash: self.loaded.hash.clone(),
                loaded_at: crate::show::rfc3339_millis(self.loaded.at),
                target: self.loaded.policy.binding.target_text(),
                board: self.loaded.policy.binding.lines(),
            },
            last_reload_error: self.loaded.last_error.clone(),
            unavailable: self.telemetry.unavailable(),
            daemon: wire::DaemonInfo {
                pid: i64::from(std::process::id()),
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_seconds: i64::try_from(self.start.elapsed().as_secs()).unwrap_or(i64::MAX),
                knob_writes: i64::try_from(c.writes).unwrap_or(i64::MAX),
                writes_rejected: i64::try_from(c.rejected).unwrap_or(i64::MAX),
                writes_late: i64::try_from(c.late).unwrap_or(i64::MAX),
                writes_superseded: i64::try_from(c.superseded).unwrap_or(i64::MAX),
                loop_wakeups: i64::try_from(self.control.loop_wakes).unwrap_or(i64::MAX),
                control_connections: self
                    .control
                    .connections
                    .as_ref()
                    .map(|c| c.load(std::sync::atomic::Ordering::Relaxed) as i64)
                    .unwrap_or(0),
            },
            groups: self
                .loaded
                .policy
                .all_groups()
                .into_iter()
                .map(|g| self.group_status(g))
                .collect(),
            rules,
            knobs: self.knob_statuses(),
            claims: self.claim_infos(),
            actions: self.control.actions.iter().cloned().collect(),
            left_alone: self.left_alone(),
        }
    }

    /// The processes placement left in another manager's cgroup.
    fn left_alone(&self) -> Vec<wire::LeftAlone> {
        let Some(x) = &self.groups.exec else {
            return Vec::new();
        };
        x.shared
            .left_alone()
            .into_iter()
            .map(|(pid, k)| wire::LeftAlone {
                pid: i64::from(pid),
                owner: k.owner.what(),
                comm: k.comm,
                cgroup: k.cgroup,
                group: k.group,
                policy_line: i64::from(k.line),
            })
            .collect()
    }

    /// `Verify` answered here (the held check in the loop): the table's
    /// knobs, then the held files ([`Self::verify_knobs`],
    /// [`super::super::drift`]). A call with a reply channel goes through
    /// [`Self::check_held_then`] instead, off the loop.
    pub(crate) fn verify(&mut self) -> wire::VerifyReply {
        let mut knobs = self.verify_knobs();
        let held = super::super::drift::held_drifts(
            &self.opts.root,
            &self.loaded.policy,
            &self.knob_paths(),
            None,
        );
        self.note_held(&held, false);
        knobs.extend(held.into_iter().map(super::super::drift::held_check));
        wire::VerifyReply {
            drift: knobs.iter().any(|k| k.drift),
            knobs,
        }
    }

    /// Every knob of the table with an effective value, compared with the
    /// kernel in the loop (a few small reads). A drift that begins is an
    /// event (and counts) once; one still there at the next check is not
    /// counted again.
    pub(crate) fn verify_knobs(&mut self) -> Vec<wire::KnobCheck> {
        let t = self.supervisor.table();
        let mut knobs = Vec::new();
        // A knob whose write is still queued or in flight is not drift:
        // the file holds the old value until the write is made.
        let pending = self.actuator.pending();
        for k in t.knobs() {
            let Some(expected) = t.effective(k) else {
                continue;
            };
            let target = self.actuator.target(k, &expected).ok();
            let path = target
                .as_ref()
                .map(|(p, _)| p.clone())
                .unwrap_or_else(|| self.actuator.read_path(k))
                .display()
                .to_string();
            // What the actuator writes for it: a governor list resolves to
            // the first available one, which the file then holds.
            let written = target.map(|(_, text)| text.trim().to_string());
            let actual = self.actuator.read(k);
            let skipped = match actual {
                None => self.actuator.unverifiable(k).map(String::from),
                Some(_) => None,
            };
            let drift = match &actual {
                Some(a) => {
                    a != &expected
                        && a.kernel() != expected.kernel()
                        && written.as_deref() != Some(a.kernel().as_str())
                }
                None => skipped.is_none(),
            } && !pending.contains(&k.to_string());
            knobs.push(wire::KnobCheck {
                knob: k.to_string(),
                path,
                expected: k.render(&expected),
                actual: actual.as_ref().map(|a| k.render(a)),
                drift,
                last_writer: self.control.last_writer.get(k).cloned(),
                skipped,
            });
        }
        for k in &knobs {
            if !k.drift {
                self.telemetry.drift.ended(&k.knob);
            } else if self.telemetry.drift.begins(&k.knob) {
                let path = (!k.path.is_empty()).then(|| std::path::PathBuf::from(&k.path));
                self.publish_drift(&k.knob, &k.expected, k.actual.as_deref(), path.as_deref());
            }
        }
        knobs
    }
}
