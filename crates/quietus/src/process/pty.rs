//! The terminal backend: a child on a pseudo-terminal instead of pipes (issue 14).
//!
//! # Design note (what the integration builds on)
//!
//! - **Starting the child.** [`Pty::open`] makes a master/slave pair of the asked size (both
//!   close-on-exec, the slave opened with `O_NOCTTY` so it never becomes quietus's own
//!   controlling terminal). [`Pty::prepare`] sets the command's stdin, stdout and stderr to
//!   copies of the slave (std `dup2`s them onto 0, 1, 2 in the child) and installs
//!   [`sys::configure`] with `Lead::Terminal`: in the child, before exec, `setsid()` then
//!   `ioctl(0, TIOCSCTTY)`, then the usual parent-death signal. A session leader leads a new
//!   process group too, so **the child's pgid is its pid** exactly as with
//!   `process_group(0)` — the ladder, escapee tracking and leftovers need no change. (Calling
//!   `process_group(0)` as well would make `setsid` fail: a group leader cannot start a
//!   session.)
//! - **The parent drops its slave right after the spawn** ([`Pty::spawned`]): it drops its own
//!   copy *and* resets the command's stdio, because a `Command` keeps its `Stdio` descriptors
//!   alive until it is dropped. Only then does the master see the end.
//! - **EIO = end.** Once every slave descriptor is closed (the child and every descendant that
//!   inherited it), a read on the master fails with EIO on Linux. [`MasterReader`] turns that
//!   into `Ok(0)`, so it is an ordinary [`std::io::Read`] for the output pump: read, stamp,
//!   hand to the sinks, stop at 0. Bytes the child wrote before it exited are read first.
//! - **A grandchild holding the slave keeps the master open**, exactly like a grandchild
//!   holding a pipe: no EOF until it closes the slave or dies. The integration applies the same
//!   drain rule as for pipes (drain cap after the leader exits, every byte read kept). Note the
//!   kernel hangs up the terminal when the session leader exits: the foreground process group
//!   gets SIGHUP and then reads and writes on the slave fail, so only a descendant that ignores
//!   SIGHUP (nohup, `trap '' HUP`) or left the group keeps it open in practice.
//! - **Resize.** [`Pty::resize`] is `TIOCSWINSZ` on the master; the kernel sends SIGWINCH to
//!   the terminal's foreground process group (whichever group a job-control shell in the
//!   child put there).
//! - **Ctrl-C through the terminal.** [`Pty::interrupt`] writes the slave's *current* `VINTR`
//!   character (read with `tcgetattr` on the master each time, not hard-coded): the line
//!   discipline then signals SIGINT to the terminal's foreground group — right even when a
//!   shell in the child moved the job into another group. When the program turned signals off
//!   (`ISIG` clear: raw mode, as interactive UIs do) or disabled `VINTR`, the byte 0x03 is
//!   written, which is what a Ctrl-C key press sends and what such a program reads as Ctrl-C.
//! - **EOF the terminal way.** [`Pty::send_eof`] writes the slave's `VEOF` character. In
//!   canonical mode it means end-of-file only at the start of a line; elsewhere it hands the
//!   partial line to the reader. So the `Pty` remembers the last byte written through it: after
//!   a line end (newline, `VEOL`/`VEOL2`, `VEOF`, a carriage return when `ICRNL` maps it to a
//!   newline), after an interrupt (which flushes the line), or when nothing was written yet, one
//!   `VEOF` is written; otherwise two (the first delivers the partial line, the second is the
//!   EOF). Never two when one suffices: a second EOF would reach whatever reads next (a shell
//!   around the program would log out). Outside canonical mode `VEOF` is written once, as a key
//!   press would (raw-mode programs read ^D themselves). A disabled `VEOF` in canonical mode is
//!   an error (there is no way to say EOF).
//! - **The command side** (`src/cli/terminal.rs`): `RawModeGuard` puts quietus's own
//!   terminal in raw mode and restores the saved settings exactly on drop (or an explicit
//!   `restore`), the size of quietus's own terminal, and `--pty-size ROWSxCOLS` parsing.
//!
//! What the integration must do: `SessionBuilder` gains a terminal option; the launcher opens a
//! `Pty`, `prepare`s the command (instead of `sys::configure` with a group), spawns (from the spawner
//! thread when the parent-death signal is on) and calls `spawned` at once; **one reader
//! thread** on a [`MasterReader`] produces the `Terminal` stream (activity stamp, sinks,
//! head/tail, log with SHA-256, `Output` events); `write_stdin` goes to [`Pty::write`],
//! `close_stdin` to [`Pty::send_eof`], the Ctrl-C control to [`Pty::interrupt`] (pipe sessions
//! keep SIGINT to the group); `Session::resize` calls [`Pty::resize`] and is an error (not a
//! panic) on a pipe session. Writes block while the program does not read and the terminal's
//! input queue is full, so the session writes from its own thread or accepts that, as for a
//! stdin pipe.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};

