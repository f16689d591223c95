# limit: 300
# Hooks against the real kernel. The daemon runs with nice
# -5, oom_score_adj -900 and SCHED_FIFO 1 on its main thread (as the unit and the
# priority settings make it); the hook child must have nice 0, oom_score_adj 0,
# SCHED_OTHER and a cgroup of its own (/cgwarden.hooks/probe-N). The hook leaves a
# child that calls setsid and exits: the run lasts until its timeout (4 s), then
# cgroup.kill takes the escaped child too, and the run cgroup is removed. Clearing the
# rule runs the `cleared` hook. Run cgroups a killed daemon left are removed at the
# next start and by `reset`, which also removes the hooks parent.

P=$POL/hooks.yaml
H=$T/hooks
rm -rf "$H"
mkdir -p "$H"
comm_pids() { grep -lx "$1" /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3; }
no_comm() { [ -z "$(comm_pids "$1")" ]; }
has_comm() { [ -n "$(comm_pids "$1")" ]; }

check policy-valid "hooks.yaml is valid" cgwarden check "$P"

# The daemon, protected as the unit protects it (exec keeps the PID).
: >"$DLOG"
# (busybox has renice but no nice: the shell renices itself, then execs.)
echo "+ cgwarden run $P --tick 100ms &  (nice -5, oom_score_adj -900; stderr in $DLOG)"
sh -c 'echo -900 >/proc/$$/oom_score_adj && renice -n -5 -p $$ >/dev/null && exec cgwarden run "$@"' sh "$P" --tick 100ms \
    >/dev/null 2>>"$DLOG" &
DPID=$!
if wait_for 60 grep -q 'cgwarden running' "$DLOG"; then
    pass daemon-started "PID $DPID"
else
    fail daemon-started "no 'cgwarden running' in the log: $(tail -n 5 "$DLOG")"
fi
cgwarden-workload setsched "$DPID" fifo 1
check_eq daemon-nice -5 stat_field "$DPID" 19
check_eq daemon-oom -900 cat "/proc/$DPID/oom_score_adj"
check_eq daemon-fifo 1 stat_field "$DPID" 41
check hooks-parent "$CG/cgwarden.hooks created by the daemon's convergence" test -d "$CG/cgwarden.hooks"

cgwarden-workload exec-as hooktrig 600 &
TRIG=$!
check hook-fired "the fired hook ran" wait_for 60 test -s "$H/fired"
check_file hook-nice "$H/nice" 0
check_file hook-policy "$H/policy" 0
check_file hook-oom "$H/oom" 0
run=$(cat "$H/cgroup" 2>/dev/null)
check hook-cgroup "hook ran in a run cgroup of its own (got '$run')" \
    sh -c "case '$run' in /cgwarden.hooks/probe-[0-9]*) exit 0 ;; *) exit 1 ;; esac"
check orphan-alive "the setsid child is running" wait_for 20 has_comm hookorphan
o=$(comm_pids hookorphan | head -n 1)
echo "orphan PID '$o' stat: $(cat /proc/$o/stat 2>/dev/null)"
check_eq orphan-own-session "$o" stat_field "$o" 6
check_eq orphan-in-run-cgroup "$run" cgroup_of "$o"
check orphan-killed "the setsid child is killed at the hook's timeout" wait_for 60 no_comm hookorphan
check timeout-logged "the run timed out" grep -q 'hook timed out' "$DLOG"
check run-cgroup-removed "$CG$run removed after the run" wait_for 20 test ! -e "$CG$run"

kill "$TRIG"
wait "$TRIG" 2>/dev/null
cleared() { grep -qx cleared "$H/events"; }
check hook-cleared "the cleared hook ran after the trigger went" wait_for 60 cleared
check_eq events-pair "fired cleared" sh -c "tr '\n' ' ' <'$H/events' | sed 's/ \$//'"
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
runs_left() { ls -d "$CG"/cgwarden.hooks/*/ 2>/dev/null | wc -l; }
check_eq no-runs-left 0 runs_left

# A run left by a killed daemon: removed (its process killed) at the next start.
mkdir "$CG/cgwarden.hooks/probe-999"
in_group cgwarden.hooks/probe-999 cgwarden-workload exec-as stalehook 600 &
check stale-alive "stale run process in probe-999" wait_for 20 has_comm stalehook
start_daemon "$P" --tick 100ms
check stale-killed "the stale run's process is killed at start" wait_for 20 no_comm stalehook
check stale-removed "probe-999 removed at start" wait_for 20 test ! -e "$CG/cgwarden.hooks/probe-999"
stop_daemon
check_eq daemon2-exit-0 0 echo "$DRC"

# And by reset, which removes the parent too.
mkdir "$CG/cgwarden.hooks/probe-998"
in_group cgwarden.hooks/probe-998 cgwarden-workload exec-as stalehook 600 &
check stale2-alive "stale run process in probe-998" wait_for 20 has_comm stalehook
show_log 120
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check stale2-killed "reset killed the stale run's process" wait_for 20 no_comm stalehook
check parent-removed "$CG/cgwarden.hooks removed by reset" test ! -e "$CG/cgwarden.hooks"
check group-removed "$CG/hookgrp removed by reset" test ! -e "$CG/hookgrp"
rm -rf "$H"
