//! Sampling what the rules read, and only that (the engine's `Needs`): PSI
//! files, memory.current / swap / events, pids, populated, MemAvailable,
//! thermal zones, live process names. A sample is a plain snapshot; the
//! engine evaluates conditions against it through [`View`], which also holds
//! the PSI stall history kept across samples.

use crate::engine::condition::{Metrics, Needs};
use crate::engine::rule_state::Time;
use crate::engine::stall::{Recorded, StallHistory, StallKey};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::psi::{OpenPressure, Psi};
use crate::kernel::{meminfo, procfs, thermal, Root};
use crate::policy::expr::{Avg, MemEvent, Resource, Stall, Target};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

/// One sample of everything the rules need.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The KPI statistics the rules read (kpisock.rs fills them).
    pub(crate) kpi: HashMap<(String, crate::policy::expr::kpi::Stat, Duration), f64>,
    psi: crate::engine::FastMap<(Target, Resource), Psi>,
    memory_current: HashMap<String, u64>,
    swap_current: HashMap<String, u64>,
    events: HashMap<String, BTreeMap<String, u64>>,
    pids: HashMap<String, u64>,
    populated: HashMap<String, bool>,
    available: Option<u64>,
    thermal: HashMap<String, i64>,
    comms: Vec<String>,
    existing: HashMap<String, bool>,
    /// `running(NAME)` answers from presence.
    running: HashMap<String, bool>,
    /// Trip points, cooling states by type, cpufreq limits.
    trips: HashMap<(String, u32), i64>,
    cooling: HashMap<String, u64>,
    limits: HashMap<String, thermal::PolicyLimit>,
    /// `throttled()` of every tracked policy (rules' and, with
    /// metrics or the recorder, every policy's).
    pub(crate) throttled: std::collections::BTreeMap<String, bool>,
    /// Memory telemetry.
    memstat: HashMap<crate::policy::expr::MemMetric, f64>,
    /// Kernel PSI triggers this sample recorded, (line, amount,
    /// window), for the recorder's input tape.
    pub(crate) triggered: Vec<(StallKey, Duration, Duration)>,
}

/// A PSI target's pressure file (`None`: its group is not known).
type PressurePath = ((Target, Resource), Option<PathBuf>);

/// Reads samples for a fixed set of needs.
pub struct Sampler {
    root: Root,
    cg: CgroupFs,
    groups: HashMap<String, String>,
    needs: Needs,
    pub stall: StallHistory,
    /// PSI lines already reported for an implausible `total=`.
    implausible: crate::engine::FastSet<StallKey>,
    /// Lines whose kernel trigger fired since the last sample: (amount,
    /// window) of the trigger, applied when the next sample reads the line.
    fired: crate::engine::FastMap<StallKey, (Duration, Duration)>,
    /// Presence kept by exec events; `None`: comm scan each tick.
    exec: Option<std::sync::Arc<crate::daemon::exec::Shared>>,
    /// The ceiling asked for each tracked policy's max (kHz), as
    /// the engine holds it; a policy without one is judged against its
    /// hardware maximum.
    asked: HashMap<String, u64>,
    /// vmstat rate history.
    mem: crate::daemon::memstat::MemSampler,
    /// The pressure files read, kept open (one `pread` a read).
    pressure: std::cell::RefCell<OpenPressure>,
    /// Each PSI target's pressure file, resolved on its first read (not
    /// built with `format!` and a join at every read); a few entries,
    /// searched in order. Cleared by a reload.
    paths: std::cell::RefCell<Vec<PressurePath>>,
}

pub(crate) fn resource_name(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "cpu",
        Resource::Memory => "memory",
        Resource::Io => "io",
    }
}

impl Sampler {
    pub fn new(root: Root, cg: CgroupFs, groups: HashMap<String, String>, needs: Needs) -> Self {
        let mut stall = StallHistory::new();
        stall.configure(needs.psi_stall.iter());
        Sampler {
            root,
            cg,
            groups,
            needs,
            stall,
            implausible: Default::default(),
            fired: Default::default(),
            exec: None,
            asked: HashMap::new(),
            mem: Default::default(),
            pressure: Default::default(),
            paths: Default::default(),
        }
    }

    /// `running()` answers from this presence from now on.
    pub(crate) fn set_exec(&mut self, shared: std::sync::Arc<crate::daemon::exec::Shared>) {
        self.exec = Some(shared);
    }

