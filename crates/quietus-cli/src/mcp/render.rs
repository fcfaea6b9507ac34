//! The tools' answers: the structured result and the same as text for a model.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use quietus::{ControlAnswer, MonitorResult, Outcome, SessionSummary, outcome::HumanDuration};
use serde_json::json;

use super::output::Taken;
use super::protocol::ToolOutput;
use super::session::{ExecSession, diagnosis, full_diagnosis, log_of, state_name};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The answer of `exec_command` and `write_stdin`.
pub(crate) fn exec_answer(
    exec: &ExecSession,
    taken: &Taken,
    wall: Duration,
    note: Option<String>,
) -> ToolOutput {
    let result = exec.result();
    let log = log_of(exec, result.as_ref(), taken.total);
    let structured = json!({
        "session_id": exec.id,
        "running": result.is_none(),
        "state": state_name(&exec.session, result.as_ref()),
        "exit_code": result.as_ref().map(MonitorResult::exit_code),
        "outcome": result.as_ref().map(|r| r.outcome.name()),
        "diagnosis": result.as_ref().and_then(diagnosis_json),
        "background_jobs_ended": result.as_ref().map_or_else(Vec::new, background_jobs),
        "advice": advice(exec, result.as_ref()),
        "output": taken.text,
        "output_bytes": taken.bytes,
        "omitted_bytes": taken.omitted,
        "total_output_bytes": taken.total,
        "log": log,
        // observe mode (issue 43)
        "observed": result.as_ref().map_or_else(Vec::new, |r| r
            .observations
            .iter()
            .map(|o| json!({"at_ms": ms(o.at), "outcome": o.would_have_ended.name(),
                            "why": crate::report::ObservedJson::new(o).why}))
            .collect()),
        "wall_time_ms": ms(wall),
        "note": note,
    });
    let text = exec_text(exec, result.as_ref(), &structured, taken);
    ToolOutput {
        structured,
        text,
        is_error: false,
    }
}

/// The text block of `exec_command` and `write_stdin`: the state, what to do next, the
/// output, the log.
fn exec_text(
    exec: &ExecSession,
    result: Option<&MonitorResult>,
    structured: &serde_json::Value,
    taken: &Taken,
) -> String {
    let mut text = match result {
        Some(result) => ended_text(exec, result, structured),
        None => format!(
            "Session {} is still running (after {}); it goes on in the background.\n",
            exec.id,
            HumanDuration(exec.session.uptime()),
        ),
    };
    if let Some(advice) = structured["advice"].as_str() {
        let _ = writeln!(text, "{advice}");
    }
    if let Some(note) = structured["note"].as_str() {
        let _ = writeln!(text, "Note: {note}.");
    }
    output_text(&mut text, structured, taken);
    text
}

/// How the session ended: its outcome and exit code, what was only observed, the stall's
/// diagnosis, and the background jobs ended with it.
fn ended_text(
    exec: &ExecSession,
    result: &MonitorResult,
    structured: &serde_json::Value,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Session {} ended: {} with exit code {} after {}.",
        exec.id,
        outcome_words(result),
        result.exit_code(),
        HumanDuration(result.runtime)
    );
    if let Some(first) = result.observations.first() {
        // observe mode (issue 43)
        let _ = writeln!(
            text,
            "Observed only: quietus would have {} at {} ({} time(s) in all).",
            crate::report::ObservedJson::new(first).why,
            HumanDuration(first.at),
            result.observations.len()
        );
    }
    if let Some(summary) = structured["diagnosis"]["summary"].as_str() {
        let _ = writeln!(text, "Stall diagnosis: {summary}.");
    }
    for job in structured["background_jobs_ended"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            text,
            "Background job ended with it: {} (pid {}): {}",
            job["name"].as_str().unwrap_or("?"),
            job["pid"],
            job["command"].as_str().unwrap_or("")
        );
    }
    text
}

