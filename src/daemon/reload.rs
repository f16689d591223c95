//! Hot reload of the policy in the running daemon. Triggers: SIGHUP, the policy file changing on disk (its
//! directory is watched, see [`watch::spawn_policy_watch`]: an in-place
//! write, an editor's rename-replace, a package manager's write; debounced,
//! skipped when the content hash did not change), and the varlink `Reload`
//! method, which calls [`Daemon::reload`].
//!
//! A reload parses and validates the new file fully first (the same checks
//! as startup: size and file type, every diagnostic, the root-ownership
//! trust check of the file and its hook programs). A refused policy changes
//! nothing: no knob is written, no state changes; the error is logged and
//! kept in `last_reload_error` (for `status`). A valid one is applied as a
//! difference, never through defaults:
//!
//! - new groups are created (journalled mkdir first, the controllers their
//!   parents must delegate, then their baselines through the knob table and
//!   the actuator's lanes, which journal originals); their event files are
//!   watched; groups the policy no longer has stay, reported in the diff
//!   (`reset` removes them);
//! - baselines whose policy value changed are written; a `then`-set
//!   baseline survives when the policy's value for that knob did not change;
//!   knobs newly named by rules are seeded from the journal or the kernel;
//! - rules are matched by name: a kept rule keeps its state even when its
//!   text (threshold, timing) changed, and is re-evaluated from the next
//!   step; an active one re-issues its claims under its new index (first-wins
//!   ranks by index) with its new `while` values. A removed rule's claims are
//!   released and, if it was active, its `while` hooks get `cleared`. Boosts
//!   stay while their knob exists (a knob of a removed group: released);
//! - PSI triggers follow the new conditions: kept ones stay registered, a
//!   removed one's task is aborted (its fd closed) and its id retired, never
//!   reused, so a wake still queued for it is ignored; new ones get new ids.
//!   The stall history of PSI lines still needed is kept; `memory.events`
//!   counts of kept groups are kept (the evaluator is not rebuilt);
//! - placement rules and `running()` patterns are handed to the exec thread
//!   in one message, swapped between two events, followed by a full rescan;
//! - hooks are reconfigured; runs already started go on; an unchanged hook
//!   keeps its rate-limit clock.
//!
//! Settings that cannot change live (the hierarchy and journal location,
//! the daemon's own scheduling, the sampling timers, metrics and the
//! control socket's group, zram devices and the realtime tuning applied by
//! converge): a reload that changes any of them is **refused**, naming the
//! setting; the operator restarts the daemon for those. `settings.on_missing`
//! and `product` may change live.

use super::{notify, watch, Daemon};
use crate::engine::condition::sampled_needs;
use crate::engine::rule_state::Phase;
use crate::engine::supervisor::{policy_baselines, rule_knobs};
use crate::policy::model::{Policy, Rule};
use crate::policy::yaml::Pos;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// The policy in force and what is known of its file.
#[derive(Debug)]
pub(super) struct Loaded {
    pub(super) policy: Policy,
    /// sha256 (hex) of the policy file in force.
    pub(super) hash: String,
    /// When the policy in force was loaded (startup or last reload).
    pub(super) at: SystemTime,
    /// Why the last reload was refused; cleared by a successful one.
    pub(super) last_error: Option<String>,
}

impl Loaded {
    pub(super) fn new(policy: Policy) -> Loaded {
        Loaded {
            policy,
            hash: String::new(),
            at: SystemTime::now(),
            last_error: None,
        }
    }
}

/// What a reload did (or, with dry_run, would do).
#[derive(Debug, Clone, Default)]
// `ok` and `hash` are read by the varlink `Reload` method (control socket).
#[allow(dead_code)]
pub(crate) struct ReloadReport {
    pub(crate) ok: bool,
    /// Why the new policy was refused (every diagnostic line, FILE:LINE:COL form); None when ok.
    pub(crate) error: Option<String>,
    /// Human-readable difference, one line per change; `= rule … kept`
    /// lines (an active rule's state survives) are not changes.
    pub(crate) diff: Vec<String>,
    /// How many lines of `diff` are changes.
    pub(crate) changes: usize,
    /// Hash of the policy content loaded (hex sha256); with dry_run, of the
    /// content previewed (the file, or the candidate).
    pub(crate) hash: String,
}

