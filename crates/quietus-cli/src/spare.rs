//! Threads of the command's crate (the command's, `serve`'s, `mcp`'s), started before the
//! program (issue 51 item 1): each waits for what it needs of the session (the session itself,
//! its events), handed over once the program runs. A thread the system refuses (a process
//! limit) is then quietus's failure at the start (125 with nothing run; -32000 `thread` under
//! `serve`), not a run without its signal handling, its terminal input or its event stream.

use std::io;
use std::thread::JoinHandle;

use crossbeam_channel::{Sender, bounded};

/// A started thread named `name`, waiting for its input; it runs `work` with it once it is
/// sent on the returned channel, and ends without running it if the sender is dropped first.
pub(crate) fn start<T: Send + 'static>(
    name: &str,
    work: impl FnOnce(T) + Send + 'static,
) -> io::Result<(Sender<T>, JoinHandle<()>)> {
    let (tx, rx) = bounded::<T>(1);
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if let Ok(input) = rx.recv() {
                work(input);
            }
        })?;
    Ok((tx, thread))
}
