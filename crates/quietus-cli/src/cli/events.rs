//! `--events FILE`: the session's event stream as JSON Lines, written by a thread of its own.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::thread::JoinHandle;

use quietus::{Event, EventReceiver, Signal};
use serde::Serialize;

/// One line of the stream. Names follow the `--report` fields.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line {
    Started {
        pid: u32,
        pgid: u32,
    },
    Output {
        stream: &'static str,
        seq: u64,
        /// The bytes as text (invalid UTF-8 replaced).
        text: String,
        /// How many bytes the event carried.
        bytes: usize,
        truncated: bool,
    },
    Activity {
        source: String,
    },
    IdleWarning {
        left_ms: u64,
    },
    Completed {
        trigger: &'static str,
        stream: Option<&'static str>,
        matched: String,
        after_ms: u64,
    },
    Signal {
        signal: String,
        step: usize,
    },
    Diagnosis(crate::report::DiagnosisJson),
    InputWait {
        pid: u32,
        name: String,
        target: String,
        waited_ms: u64,
    },
    /// Observe mode (issue 43): quietus would have ended the run now.
    Observed(crate::report::ObservedJson),
    Exited {
        outcome: &'static str,
        exit_code: Option<i32>,
        signal: Option<i32>,
        signal_name: Option<String>,
    },
    Closed,
}

fn line(event: Event) -> Option<Line> {
    Some(match event {
        Event::Started { pid, pgid } => Line::Started {
            pid: pid.get(),
            pgid: pgid.get(),
        },
        Event::Output {
            stream,
            seq,
            bytes,
            truncated,
        } => Line::Output {
            stream: stream.name(),
            seq,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            bytes: bytes.len(),
            truncated,
        },
        Event::Activity { source } => Line::Activity {
            source: source.name().to_owned(),
        },
        Event::IdleWarning { left } => Line::IdleWarning {
            left_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
        },
        Event::Completed { seen } => Line::Completed {
            trigger: seen.name(),
            stream: seen.stream().map(|s| s.name()),
            matched: seen.matched(),
            after_ms: u64::try_from(seen.after().as_millis()).unwrap_or(u64::MAX),
        },
        Event::Signal { signal, step } => Line::Signal {
            signal: signal.name(),
            step,
        },
        Event::Exited { outcome, status } => {
            use std::os::unix::process::ExitStatusExt;
            let signal = status.and_then(|s| s.signal());
            Line::Exited {
                outcome: outcome.name(),
                exit_code: status.and_then(|s| s.code()),
                signal,
                signal_name: signal.and_then(Signal::from_number).map(|s| s.name()),
            }
        }
        Event::Diagnosis(d) => Line::Diagnosis(crate::report::DiagnosisJson::new(&d)),
        Event::InputWait(wait) => Line::InputWait {
            pid: wait.pid.get(),
            name: wait.name,
            target: wait.target,
            waited_ms: u64::try_from(wait.waited.as_millis()).unwrap_or(u64::MAX),
        },
        Event::Observed(observation) => {
            Line::Observed(crate::report::ObservedJson::new(&observation))
        }
        Event::Closed => Line::Closed,
        _ => return None,
    })
}

/// Where the lines go.
pub(crate) enum Target {
    File(File),
    Stderr,
}

impl Target {
    /// Opens `path` (`-`: stderr), created or emptied, before the program starts.
    pub(crate) fn open(path: &Path) -> io::Result<Target> {
        if path.as_os_str() == "-" {
            return Ok(Target::Stderr);
        }
        super::report_file::open_for_writing(path, "--events").map(Target::File)
    }
}

/// Starts the writer (to `target`, if any); it ends after `Closed`. Join it before exiting so
/// the file is complete. With `say_observed` (observe mode, issue 43), each observation is
/// also said on stderr at the moment (`quietus: would have ended …`).
pub(crate) fn start(
    target: Option<Target>,
    mut events: EventReceiver,
    say_observed: bool,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("quietus-events".into())
        .spawn(move || {
            let mut out: Box<dyn Write> = match target {
                Some(Target::File(file)) => Box::new(BufWriter::new(file)),
                Some(Target::Stderr) => Box::new(io::stderr()),
                None => Box::new(io::sink()),
            };
            for event in events.iter() {
                if let (true, Event::Observed(observation)) = (say_observed, &event) {
                    let said = crate::report::observed_line(observation);
                    let mut stderr = io::stderr().lock();
                    let _ = stderr.write_all(format!("{said}\n").as_bytes());
                }
                let Some(line) = line(event) else { continue };
                let written = serde_json::to_writer(&mut out, &line)
                    .map_err(io::Error::other)
                    .and_then(|()| out.write_all(b"\n"))
                    .and_then(|()| out.flush());
                if let Err(e) = written {
                    log::warn!("cannot write the event stream: {e}; it stops here");
                    return;
                }
            }
        })
}
