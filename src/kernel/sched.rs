//! Scheduling policy of placed threads (`placement[].sched`), via
//! `sched_setattr(2)` (real kernels only; on a fake root the caller skips
//! [`apply`] and logs it), and reading the current policy back from
//! `/proc/PID/stat`.
//!
//! [`sched_attr`] is pure so the argument building is unit-tested; the
//! syscall itself is not exercised by tests.
//!
//! Note: with `sched_setattr` the nice value is always applied for the fair
//! policies (other/batch/idle); `nice: None` means nice 0.

use std::fmt;

use super::error::{Error, Result};
use super::procfs;
use super::root::{Op, Root};

/// A scheduling policy (`SCHED_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Policy {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

impl Policy {
    /// The kernel's `SCHED_*` number.
    pub(crate) fn to_kernel(self) -> u32 {
        match self {
            Policy::Other => 0,
            Policy::Fifo => 1,
            Policy::Rr => 2,
            Policy::Batch => 3,
            Policy::Idle => 5,
            Policy::Deadline => 6,
        }
    }

    /// From the kernel's `SCHED_*` number (`SCHED_RESET_ON_FORK` masked off);
    /// `None` for policies cgwarden does not know (e.g. `SCHED_EXT`).
    pub(crate) fn from_kernel(n: u32) -> Option<Policy> {
        Some(match n & !0x4000_0000 {
            0 => Policy::Other,
            1 => Policy::Fifo,
            2 => Policy::Rr,
            3 => Policy::Batch,
            5 => Policy::Idle,
            6 => Policy::Deadline,
            _ => return None,
        })
    }

    /// The policy-file name (`other`, `fifo`, ...).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Deadline => "deadline",
        }
    }

    /// From the policy-file name.
    pub(crate) fn from_name(s: &str) -> Option<Policy> {
        [
            Policy::Other,
            Policy::Batch,
            Policy::Idle,
            Policy::Fifo,
            Policy::Rr,
            Policy::Deadline,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }

    /// True for the real-time policies that take a priority (fifo, rr).
    pub(crate) fn is_rt(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to apply to a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SchedSpec {
    pub(crate) policy: Policy,
    /// 1..=99 for fifo/rr; must be unset (or 0) otherwise.
    pub(crate) priority: Option<u32>,
    /// -20..=19 for other/batch/idle.
    pub(crate) nice: Option<i32>,
    /// `(runtime_ns, deadline_ns, period_ns)` for deadline.
    pub(crate) deadline: Option<(u64, u64, u64)>,
}

impl fmt::Display for SchedSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy={}", self.policy)?;
        if let Some(p) = self.priority {
            write!(f, " priority={p}")?;
        }
        if let Some(n) = self.nice {
            write!(f, " nice={n}")?;
        }
        if let Some((r, d, p)) = self.deadline {
            write!(f, " runtime={r}ns deadline={d}ns period={p}ns")?;
        }
        Ok(())
    }
}

/// `struct sched_attr` (include/uapi/linux/sched/types.h), version 0 (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchedAttr {
    pub(crate) size: u32,
    pub(crate) sched_policy: u32,
    pub(crate) sched_flags: u64,
    pub(crate) sched_nice: i32,
    pub(crate) sched_priority: u32,
    pub(crate) sched_runtime: u64,
    pub(crate) sched_deadline: u64,
    pub(crate) sched_period: u64,
}

/// `SCHED_ATTR_SIZE_VER0`.
pub(crate) const SCHED_ATTR_SIZE_VER0: u32 = 48;

/// Minimum deadline runtime the kernel accepts (`1 << DL_SCALE` ns).
const DL_MIN_RUNTIME_NS: u64 = 1024;

/// Checks `spec` the way the kernel would, so a bad spec is reported
/// before the syscall with a readable message.
pub(crate) fn validate(spec: &SchedSpec) -> std::result::Result<(), String> {
    if let Some(n) = spec.nice {
        if !(-20..=19).contains(&n) {
            return Err(format!("nice {n} out of range -20..=19"));
        }
        if spec.policy.is_rt() || spec.policy == Policy::Deadline {
            return Err(format!("nice does not apply to {}", spec.policy));
        }
    }
    match (spec.policy.is_rt(), spec.priority) {
        (true, Some(p)) if (1..=99).contains(&p) => {}
        (true, Some(p)) => return Err(format!("priority {p} out of range 1..=99")),
        (true, None) => return Err(format!("{} needs a priority 1..=99", spec.policy)),
        (false, None | Some(0)) => {}
        (false, Some(p)) => return Err(format!("priority {p} does not apply to {}", spec.policy)),
    }
    match (spec.policy, spec.deadline) {
        (Policy::Deadline, Some((runtime, deadline, period))) => {
            if runtime < DL_MIN_RUNTIME_NS {
                return Err(format!(
                    "deadline runtime {runtime}ns below {DL_MIN_RUNTIME_NS}ns"
                ));
            }
            if runtime > deadline {
                return Err("deadline runtime exceeds deadline".into());
            }
            if period != 0 && deadline > period {
                return Err("deadline exceeds period".into());
            }
        }
        (Policy::Deadline, None) => return Err("deadline needs runtime, deadline, period".into()),
        (_, Some(_)) => {
            return Err(format!(
                "deadline parameters do not apply to {}",
                spec.policy
            ))
        }
        (_, None) => {}
    }
    Ok(())
}

