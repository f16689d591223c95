//! `cgwarden check` on arbitrary bytes: loading a policy must never panic,
//! whatever the file holds (not UTF-8, broken YAML, absurd values).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match cgwarden::policy::load_bytes("fuzz.yaml", data) {
        // Rendering is part of `check` too: the summary and every diagnostic.
        Ok(policy) => {
            let _ = cgwarden::policy::summary(&policy);
        }
        Err(diags) => {
            assert!(!diags.is_empty(), "load_bytes failed without a diagnostic");
            let _ = diags.to_string();
        }
    }
});
