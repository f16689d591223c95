# The idle-cost benchmark in the guest, not a test: prints BENCH lines,
# asserts nothing. Run from the host with tests/bench-idle-guest.sh.
#
# One stall rule served by a kernel PSI trigger (`inference.memory.some > 100ms/1s`),
# nothing firing, for IDLE_SECS; side by side in the same boot and the same window,
# the trivial poller an integrator would write (keep memory.pressure open, pread it
# once a second: `cgwarden-workload poll-file`). CPU comes from each thread's
# /proc/PID/task/TID/schedstat (ns on CPU, wake-ups), so the table says which thread
# of the daemon spent it. TCG: compare the rows, not absolute times.
SECS=$(cat /cgw/idle_secs 2>/dev/null || echo 60)
D=/tmp/cgwidle
mkdir -p "$D"
cat >"$D/policy.yaml" <<EOP
version: 1
product: idle-bench
settings:
  cgroup_root: $CG
  state_dir: $D/state
groups:
  inference:
    memory: { high: 256M }
rules:
  - name: inference-stall
    when: inference.memory.some > 100ms/1s
    then:
      - raise inference.memory.high by 32M up to 512M
    cooldown: 3s
EOP

threads() { thread_schedstat "$1"; } # lib.sh
total_ns() { threads "$1" | awk '{ s += $3 } END { print s + 0 }'; }
total_slices() { threads "$1" | awk '{ s += $5 } END { print s + 0 }'; }

echo "BENCH == idle cost: one PSI-trigger stall rule vs. a 1 s poller, ${SECS} s, same window"
env CGWARDEN_LOG=info cgwarden run "$D/policy.yaml" 2>"$D/daemon.log" &
DP=$!
wait_for 60 grep -q "cgwarden running" "$D/daemon.log"
grep "cgwarden running" "$D/daemon.log" | sed 's/^/BENCH   log| /'
sleep 2 # let startup settle: the window measures the idle daemon only
cgwarden-workload poll-file "$CG/inference/memory.pressure" 1000 $((SECS + 5)) >"$D/poll.out" &
PP=$!
sleep 1
threads "$DP" >"$D/d0"
threads "$PP" >"$D/p0"
up0=$(cut -d' ' -f1 /proc/uptime)
sleep "$SECS"
up1=$(cut -d' ' -f1 /proc/uptime)
threads "$DP" >"$D/d1"
threads "$PP" >"$D/p1"
rss=$(rss_kib "$DP") # smaps_rollup: VmRSS lags on 6.1 after the daemon gives pages back
lck=$(awk '/^VmLck:/ { print $2 }' "/proc/$DP/status")
prss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PP/status")
row() { # LABEL BEFORE AFTER
    awk -v label="$1" -v wall="$(awk -v a="$up0" -v b="$up1" 'BEGIN { print b - a }')" '
        FNR == NR { ns[$1] = $3; sl[$1] = $5; next }
        { dn = $3 - ns[$1]; ds = $5 - sl[$1]; tn += dn; ts += ds
          per = per sprintf(" %s=%.1fms/%dwk", $2, dn / 1e6, ds) }
        END { printf "BENCH %-34s cpu %7.1f ms  wake-ups %5d  (%.2f%% of a core over %.0f s)  threads:%s\n",
              label, tn / 1e6, ts, 100 * tn / 1e9 / wall, wall, per }' "$2" "$3"
}
row "cgwarden run (PSI trigger)" "$D/d0" "$D/d1"
row "poll-file, 1 s (the anchor)" "$D/p0" "$D/p1"
echo "BENCH   cgwarden rss=${rss} KiB locked=${lck:-0} KiB; poller rss=${prss} KiB"
kill -TERM "$DP"
wait "$DP"
grep -E "event loop wake-ups" "$D/daemon.log" | sed 's/^/BENCH   log| /'
wait "$PP"
cgwarden reset --policy "$D/policy.yaml" >/dev/null 2>&1
pass bench-done "idle-cost benchmark ran"
