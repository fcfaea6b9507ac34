//! The report of a run, shared by the command (`--report`, the summary line, the event
//! stream's entries), `serve` (`process/wait`'s answer) and `mcp` (observe mode's entries):
//! the JSON report ([`Report`]) and its parts here; the exit status and the lines in words in
//! `words`.

use std::time::Duration;

use quietus::supervisor::SupervisorDeath;
use quietus::{
    ActivitySource, MonitorConfig, MonitorResult, Outcome, Signal, outcome::Observation,
};
use serde::Serialize;

mod words;

use words::why_ended;
pub(crate) use words::{
    Exit, ExitCodes, Received, error_chain, exit_for, observed_line, observed_summary, summary,
    with_relay,
};

/// The report's and the events' entry of an observation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ObservedJson {
    /// When, after the start.
    pub(crate) at_ms: u64,
    /// The outcome the run would have had: `idle_timeout`, `hard_timeout`, `input_wait` or
    /// `completed`.
    pub(crate) outcome: &'static str,
    /// Why, in the summary line's words (`ended after 3s idle (output 3s idle): …`).
    pub(crate) why: String,
    /// How long each source had been idle (`idle_timeout`), else null.
    pub(crate) idle_ms: Option<IdleMs>,
    /// The sources past their solo cap then (`idle_timeout`).
    pub(crate) capped: Vec<String>,
    /// What the tree was doing (`idle_timeout`, `input_wait`), else null.
    pub(crate) diagnosis: Option<DiagnosisJson>,
}

impl ObservedJson {
    pub(crate) fn new(observation: &Observation) -> ObservedJson {
        let outcome = &observation.would_have_ended;
        let report = match outcome {
            Outcome::IdleTimeout(report) => Some(report),
            _ => None,
        };
        ObservedJson {
            at_ms: ms(observation.at),
            outcome: outcome.name(),
            why: why_ended(outcome, &Received::default()).unwrap_or_default(),
            idle_ms: report.map(|r| idle_ms_of(&r.sources)),
            capped: report
                .map(|r| r.capped.iter().map(|s| s.name().to_owned()).collect())
                .unwrap_or_default(),
            diagnosis: outcome.diagnosis().map(DiagnosisJson::new),
        }
    }
}

/// How long each built-in source had been idle.
fn idle_ms_of(sources: &[quietus::outcome::SourceActivity]) -> IdleMs {
    let mut idle_ms = IdleMs::default();
    for s in sources {
        let idle = match s.source {
            ActivitySource::Output => &mut idle_ms.output,
            ActivitySource::Files => &mut idle_ms.files,
            ActivitySource::Children => &mut idle_ms.children,
            ActivitySource::RepeatedOutput => &mut idle_ms.repeated_output,
            ActivitySource::Network => &mut idle_ms.network,
            _ => continue,
        };
        *idle = Some(ms(s.idle));
    }
    idle_ms
}

