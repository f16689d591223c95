# limit: 200
# Issue 24: `settings.drift` on a real kernel. With `on_drift: warn` a sysctl
# written behind the daemon's back is reported (log line, `drift` event) and
# left; with `on_drift: restore` it and a group's memory.high are put back within
# a few intervals, the originals journal unchanged. Prints `DRIFT` lines: the
# check's cost per interval as the daemon logs it (debug).

P=$POL/drift.yaml
W=$T/drift-warn.yaml
SW=/proc/sys/vm/swappiness
MH=$CG/driftgrp/memory.high
sw0=$(cat "$SW")
sed 's/on_drift: restore/on_drift: warn/' "$P" >"$W"

check policy-valid "drift.yaml is valid" cgwarden check "$P"
export CGWARDEN_LOG=debug
start_daemon "$W" --tick 1s
check baseline "baseline: vm.swappiness 33" wait_for 30 knob_is "$SW" 33
echo 77 >"$SW"
check warned "on_drift: warn: the drift is logged" wait_for 30 grep -q 'drift: written behind' "$DLOG"
check_eq left-alone 77 cat "$SW"
stop_daemon
check_eq warn-daemon-exit-0 0 echo "$DRC"

J=/run/cgwarden/originals
start_daemon "$P" --tick 1s
check baseline-again "restore policy: vm.swappiness 33 again at start" wait_for 30 knob_is "$SW" 33
cp "$J" "$T/originals.before"
echo 90 >"$SW"
echo 100M >"$MH"
check restored-sysctl "on_drift: restore: vm.swappiness put back to 33" wait_for 30 knob_is "$SW" 33
check restored-memory-high "and driftgrp's memory.high to 64M" wait_for 30 knob_is "$MH" 67108864
check journal-untouched "the originals journal is unchanged" cmp -s "$J" "$T/originals.before"
grep 'drift check' "$DLOG" | tail -n 3 | sed 's/^/DRIFT cost: /'
stop_daemon
unset CGWARDEN_LOG
check_eq daemon-exit-0 0 echo "$DRC"
DLOG_FILTER='DEBUG' show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check_eq swappiness-original "$sw0" cat "$SW"
check group-removed "driftgrp removed by reset" test ! -e "$CG/driftgrp"
