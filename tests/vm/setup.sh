#!/usr/bin/env bash
# Prepare everything the guest test bed needs (idempotent; a fast no-op when done):
#   - host packages: qemu-system-x86, busybox-static, cpio, kmod, xz-utils, zstd
#   - a Debian kernel image (NOT installed: downloaded and unpacked into the cache)
#   - modules.dep (depmod) and an uncompressed vmlinux (PVH entry, boots faster)
# Cache: ${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
#   kver            the kernel release, e.g. 6.1.0-57-amd64
#   root/           dpkg-deb -x of linux-image-KVER (boot/, lib/modules/KVER/)
#   vmlinux         uncompressed kernel
# Kernel: the package linux-image-amd64 depends on (Debian 12: 6.1), or
#   CGWARDEN_VM_KPKG (a meta-package such as linux-image-6.12-amd64, or an
#   exact linux-image-VERSION-amd64) into a cache of its own (a
#   cache that holds a kernel already is kept as it is), e.g.
#   CGWARDEN_VM_CACHE=~/.cache/cgwarden-vm-6.12 CGWARDEN_VM_KPKG=linux-image-6.12-amd64
set -euo pipefail

CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
mkdir -p "$CACHE"
say() { echo "setup: $*"; }

# --- 1. host packages ------------------------------------------------------
need_pkgs=()
for p in qemu-system-x86 busybox-static cpio kmod xz-utils zstd; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_pkgs+=("$p")
done
if ((${#need_pkgs[@]})); then
    say "installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
else
    say "packages present"
fi

# --- 2. kernel ---------------------------------------------------------------
if [[ -s $CACHE/kver && ( -s $CACHE/vmlinux || -e $CACHE/vmlinux.none ) && -d $CACHE/root/lib/modules/$(cat "$CACHE/kver") ]]; then
    say "kernel $(cat "$CACHE/kver") cached in $CACHE"
    exit 0
fi

# Fresh package lists: an old list may name a kernel the archive no longer has.
apt-get update -qq
want=${CGWARDEN_VM_KPKG:-linux-image-amd64}
pkg=$(apt-cache depends "$want" | sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)
if [[ -z $pkg && $want == linux-image-[0-9]*-amd64 ]]; then
    pkg=$want # an exact kernel package, not a meta-package
fi
[[ -n $pkg ]] || { echo "setup: cannot resolve $want" >&2; exit 1; }
kver=${pkg#linux-image-}
say "fetching $pkg (download only, not installed)"

tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg")
rm -rf "$CACHE/root" "$CACHE/vmlinux" "$CACHE/vmlinux.none"
mkdir -p "$CACHE/root"
dpkg-deb -x "$tmp"/"$pkg"_*.deb "$CACHE/root"
say "running depmod for $kver"
depmod -b "$CACHE/root" "$kver"

# --- 3. vmlinux (the kernel's scripts/extract-vmlinux logic) ---------------
img=$CACHE/root/boot/vmlinuz-$kver
try_decomp() { # MAGIC-as-printf-escape  SIGNATURE  DECOMPRESSOR...
    local magic=$1 sig=$2; shift 2
    local pos
    for pos in $(tr "$magic\n$sig" "\n$sig=" <"$img" | grep -abo "^$sig" | cut -d: -f1); do
        tail -c+"$pos" "$img" | "$@" >"$tmp/vmlinux" 2>/dev/null || true
        if [[ -s $tmp/vmlinux ]] && head -c4 "$tmp/vmlinux" | grep -q 'ELF'; then
            return 0
        fi
    done
    return 1
}
if try_decomp '\3757zXZ\000' abcde xz -dc ||
    try_decomp '(\265/\375' xxx zstd -dc ||
    try_decomp '\037\213\010' xy gunzip -c; then
    mv "$tmp/vmlinux" "$CACHE/vmlinux"
    say "extracted vmlinux ($(du -h "$CACHE/vmlinux" | cut -f1))"
else
    echo "setup: could not extract vmlinux from $img (will boot bzImage)" >&2
    : >"$CACHE/vmlinux.none"
fi
echo "$kver" >"$CACHE/kver"
say "kernel $kver ready in $CACHE"
