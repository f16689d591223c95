//! Values the kernel refuses, or changes beside a write, emulated on a fake
//! tree as the 6.1 guest showed them (the `originals` guest scenario checks
//! them on the real kernel):
//!
//! - zram `comp_algorithm` takes one algorithm name it offers and then
//!   reads the whole list with that one in brackets (`lzo lzo-rle [lz4]`);
//!   the list itself, or a name not offered, is EINVAL.
//! - `cpuset.cpus.partition` takes the state word; the `isolated invalid
//!   (REASON)` it may read is EINVAL.
//! - `cgroup.type` takes only `threaded` (EINVAL for `domain`).
//! - the coupled sysctls ([`crate::knobs::coupled`]):
//!   `vm.dirty_bytes` and `vm.dirty_background_bytes` refuse 0 (EINVAL);
//!   writing the amount zeroes the ratio and writing the ratio zeroes the
//!   amount — `vm.dirty_ratio` and `vm.dirty_bytes` only when the value
//!   changes, the others on every write.

use std::path::Path;

use super::super::Root;
use crate::kernel::error::{Error, Result};

fn einval(p: &Path) -> Error {
    Error::io(
        "write",
        Root::normalize(p),
        std::io::Error::from_raw_os_error(libc::EINVAL),
    )
}

/// `Some(result)` when `p` is one of the files above (refused, or written
/// with its side effect through `replace`); `None` for any other file.
pub(super) fn write(
    root: &Root,
    p: &Path,
    value: &str,
    replace: impl Fn(&Path, &str) -> Result<()>,
) -> Option<Result<()>> {
    let dev = Root::normalize(p);
    let name = dev.file_name()?.to_str()?;
    let v = value.trim();
    let one_word = v.split_whitespace().count() == 1;
    if name == "comp_algorithm" && dev.starts_with(crate::knobs::zram::BLOCK_DIR) {
        if !one_word {
            return Some(Err(einval(&dev)));
        }
        let now = root.read(&dev).unwrap_or_default();
        let offered: Vec<&str> = now
            .split_whitespace()
            .map(|t| t.trim_start_matches('[').trim_end_matches(']'))
            .collect();
        // A fake file holding one name (or none) is not a kernel's list.
        if offered.len() < 2 {
            return None;
        }
        if !offered.contains(&v) {
            return Some(Err(einval(&dev)));
        }
        let list: Vec<String> = offered
            .iter()
            .map(|a| {
                if *a == v {
                    format!("[{a}]")
                } else {
                    a.to_string()
                }
            })
            .collect();
        return Some(replace(&dev, &list.join(" ")));
    }
    if name == "cpuset.cpus.partition" {
        return (!one_word).then(|| Err(einval(&dev)));
    }
    if name == "cgroup.type" {
        return (v != "threaded").then(|| Err(einval(&dev)));
    }
    let (amount, ratio) = crate::knobs::coupled(&dev)?;
    let is_amount = dev == amount;
    let n: u64 = match v.parse() {
        Ok(n) => n,
        Err(_) => return Some(Err(einval(&dev))),
    };
    let refuses_zero = name == "dirty_bytes" || name == "dirty_background_bytes";
    if is_amount && n == 0 && refuses_zero {
        return Some(Err(einval(&dev)));
    }
    let old = root.read_trimmed(&dev).ok();
    if let Err(e) = replace(&dev, v) {
        return Some(Err(e));
    }
    let only_on_change = name == "dirty_ratio" || name == "dirty_bytes";
    if only_on_change && old.as_deref() == Some(v) {
        return Some(Ok(()));
    }
    let other = if is_amount { ratio } else { amount };
    Some(replace(&other, "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let t = tempfile::tempdir().unwrap();
        crate::kernel::fake_tree::FakeTree::standard(t.path()).unwrap();
        let r = Root::fake(t.path());
        (t, r)
    }

    #[test]
    fn what_the_kernel_refuses_is_refused() {
        let (_t, r) = tree();
        let alg = Path::new("/sys/block/zram0/comp_algorithm");
        let list = r.read(alg).unwrap();
        assert!(r.write(alg, &list).is_err(), "the list it reads");
        assert!(r.write(alg, "842").is_err(), "a name it does not offer");
        r.write(alg, "lz4").unwrap();
        assert_eq!(r.read_trimmed(alg).unwrap(), "lzo lzo-rle [lz4] lz4hc zstd");
        r.mkdir_all(Path::new("/sys/fs/cgroup/g")).unwrap();
        let part = Path::new("/sys/fs/cgroup/g/cpuset.cpus.partition");
        assert!(r
            .write(
                part,
                "isolated invalid (Cpu list in cpuset.cpus not exclusive)"
            )
            .is_err());
        r.write(part, "isolated").unwrap();
        let ty = Path::new("/sys/fs/cgroup/g/cgroup.type");
        assert!(r.write(ty, "domain").is_err());
        r.write(ty, "threaded").unwrap();
        assert!(r.write(Path::new("/proc/sys/vm/dirty_bytes"), "0").is_err());
        assert!(r
            .write(Path::new("/proc/sys/vm/dirty_background_bytes"), "0")
            .is_err());
    }

    #[test]
    fn coupled_sysctls_zero_each_other_as_the_kernel_does() {
        let (_t, r) = tree();
        let get = |n: &str| r.read_trimmed(&Path::new("/proc/sys/vm").join(n)).unwrap();
        let set = |n: &str, v: &str| r.write(&Path::new("/proc/sys/vm").join(n), v).unwrap();
        assert_eq!(
            (get("dirty_bytes"), get("dirty_ratio")),
            ("0".into(), "20".into())
        );
        set("dirty_bytes", "67108864");
        assert_eq!(get("dirty_ratio"), "0");
        set("dirty_ratio", "20");
        assert_eq!(get("dirty_bytes"), "0");
        // dirty_ratio written unchanged leaves dirty_bytes alone (6.1).
        set("dirty_bytes", "67108864");
        set("dirty_ratio", "0");
        assert_eq!(get("dirty_bytes"), "67108864");
        set("overcommit_kbytes", "1000");
        assert_eq!(get("overcommit_ratio"), "0");
        set("overcommit_kbytes", "0");
        set("overcommit_ratio", "50");
        assert_eq!(get("overcommit_kbytes"), "0");
        set("dirty_background_bytes", "33554432");
        assert_eq!(get("dirty_background_ratio"), "0");
    }
}
