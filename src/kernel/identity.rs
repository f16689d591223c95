//! Who this device is, for `cgwarden_device_info` (the fleet's view): host
//! name, machine id, board model and kernel release, read through [`Root`]
//! so a fake tree (`--root`) answers with its own files.
//!
//! Sources, first readable wins:
//! - hostname: `/proc/sys/kernel/hostname` (the UTS name, as `uname -n`);
//! - machine id: `/etc/machine-id` (systemd's; 32 hex digits), else
//!   `/var/lib/dbus/machine-id`;
//! - model: `/proc/device-tree/model` (arm64 boards: the device tree's
//!   `model` property, NUL-terminated), else DMI's
//!   `/sys/class/dmi/id/product_name` (x86 and UEFI arm64 servers);
//! - kernel: `/proc/sys/kernel/osrelease` (as `uname -r`).
//!
//! A source that is missing or unreadable gives an empty value (an empty
//! label is an absent label in PromQL); values are cut at the first NUL or
//! newline and to [`MAX_LEN`] bytes, so a hostile file cannot make a label
//! grow without bound.

use super::root::Root;
use std::path::Path;

/// The longest identity value kept (bytes, at a character boundary).
pub(crate) const MAX_LEN: usize = 128;

/// The device's identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Device {
    pub(crate) hostname: String,
    pub(crate) machine_id: String,
    pub(crate) model: String,
    pub(crate) kernel: String,
}

const HOSTNAME: &str = "/proc/sys/kernel/hostname";
const MACHINE_IDS: [&str; 2] = ["/etc/machine-id", "/var/lib/dbus/machine-id"];
const MODELS: [&str; 2] = ["/proc/device-tree/model", "/sys/class/dmi/id/product_name"];
const OSRELEASE: &str = "/proc/sys/kernel/osrelease";

/// The first line of `raw`, before any NUL, trimmed and bounded.
fn clean(raw: &[u8]) -> String {
    let end = raw
        .iter()
        .position(|b| *b == 0 || *b == b'\n')
        .unwrap_or(raw.len());
    let text = String::from_utf8_lossy(&raw[..end]);
    let mut t = text.trim().to_string();
    if t.len() > MAX_LEN {
        let mut cut = MAX_LEN;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
    }
    t
}

/// The first of `paths` that reads as a non-empty value.
fn first(root: &Root, paths: &[&str]) -> String {
    paths
        .iter()
        .find_map(|p| {
            let bytes = root.read_bytes(Path::new(p)).ok()?;
            Some(clean(&bytes)).filter(|v| !v.is_empty())
        })
        .unwrap_or_default()
}

/// Where a board says what it is, first readable wins: the SoC's name
/// (`soc0/machine`, from the SoC vendor's socinfo driver), else the first
/// entry of the device tree's root `compatible` (the most specific), else
/// DMI's product name (x86, UEFI arm64). A policy's `targets:` are keyed by
/// it.
pub(crate) const BOARD_NAMES: [&str; 3] = [
    "/sys/devices/soc0/machine",
    "/proc/device-tree/compatible",
    "/sys/class/dmi/id/product_name",
];

/// What the board says it is and which file said it; `None` when none of
/// [`BOARD_NAMES`] reads as a value.
pub(crate) fn board_name(root: &Root) -> Option<crate::knobs::board::Identity> {
    BOARD_NAMES.iter().find_map(|p| {
        let bytes = root.read_bytes(Path::new(p)).ok()?;
        // `compatible` is a NUL-separated list; `clean` keeps the first.
        Some(clean(&bytes))
            .filter(|v| !v.is_empty())
            .map(|name| crate::knobs::board::Identity {
                name,
                source: p.to_string(),
            })
    })
}

impl Device {
    /// Reads the identity now (a few small reads; never fails).
    pub(crate) fn read(root: &Root) -> Device {
        Device {
            hostname: first(root, &[HOSTNAME]),
            machine_id: first(root, &MACHINE_IDS),
            model: first(root, &MODELS),
            kernel: first(root, &[OSRELEASE]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let r = Root::fake(d.path());
        (d, r)
    }

    fn put(d: &Path, rel: &str, bytes: &[u8]) {
        let p = d.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn device_tree_model_wins_over_dmi_and_nul_ends_it() {
        let (d, r) = tree();
        put(d.path(), "proc/sys/kernel/hostname", b"cell-07\n");
        put(
            d.path(),
            "etc/machine-id",
            b"0123456789abcdef0123456789abcdef\n",
        );
        // What the kernel shows: the property's bytes with its NUL.
        put(
            d.path(),
            "proc/device-tree/model",
            b"Qualcomm Technologies, Inc. IQ-9075 EVK\0",
        );
        put(d.path(), "sys/class/dmi/id/product_name", b"Standard PC\n");
        put(d.path(), "proc/sys/kernel/osrelease", b"6.6.52-rt43\n");
        assert_eq!(
            Device::read(&r),
            Device {
                hostname: "cell-07".into(),
                machine_id: "0123456789abcdef0123456789abcdef".into(),
                model: "Qualcomm Technologies, Inc. IQ-9075 EVK".into(),
                kernel: "6.6.52-rt43".into(),
            }
        );
    }

    #[test]
    fn dmi_when_no_device_tree_and_empty_when_nothing() {
        let (d, r) = tree();
        put(
            d.path(),
            "sys/class/dmi/id/product_name",
            b"Standard PC (Q35 + ICH9, 2009)\n",
        );
        put(d.path(), "var/lib/dbus/machine-id", b"feedface\n");
        let dev = Device::read(&r);
        assert_eq!(dev.model, "Standard PC (Q35 + ICH9, 2009)");
        assert_eq!(dev.machine_id, "feedface");
        assert_eq!(dev.hostname, "");
        assert_eq!(dev.kernel, "");
    }

    #[test]
    fn the_board_name_is_the_soc_then_the_first_compatible_then_dmi() {
        let (d, r) = tree();
        assert_eq!(board_name(&r), None);
        put(d.path(), "sys/class/dmi/id/product_name", b"Standard PC\n");
        assert_eq!(board_name(&r).unwrap().name, "Standard PC");
        put(
            d.path(),
            "proc/device-tree/compatible",
            b"qcom,qcs6490-rb3gen2\0qcom,qcm6490\0",
        );
        let id = board_name(&r).unwrap();
        assert_eq!(
            (id.name.as_str(), id.source.as_str()),
            ("qcom,qcs6490-rb3gen2", "/proc/device-tree/compatible")
        );
        put(d.path(), "sys/devices/soc0/machine", b"QCS6490\n");
        let id = board_name(&r).unwrap();
        assert_eq!(
            (id.name.as_str(), id.source.as_str()),
            ("QCS6490", "/sys/devices/soc0/machine")
        );
        // An empty file says nothing: the next source speaks.
        put(d.path(), "sys/devices/soc0/machine", b"\n");
        assert_eq!(board_name(&r).unwrap().name, "qcom,qcs6490-rb3gen2");
    }

    #[test]
    fn hostile_values_are_bounded() {
        let (d, r) = tree();
        put(
            d.path(),
            "proc/sys/kernel/hostname",
            "é".repeat(500).as_bytes(),
        );
        put(
            d.path(),
            "proc/device-tree/model",
            b"\xff\xfe model\nsecond line",
        );
        let dev = Device::read(&r);
        assert!(dev.hostname.len() <= MAX_LEN && dev.hostname.starts_with('é'));
        assert_eq!(dev.model, "\u{fffd}\u{fffd} model");
    }
}
