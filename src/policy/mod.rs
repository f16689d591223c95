//! The policy: YAML model, value units, the rule language and validation.
//! Pure: nothing here touches the system, so `check` runs anywhere.

mod binding;
pub(crate) mod bounds;
pub(crate) mod clusters;
pub(crate) mod decode;
pub(crate) mod diag;
pub(crate) mod expr;
pub(crate) mod model;
pub(crate) mod pattern;
pub(crate) mod targets;
pub(crate) mod yaml;

pub(crate) use crate::knobs::board::Board;
pub(crate) use crate::knobs::clusters::Clusters;
pub(crate) use binding::Binding;
pub(crate) use diag::Diagnostics;
pub(crate) use model::Policy;

use std::path::Path;

/// The largest policy file accepted: far above any real
/// policy, small enough that a careless path (`/dev/zero`, a log file) is
/// refused before it costs memory or time.
pub(crate) const MAX_POLICY_BYTES: u64 = 4 << 20;

/// Reads, parses and validates a policy file; every problem is in the error.
/// The file must be a regular file of at most [`MAX_POLICY_BYTES`]: it is
/// opened non-blocking (a FIFO cannot hang the open), checked with `fstat`
/// on the open descriptor, and read through a reader capped one byte past the
/// limit, so no input makes this read more than 4 MiB + 1.
pub(crate) fn load(path: &Path) -> Result<Policy, Diagnostics> {
    load_on(path, |_| Board::unknown())
}

/// [`load`], then the policy judged against the board `board_of` gives for
/// it (read once the policy names its cgroup root): a value outside the
/// board is an error at its position ([`bounds`]).
pub(crate) fn load_on(
    path: &Path,
    board_of: impl FnOnce(&Policy) -> Board,
) -> Result<Policy, Diagnostics> {
    let name = path.display().to_string();
    match read_bytes(path) {
        Ok(bytes) => load_bytes_on(&name, &bytes, board_of),
        Err(msg) => {
            let mut d = Diagnostics::new(name);
            d.error(yaml::Pos::new(1, 1), msg);
            Err(d)
        }
    }
}

/// The bytes of a policy file, or why it is refused (startup and reload
/// read through this one reader).
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
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
    load_bytes_on(name, bytes, |_| Board::unknown())
}

/// [`load_bytes`] judged against a board, as [`load_on`].
pub(crate) fn load_bytes_on(
    name: &str,
    bytes: &[u8],
    board_of: impl FnOnce(&Policy) -> Board,
) -> Result<Policy, Diagnostics> {
    load_bytes_with(name, bytes, board_of, &Target::Board)
}

/// Which of a policy's `targets:` is merged over its base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The one keyed by what the board says it is; none (the base, with a
    /// [`Binding::warning`]) when no target names it.
    Board,
    /// This one (`check --target NAME`); an error if the policy has none
    /// by that name.
    Named(String),
}

/// [`load_on`] with the target chosen by `target`.
pub(crate) fn load_with(
    path: &Path,
    board_of: impl FnOnce(&Policy) -> Board,
    target: &Target,
) -> Result<Policy, Diagnostics> {
    let name = path.display().to_string();
    match read_bytes(path) {
        Ok(bytes) => load_bytes_with(&name, &bytes, board_of, target),
        Err(msg) => {
            let mut d = Diagnostics::new(name);
            d.error(yaml::Pos::new(1, 1), msg);
            Err(d)
        }
    }
}