/// How many lines of a [`policy_diff`] are changes (not `= … kept`).
fn count_changes(diff: &[String]) -> usize {
    diff.iter().filter(|l| !l.starts_with("= ")).count()
}

/// Hex sha256 of `bytes`.
pub(crate) fn hash_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The policy file's bytes, read and refused exactly as startup reads them
/// ([`crate::policy::read_bytes`]: a regular file of at most 4 MiB).
fn read_policy(path: &Path) -> Result<Vec<u8>, String> {
    crate::policy::read_bytes(path).map_err(|m| format!("{}:1:1: error: {m}", path.display()))
}

/// The settings a reload cannot change, named in the refusal: each with
/// the keys where it is written (`["settings", "tick"]`), for the
/// refusal's position.
fn fixed_settings(old: &Policy, new: &Policy) -> Vec<(Vec<&'static str>, String)> {
    let (a, b) = (&old.settings, &new.settings);
    let mut out = Vec::new();
    let mut check = |name: &'static str, same: bool| {
        if !same {
            out.push((
                vec!["settings", name],
                format!("settings.{name} cannot change while the daemon runs; restart it to apply"),
            ));
        }
    };
    check("cgroup_root", a.cgroup_root == b.cgroup_root);
    check("state_dir", a.state_dir == b.state_dir);
    check("tick", a.tick == b.tick);
    check("rescan", a.rescan == b.rescan);
    check("socket_group", a.socket_group == b.socket_group);
    check("metrics", a.metrics == b.metrics);
    check("recorder", a.recorder == b.recorder);
    check(
        "daemon",
        format!("{:?}", a.daemon) == format!("{:?}", b.daemon),
    );
    // Everything else of `settings` but on_missing, whatever fields it grows.
    let mut rest = b.clone();
    rest.on_missing = a.on_missing;
    let fixed = format!("{a:?}") == format!("{rest:?}");
    if out.is_empty() && !fixed {
        out.push((
            vec!["settings"],
            "settings (other than on_missing) cannot change while the daemon runs; restart it to apply"
                .to_string(),
        ));
    }
    // System parts converge applies and the knob table does not carry.
    let zram_devices = |p: &Policy| {
        p.system
            .zram
            .iter()
            .map(|z| {
                let mut z = z.clone();
                z.mem_limit = None;
                z.swap_priority = None;
                format!("{z:?}")
            })
            .collect::<Vec<_>>()
    };
    if zram_devices(old) != zram_devices(new) {
        out.push((vec!["system", "zram"], "system.zram devices (other than mem_limit and swap_priority) cannot change while the daemon runs; restart it to apply".into()));
    }
    if format!("{:?}", old.system.realtime) != format!("{:?}", new.system.realtime) {
        out.push((
            vec!["system", "realtime"],
            "system.realtime cannot change while the daemon runs; restart it to apply".into(),
        ));
    }
    let text_sysctls = |p: &Policy| {
        p.system
            .sysctl
            .iter()
            .filter(|(_, v)| v.parse::<i64>().is_err())
            .cloned()
            .collect::<Vec<_>>()
    };
    if text_sysctls(old) != text_sysctls(new) {
        out.push((vec!["system", "sysctl"], "system.sysctl entries with non-integer values cannot change while the daemon runs; restart it to apply".into()));
    }
    out
}

/// A rule's text, for "changed or not".
fn rule_text(r: &Rule) -> String {
    let acts = |v: &[crate::policy::expr::Action]| {
        v.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "{}|{:?}|{:?}|{:?}|{}|{}",
        r.when_text,
        r.for_,
        r.hold,
        r.cooldown,
        acts(&r.then),
        acts(&r.while_)
    )
}

