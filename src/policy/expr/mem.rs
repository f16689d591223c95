//! Memory telemetry metrics of the rule language: the names
//! `host.vmstat.FIELD` (a rate per second of a `/proc/vmstat` counter),
//! `host.meminfo.FIELD` (bytes), `zram.DEV.FIELD` (`mm_stat`, bytes) and
//! `host.fragmentation.ORDER` (the unusable free space index, 0–1).

use std::fmt;

/// The `/proc/vmstat` counters a rule may read as a rate. `allocstall` is
/// the sum of the kernel's per-zone `allocstall_*` lines.
pub(crate) const VMSTAT_FIELDS: [&str; 15] = [
    "allocstall",
    "pgscan_direct",
    "pgscan_kswapd",
    "pgsteal_direct",
    "pgsteal_kswapd",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "workingset_refault_anon",
    "workingset_refault_file",
    "oom_kill",
    "pswpin",
    "pswpout",
    "pgmajfault",
    "pgfault",
];

/// `mm_stat`'s first three fields, in the file's order.
pub(crate) const ZRAM_FIELDS: [&str; 3] = ["orig_data_size", "compr_data_size", "mem_used_total"];

/// Largest page order accepted (`MAX_ORDER` is 10 with 4 KiB pages; larger
/// with bigger pages or a raised `CONFIG_ARCH_FORCE_MAX_ORDER`).
pub(crate) const MAX_ORDER: u32 = 15;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemMetric {
    /// A `/proc/vmstat` counter's rate, per second.
    Vmstat(String),
    /// A `/proc/meminfo` line, bytes (`kB` lines converted).
    Meminfo(String),
    /// `/sys/block/DEV/mm_stat`: field index into [`ZRAM_FIELDS`], bytes.
    Zram { device: String, field: usize },
    /// The unusable free space index of `/proc/buddyinfo` for an order.
    Fragmentation(u32),
}

impl MemMetric {
    /// Whether the metric is in bytes (else a plain number).
    pub(crate) fn is_bytes(&self) -> bool {
        matches!(self, MemMetric::Meminfo(_) | MemMetric::Zram { .. })
    }
}

impl fmt::Display for MemMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemMetric::Vmstat(n) => write!(f, "host.vmstat.{n}"),
            MemMetric::Meminfo(n) => write!(f, "host.meminfo.{n}"),
            MemMetric::Zram { device, field } => {
                write!(
                    f,
                    "zram.{device}.{}",
                    ZRAM_FIELDS.get(*field).unwrap_or(&"?")
                )
            }
            MemMetric::Fragmentation(o) => write!(f, "host.fragmentation.{o}"),
        }
    }
}

/// The file a memory metric is read from (for "metric unavailable").
pub(crate) fn source(m: &MemMetric) -> String {
    match m {
        MemMetric::Vmstat(n) => format!("/proc/vmstat ({n})"),
        MemMetric::Meminfo(n) => format!("/proc/meminfo ({n})"),
        MemMetric::Zram { device, .. } => format!("/sys/block/{device}/mm_stat"),
        MemMetric::Fragmentation(_) => "/proc/buddyinfo".to_string(),
    }
}

/// Whether `d` is a zram device name (`zram0`…).
fn is_zram_device(d: &str) -> bool {
    d.strip_prefix("zram")
        .is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A dotted name's parts as a memory metric: `None` when it is not one of
/// these forms at all, `Some(Err)` for a bad field of one of them.
pub(crate) fn parse(names: &[&str]) -> Option<Result<MemMetric, String>> {
    match names {
        ["host", "vmstat", field] => Some(if VMSTAT_FIELDS.contains(field) {
            Ok(MemMetric::Vmstat(field.to_string()))
        } else {
            let hint = crate::policy::diag::hint(field, VMSTAT_FIELDS.iter().copied());
            Err(format!(
                "unknown vmstat counter `{field}`{hint} (known: {})",
                VMSTAT_FIELDS.join(", ")
            ))
        }),
        ["host", "meminfo", field] => Some(
            if !field.is_empty()
                && field.len() <= 32
                && field
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && field.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
            {
                Ok(MemMetric::Meminfo(field.to_string()))
            } else {
                Err(format!(
                    "`{field}` is not a /proc/meminfo line name (they are spelled as the file spells them: Slab, CmaFree, SwapFree, …)"
                ))
            },
        ),
        ["host", "fragmentation", order] => Some(match order.parse::<u32>() {
            Ok(o) if o <= MAX_ORDER => Ok(MemMetric::Fragmentation(o)),
            _ => Err(format!(
                "host.fragmentation takes a page order 0-{MAX_ORDER}, found `{order}`"
            )),
        }),
        ["zram", device, field] if is_zram_device(device) => {
            Some(match ZRAM_FIELDS.iter().position(|f| f == field) {
                Some(i) => Ok(MemMetric::Zram {
                    device: device.to_string(),
                    field: i,
                }),
                None => Err(format!(
                    "unknown zram metric `{field}`: expected {}",
                    ZRAM_FIELDS.join(", ")
                )),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for text in [
            "host.vmstat.allocstall",
            "host.meminfo.CmaFree",
            "zram.zram0.mem_used_total",
            "host.fragmentation.3",
        ] {
            let parts: Vec<&str> = text.split('.').collect();
            let m = parse(&parts).expect("a memory metric").expect("valid");
            assert_eq!(m.to_string(), text);
        }
        assert!(parse(&["host", "vmstat", "allocstal"])
            .unwrap()
            .unwrap_err()
            .contains("did you mean `allocstall`"));
        assert!(parse(&["host", "fragmentation", "99"]).unwrap().is_err());
        assert!(parse(&["host", "meminfo", "slab"]).unwrap().is_err());
        assert!(parse(&["app", "memory", "current"]).is_none());
        assert!(parse(&["zram", "sda", "orig_data_size"]).is_none());
    }
}
