//! `--termination-message FILE`: one line on why the run ended, for an engine that shows a
//! container's last words and nothing else of it (Kubernetes reads `terminationMessagePath`,
//! `/dev/termination-log`, into the pod's status). Written on every way out, as the report.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use quietus::{MonitorResult, Signal};

use crate::report::Exit;
use crate::report::Received;

/// The most the file holds, its newline included: Kubernetes' limit of a termination message.
pub(crate) const MAX_BYTES: usize = 4096;

/// The file of `--termination-message`: created (or emptied) before the program starts, so a
/// path that cannot be written fails at once and no stale line of an earlier run lingers.
#[derive(Debug)]
pub(crate) struct TerminationMessage {
    path: PathBuf,
    file: Option<File>,
}

impl TerminationMessage {
    /// The file at `path`, not opened yet.
    pub(crate) fn new(path: &Path) -> Self {
        TerminationMessage {
            path: path.to_owned(),
            file: None,
        }
    }

    /// The path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Creates or empties the file now. Without blocking: a FIFO nobody reads is refused
    /// (`ENXIO`) rather than waited for.
    pub(crate) fn open(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some(crate::sys::open_truncated(&self.path, true)?);
        }
        Ok(())
    }

    /// Writes `line` ([`one_line`], at most [`MAX_BYTES`] with its newline) in place of what
    /// the file held, opening it first if that was not done yet.
    pub(crate) fn write(mut self, line: &str) -> io::Result<()> {
        self.open()?;
        let mut file = self.file.take().expect("opened just above");
        let mut text = one_line(line).into_owned();
        text.push('\n');
        // Emptied at the open; emptied again, in case anything wrote to it since.
        if file.metadata().is_ok_and(|m| m.is_file()) {
            file.set_len(0)?;
            file.rewind()?;
        }
        file.write_all(text.as_bytes())?;
        file.flush()
    }
}

/// `line` on one line (each line break a space) and cut, on a character boundary, to leave
/// room for the newline within [`MAX_BYTES`].
pub(crate) fn one_line(line: &str) -> std::borrow::Cow<'_, str> {
    let limit = MAX_BYTES - 1;
    let flat: std::borrow::Cow<'_, str> = if line.contains(['\n', '\r']) {
        line.replace(['\n', '\r'], " ").into()
    } else {
        line.into()
    };
    if flat.len() <= limit {
        return flat;
    }
    let mut end = limit;
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    flat[..end].to_owned().into()
}

/// The line: `quietus: OUTCOME, exit CODE: WORDS` (`exit 143 (TERM)` when quietus dies of a
/// signal).
pub(crate) fn line(outcome: &str, exit: Exit, words: &str) -> String {
    let code = match exit {
        Exit::Code(code) => code.to_string(),
        Exit::Signal(signal) => format!("{} ({signal})", exit.code()),
    };
    format!("quietus: {outcome}, exit {code}: {words}")
}

/// The words of a finished run: why quietus ended it and the signals it sent (the summary
/// line's), or how the program ended by itself; and what observe mode saw.
pub(crate) fn finished_words(
    result: &MonitorResult,
    received: &Received,
    grace: Duration,
) -> String {
    let mut words = match crate::report::summary(result, received, grace) {
        Some(summary) => summary
            .strip_prefix("quietus: ")
            .unwrap_or(&summary)
            .to_owned(),
        None => match (result.status.and_then(|s| s.code()), result.signal()) {
            (_, Some(signal)) => format!(
                "the program died of signal {}",
                Signal::from_number(signal.number()).map_or_else(
                    || signal.number().to_string(),
                    |s| format!("{} ({})", s.number(), s.name())
                )
            ),
            (Some(code), None) => format!("the program exited with status {code}"),
            (None, None) => "the program ended".to_owned(),
        },
    };
    if result.termination_unproven && !words.contains("termination unproven") {
        words.push_str("; termination unproven: the tree may still run");
    }
    if let Some(observed) = crate::report::observed_summary(result) {
        words.push_str("; ");
        words.push_str(observed.strip_prefix("quietus: ").unwrap_or(&observed));
    }
    words
}

/// Where the line goes when the command line itself was refused: the last
/// `--termination-message FILE` (or `--termination-message=FILE`) before `--`, else
/// `QUIETUS_TERMINATION_MESSAGE` when it is set and not empty.
pub(crate) fn path_of_refused(args: &[OsString]) -> Option<PathBuf> {
    const FLAG: &str = "--termination-message";
    let mut found = None;
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        if word == FLAG {
            found = words.next().cloned();
        } else if let Some(value) = word
            .to_str()
            .and_then(|w| w.strip_prefix(FLAG))
            .and_then(|w| w.strip_prefix('='))
        {
            found = Some(value.into());
        }
    }
    found
        .or_else(|| std::env::var_os("QUIETUS_TERMINATION_MESSAGE"))
        .filter(|p| !p.is_empty() && p != "-")
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_line_of_at_most_4_kib_cut_between_characters() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
        let long = "é".repeat(3000); // 6000 bytes, two per character
        let cut = one_line(&long);
        assert!(cut.len() < MAX_BYTES, "{}", cut.len());
        assert_eq!(
            cut.len(),
            4094,
            "the last whole character before 4095 bytes"
        );
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(one_line("short"), "short");
    }

    #[test]
    fn the_line_names_the_outcome_and_the_exit() {
        assert_eq!(
            line(
                "hard_timeout",
                Exit::Code(76),
                "ended at the hard timeout of 2s"
            ),
            "quietus: hard_timeout, exit 76: ended at the hard timeout of 2s"
        );
        assert_eq!(
            line("terminated", Exit::Signal(Signal::TERM), "x"),
            "quietus: terminated, exit 143 (TERM): x"
        );
    }

    #[test]
    fn a_refused_command_lines_path_is_found_before_the_program() {
        let args = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            path_of_refused(&args(&["q", "--termination-message", "/t", "-i", "x"])),
            Some(PathBuf::from("/t"))
        );
        assert_eq!(
            path_of_refused(&args(&["q", "--termination-message=/u", "--", "x"])),
            Some(PathBuf::from("/u"))
        );
        if std::env::var_os("QUIETUS_TERMINATION_MESSAGE").is_none() {
            assert_eq!(
                path_of_refused(&args(&["q", "--", "prog", "--termination-message", "/v"])),
                None
            );
        }
    }

    #[test]
    fn an_existing_file_is_replaced_not_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("termination-log");
        std::fs::write(&path, "an earlier run's much longer line\n").unwrap();
        TerminationMessage::new(&path).write("new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let mut opened = TerminationMessage::new(&path);
        opened.open().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "",
            "emptied at the open"
        );
        opened.write("later").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "later\n");
    }
}
