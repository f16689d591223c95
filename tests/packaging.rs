//! Packaging: the Debian package, the systemd units, the Yocto
//! crate list and the dependency licenses. Each test shells out to the tool
//! that owns the question (cargo-deb, lintian, dpkg, man, systemd-analyze,
//! python3) and fails — never skips — when that tool is missing:
//! tests/run-all.sh installs them.
//!
//! The .deb test reuses the binary `cargo test --release` has already built
//! (CARGO_BIN_EXE_cgwarden is target/release/cgwarden then) instead of a
//! second release build; under a debug `cargo test` build.sh builds it.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{need, repo_dir};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cgwarden"))
}

fn run(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{shown} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Builds the .deb with packaging/deb/build.sh and returns its path.
fn build_deb() -> PathBuf {
    need("cargo-deb");
    let mut cmd = Command::new("bash");
    cmd.arg(repo_dir().join("packaging/deb/build.sh"))
        .current_dir(repo_dir());
    // The binary under test is the release one: package it as it is.
    if bin().parent().and_then(Path::file_name) == Some("release".as_ref()) {
        cmd.arg("--no-build");
    }
    let stdout = ok(&mut cmd);
    eprintln!("{stdout}");
    let deb = PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("build.sh printed the .deb path"),
    );
    assert!(deb.is_file(), "{} is not a file", deb.display());
    assert_eq!(deb.extension().and_then(|e| e.to_str()), Some("deb"));
    deb
}

