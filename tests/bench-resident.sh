#!/bin/bash
# The resident set of the whole locked daemon (a benchmark, not a test) on
# policies/iq9100-vision.yaml — metrics and the flight recorder on, `mlock: true` —
# in an 8-CPU guest (the policy's CPU map), one boot each: `cgwardend` as the package
# links it (static-pie), then `cgwarden run` of the default build and of the
# minimal device build (`--no-default-features`, built in target/minimal).
# With `arm64`: the arm64 package's binaries (packaging/arm64/build.sh) in the arm64
# guest, `cgwardend` and `cgwarden run`.
# Prints each build's BENCH lines and a table.
#
#   bash tests/bench-resident.sh [SECS=40] [arm64]
#
# Needs tests/vm/setup.sh done and cargo-deb (and tests/vm/setup-arm64.sh for arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-40}
ARCH=${2:-x86_64}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
if [[ $ARCH == arm64 ]]; then
    out=target/arm64-resident
    bash packaging/arm64/build.sh "$out" >/dev/null
    builds=(arm64-cgwardend arm64-default)
    guest=tests/vm/run-guest-arm64.sh
    wl=$out/cgwarden-workload
else
    # cgwarden, and cgwardend as the package links it (static-pie).
    bash packaging/deb/build.sh >/dev/null
    cargo build --release --quiet --bin cgwarden-workload
    CARGO_TARGET_DIR=target/minimal cargo build --release --quiet --no-default-features --bin cgwarden
    builds=(cgwardend default minimal)
    guest=tests/vm/run-guest.sh
    wl=target/release/cgwarden-workload
fi
extra=$(mktemp -d /tmp/cgwarden-resident-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$SECS" >"$extra/cgw/resident_secs"
cp policies/iq9100-vision.yaml "$extra/cgw/iq9100.yaml"
rows=()
for build in "${builds[@]}"; do
    # The guest gets cgwardend from beside the cgwarden it is given.
    case $build in
    cgwardend) bin=target/release/cgwarden shown=target/release/cgwardend cmd=cgwardend ;;
    default) bin=target/release/cgwarden shown=$bin cmd="cgwarden run" ;;
    minimal) bin=target/minimal/release/cgwarden shown=$bin cmd="cgwarden run" ;;
    arm64-cgwardend) bin=$out/cgwarden shown=$out/cgwardend cmd=cgwardend ;;
    arm64-default) bin=$out/cgwarden shown=$bin cmd="cgwarden run" ;;
    esac
    echo "$build" >"$extra/cgw/resident_build"
    echo "$cmd" >"$extra/cgw/resident_cmd"
    log=$CACHE/bench-resident-$build-serial.log
    CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=resident CGWARDEN_VM_EXTRA=$extra \
        CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-8} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
        CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-900} \
        bash "$guest" "$bin" "$wl" "$log" || true
    # The serial console ends its lines with CR LF.
    grep -a '^BENCH' "$log" | tr -d '\r' | sed 's/^BENCH //'
    grep -aq 'RESULT PASS .*bench-done' "$log" || { echo "bench-resident: $build did not finish; see $log" >&2; exit 1; }
    stripped=$(mktemp)
    strip_tool=strip
    [[ $ARCH == arm64 ]] && strip_tool=aarch64-linux-gnu-strip
    command -v "$strip_tool" >/dev/null || strip_tool=strip
    "$strip_tool" -o "$stripped" "$shown" 2>/dev/null || cp "$shown" "$stripped"
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
