//! `quietus --non-interactive`: a program that would wait for an answer fails at once
//! instead: `/dev/tty` cannot be opened even when quietus runs on a terminal, `read` sees
//! end-of-file, git opens no editor even with `EDITOR` set to a program that hangs.

use crate::support as common;
use crate::support::cli as cli_support;

use cli_support::{assert_code, sw, text};
use common::{MARKER_ENV, Marker, assert_no_leak};

/// quietus on a terminal of its own (`script`), running `sh -c SCRIPT MARKER`.
fn on_a_terminal(m: &Marker, options: &str, script: &str) -> String {
    let inner = format!(
        "{} {options} -i 20s -- sh -c '{script}' {}",
        env!("CARGO_BIN_EXE_quietus"),
        m.as_str()
    );
    let output = common::program("script")
        .args(["-qec", &inner, "/dev/null"])
        .env(MARKER_ENV, m.as_str())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    text(&output.stdout)
}

#[test]
fn dev_tty_cannot_be_opened_even_on_a_terminal() {
    let m = Marker::new("ni-tty");
    let probe = "(: </dev/tty) 2>/dev/null && echo TTY-OPENED || echo NO-TTY";
    // Without the profile the program reaches the terminal quietus runs on...
    let plain = on_a_terminal(&m, "", probe);
    assert!(plain.contains("TTY-OPENED"), "{plain:?}");
    // ...with it, it cannot.
    let profiled = on_a_terminal(&m, "--non-interactive", probe);
    assert!(profiled.contains("NO-TTY"), "{profiled:?}");
    assert!(!profiled.contains("TTY-OPENED"), "{profiled:?}");
    assert_no_leak(&m);
}

#[test]
fn read_sees_end_of_file_and_the_variables_are_set_unless_given() {
    let m = Marker::new("ni-read");
    let output = sw(&m)
        .args(&["--non-interactive", "-i", "20s"])
        .env("PAGER", "less-of-my-own")
        .sh("read x && echo GOT || echo EOF; echo $GIT_TERMINAL_PROMPT $GIT_PAGER $DEBIAN_FRONTEND $PAGER")
        .output();
    assert_code(&output, 0);
    let out = text(&output.stdout);
    // PAGER was the caller's own: kept.
    assert!(
        out.starts_with("EOF\n0 cat noninteractive less-of-my-own\n"),
        "{out:?}"
    );
    assert_no_leak(&m);
}

#[test]
fn git_commit_without_a_message_opens_no_editor() {
    let m = Marker::new("ni-git");
    let repo = tempfile::tempdir().expect("a folder");
    let git = |args: &[&str]| {
        let status = common::program("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", repo.path())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    // An editor that hangs: without the profile, git would wait on it the whole idle timeout.
    let output = sw(&m)
        .args(&["--non-interactive", "-i", "20s"])
        .dir(repo.path())
        .env("HOME", repo.path())
        .env("EDITOR", "sleep 1000")
        .env("VISUAL", "sleep 1000")
        .sh("git -c user.name=t -c user.email=t@e commit --allow-empty; echo status=$?")
        .output();
    assert_code(&output, 0);
    let out = text(&output.stdout);
    assert!(
        out.contains("status=1"),
        "{out:?} {:?}",
        text(&output.stderr)
    );
    assert!(
        text(&output.stderr).contains("empty commit message"),
        "{:?}",
        text(&output.stderr)
    );
    assert_no_leak(&m);
}

/// What `GIT_SSH_COMMAND` the program sees under `--non-interactive`, with `env` added and
/// `dir` as the working directory (git's global and system configuration left out).
fn ssh_command_seen(m: &Marker, dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    let mut run = sw(m)
        .args(&["--non-interactive", "-i", "20s"])
        .dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    for (key, value) in env {
        run = run.env(key, value);
    }
    let output = run.sh("echo \"[${GIT_SSH_COMMAND-unset}]\"").output();
    assert_code(&output, 0);
    text(&output.stdout)
}

#[test]
fn the_users_own_ssh_command_for_git_is_kept() {
    let m = Marker::new("ni-ssh");
    let plain = tempfile::tempdir().expect("a temporary directory");
    // Nothing of the user's: the profile's batch-mode ssh.
    assert_eq!(
        ssh_command_seen(&m, plain.path(), &[]),
        "[ssh -o BatchMode=yes]\n"
    );
    // The user's GIT_SSH_COMMAND, or GIT_SSH (which GIT_SSH_COMMAND would override): kept.
    assert_eq!(
        ssh_command_seen(&m, plain.path(), &[("GIT_SSH_COMMAND", "ssh -i deploy")]),
        "[ssh -i deploy]\n"
    );
    assert_eq!(
        ssh_command_seen(
            &m,
            plain.path(),
            &[("GIT_SSH", "/usr/local/bin/deploy-ssh")]
        ),
        "[unset]\n"
    );
    // core.sshCommand in the repository the program works in: not overridden either.
    let repo = tempfile::tempdir().expect("a temporary directory");
    for args in [
        &["init", "-q"][..],
        &["config", "core.sshCommand", "ssh -i deploy"][..],
    ] {
        let status = common::program("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }
    assert_eq!(ssh_command_seen(&m, repo.path(), &[]), "[unset]\n");
    assert_no_leak(&m);
}
