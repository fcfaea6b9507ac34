//! `Program`: the child started without a fork of the supervisor sees what a `Command`'s child
//! sees — arguments, environment (isolated or not), working directory, stdin (piped,
//! inherited, /dev/null), the combined stream, its session when detached — and a program that
//! cannot run fails as a `Command`'s does.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::collections::BTreeMap;
use std::io;
use std::process::Command;

use common::{MARKER_ENV, Marker, assert_no_leak, wait_generously};
use quietus::{
    CaptureConfig, ConfigError, Environment, MonitorConfig, Program, Session, SessionBuilder,
    SpawnError, Stdin, error::SpawnErrorKind,
};

/// Runs to the end; returns the exit code and stdout (the combined stream when combined).
fn run(builder: SessionBuilder, config: impl Into<MonitorConfigBuilder>) -> (i32, String) {
    let session = builder.config(config).spawn().expect("it starts");
    let result = wait_generously(&session);
    let snapshot = session.output();
    let out = snapshot.stdout.or(snapshot.combined).expect("captured");
    (result.exit_code(), out.render_lossy())
}

fn quiet() -> MonitorConfigBuilder {
    MonitorConfig::builder().watch_files(false)
}

/// What `sh` prints about its run: arguments, working directory, two variables, the
/// environment's size class (isolated: a handful of names) and, with `env -0`, everything.
const REPORT: &str =
    "printf '%s|' \"$0\" \"$@\" \"$PWD\" \"${SET-unset}\" \"${GONE-unset}\"; env -0";

fn parse(out: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let mut fields: Vec<String> = out.split('|').map(str::to_owned).collect();
    let env = fields.pop().expect("the environment last");
    let env = env
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (k, v) = e.split_once('=').expect("NAME=value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (fields, env)
}

#[test]
fn a_program_sees_what_the_same_command_sees() {
    let m = Marker::new("program-same");
    let dir = tempfile::tempdir().expect("a folder");
    let dir = dir.path().canonicalize().expect("its path");
    for environment in [
        Environment::inherit_all(),
        Environment::empty().inherit("PATH").set("OVERLAY", "on"),
    ] {
        let program = Program::new("sh")
            .args(["-c", REPORT, "name", "a b", "c"])
            .current_dir(&dir)
            .env("SET", "yes")
            .env_remove("GONE")
            .env(MARKER_ENV, m.as_str());
        let mut command = Command::new("sh");
        command
            .args(["-c", REPORT, "name", "a b", "c"])
            .current_dir(&dir)
            .env("SET", "yes")
            .env_remove("GONE")
            .env(MARKER_ENV, m.as_str());
        let builder = |b: SessionBuilder| b.environment(environment.clone());
        let (code, fast) = run(builder(Session::builder(program)), quiet());
        assert_eq!(code, 0, "{fast}");
        let (code, forked) = run(builder(Session::builder(command)), quiet());
        assert_eq!(code, 0, "{forked}");
        let (fields, env) = parse(&fast);
        assert_eq!(
            fields,
            [
                "name",
                "a b",
                "c",
                &dir.display().to_string(),
                "yes",
                "unset"
            ]
        );
        assert_eq!((fields, env), parse(&forked));
    }
    assert_no_leak(&m);
}

#[test]
fn a_program_reads_a_piped_an_inherited_or_no_stdin() {
    let session = Session::builder(Program::new("cat"))
        .stdin(Stdin::Piped)
        .config(quiet())
        .spawn()
        .expect("cat starts");
    session.write_stdin(b"fed\n").expect("queued");
    session.close_stdin();
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0);
    let out = session.output().stdout.expect("captured").render_lossy();
    assert_eq!(out, "fed\n");

    // Inherited: the child's stdin is this process's (the same open file).
    let ours = std::fs::read_link("/proc/self/fd/0").expect("our stdin");
    let program = Program::new("readlink").arg("/proc/self/fd/0");
    let (code, out) = run(Session::builder(program).stdin(Stdin::Inherit), quiet());
    assert_eq!(code, 0);
    assert_eq!(out.trim_end(), ours.display().to_string());

    // By default: /dev/null.
    let program = Program::new("readlink").arg("/proc/self/fd/0");
    let (code, out) = run(Session::builder(program), quiet());
    assert_eq!((code, out.as_str()), (0, "/dev/null\n"));
}

#[test]
fn a_detached_program_leads_a_session_and_the_combined_stream_keeps_the_order() {
    let script = "read -r a b c ppid pgid sid rest < /proc/self/stat; \
                  [ \"$pgid\" = $$ ] && [ \"$sid\" = $$ ] && echo leads; \
                  echo two >&2; echo three";
    let config = quiet().capture(CaptureConfig::builder().combined(true));
    let builder = Session::builder(Program::new("sh").args(["-c", script])).non_interactive();
    let (code, out) = run(builder, config);
    assert_eq!((code, out.as_str()), (0, "leads\ntwo\nthree\n"));
}

#[test]
fn a_program_that_cannot_run_fails_as_a_commands_does() {
    for (program, kind) in [
        ("/no/such/program-fast", io::ErrorKind::NotFound),
        ("no-such-program-fast", io::ErrorKind::NotFound),
        ("/etc/passwd", io::ErrorKind::PermissionDenied),
    ] {
        let fast = Session::builder(Program::new(program)).spawn();
        let forked = Session::builder(Command::new(program)).spawn();
        for err in [fast.expect_err(program), forked.expect_err(program)] {
            assert_eq!(err.io_error_kind(), kind, "{program}: {err}");
            assert_eq!(err.kind(), SpawnErrorKind::Program, "{err}");
        }
    }
    let missing = Program::new("true").current_dir("/no/such/dir-fast");
    let err = Session::builder(missing).spawn().expect_err("no folder");
    assert_eq!(err.io_error_kind(), io::ErrorKind::NotFound, "{err}");
}

#[test]
fn an_inherited_stdin_cannot_go_with_a_terminal() {
    let err = Session::builder(Program::new("true"))
        .stdin(Stdin::Inherit)
        .pty(24, 80)
        .spawn()
        .expect_err("a terminal is the stdin");
    let spawn_error: &SpawnError = &err;
    assert_eq!(spawn_error.kind(), SpawnErrorKind::Config);
    assert_eq!(
        spawn_error.inner().downcast_ref::<ConfigError>(),
        Some(&ConfigError::StdinWithTerminal)
    );
}

#[test]
fn a_script_without_a_shebang_runs_with_sh_as_with_a_command() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a folder");
    let script = dir.path().join("no-shebang");
    std::fs::write(&script, "echo ran by sh\n").expect("written");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, out) = run(Session::builder(Program::new(&script)), quiet());
    assert_eq!((code, out.as_str()), (0, "ran by sh\n"));
    let (code, out) = run(Session::builder(Command::new(&script)), quiet());
    assert_eq!((code, out.as_str()), (0, "ran by sh\n"));
}