/// The package: builds, passes lintian (errors and warnings; the only
/// override is in packaging/deb/lintian-overrides with its reason), unpacks
/// with dpkg into a scratch root, and what it installs works there.
///
/// Scratch root: `dpkg --root=R --unpack` with an empty dpkg database in R.
/// That is dpkg itself placing the files and registering the conffiles, so
/// it checks more than `dpkg-deb -x`; `--unpack` runs no postinst (a full
/// `--install` would chroot into R to run the maintainer scripts, which need
/// a shell and systemd's helpers there). The maintainer scripts are checked
/// as text instead.
#[test]
fn deb_builds_passes_lintian_and_installs_into_a_scratch_root() {
    for t in ["lintian", "dpkg", "dpkg-deb", "man", "bash"] {
        need(t);
    }
    let deb = build_deb();

    let lint = run(Command::new("lintian")
        .args(["--fail-on", "error,warning"])
        .arg(&deb));
    let report = text(&lint.stdout);
    assert!(
        lint.status.success()
            && !report
                .lines()
                .any(|l| l.starts_with("E:") || l.starts_with("W:")),
        "lintian:\n{report}{}",
        text(&lint.stderr)
    );

    // Control fields and maintainer scripts.
    let info = tempdir();
    ok(Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(info.path()));
    let conffiles = std::fs::read_to_string(info.path().join("conffiles")).unwrap();
    assert_eq!(
        conffiles.trim(),
        "/etc/cgwarden/policy.yaml.example",
        "only the example policy is a conffile; shipping policy.yaml would start the daemon on any box"
    );
    let postinst = std::fs::read_to_string(info.path().join("postinst")).unwrap();
    assert!(
        postinst.contains("deb-systemd-helper enable cgwarden.service"),
        "cgwarden.service is enabled on install:\n{postinst}"
    );
    for other in [
        "cgwarden-apply.service",
        "cgwarden-delegated.service",
        "cgwarden-soak.service",
    ] {
        // cargo-deb's dont-enable fragment: enabled only if it was before.
        assert!(
            postinst.contains(&format!(
                "if deb-systemd-helper debian-installed {other}; then"
            )),
            "{other} must not be enabled on install:\n{postinst}"
        );
        assert!(!postinst.contains(&format!("deb-systemd-invoke $_dh_action {other}")));
    }
    assert!(!postinst.contains("#DEBHELPER#"), "token left in postinst");
    for script in ["postinst", "postrm", "prerm"] {
        ok(Command::new("sh").arg("-n").arg(info.path().join(script)));
    }
    postinst_calls_on_a_fresh_install(&info.path().join("postinst"));

    // Into a scratch root.
    let root = tempdir();
    let r = root.path();
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
    ] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(r.join("var/lib/dpkg/available"), "").unwrap();
    ok(Command::new("dpkg")
        .arg(format!("--root={}", r.display()))
        .arg("--unpack")
        .arg(&deb));
    let status = ok(Command::new("dpkg")
        .arg(format!("--root={}", r.display()))
        .args(["--status", "cgwarden"]));
    assert!(status.contains("Status: install ok unpacked"), "{status}");

    let installed = r.join("usr/bin/cgwarden");
    let version = ok(Command::new(&installed).arg("--version"));
    assert!(
        version.contains(env!("CARGO_PKG_VERSION")),
        "installed binary: {version}"
    );
    // Stripped: no .symtab left.
    let sections = ok(Command::new("readelf").arg("-S").arg(&installed));
    assert!(!sections.contains(".symtab"), "the binary is not stripped");

    // The daemon the units run: its own binary, stripped, static-pie
    // (position-independent, no program interpreter, no shared library),
    // so it maps no C library (docs/size.md; tests/arm64.rs for arm64).
    let daemon = r.join("usr/libexec/cgwarden/cgwardend");
    let version = ok(Command::new(&daemon).arg("--version"));
    assert_eq!(
        version.trim(),
        format!("cgwardend {}", env!("CARGO_PKG_VERSION"))
    );
    let sections = ok(Command::new("readelf").arg("-S").arg(&daemon));
    assert!(!sections.contains(".symtab"), "cgwardend is not stripped");
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        let header = ok(Command::new("readelf")
            .args(["-h", "-l", "-d"])
            .arg(&daemon));
        assert!(
            header.contains("DYN (Position-Independent Executable file)"),
            "{header}"
        );
        assert!(
            !header.contains("INTERP"),
            "cgwardend names a loader:\n{header}"
        );
        assert!(
            !header.contains("(NEEDED)"),
            "cgwardend needs a library:\n{header}"
        );
    }

    // The shipped policy is valid.
    assert!(!r.join("etc/cgwarden/policy.yaml").exists());
    // dpkg unpacks a conffile as NAME.dpkg-new and renames it at configure.
    let example = r.join("etc/cgwarden/policy.yaml.example.dpkg-new");
    assert!(
        example.is_file(),
        "the example policy is not unpacked as a conffile"
    );
    ok(Command::new(&installed).arg("check").arg(&example));

    // Man pages render without a warning from man or groff.
    let mut pages = Vec::new();
    for sect in ["man5", "man8"] {
        for e in std::fs::read_dir(r.join("usr/share/man").join(sect)).unwrap() {
            pages.push(e.unwrap().path());
        }
    }
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["cgwarden.8.gz", "cgwarden-policy.5.gz", "cgwarden-run.8.gz"] {
        assert!(names.iter().any(|n| n == want), "no {want} in {names:?}");
    }
    for page in &pages {
        let out = run(Command::new("man")
            .args(["--warnings", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_FORMATTING", "0"));
        let err = text(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty() && out.stdout.len() > 100,
            "man -l {}: {}\n{err}",
            page.display(),
            out.status
        );
    }

    // Completions.
    let bash = r.join("usr/share/bash-completion/completions/cgwarden");
    assert!(bash.is_file(), "no bash completion file");
    ok(Command::new("bash").arg("-n").arg(&bash));
    assert!(r
        .join("usr/share/zsh/vendor-completions/_cgwarden")
        .is_file());
    assert!(r
        .join("usr/share/fish/vendor_completions.d/cgwarden.fish")
        .is_file());

    // Units, docs, the notify-reload drop-in kept inactive.
    for u in [
        "cgwarden.service",
        "cgwarden-apply.service",
        "cgwarden-delegated.service",
        "cgwarden-soak.service",
    ] {
        let unit = std::fs::read_to_string(r.join("usr/lib/systemd/system").join(u)).unwrap();
        assert!(
            unit.contains("ConditionPathExists=/etc/cgwarden/policy.yaml\n"),
            "{u} must not start without a policy"
        );
    }
    assert!(!r.join("usr/lib/systemd/system/cgwarden.service.d").exists());
    assert!(r
        .join("usr/share/cgwarden/systemd/notify-reload.conf")
        .is_file());
    for doc in [
        "README.md",
        "changelog.gz",
        "changelog.Debian.gz",
        "copyright",
        "docs/control.md",
        "examples/minimal.yaml",
    ] {
        assert!(
            r.join("usr/share/doc/cgwarden").join(doc).is_file(),
            "no /usr/share/doc/cgwarden/{doc}"
        );
    }
}

/// Runs the package's postinst as `configure` (a first install) with PATH
/// holding only stubs of systemd's helpers that log their arguments, so
/// nothing on this host is enabled or started (an unexpected command fails
/// as not found). cgwarden.service is enabled; the other two units are only
/// asked about; a start (only where systemd runs, /run/systemd/system)
/// names cgwarden.service alone.
fn postinst_calls_on_a_fresh_install(postinst: &Path) {
    let stubs = tempdir();
    let log = stubs.path().join("calls");
    for (name, body) in [
        (
            "deb-systemd-helper",
            // A fresh install: was-enabled is true, debian-installed false.
            r#"case "$1 $2" in "debian-installed "*) exit 1;; esac"#,
        ),
        ("deb-systemd-invoke", ""),
        ("systemctl", ""),
    ] {
        let p = stubs.path().join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho \"{name} $*\" >> \"$STUB_LOG\"\n{body}\nexit 0\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = run(Command::new("/bin/sh")
        .arg(postinst)
        .arg("configure")
        .env_clear()
        .env("PATH", stubs.path())
        .env("STUB_LOG", &log));
    assert!(
        out.status.success(),
        "postinst configure: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        calls
            .lines()
            .any(|l| l == "deb-systemd-helper enable cgwarden.service"),
        "cgwarden.service not enabled:\n{calls}"
    );
    for l in calls.lines() {
        if l.starts_with("deb-systemd-helper enable ") {
            assert_eq!(l, "deb-systemd-helper enable cgwarden.service", "{calls}");
        }
        if l.starts_with("deb-systemd-invoke ") {
            assert_eq!(l, "deb-systemd-invoke start cgwarden.service", "{calls}");
        }
    }
    if Path::new("/run/systemd/system").is_dir() {
        assert!(calls.contains("deb-systemd-invoke start cgwarden.service"));
    }
}

/// A copy of the units with /usr/bin/cgwarden and cgwardend pointing at the
/// built binaries (systemd-analyze verify checks that ExecStart= programs
/// exist).
fn units_copy() -> tempfile::TempDir {
    let dir = tempdir();
    let sys = repo_dir().join("systemd");
    for e in std::fs::read_dir(&sys).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("service") {
            let s = std::fs::read_to_string(&p).unwrap();
            let s = s
                .replace(
                    "/usr/libexec/cgwarden/cgwardend",
                    env!("CARGO_BIN_EXE_cgwardend"),
                )
                .replace("/usr/bin/cgwarden", &bin().display().to_string());
            std::fs::write(dir.path().join(p.file_name().unwrap()), s).unwrap();
        }
    }
    dir
}

const UNITS: [&str; 4] = [
    "cgwarden.service",
    "cgwarden-apply.service",
    "cgwarden-delegated.service",
    "cgwarden-soak.service",
];

fn systemd_version() -> u32 {
    let v = ok(Command::new("systemd-analyze").arg("--version"));
    v.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("systemd version in {v:?}"))
}

