# Sourced by the benchmarks that can run the daemon under callgrind in the
# guest (bench-flood-guest.sh, bench-overload.sh): the host's valgrind goes
# into the image, and the guest's profile comes back over the serial console
# (gzip, base64, `CG64 ` lines).

# callgrind_into_image EXTRA WHO: copies valgrind.bin, the callgrind tool and
# its preload into the image overlay EXTRA; exits 2 naming WHO when the host
# has no valgrind (Debian's package).
callgrind_into_image() {
    local extra=$1 who=$2 vg=/usr/libexec/valgrind f
    for f in /usr/bin/valgrind.bin "$vg/callgrind-amd64-linux" "$vg/vgpreload_core-amd64-linux.so" "$vg/default.supp"; do
        [[ -f $f ]] || { echo "$who: callgrind needs valgrind (Debian's package): no $f" >&2; exit 2; }
    done
    mkdir -p "$extra/usr/local/bin" "$extra$vg"
    cp /usr/bin/valgrind.bin "$extra/usr/local/bin/"
    cp "$vg/callgrind-amd64-linux" "$vg/vgpreload_core-amd64-linux.so" "$vg/default.supp" "$extra$vg/"
}

# callgrind_profile LOG OUT WHAT [PREFIX]: the profile the guest printed into LOG,
# written to OUT for callgrind_annotate.
# PREFIX (default CG64) picks which of the guest's profiles.
callgrind_profile() {
    local pre=${4:-CG64}
    # The serial console ends its lines with CR LF.
    grep -a "^$pre " "$1" | sed "s/^$pre //" | tr -d '\r\n' | base64 -d | gunzip >"$2" &&
        echo "callgrind profile of $3: $2 (callgrind_annotate --inclusive=yes)"
}
