use super::*;
use crate::policy::model::{Match, SchedPolicy};
use crate::policy::yaml::Pos;
use std::collections::HashMap;

fn rule(m: Match, group: &str, sched: Option<Sched>) -> Placement {
    Placement {
        matcher: m,
        group: group.into(),
        sched,
        pos: Pos::default(),
        tuning: Default::default(),
    }
}
fn comm(c: &str) -> Match {
    Match {
        comm: Some(c.into()),
        ..Default::default()
    }
}
fn f(comm: &str) -> OwnedFacts {
    OwnedFacts {
        comm: comm.into(),
        exe: Some(format!("/usr/bin/{comm}")),
        cmdline: comm.into(),
        uid: Some(0),
    }
}

#[test]
fn comm_forms_truncation_and_globs() {
    let rules = vec![
        rule(comm("camera_pipeline_main"), "trunc", None),
        rule(comm("motion_?ontrol"), "q", None),
        rule(comm("[xy]worker"), "class", None),
        rule(comm("exact"), "exact", None),
    ];
    let p = Placer::new(&rules, |_| None);
    let g = |c: &str| p.find(&f(c).as_facts()).map(|m| m.group.clone());
    // The kernel keeps 15 bytes: `camera_pipeline_main` shows as `camera_pipeline`.
    assert_eq!(g("camera_pipeline").as_deref(), Some("trunc"));
    assert_eq!(g("camera_pipelin"), None);
    assert_eq!(g("motion_control").as_deref(), Some("q"));
    assert_eq!(g("yworker").as_deref(), Some("class"));
    assert_eq!(g("zworker"), None);
    assert_eq!(g("exact").as_deref(), Some("exact"));
    assert_eq!(g("exactly"), None);
    assert_eq!(g("xexact"), None);
}

#[test]
fn exe_cmdline_and_uid_forms() {
    let rules = vec![
        rule(
            Match {
                exe: Some("/opt/*/bin/infer?".into()),
                ..Default::default()
            },
            "exe",
            None,
        ),
        rule(
            Match {
                cmdline: Some("python3 * --cam [0-9]".into()),
                ..Default::default()
            },
            "cmd",
            None,
        ),
        rule(
            Match {
                user: Some(UserSpec::Uid(1234)),
                ..Default::default()
            },
            "uid",
            None,
        ),
    ];
    let p = Placer::new(&rules, |_| None);
    let mut x = f("a");
    x.exe = Some("/opt/npu/bin/infer2".into());
    assert_eq!(p.find_index(&x.as_facts()), Some(0));
    x.exe = None;
    x.cmdline = "python3 /srv/pipe.py --cam 3".into();
    assert_eq!(p.find_index(&x.as_facts()), Some(1));
    x.cmdline = "python3 /srv/pipe.py --cam x".into();
    assert_eq!(p.find_index(&x.as_facts()), None);
    x.uid = Some(1234);
    assert_eq!(p.find_index(&x.as_facts()), Some(2));
    x.uid = None;
    assert_eq!(p.find_index(&x.as_facts()), None);
}

