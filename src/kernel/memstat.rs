//! Memory telemetry files: `/proc/vmstat`
//! counters, `/proc/buddyinfo` free blocks per order (the fragmentation
//! index) and a zram device's `mm_stat`. Parsers are total: unknown lines
//! are kept or skipped, never an error; a missing file is.

use super::error::Result;
use super::root::Root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) const VMSTAT: &str = "/proc/vmstat";
pub(crate) const BUDDYINFO: &str = "/proc/buddyinfo";

/// `/proc/vmstat`: `name value` lines.
pub(crate) fn parse_vmstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, v) = (w.next()?, w.next()?.parse().ok()?);
            Some((name.to_string(), v))
        })
        .collect()
}

pub(crate) fn vmstat(root: &Root) -> Result<BTreeMap<String, u64>> {
    Ok(parse_vmstat(&root.read(Path::new(VMSTAT))?))
}

/// A vmstat counter by the name rules use: `allocstall` sums the kernel's
/// per-zone `allocstall_*` lines (4.12+); any other name is the line.
pub(crate) fn vmstat_value(vm: &BTreeMap<String, u64>, field: &str) -> Option<u64> {
    if let Some(v) = vm.get(field) {
        return Some(*v);
    }
    if field == "allocstall" {
        let parts: Vec<u64> = vm
            .iter()
            .filter(|(k, _)| k.starts_with("allocstall_"))
            .map(|(_, v)| *v)
            .collect();
        if !parts.is_empty() {
            return Some(parts.iter().fold(0, |a, b| a.saturating_add(*b)));
        }
    }
    None
}

/// Free blocks per order summed over every node and zone of
/// `/proc/buddyinfo` (`Node 0, zone   Normal   12   5   3 …`).
pub(crate) fn parse_buddyinfo(text: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for line in text.lines() {
        // The counts follow the zone name: the words after `zone NAME`.
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(z) = words.iter().position(|w| *w == "zone") else {
            continue;
        };
        let counts = words.get(z + 2..).unwrap_or(&[]);
        for (order, w) in counts.iter().enumerate() {
            let Ok(n) = w.parse::<u64>() else { break };
            if out.len() <= order {
                out.resize(order + 1, 0);
            }
            out[order] = out[order].saturating_add(n);
        }
    }
    out
}

pub(crate) fn buddyinfo(root: &Root) -> Result<Vec<u64>> {
    Ok(parse_buddyinfo(&root.read(Path::new(BUDDYINFO))?))
}

/// The unusable free space index for `order` (0–1), as the kernel's
/// `extfrag/unusable_index` computes it per zone, here over all zones:
/// the share of free pages that sit in blocks smaller than `2^order`
/// pages, so cannot serve an allocation of that order. No free page at
/// all is 1 (nothing can be served). `None` past the orders listed.
pub(crate) fn unusable_index(free_blocks: &[u64], order: usize) -> Option<f64> {
    if order >= free_blocks.len() {
        return None;
    }
    let pages = |i: usize, n: u64| n.saturating_mul(1u64 << i.min(63));
    let total: u64 = free_blocks
        .iter()
        .enumerate()
        .map(|(i, n)| pages(i, *n))
        .fold(0, u64::saturating_add);
    if total == 0 {
        return Some(1.0);
    }
    let usable: u64 = free_blocks
        .iter()
        .enumerate()
        .skip(order)
        .map(|(i, n)| pages(i, *n))
        .fold(0, u64::saturating_add);
    Some(total.saturating_sub(usable) as f64 / total as f64)
}

/// `mm_stat` of zram device `dev`.
pub(crate) fn mm_stat_path(dev: &str) -> PathBuf {
    PathBuf::from(format!("/sys/block/{dev}/mm_stat"))
}

/// `(orig_data_size, compr_data_size, mem_used_total)` from `mm_stat`.
pub(crate) fn parse_mm_stat(text: &str) -> Option<[u64; 3]> {
    let mut w = text.split_whitespace().map(|x| x.parse::<u64>());
    Some([w.next()?.ok()?, w.next()?.ok()?, w.next()?.ok()?])
}

/// The zram devices present (`/sys/block/zram*`).
pub(crate) fn zram_devices(root: &Root) -> Vec<String> {
    root.list_dir(Path::new("/sys/block"))
        .map(|d| d.into_iter().filter(|n| n.starts_with("zram")).collect())
        .unwrap_or_default()
}

pub(crate) fn mm_stat(root: &Root, dev: &str) -> Result<Option<[u64; 3]>> {
    Ok(parse_mm_stat(&root.read(&mm_stat_path(dev))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As a 6.1 guest printed it (2 GiB, 4 CPUs).
    const BUDDY: &str = "Node 0, zone      DMA      1      0      0      1      2      1      1      0      1      1      3 \n\
Node 0, zone    DMA32    263    154     76     41     21     14      9      6      4      3    418 \n";

    #[test]
    fn buddyinfo_sums_zones_per_order() {
        let b = parse_buddyinfo(BUDDY);
        assert_eq!(b.len(), 11);
        assert_eq!(b[0], 264);
        assert_eq!(b[10], 421);
    }

    #[test]
    fn unusable_index_is_the_share_of_free_pages_in_smaller_blocks() {
        // 4 single pages and one order-2 block (4 pages): 8 free pages.
        let b = [4, 0, 1];
        assert_eq!(unusable_index(&b, 0), Some(0.0));
        assert_eq!(unusable_index(&b, 1), Some(0.5));
        assert_eq!(unusable_index(&b, 2), Some(0.5));
        assert_eq!(unusable_index(&b, 3), None);
        assert_eq!(unusable_index(&[0, 0], 1), Some(1.0));
        let idx = unusable_index(&parse_buddyinfo(BUDDY), 10).unwrap();
        assert!(idx > 0.0 && idx < 0.5, "{idx}");
    }

    #[test]
    fn vmstat_and_mm_stat_parse_what_the_kernel_prints() {
        let v = parse_vmstat("nr_free_pages 12345\noom_kill 2\nallocstall_normal 7\njunk\n");
        assert_eq!(v.get("oom_kill"), Some(&2));
        assert_eq!(v.get("nr_free_pages"), Some(&12345));
        assert_eq!(v.len(), 3);
        assert_eq!(
            parse_mm_stat(
                "  4096   74   12288        0    12288        0        0        0        0\n"
            ),
            Some([4096, 74, 12288])
        );
        assert_eq!(parse_mm_stat("1 2"), None);
    }
}
