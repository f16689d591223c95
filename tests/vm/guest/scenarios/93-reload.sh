# limit: 240
# Hot reload against the real kernel. The daemon runs a
# policy in a root-owned directory of its own; `rlhold` (comm) holds a claim of rule
# hold-claim (vm.swappiness 77), rule thresh is always active (MemAvailable > 1M) and
# claims vm.dirty_background_ratio 4. Then: a broken policy (SIGHUP) changes nothing;
# a reload adds group rlnew; a reload removes hold-claim (claim released: swappiness back
# to the baseline 33, its `cleared` hook runs); a reload changes thresh's threshold
# (stays active, no `cleared` hook, its claim stays); an editor-style rename-replace
# reloads with no signal; hold-claim back: the connector delivers exits again (only
# while a policy needs them), so rlhold's exit releases the claim at once. Ends with
# `cgwarden reset`.

D=$T/reload-pol
rm -rf "$D"
mkdir -m 0755 "$D"
P=$D/policy.yaml
HOOKLOG=$T/reload-hooks
: >"$HOOKLOG"
chmod 0644 "$HOOKLOG"
SW=/proc/sys/vm/swappiness
DBR=/proc/sys/vm/dirty_background_ratio
swap0=$(cat "$SW")
dbr0=$(cat "$DBR")

# policy THRESHOLD NEWGROUP(0|1) HOLDRULE(0|1) PIDSMAX
policy() {
    echo "version: 1"
    echo "product: vm-reload"
    # rescan 10m: a process's exit is seen by its EXIT event, never by a rescan.
    echo "settings: { cgroup_root: /sys/fs/cgroup, state_dir: /run/cgwarden, on_missing: warn, rescan: 10m }"
    echo "groups:"
    echo "  rlgrp:"
    echo "    pids: { max: $4 }"
    if [ "$2" = 1 ]; then
        echo "  rlnew:"
        echo "    pids: { max: 32 }"
    fi
    echo "system:"
    echo "  sysctl: { vm.swappiness: 33, vm.dirty_background_ratio: 3 }"
    echo "hooks:"
    echo "  mark:"
    echo "    exec: [/bin/sh, -c, 'echo {event} {rule} >> $HOOKLOG']"
    echo "    timeout: 5s"
    echo "rules:"
    if [ "$3" = 1 ]; then
        echo "  - name: hold-claim"
        echo "    when: running(rlhold)"
        echo "    while: [set sysctl.vm.swappiness = 77, hook mark]"
    fi
    echo "  - name: thresh"
    echo "    when: host.memory.available > $1"
    echo "    while: [set sysctl.vm.dirty_background_ratio = 4, hook mark]"
}
# write_policy ARGS... : in place (as `cat >` does)
write_policy() { policy "$@" >"$P"; chmod 0644 "$P"; }
reloads() { grep -c 'reload: done' "$DLOG"; }
reloaded_since() { [ "$(reloads)" -gt "$1" ]; }
refusals() { grep -c 'refused: the policy in force is unchanged' "$DLOG"; }
refused_since() { [ "$(refusals)" -gt "$1" ]; }

write_policy 1M 0 1 64
check policy-valid "the reload policy is valid" cgwarden check "$P"
cgwarden-workload exec-as rlhold 600 &
HP=$!
start_daemon "$P" --tick 100ms
check claimed "rlhold running: vm.swappiness claimed 77" wait_for 40 knob_is "$SW" 77
check thresh-active "thresh active: dirty_background_ratio claimed 4" wait_for 40 knob_is "$DBR" 4
check_file pids-max "$CG/rlgrp/pids.max" 64

