#!/bin/bash
# Exec-flood benchmark in the QEMU guest: N processes started at
# once, all alive together, each polling its own cgroup (cgwarden-workload
# flood), against cgwarden with the connector, cgrulesengd (Debian's
# cgroup-tools) and a 100 ms /proc scan, in ONE boot; then the light storm
# for parity. Prints the BENCH lines and a table. TCG: compare rows only.
#
#   bash tests/bench-flood-guest.sh [N=2000] [DEADLINE_MS=3000] [POLL_US=1000] [BASE_BINARY]
#
# BASE_BINARY (optional): an older cgwarden build, run as an extra row
# ("before"); CGWARDEN_FLOOD_ABLATION=1 adds a row with the daemon's
# reacting threads at SCHED_OTHER. Needs tests/vm/setup.sh done; builds release binaries;
# downloads cgroup-tools + libcgroup2 (.deb, not installed) into the VM cache.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
DEADLINE=${2:-3000}
POLL=${3:-1000}
BASE=${4:-}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload
extra=$(mktemp -d /tmp/cgwarden-flood-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw" "$extra/usr/bin"
echo "$N" >"$extra/cgw/flood_n"
echo "$DEADLINE" >"$extra/cgw/flood_deadline"
echo "$POLL" >"$extra/cgw/flood_poll"
[[ -n $BASE ]] && cp "$BASE" "$extra/usr/bin/cgwarden-base"
# CGWARDEN_FLOOD_ROWS="scan cgrules floor" (the default): the anchor rows to run
# ("floor": the launcher hands each pid to a placer that only writes it;
# "floor-stat", "floor-all": the same with the /proc reads of a placer);
# "dynmods" adds cgwarden and cgrulesengd again under favordynmods; "again"
# runs cgwarden's rows (and BASE_BINARY's) once more after the anchors;
# "nowarm" leaves out the unmeasured warm-up flood that goes first.
[[ -n ${CGWARDEN_FLOOD_ROWS+x} ]] && echo "$CGWARDEN_FLOOD_ROWS" >"$extra/cgw/flood_rows"
# The row with the reacting threads at SCHED_OTHER (what priority buys).
[[ -n ${CGWARDEN_FLOOD_ABLATION:-} ]] && : >"$extra/cgw/flood_ablation"
# CGWARDEN_FLOOD_PERF=1: each flood row under perf (the host's perf and its
# libraries copied into the image by run-guest.sh, never run on the host).
tools=
if [[ -n ${CGWARDEN_FLOOD_PERF:-} ]]; then
    : >"$extra/cgw/flood_perf"
    command -v perf >/dev/null || { echo "bench-flood-guest: CGWARDEN_FLOOD_PERF needs perf (linux-perf) on the host" >&2; exit 2; }
    tools=perf
fi
# CGWARDEN_FLOOD_CALLGRIND=1: only cgwarden, under the host's callgrind
# (copied into the image): user-space instructions a placement, the figure
# that repeats from run to run; the profile is left for callgrind_annotate in
# $CACHE/flood-callgrind.out. Slow: e.g. `300 120000 50000` (children alive
# until placed, polling every 50 ms).
if [[ -n ${CGWARDEN_FLOOD_CALLGRIND:-} ]]; then
    source tests/vm/callgrind.sh
    callgrind_into_image "$extra" bench-flood-guest
    : >"$extra/cgw/flood_callgrind"
fi
if ! bash tests/vm/cgrules-image.sh "$CACHE/cgrules" "$extra"; then
    echo "bench-flood-guest: cgrulesengd not available; its row is left out" >&2
fi
log=${CGWARDEN_FLOOD_LOG:-$CACHE/bench-flood-serial.log}
# 2 vCPUs as in the issue's measurement; room for N pollers.
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=flood CGWARDEN_VM_EXTRA=$extra CGWARDEN_VM_TOOLS=$tools \
    CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-2} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
    CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-3000} \
    bash tests/vm/run-guest.sh target/release/cgwarden target/release/cgwarden-workload "$log" || true
grep '^BENCH' "$log" | sed 's/^BENCH //'
if [[ -n ${CGWARDEN_FLOOD_CALLGRIND:-} ]]; then
    callgrind_profile "$log" "$CACHE/flood-callgrind.out" "the flood's daemon"
fi
grep -q 'RESULT PASS .*bench-done' "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
