//! Programs that cannot be run and invalid configurations give clear errors, spawn nothing and
//! leave nothing behind.

use crate::support as common;

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::{Marker, assert_no_leak};
use stallwatch::{ConfigError, KillLadder, MonitorConfig, Session};

#[test]
fn missing_program_is_not_found_and_named() {
    let marker = Marker::new("spawn_missing");
    let program = format!("{}-no-such-program", marker.as_str());
    let mut command = Command::new(&program);
    command.env(common::MARKER_ENV, marker.as_str());
    let err = Session::spawn(command, MonitorConfig::default()).expect_err("cannot spawn");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains(&program), "{err}");
    assert_no_leak(&marker);
}

#[test]
fn missing_program_by_path_is_not_found_and_named() {
    let marker = Marker::new("spawn_missing_path");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let program = dir.path().join("absent");
    let mut command = Command::new(&program);
    command.env(common::MARKER_ENV, marker.as_str());
    let err = Session::spawn(command, MonitorConfig::default()).expect_err("cannot spawn");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains(&*program.to_string_lossy()),
        "{err}"
    );
    assert_no_leak(&marker);
}

#[test]
fn non_executable_file_is_permission_denied_and_named() {
    let marker = Marker::new("spawn_not_executable");
    let mut file = tempfile::Builder::new()
        .prefix("stallwatch-not-executable-")
        .tempfile()
        .expect("a temporary file");
    file.write_all(b"#!/bin/sh\necho should-not-run\n")
        .expect("write the script");
    file.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .expect("chmod 0644");
    // Close our write handle before anything tries to exec the file.
    let path = file.into_temp_path();
    let mut command = Command::new(&*path);
    command.env(common::MARKER_ENV, marker.as_str());
    let err = Session::spawn(command, MonitorConfig::default()).expect_err("cannot spawn");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    assert_no_leak(&marker);
}

#[test]
fn invalid_config_is_invalid_input_and_spawns_nothing() {
    let marker = Marker::new("spawn_bad_config");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let witness = dir.path().join("ran");
    let script = format!(": > '{}'; sleep 1000", witness.display());
    let err = Session::spawn(
        marker.sh(&script),
        MonitorConfig::default().idle_timeout(Duration::ZERO),
    )
    .expect_err("an invalid configuration is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("idle_timeout"), "{err}");
    let config_error = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<ConfigError>())
        .expect("the ConfigError is kept inside the io::Error");
    assert!(
        matches!(
            config_error,
            ConfigError::OutOfRange {
                field: "idle_timeout",
                ..
            }
        ),
        "{config_error:?}"
    );
    // Nothing ran: no process with our marker, and the script never touched its witness file.
    assert_no_leak(&marker);
    assert!(
        !witness.exists(),
        "the child ran despite the invalid config"
    );
}

#[test]
fn other_invalid_configs_are_refused_too() {
    let marker = Marker::new("spawn_bad_configs");
    let bad = [
        MonitorConfig::default().kill_ladder(KillLadder::new([])),
        MonitorConfig::default().hard_timeout(Some(Duration::ZERO)),
        MonitorConfig::default().check_interval(Some(Duration::ZERO)),
        MonitorConfig::default().kill_confirm_timeout(Duration::ZERO),
        MonitorConfig::default().idle_timeout(Duration::from_secs(30 * 24 * 3600)),
    ];
    for config in bad {
        let err = Session::spawn(marker.sh("sleep 1000"), config.clone())
            .expect_err("an invalid configuration is refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{config:?}: {err}");
    }
    assert_no_leak(&marker);
}

#[test]
fn keepalive_with_an_invalid_timeout_is_refused_without_change() {
    let marker = Marker::new("spawn_bad_keepalive_timeout");
    let session = Session::spawn(marker.sh("sleep 1000"), MonitorConfig::default())
        .expect("sh can be spawned");
    let err = session
        .keepalive_with_timeout(Duration::ZERO)
        .expect_err("zero is out of range");
    assert!(err.to_string().contains("idle_timeout"), "{err}");
    assert!(session.try_wait().is_none());
    session.start_kill();
    let result = common::wait_generously(&session);
    assert_eq!(result.signal(), Some(9));
    assert_no_leak(&marker);
}

#[test]
fn missing_working_directory_is_not_found_and_names_the_program() {
    let marker = Marker::new("spawn_missing_cwd");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = marker.sh("sleep 1000");
    command.current_dir(dir.path().join("absent"));
    let err = Session::spawn(command, MonitorConfig::default()).expect_err("cannot spawn");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("\"sh\""), "{err}");
    assert_no_leak(&marker);
}
