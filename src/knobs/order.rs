//! The order in which knobs written together are written:
//! the one rule `apply`'s plan and the daemon's writes both follow.
//!
//! Writes fall into sets that the kernel makes depend on each other:
//! - one cpufreq policy's `min` and `max`, and one devfreq device's: the
//!   kernel rejects a floor above the current ceiling (and older kernels a
//!   ceiling below the current floor), so the floor goes first unless it
//!   rises above the ceiling there is now; then the ceiling goes first;
//! - one group's knobs: in [`GroupKnob`](super::GroupKnob) order (`cpuset.mems` before
//!   `cpuset.cpus` before the partition, memory limits from `memory.min`
//!   up through `memory.high` to `memory.max`, so a shrinking group is
//!   throttled at `high` before `max` can OOM it).
//!
//! [`write_order`] puts each set's writes in that order, in the places the
//! set's writes already hold; every other write keeps its place.

use super::{Knob, KnobValue, Slot};
use std::collections::BTreeMap;

/// One write of a batch, for [`write_order`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned<'a> {
    pub(crate) knob: &'a Knob,
    pub(crate) new: &'a KnobValue,
    /// What the knob holds now (read from the kernel, or last written);
    /// `None` when unknown.
    pub(crate) now: Option<&'a KnobValue>,
}

/// The writes that depend on each other (module docs): a family's name
/// and the owner its [`Family::order`](super::Family::order) names.
type Set<'a> = (&'static str, &'a str);

/// A knob's set and its slot in it.
fn set_of(knob: &Knob) -> Option<(Set<'_>, Slot)> {
    let family = knob.family();
    let (owner, slot) = family.order(knob)?;
    Some(((family.name(), owner), slot))
}

/// A frequency in its family's unit (cpufreq kHz, devfreq Hz).
fn freq(v: Option<&KnobValue>) -> Option<u64> {
    match v? {
        KnobValue::Frequency(f) => Some(f.khz()),
        KnobValue::Hz(hz) => Some(*hz),
        _ => None,
    }
}

/// Whether a pair's floor is written before its ceiling: yes, unless the
/// new floor is above the ceiling the device has now.
fn floor_first(new_floor: Option<u64>, ceiling_now: Option<u64>) -> bool {
    match (new_floor, ceiling_now) {
        (Some(floor), Some(ceiling)) => floor <= ceiling,
        _ => true,
    }
}