/// The difference between two policies, one line per change. `phases`:
/// each old rule's phase and since-when, on the clock of `now`.
pub(crate) fn policy_diff(
    old: &Policy,
    new: &Policy,
    phases: &std::collections::HashMap<String, (Phase, Option<std::time::Duration>)>,
    now: std::time::Duration,
) -> Vec<String> {
    let mut out = Vec::new();
    if old.product != new.product {
        out.push(format!("~ product {} -> {}", old.product, new.product));
    }
    let old_groups: BTreeSet<String> = old.all_groups().iter().map(|g| g.name.clone()).collect();
    let new_groups: BTreeSet<String> = new.all_groups().iter().map(|g| g.name.clone()).collect();
    for g in new.all_groups() {
        if !old_groups.contains(&g.name) {
            out.push(format!("+ group {}", g.name));
        }
    }
    for g in old.all_groups() {
        if !new_groups.contains(&g.name) {
            out.push(format!(
                "! group {} no longer in the policy: left in place, `cgwarden reset` removes it",
                g.name
            ));
        }
    }
    let ob: BTreeMap<_, _> = policy_baselines(old).into_iter().collect();
    let nb: BTreeMap<_, _> = policy_baselines(new).into_iter().collect();
    for (k, v) in &nb {
        match ob.get(k) {
            None => out.push(format!("+ {k} = {v}")),
            Some(o) if o != v => out.push(format!("~ {k} {o} -> {v}")),
            Some(_) => {}
        }
    }
    for (k, v) in &ob {
        if !nb.contains_key(k) {
            out.push(format!(
                "~ {k} no longer set by the policy: keeps its value ({v})"
            ));
        }
    }
    let old_rules: BTreeMap<&str, (usize, &Rule)> = old
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), (i, r)))
        .collect();
    let new_names: HashSet<&str> = new.rules.iter().map(|r| r.name.as_str()).collect();
    for (i, r) in new.rules.iter().enumerate() {
        let Some((oi, o)) = old_rules.get(r.name.as_str()) else {
            out.push(format!("+ rule {}", r.name));
            continue;
        };
        let (phase, since) = phases.get(&r.name).copied().unwrap_or((Phase::Idle, None));
        let state = match since {
            Some(t) if phase != Phase::Idle => {
                // Whole seconds ago, which a reader takes in at once (not
                // seconds since the daemon started).
                let ago = std::time::Duration::from_secs(now.saturating_sub(t).as_secs());
                format!(
                    "{} since {} ago",
                    phase.as_str(),
                    crate::units::Duration(ago)
                )
            }
            _ => phase.as_str().to_string(),
        };
        if rule_text(o) != rule_text(r) {
            out.push(format!("~ rule {} (changed; state kept: {state})", r.name));
        } else if *oi != i {
            out.push(format!(
                "~ rule {} moved {} -> {} (state kept: {state})",
                r.name, oi, i
            ));
        } else if phase != Phase::Idle {
            out.push(format!("= rule {} kept ({state})", r.name));
        }
    }
    for r in &old.rules {
        if new_names.contains(r.name.as_str()) {
            continue;
        }
        let active = phases.get(&r.name).is_some_and(|(p, _)| p.is_active());
        if active {
            out.push(format!("- rule {} (active: claims released)", r.name));
        } else {
            out.push(format!("- rule {}", r.name));
        }
    }
    // What a placement does, not where it is written: a line added above
    // it moved its position and was reported as a change.
    let placements = |p: &Policy| -> Vec<String> {
        p.placement
            .iter()
            .map(|x| format!("{:?}|{}|{:?}", x.matcher, x.group, x.sched))
            .collect()
    };
    if placements(old) != placements(new) {
        out.push(format!(
            "~ placement: {}",
            crate::show::count(new.placement.len(), "rule")
        ));
    }
    let hooks = |p: &Policy| -> BTreeMap<String, String> {
        p.hooks
            .iter()
            .map(|h| (h.name.clone(), format!("{h:?}")))
            .collect()
    };
    let (oh, nh) = (hooks(old), hooks(new));
    for (n, h) in &nh {
        match oh.get(n) {
            None => out.push(format!("+ hook {n}")),
            Some(o) if o != h => out.push(format!("~ hook {n}")),
            Some(_) => {}
        }
    }
    for n in oh.keys() {
        if !nh.contains_key(n) {
            out.push(format!("- hook {n}"));
        }
    }
    let triggers = |p: &Policy| -> BTreeSet<String> {
        sampled_needs(&p.rules)
            .psi_triggers
            .iter()
            .map(|(k, a, w)| format!("{} {:?} {:?} {a:?}/{w:?}", k.target, k.resource, k.stall))
            .collect()
    };
    let (ot, nt) = (triggers(old), triggers(new));
    for t in nt.difference(&ot) {
        out.push(format!("+ PSI trigger {t}"));
    }
    for t in ot.difference(&nt) {
        out.push(format!("- PSI trigger {t}"));
    }
    out
}

