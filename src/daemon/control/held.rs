//! Answers that stand for writes: `Boost`, `Extend` and `Release` are
//! answered once the writes they caused have landed, so a reply means the
//! knob holds its new value (`boost … -- CMD` starts CMD only then, and
//! `release` returns once the knob is back).
//!
//! The loop never waits: the reply's sender is kept here with the writes
//! it waits for — each knob's outstanding write to its file, by sequence
//! number ([`Landing::Pending`]) — and sent from [`ControlState::write_landed`]
//! when the last of them comes back, or when the late-write deadline
//! (from the call) passes first. A write that failed, or was still going
//! at the deadline, is named in the reply's `not_held`; a knob that needed
//! no write (its value was in effect already) waits for nothing.

use super::super::actuator::{Actuator, Landing};
use super::super::lanes::Done;
use super::ControlState;
use crate::control::{wire, Response};
use crate::knobs::Knob;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// One knob's write a reply waits for.
#[derive(Debug)]
struct Wait {
    knob: String,
    path: PathBuf,
    /// The write's sequence number: its completion, or a later one for the
    /// same file (a newer value replaced it on the lane), ends the wait.
    seq: u64,
}

/// A reply waiting for its writes.
#[derive(Debug)]
struct Held {
    tx: oneshot::Sender<Response>,
    answer: Response,
    waits: Vec<Wait>,
    not_held: Vec<wire::NotHeld>,
    /// The late-write deadline, from the call.
    due: Instant,
    deadline: Duration,
}

/// The replies held until their writes land.
#[derive(Debug, Default)]
pub(crate) struct HeldReplies {
    held: Vec<Held>,
}

impl HeldReplies {
    /// When the next held reply is due, if any.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.due).min()
    }

    /// Takes a completion: ends the waits it satisfies (a failure is noted
    /// in their replies); sends the replies left with nothing to wait for.
    fn landed(&mut self, done: &Done) {
        for h in &mut self.held {
            h.waits.retain(|w| {
                if w.path != done.job.path || done.seq < w.seq {
                    return true;
                }
                if let Err(msg) = &done.result {
                    h.not_held.push(wire::NotHeld {
                        knob: w.knob.clone(),
                        why: msg.clone(),
                        late: false,
                    });
                }
                false
            });
        }
        self.send_ready(|h| h.waits.is_empty());
    }

    /// Sends the replies due at `now`, naming what they still waited for.
    fn overdue(&mut self, now: Instant) {
        for h in self.held.iter_mut().filter(|h| h.due <= now) {
            for w in h.waits.drain(..) {
                h.not_held.push(wire::NotHeld {
                    why: format!(
                        "its write to {} had not finished after {:?}: the kernel is still in it, \
                         or it waits behind another write of its lane; the value holds once it lands",
                        w.path.display(),
                        h.deadline
                    ),
                    knob: w.knob,
                    late: true,
                });
            }
        }
        self.send_ready(|h| h.waits.is_empty());
    }

    fn send_ready(&mut self, ready: impl Fn(&Held) -> bool) {
        let mut i = 0;
        while i < self.held.len() {
            if ready(&self.held[i]) {
                let h = self.held.swap_remove(i);
                send(h.tx, h.answer, h.not_held);
            } else {
                i += 1;
            }
        }
    }
}

/// Sends `answer` with `not_held` in it (a reply of another kind has no
/// such field: it goes as it is).
fn send(tx: oneshot::Sender<Response>, mut answer: Response, not_held: Vec<wire::NotHeld>) {
    if !not_held.is_empty() {
        let list = Some(not_held);
        match &mut answer {
            Response::Boost(b) => b.not_held = list,
            Response::Extend(x) => x.not_held = list,
            Response::Released(r) => r.not_held = list,
            _ => {}
        }
    }
    // The client may be gone (its connection closed): nothing to tell.
    let _ = tx.send(answer);
}

impl ControlState {
    /// Sends `answer` once the last writes of `knobs` have landed (see the
    /// module docs); at once when none is outstanding.
    pub(super) fn answer_when_landed(
        &mut self,
        actuator: &Actuator,
        tx: oneshot::Sender<Response>,
        answer: Response,
        knobs: &[Knob],
    ) {
        let mut waits = Vec::new();
        let mut not_held = Vec::new();
        for k in knobs {
            let knob = k.to_string();
            match actuator.landing(k) {
                Landing::Settled => {}
                Landing::Pending { path, seq } => {
                    // A knob asked twice (a raise and a cap) waits once.
                    if !waits.iter().any(|w: &Wait| w.path == path) {
                        waits.push(Wait { knob, path, seq });
                    }
                }
                Landing::Refused(why) => {
                    if !not_held.iter().any(|n: &wire::NotHeld| n.knob == knob) {
                        not_held.push(wire::NotHeld {
                            knob,
                            why,
                            late: false,
                        });
                    }
                }
            }
        }
        if waits.is_empty() {
            send(tx, answer, not_held);
            return;
        }
        let deadline = actuator.deadline();
        self.held.held.push(Held {
            tx,
            answer,
            waits,
            not_held,
            due: Instant::now() + deadline,
            deadline,
        });
    }

