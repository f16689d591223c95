# `cgwarden reset`: every journalled file back to its original, processes
# back to the root, groups removed, zram swap off and reset, journal deleted.
. "$T/pids"
require_applied

cgw reset
check_eq reset-exit 0 echo "$RC"
while IFS== read -r k v; do
    check_eq "sysctl-restored-$k" "$v" cat "$(sysctl_path "$k")"
done <"$T/orig.sysctl"
check_eq subtree-restored "$(cat "$T/orig.subtree_control")" cat "$CG/cgroup.subtree_control"
for v in RT NPU CAM SYS BY; do
    eval "p=\$$v"
    if alive "$p"; then
        check_eq "back-to-root-$v" / cgroup_of "$p"
    else
        fail "back-to-root-$v" "PID $p is gone"
    fi
done
for g in realtime inference vision system; do
    check "removed-$g" "$CG/$g removed" test ! -e "$CG/$g"
done
check swapoff "zram0 not in /proc/swaps" sh -c '! grep -q "^/dev/zram0 " /proc/swaps'
check_file zram-reset /sys/block/zram0/initstate 0
# A zram reset keeps comp_algorithm: the journalled original must be written back.
check_eq zram-algorithm-restored "$(cat "$T/orig.zram_algorithm")" grep -o '\[[^]]*\]' /sys/block/zram0/comp_algorithm
check journal-gone "originals journal deleted" test ! -e /run/cgwarden/originals
check_eq rcu-expedited-restored "$(cat "$T/orig.rcu_expedited")" cat /sys/kernel/rcu_expedited

cgw plan "$POL/vision-cell-4cpu.yaml"
check plan-after-reset "plan shows changes again" sh -c 'grep -q "^MKDIR $CG/realtime$" /tmp/cgw.out && tail -n1 /tmp/cgw.out | grep -qE "^[1-9][0-9]* changes?$"'

for v in RT NPU CAM SYS BY; do eval "kill \$$v" 2>/dev/null; done
