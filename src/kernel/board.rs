//! Reads a board's bounds ([`crate::knobs::board::Board`]) from a root: the
//! CPUs it can have, the cgroup root's CPUs when it is a delegated group,
//! each cpufreq policy's `cpuinfo_{min,max}_freq`, `related_cpus` and
//! governors, each devfreq device's frequency table and governors, each zram
//! device's compressors, each CPU's `cpu_capacity` and what the board says
//! it is ([`super::identity::board_name`]). A file that cannot be read
//! leaves its fact unknown.

use super::Root;
use crate::knobs::board::Board;
use crate::units::CpuList;
use std::path::Path;

/// The board under `root`, with the cgroup root at `cgroup_root` (an
/// absolute path as the device sees it).
pub(crate) fn read(root: &Root, cgroup_root: &Path) -> Board {
    let cpus = |p: &Path| {
        root.read_trimmed(p)
            .ok()
            .and_then(|t| CpuList::parse_kernel(&t).ok())
    };
    let number = |p: &Path| {
        root.read_trimmed(p)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
    };
    let mut b = Board {
        possible_cpus: super::selfproc::possible_cpus(root),
        // A non-root group has `cpuset.cpus`; the hierarchy's root has only
        // `cpuset.cpus.effective`, and every CPU.
        root_cpus: if root.exists(&cgroup_root.join("cpuset.cpus")) {
            cpus(&cgroup_root.join("cpuset.cpus.effective"))
        } else {
            None
        },
        ..Board::default()
    };
    for family in crate::knobs::FAMILIES {
        family.read_bounds(root, &mut b);
    }
    for cpu in b.possible_cpus.iter().flat_map(|c| c.iter()) {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpu_capacity");
        if let Some(c) = number(Path::new(&path)) {
            b.cpu_capacity.insert(cpu, c);
        }
    }
    b.identity = super::identity::board_name(root);
    let block = root.list_dir(Path::new("/sys/block")).unwrap_or_default();
    for dev in block
        .into_iter()
        .filter(|d| crate::knobs::is_numbered(d, "zram"))
    {
        if let Ok((_, offered)) = super::zram::comp_algorithm(root, &dev) {
            b.zram_algorithms.insert(dev, offered);
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fake_tree::FakeTree;

    #[test]
    fn reads_the_standard_fake_board() {
        let t = tempfile::tempdir().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        let root = Root::fake(t.path());
        let b = read(&root, Path::new("/sys/fs/cgroup"));
        assert_eq!(b.possible_cpus, Some(CpuList::parse("0-7").unwrap()));
        assert_eq!(b.root_cpus, None);
        let p4 = &b.cpufreq["policy4"];
        assert_eq!((p4.min_khz, p4.max_khz), (Some(691_200), Some(2_400_000)));
        assert!(p4
            .governors
            .as_ref()
            .unwrap()
            .contains(&"schedutil".to_string()));
        assert_eq!(
            b.zram_algorithms["zram0"].first().map(String::as_str),
            Some("lzo")
        );
        // related_cpus as the kernel prints it (blank-separated), capacities.
        assert_eq!(p4.cpus, Some(CpuList::parse("4-6").unwrap()));
        assert_eq!(b.cpu_capacity.get(&7), Some(&1024));
        assert_eq!(b.identity, None);
        tree.file("sys/devices/soc0/machine", "QCS9100").unwrap();
        let b = read(&root, Path::new("/sys/fs/cgroup"));
        assert_eq!(b.identity.map(|i| i.name), Some("QCS9100".to_string()));
        // A delegated cgroup root is bounded by its effective CPUs.
        tree.file("sys/fs/cgroup/app.slice/cpuset.cpus", "")
            .unwrap();
        tree.file("sys/fs/cgroup/app.slice/cpuset.cpus.effective", "0-3")
            .unwrap();
        let b = read(&root, Path::new("/sys/fs/cgroup/app.slice"));
        assert_eq!(b.root_cpus, Some(CpuList::parse("0-3").unwrap()));
    }
}