/// Builds the `sched_attr` for `spec` (pure). Fields that do not apply to
/// the policy are zero.
pub(crate) fn sched_attr(spec: &SchedSpec) -> SchedAttr {
    let mut a = SchedAttr {
        size: SCHED_ATTR_SIZE_VER0,
        sched_policy: spec.policy.to_kernel(),
        ..SchedAttr::default()
    };
    match spec.policy {
        Policy::Other | Policy::Batch | Policy::Idle => a.sched_nice = spec.nice.unwrap_or(0),
        Policy::Fifo | Policy::Rr => a.sched_priority = spec.priority.unwrap_or(0),
        Policy::Deadline => {
            if let Some((r, d, p)) = spec.deadline {
                a.sched_runtime = r;
                a.sched_deadline = d;
                a.sched_period = p;
            }
        }
    }
    a
}

/// Applies `spec` to thread `tid` with `sched_setattr(2)`. The error names
/// `/proc/TID`, the spec, and keeps the errno (EPERM, EINVAL, EBUSY for
/// deadline admission, ESRCH for a vanished thread — see [`Error::is_gone`]).
pub(crate) fn apply(tid: i32, spec: &SchedSpec) -> Result<()> {
    apply_with_flags(tid, spec, 0)
}

/// [`apply`] with `sched_flags` added to the attributes (e.g.
/// `SCHED_FLAG_RESET_ON_FORK` for the daemon's own threads).
pub(crate) fn apply_with_flags(tid: i32, spec: &SchedSpec, sched_flags: u64) -> Result<()> {
    let path = format!("/proc/{tid}");
    validate(spec).map_err(|m| Error::other(&path, format!("sched {spec}: {m}")))?;
    let mut attr = sched_attr(spec);
    attr.sched_flags |= sched_flags;
    // SAFETY: `attr` is a valid, initialized `struct sched_attr` (repr(C),
    // size field set) that outlives the call; the syscall's flags = 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::c_long,
            &attr as *const SchedAttr,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        return Err(Error::os("sched_setattr", path, errno, spec.to_string()));
    }
    Ok(())
}

/// Current policy and rt priority of `pid` from `/proc/PID/stat` (fields 41
/// and 40, counted after the last `)`). `Ok(None)` if the process vanished.
pub(crate) fn current_policy(root: &Root, pid: i32) -> Result<Option<(Policy, u32)>> {
    let Some(st) = procfs::stat(root, pid)? else {
        return Ok(None);
    };
    let path = procfs::proc_file(pid, "stat");
    let prio: u32 = st
        .num(40)
        .ok_or_else(|| Error::parse(&path, "rt_priority (field 40)", st.field(40).unwrap_or("")))?;
    let pol: u32 = st
        .num(41)
        .ok_or_else(|| Error::parse(&path, "policy (field 41)", st.field(41).unwrap_or("")))?;
    let policy = Policy::from_kernel(pol)
        .ok_or_else(|| Error::parse(&path, "known scheduling policy", &pol.to_string()))?;
    Ok(Some((policy, prio)))
}

