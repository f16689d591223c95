#!/bin/bash
# The long-run soak benchmark in the QEMU guest: `cgwarden run` for
# SECS seconds (default 3600) under a loop of ~30 s cycles — a memory squeeze a
# PSI-trigger rule reacts to with a claim, an OOM kill, a burst of 20 execs whose
# placement latency is measured, a hook storm (~20 runs), three boosts through the
# control socket, every 2nd cycle a managed group deleted from outside (the daemon
# recreates it), a reload every 2 min (policy edited, then `cgwarden reload`) — with
# metrics scraped every 3 s and the daemon sampled every 60 s. The guest side is
# tests/vm/guest/bench/longrun.sh (its header says what each part does). Not a test:
# it asserts nothing, it prints numbers.
#
#   bash tests/bench-longrun-guest.sh [SECS=3600]
#
# Binaries: $CGWARDEN_BIN and $CGWARDEN_WORKLOAD_BIN (default target/release/...;
# this script does not build them). The serial log is $CGWARDEN_LONGRUN_LOG (default
# $CACHE/bench-longrun-serial.log). Guest: 2 vCPUs, 3 GiB (CGWARDEN_VM_SMP/MEM
# override), QEMU timeout SECS + 900 s. Knobs passed to the guest as /cgw/ files:
# CGWARDEN_LONGRUN_SAMPLE (s between samples, 60), CGWARDEN_LONGRUN_WARMUP (600, or
# SECS/3 when shorter), CGWARDEN_LONGRUN_RELOAD (s between reloads, 120),
# CGWARDEN_LONGRUN_CYCLE (s a cycle, 30), CGWARDEN_LONGRUN_BURST (execs a burst, 20),
# CGWARDEN_LONGRUN_NO_RECORDER=1 (the policy without its flight recorder: an A/B of the
# daemon's anonymous memory).
#
# How to read it: one `sample` line a minute (the daemon's RSS and anonymous KiB,
# open fds, threads, zombie children, CPU in the minute), then the distinct ERROR
# lines and WARN messages of the daemon log, any failed driven action, the summary
# table and one CRITERION line per criterion of the issue (PASS/FAIL): every exec
# placed within 500 ms; RSS flat after the warm-up (last <= first sample after it +
# 256 KiB, and the post-warm-up samples not rising without ever stepping down); fds
# flat (last <= first after warm-up, same monotonic test); no zombie children (one
# that stays over 3 reads in 1 s); no ERROR line. TCG: an emulated machine, latencies
# are slower than on hardware; compare runs, not absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-3600}
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
BIN=${CGWARDEN_BIN:-target/release/cgwarden}
WBIN=${CGWARDEN_WORKLOAD_BIN:-target/release/cgwarden-workload}
for f in "$BIN" "$WBIN"; do [[ -x $f ]] || { echo "bench-longrun-guest: not executable: $f (cargo build --release?)" >&2; exit 2; }; done
extra=$(mktemp -d /tmp/cgwarden-longrun-extra.XXXXXX)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/cgw/bench"
echo "$SECS" >"$extra/cgw/longrun_secs"
[[ -n ${CGWARDEN_LONGRUN_SAMPLE:-} ]] && echo "$CGWARDEN_LONGRUN_SAMPLE" >"$extra/cgw/longrun_sample"
[[ -n ${CGWARDEN_LONGRUN_WARMUP:-} ]] && echo "$CGWARDEN_LONGRUN_WARMUP" >"$extra/cgw/longrun_warmup"
[[ -n ${CGWARDEN_LONGRUN_RELOAD:-} ]] && echo "$CGWARDEN_LONGRUN_RELOAD" >"$extra/cgw/longrun_reload_every"
[[ -n ${CGWARDEN_LONGRUN_CYCLE:-} ]] && echo "$CGWARDEN_LONGRUN_CYCLE" >"$extra/cgw/longrun_cycle"
[[ -n ${CGWARDEN_LONGRUN_BURST:-} ]] && echo "$CGWARDEN_LONGRUN_BURST" >"$extra/cgw/longrun_burst"
[[ -n ${CGWARDEN_LONGRUN_TRACE:-} ]] && : >"$extra/cgw/longrun_trace"
[[ -n ${CGWARDEN_LONGRUN_NO_RECORDER:-} ]] && : >"$extra/cgw/longrun_norecorder"
# CGWARDEN_LONGRUN_MASSIF=1: the daemon under valgrind's massif (the host's valgrind
# copied into the image): where its heap grows, by allocation site, over the soak. Its
# RSS samples are then valgrind's; the profile comes back over the console.
if [[ -n ${CGWARDEN_LONGRUN_MASSIF:-} ]]; then
    vg=/usr/libexec/valgrind
    for f in /usr/bin/valgrind.bin "$vg/massif-amd64-linux" "$vg/vgpreload_core-amd64-linux.so" "$vg/vgpreload_massif-amd64-linux.so" "$vg/default.supp"; do
        [[ -f $f ]] || { echo "bench-longrun-guest: massif needs valgrind (Debian's package): no $f" >&2; exit 2; }
    done
    mkdir -p "$extra/usr/local/bin" "$extra$vg"
    cp /usr/bin/valgrind.bin "$extra/usr/local/bin/"
    cp "$vg/massif-amd64-linux" "$vg/vgpreload_core-amd64-linux.so" "$vg/vgpreload_massif-amd64-linux.so" "$vg/default.supp" "$extra$vg/"
    : >"$extra/cgw/longrun_massif"
fi
# The guest's init reads a benchmark's time limit from its first line: SECS + 10 min.
sed "1s/^# limit: .*/# limit: $((SECS + 600))/" tests/vm/guest/bench/longrun.sh >"$extra/cgw/bench/longrun.sh"
log=${CGWARDEN_LONGRUN_LOG:-$CACHE/bench-longrun-serial.log}
CGWARDEN_VM_SUITE=bench CGWARDEN_VM_ONLY=longrun CGWARDEN_VM_EXTRA=$extra \
    CGWARDEN_VM_SMP=${CGWARDEN_VM_SMP:-2} CGWARDEN_VM_MEM=${CGWARDEN_VM_MEM:-3G} \
    CGWARDEN_VM_TIMEOUT=$((SECS + 900)) \
    bash tests/vm/run-guest.sh "$BIN" "$WBIN" "$log" || true
grep '^BENCH' "$log" | sed 's/^BENCH //'
if [[ -n ${CGWARDEN_LONGRUN_MASSIF:-} ]]; then
    out=$CACHE/longrun-massif.out
    grep -a '^MS64 ' "$log" | sed 's/^MS64 //' | tr -d '\r\n' | base64 -d | gunzip >"$out" &&
        echo "massif profile of the daemon: $out (ms_print $out)"
fi
grep -q 'RESULT PASS .*bench-done' "$log" || { echo "benchmark did not finish; see $log" >&2; exit 1; }
