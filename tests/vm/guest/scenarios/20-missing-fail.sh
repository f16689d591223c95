# on_missing: fail with knobs this kernel lacks (uclamp, cpufreq): exit 3, write nothing.
# Runs before any apply, so "nothing" is checked against the boot state.

sed 's/on_missing: warn/on_missing: fail/' "$POL/vision-cell-4cpu.yaml" >/tmp/fail.yaml
check policy-fail-variant "fail variant made" grep -q 'on_missing: fail' /tmp/fail.yaml

cgw apply /tmp/fail.yaml
check_eq exit-3 3 echo "$RC"
check names-uclamp "stderr names the missing uclamp knob" grep -qi uclamp /tmp/cgw.err
check names-cpufreq "stderr names the missing cpufreq policy" grep -qi cpufreq /tmp/cgw.err
for g in realtime inference vision system; do
    check "no-group-$g" "$CG/$g not created" test ! -e "$CG/$g"
done
check_eq subtree-unchanged "$(cat "$T/orig.subtree_control")" cat "$CG/cgroup.subtree_control"
while IFS== read -r k v; do
    check_eq "sysctl-unchanged-$k" "$v" cat "$(sysctl_path "$k")"
done <"$T/orig.sysctl"
check_file zram-untouched /sys/block/zram0/initstate 0
check no-swap "no swap added" sh -c '[ "$(wc -l </proc/swaps)" = 1 ]'
check no-journal "no originals journalled" test ! -s /run/cgwarden/originals
