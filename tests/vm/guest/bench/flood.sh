# The exec-flood benchmark in the guest, not a test: prints BENCH
# lines, asserts nothing. Run from the host with tests/bench-flood-guest.sh
# (which writes /cgw/flood_n; without it, e.g. under the placement bench,
# this script does nothing).
#
# In one boot, N processes started at once (cgwarden-workload flood: all
# alive together, each polling its own cgroup every POLL_US, missed when not
# placed DEADLINE_MS after launch) against: cgwarden with the connector,
# an older cgwarden build (when /usr/bin/cgwarden-base is in the image),
# cgwarden with its reacting threads left at SCHED_OTHER (with
# CGWARDEN_FLOOD_ABLATION=1), cgrulesengd (when
# the image has it), a 100 ms /proc scan (cgwarden's scan mode) and the
# kernel's floor (`move-from`: the launcher hands each pid over as it
# spawns it, and the placer only writes it to cgroup.procs — no /proc
# read, no netlink: what the migrations alone cost). An unmeasured flood
# goes first (the first of a boot costs more, whoever places it). Then the
# light storm of the placement bench for parity. TCG: compare rows only.
bench_wanted /cgw/flood_n flood tests/bench-flood-guest.sh || { return 0 2>/dev/null || exit 0; }
N=$(cat /cgw/flood_n)
DEADLINE=$(cat /cgw/flood_deadline 2>/dev/null || echo 3000)
POLL_US=$(cat /cgw/flood_poll 2>/dev/null || echo 1000)
WL=$(command -v cgwarden-workload)
D=/tmp/cgwflood
GROUP=cgwarden-bench-a
mkdir -p "$D" "$CG/$GROUP"
# cgrulesengd needs its rule's controller (memory) on at the root; on for
# every row so they compare.
echo +memory >"$CG/cgroup.subtree_control"
# The child's name is the one tests/vm/cgrules-image.sh gives cgrulesengd.
cp "$WL" "$D/cgwbench-child"
cp "$WL" "$D/cgwbench-drive"
policy() { # FILE [DAEMON_SETTINGS_LINES]
    cat >"$1" <<EOP
version: 1
product: flood-bench
settings:
  cgroup_root: $CG
  state_dir: $D/state
  rescan: 30s
$2
groups:
  $GROUP: {}
placement:
  - match: { comm: cgwbench-child }
    group: $GROUP
EOP
}
policy "$D/policy.yaml" ""
policy "$D/policy-other.yaml" "  daemon: { sched: { policy: other, nice: 0 }, mlock: false }"
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
sys_ticks() { awk '{print $15}' "/proc/$1/stat"; }
echo "BENCH guest: $(nproc) CPUs, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo), cgroup2 $(awk '$3 == "cgroup2" { print $4 }' /proc/mounts)"

# Where the CPU goes: with /cgw/flood_perf and perf in
# the image (tests/bench-flood-guest.sh's CGWARDEN_FLOOD_PERF=1 copies the
# host's), each flood row runs under `perf record` (cpu-clock, every CPU,
# kernel call chains) and `perf trace -s` on the placer, and prints the
# placer's system calls by thread and kind, the whole guest's CPU by
# command, then the placer's hottest symbols and call chains.
PERF=false
if [ -f /cgw/flood_perf ] && command -v perf >/dev/null 2>&1; then
    PERF=true
    echo -1 >/proc/sys/kernel/perf_event_paranoid
    echo 0 >/proc/sys/kernel/kptr_restrict
