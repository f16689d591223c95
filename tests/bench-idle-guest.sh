#!/bin/bash
# Idle-cost benchmark in the QEMU guest: `cgwarden run` with one stall rule
# served by a kernel PSI trigger vs. a trivial poller reading memory.pressure once a
# second, same boot, same window. Prints numbers, asserts nothing. TCG: compare rows.
#
#   bash tests/bench-idle-guest.sh [SECS=60]
#
# Needs tests/vm/setup.sh done; builds release binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload
extra=$(mktemp -d /tmp/cgwarden-bench-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$SECS" >"$extra/cgw/idle_secs"
log=$CACHE/bench-idle-serial.log
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=idle CGWARDEN_VM_EXTRA=$extra \
    CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-2} CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-900} \
    bash tests/vm/run-guest.sh target/release/cgwarden target/release/cgwarden-workload "$log" || true
grep '^BENCH' "$log" | sed 's/^BENCH //'
grep -q 'RESULT PASS .*bench-done' "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