    /// A write came back: the replies it completes go out.
    pub(super) fn reply_landed(&mut self, done: &Done) {
        if !self.held.held.is_empty() {
            self.held.landed(done);
        }
    }

    /// The late-write deadline of some held replies passed: they go out,
    /// naming the writes still going.
    pub(crate) fn answer_overdue(&mut self, now: Instant) {
        self.held.overdue(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{Call, Caller, Request};
    use crate::converge::journal::Journal;
    use crate::daemon::actuator::Actuator;
    use crate::daemon::lanes::WriteFn;
    use crate::daemon::Daemon;
    use crate::daemon::Options;
    use crate::kernel::Root;
    use std::path::Path;
    use std::sync::{Arc, Condvar, Mutex};
    use tokio::sync::mpsc;

    const HIGH: &str = "/sys/fs/cgroup/app/memory.high";

    /// The fake kernel's side: writes to `app` wait while the gate is
    /// closed; a write of `refuse` (if any) is refused.
    #[derive(Default)]
    struct Kernel {
        closed: Mutex<bool>,
        cv: Condvar,
        refuse: Mutex<Option<String>>,
    }

    impl Kernel {
        fn close(&self) {
            *self.closed.lock().unwrap() = true;
        }
        fn open(&self) {
            *self.closed.lock().unwrap() = false;
            self.cv.notify_all();
        }
    }

    /// A daemon on a fake root with group `app` (memory.high 256M in the
    /// policy, `max` in the file), whose lanes write through `kernel`
    /// with a late-write deadline of `deadline`; and its completions.
    fn daemon(
        dir: &Path,
        kernel: Arc<Kernel>,
        deadline: Duration,
    ) -> (Daemon, mpsc::UnboundedReceiver<Done>) {
        let root = Root::fake(dir);
        let app = Path::new("/sys/fs/cgroup/app");
        root.mkdir_all(app).unwrap();
        for (f, v) in [
            ("memory.high", "max"),
            ("memory.max", "max"),
            ("cgroup.events", "populated 0\nfrozen 0"),
        ] {
            root.write(&app.join(f), v).unwrap();
        }
        let text = "version: 1\ngroups:\n  app:\n    memory: { high: 256M }\n";
        let policy =
            crate::policy::load_bytes("t.yaml", text.as_bytes()).unwrap_or_else(|d| panic!("{d}"));
        let journal = || {
            Journal::open(
                &root,
                Path::new("/run/cgwarden"),
                Path::new("/sys/fs/cgroup"),
            )
            .unwrap()
        };
        let opts = Options {
            policy_path: PathBuf::from("t.yaml"),
            root: root.clone(),
            dry_run: false,
            tick: None,
        };
        let (tx, _rx) = mpsc::channel(16);
        let mut d = Daemon::new(opts, policy, Some(journal()), tx);
        let r = root.clone();
        let write: WriteFn = Arc::new(move |p: &Path, v: &str| {
            if p.starts_with(app) {
                let mut closed = kernel.closed.lock().unwrap();
                while *closed {
                    closed = kernel.cv.wait(closed).unwrap();
                }
            }
            if kernel.refuse.lock().unwrap().as_deref() == Some(v) {
                return Err(crate::kernel::Error::other(p, "Device or resource busy"));
            }
            r.write(p, v)
        });
        let j = journal();
        d.actuator = Actuator::with_writer(root.clone(), &d.loaded.policy, Some(j), write)
            .with_deadline(deadline);
        let done = d.actuator.take_completions().unwrap();
        (d, done)
    }

    fn root_caller() -> Caller {
        Caller {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
            pid: 1,
            conn: 1,
        }
    }

    /// Sends `request` as the control thread does; the receiver of its answer.
    fn call(d: &mut Daemon, request: Request) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        d.on_call(Call {
            request,
            reply: Some(tx),
        });
        rx
    }

    fn boost(d: &mut Daemon, value: &str) -> oneshot::Receiver<Response> {
        call(
            d,
            Request::Boost {
                caller: root_caller(),
                knobs: [("app.memory.high".to_string(), value.to_string())].into(),
                duration: Some("1m".into()),
                reason: None,
                pid: None,
                tied_to_connection: false,
            },
        )
    }

    fn release(d: &mut Daemon, handle: i64) -> oneshot::Receiver<Response> {
        call(
            d,
            Request::Release {
                caller: root_caller(),
                handle,
            },
        )
    }

    /// Hands the next completion to the daemon, as the loop does.
    async fn land(d: &mut Daemon, rx: &mut mpsc::UnboundedReceiver<Done>) {
        let done = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("no completion within 5 s")
            .expect("the lanes are gone");
        d.write_done(done);
    }

    fn high(d: &Daemon) -> String {
        d.opts.root.read_trimmed(Path::new(HIGH)).unwrap()
    }

    fn boosted(r: Response) -> wire::BoostReply {
        match r {
            Response::Boost(b) => b,
            other => panic!("not a boost reply: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_boost_is_answered_once_its_write_has_landed() {
        let t = tempfile::tempdir().unwrap();
        let kernel = Arc::new(Kernel::default());
        let (mut d, mut done) = daemon(t.path(), kernel.clone(), Duration::from_secs(60));
        let mut events = d.control.events.subscribe();
        let writes = |ev: &mut tokio::sync::broadcast::Receiver<wire::Event>| {
            std::iter::from_fn(|| ev.try_recv().ok())
                .filter(|e| e.is(wire::EventKind::Write))
                .collect::<Vec<_>>()
        };
        kernel.close();
        let mut reply = boost(&mut d, "384M");
        // Granted and queued, not written: no answer yet, and no `write`
        // event either (it says the knob holds).
        assert!(reply.try_recv().is_err(), "answered before the write");
        assert_eq!(high(&d), "max");
        assert!(
            writes(&mut events).is_empty(),
            "a write event before the write"
        );
        kernel.open();
        land(&mut d, &mut done).await;
        let w = writes(&mut events);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            (w[0].knob.as_deref(), w[0].new.as_deref()),
            (Some("app.memory.high"), Some("402653184"))
        );
        let b = boosted(reply.try_recv().expect("answered once the write landed"));
        assert_eq!(high(&d), "402653184");
        assert_eq!(b.not_held, None);
        assert_eq!(b.applied.len(), 1);

        // The same value again needs no write: answered at once.
        let mut again = boost(&mut d, "384M");
        let b2 = boosted(again.try_recv().expect("nothing to wait for"));
        assert_eq!(b2.not_held, None);

        // A release is answered once the knob is back.
        kernel.close();
        let mut gone = release(&mut d, b2.handle);
        assert!(gone.try_recv().is_ok(), "the other boost still holds 384M");
        let mut gone = release(&mut d, b.handle);
        assert!(gone.try_recv().is_err(), "answered before the write back");
        kernel.open();
        land(&mut d, &mut done).await;
        match gone.try_recv().expect("answered once the knob was back") {
            Response::Released(r) => assert_eq!(r.not_held, None),
            other => panic!("{other:?}"),
        }
        assert_eq!(high(&d), "268435456");
    }

    /// A boost asked while an earlier write of the same value is still on
    /// its lane waits for that write: the value is in effect, not yet held.
    #[tokio::test]
    async fn a_boost_needing_no_write_waits_for_the_one_still_on_the_lane() {
        let t = tempfile::tempdir().unwrap();
        let kernel = Arc::new(Kernel::default());
        let (mut d, mut done) = daemon(t.path(), kernel.clone(), Duration::from_secs(60));
        kernel.close();
        let mut first = boost(&mut d, "384M");
        let mut second = boost(&mut d, "384M");
        assert!(first.try_recv().is_err());
        assert!(
            second.try_recv().is_err(),
            "answered before the file held it"
        );
        kernel.open();
        land(&mut d, &mut done).await;
        assert_eq!(boosted(first.try_recv().unwrap()).not_held, None);
        assert_eq!(boosted(second.try_recv().unwrap()).not_held, None);
    }

    #[tokio::test]
    async fn a_failed_write_is_in_the_reply() {
        let t = tempfile::tempdir().unwrap();
        let kernel = Arc::new(Kernel::default());
        *kernel.refuse.lock().unwrap() = Some("402653184".into());
        let (mut d, mut done) = daemon(t.path(), kernel.clone(), Duration::from_secs(60));
        let mut reply = boost(&mut d, "384M");
        land(&mut d, &mut done).await;
        let b = boosted(reply.try_recv().expect("answered once the write failed"));
        let n = b.not_held.expect("the failure is in the reply");
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].knob, "app.memory.high");
        assert!(!n[0].late);
        assert!(
            n[0].why.contains(HIGH) && n[0].why.contains("Device or resource busy"),
            "{}",
            n[0].why
        );
    }

    #[tokio::test]
    async fn a_late_write_is_answered_at_the_deadline_and_says_so() {
        let t = tempfile::tempdir().unwrap();
        let kernel = Arc::new(Kernel::default());
        let deadline = Duration::from_millis(100);
        let (mut d, mut done) = daemon(t.path(), kernel.clone(), deadline);
        kernel.close();
        let t0 = Instant::now();
        let mut reply = boost(&mut d, "384M");
        let due = d.control.held_due().expect("a reply is held");
        assert!(due >= t0 + deadline && due <= Instant::now() + deadline);
        d.control.answer_overdue(due - Duration::from_millis(1));
        assert!(reply.try_recv().is_err(), "answered before the deadline");
        tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
        d.control.answer_overdue(Instant::now());
        let b = boosted(reply.try_recv().expect("answered at the deadline"));
        let n = b.not_held.expect("the late write is in the reply");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].late, "{n:?}");
        assert!(n[0].why.contains(HIGH), "{}", n[0].why);
        assert_eq!(d.control.held_due(), None);
        // The write lands later; nothing is left waiting for it.
        kernel.open();
        land(&mut d, &mut done).await;
        assert_eq!(high(&d), "402653184");
    }
}
