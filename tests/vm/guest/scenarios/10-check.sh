# `cgwarden check`: validation only, exit codes, error format.

check_exit valid-policy 0 cgwarden check "$POL/vision-cell-4cpu.yaml"

cgw check "$POL/broken.yaml"
check_eq broken-exit 1 echo "$RC"
n=$(printf '%s\n' "$ERR" | grep -cE "^$POL/broken.yaml:[0-9]+:[0-9]+: error: ")
check all-errors "all 3 errors reported as FILE:LINE:COL: error: (got $n)" test "$n" -ge 3
check typo-hint "hint for memroy" sh -c 'grep -q "did you mean \`memory\`" /tmp/cgw.err'
check typo-line "memroy reported at line 6" grep -qE "^$POL/broken.yaml:6:[0-9]+: error: .*memroy" /tmp/cgw.err

check_exit usage-error 2 cgwarden frobnicate