/// The JSON report of `--report`. Durations in milliseconds; signals by name, the death
/// signal also by number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    /// `exited`, `idle_timeout`, `hard_timeout`, `completed`, `terminated`, or `not_started` when the
    /// program could not be run.
    pub(crate) outcome: &'static str,
    /// quietus's own exit status, as a shell shows it (`$?`).
    pub(crate) exit_code: i32,
    /// The signal the child died of (number), or null.
    pub(crate) signal: Option<i32>,
    /// Its name (`TERM`), or null.
    pub(crate) signal_name: Option<String>,
    /// The first signal quietus itself received and passed on, or null.
    pub(crate) received_signal: Option<String>,
    /// From the spawn to the end of the run.
    pub(crate) duration_ms: u64,
    /// How long each source had been idle at the end; null when it was turned off.
    pub(crate) idle_ms: IdleMs,
    /// How many activity events each source recorded; null when it was turned off.
    pub(crate) activity_count: ActivityCount,
    /// What the sources that were on could not observe: every watched folder that could not
    /// be watched (or a watched path that is a file), with why and for how long.
    pub(crate) unavailable: Vec<Unavailable>,
    /// The kill ladder, when one ran.
    pub(crate) ladder: Ladder,
    /// How the tree was held (null when the program did not start).
    pub(crate) containment: Option<ContainmentReport>,
    /// The tree's memory peak in bytes, where its cgroup had the memory controller; else null.
    pub(crate) memory_peak_bytes: Option<u64>,
    /// Processes of the tree the OOM killer ended, where its cgroup had the memory controller.
    pub(crate) oom_kills: Option<u64>,
    /// Leftover group members ended after the child's own exit.
    pub(crate) leftovers_killed: usize,
    /// Those processes (background jobs), named before they were ended.
    pub(crate) leftovers: Vec<LeftoverJson>,
    /// KILL was sent but the tree could not be confirmed gone.
    pub(crate) termination_unproven: bool,
    /// Whether both output pipes reached end-of-file.
    pub(crate) output_complete: bool,
    /// Bytes read from the program.
    pub(crate) bytes: Bytes,
    /// Bytes of them written to quietus's own stdout and stderr.
    pub(crate) delivered: Bytes,
    /// Why writing to quietus's stdout or stderr failed (not a broken pipe), or null.
    pub(crate) pass_through_errors: PassThroughErrors,
    /// How long writing the program's output to quietus's stdout and stderr waited on their
    /// readers (the program, blocked on a full pipe meanwhile, was not idle).
    pub(crate) output_held_back_ms: u64,
    /// The complete logs of the streams that passed 4 KiB, with their SHA-256.
    pub(crate) log: Vec<LogEntry>,
    /// What the tree was doing when it was judged stale (`idle_timeout`) or waiting on input
    /// (`input_wait`), or null.
    pub(crate) diagnosis: Option<DiagnosisJson>,
    /// The child's pid (and process group), or null when it never started.
    pub(crate) pid: Option<u32>,
    /// PROGRAM and its arguments (lossy UTF-8).
    pub(crate) command: Vec<String>,
    /// The limits in force.
    pub(crate) idle_timeout_ms: u64,
    /// The hard timeout, or null.
    pub(crate) hard_timeout_ms: Option<u64>,
    /// Completion, when it was seen (`--done-when-output`, `--done-when-file`), or null.
    pub(crate) completion: Option<Completion>,
    /// The sources that were past their solo cap when the program was judged stale.
    pub(crate) capped: Vec<String>,
    /// Observe mode (`--observe`): every moment quietus would have ended the run, in order
    /// (the first 100).
    pub(crate) observed: Vec<ObservedJson>,
    /// Observe mode: how many observations came after the first 100 (not listed).
    pub(crate) observed_dropped: u64,
    /// Each `--probe`: how long it had been idle at the end and how many times it said yes.
    pub(crate) probes: Vec<ProbeEntry>,
    /// Why the program could not be run (`not_started` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The quietus version that wrote the report.
    pub(crate) quietus_version: &'static str,
}

/// How the tree was held: `{"backend": "cgroup", "cgroup": "/sys/fs/cgroup/…",
/// "why_not_cgroup": null}` or `{"backend": "group", "cgroup": null, "why_not_cgroup": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ContainmentReport {
    /// `cgroup` or `group`.
    pub(crate) backend: &'static str,
    /// The session's cgroup (removed by now), or null.
    pub(crate) cgroup: Option<String>,
    /// Under `--containment auto`, why no cgroup could be made; else null.
    pub(crate) why_not_cgroup: Option<String>,
    /// What would have ended the tree had quietus been killed: `guardian`, `leader_only`
    /// (only the parent-death signal), `nothing`, or `not_needed`.
    pub(crate) supervisor_death: &'static str,
    /// Why there was no guardian (`leader_only`); else null.
    pub(crate) why_no_guardian: Option<String>,
}

impl ContainmentReport {
    fn of(result: &MonitorResult) -> Self {
        let (supervisor_death, why_no_guardian) = match &result.supervisor_death {
            SupervisorDeath::Guardian => ("guardian", None),
            SupervisorDeath::LeaderOnly { why_no_guardian } => {
                ("leader_only", Some(why_no_guardian.to_string()))
            }
            SupervisorDeath::Nothing => ("nothing", None),
            _ => ("not_needed", None),
        };
        ContainmentReport {
            backend: result.containment.as_str(),
            cgroup: result.cgroup.as_ref().map(|p| p.display().to_string()),
            why_not_cgroup: result.why_not_cgroup.as_ref().map(ToString::to_string),
            supervisor_death,
            why_no_guardian,
        }
    }
}

/// A process ended after the program's own exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LeftoverJson {
    pub(crate) pid: u32,
    pub(crate) name: String,
    pub(crate) command: String,
}

/// A diagnosis as the report and the event stream show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DiagnosisJson {
    /// `awaiting_input`, `network_wait`, `sleeping`, `stopped`, `waiting_on_child`,
    /// `lock_wait`, `disk_wait`, `running` or `unknown`.
    pub(crate) kind: &'static str,
    /// One line for people.
    pub(crate) summary: String,
    /// Every process read, the child first.
    pub(crate) processes: Vec<ProcessJson>,
}

