//! A named thread running a current-thread tokio runtime of its own: the one
//! way cgwarden starts such a thread. Work reaches it as tasks through a
//! [`Spawner`]; the daemon's `cgw-services` thread serves the control
//! socket, the metrics listeners and textfile, the KPI socket and the policy
//! watch this way — none of them needs a priority or makes a call that
//! blocks, so one thread (SCHED_OTHER, stack [`RUNTIME_STACK`]) serves them
//! all, each a task waiting on its own socket, fd or timer.
//!
//! A task is made on the thread (its future need not be `Send`), inside the
//! runtime: the sockets and fds it turns into tokio's types register with
//! this runtime's reactor. The thread lives until the process exits; tasks
//! already given keep running when every [`Spawner`] is gone.

use super::residency::RUNTIME_STACK;
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;

type Make = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// Hands tasks to a runtime thread ([`start`]).
#[derive(Clone)]
pub(crate) struct Spawner {
    tx: mpsc::UnboundedSender<Make>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}

impl Spawner {
    /// Runs `make()`'s future as a task of the thread; `make` itself runs
    /// there. An error only when the thread is gone.
    pub(crate) fn spawn<F, Fut>(&self, make: F) -> std::io::Result<()>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let make: Make = Box::new(move || Box::pin(make()));
        self.tx
            .send(make)
            .map_err(|_| std::io::Error::other("its runtime thread has stopped"))
    }
}

/// Starts thread `name` (at most 15 bytes: the kernel keeps no more) with
/// stack [`RUNTIME_STACK`] and its current-thread runtime (timers and
/// I/O). Its tasks must not block: a call that may wait for the disk
/// belongs on a thread of its own (the daemon's is the recorder's).
pub(crate) fn start(name: &str) -> std::io::Result<Spawner> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_stack_size(RUNTIME_STACK)
        .build()?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Make>();
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(RUNTIME_STACK)
        .spawn(move || {
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                while let Some(make) = rx.recv().await {
                    tokio::task::spawn_local(make());
                }
                // Every spawner is gone: the tasks go on.
                std::future::pending::<()>().await
            });
        })?;
    Ok(Spawner { tx })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_run_on_the_named_thread_and_may_hold_what_is_not_send() {
        let s = start("cgw-rt-test").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            s.spawn(move || async move {
                let not_send = std::rc::Rc::new(i);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                let name = std::thread::current().name().map(str::to_string);
                tx.send((*not_send, name)).unwrap();
            })
            .unwrap();
        }
        let mut got: Vec<_> = (0..3)
            .map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap())
            .collect();
        got.sort();
        let name = Some("cgw-rt-test".to_string());
        assert_eq!(got, vec![(0, name.clone()), (1, name.clone()), (2, name)]);
    }
}
