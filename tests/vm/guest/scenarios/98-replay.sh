# limit: 240
# Replay on a real kernel: the daemon records a run with real memory pressure
# (a hog throttled at squeeze's memory.high, no swap) and an OOM kill (a hog over
# oomer's memory.max); `cgwarden replay` of the same policy over that recording gives the
# recorded firings of both rules (matched within one recorder interval, "same"),
# and a lower pressure threshold fires no later and stays active longer (a sweep
# and a replay of the changed policy say so).
P=$POL/replay.yaml
DB=/run/cgw-replay/recorder.db
rm -rf /run/cgw-replay

check policy-valid "replay.yaml is valid" cgwarden check "$P"
start_daemon "$P"
# Pressure: 150 MiB wanted under a 64 MiB memory.high (no swap: the kernel
# throttles it there), until the rule has fired; then the hog goes. (sh -c
# execs the workload, so $! is the hog's PID: a backgrounded shell function
# would be a subshell with a PID of its own.)
sh -c 'echo $$ >"$0" && exec "$@"' "$CG/squeeze/cgroup.procs" \
    cgwarden-workload alloc 150 120 >/dev/null 2>&1 &
HOG=$!
check pressure-fired "pressure fired: squeeze.cpu.weight 50" wait_for 60 knob_is "$CG/squeeze/cpu.weight" 50
sleep 2
kill "$HOG" 2>/dev/null
wait "$HOG" 2>/dev/null
no_hog() { [ -z "$(cat "$CG/squeeze/cgroup.procs")" ]; }
check hog-gone "squeeze is empty" wait_for 20 no_hog
check pressure-cleared "pressure cleared after the hog: cpu.weight 100" wait_for 90 knob_is "$CG/squeeze/cpu.weight" 100
# An OOM kill: 96 MiB in oomer's 32 MiB memory.max.
sh -c 'echo $$ >"$0" && exec "$@"' "$CG/oomer/cgroup.procs" cgwarden-workload alloc 96 5 >/dev/null 2>&1
k=$(event_count oomer oom_kill)
check oom-kill "oomer's memory.events oom_kill >= 1 (got '$k')" test "${k:-0}" -ge 1
check oom-fired "oom fired: oomer.pids.max 500 was written" wait_for 30 grep -q 'INFO set oomer.pids.max = 500, .*by rule oom' "$DLOG"
check oom-cleared "oom cleared 3 s after the kill: pids.max 1000" wait_for 30 knob_is "$CG/oomer/pids.max" 1000
sleep 3
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check recording "the recorder's database exists" test -s "$DB"

# The recorded policy, replayed.
cgw replay "$P" --recording "$DB"
check_eq replay-exit 0 echo "$RC"
same() { # RULE: "RULE: recorded N firing(s), replayed N (N matched) — same", N >= 1
    _l=$(grep "^  $1: recorded " /tmp/cgw.out)
    _r=$(echo "$_l" | sed -n 's/.*recorded \([0-9]*\) firing(s), replayed \([0-9]*\) (\([0-9]*\) matched).*/\1 \2 \3/p')
    set -- $_r
    [ "${1:-0}" -ge 1 ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] && echo "$_l" | grep -q ' same;'
}
check replay-pressure "pressure: replayed firings equal the recorded ones" same pressure
check replay-oom "oom: replayed firings equal the recorded ones" same oom

# A lower threshold over the same recording.
cgw replay "$P" --recording "$DB" --sweep pressure.threshold=5%..20%/15% --json
act=$(grep -o '"active_seconds": *[0-9.]*' /tmp/cgw.out | sed 's/.*: *//' | tr '\n' ' ')
fir=$(grep -o '"firings": *[0-9]*' /tmp/cgw.out | sed 's/.*: *//' | tr '\n' ' ')
echo "SWEEP_5_20 firings=$fir active_seconds=$act"
longer() { set -- $act; awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b && b > 0) }'; }
check sweep-longer "at 5% pressure is active longer than at 20% ($act s)" longer
sed 's/avg10 > 20%/avg10 > 5%/' "$P" >"$T/replay-low.yaml"
cgw replay "$P" --recording "$DB" --json
s20=$(grep -o '"start": *[0-9.]*' /tmp/cgw.out | head -n 1 | sed 's/.*: *//')
cgw replay "$T/replay-low.yaml" --recording "$DB"
# Ends later, or (on a slow guest, where avg10 decays past the recording's
# end) is still active when the recording ends.
low_differs() {
    grep -q '^  pressure: recorded .* — differs' /tmp/cgw.out &&
        grep -qE '^    (~ .* later than in the recording|~ .* ends otherwise: one of the two is still active at the end|\+ .* would fire)' /tmp/cgw.out
}
check low-differs "at 5% the diff says pressure differs: it fires where the recording did not, ends later, or is still active at the end" low_differs
cgw replay "$T/replay-low.yaml" --recording "$DB" --json
s5=$(grep -o '"start": *[0-9.]*' /tmp/cgw.out | head -n 1 | sed 's/.*: *//')
no_later() { awk -v a="$s5" -v b="$s20" 'BEGIN { exit !(a != "" && b != "" && a <= b) }'; }
check low-no-later "at 5% the first firing starts no later ($s5 <= $s20)" no_later
cgw reset "$P"
check_eq reset-exit 0 echo "$RC"
