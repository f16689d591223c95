//! The shipped policies follow their own advice: every policies/*.yaml
//! passes `check` with **no warning** (none grants sched fifo on a match by
//! name only), and where a policy documents a non-root `control:` grant its
//! socket is reachable by that grant's group (`socket_group: root` would make
//! the grant unusable).

use std::path::{Path, PathBuf};

mod support;

fn policies() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(v.len() >= 5, "{v:?}");
    v
}

#[test]
fn shipped_policies_pass_check_without_a_warning() {
    let mut bad = Vec::new();
    for p in policies() {
        let o = support::cmd().arg("check").arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if !o.status.success() || !err.trim().is_empty() {
            bad.push(format!(
                "{}: exit {:?}\n{err}",
                p.display(),
                o.status.code()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_grant_behind_a_root_only_socket_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |group: &str| {
        format!(
            "version: 1\nsettings:\n  socket_group: {group}\ngroups:\n  vision:\n    cpu: {{ weight: 100 }}\n\
             control:\n  - group: vision\n    boost: [\"vision.cpu.weight\"]\n    max_duration: 10m\n"
        )
    };
    let p = dir.path().join("p.yaml");
    std::fs::write(&p, policy("root")).unwrap();
    let o = support::cmd().arg("check").arg(&p).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(":8:5: warning: the control: grant to group `vision` cannot be used")
            && err.contains("socket_group"),
        "{err}"
    );
    std::fs::write(&p, policy("vision")).unwrap();
    let o = support::cmd().arg("check").arg(&p).output().unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
}
