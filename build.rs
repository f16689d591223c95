//! Build step: docs/policy.md, which `cgwarden manpages` renders into
//! `cgwarden-policy(5)`, goes into the binary gzip-compressed (35 KB of
//! Markdown become 13.4 KB; docs/size.md). The daemon
//! already links flate2 to read `/proc/config.gz`, so inflating it costs no
//! new code. Only the `docgen` feature carries the page.

use std::io::Write;

fn main() {
    println!("cargo::rerun-if-changed=docs/policy.md");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_DOCGEN").is_none() {
        return;
    }
    let md = std::fs::read("docs/policy.md").expect("docs/policy.md is readable");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&md).expect("compressing into memory");
    let bytes = gz.finish().expect("compressing into memory");
    std::fs::write(out.join("policy.md.gz"), bytes).expect("OUT_DIR is writable");
}
