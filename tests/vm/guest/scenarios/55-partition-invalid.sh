# An invalid partition never counts as converged. A group created
# outside the policy takes the realtime partition's CPU 3; 6.1 accepts that and turns
# the partition `isolated invalid (REASON)`. `plan` must show the change, `apply` must
# fail with the kernel's reason; once the intruder is gone `apply` restores isolation.
. "$T/pids"
require_applied
PART=$CG/realtime/cpuset.cpus.partition

check_file valid-before "$PART" isolated
mkdir "$CG/intruder"
echo 3 >"$CG/intruder/cpuset.cpus"
echo "kernel says: $(cat "$PART")"
check invalid "the kernel marks the partition invalid" grep -q '^isolated invalid' "$PART"
check_file kernel-reason "$PART" "isolated invalid (Cpu list in cpuset.cpus not exclusive)"

cgw plan "$POL/vision-cell-4cpu.yaml"
check_eq plan-exit 0 echo "$RC"
check plan-change "plan shows the partition as a change" \
    grep -qx "WRITE $PART isolated (was isolated invalid (Cpu list in cpuset.cpus not exclusive))" /tmp/cgw.out
check plan-not-zero "plan does not say 0 changes" sh -c '! grep -qx "0 changes" /tmp/cgw.out'

cgw apply "$POL/vision-cell-4cpu.yaml"
check_eq apply-exit 1 echo "$RC"
check apply-reason "apply names the path and the kernel's reason" \
    grep -q "$PART.*invalid: Cpu list in cpuset.cpus not exclusive" /tmp/cgw.err

# The conflict goes away: apply makes the partition valid again (6.1 needs a pass
# through `member` for that), and converges.
rmdir "$CG/intruder"
check_file still-invalid "$PART" "isolated invalid (Cpu list in cpuset.cpus not exclusive)"
cgw apply "$POL/vision-cell-4cpu.yaml"
check_eq repair-exit 0 echo "$RC"
check_file repaired "$PART" isolated
check_file repaired-cpus "$CG/realtime/cpuset.cpus.effective" 3
check_eq repaired-placement /realtime cgroup_of "$RT"
cgw plan "$POL/vision-cell-4cpu.yaml"
check_eq converged "0 changes" cat /tmp/cgw.out
