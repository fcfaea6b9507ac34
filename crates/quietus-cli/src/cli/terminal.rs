//! The command's own terminal for `--pty` runs (issue 14): raw mode for the run, restored
//! exactly; the size of quietus's own terminal; `--pty-size ROWSxCOLS`.
//!
//! When quietus runs on a terminal and relays it to the child's terminal, its own terminal
//! must pass every byte through untouched — no echo, no line editing, no Ctrl-C turned into a
//! SIGINT for quietus, no newline translation — so that the *child's* terminal does all of
//! that, as it would without quietus. [`RawModeGuard`] sets that up and puts the saved
//! settings back on drop (or on an explicit [`RawModeGuard::restore`], for exits that do not
//! unwind). The integration step wires these into the `--pty` option.

// The integration step wires this module into `--pty`; until then only the tests use it.
#![cfg_attr(not(test), allow(dead_code))]

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::str::FromStr;

use rustix::termios::{OptionalActions, Termios};

/// A terminal size, rows x columns, both from 1 to 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PtySize {
    /// Rows (lines).
    pub(crate) rows: u16,
    /// Columns.
    pub(crate) cols: u16,
}

impl PtySize {
    /// The size of a terminal nobody sized: 24 x 80.
    pub(crate) const DEFAULT: Self = Self { rows: 24, cols: 80 };
}

impl fmt::Display for PtySize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// What `--pty-size` accepts (the reason part of the error).
const PTY_SIZE_EXPECTED: &str = "expected ROWSxCOLS with both between 1 and 65535, like 24x80";

impl FromStr for PtySize {
    type Err = String;

    /// `ROWSxCOLS` (`x` or `X`, decimal digits only, surrounding spaces allowed). The error is
    /// the reason only, for clap, which names the option and the value itself.
    fn from_str(text: &str) -> Result<Self, String> {
        let number = |part: &str| {
            (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u16>().ok())
                .flatten()
                .filter(|n| *n >= 1)
        };
        let (rows, cols) = text
            .trim()
            .split_once(['x', 'X'])
            .ok_or_else(|| PTY_SIZE_EXPECTED.to_owned())?;
        match (number(rows), number(cols)) {
            (Some(rows), Some(cols)) => Ok(Self { rows, cols }),
            _ => Err(PTY_SIZE_EXPECTED.to_owned()),
        }
    }
}

/// Parses a `--pty-size` value; the error names the option, the value and what it accepts:
/// `invalid value '0x80' for --pty-size: expected ROWSxCOLS with both between 1 and 65535, like
/// 24x80`.
pub(crate) fn parse_pty_size(text: &str) -> Result<PtySize, String> {
    text.parse()
        .map_err(|reason| format!("invalid value '{text}' for --pty-size: {reason}"))
}

/// The size of the terminal `fd` belongs to, when it is one and reports a size (a terminal may
/// say 0 x 0 when nobody set it: that is no size).
pub(crate) fn terminal_size(fd: BorrowedFd<'_>) -> Option<PtySize> {
    if !rustix::termios::isatty(fd) {
        return None;
    }
    let size = rustix::termios::tcgetwinsize(fd).ok()?;
    (size.ws_row >= 1 && size.ws_col >= 1).then_some(PtySize {
        rows: size.ws_row,
        cols: size.ws_col,
    })
}

/// The size of quietus's own terminal: that of the first of stdin, stdout and stderr that is
/// a terminal with a size.
pub(crate) fn own_terminal_size() -> Option<PtySize> {
    [
        rustix::stdio::stdin(),
        rustix::stdio::stdout(),
        rustix::stdio::stderr(),
    ]
    .into_iter()
    .find_map(terminal_size)
}

/// The child's terminal size at the start: quietus's own terminal's size when it runs on
/// one (`own`), else `--pty-size` (`requested`), else 24 x 80. (Later resizes of quietus's
/// terminal follow as SIGWINCH.)
pub(crate) fn initial_pty_size(own: Option<PtySize>, requested: Option<PtySize>) -> PtySize {
    own.or(requested).unwrap_or(PtySize::DEFAULT)
}

/// Whether `a` and `b` are the same terminal settings, every field (modes, line discipline,
/// every special character, speeds). `Termios` has no `PartialEq`; its `Debug` shows all of it.
fn same_settings(a: &Termios, b: &Termios) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// A terminal in raw mode until this guard is dropped (or [`RawModeGuard::restore`]d): then
/// its settings are exactly the saved ones again.
///
/// Raw mode (`cfmakeraw`): no echo, no line editing, no signal characters, no input or output
/// translation, 8-bit bytes, reads of at least one byte. Settings are applied at once
/// (`TCSANOW`), never waiting for output to drain, so a stuck terminal cannot hold up an exit.
#[derive(Debug)]
pub(crate) struct RawModeGuard {
    /// A copy of the terminal's descriptor (settings belong to the terminal, not the fd).
    fd: OwnedFd,
    saved: Termios,
    restored: bool,
}

