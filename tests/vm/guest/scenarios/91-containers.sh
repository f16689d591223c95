# A container's processes are never moved out of their container. Three
# cgroups another manager owns, laid out as each makes them on a real
# kernel (no runtime in the guest):
#  - a docker container's scope with the systemd driver: runc makes
#    `system.slice/docker-<id>.scope` (the cgroups path `system.slice:docker:<id>`)
#    and writes the container's init to its cgroup.procs;
#  - a `Delegate=yes` service's subgroup: systemd marks the unit's cgroup with
#    the xattr trusted.delegate=1, the service's manager makes `payload` below;
#  - a group made below a cgwarden group (a runtime's cgroupfs parent, or by hand).
# A process with the comm of an RT placement in each stays there through
# `plan`, `apply` and the daemon (exec events and rescans), gets no FIFO, and
# each command says why; the same program outside is placed with FIFO.
# `reset` cannot remove a cgwarden group a runtime still has a group in and
# leaves that group's process where it is.
WL=$(command -v cgwarden-workload)
P=$POL/containers.yaml
CLOG=/tmp/cgwx-ctr.log
ID=8f3c9a0d1e2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3ce1
DOCKER=/system.slice/docker-$ID.scope
SVC=/system.slice/ros-delegated.service
LINE=$(grep -n 'comm: cgwx-talker' "$P" | cut -d: -f1)
had_slice=no
[ -d "$CG/system.slice" ] && had_slice=yes

mkdir -p "$CG$DOCKER" "$CG$SVC/payload"
check ctr-mark "trusted.delegate=1 set on $SVC" "$WL" setxattr "$CG$SVC" trusted.delegate 1
join() { # CGROUP CMD... &: run CMD in CGROUP, as runc joins a container's init. Only
    # in the background: the exec keeps $! the pid of the process that joins.
    _j=$1
    shift
    exec sh -c 'echo $$ >"$0" && exec "$@"' "$CG$_j/cgroup.procs" "$@"
}
join "$DOCKER" "$WL" exec-as cgwx-talker 120 & P_DOCKER=$!
join "$SVC/payload" "$WL" exec-as cgwx-talker 120 & P_SVC=$!
"$WL" exec-as cgwx-talker 120 & P_NATIVE=$!
is_in() { [ "$(cgroup_of "$1")" = "$2" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = cgwx-talker ]; }
layout_ok() { is_in "$P_DOCKER" "$DOCKER" && is_in "$P_SVC" "$SVC/payload" && [ "$(cat "/proc/$P_NATIVE/comm" 2>/dev/null)" = cgwx-talker ]; }
check ctr-layout "the three processes run where they were started" wait_for 10 layout_ok

# plan: the native process is a step, the other two are notes.
cgw plan "$P"
note() { # PID CGROUP OWNER
    echo "# left alone: pid $1 (cgwx-talker) in $2: placement at policy line $LINE → ctr-rt matches it, but its cgroup belongs to $3"
}
DNOTE=$(note "$P_DOCKER" "$DOCKER" "a container runtime (docker)")
SNOTE=$(note "$P_SVC" "$SVC/payload" "the manager of a delegated subtree ($SVC is marked: Delegate=yes)")
has_line() { printf '%s\n' "$OUT" | grep -qxF "$1"; }
moves() { printf '%s\n' "$OUT" | grep -q "^WRITE $CG/ctr-rt/cgroup.procs $1 (was "; }
check ctr-plan-native "plan moves the native process" moves "$P_NATIVE"
check ctr-plan-docker-note "plan: $DNOTE" has_line "$DNOTE"
check ctr-plan-svc-note "plan: $SNOTE" has_line "$SNOTE"
moves_neither() { ! moves "$P_DOCKER" && ! moves "$P_SVC"; }
check ctr-plan-no-move "plan moves neither" moves_neither

