//! Terminals: a new pseudo-terminal, its window size, its foreground group and line
//! discipline, and what a hang-up looks like.

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

/// A new pseudo-terminal of `rows` x `cols`: (master, slave), both close-on-exec, the slave
/// opened without becoming quietus's controlling terminal.
pub(crate) fn open_pty(
    rows: u16,
    cols: u16,
) -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    #[cfg(target_os = "linux")]
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    // macOS's `posix_openpt` takes no close-on-exec flag: set right after.
    #[cfg(not(target_os = "linux"))]
    let master = {
        let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
        super::files::set_cloexec(std::os::fd::AsFd::as_fd(&master))?;
        master
    };
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    set_terminal_size(std::os::fd::AsFd::as_fd(&master), rows, cols)?;
    Ok((master, slave))
}

/// Sets the window size of the terminal `fd` belongs to (`TIOCSWINSZ`; on a master the kernel
/// then sends SIGWINCH to the slave's foreground process group).
pub(crate) fn set_terminal_size(
    fd: std::os::fd::BorrowedFd<'_>,
    rows: u16,
    cols: u16,
) -> io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(fd, size).map_err(Into::into)
}

/// The window size (rows, cols) of the terminal `fd` belongs to.
pub(crate) fn terminal_size(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(u16, u16)> {
    let size = rustix::termios::tcgetwinsize(fd)?;
    Ok((size.ws_row, size.ws_col))
}

/// How many bytes wait to be read from `fd` (`FIONREAD`); 0 when it cannot say.
pub(crate) fn pending_bytes(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    rustix::io::ioctl_fionread(fd).unwrap_or(0)
}

#[cfg_attr(not(test), allow(dead_code))] // only the tests use it
/// The foreground process group of the terminal `fd` belongs to (on a master: the slave's),
/// the group the line discipline signals for Ctrl-C and the kernel for a resize.
pub(crate) fn foreground_group(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Pid> {
    Ok(from_rustix(rustix::termios::tcgetpgrp(fd)?))
}

/// The value of a disabled special character (`_POSIX_VDISABLE`).
const VDISABLE: u8 = if cfg!(any(target_os = "linux", target_os = "android")) {
    0
} else {
    0xff
};

/// What the line discipline of a terminal does with the bytes written to it: the settings
/// quietus needs to interrupt and to end input the terminal way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineDiscipline {
    /// Canonical (line-by-line) input (`ICANON`): only then is the EOF character special.
    pub(crate) canonical: bool,
    /// The interrupt, quit and suspend characters signal the foreground group (`ISIG`).
    pub(crate) signals: bool,
    /// The interrupt character (`VINTR`), unless disabled.
    pub(crate) interrupt: Option<u8>,
    /// The end-of-file character (`VEOF`), unless disabled.
    pub(crate) eof: Option<u8>,
    /// The extra end-of-line characters (`VEOL`, `VEOL2`), unless disabled.
    pub(crate) eol: [Option<u8>; 2],
    /// A carriage return ends a line too (`ICRNL` without `IGNCR`).
    pub(crate) cr_ends_line: bool,
}

impl LineDiscipline {
    /// Whether `byte`, written last, leaves the line being edited empty: a newline, an extra
    /// end-of-line character, the EOF character itself, or a carriage return turned into a
    /// newline.
    pub(crate) fn ends_line(&self, byte: u8) -> bool {
        byte == b'\n'
            || Some(byte) == self.eof
            || self.eol.contains(&Some(byte))
            || (self.cr_ends_line && byte == b'\r')
    }
}

/// The line-discipline settings of the terminal `fd` belongs to. On a pseudo-terminal's master
/// these are the slave's settings, as the program on it last set them.
pub(crate) fn line_discipline(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<LineDiscipline> {
    use rustix::termios::{InputModes, LocalModes, SpecialCodeIndex as Cc};
    let t = rustix::termios::tcgetattr(fd)?;
    let special = |index| Some(t.special_codes[index]).filter(|c| *c != VDISABLE);
    Ok(LineDiscipline {
        canonical: t.local_modes.contains(LocalModes::ICANON),
        signals: t.local_modes.contains(LocalModes::ISIG),
        interrupt: special(Cc::VINTR),
        eof: special(Cc::VEOF),
        eol: [special(Cc::VEOL), special(Cc::VEOL2)],
        cr_ends_line: t.input_modes.contains(InputModes::ICRNL)
            && !t.input_modes.contains(InputModes::IGNCR),
    })
}

/// Whether `error` is the end of a pseudo-terminal's output: a read on the master fails with
/// EIO once every slave descriptor is closed (Linux; other systems return 0).
pub(crate) fn is_terminal_hangup(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error())
}
