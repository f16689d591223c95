# Convergence: after apply, `plan` prints exactly `0 changes` and a second `apply`
# changes no observable value (zram's disksize/comp_algorithm would even refuse a rewrite).
. "$T/pids"
require_applied

snapshot() {
    for g in realtime inference vision system; do
        for f in cpuset.cpus cpuset.mems cpuset.cpus.partition cpu.weight memory.min memory.low \
            memory.high memory.max memory.swap.max io.weight pids.max cgroup.subtree_control; do
            [ -e "$CG/$g/$f" ] && echo "$g/$f=$(cat "$CG/$g/$f")"
        done
    done
    echo "root/subtree=$(cat "$CG/cgroup.subtree_control")"
    for kv in $SYSCTLS; do echo "${kv%%=*}=$(cat "$(sysctl_path "${kv%%=*}")")"; done
    echo "zram=$(cat /sys/block/zram0/comp_algorithm /sys/block/zram0/disksize)"
    cat /proc/swaps
    for v in RT NPU CAM SYS BY; do eval "echo $v=\$(cgroup_of \$$v)"; done
}

snapshot >/tmp/snap.before
cgw plan "$POL/vision-cell-4cpu.yaml"
check_eq plan-exit 0 echo "$RC"
check_eq plan-zero "0 changes" cat /tmp/cgw.out

cgw apply "$POL/vision-cell-4cpu.yaml"
check_eq reapply-exit 0 echo "$RC"
snapshot >/tmp/snap.after
check reapply-no-change "every knob as before the second apply" diff /tmp/snap.before /tmp/snap.after

cgw plan "$POL/vision-cell-4cpu.yaml"
check_eq plan-zero-again "0 changes" cat /tmp/cgw.out