# apply: the same on the kernel.
cgw apply "$P"
check_eq ctr-apply-rc 0 echo "$RC"
check ctr-apply-docker-note "apply: $DNOTE" has_line "$DNOTE"
check ctr-apply-svc-note "apply: $SNOTE" has_line "$SNOTE"
check_eq ctr-native-placed /ctr-rt cgroup_of "$P_NATIVE"
check_eq ctr-native-fifo 1 stat_field "$P_NATIVE" 41
check_eq ctr-docker-stays "$DOCKER" cgroup_of "$P_DOCKER"
check_eq ctr-docker-not-fifo 0 stat_field "$P_DOCKER" 41
check_eq ctr-docker-procs "$P_DOCKER" cat "$CG$DOCKER/cgroup.procs"
check_eq ctr-svc-stays "$SVC/payload" cgroup_of "$P_SVC"
check_eq ctr-svc-not-fifo 0 stat_field "$P_SVC" 41

# A group someone made below cgwarden's ctr-robots, with a process in it.
mkdir -p "$CG/ctr-robots/handmade"
join /ctr-robots/handmade "$WL" exec-as cgwx-talker 120 & P_BELOW=$!
wait_for 10 is_in "$P_BELOW" /ctr-robots/handmade

# The daemon: its startup scan, then an exec into the container (an exec
# event), then rescans every 2 s.
env CGWARDEN_LOG=debug cgwarden run "$P" >"$CLOG" 2>&1 &
CPID=$!
check ctr-daemon "daemon running" wait_for 60 grep -q "cgwarden running" "$CLOG"
said() { grep -q "placement left a process alone: pid $1 (cgwx-talker) in $2: .* → ctr-rt matches it" "$CLOG"; }
check ctr-daemon-docker "the daemon says the docker process stays" wait_for 30 said "$P_DOCKER" "$DOCKER"
check ctr-daemon-svc "the daemon says the delegated process stays" wait_for 30 said "$P_SVC" "$SVC/payload"
check ctr-daemon-below "the daemon says the process below ctr-robots stays" wait_for 30 said "$P_BELOW" /ctr-robots/handmade
grep -q "below cgwarden's group ctr-robots" "$CLOG" && pass ctr-below-owner "names ctr-robots" || fail ctr-below-owner "$(grep "pid $P_BELOW" "$CLOG" | head -n 2)"
sleep 1
join "$DOCKER" "$WL" exec-as cgwx-talker 120 & P_EXEC=$!
check ctr-daemon-exec "an exec in the container: said, not moved" wait_for 30 said "$P_EXEC" "$DOCKER"
sleep 5 # two rescans or more
check_eq ctr-exec-stays "$DOCKER" cgroup_of "$P_EXEC"
check_eq ctr-exec-not-fifo 0 stat_field "$P_EXEC" 41
check_eq ctr-below-stays /ctr-robots/handmade cgroup_of "$P_BELOW"
for w in docker:$P_DOCKER svc:$P_SVC below:$P_BELOW exec:$P_EXEC; do
    check_eq "ctr-said-once-${w%%:*}" 1 grep -c "placement left a process alone: pid ${w#*:} " "$CLOG"
done
cgw status --policy "$P"
listed() {
    printf '%s\n' "$OUT" | grep -q '^LEFT ALONE' || return 1
    for p in "$P_DOCKER" "$P_SVC" "$P_BELOW" "$P_EXEC"; do
        printf '%s\n' "$OUT" | grep -q "^  $p (cgwx-talker) in " || return 1
    done
}
check ctr-status "status lists the four under LEFT ALONE" listed
grep "left a process alone" "$CLOG" | head -n 4 | sed 's/^/  log| /'
kill -TERM "$CPID" 2>/dev/null
wait "$CPID" 2>/dev/null

# reset: ctr-robots still has a group of someone else's in it.
cgw reset "$P"
refused_robots() { [ "$RC" != 0 ] && printf '%s\n' "$ERR" | grep -q "ctr-robots"; }
check ctr-reset-refused "reset cannot remove ctr-robots and says so" refused_robots
check_eq ctr-reset-below-stays /ctr-robots/handmade cgroup_of "$P_BELOW"

kill "$P_DOCKER" "$P_SVC" "$P_NATIVE" "$P_BELOW" "$P_EXEC" 2>/dev/null
sleep 0.5
rmdir "$CG/ctr-robots/handmade" 2>/dev/null
cgw reset "$P"
check_eq ctr-reset-rc 0 echo "$RC"
rmdir "$CG$DOCKER" "$CG$SVC/payload" "$CG$SVC" 2>/dev/null
[ "$had_slice" = no ] && rmdir "$CG/system.slice" 2>/dev/null
rm -rf /run/cgwarden-ctr
