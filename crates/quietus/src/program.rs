//! [`Program`]: what to run, with no setting quietus cannot see; [`Stdin`]: what it reads.

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};

/// A program to supervise: its name (looked up in `PATH`) or path, its arguments, working
/// directory and environment changes — what an agent CLI needs.
///
/// A thin builder over std's [`Command`], which starts it (std's spawn: `posix_spawn` or a fork
/// followed at once by `exec`): [`Session::builder`](crate::Session::builder) and
/// [`Session::spawn`](crate::Session::spawn) take a `Program` or a `Command` alike, and a
/// `Program` is the shorter way to write the settings an agent CLI needs. Either way the child
/// gets the same arguments, variables, working directory, signal dispositions and mask, the
/// same group, cgroup and parent-death signal. One difference: std sorts an environment it is
/// asked to change (one entry per name); a `Program`'s keeps this process's order, its
/// duplicates and its entries without `=`, with the changes after them, as a direct run would
/// (quietus sees every setting of a `Program`, not a `Command`'s cleared environment).
///
/// ```
/// use quietus::{MonitorConfig, Program, Session};
///
/// let program = Program::new("sh")
///     .args(["-c", "echo \"$GREETING from $PWD\""])
///     .env("GREETING", "hello")
///     .current_dir("/tmp");
/// let result = Session::spawn(program, MonitorConfig::default())?.wait();
/// assert_eq!(result.exit_code(), 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Program {
    command: Command,
    /// Whether the command carries only the settings above (not a caller's `Command`, whose
    /// cleared environment quietus could not see): its environment can be kept in order.
    plain: bool,
}

impl Program {
    /// Runs `program`: a path, or a name looked up in the child's `PATH` (as std's
    /// [`Command::new`]).
    pub fn new(program: impl AsRef<OsStr>) -> Program {
        Program {
            command: Command::new(program),
            plain: true,
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Program {
        self.command.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Program
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// The child's working directory (default: this process's). A relative program path is
    /// taken from it.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Program {
        self.command.current_dir(dir);
        self
    }

    /// Sets a variable of the child's environment (which is this process's, or what an
    /// [`Environment`](crate::Environment) makes of it, with this change on top).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Program {
        self.command.env(key, value);
        self
    }

    /// Removes a variable from the child's environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Program {
        self.command.env_remove(key);
        self
    }

    /// The command, and whether it is plain (made here, not a caller's).
    pub(crate) fn into_parts(self) -> (Command, bool) {
        (self.command, self.plain)
    }
}

impl From<Command> for Program {
    /// A caller's command, with every setting it has.
    fn from(command: Command) -> Program {
        Program {
            command,
            plain: false,
        }
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("command", &self.command)
            .field("plain", &self.plain)
            .finish()
    }
}

/// The child's stdin: [`SessionBuilder::stdin`](crate::SessionBuilder::stdin).
#[derive(Debug, Default)]
#[non_exhaustive]
pub enum Stdin {
    /// `/dev/null` (the default): a `read` sees end-of-file at once, nothing waits for input.
    #[default]
    Null,
    /// This process's own stdin.
    Inherit,
    /// A pipe the caller feeds with [`Session::write_stdin`](crate::Session::write_stdin) and closes with
    /// [`Session::close_stdin`](crate::Session::close_stdin) (or the session's end closes it). In a terminal session
    /// ([`SessionBuilder::pty`](crate::SessionBuilder::pty)) it changes nothing: the terminal is always writable.
    Piped,
    /// What the caller opened (a file, a pipe of its own), opaque to quietus. Not
    /// `Stdio::piped()`: that pipe would have nobody to write to it; use [`Stdin::Piped`].
    Given(Stdio),
}

impl From<Stdio> for Stdin {
    /// [`Stdin::Given`].
    fn from(stdio: Stdio) -> Stdin {
        Stdin::Given(stdio)
    }
}

impl Stdin {
    /// What std's spawn is given.
    pub(crate) fn into_stdio(self) -> Stdio {
        match self {
            Stdin::Null => Stdio::null(),
            Stdin::Inherit => Stdio::inherit(),
            Stdin::Piped => Stdio::piped(),
            Stdin::Given(stdio) => stdio,
        }
    }
}
