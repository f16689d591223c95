//! The zram family: `zram.DEV.{mem_limit,swap_priority}` for the zram
//! block devices (`/sys/block/zramN`), plus the device files a `system.zram`
//! baseline configures (`comp_algorithm`, `disksize`).
//!
//! It owns the device directory, the attribute files, the files the
//! journal may name (`comp_algorithm`, `disksize`, `mem_limit` of a
//! `zramN`) and the form their originals are kept in ([`restorable`]); hot-added and initialised devices and swap areas are journal
//! entries of their own (`ZRAM_HOTADD`, `ZRAM_INIT`, `SWAPON`).

use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Knob, KnobError, MergePolicy, Shape, Tok,
};
use std::path::{Path, PathBuf};

/// Where zram block devices live.
pub(crate) const BLOCK_DIR: &str = "/sys/block";

/// The attribute files a baseline writes and `reset` restores.
pub(crate) const JOURNALLED_ATTRS: [&str; 3] = ["comp_algorithm", "disksize", "mem_limit"];

/// A zram device attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ZramAttr {
    /// `/sys/block/DEV/mem_limit`.
    MemLimit,
    /// The swap priority the device is (re-)activated with; not a sysfs file.
    SwapPriority,
}

impl ZramAttr {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ZramAttr::MemLimit => "mem_limit",
            ZramAttr::SwapPriority => "swap_priority",
        }
    }
}

/// Family attributes, for "did you mean" on a misspelled last part.
const ZRAM_ATTRS: [&str; 2] = ["mem_limit", "swap_priority"];

/// Device path of `/sys/block/<dev>` (`dev`: `zram0`; a `/` is replaced so
/// the name stays one component).
pub(crate) fn device_dir(dev: &str) -> PathBuf {
    Path::new(BLOCK_DIR).join(dev.replace('/', "_"))
}

/// Device path of attribute `attr` of `dev`.
pub(crate) fn attr_path(dev: &str, attr: &str) -> PathBuf {
    device_dir(dev).join(attr)
}

/// The original the journal keeps for a zram attribute that reads `read`,
/// where that is not what the file takes back: `comp_algorithm` lists every
/// algorithm with the active one in brackets (`lzo [lzo-rle] lz4`) but takes
/// one name (the whole list is EINVAL), so the journal keeps the active name.
pub(super) fn restorable(path: &Path, read: &str) -> Option<String> {
    let c = super::below(path, BLOCK_DIR)?;
    match c.as_slice() {
        [dev, "comp_algorithm"] if is_numbered(dev, "zram") => {
            let active = super::normalize::display(super::normalize::Form::Bracketed, read);
            (!active.is_empty()).then_some(active)
        }
        _ => None,
    }
}

/// The zram family's registry entry.
pub(super) static FAMILY: Family = Family {
    head: Some("zram"),
    parse: Some(parse_zram),
    shapes,
    owns,
    doc,
};

fn shapes(_: &[&str]) -> Vec<Shape> {
    ZRAM_ATTRS
        .iter()
        .map(|a| {
            super::shape(
                "zram.zram",
                Some(Tok::Run(super::digit, 1, 5)),
                &format!(".{a}"),
            )
        })
        .collect()
}

fn owns(path: &Path, _: &Path) -> bool {
    let Some(c) = super::below(path, BLOCK_DIR) else {
        return false;
    };
    matches!(c.as_slice(), [dev, f] if is_numbered(dev, "zram") && JOURNALLED_ATTRS.contains(f))
}

fn doc() -> Vec<DocRow> {
    vec![
        DocRow {
            knob: "`zram.DEV.mem_limit`".into(),
            values: "bytes (`0` lifts the limit)",
            merge: MergePolicy::FirstWins,
            file: format!("`{BLOCK_DIR}/DEV/mem_limit`"),
        },
        DocRow {
            knob: "`zram.DEV.swap_priority`".into(),
            values: "-1–32767 (taken at swapon)",
            merge: MergePolicy::FirstWins,
            file: "swapon(2) flags, no file".into(),
        },
    ]
}

fn parse_zram(text: &str, rest: &str) -> Result<Knob, KnobError> {
    let (device, attr_text) = rest.split_once('.').ok_or_else(|| {
        KnobError::new(format!(
            "unknown knob `{text}`: expected zram.DEV.{{mem_limit,swap_priority}}"
        ))
    })?;
    if !is_numbered(device, "zram") {
        return Err(KnobError::new(format!(
            "invalid zram device `{device}` in `{text}`: expected `zramN`"
        )));
    }
    let attr = match attr_text {
        "mem_limit" => ZramAttr::MemLimit,
        "swap_priority" => ZramAttr::SwapPriority,
        other => {
            let hint = suggest(other, ZRAM_ATTRS).map(|a| format!("zram.{device}.{a}"));
            return Err(KnobError::new(format!(
                "unknown zram attribute `{other}` in `{text}`: expected mem_limit or swap_priority"
            ))
            .with_hint(did_you_mean(hint)));
        }
    };
    Ok(Knob::Zram {
        device: device.to_string(),
        attr,
    })
}