/// A fake kernel: processes with facts, cgroups, children and sched.
#[derive(Default)]
struct Fake {
    procs: HashMap<i32, OwnedFacts>,
    cg: HashMap<i32, String>,
    kids: HashMap<i32, Vec<i32>>,
    sched: HashMap<i32, SchedPolicy>,
    refuse: Option<String>,
    moves: Vec<(i32, String)>,
    /// (pid, what) for every /proc read placement asked for.
    reads: Vec<(i32, &'static str)>,
    /// Start times (pids without one: 1).
    start: HashMap<i32, u64>,
    /// After this pid's facts are read, it exits and its pid is reused
    /// by a process with these facts and a later start (the race).
    reuse_after_facts: Option<(i32, OwnedFacts)>,
    /// Pins made; with `scanning`, `known_cgroup` answers from `cg`
    /// (a scan's snapshot) and pins report user processes.
    pins: u32,
    scanning: bool,
    /// Pidfds taken on a looked-at process ([`PlaceOps::hold`]).
    holds: u32,
    /// The process exits just before its pidfd is taken.
    vanish_on_hold: bool,
    /// cgwarden's groups for [`foreign::owner`], cgroups marked delegated,
    /// and each cgroup asked about.
    domain: foreign::Domain,
    marked: Vec<String>,
    owners_asked: Vec<String>,
}
impl Fake {
    fn start_of(&self, pid: i32) -> Option<u64> {
        self.procs
            .contains_key(&pid)
            .then(|| self.start.get(&pid).copied().unwrap_or(1))
    }
}
impl PlaceOps for Fake {
    fn pin(&mut self, pid: i32) -> Option<Pin> {
        self.pins += 1;
        Some(Pin {
            start: Some(self.start_of(pid)?),
            kernel_thread: self.scanning.then_some(false),
            comm: self
                .scanning
                .then(|| self.procs.get(&pid).map(|f| f.comm.clone()))
                .flatten(),
            ..Pin::default()
        })
    }
    fn look(&mut self, pid: i32) -> Option<Pin> {
        self.reads.push((pid, "stat"));
        Some(Pin {
            start: Some(self.start_of(pid)?),
            kernel_thread: Some(false),
            comm: self.procs.get(&pid).map(|f| f.comm.clone()),
            ..Pin::default()
        })
    }
    fn hold(&mut self, pid: i32, _pin: &mut Pin) -> bool {
        self.holds += 1;
        if self.vanish_on_hold {
            self.procs.remove(&pid);
        }
        self.procs.contains_key(&pid)
    }
    fn known_cgroup(&mut self, pid: i32) -> Option<String> {
        self.scanning.then(|| self.cg.get(&pid).cloned()).flatten()
    }
    fn same(&mut self, pid: i32, pin: &Pin) -> bool {
        self.start_of(pid) == pin.start
    }
    fn comm(&mut self, pid: i32) -> Option<String> {
        self.reads.push((pid, "comm"));
        self.procs.get(&pid).map(|f| f.comm.clone())
    }
    fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
        let f = self.procs.get(&pid)?.clone();
        if let Some((p, other)) = self.reuse_after_facts.take_if(|(p, _)| *p == pid) {
            let s = self.start_of(p).unwrap_or(1);
            self.procs.insert(p, other);
            self.start.insert(p, s + 1000);
        }
        if needs.exe {
            self.reads.push((pid, "exe"));
        }
        if needs.cmdline {
            self.reads.push((pid, "cmdline"));
        }
        if needs.uid {
            self.reads.push((pid, "uid"));
        }
        Some(OwnedFacts {
            comm,
            exe: if needs.exe { f.exe.clone() } else { None },
            cmdline: if needs.cmdline {
                f.cmdline.clone()
            } else {
                String::new()
            },
            uid: if needs.uid { f.uid } else { None },
        })
    }
    fn cgroup_of(&mut self, pid: i32) -> Option<String> {
        self.cg.get(&pid).cloned()
    }
    fn group_cgroup(&self, group: &str) -> Option<String> {
        Some(format!("/{group}"))
    }
    fn owner_of(&mut self, cgroup: &str) -> Option<foreign::Owner> {
        self.owners_asked.push(cgroup.to_string());
        foreign::owner(cgroup, &self.domain, |p| self.marked.iter().any(|m| m == p))
    }
    fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
        if !self.procs.contains_key(&pid) {
            return Err(OpError::Gone);
        }
        if let Some(r) = &self.refuse {
            return Err(OpError::Refused(r.clone()));
        }
        self.cg.insert(pid, format!("/{group}"));
        self.moves.push((pid, group.into()));
        Ok(())
    }
    fn sched_is(&mut self, pid: i32, s: &Sched) -> bool {
        self.sched.get(&pid) == Some(&s.policy)
    }
    fn set_sched(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
        if !self.procs.contains_key(&pid) {
            return Err(OpError::Gone);
        }
        self.sched.insert(pid, s.policy);
        Ok(())
    }
    fn children(&mut self, pid: i32, _single_threaded: bool) -> Vec<i32> {
        self.kids.get(&pid).cloned().unwrap_or_default()
    }
}

