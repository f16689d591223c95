//! The zram family: `zram.DEV.{mem_limit,swap_priority}` for the zram
//! block devices (`/sys/block/zramN`), plus the device files a `system.zram`
//! baseline configures (`comp_algorithm`, `disksize`).
//!
//! It owns the device directory, the attribute files, the files the
//! journal may name (`comp_algorithm`, `disksize`, `mem_limit` of a
//! `zramN`) and the form their originals are kept in (`Family::restorable`); hot-added and initialised devices and swap areas are journal
//! entries of their own (`ZRAM_HOTADD`, `ZRAM_INIT`, `SWAPON`).

use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Id, Knob, KnobError, KnobValue,
    MergePolicy, Places, Shape, Tok, ValueKind,
};
use std::fmt;
use std::path::{Path, PathBuf};

/// The kernel's list of active swap areas.
pub(crate) const PROC_SWAPS: &str = "/proc/swaps";

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

/// Device node of `dev` on the target: `/dev/zram0`.
pub(crate) fn dev_node(dev: &str) -> PathBuf {
    Path::new("/dev").join(dev.replace('/', "_"))
}

/// One line of `/proc/swaps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SwapEntry {
    /// Device or file path (octal escapes such as `\040` decoded).
    pub(crate) path: String,
    /// `partition` or `file`.
    pub(crate) kind: String,
    pub(crate) size_kib: u64,
    pub(crate) used_kib: u64,
    pub(crate) priority: i32,
}

/// Decodes the `\ooo` escapes the kernel uses for spaces etc. in paths.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `/proc/swaps`; the header and malformed lines are skipped.
pub(crate) fn parse_swaps(text: &str) -> Vec<SwapEntry> {
    let mut v = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0] == "Filename" {
            continue;
        }
        // The path is the first field; with " (deleted)" the count grows.
        let n = f.len();
        let (Ok(size), Ok(used), Ok(prio)) = (
            f[n - 3].parse::<u64>(),
            f[n - 2].parse::<u64>(),
            f[n - 1].parse::<i32>(),
        ) else {
            continue;
        };
        v.push(SwapEntry {
            path: unescape_octal(&f[..n - 4].join(" ")),
            kind: f[n - 4].to_string(),
            size_kib: size,
            used_kib: used,
            priority: prio,
        });
    }
    v
}

/// The zram family.
pub(super) struct Zram;

/// The zram family's registration.
pub(super) static FAMILY: Zram = Zram;

impl Family for Zram {
    fn id(&self) -> Id {
        Id {
            name: "zram",
            head: Some("zram"),
            grammar: Some("zram.DEV.ATTR"),
        }
    }

    fn parse(&self, text: &str, rest: &str) -> Result<Knob, KnobError> {
        parse_zram(text, rest)
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
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

    fn owns(&self, path: &Path, _: &Path) -> bool {
        let Some(c) = super::below(path, BLOCK_DIR) else {
            return false;
        };
        matches!(c.as_slice(), [dev, f] if is_numbered(dev, "zram") && JOURNALLED_ATTRS.contains(f))
    }

    fn doc(&self) -> Vec<DocRow> {
        vec![
            DocRow {
                knob: "`zram.DEV.mem_limit`".into(),
                values: "bytes (`0` lifts the limit)",
                merge: MergePolicy::First,
                file: format!("`{BLOCK_DIR}/DEV/mem_limit`"),
            },
            DocRow {
                knob: "`zram.DEV.swap_priority`".into(),
                values: "-1–32767 (taken at swapon)",
                merge: MergePolicy::First,
                file: "swapon(2) flags, no file".into(),
            },
        ]
    }

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::Zram { device, attr } => write!(f, "zram.{device}.{}", attr.name()),
            _ => Ok(()),
        }
    }

    fn kind(&self, knob: &Knob) -> ValueKind {
        match knob {
            Knob::Zram {
                attr: ZramAttr::SwapPriority,
                ..
            } => ValueKind::Int {
                min: -1,
                max: 32767,
            },
            _ => ValueKind::Size { allow_max: false },
        }
    }

    fn path(&self, knob: &Knob, _: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::Zram { device, attr } => match attr {
                ZramAttr::MemLimit => Ok(attr_path(device, "mem_limit")),
                ZramAttr::SwapPriority => Err(format!(
                    "zram.{device}.swap_priority is no file: the kernel takes it at swapon ({PROC_SWAPS})"
                )),
            },
            _ => Err(format!("{knob} is not a zram knob")),
        }
    }

    /// A swap priority is taken at swapon: it cannot change while the device
    /// swaps. zram reads `max` as no digits, i.e. 0: no limit; say `0`.
    fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
        at: &Places<'_>,
    ) -> Result<(PathBuf, String), String> {
        match knob {
            Knob::Zram {
                device,
                attr: ZramAttr::SwapPriority,
            } => Err(format!(
                "zram.{device}.swap_priority cannot change while {device} is swapping (the kernel takes the priority at swapon); it applies at the next apply after swapoff"
            )),
            _ => Ok((self.path(knob, at)?, value.kernel().replace("max", "0"))),
        }
    }

    /// A swap priority is taken at swapon.
    fn unverifiable_without_swap(&self, knob: &Knob) -> Option<&'static str> {
        matches!(
            knob,
            Knob::Zram {
                attr: ZramAttr::SwapPriority,
                ..
            }
        )
        .then_some("swapon is skipped on a fake root")
    }

    /// A swap priority is read from `/proc/swaps`.
    fn read_path(&self, knob: &Knob, at: &Places<'_>) -> PathBuf {
        match knob {
            Knob::Zram {
                attr: ZramAttr::SwapPriority,
                ..
            } => PathBuf::from(PROC_SWAPS),
            _ => self.path(knob, at).unwrap_or_default(),
        }
    }

    fn read(&self, knob: &Knob, at: &Places<'_>) -> Option<KnobValue> {
        if let Knob::Zram {
            device,
            attr: ZramAttr::SwapPriority,
        } = knob
        {
            let node = dev_node(device);
            let swaps = parse_swaps(&at.files.text(Path::new(PROC_SWAPS))?);
            let e = swaps.iter().find(|s| s.path == node.to_string_lossy())?;
            return Some(KnobValue::Int(i64::from(e.priority)));
        }
        knob.parse_kernel(&at.files.text(&self.path(knob, at).ok()?)?)
            .ok()
    }

    /// The original the journal keeps for a zram attribute that reads `read`,
    /// where that is not what the file takes back: `comp_algorithm` lists every
    /// algorithm with the active one in brackets (`lzo [lzo-rle] lz4`) but takes
    /// one name (the whole list is EINVAL), so the journal keeps the active name.
    fn restorable(&self, path: &Path, _: &Path, read: &str) -> Option<String> {
        let c = super::below(path, BLOCK_DIR)?;
        match c.as_slice() {
            [dev, "comp_algorithm"] if is_numbered(dev, "zram") => {
                let active = super::normalize::display(super::normalize::Form::Bracketed, read);
                (!active.is_empty()).then_some(active)
            }
            _ => None,
        }
    }
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
