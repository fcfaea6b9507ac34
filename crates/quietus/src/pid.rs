//! [`Pid`]: a process id (a value used by every layer, as [`Signal`](crate::Signal) is).
//!
//! One type on every platform and in every layer: the public API (`Session::pid`, a result's pid,
//! the diagnosis's processes, the observers), the ladder, the sources and the platform layer.
//! The platform's own `pid_t` (an `i32`) is reached only in `process/sys/pid.rs`.

use std::fmt;
use std::num::NonZeroU32;

/// A process id: a positive number, at most `i32::MAX` (the range of every platform's `pid_t`).
///
/// A process group id is the pid of its leader and has this type too. Printed as its number
/// (in text and in the JSON of `quietus`, `serve` and `mcp`).
///
/// ```
/// use quietus::Pid;
///
/// let pid = Pid::new(4242).expect("a valid pid");
/// assert_eq!(pid.get(), 4242);
/// assert_eq!(pid.to_string(), "4242");
/// assert_eq!(u32::from(pid), 4242);
/// // 0 is no process; above i32::MAX no platform has one.
/// assert_eq!(Pid::new(0), None);
/// assert!(Pid::try_from(u32::MAX).is_err());
///
/// let child = std::process::Command::new("true").spawn().unwrap();
/// let pid = Pid::of(&child);
/// assert_eq!(pid.get(), child.id());
/// # let mut child = child;
/// # child.wait().unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(NonZeroU32);

/// The largest pid: every platform's `pid_t` is a signed 32-bit number.
const MAX: u32 = i32::MAX.unsigned_abs();

impl Pid {
    /// The pid `number`, or `None` for 0 and for a number above `i32::MAX`.
    pub const fn new(number: u32) -> Option<Pid> {
        if number > MAX {
            return None;
        }
        match NonZeroU32::new(number) {
            Some(n) => Some(Pid(n)),
            None => None,
        }
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0.get()
    }

    /// The pid of a child started with [`std::process::Command`]. (The system gives every
    /// process a pid in range: this never fails.)
    pub fn of(child: &std::process::Child) -> Pid {
        Pid::from_os(child.id())
    }

    /// The pid of this process (quietus's own, or its host's).
    pub fn current() -> Pid {
        Pid::from_os(std::process::id())
    }

    /// A pid the operating system gave (`Child::id`, `std::process::id`): always in range.
    fn from_os(number: u32) -> Pid {
        Pid::new(number).expect("the operating system's pids are in 1..=i32::MAX")
    }

    /// The pid written in decimal (a `/proc` entry, a cgroup's `cgroup.procs` line, a line a
    /// test's child printed), or `None`.
    pub(crate) fn parse(text: &str) -> Option<Pid> {
        text.trim().parse::<u32>().ok().and_then(Pid::new)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Pid> for u32 {
    fn from(pid: Pid) -> u32 {
        pid.get()
    }
}

impl TryFrom<u32> for Pid {
    type Error = InvalidPid;

    fn try_from(number: u32) -> Result<Pid, InvalidPid> {
        Pid::new(number).ok_or(InvalidPid(number))
    }
}

/// A number that is no process id: 0, or above `i32::MAX` (from [`Pid::try_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidPid(u32);

impl InvalidPid {
    /// The number refused.
    pub fn number(self) -> u32 {
        self.0
    }
}

impl fmt::Display for InvalidPid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not a process id (accepted: 1..={MAX})", self.0)
    }
}

impl std::error::Error for InvalidPid {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_numbers_above_i32_max_are_refused() {
        assert_eq!(Pid::new(0), None);
        assert_eq!(Pid::new(MAX + 1), None);
        assert_eq!(Pid::new(u32::MAX), None);
        assert_eq!(Pid::try_from(0), Err(InvalidPid(0)));
        let err = Pid::try_from(1 << 31).unwrap_err();
        assert_eq!(err.number(), 1 << 31);
        assert_eq!(
            err.to_string(),
            "2147483648 is not a process id (accepted: 1..=2147483647)"
        );
        assert_eq!(Pid::parse("0"), None);
        assert_eq!(Pid::parse("-5"), None);
        assert_eq!(Pid::parse("2147483648"), None);
        assert_eq!(Pid::parse("12x"), None);
    }

    #[test]
    fn the_range_round_trips() {
        for n in [1, 2, 4242, 4_194_304, MAX - 1, MAX] {
            let pid = Pid::new(n).expect("in range");
            assert_eq!(pid.get(), n);
            assert_eq!(u32::from(pid), n);
            assert_eq!(Pid::try_from(n), Ok(pid));
            assert_eq!(pid.to_string(), n.to_string());
            assert_eq!(Pid::parse(&pid.to_string()), Some(pid));
        }
        assert_eq!(MAX, 2_147_483_647);
    }

    #[test]
    fn pids_order_as_their_numbers() {
        let (a, b) = (Pid::new(7).unwrap(), Pid::new(300).unwrap());
        assert!(a < b);
        assert_eq!(format!("{a:>4}|{b}"), "   7|300");
    }

    #[test]
    fn a_childs_pid_and_our_own() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("true runs");
        assert_eq!(Pid::of(&child).get(), child.id());
        child.wait().expect("reaped");
        assert_eq!(Pid::current().get(), std::process::id());
        assert_ne!(Pid::of(&child), Pid::current());
    }
}
