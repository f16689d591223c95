//! The node_exporter textfile's write: the one observability write that
//! waits for the disk (it is synced), so it is never made on the thread that
//! serves the metrics and the control socket. It goes to the recorder's
//! thread when the recorder runs (that thread already waits for the disk),
//! else to `cgw-textfile` ([`thread`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the thread that writes to the disk is asked (the recorder's, or
/// [`thread`]'s).
pub(crate) enum Job {
    /// The recorder: record the last interval and `stop`, and end.
    Stop,
    /// Write the metrics textfile.
    Textfile(Textfile),
}

/// One textfile write, for the thread that may wait for the disk.
pub(crate) struct Textfile {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    /// Set while the write is queued or running.
    pub(crate) busy: Arc<AtomicBool>,
}

impl Textfile {
    /// Writes it (logging a failure).
    pub(crate) fn write(self) {
        if let Err(e) = write_textfile(&self.path, &self.text) {
            tracing::warn!(path = %self.path.display(), "metrics textfile: {e}");
        }
        self.busy.store(false, Ordering::Release);
    }
}

/// `cgw-textfile`: writes the textfile when no recorder thread does.
pub(crate) fn thread() -> std::io::Result<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("cgw-textfile".into())
        .stack_size(crate::kernel::residency::STACK)
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                match job {
                    Job::Textfile(t) => t.write(),
                    Job::Stop => return,
                }
            }
        })?;
    Ok(tx)
}

/// Replaces `path` atomically: a temporary file in the same directory,
/// written, synced, renamed over it (node_exporter never reads half a file).
pub(crate) fn write_textfile(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cgwarden.prom".into());
    // A dot-name: node_exporter reads only `*.prom`.
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_data()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textfile_is_replaced_whole_and_leaves_no_temp() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("cgwarden.prom");
        write_textfile(&p, "a 1\n").unwrap();
        write_textfile(&p, "b 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "b 2\n");
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        // A directory that does not exist is an error, not a panic.
        assert!(write_textfile(&t.path().join("no/such.prom"), "x").is_err());
    }

    #[test]
    fn the_writer_thread_writes_and_frees_the_next_write() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("cgwarden.prom");
        let tx = thread().unwrap();
        let busy = Arc::new(AtomicBool::new(true));
        tx.send(Job::Textfile(Textfile {
            path: p.clone(),
            text: "a 1\n".into(),
            busy: busy.clone(),
        }))
        .unwrap();
        let t0 = std::time::Instant::now();
        while busy.load(Ordering::Acquire) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 1\n");
        tx.send(Job::Stop).unwrap();
    }
}
