# `cgwarden run` against the real kernel: SIGTERM while a claim is held (a clean
# stop). The daemon exits 0, the claimed vm.swappiness is back to the policy baseline
# 33, the hierarchy and baseline stay (claimgrp with pids.max 64), the workload keeps
# running. Ends with `cgwarden reset`.

P=$POL/daemon-claim.yaml
SW=/proc/sys/vm/swappiness
swap0=$(cat "$SW")
echo "vm.swappiness before: $swap0"

start_daemon "$P" --tick 100ms
check_file baseline-swappiness "$SW" 33
cgwarden-workload exec-as holdme 120 &
H=$!
check claimed "holdme running: vm.swappiness claimed 77" wait_for 40 knob_is "$SW" 77

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check_file claim-released "$SW" 33
check group-kept "$CG/claimgrp still exists" test -d "$CG/claimgrp"
check_file baseline-kept "$CG/claimgrp/pids.max" 64
check journal-kept "originals journal still there (reset is the undo)" test -s /run/cgwarden/originals
check workload-kept "holdme still running" alive "$H"
check release-logged "log says claims were released" grep -q 'releasing claims' "$DLOG"
show_log

kill "$H"
wait "$H" 2>/dev/null
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check group-removed "$CG/claimgrp removed by reset" test ! -e "$CG/claimgrp"
check_eq swappiness-restored "$swap0" cat "$SW"
