//! Environment isolation: allowlist over an empty environment, overlays, an isolated home with
//! seeded files — all seen from inside the child.

use crate::support as common;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use common::{MARKER_ENV, Marker, assert_no_leak, wait_generously};
use quietus::{Environment, MonitorConfig, Outcome, Session, SessionBuilder};

/// Runs to the end; returns the result and stdout.
fn run(builder: SessionBuilder) -> (quietus::MonitorResult, String) {
    let session = builder
        .config(MonitorConfig::builder().watch_files(false).build().unwrap())
        .spawn()
        .expect("the child can be spawned");
    let result = wait_generously(&session);
    let stdout = session
        .output()
        .stdout
        .expect("separate streams")
        .render_lossy();
    (result, stdout)
}

/// The child's environment, as `env -0` prints it.
fn child_env(marker: &Marker, environment: Environment) -> BTreeMap<String, String> {
    let mut command = Command::new("env");
    command.arg("-0").env(MARKER_ENV, marker.as_str());
    let (result, stdout) = run(Session::builder(command).environment(environment));
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    stdout
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (k, v) = e.split_once('=').expect("NAME=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[test]
fn an_isolated_home_is_seen_from_inside_the_child() {
    let m = Marker::new("env-home");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("new/agent-home");
    let script = r#"echo "$HOME"; echo "$XDG_CONFIG_HOME"; echo "$XDG_DATA_HOME"; echo "$XDG_STATE_HOME"; echo "$XDG_CACHE_HOME"; cd && pwd"#;
    let (result, stdout) = run(Session::builder(m.sh(script))
        .environment(Environment::empty().inherit("PATH").home(&home)));
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    let h = home.display();
    assert_eq!(
        stdout,
        format!("{h}\n{h}/.config\n{h}/.local/share\n{h}/.local/state\n{h}/.cache\n{h}\n")
    );
    for folder in ["", ".config", ".local/share", ".local/state", ".cache"] {
        let meta = fs::metadata(home.join(folder)).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700, "{folder:?}");
    }
    let report = result.home.expect("a home report");
    assert_eq!(report.root, home);
    assert!(report.seeded.is_empty() && report.failed.is_empty());
    assert_no_leak(&m);
}

#[test]
fn only_the_allowlist_is_inherited_and_overlays_win() {
    let m = Marker::new("env-allowlist");
    let env = child_env(
        &m,
        Environment::empty()
            .inherit("PATH")
            .inherit("QUIETUS_TEST_SURELY_UNSET")
            .set("AGENT_MODE", "ci")
            .set("PATH", "/usr/bin:/bin")
            .set("AGENT_MODE", "unattended"),
    );
    // `env` was found by name: through the child's PATH.
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(names, ["AGENT_MODE", "PATH", MARKER_ENV], "{env:#?}");
    assert_eq!(env["AGENT_MODE"], "unattended", "the last overlay wins");
    assert_eq!(
        env["PATH"], "/usr/bin:/bin",
        "an overlay beats the allowlist"
    );
    assert_eq!(
        env[MARKER_ENV],
        m.as_str(),
        "the command's own variables are kept"
    );
    // The parent has more than that: the others were not inherited.
    assert!(
        std::env::vars().any(|(name, _)| !env.contains_key(&name)),
        "the parent has variables the child did not get"
    );

    let plain = child_env(&m, Environment::empty().inherit("PATH"));
    assert_eq!(plain.get("PATH"), std::env::var("PATH").ok().as_ref());
    assert_eq!(plain.len(), 2, "{plain:#?}");
    assert_no_leak(&m);
}

#[test]
fn by_default_everything_is_inherited_and_overlays_apply_on_top() {
    let m = Marker::new("env-inherit");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let env = child_env(
        &m,
        Environment::inherit_all()
            .home(&home)
            .set("XDG_CACHE_HOME", "/shared/cache")
            .set("AGENT_MODE", "ci"),
    );
    let isolated = [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
    ];
    for (name, value) in std::env::vars() {
        if !isolated.contains(&name.as_str()) {
            assert_eq!(env.get(&name), Some(&value), "{name} is inherited");
        }
    }
    assert_eq!(env["HOME"], home.display().to_string());
    assert_eq!(
        env["XDG_CONFIG_HOME"],
        home.join(".config").display().to_string()
    );
    assert_eq!(
        env["XDG_CACHE_HOME"], "/shared/cache",
        "an overlay beats the home"
    );
    assert_eq!(env["AGENT_MODE"], "ci");
    assert_no_leak(&m);
}

#[test]
fn seeded_files_are_private_copies_and_failures_are_recorded() {
    let m = Marker::new("env-seed");
    let dir = tempfile::tempdir().unwrap();
    let auth = dir.path().join("auth.json");
    fs::write(&auth, r#"{"token":"t0ken"}"#).unwrap();
    fs::set_permissions(&auth, fs::Permissions::from_mode(0o644)).unwrap();
    let config = dir.path().join("config.toml");
    fs::write(&config, "model = \"x\"\n").unwrap();
    let missing = dir.path().join("no-such-file");
    let home = dir.path().join("home");
    // A stale copy from an earlier run, readable by all: replaced, and made private.
    fs::create_dir_all(home.join(".codex")).unwrap();
    fs::write(home.join(".codex/auth.json"), "stale").unwrap();
    fs::set_permissions(
        home.join(".codex/auth.json"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();

    let script = r#"cat "$HOME/.codex/auth.json"; echo; cat "$XDG_CONFIG_HOME/tool/config.toml"; test -e "$HOME/missing" || echo no-missing"#;
    let (result, stdout) = run(Session::builder(m.sh(script)).environment(
        Environment::empty()
            .inherit("PATH")
            .home(&home)
            .seed(&auth, ".codex/auth.json")
            .seed(&missing, "missing")
            .seed(&config, ".config/tool/config.toml"),
    ));
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    assert_eq!(stdout, "{\"token\":\"t0ken\"}\nmodel = \"x\"\nno-missing\n");
    let report = result.home.expect("a home report");
    assert_eq!(
        report.seeded,
        [
            home.join(".codex/auth.json"),
            home.join(".config/tool/config.toml")
        ]
    );
    for seeded in &report.seeded {
        assert_eq!(
            fs::metadata(seeded).unwrap().mode() & 0o777,
            0o600,
            "{seeded:?}"
        );
    }
    assert_eq!(
        fs::metadata(home.join(".config/tool")).unwrap().mode() & 0o777,
        0o700
    );
    assert_eq!(report.failed.len(), 1, "{report:#?}");
    let failure = &report.failed[0];
    let (destination, error) = failure;
    assert_eq!(*destination, home.join("missing"), "{missing:?}");
    assert!(error.to_string().contains("No such file"), "{error}");
    assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
    assert_no_leak(&m);
}

#[test]
fn a_home_that_cannot_be_created_fails_the_spawn() {
    let m = Marker::new("env-bad-home");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, "").unwrap();
    let home = file.join("home");
    let error = Session::builder(m.sh("echo should not run"))
        .environment(Environment::empty().home(&home))
        .spawn()
        .expect_err("a home under a file cannot be created");
    assert_eq!(
        error.io_error_kind(),
        io::ErrorKind::NotADirectory,
        "{error}"
    );
    assert!(
        error.to_string().contains(&home.display().to_string()),
        "{error}"
    );
    assert_no_leak(&m);
}
