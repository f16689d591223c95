# limit: 200
# `settings.drift` on a real kernel. With `on_drift: warn` a sysctl
# written behind the daemon's back is reported (log line, `drift` event) and
# left; with `on_drift: restore` it and a group's memory.high are put back within
# a few intervals, the originals journal unchanged. Prints `DRIFT` lines: the
# check's cost per interval as the daemon logs it (debug).

P=$POL/drift.yaml
W=$T/drift-warn.yaml
SW=/proc/sys/vm/swappiness
MH=$CG/driftgrp/memory.high
TM=/proc/sys/kernel/timer_migration
sw0=$(cat "$SW")
tm0=$(cat "$TM")
sed 's/on_drift: restore/on_drift: warn/' "$P" >"$W"

check policy-valid "drift.yaml is valid" cgwarden check "$P"
export CGWARDEN_LOG=debug
start_daemon "$W" --tick 1s
check baseline "baseline: vm.swappiness 33" wait_for 30 knob_is "$SW" 33
echo 77 >"$SW"
check warned "on_drift: warn: the drift is logged" wait_for 30 grep -q 'drift: written behind' "$DLOG"
check_eq left-alone 77 cat "$SW"
# verify sees a file the baseline holds beyond the knobs (the realtime switch).
check baseline-tm "baseline: timer_migration 0" wait_for 30 knob_is "$TM" 0
echo 1 >"$TM"
cgw verify
check_eq verify-drift-exit 1 echo "$RC"
check verify-names-timer-migration "verify names /proc/sys/kernel/timer_migration" \
    grep -q "^DRIFT /proc/sys/kernel/timer_migration" /tmp/cgw.out
check_eq tm-left-alone 1 cat "$TM"
stop_daemon
check_eq warn-daemon-exit-0 0 echo "$DRC"

J=/run/cgwarden/originals
start_daemon "$P" --tick 1s
check baseline-again "restore policy: vm.swappiness 33 again at start" wait_for 30 knob_is "$SW" 33
cp "$J" "$T/originals.before"
echo 90 >"$SW"
echo 100M >"$MH"
echo 1 >"$TM"
check restored-sysctl "on_drift: restore: vm.swappiness put back to 33" wait_for 30 knob_is "$SW" 33
check restored-memory-high "and driftgrp's memory.high to 64M" wait_for 30 knob_is "$MH" 67108864
check restored-timer-migration "and timer_migration to 0" wait_for 30 knob_is "$TM" 0
check journal-untouched "the originals journal is unchanged" cmp -s "$J" "$T/originals.before"
grep 'drift check' "$DLOG" | tail -n 3 | sed 's/^/DRIFT cost: /'
stop_daemon
unset CGWARDEN_LOG
check_eq daemon-exit-0 0 echo "$DRC"
DLOG_FILTER='DEBUG' show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check_eq swappiness-original "$sw0" cat "$SW"
check_eq timer-migration-original "$tm0" cat "$TM"
check group-removed "driftgrp removed by reset" test ! -e "$CG/driftgrp"
