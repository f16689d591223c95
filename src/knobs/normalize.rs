//! Comparing a desired knob value with what the kernel file holds.
//!
//! Kernel files echo values back in their own forms: `max 100000` for
//! `cpu.max`, `default 100` for `io.weight`, `[lz4] zstd` for zram, cpu lists
//! compressed or not, sizes rounded down to pages. Each knob is compared in
//! its own form so that `apply` twice writes nothing the second time, on a
//! real kernel and on a fake tree alike.

use crate::knobs::GroupKnob;
use crate::units::{CpuList, Size};

/// How a knob's value is read back, and so how it is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Whitespace-insensitive text: sysctls (`4096 87380`), governors, weights.
    Text,
    /// Bytes or `max`; the kernel rounds memory limits down to whole pages.
    Size,
    /// A cpu or memory-node list: `0-3` equals `0,1,2,3`.
    CpuList,
    /// `cpu.max`: `QUOTA PERIOD`, where a missing period is the default 100000.
    CpuMax,
    /// `io.weight`: the `default N` line.
    IoWeight,
    /// `cpu.uclamp.*`: a percentage with two decimals, or `max`.
    Percent,
    /// `cpuset.cpus.partition`: the state word, valid only. The kernel keeps
    /// a partition it cannot honour as `isolated invalid (REASON)` (6.1;
    /// older kernels: `root invalid`), which is never the desired `isolated`.
    Partition,
    /// `cgroup.subtree_control`: the wanted controllers are all enabled.
    ControllerSet,
    /// A hex cpumask, possibly with comma-separated 32-bit words.
    HexMask,
    /// zram `comp_algorithm`: the `[bracketed]` entry is the active one.
    Bracketed,
}

/// How a group knob's file is compared with a desired value.
pub(crate) fn form_of(knob: GroupKnob) -> Form {
    match knob {
        GroupKnob::CpusetMems | GroupKnob::CpusetCpus => Form::CpuList,
        GroupKnob::CpusetPartition => Form::Partition,
        GroupKnob::CpuMax => Form::CpuMax,
        GroupKnob::UclampMin | GroupKnob::UclampMax => Form::Percent,
        GroupKnob::MemoryMin
        | GroupKnob::MemoryLow
        | GroupKnob::MemoryHigh
        | GroupKnob::MemoryMax
        | GroupKnob::MemorySwapMax => Form::Size,
        GroupKnob::IoWeight => Form::IoWeight,
        GroupKnob::CpuWeight | GroupKnob::MemoryOomGroup | GroupKnob::PidsMax => Form::Text,
    }
}

