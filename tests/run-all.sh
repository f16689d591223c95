#!/usr/bin/env bash
# The whole test suite, as CI runs it: format and lint gates, the guest
# kernel set-up (idempotent: packages and a cached Debian kernel), python3's
# varlink package (for the independent client test), the platform stages of
# docs/platform.md (the systemd guest's image, the arm64 chroot and kernel,
# in the background), then every test layer through `cargo test` — unit,
# fake-root, the QEMU guest, the systemd-as-PID-1 guest, the arm64
# cross-build, package and guest.
# Ends with one summary line: "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
# The platform stages: debootstrap (the systemd guest's rootfs and the
# arm64 build chroot), debugfs (injecting into the guest image), QEMU for
# aarch64, unshare (the chroot's private mounts), file (arm64 ELF check).
platneed=()
command -v debootstrap >/dev/null || platneed+=(debootstrap)
command -v debugfs >/dev/null || platneed+=(e2fsprogs)
command -v qemu-system-aarch64 >/dev/null || platneed+=(qemu-system-arm)
command -v unshare >/dev/null || platneed+=(util-linux)
command -v file >/dev/null || platneed+=(file)
if [ ${#platneed[@]} -gt 0 ]; then
    echo "run-all: installing ${platneed[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${platneed[@]}" >/dev/null
fi
# The systemd guest's image and the arm64 chroot + kernel are downloads and
# dpkg runs (cached by their inputs; seconds when warm): made in the
# background while the lint gates compile, waited for before the tests.
plat_log=$(mktemp -d)
stage_bg() { # NAME CMD...: run CMD in the background, timed, into $plat_log/NAME
    local name=$1
    shift
    ( s=$(date +%s); "$@" >"$plat_log/$name.log" 2>&1 && rc=0 || rc=$?
      echo "run-all: $name took $(($(date +%s) - s))s (rc=$rc)" >>"$plat_log/$name.log"; exit $rc ) &
}
stage_bg systemd-image bash tests/vm/systemd-image.sh
bg_sd=$!
stage_bg arm64-setup bash tests/vm/setup-arm64.sh
bg_arm=$!
cargo fmt --check
cargo clippy --all-targets -- -D warnings
# The fuzz targets build (so none stops compiling unseen). Running
# them needs cargo-fuzz and a nightly toolchain; checking them needs neither
# (libfuzzer-sys builds its C++ runtime with the system's g++). Their
# bodies run on the seed corpus in tests/fuzz_targets.rs.
cargo check --manifest-path fuzz/Cargo.toml --bins
bash tests/vm/setup.sh
# The independent varlink client (tests/control_varlink.rs) is PyPI's
# `varlink` under python3; the test fails without it, so install it here
# (idempotent: nothing to do once it imports).
if ! command -v python3 >/dev/null; then
    echo "run-all: installing python3"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-pip >/dev/null
fi
if ! python3 -c 'import varlink' 2>/dev/null; then
    echo "run-all: installing the Python varlink package"
    # A distribution's python3 refuses a plain pip install (PEP 668).
    python3 -m pip install --quiet varlink 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages varlink
fi
# A real StatsD client library (PyPI `statsd` 4.0.1) sends KPI
# samples in tests/kpi_fake_root.rs; the test fails without it.
if ! python3 -c 'import statsd; assert statsd.__version__ == "4.0.1"' 2>/dev/null; then
    echo "run-all: installing the Python statsd package"
    python3 -m pip install --quiet statsd==4.0.1 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages statsd==4.0.1
fi
# Independent checkers of the observability outputs: promtool (Debian's prometheus)
# for the metrics exposition, tmux for `cgwarden top`, headless chromium for
# the report page, sqlite3 for the recorder. Their tests fail without them.
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v tmux >/dev/null || need+=(tmux)
command -v chromium >/dev/null || need+=(chromium)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v curl >/dev/null || need+=(curl)
command -v man >/dev/null || need+=(man-db)
if [ ${#need[@]} -gt 0 ]; then
    echo "run-all: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Packaging checkers (tests/packaging.rs): lintian, dpkg, man and
# groff for the .deb, systemd-analyze for the units, strip/readelf; and
# cargo-deb itself (pinned; ~5 min to build on a loaded 2-core host).
pkgneed=()
command -v lintian >/dev/null || pkgneed+=(lintian)
command -v man >/dev/null || pkgneed+=(man-db)
command -v groff >/dev/null || pkgneed+=(groff-base)
command -v systemd-analyze >/dev/null || pkgneed+=(systemd)
command -v readelf >/dev/null || pkgneed+=(binutils)
if [ ${#pkgneed[@]} -gt 0 ]; then
    echo "run-all: installing ${pkgneed[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${pkgneed[@]}" >/dev/null
fi
command -v cargo-deb >/dev/null || cargo install --locked cargo-deb --version 3.8.0
for bg in "systemd-image:$bg_sd" "arm64-setup:$bg_arm"; do
    if ! wait "${bg#*:}"; then
        echo "run-all: ${bg%%:*} failed:" >&2
        tail -n 30 "$plat_log/${bg%%:*}.log" >&2
        exit 1
    fi
    tail -n 1 "$plat_log/${bg%%:*}.log"
done
# tests/packaging.rs reads `cargo metadata --offline` for every platform's
# crates (licenses); a build fetches only this platform's, so fetch the rest.
cargo fetch --locked
log=$(mktemp)
trap 'rm -rf "$log" "$plat_log"' EXIT
set +e
cargo test --release --no-fail-fast 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$rc"
