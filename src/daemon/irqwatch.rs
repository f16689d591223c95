//! `system.irqs` and `system.kthreads` applied to IRQs (and their
//! `irq/N-…` threads) that appear after startup — a module loaded, a
//! device hot-added, a CAN interface brought up.
//!
//! Mechanism: one thread (`cgw-irq`) blocks on the kernel's device events
//! (`NETLINK_KOBJECT_UEVENT`, kernel::uevent): a driver binding or a device
//! being added is when a driver requests its IRQs. After an event (and a
//! 100 ms settle, for a driver that requests them after its bind event) it
//! plans `system.irqs`/`system.kthreads` again and applies what differs,
//! through the daemon's journal. Some IRQs are requested without a device
//! event (a network driver's at `ip link set … up`), so the thread also
//! rescans every `settings.rescan` (default 30 s): the cost of one rescan
//! is a readdir of `/sys/kernel/irq` and one small read per IRQ, plus one
//! `/proc/PID/stat` read per task when a rule sets a thread's scheduling.
//! No rule lists: no thread. A fake root has no uevents: the rescan alone.

use super::lanes::{lock_journal, SharedJournal};
use crate::converge::{Converger, Plan};
use crate::kernel::uevent::Uevents;
use crate::kernel::Root;
use crate::policy::model::Policy;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// After a device event, how long the driver gets to request its IRQs.
const SETTLE: Duration = Duration::from_millis(100);

/// The watcher thread's handle: the policy it applies (replaced on reload).
pub(super) struct IrqWatch {
    policy: Arc<Mutex<Policy>>,
}

fn has_rules(p: &Policy) -> bool {
    !p.system.irqs.is_empty() || !p.system.kthreads.is_empty()
}

impl IrqWatch {
    /// Starts the thread when the policy has IRQ or kthread rules.
    /// `journal`: `None` in a dry run (plans are logged, nothing written).
    pub(super) fn start(
        root: &Root,
        policy: &Policy,
        journal: Option<SharedJournal>,
    ) -> Option<IrqWatch> {
        Self::start_with(root, policy, journal, false)
    }

    /// [`IrqWatch::start`]; `now`: plan and apply once right away (a reload
    /// that brings the first rules: startup's `apply` did not place them).
    pub(super) fn start_with(
        root: &Root,
        policy: &Policy,
        journal: Option<SharedJournal>,
        now: bool,
    ) -> Option<IrqWatch> {
        if !has_rules(policy) {
            return None;
        }
        let shared = Arc::new(Mutex::new(policy.clone()));
        let (root, p) = (root.clone(), shared.clone());
        let interval = policy.settings.rescan;
        let spawned = std::thread::Builder::new()
            .name("cgw-irq".into())
            .stack_size(crate::kernel::residency::STACK)
            .spawn(move || run(root, p, journal, interval, now));
        match spawned {
            Ok(_) => Some(IrqWatch { policy: shared }),
            Err(e) => {
                tracing::error!(
                    "cannot start the IRQ watcher thread: {e}; system.irqs applies at startup only"
                );
                None
            }
        }
    }

    /// A reload: the thread applies `policy` from its next wake-up.
    pub(super) fn set_policy(&self, policy: &Policy) {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy.clone();
    }
}

fn run(
    root: Root,
    policy: Arc<Mutex<Policy>>,
    journal: Option<SharedJournal>,
    interval: Duration,
    mut first_now: bool,
) {
    // Netlink needs a kernel, as the process-events connector does.
    let uevents = if !root.supports(crate::kernel::Op::ProcConnector) {
        None
    } else {
        match Uevents::open() {
            Ok(u) => Some(u),
            Err(e) => {
                tracing::warn!("device events unavailable ({e}); new IRQs are placed at the next rescan (every {interval:?})");
                None
            }
        }
    };
    loop {
        let woke = match (&uevents, std::mem::take(&mut first_now)) {
            (_, true) => false,
            (Some(u), false) => u.wait(interval).unwrap_or(false),
            (None, false) => {
                std::thread::sleep(interval);
                false
            }
        };
        if woke {
            std::thread::sleep(SETTLE);
            if let Some(u) = &uevents {
                u.drain();
            }
        }
        let p = policy.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !has_rules(&p) {
            continue;
        }
        let conv = Converger::new(root.clone(), &p);
        let mut plan = Plan::default();
        conv.plan_hardware_threads(&mut plan);
        if plan.steps.is_empty() {
            continue;
        }
        let cause = if woke { "device event" } else { "rescan" };
        let Some(j) = &journal else {
            for s in &plan.steps {
                tracing::info!(cause, "would {s} (dry run)");
            }
            continue;
        };
        let mut guard = lock_journal(j);
        match conv.apply_journalled(&plan, &mut guard, &mut |l| tracing::info!(cause, "{l}")) {
            Ok(done) => {
                for f in &done.failures {
                    tracing::warn!(cause, "system.irqs/kthreads: {f}");
                }
            }
            Err(e) => tracing::error!("system.irqs/kthreads: the originals journal: {e}"),
        }
    }
}
