//! Durations and errors in the command's messages, the way people read them.

use std::fmt;
use std::time::Duration;

/// An error and each of its causes, once each, joined by `: ` (the library's errors say what
/// could not be done, and leave the cause to `source()`).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// Formats a duration as the library's reports do: `850ms`, `4.2s`, `5m0s`, `1h2m3s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HumanDuration(pub(crate) Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        if secs == 0 {
            return write!(f, "{}ms", d.as_millis());
        }
        if secs < 60 {
            let tenths = d.subsec_millis() / 100;
            return if tenths == 0 {
                write!(f, "{secs}s")
            } else {
                write!(f, "{secs}.{tenths}s")
            };
        }
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h{m}m{s}s")
        } else {
            write!(f, "{m}m{s}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_library_reports() {
        let shown = |ms| HumanDuration(Duration::from_millis(ms)).to_string();
        assert_eq!(shown(850), "850ms");
        assert_eq!(shown(4_200), "4.2s");
        assert_eq!(shown(5_000), "5s");
        assert_eq!(shown(300_000), "5m0s");
        assert_eq!(shown(3_723_000), "1h2m3s");
    }
}
