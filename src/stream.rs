//! [`Stream`]: which of the child's output streams (a value used by every layer).

/// Which of the child's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// Both through one pipe, in the order the child wrote them
    /// ([`CaptureConfig::combined`](crate::CaptureConfig::combined)).
    Combined,
}

impl Stream {
    /// `"stdout"`, `"stderr"` or `"combined"`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Combined => "combined",
        }
    }
}
