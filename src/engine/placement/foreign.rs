//! Whose a cgroup is: placement never moves a process out of a cgroup that
//! belongs to a container runtime or another delegated manager. Moving a
//! container's process out of its container's cgroup takes it out of the
//! runtime's limits and out of reach of `docker stop` (or `podman stop`,
//! `kubectl delete`, a `Delegate=yes` service's own manager); the single
//! writer of that subtree is the runtime, never cgwarden.
//!
//! [`owner`] decides from the cgroup's path as `/proc/PID/cgroup` shows it,
//! in this order:
//!
//! 1. A policy group (or a hook run's group) is cgwarden's own: no owner.
//! 2. A group *below* a policy group that cgwarden did not create belongs to
//!    whoever created it there: a runtime given the group as its cgroup
//!    parent (`docker --cgroup-parent=/robots` makes `/robots/<id>`), or a
//!    subgroup someone made by hand. The group's limits already hold over
//!    it (cgroup v2 is hierarchical), so nothing is lost by leaving it.
//! 3. The shape of a component names a runtime. The shapes, from what each
//!    runtime creates:
//!    - docker: `docker-<id>.scope` (systemd driver: moby's
//!      `cmd/dockerd/daemon_systemd_unix.go` gives runc the cgroups path
//!      `system.slice:docker:<id>`, and runc's `docs/systemd.md` turns
//!      `slice:prefix:name` into `<slice>/<prefix>-<name>.scope`), or a
//!      component `docker` (the cgroupfs driver's default parent `/docker`).
//!    - runc alone: `runc-<id>.scope` (its systemd driver's default
//!      `:runc:<id>`, runc `docs/systemd.md`).
//!    - containerd: `cri-containerd-<id>.scope` (CRI, systemd driver),
//!      `nerdctl-<id>.scope`, and `/<namespace>/<id>` for the namespaces
//!      `default` (`ctr`), `k8s.io`, `moby` and `buildkit` (containerd's
//!      default spec sets the cgroups path `/<namespace>/<id>`:
//!      `oci/spec.go`, `populateDefaultUnixSpec`).
//!    - podman: `libpod-<id>.scope` and `libpod-conmon-<id>.scope` (systemd
//!      manager, default parent `machine.slice`), a component
//!      `libpod_parent` (the cgroupfs manager's default parent,
//!      `CgroupfsDefaultCgroupParent`), `machine-libpod_pod_<id>.slice`.
//!    - CRI-O: `crio-<id>.scope`, `crio-conmon-<id>.scope`, `crio-<id>`.
//!    - Kubernetes (kubelet): `kubepods.slice`, `kubepods-*.slice`, a
//!      component `kubepods` (cgroupfs driver).
//!    - LXC: `lxc.payload.<name>`, `lxc.monitor.<name>`, a component `lxc`.
//!
//!    Less specific, looked at only when none of those matched:
//!    - `machine.slice`, `machine-<name>.scope`, `systemd-nspawn@<name>.service`:
//!      systemd's place for VMs and containers (systemd
//!      `docs/CGROUP_DELEGATION.md`: "machine.slice is where VMs and
//!      containers are supposed to be placed"; nspawn and machined
//!      register there with `Delegate=yes`).
//!    - `user@<uid>.service`: a user's service manager, a `Delegate=yes`
//!      unit in systemd's own `user@.service`.
//!    - a component (or `<component>.scope`) that is a 64-digit lowercase
//!      hex id: what docker, containerd, podman and CRI-O name a container
//!      (`/kubepods/burstable/pod<uid>/<id>` with the cgroupfs driver, or a
//!      custom cgroupfs parent `/PARENT/<id>`).
//!
//!    Inside `settings.cgroup_root` only the components below it count.
//! 4. A cgroup, or an ancestor (below the cgroup mount's root, and below
//!    `cgroup_root` for a path inside it), marked delegated: systemd sets the
//!    extended attribute `trusted.delegate` = `1` (and `user.delegate`, which
//!    any user may read, on kernels with user xattrs on cgroupfs) on the
//!    cgroup of every `Delegate=yes` unit (systemd `src/core/cgroup.c`,
//!    `cgroup_delegate_xattr_apply`) and reads it back the same way, the
//!    trusted one first (`src/basic/cgroup-util.c`, `cg_is_delegated`).
//!    runc's systemd driver sets `Delegate=true` on each container's scope
//!    (runc `docs/systemd.md`), so on such a systemd every container scope is
//!    marked too. Older systemd versions set no mark: there the shapes above
//!    are all there is. The mark is read by the caller (a syscall);
//!    [`owner`] is handed the reader.
//!
//! A process in cgwarden's own delegated subtree (`cgwarden-delegated.service`
//! with `cgroup_root` set to the unit's cgroup) is not "delegated away": the
//! walk stops at `cgroup_root`.