/// Parses policy text, merges the target `target` chooses over the base,
/// resolves cluster names on the board `board_of` gives (read under the
/// base's cgroup root; on a notional board when it knows nothing), then
/// decodes and judges the result against the board.
pub(crate) fn load_bytes_with(
    name: &str,
    bytes: &[u8],
    board_of: impl FnOnce(&Policy) -> Board,
    target: &Target,
) -> Result<Policy, Diagnostics> {
    let mut diags = Diagnostics::new(name);
    let mut doc = match yaml::parse(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            diags.error(e.pos, e.message);
            return Err(diags);
        }
    };
    let targets = targets::split(&mut doc, &mut diags);
    let after_split = diags.items.len();
    let board = board_of(&decode::settings_only(&doc));
    let chosen = match target {
        Target::Board => board
            .identity
            .as_ref()
            .and_then(|id| targets.iter().find(|(k, _)| k.name == id.name)),
        Target::Named(n) => match targets.iter().find(|(k, _)| k.name == *n) {
            Some(t) => Some(t),
            None => {
                let names: Vec<&str> = targets.iter().map(|(k, _)| k.name.as_str()).collect();
                let has = if names.is_empty() {
                    "it has no `targets:`".to_string()
                } else {
                    format!("its targets are {}", names.join(", "))
                };
                diags.error(
                    yaml::Pos::new(1, 1),
                    format!("the policy has no target `{n}`: {has}"),
                );
                return Err(diags);
            }
        },
    };
    if let Some((k, overlay)) = chosen {
        targets::merge(&mut doc, overlay, &k.name, &mut diags);
    }
    let known = board.is_known();
    let clusters = if known {
        Clusters::of(&board)
    } else {
        Clusters::notional(clusters::needed(&mut doc))
    };
    let (names, named_errors) = clusters::resolve(&mut doc, &clusters, &mut diags);
    let decoded_at = diags.items.len();
    let decoded = decode::decode(&doc, &mut diags);
    // The decoder's own complaint about a name already reported on its line.
    let mut k = 0;
    diags.items.retain(|d| {
        k += 1;
        k <= decoded_at || !named_errors.iter().any(|p| p.line == d.pos.line)
    });
    let mut policy = None;
    if let Some(mut p) = decoded.filter(|_| diags.is_empty()) {
        bounds::judge(&doc, &p, &board, &mut diags);
        p.binding = Binding {
            targets: targets.iter().map(|(k, _)| k.name.clone()).collect(),
            target: chosen.map(|(k, _)| k.name.clone()),
            identity: board.identity.clone(),
            clusters,
            notional: !known,
            names,
        };
        policy = Some(p);
    }
    if let Some((k, _)) = chosen {
        // With a target merged, an error may be the base's text meeting the
        // target's: say which target it was.
        for item in diags.items.iter_mut().skip(after_split) {
            if !item.message.starts_with("target ") {
                item.message = format!("target {}: {}", k.name, item.message);
            }
        }
    }
    match policy {
        Some(p) if diags.is_empty() => Ok(p),
        _ => {
            if diags.is_empty() {
                diags.error(yaml::Pos::new(1, 1), "the policy could not be read");
            }
            Err(diags.sorted())
        }
    }
}

/// True when placement `p` grants a real-time policy (fifo, rr, deadline)
/// on a match any local user can fake: neither `exe:` nor `user:`, so only
/// `comm:`/`cmdline:` (set by `prctl(PR_SET_NAME)` or `exec -a`) decide.
/// `check` warns on it; the daemon grants such a policy only to root's
/// processes (README "Decisions").
pub(crate) fn rt_by_name(p: &model::Placement) -> bool {
    use model::SchedPolicy::{Deadline, Fifo, Rr};
    let rt = |s: &model::Sched| matches!(s.policy, Fifo | Rr | Deadline);
    (p.sched.as_ref().is_some_and(rt)
        || p.tuning
            .threads
            .iter()
            .any(|t| t.sched.as_ref().is_some_and(rt)))
        && p.matcher.exe.is_none()
        && p.matcher.user.is_none()
}

