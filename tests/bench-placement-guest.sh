#!/bin/bash
# Placement benchmark in the QEMU guest: the exec storm of
# tests/bench-placement.sh against cgwarden's connector, its /proc-scan
# fallback, cgrulesengd from Debian's cgroup-tools, and the connector with
# cgroup2 mounted favordynmods. TCG: compare rows, not absolute times.
#
#   bash tests/bench-placement-guest.sh [N=1000] [LIFE_MS=150] [PAR=2]
#
# Needs tests/vm/setup.sh done; builds release binaries; downloads
# cgroup-tools + libcgroup2 (.deb, not installed) into the VM cache.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
LIFE=${2:-150}
PAR=${3:-2}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload
extra=$(mktemp -d /tmp/cgwarden-bench-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$N" >"$extra/cgw/bench_n"
echo "$LIFE" >"$extra/cgw/bench_life"
echo "$PAR" >"$extra/cgw/bench_par"
if bash tests/vm/cgrules-image.sh "$CACHE/cgrules" "$extra"; then
    :
else
    echo "bench-placement-guest: cgrulesengd not available; its row is left out" >&2
fi
log=$CACHE/bench-placement-serial.log
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=placement CGWARDEN_VM_EXTRA=$extra CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-3000} \
    bash tests/vm/run-guest.sh target/release/cgwarden target/release/cgwarden-workload "$log" || true
grep '^BENCH' "$log" | sed 's/^BENCH //'
grep -q 'RESULT PASS .*bench-done' "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
