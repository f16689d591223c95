# A group deleted from outside while claims are live: the daemon recreates it
# alone. Deleting the unrelated group fb must not touch the claim holding fa's
# memory.high at 160M (the old one-shot re-converge put the baseline 100M back);
# deleting fa itself brings it back with the claimed value, and its PSI trigger
# (rule fa-stall) is registered again on the new group's memory.pressure.

P=$POL/faults.yaml
HIGH=$CG/fa/memory.high
start_daemon "$P" --tick 100ms
check trigger-armed "fa-stall's PSI trigger registered at start" grep -q 'psi_triggers=1' "$DLOG"
cgwarden-workload exec-as holdme 120 &
H=$!
check claimed "holdme: fa.memory.high claimed 160M" wait_for 40 knob_is "$HIGH" 167772160

check rmdir-fb "rmdir fb from outside" rmdir "$CG/fb"
fb_back() { knob_is "$CG/fb/cpu.weight" 150 && knob_is "$CG/fb/pids.max" 100; }
fa_back() { knob_is "$CG/fa/pids.max" 200 && knob_is "$HIGH" 167772160; }
check fb-recreated "fb recreated with its baseline" wait_for 40 fb_back
sleep 1
check_file claim-kept "$HIGH" 167772160
check no-baseline-write "no write put fa.memory.high back to its baseline" sh -c "! grep -qE 'set fa.memory.high = (104857600|100M)[ ,]' '$DLOG'"

check rmdir-fa "rmdir fa (the claimed group) from outside" rmdir "$CG/fa"
check fa-recreated "fa recreated: pids.max baseline and the claimed memory.high" wait_for 40 fa_back
check trigger-rearmed "fa-stall's PSI trigger registered again" wait_for 20 grep -q 'PSI trigger registered again' "$DLOG"
check repair-logged "the repair is logged" grep -q 'recreated with its baseline and live claims' "$DLOG"

kill "$H"
wait "$H" 2>/dev/null
check released "holdme gone: fa.memory.high back to 100M" wait_for 40 knob_is "$HIGH" 104857600
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
show_log 80
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check groups-removed "fa and fb removed by reset" sh -c "test ! -e $CG/fa && test ! -e $CG/fb"