/// Who, other than cgwarden, manages a cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A container runtime, by the shape of a path component.
    Runtime(&'static str),
    /// A component named by a container id (64 hex digits), runtime unknown.
    ContainerId,
    /// systemd's place for VMs and containers (`machine.slice`, nspawn).
    Machines,
    /// A user's service manager (`user@UID.service`, `Delegate=yes`).
    UserManager(String),
    /// The nearest cgroup marked delegated (`trusted.delegate`/`user.delegate`).
    Delegated(String),
    /// A group below cgwarden's group of this name that cgwarden did not create.
    Below(String),
}

impl Owner {
    /// Whose the cgroup is, for people: completes "its cgroup belongs to …".
    pub(crate) fn what(&self) -> String {
        match self {
            Owner::Runtime(r) => format!("a container runtime ({r})"),
            Owner::ContainerId => "a container runtime (a group named by a container id)".into(),
            Owner::Machines => "systemd's VMs and containers (machine.slice)".into(),
            Owner::UserManager(u) => format!("a user's service manager ({u})"),
            Owner::Delegated(at) => {
                format!("the manager of a delegated subtree ({at} is marked: Delegate=yes)")
            }
            Owner::Below(g) => format!(
                "whoever created it below cgwarden's group {g} (a runtime given {g} as its \
                 cgroup parent, or a subgroup made by hand)"
            ),
        }
    }
}

/// Where cgwarden's own groups are, as `/proc/PID/cgroup` shows them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Domain {
    /// `settings.cgroup_root` (`""` for the mount's root, else `/a/b`).
    pub(crate) root: String,
    /// Each policy group's cgroup and its name.
    pub(crate) groups: Vec<(String, String)>,
    /// The hook runs' parent group (cgwarden's too).
    pub(crate) hooks: String,
}

impl Domain {
    /// The domain of `cgroup_root` shown as `root`, with the policy groups
    /// `(name, path below cgroup_root)` and the hook runs' parent `hooks`.
    pub(crate) fn new<'a>(
        root: &str,
        groups: impl IntoIterator<Item = (&'a str, &'a str)>,
        hooks: &str,
    ) -> Domain {
        let root = root.trim_end_matches('/').to_string();
        Domain {
            groups: groups
                .into_iter()
                .map(|(name, path)| (format!("{root}/{path}"), name.to_string()))
                .collect(),
            hooks: format!("{root}/{hooks}"),
            root,
        }
    }
}