fi
perf_start() { # PLACER_PID
    $PERF || return 0
    perf record -q -e cpu-clock -F 250 -a -g -o "$D/perf.data" >/dev/null 2>&1 &
    PERF_PID=$!
    # The placer's system calls by thread and kind (strace -c without ptrace).
    perf trace -s -m 2048 -p "$1" -o "$D/trace.txt" >/dev/null 2>&1 &
    TRACE_PID=$!
    sleep 1
}
perf_stop() { # PLACER_PID
    $PERF || return 0
    kill -INT "$PERF_PID" "$TRACE_PID"
    wait "$PERF_PID" "$TRACE_PID" 2>/dev/null
    echo "BENCH   perf: the placer's system calls (perf trace -s)"
    grep -c '^LOST' "$D/trace.txt" | sed 's/^/BENCH   perf| trace buffer overruns: /'
    grep -v -e '^ *$' -e '^ *---' -e '(msec)' -e '^LOST' "$D/trace.txt" | head -n 80 | sed 's/^/BENCH   perf| /'
    echo "BENCH   perf: whole guest by command"
    perf report -i "$D/perf.data" --stdio --no-children --sort comm --percent-limit 2 -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 12 | sed 's/^/BENCH   perf| /'
    # The placer's threads by their names (cgw-exec places; cgrulesengd's
    # only thread is its own name).
    comms=$(for t in /proc/$1/task/*; do cat "$t/comm"; done 2>/dev/null | sort -u | tr "\n" , | sed "s/,$//")
    echo "BENCH   perf: the placer ($comms) by symbol, self"
    perf report -i "$D/perf.data" --stdio --no-children --comms "$comms" --percentage relative --sort dso,sym --percent-limit 1 -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 40 | sed 's/^/BENCH   perf| /'
    echo "BENCH   perf: the placer by symbol, with callees"
    perf report -i "$D/perf.data" --stdio --children --comms "$comms" --percentage relative --sort sym --percent-limit 3 -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n 40 | sed 's/^/BENCH   perf| /'
    rm -f "$D/perf.data"
}

ROWS=$D/rows
: >"$ROWS"
flood() { # LABEL PLACER_PID [HANDOFF]
    echo "BENCH == $1: flood N=$N, deadline $DEADLINE ms, poll $POLL_US us"
    perf_start "$2"
    c0=$(cpu_ticks "$2") k0=$(sys_ticks "$2")
    "$D/cgwbench-drive" flood "$D/cgwbench-child" "/$GROUP" "$N" "$DEADLINE" "$POLL_US" ${3:+"$3"} >"$D/out"
    sleep 1
    c1=$(cpu_ticks "$2") k1=$(sys_ticks "$2")
    perf_stop "$2"
    sed 's/^/BENCH /' "$D/out"
    missed=$(sed -n 's/^missed \([0-9]*\/[0-9]*\).*/\1/p' "$D/out")
    p99=$(sed -n 's/^placement ms.* p99 \([^ ]*\) .*/\1/p' "$D/out")
    cpu=$(awk -v c=$((c1 - c0)) -v hz="$hz" 'BEGIN { printf "%.2f", c / hz }')
    sys=$(awk -v c=$((k1 - k0)) -v hz="$hz" 'BEGIN { printf "%.2f", c / hz }')
    echo "BENCH placer CPU over the flood: $cpu s (system $sys s)"
    printf '%s | %s | %s | %s\n' "$1" "$missed" "$p99" "$cpu" >>"$ROWS"
}
storm() { # LABEL PLACER_PID
    echo "BENCH == $1: light storm N=200, alive 150 ms, 2 at a time"
    "$D/cgwbench-drive" storm "$D/cgwbench-child" "/$GROUP" 200 150 2 1000 | sed 's/^/BENCH /'
}

daemon_status() { # PID: the reacting threads' policy/priority, memory
    for t in /proc/$1/task/*; do
        printf 'BENCH   thread %s %s: policy %s rtprio %s\n' "${t##*/}" "$(cat "$t/comm")" \
            "$(awk '{print $41}' "$t/stat")" "$(awk '{print $40}' "$t/stat")"
    done
    grep -E '^(VmRSS|VmLck|VmHWM)' "/proc/$1/status" | tr -s ' \t' ' ' | sed 's/^/BENCH   /'
}