/// One process of a diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProcessJson {
    pub(crate) pid: u32,
    pub(crate) name: String,
    pub(crate) state: &'static str,
    pub(crate) wchan: Option<String>,
    pub(crate) syscall: Option<String>,
    pub(crate) fd: Option<i32>,
    pub(crate) target: Option<String>,
    /// What this process alone is doing (a kind, as the diagnosis's).
    pub(crate) kind: &'static str,
    /// The process of the tree it waits on (its child, the writer of the pipe it reads…).
    pub(crate) waits_on: Option<u32>,
}

impl DiagnosisJson {
    pub(crate) fn new(d: &quietus::diagnosis::Diagnosis) -> DiagnosisJson {
        DiagnosisJson {
            kind: d.kind.name(),
            summary: d.summary.clone(),
            processes: d
                .processes
                .iter()
                .map(|p| ProcessJson {
                    pid: p.pid.get(),
                    name: p.name.clone(),
                    state: p.state,
                    wchan: p.wchan.clone(),
                    syscall: p.syscall.clone(),
                    fd: p.fd,
                    target: p
                        .target
                        .clone()
                        .or_else(|| p.error.as_ref().map(ToString::to_string)),
                    kind: p.kind.name(),
                    waits_on: p.waits_on.map(quietus::Pid::get),
                })
                .collect(),
        }
    }
}

/// Milliseconds each source had been idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct IdleMs {
    pub(crate) output: Option<u64>,
    pub(crate) files: Option<u64>,
    pub(crate) children: Option<u64>,
    pub(crate) network: Option<u64>,
    /// Only when repeated output is told apart (`--solo-cap repeated_output=D`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repeated_output: Option<u64>,
}

/// Activity events per source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct ActivityCount {
    pub(crate) output: Option<u64>,
    pub(crate) files: Option<u64>,
    pub(crate) children: Option<u64>,
    pub(crate) network: Option<u64>,
    /// Only when repeated output is told apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repeated_output: Option<u64>,
}

/// One probe at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProbeEntry {
    pub(crate) name: String,
    pub(crate) idle_ms: u64,
    pub(crate) activity_count: u64,
}

/// Completion as it was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Completion {
    /// `output` (a line matched), `file` (a file appeared or changed).
    pub(crate) trigger: &'static str,
    /// The stream of the line, or null for a file.
    pub(crate) stream: Option<&'static str>,
    /// The line (at most 1 KiB), or the file's path.
    pub(crate) matched: String,
    /// When, after the start.
    pub(crate) after_ms: u64,
}

/// Something a source could not observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Unavailable {
    /// The source (`files`).
    pub(crate) source: String,
    /// The path that was not watched, or null when the whole source observed nothing.
    pub(crate) path: Option<String>,
    /// Why, as the system said it, or null.
    pub(crate) reason: Option<String>,
    /// How long it went unobserved in total, or null when not known.
    pub(crate) unwatched_ms: Option<u64>,
    /// Whether it was still unobserved at the end of the run.
    pub(crate) at_end: bool,
}

/// The kill ladder as it ran.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Ladder {
    /// Every signal sent to the tree, in order (`["TERM", "KILL"]`).
    pub(crate) signals_sent: Vec<String>,
    /// Whether it went as far as KILL.
    pub(crate) escalated: bool,
    /// Whether KILL came at once on a second INT.
    pub(crate) forced: bool,
    /// From the first signal to the tree confirmed gone, or null.
    pub(crate) duration_ms: Option<u64>,
}

/// One complete log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LogEntry {
    /// `stdout`, `stderr` or `combined`.
    pub(crate) stream: &'static str,
    /// Where it is.
    pub(crate) path: String,
    /// Lower-case hex SHA-256 of every byte read from the stream (the complete log).
    pub(crate) sha256: String,
    /// Bytes read from the stream (the complete log's length).
    pub(crate) bytes: u64,
    /// Bytes the file holds (`bytes` unless writing failed).
    pub(crate) written: u64,
    /// Whether it lacks part of the stream (not created, a write failed, or the stream was
    /// still open at the end).
    pub(crate) incomplete: bool,
    /// Why it is incomplete, or null.
    pub(crate) error: Option<String>,
}

/// Byte counts per stream: `{"stdout": N, "stderr": N}`, or a terminal session's one stream,
/// `{"terminal": N}`, as the logs and the events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Bytes {
    /// The stdout's count, or the terminal's.
    pub(crate) stdout: u64,
    pub(crate) stderr: u64,
    /// The counts are a terminal session's (its one stream is in `stdout`).
    pub(crate) terminal: bool,
}

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.terminal {
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry("terminal", &self.stdout)?;
            map.end()
        } else {
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry("stdout", &self.stdout)?;
            map.serialize_entry("stderr", &self.stderr)?;
            map.end()
        }
    }
}

