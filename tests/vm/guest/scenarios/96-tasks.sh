# A placement's per-process attributes and `threads:` on a real
# kernel. A ROS 2-shaped process (cgwarden-workload threads: threads ctrl,
# log, and late renamed ctrl-late after 2 s) placed by comm: every thread
# gets nice 5, ioprio be/1 and affinity 1-3, the process oom_score_adj
# -900; ctrl* threads run SCHED_FIFO 90 on CPU 3 in the threaded group
# node/node-rt (cgroup.threads), log stays SCHED_OTHER in node; the rename
# is followed through the connector's COMM event. Read back from /proc.
WL=$(command -v cgwarden-workload)
LOG=/tmp/cgw-tasks.log

tid_of() { # PID COMM -> the tid whose comm is COMM
    for t in /proc/"$1"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] && basename "$t" && return 0
    done
    return 1
}
tfield() { cut -d' ' -f"$3" "/proc/$1/task/$2/stat" 2>/dev/null; } # PID TID N
tcgroup() { sed -n 's/^0:://p' "/proc/$1/task/$2/cgroup" 2>/dev/null; }
tcpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/task/$2/status" 2>/dev/null; }

# plan (no daemon yet) shows the per-thread changes and writes nothing.
"$WL" exec-as cgwx-node threads 60 & P0=$!
wait_for 10 tid_of "$P0" ctrl-late
cgw plan "$POL/tasks.yaml"
check plan-type "plan makes node-rt threaded" grep -q "node-rt/cgroup.type threaded" /tmp/cgw.out
C0=$(tid_of "$P0" ctrl)
check plan-ctrl "plan: TASK $P0/$C0 (ctrl) sched fifo 90" grep -q "^TASK $P0/$C0 (ctrl) sched fifo 90" /tmp/cgw.out
check plan-oom "plan: oom_score_adj -900 once, on the main thread" grep -q "^TASK $P0/$P0 (cgwx-node) oom_score_adj -900 (was 0)" /tmp/cgw.out
L0=$(tid_of "$P0" log)
if grep -q "^TASK $P0/$L0 (log) sched" /tmp/cgw.out; then
    fail plan-log "plan changes log's sched: $(grep "^TASK $P0/$L0" /tmp/cgw.out)"
else
    pass plan-log "no sched for log"
fi
check_eq plan-wrote-nothing 0 cat "/proc/$P0/oom_score_adj"
kill "$P0"

env CGWARDEN_LOG=debug cgwarden run "$POL/tasks.yaml" >"$LOG" 2>&1 &
DPID=$!
wait_for 60 grep -q "cgwarden running" "$LOG"
check threaded "node/node-rt is threaded" grep -qx threaded "$CG/node/node-rt/cgroup.type"
sleep 1
"$WL" exec-as cgwx-node threads 120 & P=$!
in_node() { [ "$(cgroup_of "$P")" = /node ]; }
check placed "cgwx-node in /node" wait_for 20 in_node
wait_for 10 tid_of "$P" log
CT=$(tid_of "$P" ctrl)
LT=$(tid_of "$P" log)
ctrl_ok() { [ "$(tfield "$P" "$CT" 41)" = 1 ] && [ "$(tfield "$P" "$CT" 40)" = 90 ]; }
check ctrl-fifo "ctrl ($CT) SCHED_FIFO 90" wait_for 20 ctrl_ok
ctrl_in_rt() { [ "$(tcgroup "$P" "$CT")" = /node/node-rt ]; }
check ctrl-threaded "ctrl in /node/node-rt (cgroup.threads)" wait_for 20 ctrl_in_rt
check_eq ctrl-cpus 3 tcpus "$P" "$CT"
check ctrl-listed "ctrl's tid in node-rt/cgroup.threads" grep -qx "$CT" "$CG/node/node-rt/cgroup.threads"
check_eq log-policy 0 tfield "$P" "$LT" 41
check_eq log-cgroup /node tcgroup "$P" "$LT"
log_nice() { [ "$(tfield "$P" "$LT" 19)" = 5 ]; }
check log-nice "log nice 5 (process attribute)" wait_for 20 log_nice
check_eq log-cpus 1-3 tcpus "$P" "$LT"
check_eq log-ioprio "2 1" cgwarden-workload ioprio "$LT"
check_eq main-nice 5 tfield "$P" "$P" 19
check_eq main-ioprio "2 1" cgwarden-workload ioprio "$P"
check_eq oom-score-adj -900 cat "/proc/$P/oom_score_adj"
# The rename (2 s after start): followed by its COMM event.
late_ok() {
    _lt=$(tid_of "$P" ctrl-late) || return 1
    [ "$(tfield "$P" "$_lt" 41)" = 1 ] && [ "$(tfield "$P" "$_lt" 40)" = 90 ] &&
        [ "$(tcgroup "$P" "$_lt")" = /node/node-rt ] && [ "$(tcpus "$P" "$_lt")" = 3 ]
}
check renamed "ctrl-late (renamed after start): FIFO 90, node-rt, CPU 3" wait_for 20 late_ok
check renamed-by-event "the rename was handled by its COMM event" grep -q "renamed thread: set" "$LOG"
grep -E "renamed thread|placed: set" "$LOG" | head -n 12 | sed 's/^/  log| /'
kill "$P" 2>/dev/null
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
cgw reset "$POL/tasks.yaml"
check_eq reset 0 echo "$RC"
check groups-removed "node removed" test ! -e "$CG/node"