    /// A reload: samples `needs` of `groups` from now on. The stall history
    /// of PSI lines still needed is kept (with the new retention); lines no
    /// longer needed are dropped, as are pending trigger firings of them.
    pub(crate) fn set_needs(&mut self, groups: HashMap<String, String>, needs: Needs) {
        self.stall.configure(needs.psi_stall.iter());
        self.fired.retain(|k, _| needs.psi_stall.contains_key(k));
        self.groups = groups;
        self.needs = needs;
        self.paths.borrow_mut().clear();
        let read: std::collections::HashSet<PathBuf> = self
            .needs
            .psi_avg
            .iter()
            .cloned()
            .chain(
                self.needs
                    .psi_stall
                    .keys()
                    .map(|k| (k.target.clone(), k.resource)),
            )
            .filter_map(|(t, r)| self.pressure_path(&t, r))
            .collect();
        self.pressure.borrow_mut().retain(|p| read.contains(p));
    }

    pub(crate) fn needs(&self) -> &Needs {
        &self.needs
    }

    /// The pressure file of a PSI target (device path).
    pub(crate) fn pressure_path(&self, target: &Target, res: Resource) -> Option<PathBuf> {
        match target {
            Target::Host => Some(
                std::path::Path::new(crate::kernel::psi::PRESSURE_DIR).join(resource_name(res)),
            ),
            Target::Group(g) => {
                let path = self.groups.get(g)?;
                Some(
                    self.cg
                        .file(path, &format!("{}.pressure", resource_name(res))),
                )
            }
        }
    }

    fn read_psi(&self, target: &Target, res: Resource) -> Option<Psi> {
        let mut paths = self.paths.borrow_mut();
        let i = match paths
            .iter()
            .position(|((t, r), _)| *r == res && t == target)
        {
            Some(i) => i,
            None => {
                paths.push(((target.clone(), res), self.pressure_path(target, res)));
                paths.len() - 1
            }
        };
        let path = paths.get(i)?.1.as_deref()?;
        self.pressure.borrow_mut().read(&self.root, path)
    }

    fn group_u64(&self, group: &str, file: &str) -> Option<u64> {
        let path = self.groups.get(group)?;
        let text = self.cg.read(path, file).ok()?;
        text.trim().parse().ok()
    }

    /// A kernel PSI trigger on `key` fired: the next [`Sampler::sample`]
    /// records the line's counter with the kernel's word that the window
    /// held at least `amount` of stall ([`StallHistory::record_trigger`]);
    /// the file is read once, by that sample. Of two triggers on one line,
    /// the larger amount is the stronger word.
    pub(crate) fn trigger_fired(&mut self, key: &StallKey, amount: Duration, window: Duration) {
        let e = self.fired.entry(key.clone()).or_insert((amount, window));
        if amount > e.0 {
            *e = (amount, window);
        }
    }