fn fifo() -> Sched {
    Sched {
        policy: SchedPolicy::Fifo,
        priority: Some(50),
        nice: None,
        deadline: None,
    }
}

#[test]
fn moves_scheds_and_leaves_placed_alone() {
    let rules = vec![rule(comm("rt*"), "realtime", Some(fifo()))];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    k.procs.insert(10, f("rtloop"));
    k.cg.insert(10, "/".into());
    let r = p.place(10, &mut k);
    assert!(r.moved && r.sched, "{r:?}");
    assert_eq!(k.cg[&10], "/realtime");
    assert_eq!(k.sched[&10], SchedPolicy::Fifo);
    // Already there, already FIFO: nothing happens.
    let r = p.place(10, &mut k);
    assert!(!r.moved && !r.sched && r.errors.is_empty(), "{r:?}");
    assert_eq!(k.moves.len(), 1);
    // Gone mid-way, unmatched: not errors.
    assert_eq!(p.place(99, &mut k), Placed::default());
    k.procs.insert(11, f("bash"));
    k.cg.insert(11, "/".into());
    assert_eq!(p.place(11, &mut k).group, None);
}

/// A scan re-meeting processes it placed (cache by pid and
/// comm, the snapshot has them in their group) pins nothing and reads
/// nothing past the comm; one moved out since is placed again, and a
/// comm-only match of a pinned user process reads no other fact.
#[test]
fn a_scan_skips_what_it_placed_and_a_comm_match_reads_nothing_more() {
    let rules = vec![rule(comm("cam*"), "vision", None)];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake {
        scanning: true,
        ..Fake::default()
    };
    for pid in [30, 31, 32] {
        k.procs.insert(pid, f("camd"));
        k.cg.insert(pid, "/".into());
    }
    let mut cache = FactCache::default();
    let done = p.place_batch(&[30, 31, 32], &mut k, &mut cache);
    assert_eq!(done.iter().filter(|(_, r)| r.moved).count(), 3);
    assert_eq!(k.pins, 3);
    assert_eq!(k.reads.len(), 3, "the pin's stat gave the comm again");
    assert!(
        !k.reads.iter().any(|(_, what)| *what != "comm"),
        "a comm-only match read more: {:?}",
        k.reads
    );
    k.cg.insert(31, "/".into()); // moved out behind our back
    k.reads.clear();
    let done = p.place_batch(&[30, 31, 32], &mut k, &mut cache);
    assert_eq!(k.pins, 4, "only the process not in its group is pinned");
    assert_eq!(k.cg[&31], "/vision");
    assert!(done
        .iter()
        .all(|(_, r)| r.group.as_deref() == Some("vision")));
    assert_eq!(k.reads.len(), 3, "one comm read each: {:?}", k.reads);
}

/// While exits reach the cache (the connector is live), a scan
/// reads not even the comm of a process it placed and finds in its group;
/// an exit forgets it, and starting to track drops what was learnt before.
#[test]
fn with_exits_tracked_a_scan_reads_nothing_of_what_it_placed() {
    let rules = vec![rule(comm("cam*"), "vision", None)];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake {
        scanning: true,
        ..Fake::default()
    };
    for pid in [30, 31] {
        k.procs.insert(pid, f("camd"));
        k.cg.insert(pid, "/".into());
    }
    let mut cache = FactCache::default();
    cache.track_exits(true);
    p.place_batch(&[30, 31], &mut k, &mut cache);
    assert_eq!(k.cg[&30], "/vision");
    k.reads.clear();
    let done = p.place_batch(&[30, 31], &mut k, &mut cache);
    assert!(k.reads.is_empty(), "read: {:?}", k.reads);
    assert!(done
        .iter()
        .all(|(_, r)| r.group.as_deref() == Some("vision")));
    // 31 exits; its pid is reused by a process of another name, in the group.
    cache.forget(31);
    k.procs.insert(31, f("bash"));
    let done = p.place_batch(&[30, 31], &mut k, &mut cache);
    assert_eq!(k.reads, [(31, "comm")]);
    assert_eq!(
        done.iter().find(|(pid, _)| *pid == 31).unwrap().1.group,
        None
    );
    // Not tracked: the comm is read again for each.
    cache.track_exits(false);
    k.reads.clear();
    p.place_batch(&[30], &mut k, &mut cache);
    assert_eq!(k.reads, [(30, "comm")]);
    // Tracking again starts from nothing: 30 is pinned and read anew.
    cache.track_exits(true);
    let pins = k.pins;
    p.place_batch(&[30], &mut k, &mut cache);
    assert_eq!(k.pins, pins + 1);
}

