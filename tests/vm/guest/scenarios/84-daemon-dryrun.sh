# `cgwarden run --dry-run` against the real kernel, with the claim condition of
# daemon-claim.yaml true from the start (holdme runs first): it logs "would write" for
# the claim and changes nothing — not vm.swappiness (neither baseline nor claim), no
# group, no journal. SIGTERM → exit 0, still nothing changed.

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
