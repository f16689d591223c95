#!/bin/bash
# The reaction lag after the kernel's PSI trigger (a benchmark, not a test),
# from ONE guest boot (Debian 6.1 under TCG, 2 vCPUs): a stall rule's write
# against a bare trigger monitor's stamp (`cgwarden-workload psi-stamp`,
# the same file and trigger text), per situation — episodes from 2 s after
# the daemon is ready, a stall beginning while the rule ends by silence,
# right after a reload (file edit, SIGHUP), after the page cache was
# reclaimed, and a fresh daemon's first episode — with the daemon run from a
# block device; then the cost beside `trigger-act` (the floor that makes the
# same writes at the same trigger): CPU over the same number of episodes
# (TCG: compare within a run) and, under callgrind, instructions an episode.
# The guest side is tests/vm/guest/bench/reaction-lag.sh. Prints a table.
#
#   bash tests/bench-reaction.sh [EPISODES=10] [FIRSTS=3] [CALLGRIND_EPISODES=4]
#
# CALLGRIND_EPISODES=0 leaves the callgrind pass out. Needs tests/vm/setup.sh
# done, and valgrind (Debian's package) on the host for the callgrind pass.
# CGWARDEN_LAG_LOG=debug (or directives: info,cgwarden::daemon::sample=debug):
# the daemon's log level. CGWARDEN_LAG_SITUATIONS="silence reload reclaim
# first floor" (the default, all): the situations measured after `start`.
set -euo pipefail
cd "$(dirname "$0")/.."
EPISODES=${1:-10}
FIRSTS=${2:-3}
CGN=${3:-4}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
cargo build --release --quiet --bin cgwarden --bin cgwarden-workload
extra=$(mktemp -d /tmp/cgwarden-reaction-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw"
echo "$EPISODES" >"$extra/cgw/reaction_lag_episodes"
echo "$FIRSTS" >"$extra/cgw/reaction_lag_firsts"
echo "$CGN" >"$extra/cgw/reaction_lag_cg_episodes"
[[ -n ${CGWARDEN_LAG_LOG:-} ]] && echo "$CGWARDEN_LAG_LOG" >"$extra/cgw/reaction_lag_log"
[[ -n ${CGWARDEN_LAG_SITUATIONS+x} ]] && echo "$CGWARDEN_LAG_SITUATIONS" >"$extra/cgw/reaction_lag_situations"
if ((CGN > 0)); then
    source tests/vm/callgrind.sh
    callgrind_into_image "$extra" bench-reaction
    : >"$extra/cgw/reaction_callgrind"
fi
log=${CGWARDEN_REACTION_LOG:-$CACHE/bench-reaction-serial.log}
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=reaction-lag CGWARDEN_VM_EXTRA=$extra \
    CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-2} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
    CGWARDEN_VM_TIMEOUT=${CGWARDEN_VM_TIMEOUT:-3000} \
    bash tests/vm/run-guest.sh target/release/cgwarden target/release/cgwarden-workload "$log" || true
# The serial console ends its lines with CR LF.
b() { grep -a '^BENCH' "$log" | tr -d '\r' | sed 's/^BENCH //'; }
b
echo
echo "| situation | lag after the kernel's trigger |"
echo "|---|---|"
b | sed -n 's/^lag \([^:]*\): \(.*\)$/| \1 | \2 |/p'
b | sed -n 's/^cpu: \(.*\)$/| TCG CPU, same episode count | \1 |/p'
b | sed -n 's/^instructions an episode (callgrind): \(.*\)$/| instructions an episode (callgrind) | \1 |/p'
if ((CGN > 0)); then
    callgrind_profile "$log" "$CACHE/reaction-lag-callgrind.out" "the daemon over the episodes"
    callgrind_profile "$log" "$CACHE/reaction-lag-callgrind-idle.out" "the daemon over an idle window as long" CGI64
    python3 tests/callgrind-diff.py "$CACHE/reaction-lag-callgrind.out" "$CACHE/reaction-lag-callgrind-idle.out" "$CGN" |
        head -n 40
fi
grep -aq "RESULT PASS .*reaction-lag-done" "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
