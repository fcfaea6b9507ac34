//! `quietus mcp` driven by the official MCP Python SDK client (the `mcp` package from PyPI).
//!
//! The first test to run makes a virtual environment under `target/` (`python3 -m venv`, then
//! `pip install mcp`) and the others reuse it; it is kept between runs while it still imports.
//! Each test runs one case of `tests/mcp/client.py` against the binary under test, with the
//! test's unique marker in the server's environment, then proves that nothing carrying the
//! marker is left (the server and every session's tree). Without PyPI (or python3 with venv)
//! the tests FAIL and say why: the official client is what proves conformance.

#[path = "../support/mod.rs"]
mod support;

mod docs;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use support::{Marker, assert_no_leak, poll_until};

/// The venv's python, made once per test run (or reused).
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
        let python = venv.join("bin/python");
        if imports(&python) {
            return python;
        }
        make_venv(&venv);
        assert!(
            imports(&python),
            "the venv {} was made but `import mcp, jsonschema` fails in it",
            venv.display()
        );
        python
    })
}

/// Whether `python` runs and has the SDK and jsonschema.
fn imports(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import mcp, jsonschema, mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `python3 -m venv` into a fresh folder, `pip install mcp`, then moves it to `venv`.
fn make_venv(venv: &Path) {
    let fresh = venv.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&fresh)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (needed for the MCP client tests): {e}"));
    assert!(
        made.status.success(),
        "python3 -m venv failed (on Debian/Ubuntu install python3-venv; .ci/run does): {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(fresh.join("bin/pip"))
        .args([
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "--timeout",
            "60",
            "mcp",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run the venv's pip: {e}"));
    assert!(
        pip.status.success(),
        "`pip install mcp` failed, so the official MCP Python SDK is not available and these \
         tests cannot prove conformance. Is PyPI reachable from here (a proxy: set HTTPS_PROXY \
         or PIP_INDEX_URL)?\n{}{}",
        String::from_utf8_lossy(&pip.stdout),
        String::from_utf8_lossy(&pip.stderr)
    );
    let _ = std::fs::remove_dir_all(venv);
    if std::fs::rename(&fresh, venv).is_err() {
        // Another test process made it meanwhile: use theirs.
        let _ = std::fs::remove_dir_all(&fresh);
    }
}

/// How long one case may take at most (its own checks have 60 s deadlines) before the test
/// kills the client it started and fails.
const CASE_LIMIT: Duration = Duration::from_secs(300);

/// Runs one case of `client.py`, then proves that nothing with the marker is left.
fn case(name: &str) {
    let python = python();
    let marker = Marker::new(name);
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let (out, err) = (scratch.path().join("out"), scratch.path().join("err"));
    let mut child = Command::new(python)
        .arg(&script)
        .arg(name)
        .arg(env!("CARGO_BIN_EXE_quietus"))
        .arg(marker.as_str())
        .arg(scratch.path())
        .env_remove(support::MARKER_ENV)
        .stdout(File::create(&out).expect("stdout file"))
        .stderr(File::create(&err).expect("stderr file"))
        .spawn()
        .expect("run the python client");
    let finished = poll_until(CASE_LIMIT, || child.try_wait().ok().flatten().is_some());
    if !finished {
        let _ = child.kill();
    }
    let status = child.wait().expect("the client is reaped");
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(
        finished && status.success(),
        "case {name} failed ({status}{}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        if finished {
            ""
        } else {
            ", killed after the limit"
        }
    );
    assert_eq!(stdout.trim(), format!("{name}: ok"), "{stderr}");
    // The client has gone: the server and every session's tree must be gone too.
    assert_no_leak(&marker);
}

#[test]
fn initialize_and_list_tools() {
    case("initialize_and_list_tools");
}

#[test]
fn quick_command() {
    case("quick_command");
}

#[test]
fn long_command_continued() {
    case("long_command_continued");
}

#[test]
fn tty_prompt() {
    case("tty_prompt");
}

#[test]
fn stalled_command() {
    case("stalled_command");
}

#[test]
fn observed_command() {
    case("observed_command");
}

#[test]
fn controls() {
    case("controls");
}

#[test]
fn large_output() {
    case("large_output");
}

#[test]
fn client_disconnects() {
    case("client_disconnects");
}

#[test]
fn malformed_calls() {
    case("malformed_calls");
}

#[test]
fn what_the_model_is_told() {
    case("what_the_model_is_told");
}

#[test]
fn calls_fit_the_clients_limits() {
    case("calls_fit_the_clients_limits");
}

#[test]
fn announcements() {
    case("announcements");
}

/// A client that sends its requests and closes its end of the server's stdin at once, reading
/// on (`printf … | quietus mcp`): every request is answered before the server exits, the
/// call still running when the input ended included (its session ended by the shutdown).
#[test]
fn requests_sent_before_the_end_of_input_are_all_answered() {
    use std::io::Write;
    let marker = Marker::new("mcp_end_of_input");
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec_command","arguments":{"cmd":"echo hi; exit 3"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec_command","arguments":{"cmd":"echo started; exec sleep 600","yield_time_ms":60000}}}"#,
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_quietus"))
        .arg("mcp")
        .env(support::MARKER_ENV, marker.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut stdin = child.stdin.take().expect("piped");
    for line in lines {
        writeln!(stdin, "{line}").expect("the server reads");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("the server ends");
    assert!(output.status.success(), "{:?}", output.status);
    let answers: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let by_id = |id: u64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer to request {id}: {answers:#?}"))
    };
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-03-26");
    // 2025-03-26: the text block only.
    let quick = &by_id(2)["result"];
    assert_eq!(quick["isError"], false, "{quick}");
    assert!(quick.get("structuredContent").is_none(), "{quick}");
    let long = by_id(3)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    // Ended by the shutdown, perhaps before its shell printed anything (a loaded machine).
    assert!(long.contains("ended on request (terminated)"), "{long}");
    assert_eq!(answers.len(), 3, "{answers:#?}");
    assert_no_leak(&marker);
}

/// A request the client cancelled (`notifications/cancelled`) gets no answer, as the MCP
/// specification asks (issue 51, point 11); its output stays for the next call. Raw JSON-RPC
/// over the server's stdio: the call waits on a silent command, the client cancels it, then
/// closes its end; every line the server wrote up to its exit is read, and none answers the
/// cancelled request, while the request sent after it is answered.
#[test]
fn a_cancelled_request_is_not_answered() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let marker = Marker::new("mcp_cancelled");
    let mut server = Command::new(env!("CARGO_BIN_EXE_quietus"))
        .arg("mcp")
        .env(support::MARKER_ENV, marker.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("quietus mcp starts");
    let mut stdin = server.stdin.take().expect("piped");
    let mut lines = BufReader::new(server.stdout.take().expect("piped")).lines();
    let mut send = |line: serde_json::Value| {
        writeln!(stdin, "{line}").expect("the server reads");
        stdin.flush().expect("the server reads");
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    let initialized = lines.next().expect("an answer").expect("a line");
    assert!(initialized.contains("\"id\":1"), "{initialized}");
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "exec_command",
        "arguments": {"cmd": "echo started; exec sleep 1000", "yield_time_ms": 25000}}}),
    );
    send(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the client gave up"}}),
    );
    send(serde_json::json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    let mut seen: Vec<serde_json::Value> = Vec::new();
    while !seen.iter().any(|m| m["id"] == 8) {
        let line = lines
            .next()
            .expect("the answer to the ping")
            .expect("a line");
        seen.push(serde_json::from_str(&line).expect("JSON"));
    }
    // Closing stdin ends the server: it ends its sessions and waits for the calls under way.
    drop(stdin);
    seen.extend(lines.map(|l| serde_json::from_str(&l.expect("a line")).expect("JSON")));
    assert!(server.wait().expect("reaped").success());
    let answers: Vec<_> = seen.iter().filter(|m| m["id"] == 7).collect();
    assert!(
        answers.is_empty(),
        "the cancelled request was answered: {answers:#?}"
    );
    assert_no_leak(&marker);
}