/// The scheduling of `pid` as [`sched_attr`] would express it: from
/// `sched_getattr(2)` on a real kernel (exact, deadline parameters too), from
/// `/proc/PID/stat` on a fake tree (policy, rt priority, nice in field 19;
/// no deadline parameters). `Ok(None)` if the process vanished.
pub(crate) fn current_attr(root: &Root, pid: i32) -> Result<Option<SchedAttr>> {
    if root.supports(Op::Sched) {
        let mut a = SchedAttr::default();
        // SAFETY: `a` is a writable `struct sched_attr` of the size passed
        // (version 0, 48 bytes); the kernel writes at most that many bytes.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                pid as libc::c_long,
                &mut a as *mut SchedAttr,
                SCHED_ATTR_SIZE_VER0 as libc::c_uint,
                0 as libc::c_uint,
            )
        };
        if rc == 0 {
            return Ok(Some(a));
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno == libc::ESRCH {
            return Ok(None);
        }
        return Err(Error::os(
            "sched_getattr",
            format!("/proc/{pid}"),
            errno,
            String::new(),
        ));
    }
    let Some((policy, prio)) = current_policy(root, pid)? else {
        return Ok(None);
    };
    let nice = procfs::stat(root, pid)?
        .and_then(|st| st.num::<i32>(19))
        .unwrap_or(0);
    Ok(Some(SchedAttr {
        size: SCHED_ATTR_SIZE_VER0,
        sched_policy: policy.to_kernel(),
        sched_nice: nice,
        sched_priority: prio,
        ..SchedAttr::default()
    }))
}