#[test]
fn a_hook_runs_processes_are_never_placed() {
    let rules = vec![rule(comm("sh"), "realtime", Some(fifo()))];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    for (pid, cg) in [
        (20, "/cgwarden.hooks/alert-3"),
        (21, "/sub/cgwarden.hooks/alert-4"),
        (22, "/cgwarden.hooksy"),
    ] {
        k.procs.insert(pid, f("sh"));
        k.cg.insert(pid, cg.into());
    }
    assert_eq!(p.place(20, &mut k), Placed::default());
    assert_eq!(p.place(21, &mut k), Placed::default());
    assert_eq!(k.cg[&20], "/cgwarden.hooks/alert-3");
    // Only the exact component is protected.
    assert!(p.place(22, &mut k).moved);
    assert_eq!(k.moves.len(), 1);
}

#[test]
fn refusal_is_reported_with_reason() {
    let rules = vec![rule(comm("rt*"), "realtime", None)];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake {
        refuse: Some("write /sys/fs/cgroup/realtime/cgroup.procs: EINVAL".into()),
        ..Default::default()
    };
    k.procs.insert(10, f("rtloop"));
    k.cg.insert(10, "/".into());
    let r = p.place(10, &mut k);
    assert!(!r.moved);
    assert_eq!(r.errors.len(), 1);
    assert!(r.errors[0].contains("EINVAL") && r.errors[0].contains("realtime"));
}

#[test]
fn descendants_left_behind_follow_unless_another_rule_or_group() {
    let rules = vec![
        rule(comm("parent"), "a", None),
        rule(comm("other"), "b", None),
    ];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    for (pid, c, cg) in [
        (1, "parent", "/"),
        (2, "child", "/"),           // left behind: follows
        (3, "other", "/"),           // matches another rule: left to it
        (4, "grandkid", "/"),        // under 2: follows
        (5, "svc", "/system.slice"), // someone else's group: stays
        (6, "sub", "/system.slice"), // under 5: not visited
    ] {
        k.procs.insert(pid, f(c));
        k.cg.insert(pid, cg.into());
    }
    k.kids.insert(1, vec![2, 3, 5]);
    k.kids.insert(2, vec![4]);
    k.kids.insert(5, vec![6]);
    let mut r = p.place(1, &mut k);
    r.descendants.sort_unstable();
    assert_eq!(r.descendants, [2, 4]);
    assert_eq!(k.cg[&3], "/");
    assert_eq!(k.cg[&5], "/system.slice");
    assert_eq!(k.cg[&6], "/system.slice");
}

