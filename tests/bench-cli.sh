#!/usr/bin/env bash
# CLI benchmarks on the fake demo board: wall time per command (mean over N
# runs, process start included) and peak RSS. Prints a table; asserts nothing.
#   bash tests/bench-cli.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}
cargo build --release --quiet --bins --examples
B=target/release/cgwarden
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
target/release/examples/demo_root "$tree/board" >/dev/null
pol=policies/iq9100-vision.yaml

mean_ms() { # CMD... : mean wall ms over N runs
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq "$N"); do "$@" >/dev/null 2>&1 || true; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }'
}
rss_kb() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n1; }

printf '%-40s %10s %10s\n' "command (N=$N)" "mean ms" "max RSS KiB"
printf '%-40s %10s %10s\n' "/bin/true (process start baseline)" "$(mean_ms /bin/true)" "$(rss_kb /bin/true)"
printf '%-40s %10s %10s\n' "check iq9100-vision.yaml" "$(mean_ms $B check $pol)" "$(rss_kb $B check $pol)"
printf '%-40s %10s %10s\n' "plan on a fresh fake board" "$(mean_ms $B plan $pol --root "$tree/board")" "$(rss_kb $B plan $pol --root "$tree/board")"
cp -r "$tree/board" "$tree/applied"
$B apply $pol --root "$tree/applied" >/dev/null
printf '%-40s %10s %10s\n' "apply on a converged fake board" "$(mean_ms $B apply $pol --root "$tree/applied")" "$(rss_kb $B apply $pol --root "$tree/applied")"
cycle() { cp -r "$tree/board" "$tree/c" && $B apply $pol --root "$tree/c" && $B reset --policy $pol --root "$tree/c"; rm -rf "$tree/c"; }
printf '%-40s %10s %10s\n' "apply + reset from fresh (incl. cp -r)" "$(N=$((N / 4)) mean_ms cycle)" "-"
