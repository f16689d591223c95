# `cgwarden run --dry-run` against the real kernel, with the claim condition of
# daemon-claim.yaml true from the start (holdme runs first): it logs "would write" for
# the claim and changes nothing — not vm.swappiness (neither baseline nor claim), no
# group, no journal. SIGTERM → exit 0, still nothing changed.
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
sub0=$(cat "$CG/cgroup.subtree_control")
echo "vm.swappiness before: $swap0"
check precondition "vm.swappiness ($swap0) is neither the baseline 33 nor the claim 77" \
    sh -c "[ '$swap0' != 33 ] && [ '$swap0' != 77 ]"

cgwarden-workload exec-as holdme 120 &
H=$!
wait_for 10 sh -c "[ \"\$(cat /proc/$H/comm)\" = holdme ]"
start_daemon "$P" --dry-run --tick 100ms
check would-write-claim "log: would write vm.swappiness 77 (dry run)" \
    wait_for 40 sh -c "grep 'would write' '$DLOG' | grep -q 77"
sleep 2
check_eq swappiness-unchanged "$swap0" cat "$SW"
check no-group "$CG/claimgrp not created" test ! -e "$CG/claimgrp"
check_eq subtree-unchanged "$sub0" cat "$CG/cgroup.subtree_control"
check no-journal "no originals journal" test ! -s /run/cgwarden/originals

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check_eq swappiness-unchanged-after-stop "$swap0" cat "$SW"
show_log
kill "$H"
wait "$H" 2>/dev/null
cgw reset --policy "$P"
check_eq swappiness-after-reset "$swap0" cat "$SW"