/// Warnings on a valid policy (printed by `check` as
/// `FILE:LINE:COL: warning: MESSAGE`; they never fail it), in file order.
pub(crate) fn warnings(p: &Policy) -> Vec<diag::Diagnostic> {
    let mut out = Vec::new();
    for pl in &p.placement {
        if rt_by_name(pl) {
            let policy = pl
                .sched
                .as_ref()
                .or_else(|| pl.tuning.threads.iter().find_map(|t| t.sched.as_ref()))
                .map_or("", |s| s.policy.as_str());
            out.push(diag::Diagnostic {
                pos: pl.pos,
                message: format!(
                    "placement into `{}` grants sched `{policy}` on a match by name only \
                     (comm/cmdline can be set by any user); add `exe:` or `user:` to the match \
                     (cgwarden grants it to root's processes only)",
                    pl.group
                ),
            });
        }
    }
    // A grant nobody can use: the socket is 0660
    // root:socket_group, so with `root` there no non-root caller connects.
    if p.settings.socket_group == "root" {
        for g in &p.control {
            let who = match &g.subject {
                model::ControlSubject::Group(n) => format!("group `{n}`"),
                model::ControlSubject::User(n) => format!("user `{n}`"),
                model::ControlSubject::Uid(n) => format!("uid {n}"),
            };
            out.push(diag::Diagnostic {
                pos: g.pos,
                message: format!(
                    "the control: grant to {who} cannot be used: settings.socket_group is `root`,                      so the socket (0660 root:root) lets no other caller connect; set                      socket_group to a group the caller is in (docs/control.md, \"Who may connect\")"
                ),
            });
        }
    }
    out.sort_by_key(|d| d.pos);
    out
}

/// One-line summary printed by `check` for a valid policy.
pub(crate) fn summary(p: &Policy) -> String {
    format!(
        "ok: {}, {}, {}, {}; daemon {}",
        count(p.all_groups().len(), "group"),
        count(p.rules.len(), "rule"),
        count(p.placement.len(), "placement"),
        count(p.hooks.len(), "hook"),
        p.settings.daemon
    )
}

