# `plan` then `apply` of the vision-cell policy with on_missing: warn, on the real root.
# Workloads are started first, so the placement scan has something to place (40-placement).

start() { # VAR NAME ARGS... : start `cgwarden-workload exec-as NAME ARGS...`, record PID as VAR
    _var=$1 _name=$2
    shift 2
    cgwarden-workload exec-as "$_name" "$@" &
    echo "$_var=$!" >>"$T/pids"
    wait_for 10 sh -c "[ \"\$(cat /proc/$!/comm)\" = $_name ]" || fail "start-$_name" "comm never became $_name"
}
: >"$T/pids"
start RT rt_ctl 900
start NPU npu_worker 900
start CAM vidproc sleep 900 -- --role=camera_pipeline
start SYS sys_logger 900
start BY bystander 900
sed 's/^/  /' "$T/pids"

# plan: changes listed, in the documented format (docs/cli.md), nothing written.
cgw plan "$POL/vision-cell-4cpu.yaml"
check_eq plan-exit 0 echo "$RC"
# `WRITE PATH VALUE (was CURRENT)` / `MKDIR PATH`, nothing after. Other verbs
# (for actions that are not file writes, e.g. swapon) are tolerated.
check plan-format "WRITE/MKDIR lines end with (was CURRENT) as documented" \
    sh -c '! grep -E "^(WRITE|MKDIR) " /tmp/cgw.out | grep -vE "^(WRITE /[^ ]+ .+ \(was .*\)|MKDIR /[^ ]+)$"'
check plan-mkdir "plan creates realtime" grep -qx "MKDIR $CG/realtime" /tmp/cgw.out
check plan-sysctl "plan writes swappiness" grep -qE "^WRITE /proc/sys/vm/swappiness 30 \(was [0-9]+\)$" /tmp/cgw.out
check plan-summary "plan ends with a non-zero change count" sh -c 'tail -n1 /tmp/cgw.out | grep -qE "^[1-9][0-9]* changes?$"'
check plan-wrote-nothing "plan created no group" test ! -e "$CG/realtime"

# apply
cgw apply "$POL/vision-cell-4cpu.yaml"
check_eq apply-exit 0 echo "$RC"
check warn-uclamp "uclamp reported missing" grep -qi uclamp /tmp/cgw.err
check warn-cpufreq "cpufreq reported missing" grep -qi cpufreq /tmp/cgw.err
check_file rcu-expedited /sys/kernel/rcu_expedited 1

for c in cpuset cpu io memory pids; do
    check "root-subtree-$c" "$c enabled in root subtree_control" grep -qw "$c" "$CG/cgroup.subtree_control"
done
for g in realtime inference vision system; do
    check "group-$g" "$CG/$g exists" test -d "$CG/$g"
    check_file "mems-$g" "$CG/$g/cpuset.mems.effective" 0
done
check_file cpus-realtime "$CG/realtime/cpuset.cpus.effective" 3
check_file cpus-inference "$CG/inference/cpuset.cpus.effective" 2
check_file cpus-vision "$CG/vision/cpuset.cpus.effective" 1-2
check_file cpus-system "$CG/system/cpuset.cpus.effective" 0-1
check_file partition-realtime "$CG/realtime/cpuset.cpus.partition" isolated
check_file cpu-weight-realtime "$CG/realtime/cpu.weight" 200
check_file cpu-weight-system "$CG/system/cpu.weight" 50
check_file memory-min-realtime "$CG/realtime/memory.min" 33554432
check_file memory-low-realtime "$CG/realtime/memory.low" 67108864
check_file memory-high-inference "$CG/inference/memory.high" 536870912
check_file memory-max-inference "$CG/inference/memory.max" 805306368
check_file memory-high-vision "$CG/vision/memory.high" 268435456
check_file memory-max-vision "$CG/vision/memory.max" 335544320
check_file memory-max-system "$CG/system/memory.max" 50331648
check_file swap-max-system "$CG/system/memory.swap.max" 0
check_file io-weight-inference "$CG/inference/io.weight" "default 300"
check_file io-weight-vision "$CG/vision/io.weight" "default 200"
check_file pids-max-realtime "$CG/realtime/pids.max" 256
check_file pids-max-inference "$CG/inference/pids.max" 1024
check_file pids-max-system "$CG/system/pids.max" 128

for kv in $SYSCTLS; do
    check_file "sysctl-${kv%%=*}" "$(sysctl_path "${kv%%=*}")" "${kv#*=}"
done

check zram-lz4 "zram0 comp_algorithm has [lz4]" grep -q '\[lz4\]' /sys/block/zram0/comp_algorithm
check_file zram-disksize /sys/block/zram0/disksize 268435456
check zram-swap "zram0 in /proc/swaps with priority 100" \
    sh -c 'awk '\''$1 == "/dev/zram0" && $5 == 100 { ok = 1 } END { exit !ok }'\'' /proc/swaps'
check journal "originals journal written" test -s /run/cgwarden/originals
[ "$RC" = 0 ] && [ -d "$CG/realtime" ] && [ -d "$CG/system" ] && : >"$T/applied"
echo "/proc/swaps:"; sed 's/^/  /' /proc/swaps