impl RawModeGuard {
    /// Saves the settings of the terminal `fd` belongs to and sets raw mode. `Ok(None)` when
    /// `fd` is not a terminal (nothing to do).
    pub(crate) fn new(fd: BorrowedFd<'_>) -> io::Result<Option<Self>> {
        if !rustix::termios::isatty(fd) {
            return Ok(None);
        }
        let fd = fd.try_clone_to_owned()?;
        let saved = rustix::termios::tcgetattr(&fd)?;
        let mut raw = saved.clone();
        raw.make_raw();
        let guard = Self {
            fd,
            saved,
            restored: false,
        };
        // A failure after a partial change is undone by the guard's drop.
        rustix::termios::tcsetattr(&guard.fd, OptionalActions::Now, &raw)?;
        Ok(Some(guard))
    }

    /// Raw mode on quietus's stdin, when it is a terminal and quietus is in its
    /// foreground process group. A quietus started in the background (`&`) leaves the
    /// terminal alone: changing it would stop quietus with SIGTTOU, and the terminal belongs
    /// to whoever is in the foreground.
    // Not called by the tests: they must not touch the terminal of whoever runs them. The
    // logic is `if_foreground`'s, which they test.
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn on_stdin() -> io::Result<Option<Self>> {
        Self::if_foreground(rustix::stdio::stdin())
    }

    /// [`RawModeGuard::new`] when `fd` is a terminal whose foreground process group is this
    /// process's group (so it is quietus's controlling terminal, and quietus may change it
    /// without being stopped); else `Ok(None)`.
    fn if_foreground(fd: BorrowedFd<'_>) -> io::Result<Option<Self>> {
        if !rustix::termios::isatty(fd) || !in_foreground(fd) {
            return Ok(None);
        }
        Self::new(fd)
    }

    /// Puts the saved settings back now and checks that the terminal has exactly them. Again
    /// after a success does nothing; after a failure it tries again.
    pub(crate) fn restore(&mut self) -> io::Result<()> {
        if self.restored {
            return Ok(());
        }
        rustix::termios::tcsetattr(&self.fd, OptionalActions::Now, &self.saved)?;
        let now = rustix::termios::tcgetattr(&self.fd)?;
        if !same_settings(&now, &self.saved) {
            return Err(io::Error::other(
                "the terminal did not take back every saved setting",
            ));
        }
        self.restored = true;
        Ok(())
    }

    /// The settings that will be restored.
    pub(crate) fn saved(&self) -> &Termios {
        &self.saved
    }
}

impl Drop for RawModeGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            log::warn!("cannot restore the terminal's settings: {e} (`stty sane` repairs it)");
        }
    }
}