/// Whose `cgroup` is (see the module docs); `None`: nobody's but the
/// system's or cgwarden's, so placement may move the process.
/// `marked(path)` says whether the cgroup `path` (as /proc shows it) is
/// marked delegated; it is asked only when the path's shape decides nothing,
/// nearest cgroup first.
pub(crate) fn owner(
    cgroup: &str,
    domain: &Domain,
    mut marked: impl FnMut(&str) -> bool,
) -> Option<Owner> {
    let cgroup = cgroup.trim_end_matches('/');
    if domain.groups.iter().any(|(g, _)| g == cgroup)
        || (!domain.root.is_empty() && cgroup == domain.root)
        || (!domain.hooks.is_empty() && cgroup == domain.hooks)
        || under(cgroup, &domain.hooks)
    {
        return None;
    }
    // The deepest policy group the cgroup is below: someone made a group there.
    if let Some((g, name)) = domain
        .groups
        .iter()
        .filter(|(g, _)| under(cgroup, g))
        .max_by_key(|(g, _)| g.len())
    {
        let below = &cgroup[g.len()..];
        return Some(by_shape(below, false).unwrap_or_else(|| Owner::Below(name.clone())));
    }
    // Only what lies below cgroup_root counts inside it.
    let (base, rest) = match under(cgroup, &domain.root) {
        true => (domain.root.as_str(), &cgroup[domain.root.len()..]),
        false => ("", cgroup),
    };
    if let Some(o) = by_shape(rest, base.is_empty()) {
        return Some(o);
    }
    // A path from outside this cgroup namespace (`/../..`) has no
    // cgroup this process can read the mark of.
    if cgroup.split('/').any(|c| c == "..") {
        return None;
    }
    let mut at = cgroup;
    while at.len() > base.len() && !at.is_empty() {
        if marked(at) {
            return Some(Owner::Delegated(at.to_string()));
        }
        at = match at.rfind('/') {
            Some(i) => &at[..i],
            None => break,
        };
    }
    None
}

/// Whether `path` is strictly below the group `g` (both as /proc shows
/// them); nothing is below an empty `g` (no such group).
fn under(path: &str, g: &str) -> bool {
    !g.is_empty() && path.len() > g.len() && path.starts_with(g) && path.as_bytes()[g.len()] == b'/'
}

/// The owner the components of `rel` (`/a/b/c`) name, if any; `from_top`:
/// `rel` starts at the mount's root (containerd's `/<namespace>/<id>`).
fn by_shape(rel: &str, from_top: bool) -> Option<Owner> {
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    if from_top && comps.len() >= 2 && CONTAINERD_NAMESPACES.contains(&comps[0]) {
        return Some(Owner::Runtime("containerd"));
    }
    if let Some(r) = comps.iter().find_map(|c| runtime(c)) {
        return Some(Owner::Runtime(r));
    }
    comps.iter().find_map(|c| generic(c))
}

/// containerd namespaces whose default cgroups path is `/<namespace>/<id>`.
const CONTAINERD_NAMESPACES: [&str; 4] = ["default", "k8s.io", "moby", "buildkit"];

/// The runtime one path component names.
fn runtime(c: &str) -> Option<&'static str> {
    let scope = |prefix: &str| c.starts_with(prefix) && c.ends_with(".scope");
    if scope("docker-") || c == "docker" {
        Some("docker")
    } else if scope("runc-") {
        Some("runc")
    } else if c.starts_with("cri-containerd-") || scope("nerdctl-") {
        Some("containerd")
    } else if c.starts_with("libpod-")
        || c == "libpod_parent"
        || c.starts_with("machine-libpod_pod_")
    {
        Some("podman")
    } else if c.starts_with("crio-") {
        Some("CRI-O")
    } else if c == "kubepods" || c == "kubepods.slice" || c.starts_with("kubepods-") {
        Some("Kubernetes")
    } else if c == "lxc" || c.starts_with("lxc.payload.") || c.starts_with("lxc.monitor.") {
        Some("LXC")
    } else {
        None
    }
}

/// The less specific shapes: systemd's machines, a user manager, a bare id.
fn generic(c: &str) -> Option<Owner> {
    if c == "machine.slice"
        || (c.starts_with("machine-") && c.ends_with(".scope"))
        || c.starts_with("systemd-nspawn@")
    {
        Some(Owner::Machines)
    } else if c.starts_with("user@") && c.ends_with(".service") {
        Some(Owner::UserManager(c.to_string()))
    } else if is_id(c.strip_suffix(".scope").unwrap_or(c)) {
        Some(Owner::ContainerId)
    } else {
        None
    }
}

/// A container id as docker, containerd, podman and CRI-O make them: 64
/// lowercase hex digits.
fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests;
