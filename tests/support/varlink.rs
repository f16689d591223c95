//! One raw varlink client: NUL-framed JSON on the daemon's control socket,
//! with nothing of the daemon's own client code in between.

use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The control socket under a fake root (state_dir `/run/cgwarden`).
pub fn socket(root: &Path) -> PathBuf {
    root.join("run/cgwarden/io.cgwarden")
}

/// One connection; replies are read whole, several may be buffered.
pub struct Conn {
    /// The socket, for raw writes beside the calls.
    pub s: UnixStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects with 15 s read and write limits (a test never hangs).
    pub fn connect(sock: &Path) -> std::io::Result<Conn> {
        let s = UnixStream::connect(sock)?;
        s.set_read_timeout(Some(Duration::from_secs(15)))?;
        s.set_write_timeout(Some(Duration::from_secs(15)))?;
        Ok(Conn { s, buf: Vec::new() })
    }

    /// A connection already open (its timeouts as they are set).
    pub fn on(s: UnixStream) -> Conn {
        Conn { s, buf: Vec::new() }
    }

    /// One call and its reply; an error when the daemon closed first.
    pub fn try_call(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        let mut msg = serde_json::to_vec(&json!({"method": method, "parameters": params}))
            .expect("a JSON value serialises");
        msg.push(0);
        self.s.write_all(&msg)?;
        self.next()
    }

    /// One call and its reply; panics naming the method when there is none.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|e| panic!("{method}: no reply: {e}"))
    }

    /// The next reply (of a call with `more`, or one already buffered).
    pub fn next(&mut self) -> std::io::Result<Value> {
        let mut b = [0u8; 8192];
        loop {
            if let Some(p) = self.buf.iter().position(|c| *c == 0) {
                let m: Vec<u8> = self.buf.drain(..=p).collect();
                return serde_json::from_slice(&m[..p])
                    .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e));
            }
            let n = self.s.read(&mut b)?;
            if n == 0 {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "closed before a reply",
                ));
            }
            self.buf.extend_from_slice(&b[..n]);
        }
    }
}

/// One call on a fresh connection to `sock`; panics when there is no reply.
pub fn call(sock: &Path, method: &str, params: Value) -> Value {
    Conn::connect(sock)
        .unwrap_or_else(|e| panic!("connect {}: {e}", sock.display()))
        .call(method, params)
}
