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
    /// Everything the child wrote to its terminal, escape sequences included, when it runs on
    /// a pseudo-terminal ([`SessionBuilder::pty`](crate::SessionBuilder::pty)).
    Terminal,
}

impl Stream {
    /// `"stdout"`, `"stderr"`, `"combined"` or `"terminal"`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Combined => "combined",
            Stream::Terminal => "terminal",
        }
    }
}