impl Daemon {
    /// Startup: the hash of the policy in force, and the watch on its
    /// directory (a reload when the file changes).
    pub(super) fn watch_policy_file(&mut self, tx: &mpsc::Sender<watch::Wake>) {
        if let Ok(bytes) = read_policy(&self.opts.policy_path) {
            self.loaded.hash = hash_hex(&bytes);
        }
        let Some(services) = self.control.services() else {
            tracing::warn!("policy file not watched (no services thread); reload with SIGHUP");
            return;
        };
        if let Err(e) = watch::spawn_policy_watch(&services, &self.opts.policy_path, tx.clone()) {
            tracing::warn!("policy file not watched ({e}); reload with SIGHUP");
        }
    }

    /// The policy file changed on disk: reload unless its content is the
    /// one in force (an editor rewriting the same bytes, a touch).
    pub(super) fn reload_if_changed(&mut self) {
        if let Ok(bytes) = read_policy(&self.opts.policy_path) {
            // The content in force, and its last reload did not fail (a
            // rollback writing the old file back after a refused one is
            // reloaded: the refusal is over, `health` and the metric say so).
            if hash_hex(&bytes) == self.loaded.hash && self.loaded.last_error.is_none() {
                tracing::debug!("policy file written, content unchanged: no reload");
                return;
            }
        }
        tracing::info!(path = %self.opts.policy_path.display(), "policy file changed: reloading");
        self.reload_for_control(false, None);
    }

    /// Re-reads the policy file and applies the difference (see the module
    /// documentation); with `dry_run`, only computes the difference.
    /// `candidate` (dry run only): a name and YAML text previewed instead of
    /// the file.
    pub(crate) fn reload(
        &mut self,
        dry_run: bool,
        candidate: Option<(String, String)>,
    ) -> ReloadReport {
        if !dry_run {
            let mut states = vec![sd_notify::NotifyState::Reloading];
            if let Ok(m) = sd_notify::NotifyState::monotonic_usec_now() {
                states.push(m);
            }
            notify(&states);
        }
        let report = self.reload_inner(dry_run, candidate);
        let what = if dry_run {
            "reload (dry run)"
        } else {
            "reload"
        };
        match &report.error {
            Some(e) => {
                for line in e.lines() {
                    tracing::error!("{what} refused: {line}");
                }
                tracing::error!("{what} refused: the policy in force is unchanged");
            }
            None => {
                for line in &report.diff {
                    tracing::info!("{what}: {line}");
                }
                tracing::info!(
                    hash = %crate::show::short(&report.hash),
                    changes = report.changes,
                    "{what}: done"
                );
            }
        }
        if !dry_run {
            let status = format!(
                "supervising (policy {})",
                crate::show::short(&self.loaded.hash)
            );
            notify(&[
                sd_notify::NotifyState::Ready,
                sd_notify::NotifyState::Status(&status),
            ]);
            super::priority::settle(what);
        }
        report
    }