/// Every unit loads cleanly: `systemd-analyze verify` exits 0 AND prints
/// nothing (it exits 0 on unknown keys and bad values, only warning about
/// them, so any output is a failure here).
#[test]
fn units_pass_systemd_analyze_verify() {
    need("systemd-analyze");
    let dir = units_copy();
    for u in UNITS {
        let out = run(Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(dir.path().join(u))
            .current_dir(dir.path()));
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            out.status.success() && all.trim().is_empty(),
            "systemd-analyze verify {u}: {}\n{all}",
            out.status
        );
    }

    // The notify-reload drop-in: clean on systemd >= 253; on older systemd
    // exactly the two expected complaints (which is why it is not active).
    let d = dir.path().join("cgwarden.service.d");
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(
        repo_dir().join("systemd/cgwarden.service.d/notify-reload.conf"),
        d.join("notify-reload.conf"),
    )
    .unwrap();
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.path().join("cgwarden.service"))
        .current_dir(dir.path()));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "verify with the drop-in:\n{all}");
    if systemd_version() >= 253 {
        assert!(all.trim().is_empty(), "verify with the drop-in:\n{all}");
    } else {
        for l in all.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                l.contains("notify-reload") || l.contains("ReloadSignal"),
                "unexpected on systemd < 253: {l}"
            );
        }
    }
}

