//! The CPU clusters `cgwarden soak` loads one by one: the
//! cpufreq policies with their `related_cpus` (one policy per cluster on
//! big.LITTLE and DynamIQ boards), else the online CPUs grouped by
//! `topology/cluster_id` (a board or VM without cpufreq), else one group
//! per online CPU. Also the process's own affinity, so a load is pinned
//! only to CPUs it may use.

use super::root::Root;
use crate::units::CpuList;
use std::path::Path;

/// How the groups were found (shown by `soak`, docs/soak.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// `cpufreq/policyN/related_cpus`.
    Cpufreq,
    /// `cpuN/topology/cluster_id` of the online CPUs.
    Cluster,
    /// One group per online CPU (no cluster information).
    PerCpu,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Cpufreq => "cpufreq policies",
            Source::Cluster => "topology cluster_id",
            Source::PerCpu => "one per online CPU",
        }
    }
}

/// One group of CPUs: its name (`policy4`, `cluster0`, `cpu3`) and CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuGroup {
    pub(crate) name: String,
    pub(crate) cpus: CpuList,
}

/// The online CPUs (`/sys/devices/system/cpu/online`); none when unreadable.
pub(crate) fn online(root: &Root) -> CpuList {
    root.read_trimmed(Path::new("/sys/devices/system/cpu/online"))
        .ok()
        .and_then(|t| CpuList::parse_kernel(&t).ok())
        .unwrap_or_default()
}

/// The CPU groups of the board and how they were found.
pub(crate) fn cpu_groups(root: &Root) -> (Source, Vec<CpuGroup>) {
    let mut groups = Vec::new();
    for p in super::thermal::policies(root) {
        let cpus = super::cpufreq::read(root, &p, "related_cpus")
            .or_else(|_| super::cpufreq::read(root, &p, "affected_cpus"))
            .ok()
            .and_then(|t| CpuList::parse_kernel(&t.replace(' ', ",")).ok())
            .unwrap_or_default();
        if !cpus.0.is_empty() {
            groups.push(CpuGroup { name: p, cpus });
        }
    }
    if !groups.is_empty() {
        return (Source::Cpufreq, groups);
    }
    let online = online(root);
    let mut clusters: std::collections::BTreeMap<i64, CpuList> = Default::default();
    for cpu in online.iter() {
        let id = root
            .read_trimmed(Path::new(&format!(
                "/sys/devices/system/cpu/cpu{cpu}/topology/cluster_id"
            )))
            .ok()
            .and_then(|t| t.parse::<i64>().ok());
        match id {
            Some(id) => {
                clusters.entry(id).or_default().0.insert(cpu);
            }
            None => {
                clusters.clear();
                break;
            }
        }
    }
    // One cluster holding every CPU says nothing (x86, a VM): per CPU then.
    if clusters.len() > 1 {
        let groups = clusters
            .into_iter()
            .map(|(id, cpus)| CpuGroup {
                name: format!("cluster{id}"),
                cpus,
            })
            .collect();
        return (Source::Cluster, groups);
    }
    let groups = online
        .iter()
        .map(|c| CpuGroup {
            name: format!("cpu{c}"),
            cpus: CpuList([c].into()),
        })
        .collect();
    (Source::PerCpu, groups)
}

/// The CPUs this process may run on (`sched_getaffinity`); none when unknown.
pub(crate) fn allowed_cpus() -> CpuList {
    nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map(|set| {
            CpuList(
                (0..nix::sched::CpuSet::count() as u32)
                    .filter(|&c| set.is_set(c as usize).unwrap_or(false))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// Pins the calling thread to `cpus`.
pub(crate) fn pin_current_thread(cpus: &CpuList) -> super::Result<()> {
    super::task_attr::set_affinity(0, cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn w(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn cpufreq_policies_are_the_clusters() {
        let t = tempfile::tempdir().unwrap();
        w(t.path(), "sys/devices/system/cpu/online", "0-7\n");
        w(
            t.path(),
            "sys/devices/system/cpu/cpufreq/policy0/related_cpus",
            "0 1 2 3\n",
        );
        w(
            t.path(),
            "sys/devices/system/cpu/cpufreq/policy4/related_cpus",
            "4 5 6\n",
        );
        w(
            t.path(),
            "sys/devices/system/cpu/cpufreq/policy7/related_cpus",
            "7\n",
        );
        let (s, g) = cpu_groups(&Root::fake(t.path()));
        assert_eq!(s, Source::Cpufreq);
        let names: Vec<String> = g.iter().map(|g| format!("{}={}", g.name, g.cpus)).collect();
        assert_eq!(names, ["policy0=0-3", "policy4=4-6", "policy7=7"]);
    }

    #[test]
    fn without_cpufreq_cluster_ids_then_one_per_cpu() {
        let t = tempfile::tempdir().unwrap();
        w(t.path(), "sys/devices/system/cpu/online", "0-3\n");
        for (c, id) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
            w(
                t.path(),
                &format!("sys/devices/system/cpu/cpu{c}/topology/cluster_id"),
                &format!("{id}\n"),
            );
        }
        let (s, g) = cpu_groups(&Root::fake(t.path()));
        assert_eq!(s, Source::Cluster);
        assert_eq!(g.len(), 2);
        // One cluster for all (a VM): per CPU.
        w(
            t.path(),
            "sys/devices/system/cpu/cpu2/topology/cluster_id",
            "0\n",
        );
        w(
            t.path(),
            "sys/devices/system/cpu/cpu3/topology/cluster_id",
            "0\n",
        );
        let (s, g) = cpu_groups(&Root::fake(t.path()));
        assert_eq!(s, Source::PerCpu);
        assert_eq!(g.len(), 4);
        // Garbage everywhere: no panic, no groups.
        w(t.path(), "sys/devices/system/cpu/online", "x-y\n");
        let (_, g) = cpu_groups(&Root::fake(t.path()));
        assert!(g.is_empty());
    }
}
