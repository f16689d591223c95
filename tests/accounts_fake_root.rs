//! Account names resolve from the root's own files: grants,
//! placement and hooks read `ROOT/etc/passwd` and `ROOT/etc/group` through
//! one parser, so a `--root` tree never borrows the host's accounts.

mod support;

use cgwarden::testing::FakeTree;
use support::{Daemon, Start};

#[test]
fn grants_resolve_the_fake_trees_accounts_not_the_hosts() {
    // `daemon` is in every Debian host's /etc/passwd and /etc/group, and
    // not in the fake tree's; `vision` is only in the fake tree's.
    let host = std::fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        host.lines().any(|l| l.starts_with("daemon:")),
        "host lacks `daemon`"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(
        &policy,
        "version: 1\ngroups:\n  app:\n    pids: { max: 100 }\ncontrol:\n  \
         - user: vision\n    boost: [\"app.pids.max\"]\n  \
         - group: vision\n    boost: [\"app.pids.max\"]\n  \
         - user: daemon\n    boost: [\"app.pids.max\"]\n  \
         - group: daemon\n    boost: [\"app.pids.max\"]\n",
    )
    .unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    let log = d.log();
    let (_, _) = d.stop();
    let ignored = |who: &str| {
        log.lines().any(|l| {
            l.contains(&format!("control: {who} (policy line")) && l.contains("does not exist")
        })
    };
    assert!(
        !ignored("user vision"),
        "the fake tree's user resolves: {log}"
    );
    assert!(
        !ignored("group vision"),
        "the fake tree's group resolves: {log}"
    );
    assert!(
        ignored("user daemon"),
        "the host's user is not borrowed: {log}"
    );
    assert!(
        ignored("group daemon"),
        "the host's group is not borrowed: {log}"
    );
}