/// The capability bounding set of each unit, as it must be. Under systemd
/// `/sys/fs/cgroup` is mode 0555, so a unit that creates top-level groups
/// needs CAP_DAC_OVERRIDE (without it every mkdir fails with EACCES on a
/// real systemd; tests/systemd_guest.rs proves it there). The
/// delegated unit creates groups only inside its own, root-owned writable
/// cgroup and goes without.
const UNIT_CAPS: [(&str, &[&str]); 3] = [
    (
        "cgwarden.service",
        &[
            "CAP_DAC_OVERRIDE",
            "CAP_SYS_ADMIN",
            "CAP_SYS_MODULE",
            "CAP_NET_ADMIN",
            "CAP_SYS_NICE",
            "CAP_IPC_LOCK",
            "CAP_SYS_RESOURCE",
            "CAP_SYS_PTRACE",
            "CAP_SETUID",
            "CAP_SETGID",
            "CAP_KILL",
            "CAP_CHOWN",
        ],
    ),
    (
        "cgwarden-delegated.service",
        &[
            "CAP_SYS_ADMIN",
            "CAP_SYS_MODULE",
            "CAP_NET_ADMIN",
            "CAP_SYS_NICE",
            "CAP_IPC_LOCK",
            "CAP_SYS_RESOURCE",
            "CAP_SYS_PTRACE",
            "CAP_SETUID",
            "CAP_SETGID",
            "CAP_KILL",
            "CAP_CHOWN",
        ],
    ),
    (
        "cgwarden-apply.service",
        &[
            "CAP_DAC_OVERRIDE",
            "CAP_SYS_ADMIN",
            "CAP_SYS_MODULE",
            "CAP_SYS_NICE",
            "CAP_SYS_PTRACE",
        ],
    ),
];

/// Each unit's CapabilityBoundingSet= is exactly the expected set, every
/// capability in it has its reason in the unit's comments (`#   CAP_X  why`)
/// and a row in docs/operations.md's capability table.
#[test]
fn units_capability_sets_are_the_documented_ones() {
    let ops = std::fs::read_to_string(repo_dir().join("docs/operations.md")).unwrap();
    for (u, want) in UNIT_CAPS {
        let unit = std::fs::read_to_string(repo_dir().join("systemd").join(u)).unwrap();
        let sets: Vec<&str> = unit
            .lines()
            .filter_map(|l| l.strip_prefix("CapabilityBoundingSet="))
            .collect();
        assert_eq!(sets.len(), 1, "{u}: one CapabilityBoundingSet= line");
        let mut have: Vec<&str> = sets[0].split_whitespace().collect();
        let mut want = want.to_vec();
        have.sort_unstable();
        want.sort_unstable();
        assert_eq!(have, want, "{u}: CapabilityBoundingSet=");
        for cap in &have {
            let commented = unit.lines().any(|l| {
                l.strip_prefix('#')
                    .map(str::trim_start)
                    .and_then(|r| r.strip_prefix(cap))
                    .is_some_and(|r| r.starts_with(' ') && r.trim().len() > 3)
            });
            assert!(commented, "{u}: {cap} has no `#   {cap}  reason` comment");
            assert!(
                ops.lines()
                    .any(|l| l.starts_with('|') && l.contains(&format!("`{cap}`"))),
                "docs/operations.md's capability table has no row for {cap}"
            );
        }
    }
}

