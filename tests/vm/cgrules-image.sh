#!/bin/bash
# Adds libcgroup's cgrulesengd (Debian's cgroup-tools + libcgroup2, the
# .debs downloaded and unpacked, never installed or run on this host) to a
# guest image overlay, for the placement benchmark's comparison row.
#
#   bash tests/vm/cgrules-image.sh CACHE_DIR OVERLAY_DIR
#
# OVERLAY_DIR is copied over the initramfs root (CGWARDEN_VM_EXTRA). What
# cgrulesengd 2.0.2 needs on a pure cgroup v2 guest, found by trying:
# /etc/cgconfig.conf (may be empty) and /etc/cgconfig.d/ must exist; every
# controller a rule names must be on in the root's cgroup.subtree_control
# (`*` means all of cgroup.controllers); /var/run for its socket. It matches
# the exe path (or the cmdline argument) whose basename starts with comm.
set -euo pipefail
cache=$1
out=$2
mkdir -p "$cache"
x=$cache/x
if [[ ! -x $x/usr/sbin/cgrulesengd ]]; then
    (cd "$cache" && rm -f ./*.deb && apt-get download cgroup-tools libcgroup2 >/dev/null 2>&1)
    rm -rf "$x"
    mkdir -p "$x"
    for d in "$cache"/*.deb; do dpkg-deb -x "$d" "$x"; done
fi
mkdir -p "$out/usr/sbin" "$out/lib/x86_64-linux-gnu" "$out/var" "$out/etc/cgrules.d" "$out/etc/cgconfig.d"
ln -sfn ../run "$out/var/run"
cp "$x/usr/sbin/cgrulesengd" "$out/usr/sbin/"
cp -L "$x/lib/x86_64-linux-gnu/libcgroup.so.2" "$out/lib/x86_64-linux-gnu/"
# Libraries by readelf (NEEDED), so nothing from the package runs here; libc
# and the loader come with cgwarden's own (run-guest.sh's copy_with_libs).
for lib in $({ readelf -d "$x/usr/sbin/cgrulesengd"; readelf -d "$x/lib/x86_64-linux-gnu/libcgroup.so.2"; } |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
    case $lib in libcgroup.so.* | ld-linux* | libc.so.*) continue ;; esac
    cp -L "/lib/x86_64-linux-gnu/$lib" "$out/lib/x86_64-linux-gnu/"
done
# The benchmark's child -> its group, any user; needs +memory at the root.
printf '*:cgwbench-child\tmemory\tcgwarden-bench-a\n' >"$out/etc/cgrules.conf"
: >"$out/etc/cgconfig.conf"