/// The output taken for this answer, and where the complete output is.
fn output_text(text: &mut String, structured: &serde_json::Value, taken: &Taken) {
    if taken.bytes == 0 {
        text.push_str("No new output.\n");
    } else if taken.omitted > 0 {
        let _ = writeln!(
            text,
            "Output ({} bytes, {} left out in the middle):",
            taken.bytes, taken.omitted
        );
    } else {
        let _ = writeln!(text, "Output ({} bytes):", taken.bytes);
    }
    text.push_str(&taken.text);
    let log = &structured["log"];
    if !log.is_null() {
        let _ = write!(
            text,
            "\nThe complete output is in {}",
            log["path"].as_str().unwrap_or("")
        );
        match log["sha256"].as_str() {
            Some(sha) => {
                let _ = write!(text, " ({} bytes, SHA-256 {sha})", log["bytes"]);
            }
            None => text.push_str(" (still being written)"),
        }
        text.push('\n');
    }
}

/// A diagnosis as the structured result has it: its kind, its summary, and every process
/// read (what each does, and the process of the tree each waits on).
fn diagnosis_json(result: &MonitorResult) -> Option<serde_json::Value> {
    let (d, summary) = full_diagnosis(result)?;
    let processes: Vec<serde_json::Value> = d
        .processes
        .iter()
        .map(|p| {
            json!({
                "pid": p.pid.get(),
                "name": p.name,
                "state": p.state,
                "kind": p.kind.name(),
                "syscall": p.syscall,
                "target": p.target.clone().or_else(|| p.error.as_ref().map(ToString::to_string)),
                "waits_on": p.waits_on.map(quietus::Pid::get),
            })
        })
        .collect();
    let kind = match &result.outcome {
        Outcome::InputWait(_) => "awaiting_input",
        _ => d.kind.name(),
    };
    Some(json!({"kind": kind, "summary": summary, "processes": processes}))
}

/// The processes ended after the command's own exit (its background jobs).
fn background_jobs(result: &MonitorResult) -> Vec<serde_json::Value> {
    result
        .leftovers
        .iter()
        .map(|l| json!({"pid": l.pid.get(), "name": l.name, "command": l.command}))
        .collect()
}

/// What the model should do next, in words; `None` for a command that simply exited.
pub(crate) fn advice(exec: &ExecSession, result: Option<&MonitorResult>) -> Option<String> {
    let id = exec.id;
    let Some(result) = result else {
        return Some(format!(
            "It still runs: collect its new output with write_stdin {{\"session_id\": {id}, \
             \"chars\": \"\"}}, type into it with write_stdin, keep it alive or stop it with \
             exec_control."
        ));
    };
    let jobs = || {
        let names: Vec<String> = result
            .leftovers
            .iter()
            .map(|l| format!("{} (pid {})", l.name, l.pid))
            .collect();
        let more = result.leftovers_killed.saturating_sub(names.len());
        let mut list = names.join(", ");
        if more > 0 {
            let _ = write!(list, " and {more} more");
        }
        list
    };
    match &result.outcome {
        Outcome::IdleTimeout(_) | Outcome::InputWait(_) => {
            let kind = full_diagnosis(result).map(|(d, _)| d.kind.name());
            let kind = match &result.outcome {
                Outcome::InputWait(_) => Some("awaiting_input"),
                _ => kind,
            };
            let what = advice_for(kind);
            let idle = match &result.outcome {
                Outcome::IdleTimeout(report) => format!(
                    "after {} without output, file, CPU or network activity",
                    HumanDuration(report.idle_timeout)
                ),
                _ => "because its whole tree was blocked reading input".to_owned(),
            };
            Some(format!(
                "quietus ended it and its whole process tree {idle} (exit code 124). {what}"
            ))
        }
        Outcome::HardTimeout { after } => Some(format!(
            "quietus ended it and its whole process tree at its hard timeout of {} while it \
             was still active: raise hard_timeout_ms, or split the work.",
            HumanDuration(*after)
        )),
        Outcome::Exited if result.leftovers_killed > 0 => Some(format!(
            "Its background jobs were ended when it exited: {}. quietus ends a command's whole \
             process tree with it; to keep a server or a job running, run it in the foreground \
             of a session of its own (exec_command answers with its session_id and it goes \
             on).",
            jobs()
        )),
        Outcome::Terminated { .. } => {
            Some("It was ended on request (exec_control, or the server shutting down).".to_owned())
        }
        _ => None,
    }
}

