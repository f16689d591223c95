//! The fuzz targets' bodies (`cgwarden::fuzzing`, called by
//! `fuzz/fuzz_targets/*.rs`) on a few inputs each: they keep compiling and
//! working between fuzzing runs (CI also `cargo check`s the fuzz
//! crate in tests/run-all.sh). The inputs are the corpus seeds kept in
//! fuzz/corpus/.

use std::path::Path;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(!v.is_empty(), "no seeds in {}", dir.display());
    v.push(Vec::new());
    v
}

#[test]
fn check_target_runs_on_its_seeds() {
    for s in seeds("check") {
        cgwarden::fuzzing::check(&s);
    }
}

#[test]
fn expr_target_runs_on_its_seeds() {
    for s in seeds("expr") {
        cgwarden::fuzzing::expr(&s);
    }
}

#[test]
fn journal_target_runs_on_its_seeds() {
    for s in seeds("journal") {
        cgwarden::fuzzing::journal(&s);
    }
}

#[test]
fn varlink_target_runs_on_its_seeds_and_the_service_keeps_answering() {
    for s in seeds("varlink") {
        cgwarden::fuzzing::varlink_request(&s);
    }
    // Bytes no JSON parser accepts, a message over the size limit, a NUL
    // in the middle: the service closes the connection and goes on.
    cgwarden::fuzzing::varlink_request(b"\xff\xfe{]");
    cgwarden::fuzzing::varlink_request(&vec![b'x'; 70 * 1024]);
    cgwarden::fuzzing::varlink_request(b"{\"method\":\0\"io.cgwarden.Daemon.Status\"}");
}
