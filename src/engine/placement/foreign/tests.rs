//! The classifier over the cgroup paths runtimes really create. Sources of
//! each shape are in the module docs; the paths below are those shapes with
//! real ids (the rootless podman one as `systemd-cgls` printed it).

use super::*;
use proptest::prelude::*;

const ID: &str = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12";

/// A board whose cgroup_root is the mount's root, with groups `realtime`,
/// `robots`, `app` and `app/cam`.
fn board() -> Domain {
    Domain::new(
        "",
        [
            ("realtime", "realtime"),
            ("robots", "robots"),
            ("app", "app"),
            ("cam", "app/cam"),
        ],
        "cgwarden.hooks",
    )
}

fn unmarked(_: &str) -> bool {
    false
}

fn of(cgroup: &str) -> Option<Owner> {
    owner(cgroup, &board(), unmarked)
}

#[test]
fn docker_with_either_driver_and_a_custom_parent() {
    let rt = Some(Owner::Runtime("docker"));
    // systemd driver: `system.slice:docker:<id>` → a scope in system.slice.
    assert_eq!(of(&format!("/system.slice/docker-{ID}.scope")), rt);
    // --cgroup-parent=ros.slice with the systemd driver.
    assert_eq!(of(&format!("/ros.slice/docker-{ID}.scope")), rt);
    // cgroupfs driver, default parent `docker`.
    assert_eq!(of(&format!("/docker/{ID}")), rt);
    // cgroupfs driver with --cgroup-parent=/ros: only the id tells.
    assert_eq!(of(&format!("/ros/{ID}")), Some(Owner::ContainerId));
    // The daemons themselves are services like any other.
    assert_eq!(of("/system.slice/docker.service"), None);
    assert_eq!(of("/system.slice/containerd.service"), None);
}