# 1. A broken policy: nothing changes.
n=$(refusals)
{ policy 1M 1 0 50; echo "  - name: broken"; echo "    when: rlgrp.memroy.current > 1"; } >"$P"
kill -HUP "$DPID"
check broken-refused "the broken policy is refused" wait_for 30 refused_since "$n"
sleep 1
check broken-named "the error names the file and line" grep -q "$P:[0-9]*:[0-9]*: error" "$DLOG"
check_file broken-swappiness "$SW" 77
check_file broken-dbr "$DBR" 4
check_file broken-pids "$CG/rlgrp/pids.max" 64
check broken-no-group "no group created" test ! -e "$CG/rlnew"
check broken-no-clear "no hook cleared" sh -c "! grep -q cleared '$HOOKLOG'"

# 2. A new group.
n=$(reloads)
write_policy 1M 1 1 64
kill -HUP "$DPID"
check add-reloaded "reload done" wait_for 30 reloaded_since "$n"
check add-group "rlnew created" wait_for 20 test -d "$CG/rlnew"
check add-pids "rlnew pids.max 32" wait_for 20 knob_is "$CG/rlnew/pids.max" 32
check add-claim-kept "the live claim stays (77)" knob_is "$SW" 77
check add-logged "the diff is logged" grep -q 'reload: + group rlnew' "$DLOG"

# 3. hold-claim removed while its claim is live.
n=$(reloads)
write_policy 1M 1 0 64
kill -HUP "$DPID"
check remove-reloaded "reload done" wait_for 30 reloaded_since "$n"
check remove-released "vm.swappiness back to the baseline 33" wait_for 30 knob_is "$SW" 33
check remove-cleared "hold-claim's cleared hook ran" wait_for 30 grep -q 'cleared hold-claim' "$HOOKLOG"
check remove-logged "the diff names the released rule" grep -q 'reload: - rule hold-claim (active: claims released)' "$DLOG"
check remove-no-exits "no running() left: exits no longer delivered" wait_for 10 grep -q 'exits delivered: false' "$DLOG"

# 4. thresh's threshold changed while it is active.
n=$(reloads)
write_policy 2M 1 0 64
kill -HUP "$DPID"
check thresh-reloaded "reload done" wait_for 30 reloaded_since "$n"
sleep 2
check_file thresh-still-claimed "$DBR" 4
check thresh-no-clear "no cleared hook for thresh" sh -c "! grep -q 'cleared thresh' '$HOOKLOG'"
check thresh-logged "the diff says state kept" grep -q 'reload: ~ rule thresh (changed; state kept' "$DLOG"

# 5. Editor-style rename-replace, no signal.
n=$(reloads)
policy 2M 1 0 65 >"$D/.policy.yaml.tmp"
chmod 0644 "$D/.policy.yaml.tmp"
mv "$D/.policy.yaml.tmp" "$P"
check rename-reloaded "the rename-replace reloads" wait_for 30 reloaded_since "$n"
check rename-pids "rlgrp pids.max 65" wait_for 20 knob_is "$CG/rlgrp/pids.max" 65

# 6. hold-claim back while rlhold runs: found by the reload's rescan; then its exit.
n=$(reloads)
write_policy 2M 1 1 65
kill -HUP "$DPID"
check readd-reloaded "reload done" wait_for 30 reloaded_since "$n"
check readd-exits "exits delivered again" wait_for 10 grep -q 'exits delivered: true' "$DLOG"
check readd-claimed "rlhold running: vm.swappiness claimed 77 again" wait_for 30 knob_is "$SW" 77
kill "$HP" 2>/dev/null
wait "$HP" 2>/dev/null
check readd-exit-seen "rlhold's exit (its EXIT event) releases the claim" wait_for 10 knob_is "$SW" 33
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check released-on-stop "dirty_background_ratio back to 3 after stop" knob_is "$DBR" 3
show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check new-group-removed "$CG/rlnew removed by reset" test ! -e "$CG/rlnew"
check group-removed "$CG/rlgrp removed by reset" test ! -e "$CG/rlgrp"
check_eq swappiness-restored "$swap0" cat "$SW"
check_eq dbr-restored "$dbr0" cat "$DBR"
rm -rf "$D" "$HOOKLOG"