/// The hardening does not silently regress: `systemd-analyze security`'s
/// overall exposure stays at or below what the README states.
#[test]
fn units_exposure_stays_low() {
    need("systemd-analyze");
    let dir = units_copy();
    for (u, max) in [
        ("cgwarden.service", 5.5),
        ("cgwarden-delegated.service", 5.5),
        ("cgwarden-apply.service", 4.5),
    ] {
        let out = ok(Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(dir.path().join(u))
            .current_dir(dir.path()));
        let line = out
            .lines()
            .find(|l| l.contains("Overall exposure level"))
            .unwrap_or_else(|| panic!("no exposure line:\n{out}"));
        let score: f64 = line
            .split(':')
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no score in {line:?}"));
        eprintln!("{u}: exposure {score}");
        assert!(score <= max, "{u}: exposure {score} > {max}");
    }
}

// ---- Yocto ------------------------------------------------------------------

/// `name version checksum` of every crates.io package in Cargo.lock, read
/// line by line (no TOML crate among the dependencies).
fn lock_crates() -> Vec<(String, String, String)> {
    let lock = std::fs::read_to_string(repo_dir().join("Cargo.lock")).unwrap();
    let mut out = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(&format!("{k} = \""))
                    .and_then(|r| r.strip_suffix('"'))
                    .map(str::to_owned)
            })
        };
        let (name, version) = (field("name").unwrap(), field("version").unwrap());
        match field("source") {
            None => continue, // cgwarden itself
            Some(s) => assert_eq!(
                s, "registry+https://github.com/rust-lang/crates.io-index",
                "{name} {version}: only crates.io crates can be fetched by crate://"
            ),
        }
        let sum = field("checksum").unwrap_or_else(|| panic!("{name} {version}: no checksum"));
        out.push((name, version, sum));
    }
    assert!(
        out.len() > 50,
        "parsed only {} crates from Cargo.lock",
        out.len()
    );
    out
}

/// The checked-in crate list is what the generator makes from Cargo.lock
/// now; and, checked independently of the generator, every crates.io
/// package of Cargo.lock is in SRC_URI with Cargo.lock's sha256, and
/// nothing else is.
#[test]
fn yocto_crate_list_is_fresh_and_complete() {
    need("python3");
    let dir = repo_dir().join("packaging/yocto");
    let out = run(Command::new("python3")
        .arg(dir.join("gen-crates.py"))
        .arg("--check"));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let inc = std::fs::read_to_string(dir.join("cgwarden-crates.inc")).unwrap();
    let uris: Vec<&str> = inc
        .lines()
        .filter_map(|l| l.trim().strip_prefix("crate://crates.io/"))
        .map(|l| l.trim_end_matches(" \\").trim())
        .collect();
    let sums: std::collections::BTreeMap<String, String> = inc
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("SRC_URI[")?;
            let (key, val) = rest.split_once(".sha256sum] = \"")?;
            Some((key.to_owned(), val.strip_suffix('"')?.to_owned()))
        })
        .collect();
    let lock = lock_crates();
    assert_eq!(
        uris.len(),
        lock.len(),
        "SRC_URI entries vs Cargo.lock crates"
    );
    assert_eq!(sums.len(), lock.len(), "checksums vs Cargo.lock crates");
    for (name, version, sum) in &lock {
        assert!(
            uris.contains(&format!("{name}/{version}").as_str()),
            "crate://crates.io/{name}/{version} missing from cgwarden-crates.inc"
        );
        assert_eq!(
            sums.get(&format!("{name}-{version}")),
            Some(sum),
            "{name}-{version}.sha256sum"
        );
        assert_eq!(sum.len(), 64);
    }
}

