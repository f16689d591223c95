//! What the fuzz targets (`fuzz/fuzz_targets/`) call: one function per
//! target, so the targets need no access to the crate's private modules.
//! `tests/fuzz_targets.rs` runs each on its seeds and CI checks that the
//! fuzz crate builds. Not an API: hidden from the docs.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// `cgwarden check` on arbitrary bytes: loading a policy never panics,
/// whatever the file holds (not UTF-8, broken YAML, absurd values), and
/// rendering what it found (the summary or every diagnostic) neither.
pub fn check(data: &[u8]) {
    match crate::policy::load_bytes("fuzz.yaml", data) {
        Ok(policy) => {
            let _ = crate::policy::summary(&policy);
        }
        Err(diags) => {
            assert!(!diags.is_empty(), "load_bytes failed without a diagnostic");
            let _ = diags.to_string();
        }
    }
}

/// The rule language on arbitrary bytes: parsing a `when:` condition or a
/// `then:`/`while:` item never panics, and every position it reports lies
/// inside the text (it becomes a column).
pub fn expr(data: &[u8]) {
    use crate::policy::expr::{parse_action, parse_expr, referenced_groups};
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let chars = src.chars().count();
    match parse_expr(src) {
        Ok(expr) => {
            for (group, span) in referenced_groups(&expr) {
                assert!(
                    span.start <= span.end && span.end <= chars,
                    "group `{group}` span {span:?} outside {chars} characters of {src:?}"
                );
            }
        }
        Err(e) => assert!(
            e.pos <= chars,
            "error at {} outside {chars} characters of {src:?}: {}",
            e.pos,
            e.message
        ),
    }
    if let Err(e) = parse_action(src) {
        assert!(
            e.pos <= chars,
            "error at {} outside {chars} characters of {src:?}: {}",
            e.pos,
            e.message
        );
    }
}

/// The originals journal reader on arbitrary bytes: never panics, and what
/// it accepts names only canonical paths under the kernel interfaces
/// cgwarden manages (`reset` acts on it as root).
pub fn journal(data: &[u8]) {
    use crate::converge::journal::{managed, Journal};
    let policy_root = Path::new(crate::kernel::cgroupfs::CGROUP2_MOUNT);
    if let Ok(p) = Journal::parse_text(data, policy_root) {
        let cg = p.cgroup_root.as_deref().unwrap_or(policy_root);
        for e in &p.entries {
            assert!(managed(e, cg).is_none(), "accepted {e:?} under {cg:?}");
        }
        assert!(p.valid_len <= data.len());
    }
}

/// The control socket's service (`io.cgwarden.Daemon` over varlink) on an
/// arbitrary request: `data` is sent as one connection's bytes (a NUL is
/// added, which ends a varlink message), the reply is read until the
/// service answers or closes. Then a well-formed `GetInfo` on a new
/// connection must still be answered: the service survived the input.
/// The service runs once per process (on a runtime thread, as in the daemon),
/// its calls answered by a stand-in loop with "unavailable".
pub fn varlink_request(data: &[u8]) {
    let path = service();
    let mut s = connect(path);
    // The service may close early (an oversized or malformed message): a
    // failed write or read is an answer too.
    let _ = s.write_all(data).and_then(|()| s.write_all(b"\0"));
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut reply = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut reply);
    let mut s = connect(path);
    s.write_all(b"{\"method\":\"org.varlink.service.GetInfo\"}\0")
        .expect("the service stopped accepting requests");
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).expect("no answer to GetInfo");
    assert!(
        n > 0 && buf[..n].starts_with(b"{"),
        "GetInfo after {data:?}: {:?}",
        String::from_utf8_lossy(&buf[..n])
    );
}

fn connect(path: &Path) -> std::os::unix::net::UnixStream {
    let s = std::os::unix::net::UnixStream::connect(path).expect("connect to the service");
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    s
}

/// Starts the service and its stand-in loop once; the socket's path.
fn service() -> &'static Path {
    static PATH: OnceLock<std::path::PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        use crate::control::{server, wire, Response};
        let dir = std::env::temp_dir().join(format!("cgwarden-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("fuzz socket directory");
        let path = dir.join("io.cgwarden");
        let gid = nix::unistd::getegid().as_raw();
        let listener = server::bind(&path, gid).expect("bind the fuzz socket");
        let (calls, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::control::Call>();
        let (events, _) = tokio::sync::broadcast::channel::<wire::Event>(16);
        let limits = server::Limits {
            idle: Duration::from_secs(2),
            partial: Duration::from_secs(1),
            ..server::Limits::default()
        };
        let services =
            crate::kernel::runtime::start("fuzz-control").expect("start the service thread");
        server::start(&services, listener, calls, events.clone(), limits)
            .expect("start the service");
        std::thread::spawn(move || {
            let _events = events;
            while let Some(call) = rx.blocking_recv() {
                if let Some(reply) = call.reply {
                    let _ = reply.send(Response::Error(wire::DaemonError::Unavailable {
                        message: "fuzzing: no daemon".into(),
                    }));
                }
            }
        });
        path
    })
}