/// What to do about a stall of diagnosis `kind` (its name), in words.
fn advice_for(kind: Option<&str>) -> &'static str {
    match kind {
        Some("awaiting_input") => {
            "It waited for input nobody gave: run it again with the answer given (a \
             --yes or non-interactive flag, input from a file or a here-document), or \
             with tty: true and answer the prompt with write_stdin."
        }
        Some("network_wait") => {
            "It waited on the network peer the diagnosis names, which never answered: \
             check that server or connection, then retry (with the program's own \
             timeout option if it has one)."
        }
        Some("sleeping") => {
            "It slept or waited for something that never came: see what the process the \
             diagnosis names waits for (a retry loop, a `sleep`, a `wait`), fix that \
             and run it again."
        }
        Some("lock_wait") => {
            "Every thread waited on a lock: a deadlock, or another process holds a lock \
             it needs (another instance still running?)."
        }
        Some("stopped") => {
            "It was stopped by a signal (SIGTTIN/SIGTTOU: it touched the terminal from \
             the background): run it with tty: true, or with its input from a file."
        }
        Some("disk_wait") => {
            "It hung in the kernel on storage (a disk or a network file system): check \
             the storage it uses."
        }
        Some("running") => {
            "It ran on the CPU without output or any visible progress: an endless loop \
             most likely; if it is slow but working, make it print progress or raise \
             idle_timeout_ms."
        }
        _ => {
            "Fix what it waits on (the diagnosis names the processes), or run it \
             differently."
        }
    }
}

/// `exited`, `ended after 5m idle`, `ended at its hard timeout of 2h`…
fn outcome_words(result: &MonitorResult) -> String {
    match &result.outcome {
        Outcome::Exited => "exited".to_owned(),
        Outcome::IdleTimeout(report) => format!(
            "ended by quietus after {} idle (idle_timeout)",
            HumanDuration(report.idle_timeout)
        ),
        Outcome::HardTimeout { after } => format!(
            "ended by quietus at its hard timeout of {} (hard_timeout)",
            HumanDuration(*after)
        ),
        Outcome::InputWait(_) => "ended by quietus: it waited for input (input_wait)".into(),
        Outcome::Terminated { forced: true } => "killed on request (terminated)".into(),
        Outcome::Terminated { forced: false } => "ended on request (terminated)".into(),
        other => other.name().to_owned(),
    }
}

/// `exec_control`'s answer.
pub(crate) fn control(session_id: u32, answer: &ControlAnswer) -> ToolOutput {
    let (status, note, text) = match answer {
        ControlAnswer::Ack => (
            "ack",
            None,
            format!(
                "ack: done for session {session_id}; call write_stdin to see its output and end."
            ),
        ),
        ControlAnswer::NoSuchSession => (
            "no_such_session",
            None,
            format!(
                "no_such_session: no session has session_id {session_id}; list_exec_sessions shows them."
            ),
        ),
        ControlAnswer::AlreadyEnded => (
            "already_terminated",
            None,
            format!("already_terminated: session {session_id} has ended or is being ended."),
        ),
        ControlAnswer::Rejected(note) => (
            "reject",
            Some(note.to_string()),
            format!("reject: nothing was changed: {note}"),
        ),
    };
    ToolOutput {
        structured: json!({"session_id": session_id, "status": status, "note": note}),
        text,
        is_error: matches!(
            answer,
            ControlAnswer::NoSuchSession | ControlAnswer::Rejected(_)
        ),
    }
}

/// A command line on one line, at most 60 characters.
fn preview(cmd: &str) -> String {
    let line: String = cmd
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() <= 60 {
        return line;
    }
    let mut cut: String = line.chars().take(59).collect();
    cut.push('…');
    cut
}

