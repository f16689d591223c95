#!/bin/bash
# Placement latency benchmark: exec -> pid visible in the target
# cgroup, over an exec storm of short-lived processes, with the process-events
# connector and with the /proc-scan fallback (CGWARDEN_NO_PROC_EVENTS=1) as
# the baseline; plus the daemon's CPU time per 1,000 execs. Numbers, not asserts.
#
#   sudo bash tests/bench-placement.sh CGWARDEN [N=10000] [LIFE_MS=30] [TICK=100ms]
#
# (cgwarden-workload is taken from beside CGWARDEN: cargo build --release builds both.)
#
# Runs on the host's cgroup2 mount as DEVELOPERS.md allows: only groups named
# cgwarden-bench-* under /sys/fs/cgroup/unified (no controllers), a policy whose
# only placement rule matches the benchmark's own child program, state in /tmp;
# it moves and kills only the processes it started and removes its groups.
#
# Latency: each child records, from its own start, when /proc/self/cgroup first
# names the target (polled every 100 us; same membership cgroup.procs lists);
# the driver subtracts the time its spawn returned (the exec happened).
# A child that never sees itself placed within its LIFE_MS is "never placed".
# See src/bin/cgwarden-workload/storm.rs.
set -euo pipefail
BIN=$(readlink -f "${1:?usage: bench-placement.sh CGWARDEN [N] [LIFE_MS] [TICK]}")
WL=$(dirname "$BIN")/cgwarden-workload
[ -x "$WL" ] || { echo "no $WL (cargo build --release)" >&2; exit 2; }
N=${2:-10000}
LIFE=${3:-30}
TICK=${4:-100ms}
MNT=${CGWARDEN_BENCH_MOUNT:-/sys/fs/cgroup/unified}
GROUP=cgwarden-bench-a
W=$(mktemp -d /tmp/cgwarden-bench.XXXXXX)
trap 'kill $DPID 2>/dev/null || true; wait 2>/dev/null || true; rmdir "$MNT/$GROUP" "$MNT/cgwarden-bench-x" "$MNT/cgwarden-bench-y" 2>/dev/null || true; rm -rf "$W"' EXIT
DPID=

[ -e "$MNT/cgroup.procs" ] || { echo "no cgroup2 mount at $MNT" >&2; exit 2; }

# The storm (cgwarden-workload storm): the same program runs in the guest.
# The child is a copy named as the rule matches; the driver must not match
# the rule itself (its children would inherit the group).
cp "$WL" "$W/cgwbench-child"
cp "$WL" "$W/cgwbench-drive"

cat >"$W/policy.yaml" <<EOF
version: 1
product: placement-bench
settings:
  cgroup_root: $MNT
  state_dir: $W/state
  rescan: 30s
groups:
  $GROUP: {}
placement:
  - match: { comm: cgwbench-child }
    group: $GROUP
EOF

run() { # LABEL ENV...
    local label=$1
    shift
    env "$@" "$BIN" run "$W/policy.yaml" --tick "$TICK" 2>"$W/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do grep -q "cgwarden running" "$W/daemon.log" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    local c0 c1
    c0=$(awk '{print $14+$15}' /proc/$DPID/stat)
    echo "== $label"
    "$W/cgwbench-drive" storm "$W/cgwbench-child" "/$GROUP" "$N" "$LIFE" 8
    sleep 0.3
    c1=$(awk '{print $14+$15}' /proc/$DPID/stat)
    local hz
    hz=$(getconf CLK_TCK)
    awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$N" 'BEGIN{printf "daemon CPU: %.1f ms per 1000 execs\n", c*1000/hz/n*1000}'
    kill -TERM $DPID
    wait $DPID || true
    DPID=
    grep -E "connector|scanning|placement:" "$W/daemon.log" | sed "s/^/  log| /" | tail -3
}

run "process-events connector" CGWARDEN_LOG=info
run "/proc-scan fallback (tick $TICK)" CGWARDEN_LOG=info CGWARDEN_NO_PROC_EVENTS=1

# The kernel's part: a migration write's cost against the time since the
# previous migration (no daemon involved).
echo "== kernel: one cgroup.procs write vs. the gap since the last migration"
mkdir -p "$MNT/cgwarden-bench-x" "$MNT/cgwarden-bench-y"
"$WL" migrate-cost "$MNT/cgwarden-bench-x" "$MNT/cgwarden-bench-y" 200
sleep 0.2
