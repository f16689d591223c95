# memory.max as applied is enforced by the kernel: system has memory.max=48M and
# memory.swap.max=0 (zram swap exists, but not for it). A 128 MiB hog in it is
# OOM-killed; a 16 MiB allocation there and the processes in other groups are fine.
. "$T/pids"
require_applied

in_system_group() { sh -c 'echo $$ >'"$CG"'/system/cgroup.procs && exec "$@"' in_system_group "$@"; }

check small-fits "16 MiB fits under system's memory.max" in_system_group cgwarden-workload alloc 16
in_system_group cgwarden-workload alloc 128 5
rc=$?
check_eq hog-killed 137 echo "$rc"
k=$(awk '$1 == "oom_kill" { print $2 }' "$CG/system/memory.events" 2>/dev/null)
check oom-kill-event "system memory.events oom_kill >= 1 (got '$k')" test "${k:-0}" -ge 1
for v in RT NPU CAM BY; do
    eval "p=\$$v"
    check "survivor-$v" "PID $p in $(cgroup_of "$p") survived" alive "$p"
done
