# Values the board bounds, judged against a real kernel's
# /sys/devices/system/cpu: a CPU list beyond the guest's four CPUs passes the
# file-only `check`, and `check --root /`, `plan` and `apply` refuse it with
# its line, the CPUs named and the board's CPUs; nothing is written.

cat >"$T/beyond.yaml" <<'POLICY'
version: 1
groups:
  bounded:
    cpuset: { cpus: "2-5" }
POLICY
possible=$(cat /sys/devices/system/cpu/possible)
check_eq bounds-possible 0-3 echo "$possible"
check_exit bounds-check-file 0 cgwarden check "$T/beyond.yaml"
cgw check "$T/beyond.yaml" --root /
check_eq bounds-check-root-exit 1 echo "$RC"
check bounds-check-root-message "the error names the line, CPUs 4-5 and the board's 0-3" \
    grep -q "beyond.yaml:4:21: error: group \`bounded\`: cpuset.cpus \`2-5\` names CPUs 4-5, which this board does not have (its CPUs are 0-3" /tmp/cgw.err
cgw plan "$T/beyond.yaml"
check_eq bounds-plan-exit 1 echo "$RC"
cgw apply "$T/beyond.yaml"
check_eq bounds-apply-exit 1 echo "$RC"
check bounds-nothing-written "apply created no group" test ! -e "$CG/bounded"
