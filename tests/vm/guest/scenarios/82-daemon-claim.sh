# `cgwarden run` against the real kernel: a `while` claim driven by `running(holdme)`
# (comm names sampled each tick). Starting `exec-as holdme` moves vm.swappiness from
# the policy baseline 33 to the claimed 77; killing it returns it to 33 after `hold`
# (2s). Ends with `cgwarden reset`.
# --- daemon helpers (the same block in every 8x-daemon-* scenario) ---------------
# The daemon runs in the background with stderr in $DLOG; its own environment carries
# CGW_LEAK_MARKER so hook environments can be checked for leaks.
DLOG=$T/daemon-$SCENARIO.log
DPID=
start_daemon() { # ARGS... : cgwarden run ARGS... &, wait for "cgwarden running", report daemon-started
    # (Not through check(): that runs its command in a subshell, and $DPID must be ours.)
    : >"$DLOG"
    echo "+ cgwarden run $* &  (stderr in $DLOG)"
    CGW_LEAK_MARKER=leaked cgwarden run "$@" >/dev/null 2>>"$DLOG" &
    DPID=$!
    if wait_for 60 grep -q 'cgwarden running' "$DLOG"; then
        pass daemon-started "PID $DPID, log shows 'cgwarden running'"
    else
        fail daemon-started "no 'cgwarden running' in the log: $(tail -n 5 "$DLOG")"
    fi
}
gone() { ! alive "$1"; }
stop_daemon() { # SIGTERM, reap; exit status in $DRC ("hung" if it did not exit)
    DRC=none
    [ -n "$DPID" ] || return 0
    kill -TERM "$DPID" 2>/dev/null
    if wait_for 30 gone "$DPID"; then
        wait "$DPID"
        DRC=$?
    else
        kill -KILL "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DRC=hung
    fi
    DPID=
}
show_log() { # the daemon log, less lines matching $DLOG_FILTER, into the console
    echo "daemon log ($DLOG):"
    grep -v -e "${DLOG_FILTER:-^@@@}" "$DLOG" | sed 's/^/  dlog| /' | head -n "${1:-150}"
}
in_group() { # GROUP CMD... : run CMD inside $CG/GROUP (same PID)
    _g=$1
    shift
    sh -c 'echo $$ >"$0" && exec "$@"' "$CG/$_g/cgroup.procs" "$@"
}
knob_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
event_count() { awk -v k="$2" '$1 == k { print $2 }' "$CG/$1/memory.events" 2>/dev/null; }
# ----------------------------------------------------------------------------------

P=$POL/daemon-claim.yaml
SW=/proc/sys/vm/swappiness
swap0=$(cat "$SW")
echo "vm.swappiness before: $swap0"

check policy-valid "daemon-claim.yaml is valid" cgwarden check "$P"
start_daemon "$P" --tick 100ms
check_file baseline-swappiness "$SW" 33
check_file group-pids-max "$CG/claimgrp/pids.max" 64

cgwarden-workload exec-as holdme 120 &
H=$!
check claimed "holdme running: vm.swappiness claimed 77" wait_for 40 knob_is "$SW" 77
check write-logged "the claim's write names the rule" sh -c "grep 'holdme-running' '$DLOG' | grep -q 77"
kill "$H"
wait "$H" 2>/dev/null
check released "holdme gone: vm.swappiness back to 33 after hold" wait_for 40 knob_is "$SW" 33
# Again: the rule can activate a second time.
cgwarden-workload exec-as holdme 120 &
H=$!
check claimed-again "holdme again: 77" wait_for 40 knob_is "$SW" 77
kill "$H"
wait "$H" 2>/dev/null
check released-again "released again: 33" wait_for 40 knob_is "$SW" 33

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check group-removed "$CG/claimgrp removed by reset" test ! -e "$CG/claimgrp"
check_eq swappiness-restored "$swap0" cat "$SW"
