# `cgwarden run` against the real kernel: a real OOM kill in `oomtest` (memory.max 32M,
# swap.max 0) is seen through memory.events (`oomtest.memory.events.oom_kill > 0/3s`, the
# window form: the rule clears 3 s after the kill, then `hold`); the
# rule's `while` claim sets vm.swappiness from the policy baseline 33 to 91, and after
# `hold` (4s) releases it back to 33; its hook runs with CGWARDEN_EVENT=fired on
# activation and =cleared on release. Ends with `cgwarden reset`.

P=$POL/daemon-oom.yaml
SW=/proc/sys/vm/swappiness
rm -f "$T"/oom.*
swap0=$(cat "$SW")
echo "vm.swappiness before: $swap0"

check policy-valid "daemon-oom.yaml is valid" cgwarden check "$P"
start_daemon "$P" --tick 100ms
check_file baseline-swappiness "$SW" 33
check_file baseline-max "$CG/oomtest/memory.max" 33554432
check_file baseline-swap-max "$CG/oomtest/memory.swap.max" 0
check_eq no-oom-yet 0 event_count oomtest oom_kill

# A 96 MiB hog in a 32 MiB group without swap: the kernel's OOM killer takes it.
in_group oomtest cgwarden-workload alloc 96 5 >/dev/null
rc=$?
check_eq hog-killed 137 echo "$rc"
k=$(event_count oomtest oom_kill)
check oom-kill-event "oomtest memory.events oom_kill >= 1 (got '$k')" test "${k:-0}" -ge 1

check claimed "vm.swappiness claimed: 91" wait_for 40 knob_is "$SW" 91
check hook-fired "hook ran with CGWARDEN_EVENT=fired" wait_for 30 test -s "$T/oom.fired.env"
check released "vm.swappiness back to the baseline 33 after hold" wait_for 40 knob_is "$SW" 33
check hook-cleared "hook ran with CGWARDEN_EVENT=cleared" wait_for 30 test -s "$T/oom.cleared.env"
for e in fired cleared; do
    echo "hook environment ($e):"; sed 's/^/  env| /' "$T/oom.$e.env" 2>/dev/null
    check "hook-$e-event" "CGWARDEN_EVENT=$e" grep -qx "CGWARDEN_EVENT=$e" "$T/oom.$e.env"
    check "hook-$e-rule" "CGWARDEN_RULE=oom-seen" grep -qx "CGWARDEN_RULE=oom-seen" "$T/oom.$e.env"
    check "hook-$e-group" "CGWARDEN_GROUP=oomtest" grep -qx "CGWARDEN_GROUP=oomtest" "$T/oom.$e.env"
    check "hook-$e-metric" "CGWARDEN_METRIC=oomtest.memory.events.oom_kill" \
        grep -qx "CGWARDEN_METRIC=oomtest.memory.events.oom_kill" "$T/oom.$e.env"
done
check writes-logged "claim and release writes name the rule" sh -c "grep 'oom-seen' '$DLOG' | grep -q 91"

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check group-removed "$CG/oomtest removed by reset" test ! -e "$CG/oomtest"
check_eq swappiness-restored "$swap0" cat "$SW"
rm -f "$T"/oom.*
