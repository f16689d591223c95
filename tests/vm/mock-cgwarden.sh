#!/bin/sh
# Reference stand-in for `cgwarden`, used to prove the guest suite itself:
#
#   bash tests/vm/run-guest.sh tests/vm/mock-cgwarden.sh path/to/cgwarden-workload
#
# must report every RESULT as PASS. It is NOT a policy engine: it knows only the
# policies in tests/vm/guest/policies/ (the desired state is written out below), and
# runs in the guest's busybox sh. What it does show is the exact sequence of kernel
# writes that makes each check pass on a real 6.1 kernel (order, value forms,
# mkswap/swapon, subtree_control undo), which is what the real binary has to do too.
# It needs `cgwarden-workload` for swapon(2) with a priority and sched_setscheduler(2).

CG=/sys/fs/cgroup
STATE=/run/cgwarden
J=$STATE/originals
MiB=1048576

die_usage() { echo "usage: cgwarden check|plan|apply POLICY | reset" >&2; exit 2; }

# The desired state of vision-cell-4cpu.yaml, in apply order:
#   mkdir|PATH            create a group
#   write|PATH|VALUE|READ write VALUE unless the file already reads READ (after normalizing)
desired() {
    echo "write|$CG/cgroup.subtree_control|+cpuset +cpu +io +memory +pids|cpuset cpu io memory pids"
    echo "mkdir|$CG/realtime"
    echo "write|$CG/realtime/cpuset.cpus|3|3"
    echo "write|$CG/realtime/cpuset.mems|0|0"
    echo "write|$CG/realtime/cpuset.cpus.partition|isolated|isolated"
    echo "write|$CG/realtime/cpu.weight|200|200"
    echo "write|$CG/realtime/memory.min|$((32 * MiB))|$((32 * MiB))"
    echo "write|$CG/realtime/memory.low|$((64 * MiB))|$((64 * MiB))"
    echo "write|$CG/realtime/pids.max|256|256"
    echo "mkdir|$CG/inference"
    echo "write|$CG/inference/cpuset.cpus|2|2"
    echo "write|$CG/inference/memory.high|$((512 * MiB))|$((512 * MiB))"
    echo "write|$CG/inference/memory.max|$((768 * MiB))|$((768 * MiB))"
    echo "write|$CG/inference/io.weight|300|default 300"
    echo "write|$CG/inference/pids.max|1024|1024"
    echo "mkdir|$CG/vision"
    echo "write|$CG/vision/cpuset.cpus|1-2|1-2"
    echo "write|$CG/vision/memory.high|$((256 * MiB))|$((256 * MiB))"
    echo "write|$CG/vision/memory.max|$((320 * MiB))|$((320 * MiB))"
    echo "write|$CG/vision/io.weight|200|default 200"
    echo "mkdir|$CG/system"
    echo "write|$CG/system/cpuset.cpus|0-1|0-1"
    echo "write|$CG/system/cpu.weight|50|50"
    echo "write|$CG/system/memory.max|$((48 * MiB))|$((48 * MiB))"
    echo "write|$CG/system/memory.swap.max|0|0"
    echo "write|$CG/system/pids.max|128|128"
    echo "write|/proc/sys/vm/swappiness|30|30"
    echo "write|/proc/sys/vm/min_free_kbytes|22528|22528"
    echo "write|/proc/sys/vm/watermark_scale_factor|150|150"
    echo "write|/proc/sys/vm/dirty_ratio|5|5"
    echo "write|/proc/sys/vm/dirty_background_ratio|2|2"
    # comp_algorithm before disksize: both are refused (EBUSY) once the device is initialized.
    echo "write|/sys/block/zram0/comp_algorithm|lz4|[lz4]"
    echo "write|/sys/block/zram0/disksize|$((256 * MiB))|$((256 * MiB))"
}

# Normalized current value, for comparison with READ.
current() {
    case $1 in
    */cgroup.subtree_control) tr ' ' '\n' <"$1" | sort | tr '\n' ' ' | sed 's/ $//' ;;
    */comp_algorithm) grep -o '\[[^]]*\]' "$1" ;;
    *) cat "$1" ;;
    esac
}
norm_want() {
    case $1 in
    */cgroup.subtree_control) echo "$2" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//' ;;
    *) echo "$2" ;;
    esac
}

# Missing knobs: the root cgroup never shows cpu.uclamp.*; the sysctl exists iff the
# kernel has uclamp at all (CONFIG_UCLAMP_TASK).
missing() {
    [ -e /proc/sys/kernel/sched_util_clamp_min ] || echo "realtime: cpu.uclamp.min, cpu.uclamp.max (kernel has no uclamp)"
    [ -d /sys/devices/system/cpu/cpufreq/policy0 ] || echo "cpufreq policy0: /sys/devices/system/cpu/cpufreq/policy0 does not exist"
}

# Placement: "PID GROUP [fifo PRIO]" for every process that should move or change policy.
placements() {
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" = $$ ] && continue
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        cmdline=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)
        [ -n "$cmdline" ] || continue # kernel thread
        case $comm in
        rt_ctl) echo "$pid realtime fifo 50" ;;
        npu_*) echo "$pid inference" ;;
        sys_logger) echo "$pid system" ;;
        *) case $cmdline in *camera_pipeline*) echo "$pid vision" ;; esac ;;
        esac
    done
}

plan() {
    desired | while IFS='|' read -r kind path value read; do
        case $kind in
        mkdir) [ -d "$path" ] || echo "MKDIR $path" ;;
        write)
            [ -n "$value" ] || continue
            if [ -e "$path" ]; then
                cur=$(current "$path")
                [ "$cur" = "$(norm_want "$path" "$read")" ] && continue
                echo "WRITE $path $value (was $(tr '\n' ' ' <"$path" | sed 's/ $//'))"
            else
                echo "WRITE $path $value (was -)"
            fi
            ;;
        esac
    done
    placements | while read -r pid group pol prio; do
        [ "$(sed -n 's/^0:://p' "/proc/$pid/cgroup")" = "/$group" ] ||
            echo "WRITE $CG/$group/cgroup.procs $pid (was -)"
    done
}

