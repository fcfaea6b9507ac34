//! Threads started before the program: each waits for the work it is given once the program
//! runs (the monitor, the output readers, the stdin writer, the exit waiter, a delayed file
//! tracker). A thread that
//! cannot be had is then an error before anything ran, never a program half supervised after
//! it started (issue 51 item 1: under a process limit the readers failed after the start and
//! the program ran with its output lost).

use std::io;
use std::thread::{self, JoinHandle};

use crossbeam_channel::{Sender, bounded};

use crate::error::SpawnError;

/// A thread's work, handed over once.
pub(crate) type Work = Box<dyn FnOnce() + Send>;

/// A thread that runs, waiting for its work; dropped without any, it ends.
pub(crate) struct Spare {
    work: Sender<Work>,
    thread: JoinHandle<()>,
}

impl Spare {
    /// Starts thread `name` (quietus's `what` thread, for the error).
    pub(crate) fn start(name: String, what: &str) -> io::Result<Spare> {
        let (work, given) = bounded::<Work>(1);
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || {
                if let Ok(work) = given.recv() {
                    work();
                }
            })
            .map_err(|e| SpawnError::thread(what, e))?;
        Ok(Spare { work, thread })
    }

    /// Gives the thread its work; returns the thread, to join if the caller waits for the
    /// work's end. Never blocks: the channel holds one, and the thread takes nothing else. It
    /// cannot have ended (it ends only after its work); were it gone, the work comes back.
    pub(crate) fn run(self, work: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, Work> {
        match self.work.try_send(Box::new(work)) {
            Ok(()) => Ok(self.thread),
            Err(e) => Err(e.into_inner()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_runs_its_work_on_its_own_named_thread_and_one_never_given_any_ends() {
        let spare = Spare::start("quietus-test-spare".into(), "test").expect("a thread");
        let (tx, rx) = bounded(1);
        let given = spare.run(move || {
            let _ = tx.send(thread::current().name().map(str::to_owned));
        });
        assert!(given.is_ok(), "the waiting thread takes the work");
        let name = rx.recv().expect("the work ran");
        assert_eq!(name.as_deref(), Some("quietus-test-spare"));
        // Dropped without work: its thread ends (the channel disconnects); nothing hangs.
        drop(Spare::start("quietus-test-idle".into(), "test").expect("a thread"));
    }
}
