#!/usr/bin/env bash
# Builds the Debian package of cgwarden:
#   1. the release binary (skipped with --no-build: tests/packaging.rs reuses
#      the one `cargo test --release` has just built),
#   2. man pages (`cgwarden manpages DIR`), shell completions
#      (`cgwarden completions bash|zsh|fish`), the example policy and the
#      Debian changelog, generated into target/release/pkg/,
#   3. `cargo deb --no-build` (cargo-deb strips the binary and writes the
#      maintainer scripts from packaging/deb/maintainer-scripts/ and the
#      systemd-units table in Cargo.toml),
# and prints the .deb's path on the last line of stdout, sizes before it.
#
# Needs cargo-deb (`cargo install cargo-deb --locked`; tests/run-all.sh
# installs it) and gzip. Usage: packaging/deb/build.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/../.."

build=1
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
    esac
done

command -v cargo-deb >/dev/null || {
    echo "build.sh: cargo-deb is missing: cargo install cargo-deb --locked" >&2
    exit 1
}

target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
rel="$target_dir/release"
bin="$rel/cgwarden"
if [ "$build" = 1 ]; then
    cargo build --release --locked --bin cgwarden >&2
fi
[ -x "$bin" ] || { echo "build.sh: $bin is not built (drop --no-build)" >&2; exit 1; }

version=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["packages"][0]["version"])')
pkg="$rel/pkg"
rm -rf "$pkg"
mkdir -p "$pkg/man" "$pkg/completions"

# Man pages: cgwarden.8, cgwarden-SUB.8 and cgwarden-policy.5, from the
# binary's own clap definitions, so they never disagree with --help.
# Completions, under the names each shell's vendor directory expects.
"$bin" manpages "$pkg/man" >&2
"$bin" completions bash > "$pkg/completions/cgwarden"
"$bin" completions zsh > "$pkg/completions/_cgwarden"
"$bin" completions fish > "$pkg/completions/cgwarden.fish"
ls "$pkg"/man/cgwarden.8 "$pkg"/man/cgwarden-policy.5 >/dev/null
gzip -9n "$pkg"/man/*.[0-9]
for f in "$pkg"/completions/cgwarden "$pkg"/completions/_cgwarden "$pkg"/completions/cgwarden.fish; do
    [ -s "$f" ] || { echo "build.sh: empty or missing completion file $f" >&2; exit 1; }
done

# The shipped example: policies/minimal.yaml with a header on how to use it.
# It must stay a valid policy (tests/packaging.rs runs the installed
# binary's `check` on the installed file).
{
    cat <<'EOF'
# /etc/cgwarden/policy.yaml.example — shipped by the cgwarden package.
#
# cgwarden does nothing until /etc/cgwarden/policy.yaml exists: the units
# have ConditionPathExists=/etc/cgwarden/policy.yaml. To put a board under
# cgwarden:
#   cp /etc/cgwarden/policy.yaml.example /etc/cgwarden/policy.yaml
#   $EDITOR /etc/cgwarden/policy.yaml     # groups, placement, rules
#   cgwarden check /etc/cgwarden/policy.yaml
#   cgwarden plan /etc/cgwarden/policy.yaml   # every write apply would make
#   systemctl start cgwarden
# The policy file must be owned by root and not writable by group/other.
# Policy reference: man 5 cgwarden-policy; larger examples in
# /usr/share/doc/cgwarden/examples/.
#
EOF
    cat policies/minimal.yaml
} > "$pkg/policy.yaml.example"

# Debian's changelog (lintian wants one); the project's own history is
# CHANGELOG.md in /usr/share/doc/cgwarden. Dated by the last commit so two
# builds of one commit are identical.
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
cat > "$pkg/changelog.Debian" <<EOF
cgwarden ($version-1) unstable; urgency=medium

  * Upstream release $version; see /usr/share/doc/cgwarden/CHANGELOG.md.

 -- cgwarden maintainers <cgwarden@example.org>  $when
EOF

# CHANGELOG.md is the upstream changelog: Debian's name for it is
# changelog.gz (lintian: wrong-name-for-upstream-changelog).
gzip -9n < CHANGELOG.md > "$pkg/changelog.gz"

# The .deb. --no-build: the binary above is the one packaged (cargo-deb
# still strips its copy).
cargo deb --no-build --locked --output "$target_dir/debian/" >"$pkg/cargo-deb.out" 2>"$pkg/cargo-deb.err" || {
    cat "$pkg/cargo-deb.err" >&2
    exit 1
}
deb=$(tail -n1 "$pkg/cargo-deb.out")
[ -f "$deb" ] || { echo "build.sh: cargo-deb printed no .deb path" >&2; cat "$pkg/cargo-deb.err" >&2; exit 1; }

stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
strip -o "$stripped" "$bin"
echo "binary (unstripped): $(stat -c %s "$bin") bytes"
echo "binary (stripped):   $(stat -c %s "$stripped") bytes"
echo "package:             $(stat -c %s "$deb") bytes"
echo "installed size:      $(dpkg-deb -f "$deb" Installed-Size) KiB"
echo "$deb"