/// The order to make `writes` in, as indices into `writes` (module docs).
pub(crate) fn write_order(writes: &[Planned<'_>]) -> Vec<usize> {
    let mut sets: BTreeMap<Set<'_>, Vec<usize>> = BTreeMap::new();
    let mut rank: Vec<Slot> = Vec::with_capacity(writes.len());
    for (i, w) in writes.iter().enumerate() {
        match set_of(w.knob) {
            Some((set, r)) => {
                sets.entry(set).or_default().push(i);
                rank.push(r);
            }
            None => rank.push(Slot::Rank(0)),
        }
    }
    let mut out: Vec<usize> = (0..writes.len()).collect();
    for slots in sets.values() {
        let find = |b: Slot| slots.iter().copied().find(|&i| rank[i] == b);
        let floor_goes_first = match (find(Slot::Floor), find(Slot::Ceiling)) {
            (Some(f), Some(c)) => floor_first(freq(Some(writes[f].new)), freq(writes[c].now)),
            _ => true,
        };
        let key = |i: usize| match rank[i] {
            Slot::Rank(r) => r,
            b => usize::from((b == Slot::Floor) != floor_goes_first),
        };
        let mut members = slots.clone();
        members.sort_by_key(|&i| key(i));
        for (&slot, member) in slots.iter().zip(members) {
            out[slot] = member;
        }
    }
    out
}

/// `writes` in the order [`write_order`] gives, judged against what `now`
/// says each pair's ceiling holds (the only reading the order needs, so
/// `now` is asked for nothing else).
pub(crate) fn in_write_order(
    writes: Vec<(Knob, KnobValue)>,
    now: impl Fn(&Knob) -> Option<KnobValue>,
) -> Vec<(Knob, KnobValue)> {
    // Only a pair's ceiling is judged against what it holds now
    // ([`write_order`]): the other knobs are not read.
    let held: Vec<Option<KnobValue>> = writes
        .iter()
        .map(|(k, _)| match set_of(k) {
            Some((_, Slot::Ceiling)) => now(k),
            _ => None,
        })
        .collect();
    let planned: Vec<Planned> = writes
        .iter()
        .zip(&held)
        .map(|((knob, new), now)| Planned {
            knob,
            new,
            now: now.as_ref(),
        })
        .collect();
    let order = write_order(&planned);
    let mut slots: Vec<Option<(Knob, KnobValue)>> = writes.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::{CpufreqAttr, DevfreqAttr, GroupKnob};
    use crate::units::Frequency;

    fn cpufreq(attr: CpufreqAttr) -> Knob {
        Knob::Cpufreq {
            policy: "policy4".into(),
            attr,
        }
    }

    fn khz(n: u64) -> KnobValue {
        KnobValue::Frequency(Frequency { khz: n })
    }

    fn order(items: &[(Knob, KnobValue, Option<KnobValue>)]) -> Vec<String> {
        let planned: Vec<Planned> = items
            .iter()
            .map(|(knob, new, now)| Planned {
                knob,
                new,
                now: now.as_ref(),
            })
            .collect();
        write_order(&planned)
            .into_iter()
            .map(|i| items[i].0.to_string())
            .collect()
    }

    #[test]
    fn a_ceiling_goes_up_before_a_floor_above_it() {
        let items = [
            (
                cpufreq(CpufreqAttr::Min),
                khz(2_000_000),
                Some(khz(300_000)),
            ),
            (
                cpufreq(CpufreqAttr::Max),
                khz(2_400_000),
                Some(khz(1_500_000)),
            ),
        ];
        assert_eq!(
            order(&items),
            ["cpufreq.policy4.max", "cpufreq.policy4.min"]
        );
    }

    #[test]
    fn a_floor_comes_down_before_a_lower_ceiling() {
        let items = [
            (
                cpufreq(CpufreqAttr::Max),
                khz(1_000_000),
                Some(khz(2_400_000)),
            ),
            (
                cpufreq(CpufreqAttr::Min),
                khz(300_000),
                Some(khz(1_800_000)),
            ),
        ];
        assert_eq!(
            order(&items),
            ["cpufreq.policy4.min", "cpufreq.policy4.max"]
        );
    }

    #[test]
    fn devfreq_pairs_follow_the_same_rule_in_hz() {
        let k = |attr| Knob::Devfreq {
            device: "gpu".into(),
            attr,
        };
        let up = [
            (
                k(DevfreqAttr::Min),
                KnobValue::Hz(600),
                Some(KnobValue::Hz(100)),
            ),
            (
                k(DevfreqAttr::Max),
                KnobValue::Hz(900),
                Some(KnobValue::Hz(500)),
            ),
        ];
        assert_eq!(order(&up), ["devfreq.gpu.max", "devfreq.gpu.min"]);
        let down = [
            (
                k(DevfreqAttr::Max),
                KnobValue::Hz(200),
                Some(KnobValue::Hz(900)),
            ),
            (
                k(DevfreqAttr::Min),
                KnobValue::Hz(100),
                Some(KnobValue::Hz(600)),
            ),
        ];
        assert_eq!(order(&down), ["devfreq.gpu.min", "devfreq.gpu.max"]);
    }

    #[test]
    fn group_memory_limits_go_from_min_to_max_and_others_keep_their_place() {
        let g = |knob| Knob::Group {
            group: "app".into(),
            knob,
        };
        let size = KnobValue::Size(crate::units::Size::Max);
        let items = [
            (g(GroupKnob::MemoryMax), size.clone(), None),
            (
                Knob::Sysctl("vm.swappiness".into()),
                KnobValue::Int(10),
                None,
            ),
            (g(GroupKnob::MemoryHigh), size.clone(), None),
            (
                cpufreq(CpufreqAttr::Governor),
                KnobValue::Word("x".into()),
                None,
            ),
            (g(GroupKnob::MemoryMin), size, None),
        ];
        assert_eq!(
            order(&items),
            [
                "app.memory.min",
                "sysctl.vm.swappiness",
                "app.memory.high",
                "cpufreq.policy4.governor",
                "app.memory.max"
            ]
        );
    }

    #[test]
    fn sets_are_ordered_apart() {
        let p = |policy: &str, attr| Knob::Cpufreq {
            policy: policy.into(),
            attr,
        };
        let items = [
            (p("policy0", CpufreqAttr::Min), khz(2_000_000), None),
            (p("policy4", CpufreqAttr::Min), khz(2_000_000), None),
            (
                p("policy0", CpufreqAttr::Max),
                khz(2_400_000),
                Some(khz(1_000_000)),
            ),
            (
                p("policy4", CpufreqAttr::Max),
                khz(2_400_000),
                Some(khz(2_400_000)),
            ),
        ];
        assert_eq!(
            order(&items),
            [
                "cpufreq.policy0.max",
                "cpufreq.policy4.min",
                "cpufreq.policy0.min",
                "cpufreq.policy4.max"
            ]
        );
    }
}
