#!/bin/bash
# The overload figures, each beside its anchor, from ONE guest boot (Debian
# 6.1 under TCG, 2 vCPUs): the idle cost against a 1 s poller, the idle
# footprint with metrics and the recorder against the 8 MiB target, the exec
# flood against cgrulesengd and a 100 ms /proc scan; then, on the host, the
# stripped binary against the 6 MB target; and the reaction cost: memory-pressure
# episodes handled by a PSI-trigger rule against a 1 s poller (startup and per episode). Prints a table at the end.
# TCG: compare rows of one run, not absolute times.
#
#   bash tests/bench-overload.sh [N=2000] [DEADLINE_MS=3000] [POLL_US=1000] [IDLE_SECS=60]
#
# Needs tests/vm/setup.sh done; builds release binaries; downloads
# cgroup-tools + libcgroup2 (.deb, not installed) into the VM cache.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
DEADLINE=${2:-3000}
POLL=${3:-1000}
IDLE=${4:-60}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
# CGWARDEN_LOOP_PROFILE=1: the daemon built with the `loop-profile` feature.
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload ${CGWARDEN_LOOP_PROFILE:+--features loop-profile}
bin=target/release/cgwarden
extra=$(mktemp -d /tmp/cgwarden-i29-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$N" >"$extra/cgw/flood_n"
echo "$DEADLINE" >"$extra/cgw/flood_deadline"
echo "$POLL" >"$extra/cgw/flood_poll"
echo "$IDLE" >"$extra/cgw/idle_secs"
[[ -n ${CGWARDEN_LOOP_PROFILE:-} ]] && : >"$extra/cgw/loop_profile"
# CGWARDEN_REACTION_PERF=1: only the reaction run, under perf (the host's perf
# and its libraries copied into the image, never run on the host), with a
# frame-pointer build of cgwarden (target/frame-pointers) so that each system
# call's stack names its Rust callers; its CPU figures include perf's cost.
only="footprint idle reaction flood"
tools=
if [[ -n ${CGWARDEN_REACTION_PERF:-} ]]; then
    command -v perf >/dev/null || { echo "bench-overload: CGWARDEN_REACTION_PERF needs perf (linux-perf) on the host" >&2; exit 2; }
    CARGO_TARGET_DIR=target/frame-pointers RUSTFLAGS="-C force-frame-pointers=yes" \
        cargo build --release --quiet --bin cgwarden
    bin=target/frame-pointers/release/cgwarden
    : >"$extra/cgw/reaction_perf"
    only=reaction
    tools=perf
fi
# CGWARDEN_REACTION_CALLGRIND=1: only the reaction, its daemon under the host's
# callgrind (copied into the image): user-space instructions a loop turn, the
# figure that repeats from run to run; the profile is left for
# callgrind_annotate in $CACHE/reaction-callgrind.out.
if [[ -n ${CGWARDEN_REACTION_CALLGRIND:-} ]]; then
    source tests/vm/callgrind.sh
    callgrind_into_image "$extra" bench-overload
    : >"$extra/cgw/reaction_callgrind"
    only=reaction
fi
bash tests/vm/cgrules-image.sh "$CACHE/cgrules" "$extra" ||
    echo "bench-overload: cgrulesengd not available; its row is left out" >&2
log=${CGWARDEN_OVERLOAD_LOG:-$CACHE/bench-overload-serial.log}
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=$only CGWARDEN_VM_EXTRA=$extra CGWARDEN_VM_TOOLS=$tools \
    CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-2} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
    CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-4000} \
    bash tests/vm/run-guest.sh "$bin" target/release/cgwarden-workload "$log" || true
# The serial console ends its lines with CR LF.
b() { grep -a '^BENCH' "$log" | tr -d '\r' | sed 's/^BENCH //'; }
b
stripped=$(mktemp)
cp target/release/cgwarden "$stripped"
strip "$stripped"
size=$(stat -c %s "$stripped")
rm -f "$stripped"
echo
echo "| figure | cgwarden | anchor |"
echo "|---|---|---|"
b | awk '
    /^cgwarden run \(PSI trigger\)/ { sub(/ +threads:.*/, ""); d = $0 }
    /^poll-file, 1 s/ { sub(/ +threads:.*/, ""); p = $0 }
    END { if (d != "") printf "| idle cost, %s | %s | %s |\n", "same window", d, p }'
b | sed -n 's/^footprint: \(.*\) (target \(.*\))$/| idle RSS, metrics + recorder | \1 | target \2 |/p'
# The flood table's rows: | placer | missed | p99 ms | CPU s |
b | awk -F' *[|] *' -v n="$N" '
    function cell(i) { return $3 " missed, p99 " $4 " ms, CPU " $5 " s" }
    $2 == "cgwarden, connector" && $3 ~ /\// { c = cell() }
    $2 ~ /^cgrulesengd/ { r = "cgrulesengd: " cell() }
    $2 ~ /^100 ms/ { s = "100 ms scan: " cell() }
    $2 ~ /^kernel floor: / { f = "; the kernel floor (pids handed over, moves alone): " cell() }
    END { if (c != "") printf "| exec flood, N=%s | %s | %s; %s%s |\n", n, c, r, s, f }'
b | sed -n 's/^reaction: cgwarden \(.*\); 1 s poller \(.*\)$/| reaction cost | \1 | 1 s poller: \2 |/p'
b | sed -n 's/^reaction CPU: cgwarden \(.*\) vs\. the acting poller \(.*\) (the reading poller \(.*\))$/| reaction CPU, same episodes, the anchor acting too | \1 | 1 s poller writing memory.high: \2 (reading only: \3) |/p'
b | sed -n 's/^reaction floor that acts at the trigger: \(.*\)$/| reaction floor: a bare PSI-trigger reactor, same episodes | \1 | — |/p'
echo "| stripped binary, every feature | $size bytes | 6000000 bytes |"
if [[ -n ${CGWARDEN_REACTION_CALLGRIND:-} ]]; then
    callgrind_profile "$log" "$CACHE/reaction-callgrind.out" "the episodes' daemon"
fi
done_mark=bench-done
[[ $only == reaction ]] && done_mark=reaction-done
grep -aq "RESULT PASS .*$done_mark" "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