cgwarden_row() { # LABEL BINARY POLICY KIND(flood|storm) ENV...
    _label=$1 _bin=$2 _pol=$3 _kind=$4
    shift 4
    env CGWARDEN_LOG=info "$@" "$_bin" run "$_pol" --tick 100ms 2>"$D/daemon.log" &
    _pid=$!
    wait_for 60 grep -q "cgwarden running" "$D/daemon.log"
    sleep 2
    [ "$_kind" = flood ] && daemon_status "$_pid"
    "$_kind" "$_label" "$_pid"
    kill -TERM "$_pid"
    wait "$_pid"
    grep -E "placement: placed|settings.daemon|overran|lost" "$D/daemon.log" | head -n 8 | sed 's/^/BENCH   log| /'
}

# /cgw/flood_callgrind (CGWARDEN_FLOOD_CALLGRIND=1 on bench-flood-guest.sh,
# valgrind in the image): the placer's user-space instructions a placement,
# which repeat from run to run where the CPU does not. The daemon runs under
# callgrind twice: started, idle, stopped; then through the flood. The
# difference over N is what a placement executes; the flood's profile goes
# to the console (gzip, base64, `CG64 ` lines) for callgrind_annotate. Give
# the children a long deadline (they must still be alive when placed).
if [ -f /cgw/flood_callgrind ]; then
    cg_flood() { # NAME FLOOD(0|1): prints "INSTRUCTIONS PLACED"
        rm -rf "$D/state"
        env CGWARDEN_LOG=info valgrind.bin --tool=callgrind --callgrind-out-file="$D/cg.$1" \
            cgwarden run "$D/policy.yaml" --tick 100ms 2>"$D/daemon.log" &
        _vp=$!
        wait_for 600 grep -q "cgwarden running" "$D/daemon.log" || echo "BENCH   callgrind $1: the daemon did not start" >&2
        sleep 5
        if [ "$2" = 1 ]; then
            "$D/cgwbench-drive" flood "$D/cgwbench-child" "/$GROUP" "$N" "$DEADLINE" "$POLL_US" >"$D/cg-out"
        fi
        sleep 2
        kill -TERM "$_vp"
        wait "$_vp"
        echo "$(sed -n 's/^summary: //p' "$D/cg.$1") $(sed -n 's/.*placement: placed {"[^"]*": \([0-9]*\)}.*/\1/p' "$D/daemon.log" | tail -n 1)"
    }
    set -- $(cg_flood zero 0)
    z_ir=${1:-0}
    set -- $(cg_flood flood 1)
    f_ir=${1:-0} f_placed=${2:-0}
    sed 's/^/BENCH   callgrind| /' "$D/cg-out"
    echo "BENCH flood instructions (callgrind, whole daemon): idle ${z_ir}; flood of $N ${f_ir}, placed ${f_placed}: $(awk -v a="$z_ir" -v b="$f_ir" -v n="$f_placed" 'BEGIN { if (n < 1) n = 1; printf "%d a placement", (b - a) / n }')"
    gzip -9c "$D/cg.flood" | base64 | tr -d '\n' | fold -w 1000 | sed 's/^/CG64 /'
    echo
    rmdir "$CG/$GROUP" 2>/dev/null
    pass bench-done "flood instructions counted"
    return 0 2>/dev/null || exit 0
fi

# "floor" in the rows: the placer that needs to read nothing; "floor-stat"
# and "floor-all" add the /proc reads a placer that identifies the process
# makes (its stat; its stat and cgroup before the write, its children after).
floor_row() { # LABEL READS
    rm -f "$D/handoff"
    mkfifo "$D/handoff"
    "$WL" move-from "$D/handoff" "$CG/$GROUP/cgroup.procs" "$2" 2>"$D/mover.log" &
    _pid=$!
    flood "$1" "$_pid" "$D/handoff"
    sed 's/^/BENCH   log| /' "$D/mover.log"
    kill -TERM "$_pid"
    wait "$_pid" 2>/dev/null
    rm -f "$D/handoff"
}
# /cgw/flood_rows (tests/bench-flood-guest.sh's CGWARDEN_FLOOD_ROWS): which
# anchor rows run besides cgwarden's own (default: scan, cgrules and floor).
rows=$(cat /cgw/flood_rows 2>/dev/null || echo "scan cgrules floor")
# The first flood of a boot costs its placer 0.5–1.2 s more than the same
# flood later (the kernel's slabs, dentries and pids are cold): an
# unmeasured flood placed by the bare floor goes first, so no row pays it
# ("nowarm" in the rows leaves it out).
case " $rows " in *" nowarm "*) ;; *)
    floor_row "warm-up (not in the table)" ""
    sed -i '$d' "$ROWS" ;;
