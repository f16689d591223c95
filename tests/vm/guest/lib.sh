# Helpers sourced by every guest scenario (busybox sh). $SCENARIO is the scenario's
# name; check names are reported as SCENARIO/NAME.
#
#   check NAME DESCRIPTION CMD...        PASS when CMD exits 0
#   check_eq NAME EXPECTED CMD...        PASS when CMD's stdout (trailing newlines dropped) is EXPECTED
#   check_file NAME FILE EXPECTED        PASS when FILE's content is EXPECTED
#   check_exit NAME STATUS CMD...        PASS when CMD exits with STATUS
#   pass NAME DETAIL / fail NAME DETAIL  report directly
#   cgw ARGS...                          run cgwarden; stdout/stderr/status in $OUT $ERR $RC, echoed indented
#   wait_for SECS CMD...                 poll CMD every 0.2 s until it succeeds (1) or SECS pass (0)
#
# Never assert timings here: TCG time is not real time.

export CG=/sys/fs/cgroup
export T=/run/cgw-test                 # state shared between scenarios (recorded originals, PIDs)
export POL=/cgw/policies
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin

_report() { # PASS|FAIL NAME DETAIL
    line="RESULT $1 $SCENARIO/$2 $(printf '%s' "$3" | tr '\n' '|' | cut -c1-400)"
    echo "$line"
    echo "$line" >>"$T/results"
}
pass() { _report PASS "$1" "$2"; }
fail() { _report FAIL "$1" "$2"; }

check() {
    _n=$1 _d=$2
    shift 2
    _o=$("$@" 2>&1)
    _rc=$?
    if [ "$_rc" = 0 ]; then
        pass "$_n" "$_d"
    else
        fail "$_n" "$_d: exit $_rc: $(printf '%s' "$_o" | tail -n 3)"
    fi
}

check_eq() {
    _n=$1 _e=$2
    shift 2
    _o=$("$@" 2>/dev/null)
    if [ "$_o" = "$_e" ]; then
        pass "$_n" "$* = '$_e'"
    else
        fail "$_n" "$*: expected '$_e', got '$_o'"
    fi
}

check_file() {
    if [ ! -e "$2" ]; then
        fail "$1" "$2 missing (expected '$3')"
        return
    fi
    _o=$(cat "$2" 2>&1)
    if [ "$_o" = "$3" ]; then
        pass "$1" "$2 = '$3'"
    else
        fail "$1" "$2: expected '$3', got '$_o'"
    fi
}

check_exit() {
    _n=$1 _e=$2
    shift 2
    _o=$("$@" 2>&1)
    _rc=$?
    if [ "$_rc" = "$_e" ]; then
        pass "$_n" "$* exited $_e"
    else
        fail "$_n" "$*: expected exit $_e, got $_rc: $(printf '%s' "$_o" | tail -n 3)"
    fi
}

# Run cgwarden, keep its output for later checks, and show it (indented) in the log.
cgw() {
    echo "+ cgwarden $*"
    cgwarden "$@" >/tmp/cgw.out 2>/tmp/cgw.err
    RC=$?
    OUT=$(cat /tmp/cgw.out)
    ERR=$(cat /tmp/cgw.err)
    sed 's/^/  out| /' /tmp/cgw.out | head -n 80
    sed 's/^/  err| /' /tmp/cgw.err | head -n 40
    echo "  rc=$RC"
    return 0
}

# (Its counters have names no check function uses: sh has no locals, and a
# check that set `_t` once ended the wait at its first try.)
wait_for() {
    _wait_for_n=$(($1 * 5))
    shift
    _wait_for_i=0
    while [ "$_wait_for_i" -lt "$_wait_for_n" ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
        _wait_for_i=$((_wait_for_i + 1))
    done
    return 1
}

# `sysctl_path vm.swappiness` -> /proc/sys/vm/swappiness
sysctl_path() { echo "/proc/sys/$(echo "$1" | tr . /)"; }

# The sysctls the vision-cell policy sets, with the values it sets.
export SYSCTLS="vm.swappiness=30 vm.min_free_kbytes=22528 vm.watermark_scale_factor=150 vm.dirty_ratio=5 vm.dirty_background_ratio=2 vm.page-cluster=0 net.core.rmem_max=8388608 net.core.wmem_default=1048576 net.core.busy_poll=50 net.ipv4.ipfrag_time=10"

# The group a PID is in ("/" for the root), from /proc/PID/cgroup ("0::/PATH").
cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }

# Field N (1-based, as in proc(5)) of /proc/PID/stat; comm (field 2) must have no spaces.
stat_field() { cut -d' ' -f"$2" "/proc/$1/stat" 2>/dev/null; }

# Scenarios after 30-apply call this first: without an effective apply their checks
# could pass vacuously (e.g. "reset removed the groups" when none were created).
require_applied() {
    if [ -e "$T/applied" ]; then
        pass precondition "30-apply took effect"
    else
        fail precondition "30-apply did not take effect (exit status or groups missing); checks below may pass vacuously"
    fi
}

alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# --- daemon helpers, for the scenarios that run `cgwarden run` -------------------
# The daemon runs in the background with stderr in $DLOG; its own environment carries
# CGW_LEAK_MARKER so hook environments can be checked for leaks.
DLOG=$T/daemon-$SCENARIO.log
DPID=
start_daemon() { # ARGS... : cgwarden run ARGS... &, wait for "cgwarden running", report daemon-started
    # (Not through check(): that runs its command in a subshell, and $DPID must be ours.)
    : >"$DLOG"
    echo "+ cgwarden run $* &  (stderr in $DLOG)"
    CGW_LEAK_MARKER=leaked cgwarden run "$@" >/dev/null 2>>"$DLOG" &
    DPID=$!
    if wait_for 60 grep -q 'cgwarden running' "$DLOG"; then
        pass daemon-started "PID $DPID, log shows 'cgwarden running'"
    else
        fail daemon-started "no 'cgwarden running' in the log: $(tail -n 5 "$DLOG")"
    fi
}
gone() { ! alive "$1"; }
stop_daemon() { # SIGTERM, reap; exit status in $DRC ("hung" if it did not exit)
    DRC=none
    [ -n "$DPID" ] || return 0
    kill -TERM "$DPID" 2>/dev/null
    if wait_for 30 gone "$DPID"; then
        wait "$DPID"
        DRC=$?
    else
        kill -KILL "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DRC=hung
    fi
    DPID=
}
rss_kib() { # PID: resident KiB as the page tables say (smaps_rollup's Rss). Not VmRSS: on 6.1 each
    # thread batches its RSS counter updates for 64 faults, and a fault maps up to 16 file pages
    # (fault-around), so VmRSS can lag MiBs behind what is mapped (984 KiB vs 4476 KiB, once measured).
    awk '$1 == "Rss:" { print $2; f = 1 } END { if (!f) exit 1 }' "/proc/$1/smaps_rollup" 2>/dev/null ||
        awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"
}
thread_schedstat() { # PID: ns on CPU and wake-ups (schedstat field 3: timeslices run) of
    # every thread, one line each: "TID COMM NS WAIT_NS SLICES" (the benchmarks' CPU split)
    for t in /proc/"$1"/task/*; do
        [ -r "$t/schedstat" ] || continue
        echo "${t##*/} $(cat "$t/comm") $(cat "$t/schedstat")"
    done
}
mem_report() { # PID: where the RSS is — smaps_rollup's totals, then one "SMAPS" line per mapping with Rss > 0
    grep -E '^(Rss|Pss_Anon|Pss_File|Anonymous|AnonHugePages|Locked):' "/proc/$1/smaps_rollup" 2>/dev/null |
        awk '{ printf "%s%s=%sKiB", sep, $1, $2; sep = " " } END { print "" }' | sed 's/^/MEMROLLUP /; s/://g'
    awk '/^[0-9a-f]+-[0-9a-f]+ / { if (rss > 0) printf "SMAPS rss=%d anon=%d thp=%d %s %s\n", rss, anon, thp, range, name
            range = $1; name = ($6 != "" ? $6 : "[anon]"); rss = 0; anon = 0; thp = 0; next }
        /^Rss:/ { rss = $2 } /^Anonymous:/ { anon = $2 } /^AnonHugePages:/ { thp = $2 }
        END { if (rss > 0) printf "SMAPS rss=%d anon=%d thp=%d %s %s\n", rss, anon, thp, range, name }' "/proc/$1/smaps" 2>/dev/null
    for t in /proc/$1/task/*; do printf '%s ' "$(cat "$t/comm" 2>/dev/null)"; done | sed 's/^/THREADS /'; echo
}
show_log() { # the daemon log, less lines matching $DLOG_FILTER, into the console
    echo "daemon log ($DLOG):"
    grep -v -e "${DLOG_FILTER:-^@@@}" "$DLOG" | sed 's/^/  dlog| /' | head -n "${1:-150}"
}
in_group() { # GROUP CMD... : run CMD inside $CG/GROUP (same PID)
    _g=$1
    shift
    sh -c 'echo $$ >"$0" && exec "$@"' "$CG/$_g/cgroup.procs" "$@"
}
knob_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
event_count() { awk -v k="$2" '$1 == k { print $2 }' "$CG/$1/memory.events" 2>/dev/null; }
# A benchmark runs only when its host runner wrote its parameter file FILE;
# otherwise it says so (a pass named NAME-skipped) and the caller returns.
bench_wanted() { # FILE NAME RUNNER
    [ -f "$1" ] && return 0
    echo "BENCH $2: skipped (run $3)"
    pass "$2-skipped" "$2 benchmark not asked for"
    return 1
}
# ----------------------------------------------------------------------------------

# stall_bench_policy PRODUCT STATE_DIR [COMMENT]: the reaction benchmarks' policy
# (bench/reaction.sh, bench/reaction-lag.sh measure the same rule): one stall rule
# served by a kernel PSI trigger raising inference's memory.high while it holds;
# COMMENT, when given, is a last comment line (an edit the reload bench makes).
stall_bench_policy() {
    cat <<EOP
version: 1
product: $1
settings:
  cgroup_root: $CG
  state_dir: $2
groups:
  inference:
    memory: { high: 64M, max: 512M, swap_max: 0 }
rules:
  - name: inference-stall
    when: inference.memory.some > 100ms/1s
    while:
      - set inference.memory.high = 256M
    hold: 3s
EOP
    [ -n "${3:-}" ] && echo "# $3"
    return 0
}