/// What can be checked of the recipe without bitbake (which this CI does
/// not have): its variables, that it requires the crate list, the license
/// checksum against the file, and that every ${S}/ path it installs exists.
#[test]
fn yocto_recipe_and_layer_are_consistent() {
    need("md5sum");
    let dir = repo_dir().join("packaging/yocto");
    let bb =
        std::fs::read_to_string(dir.join(format!("cgwarden_{}.bb", env!("CARGO_PKG_VERSION"))))
            .expect("the recipe is named after the crate version");
    let var = |k: &str| {
        bb.lines()
            .find_map(|l| {
                let (name, val) = l.split_once('=')?;
                let name = name.trim_end_matches(['?', '+', ' ', ':']).trim();
                (name == k).then(|| val.trim().trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| panic!("{k} not set in the recipe"))
    };
    assert_eq!(var("LICENSE"), "Apache-2.0");
    let lic = var("LIC_FILES_CHKSUM");
    let md5 = lic
        .strip_prefix("file://LICENSE;md5=")
        .unwrap_or_else(|| panic!("LIC_FILES_CHKSUM {lic}"));
    let real = ok(Command::new("md5sum").arg(repo_dir().join("LICENSE")));
    assert_eq!(real.split_whitespace().next(), Some(md5), "LICENSE md5");
    assert!(bb
        .lines()
        .any(|l| l.trim() == "require cgwarden-crates.inc"));
    let inherit = bb
        .lines()
        .find(|l| l.starts_with("inherit "))
        .expect("inherit line");
    for class in ["cargo", "systemd"] {
        assert!(inherit.split_whitespace().any(|c| c == class), "{inherit}");
    }
    let services = var("SYSTEMD_SERVICE:${PN}");
    for s in services.split_whitespace() {
        assert!(repo_dir().join("systemd").join(s).is_file(), "{s}");
    }
    let mut installed = 0;
    for l in bb
        .lines()
        .filter(|l| l.trim_start().starts_with("install -m"))
    {
        for word in l.split_whitespace().filter(|w| w.starts_with("${S}/")) {
            let rel = &word["${S}/".len()..];
            if rel.contains('*') {
                let parent = repo_dir().join(rel).parent().unwrap().to_owned();
                assert!(parent.is_dir(), "{word}");
            } else {
                assert!(
                    repo_dir().join(rel).is_file(),
                    "recipe installs missing {word}"
                );
            }
            installed += 1;
        }
    }
    assert!(installed >= 5, "the recipe installs units and the policy");
    // The daemon the units run is built and put where they look for it.
    assert!(var("CARGO_BUILD_FLAGS")
        .split_whitespace()
        .any(|w| w == "cgwardend"));
    assert!(bb.contains("${D}${libexecdir}/cgwarden/cgwardend"), "{bb}");
    let unit = std::fs::read_to_string(repo_dir().join("systemd/cgwarden.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/libexec/cgwarden/cgwardend "),
        "{unit}"
    );
    let layer = std::fs::read_to_string(dir.join("conf/layer.conf")).unwrap();
    assert!(layer.contains("BBFILE_COLLECTIONS += \"cgwarden\""));
    let append = std::fs::read_to_string(dir.join("linux-yocto_%.bbappend")).unwrap();
    assert!(append.contains("file://cgwarden.cfg"));
}

/// The kernel fragment: every line is a comment, blank, `CONFIG_X=y|m` or
/// `# CONFIG_X is not set`, and every option says (in the comment right
/// above it) which feature needs it; the options the brief names are there.
#[test]
fn kernel_fragment_is_well_formed_and_explained() {
    let cfg = std::fs::read_to_string(repo_dir().join("packaging/yocto/cgwarden.cfg")).unwrap();
    let lines: Vec<&str> = cfg.lines().collect();
    let mut set = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let opt = if let Some(rest) = l.strip_prefix("CONFIG_") {
            let (name, val) = rest.split_once('=').expect("CONFIG_X=value");
            assert!(matches!(val, "y" | "m"), "line {}: {l}", i + 1);
            Some(name)
        } else if let Some(rest) = l.strip_prefix("# CONFIG_") {
            rest.strip_suffix(" is not set")
        } else {
            assert!(l.is_empty() || l.starts_with('#'), "line {}: {l}", i + 1);
            None
        };
        if let Some(name) = opt {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
            let above = i.checked_sub(1).map(|j| lines[j]).unwrap_or("");
            assert!(
                above.starts_with("# ") && !above.starts_with("# CONFIG_"),
                "CONFIG_{name} has no explaining comment above it"
            );
            set.push(name.to_owned());
        }
    }
    for want in [
        "PSI",
        "PROC_EVENTS",
        "CONNECTOR",
        "CGROUPS",
        "MEMCG",
        "CPUSETS",
        "BLK_CGROUP",
        "CGROUP_PIDS",
        "CGROUP_SCHED",
        "UCLAMP_TASK_GROUP",
        "ZRAM",
        "CGROUP_FAVOR_DYNMODS",
        "CPU_FREQ",
        "RT_GROUP_SCHED",
    ] {
        assert!(set.iter().any(|s| s == want), "CONFIG_{want} missing");
    }
}

// ---- Licenses -----------------------------------------------------------------

/// Licenses every dependency may be used under (deny.toml's allowlist; keep
/// the two equal). `cargo deny check` is the fuller manual check.
const ALLOWED_LICENSES: [&str; 9] = [
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "MIT",
    "BSD-3-Clause",
    "ISC",
    "BSL-1.0",
    "Unicode-3.0",
    "Unlicense",
    "Zlib",
];

/// Whether an SPDX expression (`A OR B`, `A AND (B OR C)`, `A WITH E`, and
/// the old `A/B` form) can be satisfied with the allowed licenses alone.
fn spdx_allowed(expr: &str) -> bool {
    let spaced = expr
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    let toks: Vec<&str> = spaced.split_whitespace().collect();
    fn or_expr(t: &[&str], i: &mut usize) -> bool {
        let mut v = and_expr(t, i);
        while t.get(*i) == Some(&"OR") {
            *i += 1;
            v |= and_expr(t, i);
        }
        v
    }
    fn and_expr(t: &[&str], i: &mut usize) -> bool {
        let mut v = atom(t, i);
        while t.get(*i) == Some(&"AND") {
            *i += 1;
            v &= atom(t, i);
        }
        v
    }
    fn atom(t: &[&str], i: &mut usize) -> bool {
        if t.get(*i) == Some(&"(") {
            *i += 1;
            let v = or_expr(t, i);
            assert_eq!(t.get(*i), Some(&")"), "unbalanced SPDX expression");
            *i += 1;
            return v;
        }
        let mut id = t.get(*i).expect("SPDX expression ends early").to_string();
        *i += 1;
        if t.get(*i) == Some(&"WITH") {
            id = format!("{id} WITH {}", t[*i + 1]);
            *i += 2;
        }
        ALLOWED_LICENSES.contains(&id.as_str())
    }
    let mut i = 0;
    let v = or_expr(&toks, &mut i);
    assert_eq!(i, toks.len(), "trailing tokens in {expr:?}");
    v
}

#[test]
fn spdx_evaluator() {
    assert!(spdx_allowed("MIT OR Apache-2.0"));
    assert!(spdx_allowed("MIT/Apache-2.0"));
    assert!(spdx_allowed("(MIT OR Apache-2.0) AND Unicode-3.0"));
    assert!(spdx_allowed("MIT OR Apache-2.0 OR LGPL-2.1-or-later"));
    assert!(!spdx_allowed("GPL-3.0-only"));
    assert!(!spdx_allowed("MIT AND GPL-2.0-only"));
    assert!(!spdx_allowed("(GPL-2.0-only OR LGPL-2.1-only) AND MIT"));
    assert!(spdx_allowed("Apache-2.0 WITH LLVM-exception"));
    assert!(!spdx_allowed("GPL-2.0-only WITH Classpath-exception-2.0"));
}

/// Every package in the dependency graph (all targets, all platforms) has
/// an SPDX license expression satisfiable from the allowlist. This is the
/// CI form of `cargo deny check licenses` (cargo-deny takes ~18 min to
/// build here; see deny.toml).
#[test]
fn dependency_licenses_are_allowed() {
    let out = ok(Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .arg("--manifest-path")
        .arg(repo_dir().join("Cargo.toml")));
    let meta: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pkgs = meta["packages"].as_array().unwrap();
    assert!(pkgs.len() > 50);
    let mut bad = Vec::new();
    for p in pkgs {
        let name = format!(
            "{} {}",
            p["name"].as_str().unwrap(),
            p["version"].as_str().unwrap()
        );
        match p["license"].as_str() {
            Some(l) if spdx_allowed(l) => {}
            Some(l) => bad.push(format!("{name}: {l}")),
            None => bad.push(format!("{name}: no SPDX license (license-file only)")),
        }
    }
    assert!(
        bad.is_empty(),
        "licenses not on the allowlist:\n{}",
        bad.join("\n")
    );
}

/// System calls the daemon makes beyond plain I/O, each for a feature
/// (src/kernel, src/daemon): the units' SystemCallFilter= must allow them.
/// A unit cannot be started under systemd here, so this expands the
/// filter's groups with `systemd-analyze syscall-filter` instead.
const DAEMON_SYSCALLS: [&str; 30] = [
    "sched_setattr",     // settings.daemon.sched, placement sched
    "sched_getattr",     // reading a process's policy back
    "sched_setaffinity", // settings.daemon.cpus
    "setpriority",       // placement nice
    "mlockall",          // settings.daemon.mlock
    "swapon",            // zram swap
    "swapoff",           // reset of a zram swap device
    "finit_module",      // modprobe zram (the child inherits the filter)
    "init_module",       // older modprobe
    "setgroups",         // hooks' user:
    "setgid",            // hooks' user:
    "setuid",            // hooks' user:
    "setsid",            // hooks run in their own session
    "kill",              // killpg of a hook's process group
    "pidfd_open",        // pinning processes, boosts tied to a pid
    "pidfd_send_signal", // (std's Child::kill on new kernels)
    "socket",            // netlink proc connector, control socket, metrics
    "bind",              // ditto
    "listen",            // control/metrics sockets
    "accept4",           // ditto
    "sendmsg",           // sd_notify, netlink
    "recvmsg",           // netlink, SO_PEERCRED
    "fchown",            // socket_group
    "fchownat",          // socket_group (chown by path)
    "inotify_init1",     // policy file watch (reload)
    "inotify_add_watch", // ditto
    "execve",            // hooks, modprobe
    "clone3",            // threads, hook children
    "fdatasync",         // the originals journal
    "ioctl",             // terminal, block device size for mkswap
];

#[test]
fn units_syscall_filters_allow_what_the_daemon_calls() {
    need("systemd-analyze");
    let listing = ok(Command::new("systemd-analyze").arg("syscall-filter"));
    let mut groups: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut cur: Option<String> = None;
    for l in listing.lines() {
        if l.starts_with('@') {
            let g = l.split_whitespace().next().unwrap().to_owned();
            groups.insert(g.clone(), Vec::new());
            cur = Some(g);
        } else if let Some(g) = &cur {
            let t = l.trim();
            if !t.is_empty() && !t.starts_with('#') {
                groups.get_mut(g).unwrap().push(t.to_owned());
            }
        }
    }
    fn expand(
        groups: &std::collections::HashMap<String, Vec<String>>,
        item: &str,
        out: &mut std::collections::BTreeSet<String>,
    ) {
        if item.starts_with('@') {
            for m in groups
                .get(item)
                .unwrap_or_else(|| panic!("no group {item}"))
            {
                expand(groups, m, out);
            }
        } else {
            out.insert(item.to_owned());
        }
    }
    // The soak unit runs load generators (its own, stress-ng, fio) whose
    // system calls no allow-list can name: it has none, by design.
    for u in UNITS.iter().filter(|u| **u != "cgwarden-soak.service") {
        let unit = std::fs::read_to_string(repo_dir().join("systemd").join(u)).unwrap();
        let (mut allow, mut deny) = (Default::default(), Default::default());
        for l in unit.lines() {
            if let Some(v) = l.strip_prefix("SystemCallFilter=") {
                match v.strip_prefix('~') {
                    Some(d) => d
                        .split_whitespace()
                        .for_each(|i| expand(&groups, i, &mut deny)),
                    None => v
                        .split_whitespace()
                        .for_each(|i| expand(&groups, i, &mut allow)),
                }
            }
        }
        assert!(!allow.is_empty(), "{u}: no allow-list");
        let needed: &[&str] = if *u == "cgwarden-apply.service" {
            // apply: no hooks, sockets other than journald's, watches.
            &[
                "sched_setattr",
                "swapon",
                "finit_module",
                "pidfd_open",
                "execve",
                "fdatasync",
            ]
        } else {
            &DAEMON_SYSCALLS
        };
        for s in needed {
            assert!(
                allow.contains(*s) && !deny.contains(*s),
                "{u}: SystemCallFilter= refuses {s}"
            );
        }
    }
}
