//! The one door between [`Pid`] and the platform's `pid_t`: rustix's `Pid` and the raw `i32`
//! of `/proc`, `kill` and `waitid`. Every other module passes a [`Pid`].

use crate::pid::Pid;

/// The platform's number for `pid`.
pub(crate) fn raw(pid: Pid) -> i32 {
    i32::try_from(pid.get()).expect("a Pid is at most i32::MAX")
}

/// The pid the platform gave as a number (a `/proc` field, a `waitid` result), or `None` for 0
/// and negative numbers (no process, or a group given negated).
pub(crate) fn from_raw(raw: i32) -> Option<Pid> {
    u32::try_from(raw).ok().and_then(Pid::new)
}

/// rustix's pid for `pid`.
pub(crate) fn to_rustix(pid: Pid) -> rustix::process::Pid {
    rustix::process::Pid::from_raw(raw(pid)).expect("a Pid is positive")
}

/// The pid rustix gave.
pub(crate) fn from_rustix(pid: rustix::process::Pid) -> Pid {
    from_raw(pid.as_raw_nonzero().get()).expect("rustix's pids are positive")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platforms_numbers_round_trip() {
        for n in [1, 2, 4242, i32::MAX] {
            let pid = from_raw(n).expect("positive");
            assert_eq!(raw(pid), n);
            assert_eq!(from_rustix(to_rustix(pid)), pid);
            assert_eq!(to_rustix(pid).as_raw_nonzero().get(), n);
        }
        assert_eq!(from_raw(0), None);
        assert_eq!(from_raw(-1), None);
        assert_eq!(from_raw(i32::MIN), None);
        assert_eq!(from_rustix(rustix::process::getpid()), Pid::current());
    }
}
