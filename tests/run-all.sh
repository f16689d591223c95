#!/usr/bin/env bash
# The whole test suite, as CI runs it: format and lint gates, the guest
# kernel set-up (idempotent: packages and a cached Debian kernel), then every
# test layer through `cargo test` — unit, fake-root and the QEMU guest.
# Ends with one summary line: "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --all-targets -- -D warnings
bash tests/vm/setup.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --release 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$rc"