    fn reload_inner(&mut self, dry_run: bool, candidate: Option<(String, String)>) -> ReloadReport {
        let refuse = |d: &mut Daemon, error: String| {
            if !dry_run {
                d.loaded.last_error = Some(error.clone());
            }
            ReloadReport {
                ok: false,
                error: Some(error),
                diff: Vec::new(),
                changes: 0,
                hash: d.loaded.hash.clone(),
            }
        };
        let path = self.opts.policy_path.clone();
        let (name, bytes) = match candidate {
            // A candidate is never loaded (the server refuses one without
            // dry_run): the daemon loads the file it watches.
            Some((name, text)) if dry_run => (name, text.into_bytes()),
            _ => match read_policy(&path) {
                Ok(b) => (path.display().to_string(), b),
                Err(e) => return refuse(self, e),
            },
        };
        let hash = hash_hex(&bytes);
        // Judged against the board it will act on, as startup is.
        let root = self.opts.root.clone();
        let board = |p: &Policy| crate::kernel::board::read(&root, &p.settings.cgroup_root);
        let new = match crate::policy::load_bytes_on(&name, &bytes, board) {
            Ok(p) => p,
            Err(d) => return refuse(self, d.to_string().trim_end().to_string()),
        };
        let trust = if name == path.display().to_string() {
            crate::converge::trust::refusals(&path, &new)
        } else {
            // The candidate's file is the client's to trust; its hooks are
            // the daemon's to run once it is installed.
            crate::converge::trust::hook_refusals(&new)
        };
        let fixed = fixed_settings(&self.loaded.policy, &new);
        if !trust.is_empty() || !fixed.is_empty() {
            // A setting that cannot change is refused at its line (or its
            // block's, when the new policy leaves it out).
            let doc = crate::policy::yaml::parse(&bytes).ok();
            let at = |keys: &[&str]| {
                doc.as_ref()
                    .and_then(|d| d.deepest_key_pos(keys))
                    .unwrap_or(Pos::new(1, 1))
            };
            let text = trust
                .into_iter()
                .map(|e| (Pos::new(1, 1), e))
                .chain(fixed.into_iter().map(|(keys, e)| (at(&keys), e)))
                .map(|(p, e)| format!("{name}:{}:{}: error: {e}", p.line, p.col))
                .collect::<Vec<_>>()
                .join("\n");
            return refuse(self, text);
        }
        let phases = self.supervisor.phases_by_name(&self.loaded.policy);
        let diff = policy_diff(&self.loaded.policy, &new, &phases, self.now());
        let changes = count_changes(&diff);
        if dry_run {
            return ReloadReport {
                ok: true,
                error: None,
                diff,
                changes,
                hash,
            };
        }
        self.apply_policy(new);
        self.loaded.hash = hash.clone();
        self.loaded.at = SystemTime::now();
        self.loaded.last_error = None;
        ReloadReport {
            ok: true,
            error: None,
            diff,
            changes,
            hash,
        }
    }