/// Why passing a stream through failed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub(crate) struct PassThroughErrors {
    pub(crate) stdout: Option<String>,
    pub(crate) stderr: Option<String>,
}

/// The pass-through at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Relay {
    /// Bytes read from the program.
    pub(crate) read: Bytes,
    /// Bytes written to quietus's stdout and stderr.
    pub(crate) delivered: Bytes,
    /// Why a stream's delivery stopped.
    pub(crate) errors: PassThroughErrors,
    /// How long the delivery waited on quietus's stdout and stderr readers.
    pub(crate) held_back: Duration,
}

impl Relay {
    /// What `session` read from its program and passed on, and why a stream's passing on
    /// stopped, once the run is over.
    pub(crate) fn of(session: &quietus::Session) -> Relay {
        use quietus::Stream;
        let terminal = session.is_terminal();
        Relay {
            read: Bytes {
                stdout: session.output_bytes(Stream::Stdout),
                stderr: session.output_bytes(Stream::Stderr),
                terminal,
            },
            delivered: Bytes {
                stdout: session.delivered_bytes(Stream::Stdout),
                stderr: session.delivered_bytes(Stream::Stderr),
                terminal,
            },
            errors: PassThroughErrors {
                stdout: session.sink_error(Stream::Stdout).map(|e| e.to_string()),
                stderr: session.sink_error(Stream::Stderr).map(|e| e.to_string()),
            },
            held_back: session.output_held_back(),
        }
    }

    /// Whether writing a stream through failed.
    pub(crate) fn failed(&self) -> bool {
        self.errors.stdout.is_some() || self.errors.stderr.is_some()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Everything the report needs besides the result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) config: &'a MonitorConfig,
    pub(crate) command: &'a [std::ffi::OsString],
}

/// The report's `log`: one entry per stream that was logged.
fn log_entries(result: &MonitorResult) -> Vec<LogEntry> {
    result
        .logs
        .iter()
        .map(|l| LogEntry {
            stream: l.stream.name(),
            path: l.path.display().to_string(),
            sha256: l.sha256.clone(),
            bytes: l.bytes,
            written: l.written,
            incomplete: l.incomplete,
            error: l.error.as_ref().map(ToString::to_string),
        })
        .collect()
}

/// The report's `probes`: each probe's idle time and activity count.
fn probe_entries(result: &MonitorResult) -> Vec<ProbeEntry> {
    result
        .activity
        .iter()
        .filter_map(|s| match &s.source {
            ActivitySource::Probe(name) => Some(ProbeEntry {
                name: name.to_string(),
                idle_ms: ms(s.idle),
                activity_count: s.events,
            }),
            _ => None,
        })
        .collect()
}

