# PM QoS latency on the real kernel, and `doctor` on its real
# /proc/cmdline. Records what the kernel shows (QOS lines in the console):
# pm_qos_resume_latency_us initially, after `n/a` and `0`; the idle states of cpu0;
# the default of /dev/cpu_dma_latency. Then: the baseline per-CPU writes (0us as
# `n/a`), `latency.global` held while `latholder` runs and dropped by the kernel
# after the rule clears, after SIGTERM and after SIGKILL; `reset` restores the files.

P=$POL/latency.yaml
DMA=/dev/cpu_dma_latency
CPU=/sys/devices/system/cpu
RL3=$CPU/cpu3/power/pm_qos_resume_latency_us
RL2=$CPU/cpu2/power/pm_qos_resume_latency_us
RL1=$CPU/cpu1/power/pm_qos_resume_latency_us
dma() { cgwarden-workload s32 "$DMA"; }
dma_is() { [ "$(dma)" = "$1" ]; }

check dma-exists "$DMA is a character device" test -c "$DMA"
echo "QOS cpu_dma_latency default: $(dma)"
check_eq dma-default 2000000000 dma
check rl-exists "$RL3 exists" test -e "$RL3"
echo "QOS cpu0 pm_qos_resume_latency_us initially: $(cat $CPU/cpu0/power/pm_qos_resume_latency_us 2>&1)"
for s in $CPU/cpu0/cpuidle/state*; do
    [ -d "$s" ] && echo "QOS cpu0 idle $(basename "$s"): $(cat "$s/name") latency=$(cat "$s/latency")us disable=$(cat "$s/disable")"
done
[ -d $CPU/cpu0/cpuidle ] || echo "QOS cpu0 has no cpuidle directory"
echo "QOS cpuidle driver: $(cat $CPU/cpuidle/current_driver 2>&1) governor: $(cat $CPU/cpuidle/current_governor_ro 2>&1)"
r3=$(cat "$RL3")
r2=$(cat "$RL2")
r1=$(cat "$RL1")
check_eq rl-initial-no-constraint 0 cat "$RL3"
# The kernel's own encodings, by hand (cgwarden relies on them).
echo n/a >"$RL3"
echo "QOS after writing n/a: $(cat "$RL3")"
check_eq kernel-na-reads-na "n/a" cat "$RL3"
echo 0 >"$RL3"
echo "QOS after writing 0: $(cat "$RL3")"
check_eq kernel-0-reads-0 0 cat "$RL3"
check kernel-negative-einval "writing -1 is refused" sh -c "! echo -1 >$RL3"
check kernel-intmax-einval "writing 2147483647 is refused" sh -c "! echo 2147483647 >$RL3"
check_eq still-0 0 cat "$RL3"

check policy-valid "latency.yaml is valid" cgwarden check "$P"
cgw plan "$P"
check plan-na "plan writes n/a for 0us" sh -c "grep -q 'WRITE $RL3 n/a (was 0)' /tmp/cgw.out"
check plan-50 "plan writes 50" sh -c "grep -q 'WRITE $RL2 50 (was 0)' /tmp/cgw.out"

start_daemon "$P" --tick 100ms
check_file baseline-cpu3-na "$RL3" "n/a"
check_file baseline-cpu2-50 "$RL2" 50
check_eq no-request-yet 2000000000 dma

cgwarden-workload exec-as latholder 300 &
H=$!
check held "latholder running: /dev/cpu_dma_latency reads 20" wait_for 40 dma_is 20
check_file claim-cpu1-na "$RL1" "n/a"
kill "$H"
wait "$H" 2>/dev/null
check rule-cleared "rule cleared: the kernel reads its default again" wait_for 40 dma_is 2000000000
check cpu1-back "cpu1 back to no constraint" wait_for 40 knob_is "$RL1" 0

cgwarden-workload exec-as latholder 300 &
H=$!
check held-again "held again: 20" wait_for 40 dma_is 20
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check_eq sigterm-default 2000000000 dma
check_file sigterm-keeps-baseline "$RL3" "n/a"

start_daemon "$P" --tick 100ms
check held-third "after restart, held while latholder runs: 20" wait_for 40 dma_is 20
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null
DPID=
check_eq sigkill-default "2000000000" dma
kill "$H"
wait "$H" 2>/dev/null
show_log 60

cgw doctor "$POL/vision-cell-4cpu.yaml"
echo "QOS guest /proc/cmdline: $(cat /proc/cmdline)"
check_eq doctor-exit-3 3 echo "$RC"
check doctor-names-nohz "doctor names nohz_full=3 (not on the guest's command line)" \
    sh -c "grep -q '^missing: nohz_full: .*add the kernel parameter nohz_full=3$' /tmp/cgw.out"
check doctor-preempt-rt "doctor: the Debian kernel is not PREEMPT_RT" \
    sh -c "grep -q '^missing: preempt_rt' /tmp/cgw.out"

cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check_eq reset-cpu3 "$r3" cat "$RL3"
check_eq reset-cpu2 "$r2" cat "$RL2"
check_eq reset-cpu1 "$r1" cat "$RL1"
check_eq reset-dma 2000000000 dma
