# The documented non-root flow (docs/cookbook.md, inference-box):
# with `socket_group: models` the socket is 0660 root:models and state_dir 0710
# root:models, so the user `models` — uid 65534 here, in the group `models` — reaches
# the daemon and boosts inside its `control:` grant: a timed boost, its release, and
# `boost … -- CMD` held exactly while CMD runs. The same uid without the group cannot
# connect (exit 4); outside the grant it is refused (exit 1).

P=$POL/nonroot.yaml
S=/run/cgwarden/io.cgwarden
H=$CG/inference/memory.high
cp /etc/passwd "$T/passwd.saved"
cp /etc/group "$T/group.saved"
echo 'models:x:65534:990:model manager:/nonexistent:/bin/sh' >>/etc/passwd
echo 'models:x:990:models' >>/etc/group
# `--socket` right after the command: after a `--` the arguments are CMD's.
as_models() {
    _c=$1
    shift
    cgwarden-workload run-as 65534:990 cgwarden "$_c" --socket "$S" "$@"
}

cgw check "$P"
no_warning() { ! grep -q warning /tmp/cgw.out /tmp/cgw.err; }
check_eq policy-valid 0 echo "$RC"
check policy-no-warning "check says no warning" no_warning
start_daemon "$P" --tick 100ms
check socket "control socket $S" wait_for 20 test -S "$S"
check_eq socket-mode "660 root models" stat -c '%a %U %G' "$S"
check_eq state-dir-mode "710 root models" stat -c '%a %U %G' /run/cgwarden
check_eq baseline 268435456 cat "$H"

models_status() { as_models status | grep -q vm-nonroot; }
check models-status "uid 65534 in models: status answers" models_status
out=$(as_models boost inference.memory.high=384M --for 1m --reason "model swap" 2>&1)
rc=$?
echo "$out" | sed 's/^/  out| /'
check_eq models-boost 0 echo "$rc"
check models-boost-written "inference.memory.high is 384M" wait_for 10 grep -qx 402653184 "$H"
h=$(echo "$out" | tail -n 1)
check models-release "models releases its boost $h" as_models release "$h"
check models-released "back to 256M" wait_for 10 grep -qx 268435456 "$H"

# `boost … -- CMD`: held exactly while CMD runs. Through `sh -c`: cgwarden-workload
# drops a bare `--` and what follows (its tags), so the `--` travels inside one argument.
boost_cmd_sees_it() {
    cgwarden-workload run-as 65534:990 sh -c \
        "cgwarden boost --socket $S inference.memory.high=384M --for 10m -- sh -c 'grep -qx 402653184 $H && echo inside'" |
        grep -qx inside
}
check models-boost-cmd "boost -- CMD sees 384M inside" boost_cmd_sees_it
check models-cmd-released "back to 256M after CMD" wait_for 10 grep -qx 268435456 "$H"

check_eq models-outside-grant 1 sh -c "cgwarden-workload run-as 65534:990 cgwarden boost inference.memory.max=1G --for 1m --socket $S >/dev/null 2>&1; echo \$?"
check_eq stranger-unreachable 4 sh -c "cgwarden-workload run-as 65534 cgwarden status --socket $S >/dev/null 2>&1; echo \$?"

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cgw reset "$P"
check reset "reset exit 0" test "$RC" = 0
cp "$T/passwd.saved" /etc/passwd
cp "$T/group.saved" /etc/group
show_log 60
