# limit: 360
# `system.irqs` and `system.kthreads` on a real kernel.
# - IRQ affinity by action name on the guest's real virtio IRQs (virtio-rng-pci,
#   driver virtio_rng: `virtio0-config`, `virtio0-input` with MSI-X), the
#   `irq/N-…` thread's policy under `threadirqs`; set by `apply`, restored by
#   `reset`;
# - re-applied by the running daemon when the device's IRQs appear again
#   (driver unbind + bind through sysfs: free_irq, then request_irq with the
#   default affinity), driven by the kernel's device event, not the rescan;
# - kernel-thread priorities (ksoftirqd/N: per-CPU, affinity refused; kcompactd0:
#   policy and CPUs) set and restored.
# Prints `IRQ` lines: what the kernel showed.

P=$POL/irqs.yaml
DRV=/sys/bus/virtio/drivers/virtio_rng

virtio_irqs() { awk '/virtio0/ { n = $1; sub(":", "", n); print n }' /proc/interrupts; }
policy_of() { stat_field "$1" 41; }   # 1 = SCHED_FIFO, 2 = SCHED_RR, 0 = other
prio_of() { stat_field "$1" 40; }
pid_of_comm() { for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" = "$1" ] && { basename "$d"; return; }; done; }
irq_thread() { for d in /proc/[0-9]*; do case "$(cat "$d/comm" 2>/dev/null)" in "irq/$1-"*) basename "$d"; return ;; esac; done; }
cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
all_affinity_is() { for n in $(virtio_irqs); do [ "$(cat /proc/irq/$n/smp_affinity_list)" = "$1" ] || return 1; done; [ -n "$(virtio_irqs)" ]; }
all_threads_are() { for n in $(virtio_irqs); do t=$(irq_thread "$n"); [ -n "$t" ] && [ "$(policy_of "$t")" = "$1" ] && [ "$(prio_of "$t")" = "$2" ] || return 1; done; }

echo "IRQ cmdline: $(cat /proc/cmdline)"
grep virtio0 /proc/interrupts | sed 's/^/IRQ interrupts: /'
check virtio-irqs "the virtio-rng device has IRQs named virtio0*" test -n "$(virtio_irqs)"
N1=$(virtio_irqs | head -n1)
ORIG_AFF=$(cat "/proc/irq/$N1/smp_affinity_list")
echo "IRQ $N1 actions: $(cat /sys/kernel/irq/$N1/actions 2>/dev/null) affinity: $ORIG_AFF"
T1=$(irq_thread "$N1")
echo "IRQ thread of $N1: pid $T1 comm $(cat /proc/$T1/comm 2>/dev/null) policy $(policy_of "$T1") priority $(prio_of "$T1")"
check irq-thread "threadirqs: IRQ $N1 has an irq/$N1-* thread" test -n "$T1"
check_eq irq-thread-default "1 50" echo "$(policy_of "$T1") $(prio_of "$T1")"
KS=$(pid_of_comm ksoftirqd/0)
KC=$(pid_of_comm kcompactd0)
KC_CPUS=$(cpus_of "$KC")
echo "IRQ ksoftirqd/0 pid $KS policy $(policy_of "$KS") cpus $(cpus_of "$KS"); kcompactd0 pid $KC policy $(policy_of "$KC") cpus $KC_CPUS"

check policy-valid "irqs.yaml is valid" cgwarden check "$P"
cgw plan "$P"
check plan-lists-affinity "plan writes /proc/irq/$N1/smp_affinity_list 1" grep -q "/proc/irq/$N1/smp_affinity_list 1" /tmp/cgw.out
cgw apply "$P"
check_eq apply-exit 0 echo "$RC"
check affinity-set "every virtio0 IRQ's smp_affinity_list is 1" all_affinity_is 1
check thread-sched-set "every virtio0 IRQ thread runs SCHED_FIFO 70" all_threads_are 1 70
check_eq ksoftirqd-sched "1 2" echo "$(policy_of "$KS") $(prio_of "$KS")"
check_eq kcompactd-sched "2 3" echo "$(policy_of "$KC") $(prio_of "$KC")"
check_eq kcompactd-cpus 2 cpus_of "$KC"
check percpu-refused-once "apply warns once that ksoftirqd/* keeps its CPUs" sh -c "[ \$(grep -c 'per-CPU kernel thread' /tmp/cgw.out /tmp/cgw.err | awk -F: '{s+=\$2} END {print s}') = 1 ]"
cgw plan "$P"
check converged "plan after apply: 0 changes" grep -q '^0 changes' /tmp/cgw.out
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check affinity-restored "reset: smp_affinity_list back to $ORIG_AFF" all_affinity_is "$ORIG_AFF"
check thread-sched-restored "reset: IRQ threads back to SCHED_FIFO 50" all_threads_are 1 50
check_eq ksoftirqd-restored "0 0" echo "$(policy_of "$KS") $(prio_of "$KS")"
check_eq kcompactd-restored "0 0" echo "$(policy_of "$KC") $(prio_of "$KC")"
check_eq kcompactd-cpus-restored "$KC_CPUS" cpus_of "$KC"

# The daemon: IRQs that appear later.
start_daemon "$P" --tick 1s
check startup-affinity "run: every virtio0 IRQ's smp_affinity_list is 1" wait_for 20 all_affinity_is 1
DEV=$(ls "$DRV" | grep '^virtio' | head -n1)
echo "IRQ unbind $DEV from virtio_rng"
echo "$DEV" >"$DRV/unbind"
check irqs-freed "unbound: no virtio0 IRQ left" wait_for 10 sh -c "! grep -q virtio0 /proc/interrupts"
echo "$DEV" >"$DRV/bind"
grep virtio0 /proc/interrupts | sed 's/^/IRQ after bind: /'
for n in $(virtio_irqs); do echo "IRQ $n right after bind: affinity $(cat /proc/irq/$n/smp_affinity_list)"; done
check reapplied "bound again: the daemon sets every new virtio0 IRQ to CPU 1" wait_for 20 all_affinity_is 1
check reapplied-threads "and its new irq thread to SCHED_FIFO 70" wait_for 20 all_threads_are 1 70
check by-device-event "the daemon log names the device event as the cause" grep -q 'cause="device event"' "$DLOG"
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
show_log
cgw reset --policy "$P"
check_eq reset-after-run 0 echo "$RC"
check affinity-restored-after-run "reset after run: affinity back to $ORIG_AFF" all_affinity_is "$ORIG_AFF"
check thread-restored-after-run "reset after run: IRQ threads back to SCHED_FIFO 50" all_threads_are 1 50
