# One writer per cgroup tree on the real cgroupfs: `run a.yaml` holds /sys/fs/cgroup;
# `run`, `apply` and `reset` of b.yaml (its own state_dir, the same cgroup root) exit 1
# naming a's pid and state_dir and write nothing; after a's clean stop the lock file is
# gone and b may work. Runs before 30-apply; leaves no group and no journal behind.
A=/tmp/one-writer-a.yaml
B=/tmp/one-writer-b.yaml
L=/run/cgwarden/tree-sys-fs-cgroup.lock
for x in a b; do
    cat >"/tmp/one-writer-$x.yaml" <<POLICY
version: 1
product: one-writer-$x
settings: { state_dir: /run/cgw-one-writer-$x }
groups:
  onewriter:
    memory: { high: 64M }
POLICY
done

start_daemon "$A" --tick 100ms
check_eq a-built "67108864" cat "$CG/onewriter/memory.high"
check lock-file "the tree lock names a's pid and state_dir" sh -c \
    "grep -qx 'pid $DPID' $L && grep -qx 'state_dir /run/cgw-one-writer-a' $L"
echo "lock file:"; sed 's/^/  /' "$L"
holder="pid $DPID (cgwarden run $A), state_dir /run/cgw-one-writer-a"
for what in run apply reset; do
    if [ "$what" = run ]; then cgw run "$B" --tick 100ms; else cgw "$what" "$B"; fi
    check_eq "b-$what-exit" 1 echo "$RC"
    check "b-$what-names-holder" "$what of b names a's pid and state_dir" grep -qF "$holder" /tmp/cgw.err
    check "b-$what-wrote-nothing" "$what of b made no change" sh -c '! grep -q "^WRITE\|^MKDIR" /tmp/cgw.out'
done
check b-journalled-nothing "b has no journal" test ! -e /run/cgw-one-writer-b/originals

stop_daemon
check_eq a-stopped 0 echo "$DRC"
check lock-released "the lock file goes with the lock" test ! -e "$L"
cgw apply "$B"
check_eq b-apply-after 0 echo "$RC"
cgw reset "$B"
check_eq b-reset-after 0 echo "$RC"
cgw reset "$A"
check_eq a-reset 0 echo "$RC"
check group-removed "onewriter removed" test ! -e "$CG/onewriter"
rm -f "$A" "$B"
