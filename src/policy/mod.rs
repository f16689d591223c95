//! The policy: YAML model, value units, the rule language and validation.
//! Pure: nothing here touches the system, so `check` runs anywhere.

pub mod decode;
pub mod diag;
pub mod expr;
pub mod knob;
pub mod model;
pub mod units;
pub mod yaml;

pub use diag::Diagnostics;
pub use model::Policy;

use std::path::Path;

/// The largest policy file accepted (SPEC §4 "Trust"): far above any real
/// policy, small enough that a careless path (`/dev/zero`, a log file) is
/// refused before it costs memory or time.
pub const MAX_POLICY_BYTES: u64 = 4 << 20;

/// Reads, parses and validates a policy file; every problem is in the error.
/// The file must be a regular file of at most [`MAX_POLICY_BYTES`]: it is
/// opened non-blocking (a FIFO cannot hang the open), checked with `fstat`
/// on the open descriptor, and read through a reader capped one byte past the
/// limit, so no input makes this read more than 4 MiB + 1.
pub fn load(path: &Path) -> Result<Policy, Diagnostics> {
    let name = path.display().to_string();
    match read_bounded(path) {
        Ok(bytes) => load_bytes(&name, &bytes),
        Err(msg) => {
            let mut d = Diagnostics::new(name);
            d.error(yaml::Pos::new(1, 1), msg);
            Err(d)
        }
    }
}

/// The bytes of a policy file, or why it is refused.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot read the policy: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the policy: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "cannot read the policy: it is not a regular file ({})",
            file_kind(&meta.file_type())
        ));
    }
    let too_big = || {
        format!(
            "cannot read the policy: it is larger than {} MiB; a policy is a small text file",
            MAX_POLICY_BYTES >> 20
        )
    };
    if meta.len() > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    // The size may change between fstat and read (a file being written):
    // the cap holds whatever the file does.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_POLICY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the policy: {e}"))?;
    if bytes.len() as u64 > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Parses and validates policy text; `name` is used in diagnostics.
pub fn load_bytes(name: &str, bytes: &[u8]) -> Result<Policy, Diagnostics> {
    let mut diags = Diagnostics::new(name);
    let doc = match yaml::parse(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            diags.error(e.pos, e.message);
            return Err(diags);
        }
    };
    match decode::decode(&doc, &mut diags) {
        Some(p) if diags.is_empty() => Ok(p),
        _ => {
            if diags.is_empty() {
                diags.error(yaml::Pos::new(1, 1), "the policy could not be read");
            }
            Err(diags.sorted())
        }
    }
}

/// One-line summary printed by `check` for a valid policy.
pub fn summary(p: &Policy) -> String {
    format!(
        "ok: {} groups, {} rules, {} placements, {} hooks",
        p.all_groups().len(),
        p.rules.len(),
        p.placement.len(),
        p.hooks.len()
    )
}

/// Controllers the rules need in group `group`: `memory` to read its
/// `memory.*` metrics, `pids` for `pids.current`, and the controller of every
/// group knob a rule sets, raises or lowers there.
pub fn rule_controllers(p: &Policy, group: &str) -> Vec<&'static str> {
    use expr::{ExprKind, Metric};
    let mut out = Vec::new();
    for r in &p.rules {
        let mut stack = vec![&r.when];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Or(a, b) | ExprKind::And(a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                ExprKind::Not(a) => stack.push(a),
                ExprKind::Compare(c) => {
                    let ctrl = match &c.metric {
                        Metric::MemoryCurrent { group: g }
                        | Metric::SwapCurrent { group: g }
                        | Metric::MemoryEvent { group: g, .. } => {
                            (g.value == group).then_some("memory")
                        }
                        Metric::PidsCurrent { group: g } => (g.value == group).then_some("pids"),
                        _ => None,
                    };
                    out.extend(ctrl);
                }
                ExprKind::Running(_) | ExprKind::Exists(_) => {}
            }
        }
        for a in r.then.iter().chain(&r.while_) {
            if let Some(knob::Knob::Group { group: g, knob }) = a.knob() {
                if g == group {
                    out.push(knob.controller());
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
