#!/usr/bin/env bash
# The whole test suite, as CI runs it: format and lint gates, the guest
# kernel set-up (idempotent: packages and a cached Debian kernel), then every
# test layer through `cargo test` — unit, fake-root and the QEMU guest.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --all-targets -- -D warnings
bash tests/vm/setup.sh
cargo test --release
