//! What the suites need beyond Rust, said before a scenario starts (issue 46, item 3).
//!
//! A test that runs a program the system may lack (`tmux`, `python3`, `setpriv`, …) asks for
//! it first: [`require`] (any program, with its install line) or [`program`] (one of
//! [`PREREQUISITES`], as a [`Command`]). The scripts of [`Marker::sh`](super::Marker::sh) and
//! [`Marker::sh_words`](super::Marker::sh_words) ask for the programs they run
//! ([`require_for_script`]). A missing one FAILS the test with a message that names it and the
//! line that installs it: never a skip, and never an error deep inside the scenario
//! ("No such file or directory" from a spawn, exit 127 from a shell).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The programs the suites run that a minimal system may lack, with the Debian/Ubuntu line
/// that installs each (README, "Set-up", installs them all at once).
pub const PREREQUISITES: &[(&str, &str)] = &[
    ("tmux", "apt-get install tmux"),
    ("python3", "apt-get install python3"),
    ("perl", "apt-get install perl"),
    ("cc", "apt-get install build-essential"),
    ("git", "apt-get install git"),
    ("setpriv", "apt-get install util-linux"),
    ("unshare", "apt-get install util-linux"),
    ("taskset", "apt-get install util-linux"),
    ("script", "apt-get install bsdutils"),
];

/// The message of a missing prerequisite: what is missing and how to get it.
pub fn missing_message(what: &str, how: &str) -> String {
    format!(
        "missing prerequisite: {what}. {how}. (README, \"Set-up\", lists everything `cargo test` \
         needs.)"
    )
}

/// Where `name` is found as a command: a path with a `/` as it is, else the first executable
/// file of that name in `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
}

/// Panics, naming `tool` and `install` (the line that installs it), unless `tool` is a command
/// found in `PATH`; returns where it is.
#[track_caller]
pub fn require(tool: &str, install: &str) -> PathBuf {
    match find_program(tool) {
        Some(path) => path,
        None => panic!(
            "{}",
            missing_message(
                &format!("`{tool}` is not found in PATH"),
                &format!("Install it, as root or with sudo: `{install}`")
            )
        ),
    }
}

/// The install line of one of [`PREREQUISITES`].
fn install_line(tool: &str) -> &'static str {
    PREREQUISITES
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, install)| *install)
        .unwrap_or_else(|| panic!("{tool} is not in PREREQUISITES: add it with its install line"))
}

/// A [`Command`] for `tool`, one of [`PREREQUISITES`], after [`require`] found it.
#[track_caller]
pub fn program(tool: &str) -> Command {
    require(tool, install_line(tool));
    Command::new(tool)
}

/// The programs of [`PREREQUISITES`] that `script` runs: their names as words of their own
/// (between blanks, quotes, `;`, `|`, `&`, `(`, `)`, `` ` `` or the ends).
pub fn programs_in(script: &str) -> Vec<&'static str> {
    let words: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || "'\";|&()`".contains(c))
        .collect();
    PREREQUISITES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| words.contains(name))
        .collect()
}

/// [`require`]s every program of [`PREREQUISITES`] that `script` runs ([`programs_in`]).
#[track_caller]
pub fn require_for_script(script: &str) {
    for tool in programs_in(script) {
        require(tool, install_line(tool));
    }
}

/// Panics with the install line unless `python3 -m venv` can work (Debian and Ubuntu split
/// `ensurepip`, which venv needs, into the package `python3-venv`).
#[track_caller]
pub fn require_python_venv() {
    let works = program("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        works,
        "{}",
        missing_message(
            "Python's `venv` with `ensurepip` (`python3 -m venv` cannot make an environment)",
            "Install it, as root or with sudo: `apt-get install python3-venv`"
        )
    );
}