/// A batch makes every move before any sched change or descendant walk,
/// grouped by rule, reading only the comm for comm-only rules.
#[test]
fn a_batch_moves_back_to_back_then_scheds_and_descendants() {
    let rules = vec![
        rule(comm("rt*"), "a", Some(fifo())),
        rule(comm("cam*"), "b", None),
    ];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    for (pid, c) in [(1, "rt1"), (2, "cam1"), (3, "rt2"), (4, "bash"), (5, "kid")] {
        k.procs.insert(pid, f(c));
        k.cg.insert(pid, "/".into());
    }
    k.kids.insert(1, vec![5]);
    let mut cache = FactCache::default();
    let mut r = p.place_batch(&[1, 2, 3, 4, 99], &mut k, &mut cache);
    r.sort_by_key(|(pid, _)| *pid);
    let moves: Vec<i32> = k.moves.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        moves,
        [1, 3, 2, 5],
        "rule a's, rule b's, then the descendant"
    );
    // (The uid decides a name-only RT grant; exe and cmdline are not read.)
    assert!(
        k.reads
            .iter()
            .all(|(_, what)| matches!(*what, "comm" | "uid")),
        "{:?}",
        k.reads
    );
    assert_eq!(k.sched.get(&1), Some(&SchedPolicy::Fifo));
    assert_eq!(k.sched.get(&3), Some(&SchedPolicy::Fifo));
    let by: HashMap<i32, Placed> = r.into_iter().collect();
    assert!(by[&1].moved && by[&1].sched && by[&1].descendants == [5]);
    assert!(by[&2].moved && !by[&2].sched);
    assert_eq!(by.get(&4).and_then(|x| x.group.clone()), None);
    assert_eq!(by.get(&99).map(|x| x.moved), Some(false));
}

proptest::proptest! {
    /// Batched or one by one, every process ends in the same group.
    #[test]
    fn a_batch_places_like_one_by_one(
        procs in proptest::collection::vec((0usize..5, 0usize..3), 0..40),
        gone in proptest::collection::vec(proptest::bool::ANY, 40),
    ) {
        let comms = ["rt1", "cam", "bash", "rtx", "camz"];
        let cgs = ["/", "/a", "/b"];
        let rules = vec![rule(comm("rt*"), "a", Some(fifo())), rule(comm("cam*"), "b", None)];
        let p = Placer::new(&rules, |_| None);
        let mut one = Fake::default();
        for (i, &(c, g)) in procs.iter().enumerate() {
            let pid = i as i32 + 10;
            if !gone[i] {
                one.procs.insert(pid, f(comms[c]));
            }
            one.cg.insert(pid, cgs[g].into());
        }
        let mut batch = Fake { procs: one.procs.clone(), cg: one.cg.clone(), ..Default::default() };
        let pids: Vec<i32> = (0..procs.len() as i32).map(|i| i + 10).collect();
        for &pid in &pids {
            p.place(pid, &mut one);
        }
        let mut execs = Fake { procs: one.procs.clone(), cg: one.cg.clone(), ..Default::default() };
        p.place_batch(&pids, &mut batch, &mut FactCache::default());
        p.place_exec_batch(&pids, &mut execs, &mut FactCache::default());
        proptest::prop_assert_eq!(&one.cg, &batch.cg);
        proptest::prop_assert_eq!(&one.sched, &batch.sched);
        proptest::prop_assert_eq!(&one.cg, &execs.cg);
        proptest::prop_assert_eq!(&one.sched, &execs.sched);
    }
}

#[test]
fn only_comm_is_read_when_no_rule_can_match_it() {
    let rules = vec![
        rule(comm("rt*"), "realtime", None),
        rule(
            Match {
                comm: Some("cam*".into()),
                cmdline: Some("* --cam *".into()),
                ..Default::default()
            },
            "vision",
            None,
        ),
    ];
    let p = Placer::new(&rules, |_| None);
    assert_eq!(p.needs_for("bash"), None);
    assert_eq!(p.needs_for("rtloop"), Some(FactNeeds::default()));
    assert_eq!(
        p.needs_for("camd"),
        Some(FactNeeds {
            cmdline: true,
            ..Default::default()
        })
    );
    let mut k = Fake::default();
    k.procs.insert(10, f("bash"));
    k.cg.insert(10, "/".into());
    k.procs.insert(11, f("camd"));
    k.cg.insert(11, "/".into());
    assert_eq!(p.place(10, &mut k).group, None);
    assert_eq!(k.reads, [(10, "comm")]);
    k.reads.clear();
    // cmdline read because a candidate needs it; it does not match.
    assert_eq!(p.place(11, &mut k).group, None);
    // (The comm is read again once the process is pinned.)
    assert_eq!(k.reads, [(11, "comm"), (11, "comm"), (11, "cmdline")]);
}