    /// Reads everything the rules need now, and records PSI totals for the
    /// stall-time conditions.
    pub fn sample(&mut self, now: Time) -> Snapshot {
        let mut s = Snapshot::default();
        for (target, res) in &self.needs.psi_avg {
            if let Some(p) = self.read_psi(target, *res) {
                s.psi.insert((target.clone(), *res), p);
            }
        }
        let keys: Vec<StallKey> = self.needs.psi_stall.keys().cloned().collect();
        for key in keys {
            let psi = match s.psi.get(&(key.target.clone(), key.resource)) {
                Some(p) => Some(*p),
                None => self.read_psi(&key.target, key.resource),
            };
            let line = psi.and_then(|p| match key.stall {
                Stall::Some => p.some,
                Stall::Full => p.full,
            });
            if let Some(l) = line {
                let r = match self.fired.remove(&key) {
                    Some((amount, window)) => {
                        s.triggered.push((key.clone(), amount, window));
                        let r = self
                            .stall
                            .record_trigger(&key, now, l.total_us, amount, window);
                        tracing::debug!(
                            line = ?key,
                            now = ?now,
                            total_us = l.total_us,
                            recorded = ?r,
                            window_us = ?self.stall.stall_in_window(&key, now, window).map(|d| d.as_micros()),
                            "a trigger's firing recorded"
                        );
                        r
                    }
                    None => self.stall.record(&key, now, l.total_us),
                };
                if r == Recorded::Implausible && self.implausible.insert(key.clone()) {
                    tracing::warn!(
                        file = %self.pressure_path(&key.target, key.resource).map(|p| p.display().to_string()).unwrap_or_default(),
                        total_us = l.total_us,
                        "PSI total= grew by more than the elapsed time; ignored as implausible (said once per line)"
                    );
                }
            }
            if let Some(p) = psi {
                s.psi.entry((key.target.clone(), key.resource)).or_insert(p);
            }
        }
        // A line that could not be read keeps no stale word for later.
        self.fired.clear();
        for g in &self.needs.memory_current {
            if let Some(v) = self.group_u64(g, "memory.current") {
                s.memory_current.insert(g.clone(), v);
            }
        }
        for g in &self.needs.swap_current {
            if let Some(v) = self.group_u64(g, "memory.swap.current") {
                s.swap_current.insert(g.clone(), v);
            }
        }
        for g in &self.needs.pids_current {
            if let Some(v) = self.group_u64(g, "pids.current") {
                s.pids.insert(g.clone(), v);
            }
        }
        for g in &self.needs.memory_events {
            if let Some(path) = self.groups.get(g) {
                if let Ok(ev) = self.cg.memory_events(path) {
                    s.events.insert(g.clone(), ev);
                }
            }
        }
        for g in &self.needs.populated {
            if let Some(path) = self.groups.get(g) {
                if let Ok(ev) = self.cg.events(path) {
                    if let Some(p) = ev.get("populated") {
                        s.populated.insert(g.clone(), *p != 0);
                    }
                }
            }
        }
        for g in &self.needs.exists {
            let present = self.groups.get(g).is_some_and(|p| self.cg.exists(p));
            s.existing.insert(g.clone(), present);
        }
        if self.needs.memory_available {
            s.available = meminfo::mem_available(&self.root).ok().flatten();
        }
        if !self.needs.memstat.is_empty() {
            s.memstat = self
                .mem
                .sample(&self.root, &self.needs.memstat, std::time::Instant::now());
        }
        if !self.needs.thermal_zones.is_empty() {
            if let Ok(zones) = thermal::zones(&self.root) {
                for z in zones {
                    if self.needs.thermal_zones.contains(&z.kind) {
                        if let Ok(t) = thermal::temp_millic(&self.root, &z) {
                            s.thermal.insert(z.kind.clone(), t);
                        }
                    }
                }
            }
        }
        self.sample_hardware(&mut s);
        if let (false, Some(sh)) = (self.needs.running.is_empty(), &self.exec) {
            // Exec/exit events keep presence; without them this tick's scan does.
            if !sh.events_live() {
                crate::daemon::exec::scan_presence(sh, &self.root);
            }
            let pr = sh.presence();
            s.running = self
                .needs
                .running
                .iter()
                .map(|p| (p.clone(), pr.running(p)))
                .collect();
        } else if !self.needs.running.is_empty() {
            // Until exec events drive presence, a scan of comm names.
            if let Ok(pids) = procfs::pids(&self.root) {
                s.comms = pids
                    .into_iter()
                    .filter_map(|p| procfs::comm(&self.root, p).ok().flatten())
                    .collect();
            }
        }
        s
    }
}

impl Snapshot {
    /// Each tracked policy's limit (kHz) and `throttled()`.
    pub(crate) fn cpufreq_limits(&self) -> std::collections::BTreeMap<String, (u64, bool)> {
        self.limits
            .iter()
            .map(|(p, l)| {
                let t = self.throttled.get(p).copied().unwrap_or(false);
                (p.clone(), (l.limit, t))
            })
            .collect()
    }
}

impl Sampler {
    /// The ceilings asked for (kHz), set before each sample.
    pub(crate) fn set_asked(&mut self, asked: HashMap<String, u64>) {
        self.asked = asked;
    }

    /// Tracks `throttled()` of these policies too (metrics, recorder).
    pub(crate) fn track_policies(&mut self, policies: impl IntoIterator<Item = String>) {
        let before = self.needs.cpufreq.len();
        self.needs.cpufreq.extend(policies);
        if self.needs.cpufreq.len() != before {
            self.needs.cooling = true;
        }
    }

    /// Trip points, cooling devices and cpufreq limits the needs name.
    fn sample_hardware(&self, s: &mut Snapshot) {
        let n = &self.needs;
        if !n.thermal_trips.is_empty() {
            for z in thermal::zones(&self.root).unwrap_or_default() {
                for (zone, trip) in n.thermal_trips.iter().filter(|(k, _)| *k == z.kind) {
                    if let Some(t) = thermal::trip_millic(&self.root, &z, *trip) {
                        s.trips.insert((zone.clone(), *trip), t);
                    }
                }
            }
        }
        let cooling = if n.cooling {
            thermal::cooling_devices(&self.root)
        } else {
            Vec::new()
        };
        for c in &cooling {
            let e = s.cooling.entry(c.kind.clone()).or_insert(0);
            *e = (*e).max(c.cur);
        }
        for p in &n.cpufreq {
            if let Some(l) = thermal::policy_limit(&self.root, p, &cooling) {
                s.throttled
                    .insert(p.clone(), l.throttled(self.asked.get(p).copied()));
                s.limits.insert(p.clone(), l);
            }
        }
    }
}

