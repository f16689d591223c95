# `cgwarden capture DIR` of the guest's real /sys and /proc: what it copies, what it never
# reads (zram-control's hot_add adds a device when read), and that `plan` and `doctor`
# on the copy (`--root DIR`) say what they say on the real root. Before 30-apply: the
# board is fresh, so the plans have steps. The workloads started here are gone at the end.

start() { # VAR NAME ARGS... : `cgwarden-workload exec-as NAME ARGS...`, its PID in VAR
    _var=$1 _name=$2
    shift 2
    cgwarden-workload exec-as "$_name" "$@" &
    eval "$_var=$!"
    wait_for 10 sh -c "[ \"\$(cat /proc/$!/comm)\" = $_name ]" || fail "start-$_name" "comm never became $_name"
}
start NPU npu_worker 300
start RTC rt_ctl 300

mkdir "$CG/cgw-capture-probe" # a group, for its write-only cgroup.kill
zrams() { ls /sys/block | grep -c '^zram'; }
zram_before=$(zrams)

C=/tmp/capture
cgw capture "$C"
check_eq capture-exit 0 echo "$RC"
check capture-summary "one line saying what was copied" sh -c 'grep -qE "^captured into /tmp/capture: [0-9]+ files .* no processes" /tmp/cgw.out'
check_eq hot-add-never-read "$zram_before" zrams
check_file hot-add-empty "$C/sys/class/zram-control/hot_add" ""
check controllers "the cgroup root's controllers" cmp "$CG/cgroup.controllers" "$C/sys/fs/cgroup/cgroup.controllers"
check_file cgroup-kill-marker "$C/sys/fs/cgroup/cgw-capture-probe/cgroup.kill" ""
check group-files "a group's files" cmp "$CG/cgw-capture-probe/cgroup.type" "$C/sys/fs/cgroup/cgw-capture-probe/cgroup.type"
check zram-link "/sys/block/zram0 is a link, as on the board" test -L "$C/sys/block/zram0"
check zram-through-link "zram0's files read through it" cmp /sys/block/zram0/comp_algorithm "$C/sys/block/zram0/comp_algorithm"
check cmdline "the kernel command line" cmp /proc/cmdline "$C/proc/cmdline"
check pressure "PSI" test -s "$C/proc/pressure/memory"
check irqs "/proc/irq and /proc/interrupts" sh -c "[ -s $C/proc/interrupts ] && ls $C/proc/irq | grep -q '^[0-9]'"
check cpus "CPU topology" cmp /sys/devices/system/cpu/online "$C/sys/devices/system/cpu/online"
check sysctl "the sysctls" cmp /proc/sys/vm/swappiness "$C/proc/sys/vm/swappiness"
check no-processes "no /proc/PID without --processes" sh -c "! ls $C/proc | grep -q '^[0-9]'"
check no-hostname "no hostname" test ! -e "$C/proc/sys/kernel/hostname"
check metadata "capture.json names the kernel" grep -q "\"kernel\": \"$(uname -r)\"" "$C/capture.json"
cgw capture "$C"
check_eq not-empty-exit 2 echo "$RC"

P=/tmp/capture-p
cgw capture "$P" --processes
check_eq capture-processes-exit 0 echo "$RC"
check_file npu-comm "$P/proc/$NPU/comm" npu_worker
check npu-exe "exe as the link's target, in a plain file" sh -c "[ -f $P/proc/$NPU/exe ] && [ \"\$(cat $P/proc/$NPU/exe)\" = \"\$(readlink /proc/$NPU/exe)\" ]"
check not-itself "capture leaves its own process out" sh -c "! grep -qx cgwarden $P/proc/*/comm"

# plan and doctor on the copy and on the real root. A `--root` tree has no kernel behind
# it, so steps only a kernel does (mkswap, swapon, sched_setattr) are listed as skipped
# there and left out of the count: compared with that prefix dropped, without the count.
same() { # NAME CMD...: the command on / and on $P say the same (stdout, stderr, exit)
    _same_name=$1
    shift
    "$@" >/tmp/same.real 2>&1
    echo "exit $?" >>/tmp/same.real
    "$@" --root "$P" >/tmp/same.cap 2>&1
    echo "exit $?" >>/tmp/same.cap
    for f in /tmp/same.real /tmp/same.cap; do
        sed -e 's/^# skipped on a fake root: //' -e '/^[0-9]* changes$/d' "$f" >"$f.n"
    done
    if cmp -s /tmp/same.real.n /tmp/same.cap.n; then
        pass "$_same_name" "$* = with --root $P ($(wc -l </tmp/same.real.n) lines)"
    else
        fail "$_same_name" "$* differs on the copy: $(diff /tmp/same.real.n /tmp/same.cap.n | head -n 8)"
    fi
    sed 's/^/  real| /' /tmp/same.real | head -n 60
}
same plan-vision cgwarden plan "$POL/vision-cell-4cpu.yaml"
check plan-places "the plan places the workloads (the comparison saw them)" sh -c "grep -q 'inference/cgroup.procs $NPU' /tmp/same.real && grep -q 'SCHED $RTC' /tmp/same.real"
check plan-zram "the plan sets up zram" grep -q "zram0/disksize" /tmp/same.real
same plan-irqs cgwarden plan "$POL/irqs.yaml"
check plan-irqs-steps "the irq plan writes an affinity" grep -q "smp_affinity_list" /tmp/same.real
same plan-latency cgwarden plan "$POL/latency.yaml"
same doctor-vision cgwarden doctor "$POL/vision-cell-4cpu.yaml"
same doctor-irqs cgwarden doctor "$POL/irqs.yaml"

kill "$NPU" "$RTC" 2>/dev/null
wait "$NPU" "$RTC" 2>/dev/null
rm -rf "$C" "$P"
rmdir "$CG/cgw-capture-probe"