/// Whether this process's group is the foreground group of the terminal `fd` belongs to.
fn in_foreground(fd: BorrowedFd<'_>) -> bool {
    rustix::termios::tcgetpgrp(fd).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// Whether `fd` is a terminal.
pub(crate) fn is_terminal(fd: impl AsFd) -> bool {
    rustix::termios::isatty(fd.as_fd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;

    /// A fresh pseudo-terminal pair (master, slave) of 24 x 80, not our controlling terminal.
    fn pty_pair() -> (OwnedFd, OwnedFd) {
        let master =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
                .expect("a pseudo-terminal");
        rustix::pty::grantpt(&master).expect("grantpt");
        rustix::pty::unlockpt(&master).expect("unlockpt");
        let name = rustix::pty::ptsname(&master, Vec::new()).expect("its name");
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("the slave");
        let size = rustix::termios::Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, size).expect("a size");
        (master, slave)
    }

    /// `stty -g` of the terminal `fd` (stty reads its stdin): every setting, as stty sees it.
    fn stty_g(fd: &OwnedFd) -> String {
        let out = Command::new("stty")
            .arg("-g")
            .stdin(Stdio::from(fd.try_clone().expect("a copy of the slave")))
            .stderr(Stdio::inherit())
            .output()
            .expect("stty runs");
        assert!(out.status.success(), "stty -g failed");
        String::from_utf8(out.stdout).expect("stty -g prints ASCII")
    }

    #[test]
    fn raw_mode_is_set_and_restored_exactly() {
        let (_master, slave) = pty_pair();
        // Not the defaults, to prove what comes back is what was there: odd settings.
        let status = Command::new("stty")
            .args(["intr", "^X", "-echoe", "cols", "77", "erase", "^H"])
            .stdin(Stdio::from(slave.try_clone().expect("a copy")))
            .status()
            .expect("stty runs");
        assert!(status.success());
        let before = rustix::termios::tcgetattr(&slave).expect("settings");
        let before_stty = stty_g(&slave);

        let guard = RawModeGuard::new(slave.as_fd())
            .expect("raw mode")
            .expect("a terminal");
        assert!(same_settings(guard.saved(), &before));
        let raw = rustix::termios::tcgetattr(&slave).expect("settings");
        use rustix::termios::{LocalModes, OutputModes};
        assert!(
            !raw.local_modes
                .intersects(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG)
        );
        assert!(!raw.output_modes.contains(OutputModes::OPOST));
        assert_ne!(stty_g(&slave), before_stty, "raw mode changed the settings");
        drop(guard);

        let after = rustix::termios::tcgetattr(&slave).expect("settings");
        assert!(same_settings(&after, &before), "{after:?} != {before:?}");
        assert_eq!(stty_g(&slave), before_stty);
    }

    #[test]
    fn an_explicit_restore_is_exact_and_the_drop_after_it_changes_nothing() {
        let (_master, slave) = pty_pair();
        let before_stty = stty_g(&slave);
        let mut guard = RawModeGuard::new(slave.as_fd())
            .expect("raw mode")
            .expect("a terminal");
        guard.restore().expect("restored");
        assert_eq!(stty_g(&slave), before_stty);
        // The program changes the terminal after the restore (its own business): the drop does
        // not undo that.
        let status = Command::new("stty")
            .arg("-echo")
            .stdin(Stdio::from(slave.try_clone().expect("a copy")))
            .status()
            .expect("stty runs");
        assert!(status.success());
        let changed = stty_g(&slave);
        drop(guard);
        assert_eq!(stty_g(&slave), changed);
    }

    #[test]
    fn not_a_terminal_is_left_alone() {
        let (reader, _writer) = rustix::pipe::pipe().expect("a pipe");
        assert!(
            RawModeGuard::new(reader.as_fd())
                .expect("no error")
                .is_none()
        );
        assert!(terminal_size(reader.as_fd()).is_none());
        assert!(!is_terminal(&reader));
    }

    #[test]
    fn a_terminal_that_is_not_ours_in_the_foreground_is_left_alone() {
        let (_master, slave) = pty_pair();
        let before = stty_g(&slave);
        // Not this process's controlling terminal: no foreground group of ours.
        assert!(
            RawModeGuard::if_foreground(slave.as_fd())
                .expect("no error")
                .is_none()
        );
        assert_eq!(stty_g(&slave), before);
    }

    #[test]
    fn the_own_terminal_size_is_that_of_the_first_standard_stream_with_one() {
        let expected = [
            rustix::stdio::stdin(),
            rustix::stdio::stdout(),
            rustix::stdio::stderr(),
        ]
        .into_iter()
        .filter(|fd| is_terminal(fd))
        .find_map(|fd| {
            let size = rustix::termios::tcgetwinsize(fd).ok()?;
            (size.ws_row > 0 && size.ws_col > 0).then_some(PtySize {
                rows: size.ws_row,
                cols: size.ws_col,
            })
        });
        assert_eq!(own_terminal_size(), expected);
    }

    #[test]
    fn the_size_of_a_terminal_is_read_and_an_unset_size_is_none() {
        let (master, slave) = pty_pair();
        assert_eq!(
            terminal_size(slave.as_fd()),
            Some(PtySize { rows: 24, cols: 80 })
        );
        let zero = rustix::termios::Winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, zero).expect("a size");
        assert_eq!(terminal_size(slave.as_fd()), None);
        assert!(is_terminal(&slave));
    }

    #[test]
    fn pty_size_parses_rows_by_columns() {
        assert_eq!(parse_pty_size("24x80"), Ok(PtySize { rows: 24, cols: 80 }));
        assert_eq!(
            parse_pty_size("50X200"),
            Ok(PtySize {
                rows: 50,
                cols: 200
            })
        );
        assert_eq!(parse_pty_size(" 1x1 "), Ok(PtySize { rows: 1, cols: 1 }));
        assert_eq!(
            parse_pty_size("65535x65535"),
            Ok(PtySize {
                rows: 65535,
                cols: 65535
            })
        );
        assert_eq!(PtySize::DEFAULT.to_string(), "24x80");
        assert_eq!(
            parse_pty_size(&PtySize::DEFAULT.to_string()),
            Ok(PtySize::DEFAULT)
        );
    }

    #[test]
    fn a_bad_pty_size_names_the_option_the_value_and_what_it_accepts() {
        assert_eq!(
            parse_pty_size("0x80").expect_err("zero rows"),
            "invalid value '0x80' for --pty-size: expected ROWSxCOLS with both between 1 and \
             65535, like 24x80"
        );
        for bad in [
            "",
            "24",
            "x80",
            "24x",
            "24x0",
            "65536x80",
            "24x80x1",
            "-1x80",
            "+24x80",
            "24 x 80",
            "a x b",
            "24,80",
            "1e3x80",
            "２４x80",
        ] {
            let error = parse_pty_size(bad).expect_err(bad);
            assert!(
                error.starts_with(&format!(
                    "invalid value '{bad}' for --pty-size: expected ROWSxCOLS"
                )),
                "{bad:?}: {error}"
            );
        }
    }

    #[test]
    fn the_own_terminal_wins_then_the_option_then_24x80() {
        let own = PtySize {
            rows: 40,
            cols: 120,
        };
        let asked = PtySize { rows: 10, cols: 20 };
        assert_eq!(initial_pty_size(Some(own), Some(asked)), own);
        assert_eq!(initial_pty_size(None, Some(asked)), asked);
        assert_eq!(initial_pty_size(None, None), PtySize::DEFAULT);
    }
}
