# `cgwarden run` against the real kernel: a `while` claim driven by `running(holdme)`
# (comm names sampled each tick). Starting `exec-as holdme` moves vm.swappiness from
# the policy baseline 33 to the claimed 77; killing it returns it to 33 after `hold`
# (2s). Ends with `cgwarden reset`.

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