esac
base_row() { # LABEL_SUFFIX: the base binary's row, when the image has one
    if command -v cgwarden-base >/dev/null 2>&1; then
        cgwarden_row "cgwarden (base binary), connector$1" cgwarden-base "$D/policy.yaml" flood
    fi
}
cgwarden_row "cgwarden, connector" cgwarden "$D/policy.yaml" flood
base_row ""
if [ -f /cgw/flood_ablation ]; then
    cgwarden_row "cgwarden, connector, threads SCHED_OTHER, no mlock" cgwarden "$D/policy-other.yaml" flood
fi
case " $rows " in *" scan "*)
    cgwarden_row "100 ms /proc scan (cgwarden scan mode)" cgwarden "$D/policy.yaml" flood CGWARDEN_NO_PROC_EVENTS=1 ;;
esac
case " $rows " in *" floor "*)
    floor_row "kernel floor: pids handed over, one cgroup.procs write each" "" ;;
esac
case " $rows " in *" floor-stat "*)
    floor_row "kernel floor + /proc/PID/stat read" stat ;;
esac
case " $rows " in *" floor-all "*)
    floor_row "kernel floor + stat, cgroup, children reads" stat,cgroup,children ;;
esac
cgrules_row() { # LABEL_SUFFIX [storm]
    cgrulesengd -n -f "$D/cgrules.log" >/dev/null 2>&1 &
    _pid=$!
    wait_for 30 test -S /run/cgred.socket
    flood "cgrulesengd 2.0.2$1" "$_pid"
    [ "${2:-}" = storm ] && storm "cgrulesengd 2.0.2$1" "$_pid"
    kill -TERM "$_pid"
    wait "$_pid"
    grep -ci "drop\|overrun\|no buffer" "$D/cgrules.log" | sed 's/^/BENCH   log| lines about drops: /'
}
cgrules=false
if command -v cgrulesengd >/dev/null 2>&1 && case " $rows " in *" cgrules "*) true ;; *) false ;; esac; then
    cgrules=true
    cgrules_row "" storm
else
    echo "BENCH cgrulesengd: not in this image (tests/bench-flood-guest.sh adds it)"
fi
cgwarden_row "cgwarden, connector" cgwarden "$D/policy.yaml" storm
# "again" in the rows: cgwarden's rows once more after the anchors, the
# base binary's first, so a comparison of two builds runs A B … B A.
case " $rows " in *" again "*)
    base_row ", again"
    cgwarden_row "cgwarden, connector, again" cgwarden "$D/policy.yaml" flood ;;
esac
# "dynmods" in the rows: the hierarchy remounted with favordynmods (the
# kernel keeps cgroup_threadgroup_rwsem in its slow mode, so a migration
# waits for no RCU grace period; forks and exits pay a little more), then
# cgwarden's row and cgrulesengd's again. Last, as nothing turns it off.
case " $rows " in *" dynmods "*)
    if mount -o remount,favordynmods /sys/fs/cgroup && grep -q favordynmods /proc/mounts; then
        cgwarden_row "cgwarden, connector, favordynmods" cgwarden "$D/policy.yaml" flood
        $cgrules && cgrules_row ", favordynmods"
    else
        echo "BENCH favordynmods: this kernel does not take it"
    fi ;;
esac

echo "BENCH == flood table (same boot; N=$N, deadline $DEADLINE ms, poll $POLL_US us)"
echo "BENCH | placer | missed | p99 ms | placer CPU s |"
echo "BENCH |---|---|---|---|"
sed 's/^/BENCH | /; s/$/ |/' "$ROWS"
rmdir "$CG/$GROUP" 2>/dev/null
pass bench-done "flood benchmark ran (cgrulesengd: $cgrules)"