use super::sys;

/// "Nothing written yet, or the line is empty": the value of [`Pty::last_written`] that is no
/// byte.
const LINE_START: u16 = u16::MAX;

/// A pseudo-terminal for one child: the master quietus keeps, and the slave the child runs
/// on until [`Pty::spawned`] drops quietus's copy.
#[derive(Debug)]
pub(crate) struct Pty {
    master: File,
    slave: Option<OwnedFd>,
    /// The last byte written through [`Pty::write`] (as `u16`), or [`LINE_START`].
    last_written: AtomicU16,
}

impl Pty {
    /// Opens a pseudo-terminal of `rows` x `cols` (both at least 1).
    pub(crate) fn open(rows: u16, cols: u16) -> io::Result<Self> {
        check_size(rows, cols)?;
        let (master, slave) = sys::open_pty(rows, cols)?;
        Ok(Self {
            master: File::from(master),
            slave: Some(slave),
            last_written: AtomicU16::new(LINE_START),
        })
    }

    /// Makes `command` run on the slave: stdin, stdout and stderr are the slave, and the child
    /// starts as the leader of a new session with the slave as its controlling terminal (its
    /// process-group id is its pid). Fails once [`Pty::spawned`] released the slave.
    pub(crate) fn prepare(
        &self,
        command: &mut Command,
        parent_death_signal: bool,
        cgroup: Option<sys::CgroupEntry>,
        exec: Option<sys::OrderedExec>,
        known: Option<bool>,
    ) -> io::Result<Option<sys::Handoff>> {
        let slave = self.slave.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "this terminal already ran its program",
            )
        })?;
        let start = sys::spawn::Start {
            lead: sys::Lead::Terminal,
            parent_death_signal,
            cgroup,
            try_clone3: true,
            exec,
            io: Some(sys::spawn::OwnIo::terminal(slave)?),
            known,
        };
        sys::configure(command, start)
    }

    /// To be called right after `command` was spawned (whether or not that worked): closes
    /// every copy of the slave this process holds — its own and the three `command` keeps —
    /// so that the master reads the end once the child's side is closed.
    pub(crate) fn spawned(&mut self, command: &mut Command) {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.slave = None;
    }

    #[cfg_attr(not(test), allow(dead_code))] // only the tests use it
    /// [`Pty::prepare`], spawn from the calling thread, [`Pty::spawned`].
    pub(crate) fn spawn(
        &mut self,
        command: &mut Command,
        parent_death_signal: bool,
    ) -> io::Result<Child> {
        self.prepare(command, parent_death_signal, None, None, None)?;
        let child = command.spawn();
        self.spawned(command);
        child
    }

    /// A reader of everything the program writes to the terminal, ending with `Ok(0)` once
    /// every slave is closed. Several readers share one stream (each byte goes to one of them):
    /// the integration uses one.
    pub(crate) fn reader(&self) -> io::Result<MasterReader> {
        Ok(MasterReader {
            master: File::from(self.master.as_fd().try_clone_to_owned()?),
        })
    }

    /// The master side, for polling.
    pub(crate) fn master_fd(&self) -> BorrowedFd<'_> {
        self.master.as_fd()
    }

    /// Resizes the terminal to `rows` x `cols` (both at least 1); the kernel sends SIGWINCH to
    /// its foreground process group.
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        check_size(rows, cols)?;
        sys::set_terminal_size(self.master.as_fd(), rows, cols)
    }

    #[cfg_attr(not(test), allow(dead_code))] // only the tests use it
    /// The terminal's foreground process group: the group Ctrl-C and a resize signal (the
    /// child's own group unless a job-control shell in it moved a job to the foreground).
    pub(crate) fn foreground_group(&self) -> io::Result<crate::pid::Pid> {
        sys::foreground_group(self.master.as_fd())
    }

    /// The terminal's size, (rows, cols).
    pub(crate) fn size(&self) -> io::Result<(u16, u16)> {
        sys::terminal_size(self.master.as_fd())
    }

    /// Writes `bytes` to the terminal, as typed keys. Blocks while the terminal's input queue is
    /// full (the program does not read).
    pub(crate) fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let Some(&last) = bytes.last() else {
            return Ok(());
        };
        (&self.master).write_all(bytes)?;
        self.last_written.store(u16::from(last), Ordering::Relaxed);
        Ok(())
    }

    /// Sends Ctrl-C through the terminal: the slave's interrupt character when the terminal
    /// turns it into SIGINT for the foreground process group, else 0x03 (what the Ctrl-C key
    /// sends, for a program in raw mode to read). Returns the byte written.
    pub(crate) fn interrupt(&self) -> io::Result<u8> {
        let discipline = sys::line_discipline(self.master.as_fd())?;
        let byte = match discipline.interrupt {
            Some(intr) if discipline.signals => intr,
            _ => CTRL_C,
        };
        (&self.master).write_all(&[byte])?;
        if discipline.signals && Some(byte) == discipline.interrupt {
            // The interrupt flushed the line being edited (NOFLSH aside, which only keeps bytes
            // a program has not read: the line still starts afresh for EOF purposes).
            self.last_written.store(LINE_START, Ordering::Relaxed);
        } else {
            self.last_written.store(u16::from(byte), Ordering::Relaxed);
        }
        Ok(byte)
    }

    /// Ends the program's input the terminal way (see the module docs): the slave's EOF
    /// character, twice when a partial line is pending in canonical mode. Returns how many EOF
    /// characters were written.
    pub(crate) fn send_eof(&self) -> io::Result<usize> {
        let discipline = sys::line_discipline(self.master.as_fd())?;
        let eof = match discipline.eof {
            Some(eof) => eof,
            None if !discipline.canonical => CTRL_D,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the terminal's end-of-file character is disabled",
                ));
            }
        };
        let last = self.last_written.load(Ordering::Relaxed);
        let at_line_start =
            last == LINE_START || u8::try_from(last).is_ok_and(|byte| discipline.ends_line(byte));
        let count = if discipline.canonical && !at_line_start {
            2
        } else {
            1
        };
        (&self.master).write_all(&[eof, eof][..count])?;
        self.last_written.store(
            if discipline.canonical {
                LINE_START
            } else {
                u16::from(eof)
            },
            Ordering::Relaxed,
        );
        Ok(count)
    }
}

/// The byte the Ctrl-C key sends.
const CTRL_C: u8 = 0x03;
/// The byte the Ctrl-D key sends.
const CTRL_D: u8 = 0x04;

/// Rejects a zero dimension.
fn check_size(rows: u16, cols: u16) -> io::Result<()> {
    if rows == 0 || cols == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            crate::error::ConfigError::TerminalSize { rows, cols },
        ));
    }
    Ok(())
}

/// Reads what the program writes to its terminal; the end (EIO once every slave is closed)
/// reads as `Ok(0)`, so `std::io::Read` semantics hold.
#[derive(Debug)]
pub(crate) struct MasterReader {
    master: File,
}

impl Read for MasterReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.master.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if sys::is_terminal_hangup(&e) => return Ok(0),
                other => return other,
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
