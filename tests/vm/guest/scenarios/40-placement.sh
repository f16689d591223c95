# The placement scan of 30-apply: processes that existed before `apply` are in their
# groups, and the fifo placement took effect. Field 41 of /proc/PID/stat is the policy
# (1 = SCHED_FIFO), field 40 the RT priority.
. "$T/pids"

check_eq comm-to-realtime /realtime cgroup_of "$RT"
check_eq glob-to-inference /inference cgroup_of "$NPU"
check_eq cmdline-to-vision /vision cgroup_of "$CAM"
check_eq comm-to-system /system cgroup_of "$SYS"
check_eq unmatched-stays / cgroup_of "$BY"
check_eq fifo-policy 1 stat_field "$RT" 41
check_eq fifo-priority 50 stat_field "$RT" 40
check_eq others-policy 0 stat_field "$NPU" 41
check_eq realtime-runs-on-3 3 sh -c "grep Cpus_allowed_list /proc/$RT/status | awk '{print \$2}'"