/// Whether a thread whose scheduling reads `cur` already has `spec`: the
/// fields [`sched_attr`] sets for the policy (flags are not compared).
pub(crate) fn attr_matches(cur: &SchedAttr, spec: &SchedSpec) -> bool {
    let want = sched_attr(spec);
    cur.sched_policy == want.sched_policy
        && match spec.policy {
            Policy::Other | Policy::Batch | Policy::Idle => cur.sched_nice == want.sched_nice,
            Policy::Fifo | Policy::Rr => cur.sched_priority == want.sched_priority,
            Policy::Deadline => {
                (cur.sched_runtime, cur.sched_deadline, cur.sched_period)
                    == (want.sched_runtime, want.sched_deadline, want.sched_period)
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    fn spec(policy: Policy) -> SchedSpec {
        SchedSpec {
            policy,
            priority: None,
            nice: None,
            deadline: None,
        }
    }

    #[test]
    fn attr_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_flags), 8);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_nice), 16);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_priority), 20);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_runtime), 24);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_period), 40);
    }

    #[test]
    fn attr_building() {
        let a = sched_attr(&SchedSpec {
            priority: Some(99),
            ..spec(Policy::Fifo)
        });
        assert_eq!(
            a,
            SchedAttr {
                size: 48,
                sched_policy: 1,
                sched_priority: 99,
                ..Default::default()
            }
        );
        let a = sched_attr(&SchedSpec {
            nice: Some(-5),
            ..spec(Policy::Batch)
        });
        assert_eq!((a.sched_policy, a.sched_nice, a.sched_priority), (3, -5, 0));
        let a = sched_attr(&spec(Policy::Idle));
        assert_eq!((a.sched_policy, a.sched_nice), (5, 0));
        let a = sched_attr(&SchedSpec {
            deadline: Some((1_000_000, 5_000_000, 10_000_000)),
            ..spec(Policy::Deadline)
        });
        assert_eq!(a.sched_policy, 6);
        assert_eq!(
            (a.sched_runtime, a.sched_deadline, a.sched_period),
            (1_000_000, 5_000_000, 10_000_000)
        );
        assert_eq!(sched_attr(&spec(Policy::Rr)).sched_policy, 2);
        assert_eq!(sched_attr(&spec(Policy::Other)).sched_policy, 0);
    }

    #[test]
    fn validation() {
        let ok = |s: SchedSpec| validate(&s).is_ok();
        assert!(ok(SchedSpec {
            priority: Some(50),
            ..spec(Policy::Rr)
        }));
        assert!(!ok(spec(Policy::Fifo)));
        assert!(!ok(SchedSpec {
            priority: Some(100),
            ..spec(Policy::Fifo)
        }));
        assert!(!ok(SchedSpec {
            priority: Some(0),
            ..spec(Policy::Fifo)
        }));
        assert!(ok(SchedSpec {
            nice: Some(19),
            ..spec(Policy::Other)
        }));
        assert!(!ok(SchedSpec {
            nice: Some(20),
            ..spec(Policy::Other)
        }));
        assert!(!ok(SchedSpec {
            priority: Some(5),
            ..spec(Policy::Other)
        }));
        assert!(!ok(SchedSpec {
            priority: Some(5),
            nice: Some(1),
            ..spec(Policy::Fifo)
        }));
        assert!(!ok(spec(Policy::Deadline)));
        assert!(ok(SchedSpec {
            deadline: Some((10_000, 20_000, 0)),
            ..spec(Policy::Deadline)
        }));
        assert!(!ok(SchedSpec {
            deadline: Some((30_000, 20_000, 40_000)),
            ..spec(Policy::Deadline)
        }));
        assert!(!ok(SchedSpec {
            deadline: Some((10_000, 50_000, 40_000)),
            ..spec(Policy::Deadline)
        }));
        assert!(!ok(SchedSpec {
            deadline: Some((100, 500, 1000)),
            ..spec(Policy::Deadline)
        }));
        assert!(!ok(SchedSpec {
            deadline: Some((1, 2, 3)),
            ..spec(Policy::Other)
        }));
        // apply() rejects before the syscall
        let e = apply(1, &spec(Policy::Fifo)).unwrap_err();
        assert!(e.to_string().contains("policy=fifo"), "{e}");
        assert_eq!(e.path(), std::path::Path::new("/proc/1"));
    }

    #[test]
    fn names_and_numbers() {
        for p in [
            Policy::Other,
            Policy::Batch,
            Policy::Idle,
            Policy::Fifo,
            Policy::Rr,
            Policy::Deadline,
        ] {
            assert_eq!(Policy::from_kernel(p.to_kernel()), Some(p));
            assert_eq!(Policy::from_name(p.name()), Some(p));
        }
        assert_eq!(Policy::from_kernel(0x4000_0001), Some(Policy::Fifo));
        assert_eq!(Policy::from_kernel(7), None);
        assert_eq!(Policy::from_name("FIFO"), None);
        let s = SchedSpec {
            priority: Some(99),
            ..spec(Policy::Fifo)
        };
        assert_eq!(s.to_string(), "policy=fifo priority=99");
    }

    fn stat_with(pid: i32, comm: &str, prio: &str, policy: &str) -> String {
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[40 - 3] = prio.into();
        f[41 - 3] = policy.into();
        format!("{pid} ({comm}) {}\n", f.join(" "))
    }

    #[test]
    fn current_policy_from_stat() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert_eq!(current_policy(&r, 9).unwrap(), None);
        let d = t.path().join("proc/9");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("stat"), stat_with(9, "motion ) (ctl", "99", "1")).unwrap();
        assert_eq!(current_policy(&r, 9).unwrap(), Some((Policy::Fifo, 99)));
        fs::write(d.join("stat"), stat_with(9, "x", "0", "7")).unwrap();
        assert!(matches!(
            current_policy(&r, 9).unwrap_err(),
            Error::Parse { .. }
        ));
        fs::write(d.join("stat"), "9 (x) S 1 2 3").unwrap();
        assert!(matches!(
            current_policy(&r, 9).unwrap_err(),
            Error::Parse { .. }
        ));
        fs::write(d.join("stat"), "junk").unwrap();
        assert!(current_policy(&r, 9).is_err());
    }

    #[test]
    fn attr_matches_compares_what_the_policy_uses() {
        let mut cur = sched_attr(&spec(Policy::Other));
        let mut want = spec(Policy::Other);
        assert!(attr_matches(&cur, &want));
        want.nice = Some(5);
        assert!(!attr_matches(&cur, &want), "nice differs");
        cur.sched_nice = 5;
        assert!(attr_matches(&cur, &want));
        let fifo = SchedSpec {
            policy: Policy::Fifo,
            priority: Some(50),
            nice: None,
            deadline: None,
        };
        assert!(!attr_matches(&cur, &fifo));
        let mut c = sched_attr(&fifo);
        c.sched_nice = 3; // ignored for an rt policy
        assert!(attr_matches(&c, &fifo));
        c.sched_priority = 49;
        assert!(!attr_matches(&c, &fifo));
        let dl = SchedSpec {
            policy: Policy::Deadline,
            priority: None,
            nice: None,
            deadline: Some((1_000_000, 5_000_000, 10_000_000)),
        };
        let mut c = sched_attr(&dl);
        assert!(attr_matches(&c, &dl));
        c.sched_period = 20_000_000;
        assert!(!attr_matches(&c, &dl));
    }

    #[test]
    fn current_attr_on_a_fake_tree_reads_stat() {
        let t = TempDir::new().unwrap();
        let d = t.path().join("proc/42");
        fs::create_dir_all(&d).unwrap();
        // Fields: 19 nice = -5, 40 rt_priority = 0, 41 policy = 0 (other).
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[0] = "S".into();
        f[19 - 3] = "-5".into();
        fs::write(d.join("stat"), format!("42 (x y) {}\n", f.join(" "))).unwrap();
        let root = Root::fake(t.path());
        let a = current_attr(&root, 42).unwrap().unwrap();
        assert_eq!((a.sched_policy, a.sched_nice, a.sched_priority), (0, -5, 0));
        assert_eq!(current_attr(&root, 43).unwrap(), None);
    }
}