/// A snapshot plus the stall history, as the engine's metrics source.
pub struct View<'a> {
    pub snap: &'a Snapshot,
    pub stall: &'a StallHistory,
    pub now: Time,
}

impl Metrics for View<'_> {
    fn psi_avg(&self, target: &Target, res: Resource, stall: Stall, avg: Avg) -> Option<f64> {
        let p = self.snap.psi.get(&(target.clone(), res))?;
        let line = match stall {
            Stall::Some => p.some?,
            Stall::Full => p.full?,
        };
        Some(match avg {
            Avg::Avg10 => line.avg10,
            Avg::Avg60 => line.avg60,
            Avg::Avg300 => line.avg300,
        })
    }
    fn psi_stall(
        &self,
        target: &Target,
        res: Resource,
        stall: Stall,
        window: Duration,
    ) -> Option<Duration> {
        let key = StallKey::of(target, res, stall);
        self.stall
            .condition_stall(&key, self.now, window, self.stall.is_armed(&key))
    }
    fn psi_stall_silent_from(
        &self,
        target: &Target,
        res: Resource,
        stall: Stall,
        window: Duration,
    ) -> Option<Time> {
        let key = StallKey::of(target, res, stall);
        self.stall
            .silent_from(&key, window, self.stall.is_armed(&key))
    }
    fn memory_current(&self, group: &str) -> Option<u64> {
        self.snap.memory_current.get(group).copied()
    }
    fn swap_current(&self, group: &str) -> Option<u64> {
        self.snap.swap_current.get(group).copied()
    }
    fn memory_event(&self, group: &str, ev: MemEvent) -> Option<u64> {
        let key = match ev {
            MemEvent::High => "high",
            MemEvent::Max => "max",
            MemEvent::Oom => "oom",
            MemEvent::OomKill => "oom_kill",
            MemEvent::OomGroupKill => "oom_group_kill",
        };
        let events = self.snap.events.get(group)?;
        // Kernels before 5.16 have no oom_group_kill line: that is 0 events, not unknown.
        Some(events.get(key).copied().unwrap_or(0))
    }
    fn pids_current(&self, group: &str) -> Option<u64> {
        self.snap.pids.get(group).copied()
    }
    fn populated(&self, group: &str) -> Option<bool> {
        self.snap.populated.get(group).copied()
    }
    fn memory_available(&self) -> Option<u64> {
        self.snap.available
    }
    fn thermal_millic(&self, zone: &str) -> Option<i64> {
        self.snap.thermal.get(zone).copied()
    }
    fn running(&self, pattern: &str) -> bool {
        if let Some(v) = self.snap.running.get(pattern) {
            return *v;
        }
        match glob::Pattern::new(pattern) {
            Ok(p) => self.snap.comms.iter().any(|c| p.matches(c)),
            Err(_) => self.snap.comms.iter().any(|c| c == pattern),
        }
    }
    fn exists(&self, group: &str) -> bool {
        self.snap.existing.get(group).copied().unwrap_or(false)
    }
    fn thermal_trip_millic(&self, zone: &str, trip: u32) -> Option<i64> {
        self.snap.trips.get(&(zone.to_string(), trip)).copied()
    }
    fn cooling_state(&self, device: &str) -> Option<u64> {
        self.snap.cooling.get(device).copied()
    }
    fn cpufreq_khz(&self, policy: &str, limit: bool) -> Option<u64> {
        let l = self.snap.limits.get(policy)?;
        if limit {
            Some(l.limit)
        } else {
            l.cur
        }
    }
    fn throttled(&self, policy: &str) -> Option<bool> {
        self.snap.throttled.get(policy).copied()
    }
    fn memstat(&self, m: &crate::policy::expr::MemMetric) -> Option<f64> {
        self.snap.memstat.get(m).copied()
    }
    fn kpi(&self, name: &str, stat: crate::policy::expr::kpi::Stat, w: Duration) -> Option<f64> {
        self.snap.kpi.get(&(name.to_string(), stat, w)).copied()
    }
}