/// `list_exec_sessions`' answer.
pub(crate) fn list(
    summaries: &[SessionSummary],
    sessions: &HashMap<u32, Arc<ExecSession>>,
) -> ToolOutput {
    let mut items = Vec::new();
    let mut lines = Vec::new();
    for summary in summaries {
        let Some(exec) = sessions.get(&summary.id) else {
            continue;
        };
        let result = exec.result();
        let cmd = preview(&exec.cmd);
        let log = summary.log.as_ref().map(|p| p.display().to_string());
        let diagnosis = result.as_ref().and_then(diagnosis).map(|(_, s)| s);
        // The registry's line (its one format), with the shell command as the model wrote it.
        let line = {
            let mut summary = summary.clone();
            summary.command = cmd.clone();
            summary.to_string()
        };
        items.push(json!({
            "session_id": summary.id,
            "state": state_name(&exec.session, result.as_ref()),
            "running": result.is_none(),
            "line": line,
            "cmd": exec.cmd,
            "uptime_ms": ms(summary.uptime),
            "idle_left_ms": summary.idle_left.map(ms),
            "bytes": summary.bytes,
            "log": log,
            "exit_code": result.as_ref().map(MonitorResult::exit_code),
            "outcome": result.as_ref().map(|r| r.outcome.name()),
            "diagnosis": diagnosis,
            "background_jobs_ended": result.as_ref().map_or_else(Vec::new, background_jobs),
            "advice": advice(exec, result.as_ref()),
        }));
        lines.push(line);
    }
    let text = if lines.is_empty() {
        "No sessions.".to_owned()
    } else {
        lines.join("\n")
    };
    ToolOutput {
        structured: json!({"sessions": items, "lines": lines}),
        text,
        is_error: false,
    }
}

/// The level and words of a session's end announcement: "session 3 ended after 5m idle:
/// waiting for input — …".
pub(crate) fn announcement(exec: &ExecSession, result: &MonitorResult) -> (&'static str, String) {
    let id = exec.id;
    let cmd = preview(&exec.cmd);
    match &result.outcome {
        Outcome::IdleTimeout(report) => {
            let why = diagnosis(result).map_or_else(
                || "no activity of any kind".to_owned(),
                |(_, summary)| summary,
            );
            (
                "warning",
                format!(
                    "session {id} ended after {} idle: {why} (cmd: {cmd})",
                    HumanDuration(report.idle_timeout)
                ),
            )
        }
        Outcome::InputWait(_) => (
            "warning",
            format!(
                "session {id} ended: {} (cmd: {cmd})",
                diagnosis(result).map(|(_, s)| s).unwrap_or_default()
            ),
        ),
        Outcome::HardTimeout { after } => (
            "warning",
            format!(
                "session {id} ended at its hard timeout of {} (cmd: {cmd})",
                HumanDuration(*after)
            ),
        ),
        _ => (
            "info",
            format!(
                "session {id} {} with exit code {} after {} (cmd: {cmd})",
                result.outcome.name(),
                result.exit_code(),
                HumanDuration(result.runtime)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_answers_carry_their_status() {
        let out = control(3, &ControlAnswer::Ack);
        assert_eq!(out.structured["status"], "ack");
        assert!(!out.is_error);
        let out = control(9, &ControlAnswer::NoSuchSession);
        assert_eq!(
            out.structured,
            json!({"session_id": 9, "status": "no_such_session", "note": null})
        );
        assert!(out.is_error);
        let out = control(3, &ControlAnswer::AlreadyEnded);
        assert_eq!(out.structured["status"], "already_terminated");
        let out = control(
            3,
            &ControlAnswer::Rejected(quietus::error::Rejection::InvalidSetting(
                quietus::ConfigError::EmptyLadder,
            )),
        );
        assert_eq!(
            out.structured["note"],
            quietus::ConfigError::EmptyLadder.to_string()
        );
        assert!(out.text.starts_with("reject:"));
    }
}