/// True when `current` (as read from the file) already has the effect of
/// `desired` on a kernel with pages of `page` bytes: the kernel keeps
/// memory.* limits in pages, so a written size reads back rounded down to a
/// page (a hard-coded 4 KiB made 16K/64K-page kernels rewrite every size on
/// every apply). The caller asks the kernel (`kernel::wait::page_size`).
pub(crate) fn same(form: Form, current: &str, desired: &str, page: u64) -> bool {
    let cur = current.trim();
    let want = desired.trim();
    match form {
        Form::Text => words(cur) == words(want),
        Form::Size => match (Size::parse(cur), Size::parse(want)) {
            (Ok(Size::Max), Ok(Size::Max)) => true,
            (Ok(Size::Bytes(a)), Ok(Size::Bytes(b))) => a / page == b / page,
            _ => false,
        },
        Form::CpuList => match (CpuList::parse_kernel(cur), CpuList::parse_kernel(want)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        Form::CpuMax => cpu_max(cur).is_some() && cpu_max(cur) == cpu_max(want),
        Form::IoWeight => io_weight(cur).is_some() && io_weight(cur) == io_weight(want),
        Form::Percent => match (percent(cur), percent(want)) {
            (Some(a), Some(b)) => (a - b).abs() < 0.006,
            _ => false,
        },
        Form::Partition => {
            partition_invalid(cur).is_none()
                && partition_invalid(want).is_none()
                && cur.split_whitespace().next() == want.split_whitespace().next()
        }
        Form::ControllerSet => {
            let have = controllers(cur);
            controllers(want).iter().all(|c| have.contains(c))
        }
        Form::HexMask => match (hex_mask(cur), hex_mask(want)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
        Form::Bracketed => active_choice(cur) == active_choice(want),
    }
}

/// The value as a person reads it in `(was …)`: the active zram algorithm,
/// not the whole offer list.
pub(crate) fn display(form: Form, current: &str) -> String {
    match form {
        Form::Bracketed => active_choice(current).to_string(),
        _ => words(current.trim()).join(" "),
    }
}

/// Why the kernel holds a partition invalid: `Some(reason)` for
/// `isolated invalid (Cpu list in cpuset.cpus not exclusive)` (the reason in
/// brackets; empty when the kernel gives none, as before 6.1), `None` for a
/// valid state such as `isolated`, `root` or `member`.
pub(crate) fn partition_invalid(text: &str) -> Option<&str> {
    let t = text.trim();
    let mut it = t.split_whitespace();
    let _state = it.next()?;
    if it.next() != Some("invalid") {
        return None;
    }
    let rest = t.split_once("invalid").map(|(_, r)| r.trim()).unwrap_or("");
    Some(
        rest.strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(rest)
            .trim(),
    )
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

fn cpu_max(s: &str) -> Option<(Option<u64>, u64)> {
    let mut it = s.split_whitespace();
    let quota = match it.next()? {
        "max" => None,
        q => Some(q.parse().ok()?),
    };
    let period = match it.next() {
        Some(p) => p.parse().ok()?,
        None => 100_000,
    };
    Some((quota, period))
}

fn io_weight(s: &str) -> Option<u64> {
    for line in s.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["default", n] => return n.parse().ok(),
            [n] => return n.parse().ok(),
            _ => {}
        }
    }
    None
}

fn percent(s: &str) -> Option<f64> {
    let s = s.trim_end_matches('%');
    if s == "max" {
        return Some(100.0);
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn controllers(s: &str) -> Vec<&str> {
    s.split_whitespace()
        .map(|t| t.trim_start_matches('+'))
        .filter(|t| !t.is_empty() && !t.starts_with('-'))
        .collect()
}

/// A hex mask as 32-bit words, least significant first, without leading zero words.
fn hex_mask(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for word in s.trim().split(',').rev() {
        let w = word.trim();
        if w.is_empty() || w.len() > 8 {
            return None;
        }
        out.push(u32::from_str_radix(w, 16).ok()?);
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    Some(out)
}

/// `lzo [lz4] zstd` → `lz4`; a plain word is its own choice.
fn active_choice(s: &str) -> &str {
    for w in s.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            return inner;
        }
    }
    let mut it = s.split_whitespace();
    match (it.next(), it.next()) {
        (Some(only), None) => only,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`super::same`] on a 4 KiB-page kernel.
    fn same(form: Form, current: &str, desired: &str) -> bool {
        super::same(form, current, desired, 4096)
    }

    #[test]
    fn sizes_compare_in_the_kernels_pages() {
        // 16 KiB pages: 30000 bytes reads back as 16384 (4 KiB pages: 28672).
        assert!(super::same(Form::Size, "16384", "30000", 16384));
        assert!(!super::same(Form::Size, "16384", "30000", 4096));
        // 64 KiB pages.
        assert!(super::same(Form::Size, "65536", "100000", 65536));
        assert!(!super::same(Form::Size, "65536", "131072", 65536));
    }

    #[test]
    fn sizes_compare_in_pages_and_max() {
        assert!(same(Form::Size, "3758096384\n", "3758096384"));
        assert!(same(Form::Size, "max\n", "max"));
        assert!(!same(Form::Size, "max", "1073741824"));
        // The kernel rounds 1000000 bytes down to 999424 (244 pages).
        assert!(same(Form::Size, "999424", "1000000"));
        assert!(!same(Form::Size, "0", "8192"));
    }

    #[test]
    fn cpu_lists_compare_as_sets() {
        assert!(same(Form::CpuList, "0-3\n", "0,1,2,3"));
        assert!(!same(Form::CpuList, "0-3", "0-2"));
        assert!(same(Form::CpuList, "\n", ""));
    }

    #[test]
    fn cpu_max_pairs() {
        assert!(same(Form::CpuMax, "max 100000", "max"));
        assert!(same(Form::CpuMax, "50000 100000\n", "50000 100000"));
        assert!(!same(Form::CpuMax, "max 100000", "50000 100000"));
        assert!(!same(Form::CpuMax, "", "max"));
    }

    #[test]
    fn io_weight_default_line() {
        assert!(same(
            Form::IoWeight,
            "default 500\n8:0 300\n",
            "default 500"
        ));
        assert!(same(Form::IoWeight, "500", "default 500"));
        assert!(!same(Form::IoWeight, "default 100", "default 500"));
    }

    #[test]
    fn percent_two_decimals() {
        assert!(same(Form::Percent, "80.00", "80.00"));
        assert!(same(Form::Percent, "max", "100.00"));
        assert!(!same(Form::Percent, "0.00", "80.00"));
    }

    /// What Debian's 6.1 kernel printed in the guest when a sibling created
    /// outside the policy took the partition's CPU (tests/vm scenario
    /// `partition-invalid`).
    const INVALID_6_1: &str = "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n";

    #[test]
    fn partition_state_valid_only() {
        assert!(same(Form::Partition, "isolated\n", "isolated"));
        assert!(same(Form::Partition, "member\n", "member"));
        assert!(same(Form::Partition, "root", "root"));
        // An invalid partition never counts as converged.
        assert!(!same(Form::Partition, INVALID_6_1, "isolated"));
        assert!(!same(Form::Partition, "root invalid\n", "root"));
        assert!(!same(Form::Partition, INVALID_6_1, "root"));
        assert!(!same(Form::Partition, "member", "isolated"));
        assert!(!same(Form::Partition, "", "isolated"));
        assert_eq!(
            display(Form::Partition, INVALID_6_1),
            "isolated invalid (Cpu list in cpuset.cpus not exclusive)"
        );
    }

    #[test]
    fn partition_invalid_reason() {
        assert_eq!(
            partition_invalid(INVALID_6_1),
            Some("Cpu list in cpuset.cpus not exclusive")
        );
        assert_eq!(partition_invalid("root invalid\n"), Some(""));
        assert_eq!(partition_invalid("isolated\n"), None);
        assert_eq!(partition_invalid("member"), None);
        assert_eq!(partition_invalid(""), None);
        assert_eq!(partition_invalid("invalid"), None);
    }

    #[test]
    fn subtree_control_superset() {
        assert!(same(
            Form::ControllerSet,
            "cpuset cpu io memory pids",
            "+cpu +memory"
        ));
        assert!(!same(Form::ControllerSet, "cpu", "+cpu +memory"));
        assert!(same(Form::ControllerSet, "+cpu +memory\n", "cpu memory"));
    }

    #[test]
    fn hex_masks() {
        assert!(same(Form::HexMask, "00000000,0000007f", "7f"));
        assert!(same(Form::HexMask, "ff\n", "000000ff"));
        assert!(!same(Form::HexMask, "ff", "7f"));
    }

    #[test]
    fn zram_algorithm_brackets() {
        assert!(same(Form::Bracketed, "lzo lzo-rle [lz4] zstd", "lz4"));
        assert!(!same(Form::Bracketed, "[lzo-rle] lz4", "lz4"));
        assert_eq!(display(Form::Bracketed, "[lzo-rle] lz4 zstd\n"), "lzo-rle");
        assert!(same(Form::Bracketed, "lz4\n", "lz4"));
    }

    #[test]
    fn text_ignores_whitespace_runs() {
        assert!(same(
            Form::Text,
            "4096\t87380   6291456\n",
            "4096 87380 6291456"
        ));
        assert!(!same(Form::Text, "30", "60"));
    }
}