#[test]
fn containerd_podman_crio_kubernetes_lxc_runc() {
    let rt = |r| Some(Owner::Runtime(r));
    // CRI with the systemd driver: the outermost manager (kubelet) is named.
    let pod = "/kubepods.slice/kubepods-burstable.slice/\
               kubepods-burstable-pod0b5c4f4e_3d1a_4c6e_9f1e_2a7c0d9e8b11.slice";
    assert_eq!(
        of(&format!("{pod}/cri-containerd-{ID}.scope")),
        rt("Kubernetes")
    );
    assert_eq!(of(&format!("{pod}/crio-{ID}.scope")), rt("Kubernetes"));
    // kubelet's cgroupfs driver.
    assert_eq!(
        of(&format!(
            "/kubepods/burstable/pod0b5c4f4e-3d1a-4c6e-9f1e-2a7c0d9e8b11/{ID}"
        )),
        rt("Kubernetes")
    );
    // containerd's default spec: `/<namespace>/<id>` (`ctr run` uses `default`).
    assert_eq!(of("/default/talker"), rt("containerd"));
    assert_eq!(of(&format!("/k8s.io/{ID}")), rt("containerd"));
    assert_eq!(
        of(&format!("/system.slice/nerdctl-{ID}.scope")),
        rt("containerd")
    );
    assert_eq!(
        of(&format!("/system.slice/cri-containerd-{ID}.scope")),
        rt("containerd")
    );
    // Not at the top: a service called `default` is nobody's container.
    assert_eq!(of("/system.slice/default"), None);
    assert_eq!(of("/default"), None, "the namespace group alone");
    // podman: the systemd manager's scopes in machine.slice (conmon too),
    // the cgroupfs manager's parent, a pod's slice, and rootless podman as
    // `systemd-cgls` shows it (under the user manager: podman is named).
    assert_eq!(
        of(&format!("/machine.slice/libpod-{ID}.scope")),
        rt("podman")
    );
    assert_eq!(
        of(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
        rt("podman")
    );
    assert_eq!(of(&format!("/libpod_parent/libpod-{ID}")), rt("podman"));
    assert_eq!(
        of(&format!(
            "/machine.slice/machine-libpod_pod_{ID}.slice/libpod-{ID}.scope"
        )),
        rt("podman")
    );
    assert_eq!(
        of("/user.slice/user-1001.slice/user@1001.service/user.slice/\
            libpod-3a72a9c203ad7566fb74128b59c958cab4f688f013e7a6196d4310221fd2bc5f.scope/container"),
        rt("podman")
    );
    // CRI-O with the systemd cgroup manager outside a kubepods slice
    // (`crio-<id>.scope`), its conmon scope, and the cgroupfs manager's
    // `crio-<id>` under a custom parent.
    assert_eq!(of(&format!("/system.slice/crio-{ID}.scope")), rt("CRI-O"));
    assert_eq!(
        of(&format!("/system.slice/crio-conmon-{ID}.scope")),
        rt("CRI-O")
    );
    assert_eq!(of(&format!("/pods/crio-{ID}")), rt("CRI-O"));
    // A kubepods slice alone (a pod's group, its QoS class) is kubelet's.
    assert_eq!(
        of("/kubepods.slice/kubepods-besteffort.slice"),
        rt("Kubernetes")
    );
    assert_eq!(
        of("/lxc.payload.web-01/system.slice/postfix.service"),
        rt("LXC")
    );
    assert_eq!(of("/lxc.monitor.web-01"), rt("LXC"));
    assert_eq!(of("/lxc/web-01"), rt("LXC"));
    assert_eq!(of("/system.slice/runc-talker.scope"), rt("runc"));
}

#[test]
fn machines_user_managers_and_bare_ids() {
    assert_eq!(
        of("/machine.slice/machine-ros.scope/payload"),
        Some(Owner::Machines)
    );
    assert_eq!(
        of("/machine.slice/systemd-nspawn@ros.service/payload"),
        Some(Owner::Machines)
    );
    assert_eq!(
        of("/user.slice/user-1000.slice/user@1000.service/app.slice/talker.service"),
        Some(Owner::UserManager("user@1000.service".into()))
    );
    assert_eq!(of(&format!("/{ID}.scope")), Some(Owner::ContainerId));
    // 63 digits, upper case: no id.
    assert_eq!(of(&format!("/ros/{}", &ID[1..])), None);
    assert_eq!(of(&format!("/ros/{}", ID.to_uppercase())), None);
}

#[test]
fn the_systems_own_groups_belong_to_nobody_else() {
    for cg in [
        "/",
        "",
        "/init.scope",
        "/system.slice/ros-talker.service",
        "/user.slice/user-1000.slice/session-3.scope",
        "/system.slice/dockerd-helper.service",
    ] {
        assert_eq!(of(cg), None, "{cg}");
    }
}

#[test]
fn cgwardens_groups_are_its_own_and_groups_below_them_are_not() {
    assert_eq!(of("/realtime"), None);
    assert_eq!(of("/app/cam"), None);
    assert_eq!(of("/cgwarden.hooks/ros-3"), None, "a hook run");
    // A subgroup made by hand below a policy group: the deepest group is named.
    assert_eq!(of("/robots/handmade"), Some(Owner::Below("robots".into())));
    assert_eq!(of("/app/cam/x/y"), Some(Owner::Below("cam".into())));
    // A runtime given the group as its cgroupfs parent: the runtime is named.
    assert_eq!(of(&format!("/robots/{ID}")), Some(Owner::ContainerId));
    assert_eq!(
        of(&format!("/robots/docker-{ID}.scope")),
        Some(Owner::Runtime("docker"))
    );
    // A prefix of a group's name is not below it.
    assert_eq!(of("/robotsx/y"), None);
}

#[test]
fn the_delegate_mark_is_read_nearest_first_and_only_when_the_shape_says_nothing() {
    let d = board();
    let mut asked = Vec::new();
    let o = owner("/system.slice/ros.service/payload/node", &d, |p| {
        asked.push(p.to_string());
        p == "/system.slice/ros.service"
    });
    assert_eq!(
        o,
        Some(Owner::Delegated("/system.slice/ros.service".into()))
    );
    assert_eq!(
        asked,
        [
            "/system.slice/ros.service/payload/node",
            "/system.slice/ros.service/payload",
            "/system.slice/ros.service"
        ]
    );
    // Unmarked all the way up: the root cgroup itself is never asked.
    let mut asked = Vec::new();
    let o = owner("/system.slice/sshd.service", &d, |p| {
        asked.push(p.to_string());
        false
    });
    assert_eq!(o, None);
    assert_eq!(asked, ["/system.slice/sshd.service", "/system.slice"]);
    // The shape decides: no read.
    let o = owner(&format!("/system.slice/docker-{ID}.scope"), &d, |p| {
        panic!("asked {p}")
    });
    assert_eq!(o, Some(Owner::Runtime("docker")));
    for mine in ["/realtime", "/robots/x", "/"] {
        owner(mine, &d, |p| panic!("asked {p} for {mine}"));
    }
    // Outside this cgroup namespace: nothing to read.
    assert_eq!(
        owner("/../../foo.service", &d, |p| panic!("asked {p}")),
        None
    );
}

#[test]
fn cgwardens_delegated_subtree_is_not_delegated_away_from_it() {
    // cgwarden-delegated.service: cgroup_root is the unit's (marked) cgroup.
    let root = "/system.slice/cgwarden-delegated.service";
    let d = Domain::new(root, [("realtime", "realtime")], "cgwarden.hooks");
    let marked = |p: &str| p == root || p == "/system.slice/other.service";
    assert_eq!(owner(&format!("{root}/realtime"), &d, marked), None);
    assert_eq!(owner(&format!("{root}/supervisor"), &d, marked), None);
    assert_eq!(
        owner("/system.slice/other.service/x", &d, marked),
        Some(Owner::Delegated("/system.slice/other.service".into()))
    );
    // Inside cgroup_root only what is below it counts: a group cgwarden
    // does not manage there is judged by its own components.
    assert_eq!(
        owner(&format!("{root}/docker-{ID}.scope"), &d, marked),
        Some(Owner::Runtime("docker"))
    );
    // containerd's `/<namespace>/<id>` is a path from the mount's root.
    assert_eq!(owner(&format!("{root}/default/x"), &d, marked), None);
    // cgroup_root itself is cgwarden's.
    assert_eq!(owner(root, &d, marked), None);
}

#[test]
fn a_domain_without_groups_still_knows_the_runtimes() {
    let d = Domain::default();
    assert_eq!(
        owner(&format!("/system.slice/docker-{ID}.scope"), &d, unmarked),
        Some(Owner::Runtime("docker"))
    );
    assert_eq!(owner("/system.slice/x.service", &d, unmarked), None);
}

#[test]
fn the_text_names_the_owner() {
    assert_eq!(
        Owner::Runtime("docker").what(),
        "a container runtime (docker)"
    );
    assert!(Owner::Below("robots".into())
        .what()
        .contains("below cgwarden's group robots"));
    assert!(Owner::Delegated("/system.slice/x.service".into())
        .what()
        .contains("/system.slice/x.service"));
}

proptest! {
    /// Any path: no panic, and a policy group is never anyone else's.
    #[test]
    fn any_path_is_judged_and_policy_groups_stay_cgwardens(
        path in "(/[a-z0-9@._:-]{0,12}|/\\.\\.|/é){0,6}",
        group in "[a-z]{1,8}",
    ) {
        let d = Domain::new("", [(group.as_str(), group.as_str())], "cgwarden.hooks");
        let _ = owner(&path, &d, |_| true);
        prop_assert_eq!(owner(&format!("/{group}"), &d, |_| true), None);
        let _ = Owner::Below(group).what();
    }
}
