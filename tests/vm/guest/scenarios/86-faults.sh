# limit: 600
# Faults together with state: `cgwarden run` is SIGKILLed at 50 random
# moments — during its startup convergence, while `holdme` holds three claims, while a
# `then` value is in force, while hooks run, after a group was deleted from outside —
# and `apply` at 10 random moments. After each kill the daemon is restarted with the
# claims' causes gone: every claimed and `then` value must go back to its original
# (sched_rt_runtime_us has no policy baseline: only the journal knows it). At the end
# `reset` must restore every file the journal names to its content before the first
# start, and remove the groups.

P=$POL/faults.yaml
RT=/proc/sys/kernel/sched_rt_runtime_us
SW=/proc/sys/vm/swappiness
WM=/proc/sys/vm/watermark_scale_factor
KILLS=${CGW_FAULT_KILLS:-50}
APPLY_KILLS=${CGW_FAULT_APPLY_KILLS:-10}

# Snapshot of everything cgwarden may journal here, before the first start.
SNAP=$T/faults-snap
mkdir -p "$SNAP"
for f in /proc/sys/vm/* /proc/sys/kernel/sched_* $CG/cgroup.subtree_control; do
    [ -f "$f" ] && [ -r "$f" ] || continue
    cat "$f" >"$SNAP/$(echo "$f" | tr / _)" 2>/dev/null
done
rt0=$(cat "$RT") sw0=$(cat "$SW") wm0=$(cat "$WM")
echo "before: sched_rt_runtime_us=$rt0 swappiness=$sw0 watermark_scale_factor=$wm0"
check no-groups-yet "fa and fb do not exist yet" sh -c "test ! -e $CG/fa && test ! -e $CG/fb"

rnd() { # N: a random number in 0..N-1
    echo $(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % $1))
}
ms_sleep() { # MS
    sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}
restored() { # the originals (and the policy baseline) are back
    knob_is "$RT" "$rt0" && knob_is "$WM" "$wm0" && knob_is "$SW" 33 &&
        knob_is "$CG/fa/memory.high" 104857600
}

clean=0 unclean=0 mid_claim=0 mid_then=0 mid_deleted=0 early=0
: >"$DLOG"
i=0
while [ "$i" -lt "$KILLS" ]; do
    i=$((i + 1))
    echo "--- kill $i"
    # Every fifth kill, `apply` is killed at a random moment too.
    if [ "$APPLY_KILLS" -gt 0 ] && [ $((i % 5)) = 1 ]; then
        APPLY_KILLS=$((APPLY_KILLS - 1))
        cgwarden apply "$P" >/dev/null 2>&1 &
        A=$!
        ms_sleep "$(rnd 150)"
        kill -KILL "$A" 2>/dev/null
        wait "$A" 2>/dev/null
    fi
    CGW_LEAK_MARKER=leaked cgwarden run "$P" --tick 100ms >/dev/null 2>>"$DLOG" &
    D=$!
    # 1 in 5: killed during its startup (convergence, journal, watchers).
    if [ "$(rnd 5)" = 0 ]; then
        ms_sleep "$(rnd 400)"
        kill -KILL "$D" 2>/dev/null
        wait "$D" 2>/dev/null
        early=$((early + 1))
        continue
    fi
    if ! wait_for 60 grep -q "cgwarden running" "$DLOG"; then
        fail "start-$i" "no 'cgwarden running': $(tail -n 3 "$DLOG")"
    fi
    # The previous run's claims must be gone: their causes are.
    if wait_for 30 restored; then
        clean=$((clean + 1))
    else
        unclean=$((unclean + 1))
        fail "restored-$i" "after kill $((i - 1)): rt=$(cat $RT) wm=$(cat $WM) sw=$(cat $SW) fa.high=$(cat $CG/fa/memory.high 2>&1)"
    fi
    : >"$DLOG"
    H= N=
    case $(rnd 4) in
    0) cgwarden-workload exec-as holdme 60 & H=$!
       wait_for 30 knob_is "$RT" -1 && mid_claim=$((mid_claim + 1)) ;;
    1) cgwarden-workload exec-as thenme 60 & N=$!
       wait_for 30 knob_is "$WM" 200 && mid_then=$((mid_then + 1)) ;;
    2) cgwarden-workload exec-as holdme 60 & H=$!
       cgwarden-workload exec-as thenme 60 & N=$!
       wait_for 30 knob_is "$RT" -1 && mid_claim=$((mid_claim + 1)) ;;
    3) rmdir "$CG/fb" 2>/dev/null && mid_deleted=$((mid_deleted + 1))
       [ "$(rnd 2)" = 0 ] && { cgwarden-workload exec-as holdme 60 & H=$!; } ;;
    esac
    ms_sleep "$(rnd 800)"
    kill -KILL "$D" 2>/dev/null
    wait "$D" 2>/dev/null
    # The causes go away; the next run must undo what this one left.
    [ -n "$H" ] && { kill "$H"; wait "$H" 2>/dev/null; }
    [ -n "$N" ] && { kill "$N"; wait "$N" 2>/dev/null; }
done
pass kill-count "$KILLS daemon kills ($early during startup, $mid_claim with claims held, $mid_then with a then value, $mid_deleted after a group deletion), $((10 - APPLY_KILLS)) apply kills"
echo "FAULTS kills=$KILLS early=$early claimed=$mid_claim then=$mid_then deleted=$mid_deleted restarts_clean=$clean restarts_unclean=$unclean"
check_eq restarts-clean 0 echo "$unclean"

# A last clean run, then the explicit undo.
start_daemon "$P" --tick 100ms
check final-restored "originals back after the last kill" wait_for 30 restored
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cp /run/cgwarden/originals "$T/faults-journal" 2>/dev/null
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
total=0 same=0 differ=
for f in $(awk -F'\t' '$1 == "FILE" { print $2 }' "$T/faults-journal"); do
    case $f in $CG/fa/* | $CG/fb/*) continue ;; esac
    total=$((total + 1))
    s="$SNAP/$(echo "$f" | tr / _)"
    if [ -f "$s" ] && [ "$(cat "$f" 2>/dev/null)" = "$(cat "$s")" ]; then
        same=$((same + 1))
    else
        differ="$differ $f=$(cat "$f" 2>/dev/null)(was $(cat "$s" 2>/dev/null))"
    fi
done
echo "FAULTS reset restored $same/$total journalled files"
if [ "$total" -gt 0 ] && [ "$same" = "$total" ]; then
    pass reset-restored-all "$same/$total journalled files equal their snapshot"
else
    fail reset-restored-all "$same/$total restored:$differ"
fi
check groups-removed "fa and fb removed by reset" sh -c "test ! -e $CG/fa && test ! -e $CG/fb"
check_eq rt-restored "$rt0" cat "$RT"
check_eq wm-restored "$wm0" cat "$WM"
check_eq sw-restored "$sw0" cat "$SW"
show_log 60