#[test]
fn a_rule_without_comm_makes_every_process_a_candidate() {
    let rules = vec![
        rule(comm("rt*"), "realtime", None),
        rule(
            Match {
                exe: Some("/opt/npu/bin/*".into()),
                ..Default::default()
            },
            "inference",
            None,
        ),
        rule(
            Match {
                user: Some(UserSpec::Uid(7)),
                ..Default::default()
            },
            "vision",
            None,
        ),
    ];
    let p = Placer::new(&rules, |_| None);
    assert_eq!(
        p.needs_for("anything"),
        Some(FactNeeds {
            exe: true,
            uid: true,
            cmdline: false
        })
    );
    let mut k = Fake::default();
    let mut x = f("infer");
    x.exe = Some("/opt/npu/bin/infer".into());
    k.procs.insert(12, x);
    k.cg.insert(12, "/".into());
    assert_eq!(p.place(12, &mut k).group.as_deref(), Some("inference"));
}

#[test]
fn a_pid_reused_after_its_facts_were_read_gets_no_move_and_no_sched() {
    let rules = vec![rule(comm("rt*"), "realtime", Some(fifo()))];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    k.procs.insert(10, f("rtloop"));
    k.cg.insert(10, "/".into());
    k.reuse_after_facts = Some((10, f("bash")));
    let r = p.place(10, &mut k);
    assert_eq!(r.gone, 1, "{r:?}");
    assert!(!r.moved && !r.sched && r.errors.is_empty(), "{r:?}");
    assert!(k.moves.is_empty(), "the new owner of pid 10 was moved");
    assert!(k.sched.is_empty(), "the new owner of pid 10 got FIFO");
    // Already in the group, only the sched left: the same check holds.
    let mut k = Fake::default();
    k.procs.insert(11, f("rtloop"));
    k.cg.insert(11, "/realtime".into());
    k.reuse_after_facts = Some((11, f("bash")));
    let r = p.place(11, &mut k);
    assert_eq!((r.gone, r.sched), (1, false), "{r:?}");
    assert!(k.sched.is_empty());
    // Unchanged process: acted on.
    k.cg.insert(11, "/".into());
    let r = p.place(11, &mut k);
    assert_eq!(r.group, None, "pid 11 is bash now");
    k.procs.insert(12, f("rtloop"));
    k.cg.insert(12, "/".into());
    let r = p.place(12, &mut k);
    assert!(r.moved && r.sched && r.gone == 0, "{r:?}");
}

#[test]
fn rt_by_name_only_is_granted_to_root_processes_only() {
    let rules = vec![
        rule(comm("motion_*"), "realtime", Some(fifo())),
        rule(
            Match {
                comm: Some("trusted*".into()),
                exe: Some("/usr/bin/*".into()),
                ..Default::default()
            },
            "realtime",
            Some(fifo()),
        ),
    ];
    let p = Placer::new(&rules, |_| None);
    // The uid is read for the name-only RT rule.
    assert!(p.needs_for("motion_control").is_some_and(|n| n.uid));
    let mut k = Fake::default();
    let mut user = f("motion_control");
    user.uid = Some(1000);
    k.procs.insert(20, user.clone());
    k.cg.insert(20, "/".into());
    let r = p.place(20, &mut k);
    assert!(r.moved, "the group placement itself stands: {r:?}");
    assert!(!r.sched && !k.sched.contains_key(&20), "uid 1000 got FIFO");
    assert_eq!(r.errors.len(), 1);
    assert!(
        r.errors[0].contains("pid 20") && r.errors[0].contains("uid is 1000"),
        "{r:?}"
    );
    // An unknown uid is not root either.
    user.uid = None;
    k.procs.insert(21, user);
    k.cg.insert(21, "/".into());
    assert!(!p.place(21, &mut k).sched);
    // Root's process with the same name gets it.
    k.procs.insert(22, f("motion_control"));
    k.cg.insert(22, "/".into());
    let r = p.place(22, &mut k);
    assert!(r.sched && r.errors.is_empty(), "{r:?}");
    // A match that names the exe is not forgeable by renaming.
    let mut t = f("trusted_rt");
    t.uid = Some(1000);
    k.procs.insert(23, t);
    k.cg.insert(23, "/".into());
    assert!(p.place(23, &mut k).sched);
}