impl Report {
    /// The report of a finished run.
    pub(crate) fn finished(
        context: Context<'_>,
        result: &MonitorResult,
        received: &Received,
        exit: Exit,
        relay: &Relay,
    ) -> Report {
        let (idle_ms, activity_count, unavailable) = source_fields(result);
        Report {
            outcome: result.outcome.name(),
            exit_code: exit.code(),
            signal: result.signal().map(Signal::number),
            // Named only when it is a standard signal (a real-time one has its number only).
            signal_name: result
                .signal()
                .and_then(|s| Signal::from_number(s.number()))
                .map(|s| s.name()),
            received_signal: received.first.map(|s| s.name()),
            duration_ms: ms(result.runtime),
            idle_ms,
            activity_count,
            unavailable,
            ladder: Ladder {
                signals_sent: result.signals_sent.iter().map(|s| s.name()).collect(),
                escalated: result.escalated,
                forced: received.forced && result.escalated,
                duration_ms: result.ladder_time.map(ms),
            },
            containment: Some(ContainmentReport::of(result)),
            memory_peak_bytes: result.memory_peak,
            oom_kills: result.oom_kills,
            leftovers_killed: result.leftovers_killed,
            leftovers: result
                .leftovers
                .iter()
                .map(|l| LeftoverJson {
                    pid: l.pid.get(),
                    name: l.name.clone(),
                    command: l.command.clone(),
                })
                .collect(),
            termination_unproven: result.termination_unproven,
            output_complete: result.output_complete,
            bytes: relay.read,
            delivered: relay.delivered,
            pass_through_errors: relay.errors.clone(),
            output_held_back_ms: ms(relay.held_back),
            log: log_entries(result),
            diagnosis: match &result.outcome {
                Outcome::IdleTimeout(report) => report.diagnosis.as_ref().map(DiagnosisJson::new),
                Outcome::InputWait(wait) => Some(DiagnosisJson::new(&wait.diagnosis)),
                _ => None,
            },
            pid: Some(result.pid.get()),
            command: lossy(context.command),
            idle_timeout_ms: ms(context.config.idle_timeout()),
            hard_timeout_ms: context.config.hard_timeout().map(ms),
            completion: result.completion.as_ref().map(|seen| Completion {
                trigger: seen.name(),
                stream: seen.stream().map(|s| s.name()),
                matched: seen.matched(),
                after_ms: ms(seen.after()),
            }),
            probes: probe_entries(result),
            capped: match &result.outcome {
                Outcome::IdleTimeout(report) => {
                    report.capped.iter().map(|s| s.name().to_owned()).collect()
                }
                _ => Vec::new(),
            },
            observed: result.observations.iter().map(ObservedJson::new).collect(),
            observed_dropped: result.observations_dropped,
            error: None,
            quietus_version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// The report when the program could not be run at all.
    pub(crate) fn not_started(context: Context<'_>, exit_code: i32, error: String) -> Report {
        Report {
            outcome: "not_started",
            exit_code,
            signal: None,
            signal_name: None,
            received_signal: None,
            duration_ms: 0,
            idle_ms: IdleMs::default(),
            activity_count: ActivityCount::default(),
            unavailable: Vec::new(),
            ladder: Ladder::default(),
            containment: None,
            memory_peak_bytes: None,
            oom_kills: None,
            leftovers_killed: 0,
            leftovers: Vec::new(),
            termination_unproven: false,
            output_complete: true,
            bytes: Bytes::default(),
            delivered: Bytes::default(),
            pass_through_errors: PassThroughErrors::default(),
            output_held_back_ms: 0,
            log: Vec::new(),
            diagnosis: None,
            pid: None,
            command: lossy(context.command),
            idle_timeout_ms: ms(context.config.idle_timeout()),
            hard_timeout_ms: context.config.hard_timeout().map(ms),
            completion: None,
            capped: Vec::new(),
            observed: Vec::new(),
            observed_dropped: 0,
            probes: Vec::new(),
            error: Some(error),
            quietus_version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// What the sources saw, for the report: how long each had been idle and how many activity
/// events it recorded (null when it was off), and what could not be observed.
fn source_fields(result: &MonitorResult) -> (IdleMs, ActivityCount, Vec<Unavailable>) {
    let mut idle_ms = IdleMs::default();
    let mut activity_count = ActivityCount::default();
    let mut unavailable = Vec::new();
    for s in &result.activity {
        let (idle, count) = match s.source {
            ActivitySource::Output => (&mut idle_ms.output, &mut activity_count.output),
            ActivitySource::Files => (&mut idle_ms.files, &mut activity_count.files),
            ActivitySource::Children => (&mut idle_ms.children, &mut activity_count.children),
            ActivitySource::RepeatedOutput => (
                &mut idle_ms.repeated_output,
                &mut activity_count.repeated_output,
            ),
            ActivitySource::Network => (&mut idle_ms.network, &mut activity_count.network),
            _ => continue,
        };
        *idle = Some(ms(s.idle));
        *count = Some(s.events);
        if !s.available && s.source != ActivitySource::Files {
            unavailable.push(Unavailable {
                source: s.source.name().to_owned(),
                path: None,
                reason: match s.source {
                    ActivitySource::Network => {
                        result.network_unavailable.as_ref().map(ToString::to_string)
                    }
                    ActivitySource::Children => result
                        .children_unavailable
                        .as_ref()
                        .map(ToString::to_string),
                    _ => None,
                },
                unwatched_ms: None,
                at_end: true,
            });
        }
    }
    for gap in &result.unwatched {
        unavailable.push(Unavailable {
            source: ActivitySource::Files.name().to_owned(),
            path: Some(gap.path.display().to_string()),
            reason: Some(gap.reason.to_string()),
            unwatched_ms: Some(ms(gap.duration)),
            at_end: gap.still,
        });
    }
    let files_blind = result
        .activity
        .iter()
        .any(|s| s.source == ActivitySource::Files && !s.available);
    if files_blind && result.unwatched.iter().all(|gap| !gap.still) {
        unavailable.push(Unavailable {
            source: ActivitySource::Files.name().to_owned(),
            path: None,
            reason: None,
            unwatched_ms: None,
            at_end: true,
        });
    }
    (idle_ms, activity_count, unavailable)
}

fn lossy(words: &[std::ffi::OsString]) -> Vec<String> {
    words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect()
}
