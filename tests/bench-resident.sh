#!/bin/bash
# The resident set of the whole locked daemon (a benchmark, not a test): `cgwarden run`
# of policies/iq9100-vision.yaml — metrics and the flight recorder on, `mlock: true` —
# in an 8-CPU guest (the policy's CPU map), for the default build and the minimal
# device build (`--no-default-features`, built in target/minimal), one boot each.
# Prints each build's BENCH lines and a table.
#
#   bash tests/bench-resident.sh [SECS=40]
#
# Needs tests/vm/setup.sh done.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-40}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload
CARGO_TARGET_DIR=target/minimal cargo build --release --quiet --no-default-features --bin cgwarden
extra=$(mktemp -d /tmp/cgwarden-resident-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$SECS" >"$extra/cgw/resident_secs"
cp policies/iq9100-vision.yaml "$extra/cgw/iq9100.yaml"
rows=()
for build in default minimal; do
    bin=target/release/cgwarden
    [[ $build == minimal ]] && bin=target/minimal/release/cgwarden
    echo "$build" >"$extra/cgw/resident_build"
    log=$CACHE/bench-resident-$build-serial.log
    CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=resident CGWARDEN_VM_EXTRA=$extra \
        CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-8} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
        CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-900} \
        bash tests/vm/run-guest.sh "$bin" target/release/cgwarden-workload "$log" || true
    # The serial console ends its lines with CR LF.
    grep -a '^BENCH' "$log" | tr -d '\r' | sed 's/^BENCH //'
    grep -aq 'RESULT PASS .*bench-done' "$log" || { echo "bench-resident: $build did not finish; see $log" >&2; exit 1; }
    stripped=$(mktemp)
    strip -o "$stripped" "$bin"
    rows+=("$(grep -a '^BENCH resident:' "$log" | tr -d '\r' | sed 's/^BENCH resident: //') stripped=$(stat -c %s "$stripped")B")
    rm -f "$stripped"
done
echo
echo "| build | stripped binary | RSS | locked | file-backed | anonymous | threads |"
echo "|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
    echo "$r" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", v["build"], v["stripped"], v["rss"], v["locked"], v["file"], v["anon"], v["threads"] }'
done