#[test]
fn the_cache_skips_rereading_an_unchanged_process_until_exec_or_rename() {
    let rules = vec![rule(
        Match {
            cmdline: Some("*--cam*".into()),
            ..Default::default()
        },
        "vision",
        None,
    )];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    let mut x = f("camd");
    x.cmdline = "camd --cam 1".into();
    k.procs.insert(30, x);
    k.cg.insert(30, "/".into());
    k.procs.insert(31, f("bash"));
    k.cg.insert(31, "/".into());
    let mut cache = FactCache::default();
    let cmdline_reads = |k: &Fake| k.reads.iter().filter(|r| r.1 == "cmdline").count();
    assert!(p.place_cached(30, &mut k, &mut cache).moved);
    p.place_cached(31, &mut k, &mut cache);
    assert_eq!(cmdline_reads(&k), 2);
    assert_eq!(cache.len(), 2);
    // A rescan: nothing re-read, and a process moved out is moved back.
    k.cg.insert(30, "/".into());
    assert!(p.place_cached(30, &mut k, &mut cache).moved);
    p.place_cached(31, &mut k, &mut cache);
    assert_eq!(cmdline_reads(&k), 2, "{:?}", k.reads);
    // An exec (forget) re-reads; so does a new comm or a reused pid.
    cache.forget(31);
    p.place_cached(31, &mut k, &mut cache);
    assert_eq!(cmdline_reads(&k), 3);
    if let Some(f) = k.procs.get_mut(&31) {
        f.comm = "bash2".into();
    }
    p.place_cached(31, &mut k, &mut cache);
    assert_eq!(cmdline_reads(&k), 4);
    k.start.insert(31, 99);
    p.place_cached(31, &mut k, &mut cache);
    assert_eq!(cmdline_reads(&k), 5);
    // Without a cache, every placement reads.
    p.place(31, &mut k);
    assert_eq!(cmdline_reads(&k), 6);
}

/// An exec event's process is looked at with one read (the stat
/// gives its comm) and held by a pidfd only when that comm can match: no
/// comm read first, no second read of the same facts.
#[test]
fn an_exec_is_identified_by_one_read_and_held_only_when_it_can_match() {
    let rules = vec![rule(comm("cam*"), "vision", None)];
    let p = Placer::new(&rules, |_| None);
    let mut k = Fake::default();
    k.procs.insert(30, f("camd"));
    k.procs.insert(31, f("bash"));
    k.cg.insert(30, "/".into());
    k.cg.insert(31, "/".into());
    let done = p.place_exec_batch(&[30, 31], &mut k, &mut FactCache::default());
    assert_eq!(k.reads, [(30, "stat"), (31, "stat")]);
    assert_eq!(k.holds, 1, "only the matching process is held");
    assert_eq!(k.pins, 0, "no second pin");
    assert_eq!(k.moves, [(30, "vision".to_string())]);
    assert!(done.iter().any(|(pid, r)| *pid == 30 && r.moved));
    // Gone between the look and the hold: nothing is moved.
    k.procs.insert(32, f("cam2"));
    k.cg.insert(32, "/".into());
    let mut gone = Fake {
        procs: k.procs.clone(),
        cg: k.cg.clone(),
        vanish_on_hold: true,
        ..Fake::default()
    };
    let done = p.place_exec_batch(&[32], &mut gone, &mut FactCache::default());
    assert!(gone.moves.is_empty());
    assert!(done.iter().all(|(_, r)| !r.moved));
}

