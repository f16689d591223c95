# The placement benchmark in the guest, not a test: prints BENCH
# lines, asserts nothing. Run from the host with tests/bench-placement-guest.sh.
#
# The same exec storm as on the host (cgwarden-workload storm) against:
# cgwarden with the process-events connector, cgwarden scanning /proc every
# tick, cgrulesengd (Debian's cgroup-tools) when the image has it, and the
# connector again after remounting cgroup2 with favordynmods. TCG makes
# absolute numbers meaningless; compare the rows with each other.
N=$(cat /cgw/bench_n 2>/dev/null || echo 1000)
LIFE=$(cat /cgw/bench_life 2>/dev/null || echo 150)
# Gentler than the host's storm (8 at a time, polling every 100 us): under
# TCG that much polling starves the daemons being measured.
PAR=$(cat /cgw/bench_par 2>/dev/null || echo 2)
POLL_US=1000
WL=$(command -v cgwarden-workload)
D=/tmp/cgwbench
GROUP=cgwarden-bench-a
mkdir -p "$D" "$CG/$GROUP"
# cgrulesengd needs its rule's controller (memory) on at the root; on for
# every row so they compare.
echo +memory >"$CG/cgroup.subtree_control"
cp "$WL" "$D/cgwbench-child"
cp "$WL" "$D/cgwbench-drive"
cat >"$D/policy.yaml" <<EOP
version: 1
product: placement-bench
settings:
  cgroup_root: $CG
  state_dir: $D/state
  rescan: 30s
groups:
  $GROUP: {}
placement:
  - match: { comm: cgwbench-child }
    group: $GROUP
EOP
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

storm() { # LABEL DAEMON_PID
    echo "BENCH == $1 (N=$N, alive ${LIFE} ms, $PAR at a time, polling every $POLL_US us)"
    c0=$(cpu_ticks "$2")
    "$D/cgwbench-drive" storm "$D/cgwbench-child" "/$GROUP" "$N" "$LIFE" "$PAR" "$POLL_US" | sed 's/^/BENCH /'
    sleep 1
    c1=$(cpu_ticks "$2")
    awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$N" \
        'BEGIN { printf "BENCH daemon CPU: %.1f ms per 1000 execs\n", c * 1000 / hz / n * 1000 }'
}

cgwarden_run() { # LABEL ENV...
    _label=$1
    shift
    env CGWARDEN_LOG=info "$@" cgwarden run "$D/policy.yaml" --tick 100ms 2>"$D/daemon.log" &
    _pid=$!
    wait_for 60 grep -q "cgwarden running" "$D/daemon.log"
    sleep 1
    storm "$_label" "$_pid"
    kill -TERM "$_pid"
    wait "$_pid"
    grep -E "placement: placed|favordynmods" "$D/daemon.log" | sed 's/^/BENCH   log| /'
}

migrate_cost() {
    mkdir -p "$CG/cgwarden-bench-x" "$CG/cgwarden-bench-y"
    echo "BENCH == kernel: one cgroup.procs write vs. the gap since the last migration"
    "$WL" migrate-cost "$CG/cgwarden-bench-x" "$CG/cgwarden-bench-y" 100 | sed 's/^/BENCH /'
    sleep 0.5
    rmdir "$CG/cgwarden-bench-x" "$CG/cgwarden-bench-y"
}

echo "BENCH cgroup2 options: $(awk '$3 == "cgroup2" { print $4 }' /proc/mounts)"
migrate_cost
cgwarden_run "cgwarden, process-events connector"
cgwarden_run "cgwarden, /proc scan every 100 ms tick" CGWARDEN_NO_PROC_EVENTS=1

if command -v cgrulesengd >/dev/null 2>&1; then
    # -n: foreground; default verbosity (a per-event debug log would slow it).
    cgrulesengd -n -f "$D/cgrules.log" >/dev/null 2>&1 &
    _pid=$!
    wait_for 30 test -S /run/cgred.socket
    storm "cgrulesengd (cgroup-tools 2.0.2, /etc/cgrules.conf)" "$_pid"
    kill -TERM "$_pid"
    wait "$_pid"
    tail -n 3 "$D/cgrules.log" | sed 's/^/BENCH   log| /'
else
    echo "BENCH cgrulesengd: not in this image (tests/bench-placement-guest.sh adds it)"
fi

if mount -o remount,favordynmods none "$CG"; then
    echo "BENCH cgroup2 options: $(awk '$3 == "cgroup2" { print $4 }' /proc/mounts)"
    migrate_cost
    cgwarden_run "cgwarden, process-events connector, favordynmods"
    cgwarden_run "cgwarden, /proc scan every 100 ms tick, favordynmods" CGWARDEN_NO_PROC_EVENTS=1
else
    echo "BENCH remount with favordynmods refused"
fi
rmdir "$CG/$GROUP" 2>/dev/null
pass bench-done "placement benchmark ran"