/// `1 hook`, `2 hooks`, `0 hooks`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Controllers the rules need in group `group`: `memory` to read its
/// `memory.*` metrics, `pids` for `pids.current`, and the controller of every
/// group knob a rule sets, raises or lowers there.
pub(crate) fn rule_controllers(p: &Policy, group: &str) -> Vec<&'static str> {
    use expr::{ExprKind, Metric};
    let mut out = Vec::new();
    for r in &p.rules {
        for e in r.when.leaves() {
            if let ExprKind::Compare(c) = &e.kind {
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
        }
        for a in r.then.iter().chain(&r.while_) {
            if let Some((g, knob)) = a.knob().and_then(|k| k.group_knob()) {
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

#[cfg(test)]
mod warning_tests {
    #[test]
    fn rt_on_a_name_only_match_warns_and_exe_or_user_silences_it() {
        let text = "version: 1\nproduct: t\ngroups:\n  rt: {}\nplacement:\n  - match: { comm: motion_control }\n    group: rt\n    sched: { policy: fifo, priority: 99 }\n  - match: { cmdline: \"*dl*\" }\n    group: rt\n    sched: { policy: rr, priority: 10 }\n  - match: { comm: a, exe: /opt/a }\n    group: rt\n    sched: { policy: fifo, priority: 9 }\n  - match: { comm: b, user: root }\n    group: rt\n    sched: { policy: fifo, priority: 9 }\n  - match: { comm: c }\n    group: rt\n    sched: { policy: other, nice: -5 }\n";
        let p = super::load_bytes("p.yaml", text.as_bytes()).expect("valid");
        let w = super::warnings(&p);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].pos.line, 6);
        assert!(w[0].message.contains("fifo") && w[0].message.contains("exe:"));
        assert_eq!(w[1].pos.line, 9);
        assert!(w[1].message.contains("`rr`"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_in_the_singular_and_plural() {
        let one = load_bytes(
            "p.yaml",
            b"version: 1\ngroups:\n  app: {}\nplacement:\n  - match: { comm: x }\n    group: app\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            summary(&one),
            "ok: 1 group, 0 rules, 1 placement, 0 hooks; daemon fifo 1, mlock"
        );
        let two = load_bytes("p.yaml", b"version: 1\ngroups:\n  a: {}\n  b: {}\n")
            .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            summary(&two),
            "ok: 2 groups, 0 rules, 0 placements, 0 hooks; daemon fifo 1, mlock"
        );
    }

    #[test]
    fn daemon_settings_default_parse_and_reject() {
        use model::SchedPolicy;
        let d = load_bytes("p.yaml", b"version: 1\n")
            .unwrap()
            .settings
            .daemon;
        assert_eq!(d, model::DaemonSettings::default());
        assert_eq!(d.sched.policy, SchedPolicy::Fifo);
        assert_eq!(d.sched.priority, Some(1));
        assert!(d.mlock && d.cpus.is_none());
        let p = load_bytes(
            "p.yaml",
            b"version: 1\nsettings:\n  daemon:\n    cpus: \"0-1,3\"\n    sched: { policy: other, nice: -10 }\n    mlock: false\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let d = &p.settings.daemon;
        assert_eq!(d.to_string(), "other nice -10, no mlock, cpus 0-1,3");
        assert_eq!(d.sched.nice, Some(-10));
        assert_eq!(d.sched.priority, None);
        let rr = load_bytes(
            "p.yaml",
            b"version: 1\nsettings:\n  daemon: { sched: { policy: rr, priority: 99 } }\n",
        )
        .unwrap();
        assert_eq!(rr.settings.daemon.to_string(), "rr 99, mlock");
        for (body, want) in [
            (
                "{ sched: { policy: fifo, priority: 0 } }",
                "between 1 and 99",
            ),
            (
                "{ sched: { policy: fifo, priority: 100 } }",
                "between 1 and 99",
            ),
            ("{ sched: { policy: fifo } }", "needs `priority:`"),
            (
                "{ sched: { policy: fifo, nice: 3 } }",
                "nice does not apply",
            ),
            (
                "{ sched: { policy: other, nice: 20 } }",
                "between -20 and 19",
            ),
            (
                "{ sched: { policy: other, priority: 5 } }",
                "fifo and rr only",
            ),
            ("{ sched: { policy: deadline } }", "not allowed"),
            ("{ sched: { policy: fifoo, priority: 1 } }", "fifo"),
            ("{ sched: { priority: 1 } }", "needs `policy:`"),
            ("{ cpus: \"3-1\" }", "settings.daemon.cpus"),
            ("{ cpus: \"\" }", "settings.daemon.cpus"),
            ("{ mlock: yes please }", "settings.daemon.mlock"),
            ("{ nice: 3 }", "unknown field `nice` in settings.daemon"),
            ("7", "settings.daemon must be a mapping"),
        ] {
            let text = format!("version: 1\nsettings:\n  daemon: {body}\n");
            let e = load_bytes("p.yaml", text.as_bytes())
                .expect_err(body)
                .to_string();
            assert!(e.contains(want), "{body}: {e}");
            assert!(e.contains("p.yaml:3:"), "{body}: {e}");
        }
    }

    #[test]
    fn numbers_are_quoted_as_written_never_through_a_float() {
        let d = load_bytes(
            "p.yaml",
            b"version: 1\ngroups:\n  app:\n    memory: { max: 18446744073709551616 }\n",
        )
        .expect_err("2^64 bytes is too large");
        let text = d.to_string();
        assert!(text.contains("`18446744073709551616`"), "{text}");
        assert!(!text.contains("18446744073709552000"), "{text}");
    }

    #[test]
    fn sysctls_take_the_kernel_range() {
        for (line, ok) in [
            ("vm.swappiness: -30", false),
            ("vm.swappiness: 201", false),
            ("vm.swappiness: 200", true),
            ("vm.swappiness: 0", true),
            ("vm.dirty_ratio: 101", false),
            ("vm.watermark_scale_factor: 0", false),
            ("vm.watermark_scale_factor: 3000", true),
            ("vm.min_free_kbytes: -1", false),
            ("vm.overcommit_memory: 3", false),
            ("kernel.sched_rt_runtime_us: -1", true),
            ("kernel.sched_rt_runtime_us: -2", false),
            ("vm.swappiness: \"10 20\"", false),
            ("vm.lowmem_reserve_ratio: \"256 256 32\"", true),
            ("vm.page-cluster: 0", true),
            ("vm.page-cluster: 32", false),
            ("net.core.rmem_max: 8388608", true),
            ("net.core.rmem_max: 1024", false),
            ("net.core.wmem_default: 4608", true),
            ("net.core.wmem_default: 4607", false),
            ("net.core.busy_poll: 50", true),
            ("net.core.busy_read: -1", false),
            ("net.core.netdev_max_backlog: 5000", true),
            ("net.ipv4.ipfrag_high_thresh: 8388608", true),
            ("net.ipv4.ipfrag_time: 3", true),
            ("net.ipv4.ipfrag_time: -3", false),
        ] {
            let text = format!("version: 1\nsystem:\n  sysctl:\n    {line}\n");
            let r = load_bytes("p.yaml", text.as_bytes());
            assert_eq!(r.is_ok(), ok, "{line}: {r:?}");
        }
        let rule = b"version: 1\ngroups:\n  app: {}\nrules:\n  - name: r\n    when: app.memory.current > 1G\n    then: [\"set sysctl.vm.swappiness = -30\"]\n";
        assert!(load_bytes("p.yaml", rule).is_err());
        // A dash in the name, in the baseline and in a rule's actions.
        let p = load_bytes(
            "p.yaml",
            b"version: 1\ngroups:\n  app: {}\nsystem:\n  sysctl: { vm.page-cluster: 0 }\nrules:\n  - name: r\n    when: app.memory.current > 1G\n    then: [set sysctl.vm.page-cluster = 3]\n    while: [set sysctl.net.core.busy_poll = 50]\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            p.system.sysctl,
            [("vm.page-cluster".to_string(), "0".to_string())]
        );
        assert_eq!(
            p.rules[0].then[0].to_string(),
            "set sysctl.vm.page-cluster = 3"
        );
        assert_eq!(
            p.rules[0].while_[0].to_string(),
            "set sysctl.net.core.busy_poll = 50"
        );
    }

    #[test]
    fn control_grants_decode_with_defaults() {
        use model::{ControlSubject, DEFAULT_CONTROL_MAX_BOOSTS, DEFAULT_CONTROL_MAX_DURATION};
        use std::time::Duration;
        let text = b"version: 1\ngroups:\n  vision: {}\ncontrol:\n  - group: vision\n    boost: [\"cpufreq.*.min\", vision.memory.high]\n    max_duration: 10m\n    max_boosts: 2\n  - user: alice\n    boost: [\"vision.*\"]\n  - uid: 1000\n    boost: [\"sysctl.vm.swappiness\"]\n    max_duration: 24h\n";
        let p = load_bytes("p.yaml", text).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(p.control.len(), 3);
        let c = &p.control[0];
        assert_eq!(c.subject, ControlSubject::Group("vision".into()));
        assert_eq!(c.boost, ["cpufreq.*.min", "vision.memory.high"]);
        assert_eq!(c.max_duration, Duration::from_secs(600));
        assert_eq!(c.max_boosts, 2);
        assert_eq!(c.pos.line, 5);
        let c = &p.control[1];
        assert_eq!(c.subject, ControlSubject::User("alice".into()));
        assert_eq!(c.max_duration, DEFAULT_CONTROL_MAX_DURATION);
        assert_eq!(c.max_boosts, DEFAULT_CONTROL_MAX_BOOSTS);
        assert_eq!(p.control[2].subject, ControlSubject::Uid(1000));
        assert_eq!(p.control[2].max_duration, Duration::from_secs(86_400));
        assert!(load_bytes("p.yaml", b"version: 1\n")
            .unwrap()
            .control
            .is_empty());
        // A bad account name and a uid past the range are errors too.
        for bad in [
            "control:\n  - user: \"a b\"\n    boost: [\"*\"]\n",
            "control:\n  - group: -x\n    boost: [\"*\"]\n",
            "control:\n  - uid: 4294967295\n    boost: [\"*\"]\n",
            "control:\n  - uid: 7\n    boost: [\"*\", 3]\n",
        ] {
            let text = format!("version: 1\n{bad}");
            assert!(load_bytes("p.yaml", text.as_bytes()).is_err(), "{bad}");
        }
    }
}