/// A container's process matched by a rule (with sched) is left alone —
/// not moved, no sched, no rule applied — and the reason names the rule,
/// its group, the cgroup and its owner; the same program outside any
/// container is placed. A process already in its group is not judged.
#[test]
fn a_containers_process_is_left_alone_and_says_why() {
    let id = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12";
    let docker = format!("/system.slice/docker-{id}.scope");
    let mut talker = rule(comm("talker"), "realtime", Some(fifo()));
    talker.pos = Pos::new(12, 5);
    let p = Placer::new(&[talker], |_| None);
    let mut k = Fake::default();
    for (pid, cg) in [
        (40, docker.as_str()),
        (41, "/"),
        (42, "/system.slice/ros.service/node"),
    ] {
        k.procs.insert(pid, f("talker"));
        k.cg.insert(pid, cg.into());
    }
    k.marked.push("/system.slice/ros.service".into());
    let mut cache = FactCache::default();
    let mut done = p.place_batch(&[40, 41, 42], &mut k, &mut cache);
    done.sort_by_key(|(pid, _)| *pid);
    let (_, r) = &done[0];
    assert!(
        !r.moved && !r.sched && r.group.is_none() && r.rule.is_none(),
        "{r:?}"
    );
    let kept = r.kept.as_ref().expect("kept");
    assert_eq!(
        kept.describe(40),
        format!(
            "pid 40 (talker) in {docker}: placement at policy line 12 → realtime matches it, \
             but its cgroup belongs to a container runtime (docker)"
        )
    );
    assert_eq!(k.cg[&40], docker);
    assert!(!k.sched.contains_key(&40), "sched applied in a container");
    // A Delegate=yes unit's subtree: the mark on its cgroup.
    let r = &done[2].1;
    assert_eq!(
        r.kept.as_ref().map(|k| &k.owner),
        Some(&foreign::Owner::Delegated(
            "/system.slice/ros.service".into()
        ))
    );
    assert_eq!(k.cg[&42], "/system.slice/ros.service/node");
    // The same program outside: placed, with its sched.
    assert!(done[1].1.moved && done[1].1.sched && done[1].1.kept.is_none());
    assert_eq!(k.moves, [(41, "realtime".to_string())]);
    // Already in its group: nothing to judge.
    k.owners_asked.clear();
    let r = p.place(41, &mut k);
    assert!(r.kept.is_none() && !r.moved);
    assert!(k.owners_asked.is_empty(), "{:?}", k.owners_asked);
    // Every rescan judges the container's process again (it stays out of
    // its rule's group), and again leaves it.
    let r = p.place_batch(&[40], &mut k, &mut cache);
    assert!(r[0].1.kept.is_some() && k.cg[&40] == docker);
}

/// A group cgwarden did not create below one of its groups (a runtime's
/// cgroupfs parent) is left to whoever made it, even by a rule for
/// another group.
#[test]
fn a_group_below_cgwardens_is_left_to_whoever_made_it() {
    let p = Placer::new(&[rule(comm("talker"), "realtime", None)], |_| None);
    let mut k = Fake {
        domain: foreign::Domain::new("", [("robots", "robots"), ("realtime", "realtime")], "h"),
        ..Fake::default()
    };
    k.procs.insert(50, f("talker"));
    k.cg.insert(50, "/robots/handmade".into());
    k.procs.insert(51, f("talker"));
    k.cg.insert(51, "/robots".into());
    let r = p.place(50, &mut k);
    assert_eq!(
        r.kept.map(|k| k.owner),
        Some(foreign::Owner::Below("robots".into()))
    );
    // In cgwarden's own group: moved as the rule says.
    assert!(p.place(51, &mut k).moved);
    assert_eq!(k.moves, [(51, "realtime".to_string())]);
}