    /// Puts a validated policy in force, as a difference.
    fn apply_policy(&mut self, new: Policy) {
        let old_groups: HashSet<String> = self
            .loaded
            .policy
            .all_groups()
            .iter()
            .map(|g| g.name.clone())
            .collect();
        self.groups.create(
            &new,
            &old_groups,
            &self.actuator,
            &self.opts.root,
            self.opts.dry_run,
        );
        let old = std::mem::replace(&mut self.loaded.policy, new);
        match &self.groups.irqwatch {
            Some(w) => w.set_policy(&self.loaded.policy),
            // The first IRQ/kthread rules: start the watcher, placing now
            // (a reload --dry-run returned before this).
            None => {
                self.groups.irqwatch = super::irqwatch::IrqWatch::start_with(
                    &self.opts.root,
                    &self.loaded.policy,
                    self.actuator.shared_journal(),
                    true,
                )
            }
        }
        self.actuator.add_groups(&self.loaded.policy);
        // Knobs newly named by rules: seeded as at startup (Daemon::new).
        for knob in rule_knobs(&self.loaded.policy) {
            if self.supervisor.table().baseline(&knob).is_some() {
                continue;
            }
            let live = self.actuator.read(&knob);
            if let Some(baseline) = self.actuator.original(&knob).or_else(|| live.clone()) {
                self.supervisor.seed(&knob, baseline, live);
            }
        }
        let now = self.now();
        let effects = self.supervisor.reload(&old, &self.loaded.policy, now);
        // The sampler and the PSI triggers follow the new conditions.
        let needs = sampled_needs(&self.loaded.policy.rules);
        self.telemetry
            .sampler
            .set_needs(super::actuator::group_paths(&self.loaded.policy), needs);
        if let Some(tape) = self
            .telemetry
            .observe
            .as_mut()
            .and_then(|o| o.tape.as_mut())
        {
            tape.set_policy(&self.loaded.policy); // the new rules' inputs
        }
        self.triggers
            .sync(&self.opts.root, &mut self.telemetry.sampler);
        self.groups.dirty = true;
        self.watch_event_files();
        if let Some(tx) = self.triggers.waker() {
            let running = self.telemetry.sampler.needs().running.clone();
            let root = self.opts.root.clone();
            if let Some(x) = &mut self.groups.exec {
                x.swap(&root, &self.loaded.policy, &running, !self.opts.dry_run, tx);
            }
        }
        self.hooks
            .reconfigure(&self.loaded.policy.hooks, &self.opts.root);
        self.say_live_hooks();
        self.carry_out(effects);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Options;
    use super::*;
    use crate::kernel::Root;
    use std::path::PathBuf;

    const BASE: &str = "version: 1\ngroups:\n  a:\n    memory: { high: 1G }\n  b: {}\n";
    const STALL: &str = "rules:\n  - name: stall\n    when: a.memory.some > 100ms/1s\n    then: [set b.memory.high = 1G]\n";

    /// A daemon (its own dry run: nothing is written) on a fake root with
    /// the policy in `dir/policy.yaml`.
    fn daemon(dir: &Path, text: &str) -> (Daemon, PathBuf) {
        let root = Root::fake(dir.join("root"));
        for g in ["a", "b"] {
            let d = Path::new("/sys/fs/cgroup").join(g);
            root.mkdir_all(&d).unwrap();
            root.write(&d.join("memory.high"), "max").unwrap();
        }
        let path = dir.join("policy.yaml");
        std::fs::write(&path, text).unwrap();
        let policy = crate::policy::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let opts = Options {
            policy_path: path.clone(),
            root,
            dry_run: true,
            tick: None,
        };
        let (tx, _rx) = mpsc::channel(16);
        let mut d = Daemon::new(opts, policy, None, tx.clone());
        d.start_watchers(&tx);
        d.loaded.hash = hash_hex(text.as_bytes());
        (d, path)
    }

    #[tokio::test]
    async fn a_dry_run_reports_the_difference_and_changes_nothing() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, path) = daemon(t.path(), &format!("{BASE}{STALL}"));
        let hash = d.loaded.hash.clone();
        std::fs::write(&path, format!("{BASE}  c: {{}}\nrules: []\n")).unwrap();
        let r = d.reload(true, None);
        assert!(r.ok, "{r:?}");
        assert!(r.diff.iter().any(|l| l == "+ group c"), "{:?}", r.diff);
        assert!(r.diff.iter().any(|l| l == "- rule stall"), "{:?}", r.diff);
        assert!(
            r.diff.iter().any(|l| l.starts_with("- PSI trigger")),
            "{:?}",
            r.diff
        );
        assert_eq!(d.loaded.policy.rules.len(), 1);
        assert!(d.loaded.policy.group("c").is_none());
        assert_eq!(d.loaded.hash, hash);
        assert_eq!(
            d.triggers.psi.len(),
            1,
            "the kept stall rule's trigger only"
        );
    }

    /// A placement that only moved down the file (a group added above it)
    /// is not a change (no `~ placement: N rules` line).
    #[test]
    fn a_placement_that_only_moved_in_the_file_is_no_change() {
        let pl = "placement:\n  - match: { comm: x }\n    group: b\n";
        let old = crate::policy::load_bytes("p", format!("{BASE}{pl}").as_bytes()).unwrap();
        let new =
            crate::policy::load_bytes("p", format!("{BASE}  c: {{}}\n{pl}").as_bytes()).unwrap();
        let d = policy_diff(&old, &new, &Default::default(), Default::default());
        assert_eq!(d, vec!["+ group c".to_string()]);
        let moved = pl.replace("group: b", "group: c");
        let new =
            crate::policy::load_bytes("p", format!("{BASE}  c: {{}}\n{moved}").as_bytes()).unwrap();
        let d = policy_diff(&old, &new, &Default::default(), Default::default());
        assert!(d.contains(&"~ placement: 1 rule".to_string()), "{d:?}");
    }

    #[tokio::test]
    async fn a_refused_policy_is_kept_as_the_last_error_until_a_good_reload() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, path) = daemon(t.path(), &format!("{BASE}{STALL}"));
        std::fs::write(&path, format!("{BASE}  c:\n    memroy: {{ high: 1G }}\n")).unwrap();
        let r = d.reload(false, None);
        assert!(!r.ok);
        let e = r.error.expect("an error");
        assert!(e.contains("policy.yaml:") && e.contains("memroy"), "{e}");
        assert_eq!(d.loaded.last_error.as_deref(), Some(e.as_str()));
        assert_eq!(d.loaded.policy.rules.len(), 1, "the old policy runs on");
        // A setting that cannot change live is refused by name, at its line.
        std::fs::write(&path, format!("{BASE}settings: {{ tick: 2s }}\n{STALL}")).unwrap();
        let r = d.reload(false, None);
        let e = r.error.expect("refused");
        assert!(
            e.contains("policy.yaml:6:13: error: settings.tick cannot change"),
            "{e}"
        );
        // A good one clears it.
        std::fs::write(&path, format!("{BASE}rules: []\n")).unwrap();
        let r = d.reload(false, None);
        assert!(r.ok, "{r:?}");
        assert_eq!(d.loaded.last_error, None);
        assert_eq!(r.hash, d.loaded.hash);
        assert_eq!(d.loaded.policy.rules.len(), 0);
    }

    #[tokio::test]
    async fn a_removed_stall_rule_retires_its_trigger_and_its_wakes_are_ignored() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, path) = daemon(t.path(), &format!("{BASE}{STALL}"));
        let ids = |d: &Daemon| d.triggers.psi.keys().copied().collect::<Vec<_>>();
        assert_eq!(ids(&d), [0]);
        let other = "rules:\n  - name: stall2\n    when: b.cpu.some > 200ms/2s\n    then: [set a.memory.high = 2G]\n";
        std::fs::write(&path, format!("{BASE}{other}")).unwrap();
        assert!(d.reload(false, None).ok);
        assert_eq!(
            ids(&d),
            [1],
            "the removed trigger is gone; ids are never reused"
        );
        // A wake still queued for the removed trigger changes nothing.
        d.on_wake(crate::daemon::watch::Wake::Psi { id: 0 });
        d.on_wake(crate::daemon::watch::Wake::PsiGone { id: 0 });
        assert_eq!(ids(&d), [1]);
        // The same policy again keeps the live trigger (same id).
        assert!(d.reload(false, None).ok);
        assert_eq!(ids(&d), [1]);
    }

    /// A policy reloaded for years, its trigger changing each time (a
    /// threshold tuned back and forth), holds one trigger, not one per
    /// reload.
    #[tokio::test]
    async fn reloads_that_change_a_trigger_do_not_pile_up_triggers() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, path) = daemon(t.path(), &format!("{BASE}{STALL}"));
        for i in 0..40 {
            let ms = if i % 2 == 0 { 120 } else { 100 };
            let rule = format!("rules:\n  - name: stall\n    when: a.memory.some > {ms}ms/1s\n    then: [set b.memory.high = 1G]\n");
            std::fs::write(&path, format!("{BASE}{rule}")).unwrap();
            assert!(d.reload(false, None).ok);
            assert_eq!(d.triggers.psi.len(), 1, "after reload {i}");
        }
        assert_eq!(d.triggers.psi.keys().copied().collect::<Vec<_>>(), [40]);
    }

    /// A start is a reload from nothing: a daemon reloaded to a policy
    /// holds the live triggers a daemon started with it holds.
    #[tokio::test]
    async fn a_reload_leaves_the_triggers_a_start_with_the_new_policy_makes() {
        let other = "rules:\n  - name: s2\n    when: b.cpu.some > 200ms/2s or a.memory.some > 100ms/1s\n    then: [set a.memory.high = 2G]\n";
        let live = |d: &Daemon| {
            let mut v: Vec<String> = d
                .triggers
                .psi
                .values()
                .map(|t| format!("{:?} {:?} {:?}", t.key, t.window, t.state))
                .collect();
            v.sort();
            v
        };
        let t = tempfile::tempdir().unwrap();
        let (mut d, path) = daemon(t.path(), &format!("{BASE}{STALL}"));
        std::fs::write(&path, format!("{BASE}{other}")).unwrap();
        assert!(d.reload(false, None).ok);
        let t2 = tempfile::tempdir().unwrap();
        let (fresh, _) = daemon(t2.path(), &format!("{BASE}{other}"));
        assert_eq!(live(&fresh).len(), 2, "{:?}", live(&fresh));
        assert_eq!(live(&d), live(&fresh));
    }
}