journal() { # KIND PATH ORIGINAL
    grep -q "^$1	$2	" "$J" 2>/dev/null && return
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$J"
    sync
}

cmd=$1
[ $# -ge 1 ] || die_usage
shift
case $cmd in
check)
    f=${1:-/etc/cgwarden/policy.yaml}
    [ -r "$f" ] || { echo "$f: error: cannot read" >&2; exit 1; }
    errs=$(awk -v f="$f" '
        /memroy:/ { printf "%s:%d:%d: error: unknown field `memroy`, did you mean `memory`?\n", f, NR, index($0, "memroy") }
        /Bad_Name:/ { printf "%s:%d:%d: error: invalid group name `Bad_Name`\n", f, NR, index($0, "Bad_Name") }
        /nosuchgroup/ { printf "%s:%d:%d: error: unknown group `nosuchgroup`\n", f, NR, index($0, "nosuchgroup") }' "$f")
    [ -z "$errs" ] && exit 0
    echo "$errs" >&2
    exit 1
    ;;
plan)
    out=$(plan)
    [ -n "$out" ] && echo "$out"
    echo "$(printf '%s' "$out" | grep -c .) changes"
    missing | sed 's/^/warning: missing knob: /' >&2
    exit 0
    ;;
apply)
    f=${1:-/etc/cgwarden/policy.yaml}
    m=$(missing)
    if [ -n "$m" ]; then
        echo "$m" | sed 's/^/warning: missing knob: /' >&2
        if grep -q '^ *on_missing: *fail' "$f"; then
            echo "error: the system lacks knobs the policy requires (on_missing: fail); nothing written" >&2
            exit 3
        fi
    fi
    mkdir -p "$STATE"
    rc=0
    desired >/tmp/mock.desired
    while IFS='|' read -r kind path value read; do
        case $kind in
        mkdir)
            [ -d "$path" ] && continue
            journal mkdir "$path" -
            mkdir "$path" || rc=1
            ;;
        write)
            [ -n "$value" ] || continue
            [ "$(current "$path")" = "$(norm_want "$path" "$read")" ] && continue
            journal write "$path" "$(cat "$path")"
            echo "$value" >"$path" || { echo "error: write $path $value failed" >&2; rc=1; }
            ;;
        esac
    done </tmp/mock.desired
    if [ "$(cat /sys/block/zram0/disksize)" != 0 ] && ! grep -q '^/dev/zram0 ' /proc/swaps; then
        journal swapon /dev/zram0 -
        mkswap /dev/zram0 >/dev/null && cgwarden-workload swapon /dev/zram0 100 || rc=1
    fi
    placements >/tmp/mock.place
    while read -r pid group pol prio; do
        [ "$(sed -n 's/^0:://p' "/proc/$pid/cgroup")" = "/$group" ] ||
            echo "$pid" >"$CG/$group/cgroup.procs" 2>/dev/null
        [ -n "$pol" ] && cgwarden-workload setsched "$pid" "$pol" "$prio" 2>/dev/null
    done </tmp/mock.place
    exit $rc
    ;;
reset)
    [ -e "$J" ] || { echo "nothing to reset" >&2; exit 0; }
    rc=0
    # 1. processes out of the groups we created, then swap off and reset zram.
    grep '^mkdir	' "$J" | cut -f2 | while read -r g; do
        for p in $(cat "$g/cgroup.procs" 2>/dev/null); do echo "$p" >"$CG/cgroup.procs" 2>/dev/null; done
    done
    for dev in $(grep '^swapon	' "$J" | cut -f2); do cgwarden-workload swapoff "$dev" || rc=1; done
    if grep -q '	/sys/block/zram0/' "$J"; then
        echo 1 >/sys/block/zram0/reset
        # reset keeps comp_algorithm; put the original back (allowed again once reset).
        alg=$(grep '^write	/sys/block/zram0/comp_algorithm	' "$J" | cut -f3 | grep -o '\[[^]]*\]' | tr -d '[]')
        [ -n "$alg" ] && { echo "$alg" >/sys/block/zram0/comp_algorithm || rc=1; }
    fi
    # 2. files outside the created groups and zram, newest first.
    created=$(grep '^mkdir	' "$J" | cut -f2)
    awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }' "$J" | grep '^write	' >/tmp/mock.undo
    : >/tmp/mock.subtree
    while IFS='	' read -r kind path orig; do
        for g in $created; do case $path in "$g"/*) continue 2 ;; esac; done
        case $path in
        /sys/block/zram*) continue ;;
        */cgroup.subtree_control)
            # Writing the old content would only add: disable what was not there
            # before, after the groups are gone.
            extra=
            for c in $(cat "$path"); do
                case " $orig " in *" $c "*) ;; *) extra="$extra -$c" ;; esac
            done
            echo "$path|$extra" >>/tmp/mock.subtree
            ;;
        *) echo "$orig" >"$path" || rc=1 ;;
        esac
    done </tmp/mock.undo
    # 3. remove created groups (deepest first), then undo subtree_control.
    for g in $(echo "$created" | awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }'); do
        rmdir "$g" || rc=1
    done
    while IFS='|' read -r path extra; do echo "$extra" >"$path" || rc=1; done </tmp/mock.subtree
    rm -f "$J"
    exit $rc
    ;;
--help | -h) die_usage ;;
*) die_usage ;;
esac
