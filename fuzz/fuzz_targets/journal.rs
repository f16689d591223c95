//! The originals journal reader on arbitrary bytes: it must never panic, and
//! whatever it accepts names only canonical paths under the kernel interfaces
//! cgwarden manages (`reset` acts on it as root).
#![no_main]

use cgwarden::converge::journal::{managed, Journal};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let policy_root = Path::new("/sys/fs/cgroup");
    if let Ok(p) = Journal::parse_text(data, policy_root) {
        let cg = p.cgroup_root.as_deref().unwrap_or(policy_root);
        for e in &p.entries {
            assert!(managed(e, cg).is_none(), "accepted {e:?} under {cg:?}");
        }
        assert!(p.valid_len <= data.len());
    }
});
