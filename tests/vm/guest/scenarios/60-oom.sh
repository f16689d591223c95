# memory.max as applied is enforced by the kernel: housekeeping has memory.max=48M and
# memory.swap.max=0 (zram swap exists, but not for it). A 128 MiB hog in it is
# OOM-killed; a 16 MiB allocation there and the processes in other groups are fine.
. "$T/pids"
require_applied

in_housekeeping() { sh -c 'echo $$ >'"$CG"'/housekeeping/cgroup.procs && exec "$@"' in_housekeeping "$@"; }

check small-fits "16 MiB fits under housekeeping's memory.max" in_housekeeping cgwarden-workload alloc 16
in_housekeeping cgwarden-workload alloc 128 5
rc=$?
check_eq hog-killed 137 echo "$rc"
k=$(awk '$1 == "oom_kill" { print $2 }' "$CG/housekeeping/memory.events" 2>/dev/null)
check oom-kill-event "housekeeping memory.events oom_kill >= 1 (got '$k')" test "${k:-0}" -ge 1
for v in RT NPU CAM BY; do
    eval "p=\$$v"
    check "survivor-$v" "PID $p in $(cgroup_of "$p") survived" alive "$p"
done
