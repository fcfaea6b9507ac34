//! The `quietus` command's options: each one works from the command line and from its
//! `QUIETUS_*` variable, the command line wins, and a bad value is 125 with a message that
//! names the option and what it accepts (nothing is run then).

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::{alive, assert_code, option_vars, own_lines, summary_line, sw, text};
use common::{Marker, assert_no_leak};

/// A script that writes `file` (relative to the working directory) every 50 ms, `rounds`
/// times, silently, then exits 0. Its only activity is that file (no output; sleeps use no CPU).
fn writer_script(file: &str, rounds: u32) -> String {
    format!(
        "mkdir -p \"$(dirname '{file}')\"; i=0; while [ $i -lt {rounds} ]; do \
         echo $i > '{file}'; i=$((i+1)); sleep 0.05; done; exit 0"
    )
}

/// The idle timeout of the file-activity runs, and how many 50 ms writes they make (2.5 s, well
/// past it). Generous, so that a loaded machine's slow `sh` start or a late `sleep` never looks
/// like a 1.5 s silence; the runs that must stall are ended after 1.5 s.
const FILE_IDLE: &str = "1500ms";
const FILE_ROUNDS: u32 = 50;

#[test]
fn idle_timeout_from_the_environment() {
    let marker = Marker::new("cli_opt_env_idle");
    let started = Instant::now();
    let output = sw(&marker)
        .env("QUIETUS_IDLE_TIMEOUT", "300ms")
        .sh("echo hi; sleep 30")
        .output();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_code(&output, 124);
    let line = summary_line(&output.stderr);
    assert!(
        line.starts_with("quietus: ended after 300ms idle"),
        "{line}"
    );
    assert_no_leak(&marker);
}

#[test]
fn the_command_line_wins_over_the_environment() {
    let marker = Marker::new("cli_opt_precedence");
    // The variable says 60 s, the command line 300 ms: ended after 300 ms.
    let output = sw(&marker)
        .env("QUIETUS_IDLE_TIMEOUT", "60s")
        .args(&["-i", "300ms"])
        .sh("sleep 30")
        .output();
    assert_code(&output, 124);
    assert!(summary_line(&output.stderr).contains("ended after 300ms idle"));
    // The other way round: a 700 ms silence survives the command line's 20 s.
    let output = sw(&marker)
        .env("QUIETUS_IDLE_TIMEOUT", "200ms")
        .args(&["--idle-timeout", "20s"])
        .sh("sleep 0.7; exit 5")
        .output();
    assert_code(&output, 5);
    // Even an invalid variable does not matter when the command line gives the option.
    let output = sw(&marker)
        .env("QUIETUS_GRACE", "banana")
        .args(&["-g", "1s"])
        .sh("exit 0")
        .output();
    assert_code(&output, 0);
    assert_no_leak(&marker);
}

#[test]
fn hard_timeout_grace_and_signal_from_the_environment() {
    let marker = Marker::new("cli_opt_env_ladder");
    let output = sw(&marker)
        .env("QUIETUS_HARD_TIMEOUT", "300ms")
        .env("QUIETUS_GRACE", "250ms")
        .env("QUIETUS_SIGNAL", "SIGINT")
        .sh("trap 'echo got INT' INT; while :; do echo .; sleep 0.02; done")
        .output();
    assert_code(&output, 124);
    assert!(text(&output.stdout).contains("got INT"));
    assert_eq!(
        summary_line(&output.stderr),
        "quietus: ended at the hard timeout of 300ms; sent INT, then KILL after 250ms"
    );
    // `-t none` on the command line turns the variable's hard timeout off.
    let output = sw(&marker)
        .env("QUIETUS_HARD_TIMEOUT", "200ms")
        .args(&["-t", "none"])
        .sh("i=0; while [ $i -lt 25 ]; do echo .; i=$((i+1)); sleep 0.02; done; exit 6")
        .output();
    assert_code(&output, 6);
    assert_no_leak(&marker);
}

#[test]
fn signal_option_takes_names_and_numbers() {
    let marker = Marker::new("cli_opt_signal");
    for (value, name) in [
        ("HUP", "HUP"),
        ("sigusr1", "USR1"),
        ("2", "INT"),
        ("KILL", "KILL"),
    ] {
        let output = sw(&marker)
            .args(&["-i", "200ms", "-s", value])
            .sh("sleep 30")
            .output();
        assert_code(&output, 124);
        let line = summary_line(&output.stderr);
        assert!(line.ends_with(&format!("; sent {name}")), "{value}: {line}");
    }
    assert_no_leak(&marker);
}

#[test]
fn file_activity_under_the_default_agent_folder_keeps_the_program_alive() {
    let marker = Marker::new("cli_opt_default_watch");
    let dir = tempfile::tempdir().expect("a temporary directory");
    // 2.5 s of writes in .agent with a 1.5 s idle timeout: never stale.
    let output = sw(&marker)
        .dir(dir.path())
        .args(&["-i", FILE_IDLE, "--no-children"])
        .sh(&writer_script(".agent/notes.md", FILE_ROUNDS))
        .output();
    assert_code(&output, 0);
    // The same writes outside the watched folder do not count.
    let output = sw(&marker)
        .dir(dir.path())
        .args(&["-i", FILE_IDLE, "--no-children"])
        .sh(&writer_script("elsewhere/notes.md", FILE_ROUNDS))
        .output();
    assert_code(&output, 124);
    assert_no_leak(&marker);
}

#[test]
fn watch_replaces_the_default_folder_and_is_repeatable() {
    let marker = Marker::new("cli_opt_watch");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |options: &[&str], file: &str| {
        sw(&marker)
            .dir(dir.path())
            .args(&["-i", FILE_IDLE, "--no-children"])
            .args(options)
            .sh(&writer_script(file, FILE_ROUNDS))
            .output()
    };
    assert_code(&run(&["-w", "notes"], "notes/a.txt"), 0);
    assert_code(&run(&["-w", "notes", "-w", "plans"], "plans/a.txt"), 0);
    // .agent no longer counts once --watch is given.
    assert_code(&run(&["-w", "notes"], ".agent/a.txt"), 124);
    assert_no_leak(&marker);
}

#[test]
fn watch_and_flags_from_the_environment() {
    let marker = Marker::new("cli_opt_env_watch");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |envs: &[(&str, &str)], options: &[&str], file: &str| {
        let mut cmd = sw(&marker)
            .dir(dir.path())
            .args(&["-i", FILE_IDLE])
            .args(options);
        for (k, v) in envs {
            cmd = cmd.env(k, v);
        }
        cmd.sh(&writer_script(file, FILE_ROUNDS)).output()
    };
    let no_children = ("QUIETUS_NO_CHILDREN", "1");
    // Several folders in one variable, separated by ':'.
    let watch = ("QUIETUS_WATCH", "notes:plans");
    assert_code(&run(&[no_children, watch], &[], "plans/a.txt"), 0);
    assert_code(&run(&[no_children, watch], &[], "notes/a.txt"), 0);
    assert_code(&run(&[no_children, watch], &[], ".agent/a.txt"), 124);
    // The command line's --watch replaces the variable's list.
    assert_code(
        &run(&[no_children, watch], &["-w", "other"], "plans/a.txt"),
        124,
    );
    // QUIETUS_NO_WATCH turns the file signal off; 0 leaves it on.
    assert_code(
        &run(&[no_children, ("QUIETUS_NO_WATCH", "yes")], &[], ".agent/a"),
        124,
    );
    assert_code(
        &run(&[no_children, ("QUIETUS_NO_WATCH", "0")], &[], ".agent/a"),
        0,
    );
    assert_no_leak(&marker);
}

#[test]
fn exclude_adds_to_the_default_exclusions() {
    let marker = Marker::new("cli_opt_exclude");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |options: &[&str], envs: &[(&str, &str)], file: &str| {
        let mut cmd = sw(&marker)
            .dir(dir.path())
            .args(&["-i", FILE_IDLE, "--no-children"])
            .args(options);
        for (k, v) in envs {
            cmd = cmd.env(k, v);
        }
        cmd.sh(&writer_script(file, FILE_ROUNDS)).output()
    };
    assert_code(&run(&["--exclude", "*.tmp"], &[], ".agent/x.tmp"), 124);
    assert_code(&run(&["--exclude", "*.tmp"], &[], ".agent/x.txt"), 0);
    // The defaults still hold: *.log never counts.
    assert_code(&run(&["--exclude", "*.tmp"], &[], ".agent/x.log"), 124);
    // From the environment, several globs separated by ':'.
    let env = [("QUIETUS_EXCLUDE", "*.tmp:cache/**")];
    assert_code(&run(&[], &env, ".agent/cache/x.txt"), 124);
    assert_code(&run(&[], &env, ".agent/x.tmp"), 124);
    assert_code(&run(&[], &env, ".agent/x.txt"), 0);
    assert_no_leak(&marker);
}

#[test]
fn no_output_makes_output_not_count() {
    let marker = Marker::new("cli_opt_no_output");
    let started = Instant::now();
    let chatty = "while :; do echo chat; sleep 0.02; done";
    let output = sw(&marker)
        .args(&["-i", "300ms", "--no-output", "--no-children"])
        .sh(chatty)
        .output();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_code(&output, 124);
    assert!(
        text(&output.stdout).starts_with("chat\n"),
        "still passed through"
    );
    let line = summary_line(&output.stderr);
    assert!(
        !line.contains("output "),
        "output is not a signal now: {line}"
    );
    let output = sw(&marker)
        .env("QUIETUS_NO_OUTPUT", "true")
        .env("QUIETUS_NO_CHILDREN", "on")
        .args(&["-i", "300ms"])
        .sh(chatty)
        .output();
    assert_code(&output, 124);
    assert_no_leak(&marker);
}

#[test]
fn no_children_lets_a_busy_grandchild_go_stale() {
    let marker = Marker::new("cli_opt_no_children");
    // A grandchild busy for good; the program itself waits silently. The hard timeout is the
    // control: without --no-children the busy grandchild keeps the run alive until then.
    let busy = "sh -c 'while :; do :; done' \"$0\" & wait";
    let report_dir = tempfile::tempdir().expect("a temporary directory");
    let report = report_dir.path().join("r.json");
    let report_arg = report.to_string_lossy().into_owned();
    let outcome = |output: &std::process::Output| {
        assert_code(output, 124);
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(&report).expect("report")).expect("JSON");
        json["outcome"].as_str().expect("a string").to_owned()
    };
    let output = sw(&marker)
        .args(&["-i", "300ms", "-t", "1500ms", "--report", &report_arg])
        .args(&["--check-interval", "100ms"])
        .sh(busy)
        .output();
    assert_eq!(outcome(&output), "hard_timeout");
    let output = sw(&marker)
        .args(&["-i", "300ms", "-t", "1500ms", "--report", &report_arg])
        .env("QUIETUS_NO_CHILDREN", "1")
        .sh(busy)
        .output();
    assert_eq!(outcome(&output), "idle_timeout");
    assert_no_leak(&marker);
}

#[test]
fn keep_leftovers_from_the_command_line_and_the_environment() {
    let marker = Marker::new("cli_opt_keep_leftovers");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (options, envs) in [
        (&["--keep-leftovers"][..], &[][..]),
        (&[][..], &[("QUIETUS_KEEP_LEFTOVERS", "1")][..]),
    ] {
        let pidfile = dir.path().join("leftover.pid");
        let _ = fs::remove_file(&pidfile);
        let mut cmd = sw(&marker).args(&["-i", "10s"]).args(options);
        for (k, v) in envs {
            cmd = cmd.env(k, v);
        }
        let script = format!(
            "sleep 30 >/dev/null 2>&1 & echo $! > '{}'; exit 0",
            pidfile.display()
        );
        let output = cmd.sh(&script).output();
        assert_code(&output, 0);
        let pid: u32 = fs::read_to_string(&pidfile)
            .expect("pid file")
            .trim()
            .parse()
            .expect("a pid");
        assert!(alive(pid), "the leftover was kept");
        // Our own leftover (it carries the marker): end it ourselves.
        let raw = rustix::process::Pid::from_raw(pid as i32).expect("pid");
        rustix::process::kill_process(raw, rustix::process::Signal::KILL).expect("ours");
        assert_no_leak(&marker);
    }
    // By default the leftover is ended with the program.
    let output = sw(&marker)
        .args(&["-i", "10s", "-g", "1s"])
        .sh("sleep 30 >/dev/null 2>&1 & exit 0")
        .output();
    assert_code(&output, 0);
    assert_no_leak(&marker);
}

#[test]
fn the_tests_clear_every_variable_the_help_names() {
    // The CLI tests remove option_vars() from what quietus inherits (and set each to "" in
    // the test below): the variables the help names, each option's own.
    let vars = option_vars();
    assert!(vars.len() > 20, "the help names the variables: {vars:?}");
    for var in [
        "QUIETUS_IDLE_TIMEOUT",
        "QUIETUS_DRAIN_CAP",
        "QUIETUS_SOLO_CAP",
        "QUIETUS_VERBOSE",
    ] {
        assert!(vars.iter().any(|v| v == var), "{var} in {vars:?}");
    }
}

#[test]
fn an_empty_variable_counts_as_unset() {
    let marker = Marker::new("cli_opt_empty_env");
    let mut cmd = sw(&marker);
    for var in option_vars() {
        cmd = cmd.env(var, "");
    }
    let output = cmd.sh("echo fine").output();
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "fine\n");
    assert!(output.stderr.is_empty(), "{:?}", text(&output.stderr));
    assert_no_leak(&marker);
}

/// Runs `quietus ARGS -- sh -c 'touch WITNESS'` and checks 125, a message naming `name` and
/// showing `accepts`, and that nothing ran.
#[track_caller]
fn assert_rejected(
    marker: &Marker,
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
    name: &str,
    accepts: &str,
) {
    let witness = dir.join("ran");
    let mut cmd = sw(marker).args(args);
    for (k, v) in envs {
        cmd = cmd.env(k, v);
    }
    let output = cmd.sh(&format!(": > '{}'", witness.display())).output();
    assert_code(&output, 125);
    let stderr = text(&output.stderr);
    assert!(stderr.contains(name), "{args:?} {envs:?}: {stderr}");
    assert!(stderr.contains(accepts), "{args:?} {envs:?}: {stderr}");
    assert!(!witness.exists(), "{args:?} {envs:?}: the program ran");
}

#[test]
fn invalid_values_are_125_naming_the_option_and_what_it_accepts() {
    let marker = Marker::new("cli_opt_invalid");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let missing = d.join("no/such/dir/report.json");
    let missing = missing.to_string_lossy().into_owned();
    let [x_json, s_json, t_json] =
        ["x.json", "s.json", "sub/t.json"].map(|f| d.join(f).to_string_lossy().into_owned());
    let cases: &[(&[&str], &str, &str)] = &[
        (&["-i", "banana"], "--idle-timeout", "1h30m"),
        (&["-i", "0s"], "--idle-timeout", "it accepts 1ms to"),
        (&["-i", "8d"], "--idle-timeout", "it accepts 1ms to 7d"),
        // The value as it was written, not rounded to "168h0m0s".
        (
            &["-i", "7d1ms"],
            "--idle-timeout",
            "7d1ms is out of range; it accepts 1ms to 7d",
        ),
        (&["-t", "soon"], "--hard-timeout", "or none"),
        (&["-t", "0"], "--hard-timeout", "it accepts 1ms to 366d"),
        (&["-g", "5parsecs"], "--grace", "30s"),
        (&["-g", "2h"], "--grace", "it accepts 0ms to 1h"),
        (&["-s", "NOPE"], "--signal", "TERM"),
        (&["-s", "0"], "--signal", "1 to 31"),
        (
            &["--check-interval", "1ms"],
            "--check-interval",
            "10ms to 1h",
        ),
        (&["--check-interval", "x"], "--check-interval", "1500ms"),
        (&["--exclude", "a[b"], "--exclude", "*.tmp"),
        (&["-w", ""], "--watch", ".agent"),
        (&["--report", ""], "--report", "run.json"),
        (&["--report", &missing], "--report", "No such file"),
        // The report would overwrite the events.
        (
            &["--report", "same.json", "--events", "same.json"],
            "--events",
            "the same file as --report",
        ),
        // The same file through links not yet resolved to an existing file (issue 51, point
        // 5): s.json -> x.json, and sub/t.json -> ../s.json, a link's target read from its own
        // folder.
        (
            &["--report", &x_json, "--events", &s_json],
            "--events",
            "the same file as --report",
        ),
        (
            &["--report", &t_json, "--events", &x_json],
            "--events",
            "the same file as --report",
        ),
        (&["--no-such-option"], "--no-such-option", "--help"),
    ];
    std::os::unix::fs::symlink("x.json", d.join("s.json")).expect("a link");
    std::fs::create_dir(d.join("sub")).expect("a folder");
    std::os::unix::fs::symlink("../s.json", d.join("sub/t.json")).expect("a link");
    for (args, name, accepts) in cases {
        assert_rejected(&marker, d, args, &[], name, accepts);
    }
    assert!(
        !d.join("x.json").exists(),
        "nothing was written through the links"
    );
    assert_no_leak(&marker);
}

/// Values that parse but mean nothing are refused as invalid ones are: a first signal that
/// cannot end a program (its default action stops it, or does nothing), a duration in
/// exponent notation, an empty glob.
#[test]
fn meaningless_values_are_125_naming_the_option_and_what_it_accepts() {
    let marker = Marker::new("cli_opt_meaningless");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let mut cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["-i", "1e3"], "--idle-timeout", "1h30m"),
        (vec!["-g", "inf"], "--grace", "1h30m"),
        (vec!["-t", "1E2"], "--hard-timeout", "1h30m"),
        (vec!["--exclude", ""], "--exclude", "*.tmp"),
        (vec!["--exclude", " "], "--exclude", "*.tmp"),
    ];
    for signal in [
        "STOP", "SIGTSTP", "ttin", "TTOU", "CONT", "CHLD", "WINCH", "URG", "19",
    ] {
        cases.push((vec!["-s", signal], "--signal", "does not end a program"));
    }
    for (args, name, accepts) in &cases {
        assert_rejected(&marker, d, args, &[], name, accepts);
    }
    assert_rejected(
        &marker,
        d,
        &[],
        &[("QUIETUS_SIGNAL", "STOP")],
        "QUIETUS_SIGNAL",
        "does not end a program",
    );
    // What a signal that ends a program, and a plain number, still are.
    let output = sw(&marker)
        .args(&["-s", "USR1", "-i", "1.5", "-g", "2"])
        .sh("exit 0")
        .output();
    assert_code(&output, 0);
    assert_no_leak(&marker);
}

#[test]
fn invalid_variables_are_125_naming_the_variable() {
    let marker = Marker::new("cli_opt_invalid_env");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let cases: &[(&str, &str, &str)] = &[
        ("QUIETUS_IDLE_TIMEOUT", "banana", "1h30m"),
        ("QUIETUS_IDLE_TIMEOUT", "0s", "it accepts 1ms to"),
        ("QUIETUS_HARD_TIMEOUT", "soon", "or none"),
        ("QUIETUS_GRACE", "2h", "it accepts 0ms to 1h"),
        ("QUIETUS_SIGNAL", "NOPE", "TERM"),
        ("QUIETUS_CHECK_INTERVAL", "1ms", "10ms to"),
        ("QUIETUS_EXCLUDE", "ok:a[b", "*.tmp"),
        ("QUIETUS_NO_WATCH", "maybe", "1/0"),
        ("QUIETUS_NO_CHILDREN", "2", "1/0"),
        ("QUIETUS_NO_OUTPUT", "yes please", "1/0"),
        ("QUIETUS_KEEP_LEFTOVERS", "sure", "1/0"),
        ("QUIETUS_VERBOSE", "lots", "-vv"),
        ("QUIETUS_QUIET", "-1", "0, 1, 2"),
    ];
    for (var, value, accepts) in cases {
        let option = format!(
            "--{}",
            var.trim_start_matches("QUIETUS_")
                .to_lowercase()
                .replace('_', "-")
        );
        assert_rejected(&marker, d, &[], &[(var, value)], &option, accepts);
        assert_rejected(&marker, d, &[], &[(var, value)], var, accepts);
    }
    assert_no_leak(&marker);
}

#[test]
fn a_missing_program_is_125() {
    let marker = Marker::new("cli_opt_no_program");
    let output = sw(&marker).args(&["-i", "1s"]).output();
    assert_code(&output, 125);
    assert!(text(&output.stderr).contains("PROGRAM"));
    let output = sw(&marker).args(&["-i", "1s", "--"]).output();
    assert_code(&output, 125);
    assert_no_leak(&marker);
}

#[test]
fn help_explains_every_option_with_an_example() {
    let marker = Marker::new("cli_opt_help");
    let output = sw(&marker).args(&["--help"]).output();
    assert_code(&output, 0);
    let help = text(&output.stdout);
    let options = [
        "--idle-timeout",
        "--hard-timeout",
        "--grace",
        "--signal",
        "--watch",
        "--exclude",
        "--no-watch",
        "--no-children",
        "--non-interactive",
        "--no-network",
        "--no-output",
        "--check-interval",
        "--keep-leftovers",
        "--observe",
        "--report",
        "--events",
        "--log-dir",
        "--quiet",
        "--verbose",
    ];
    // Each option's entry (up to the next option) has an example and its variable.
    for (i, option) in options.iter().enumerate() {
        let start = help
            .find(&format!(", {option}"))
            .or_else(|| help.find(&format!("  {option}")))
            .unwrap_or_else(|| panic!("{option} missing from the help"));
        let end = options
            .get(i + 1)
            .and_then(|next| help[start..].find(next).map(|e| start + e))
            .unwrap_or(help.len());
        let entry = &help[start..end];
        assert!(
            entry.contains("Example: "),
            "{option} has no example:\n{entry}"
        );
        let var = format!("QUIETUS_{}", option[2..].replace('-', "_").to_uppercase());
        assert!(
            entry.contains(&var),
            "{option} does not name {var}:\n{entry}"
        );
    }
    for word in [
        "124",
        "125",
        "126",
        "127",
        "128+N",
        "QUIETUS_<OPTION>",
        "RUST_LOG",
    ] {
        assert!(help.contains(word), "{word} missing from the help");
    }
    // -h is the short form, and points to --help.
    let output = sw(&marker).args(&["-h"]).output();
    assert_code(&output, 0);
    assert!(text(&output.stdout).contains("--idle-timeout"));
    assert!(text(&output.stdout).contains("--help"));
    let output = sw(&marker).args(&["--version"]).output();
    assert_code(&output, 0);
    assert_eq!(
        text(&output.stdout),
        format!("quietus {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_no_leak(&marker);
}

#[test]
fn quiet_drops_the_line_and_verbose_tells_more() {
    let marker = Marker::new("cli_opt_quiet_verbose");
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let mut cmd = sw(&marker).args(&["-i", "200ms"]).args(args);
        for (k, v) in envs {
            cmd = cmd.env(k, v);
        }
        cmd.sh("echo out; sleep 30").output()
    };
    let quiet = run(&["-q"], &[]);
    assert_code(&quiet, 124);
    assert!(quiet.stderr.is_empty(), "{:?}", text(&quiet.stderr));
    assert_eq!(text(&quiet.stdout), "out\n");
    let quiet = run(&[], &[("QUIETUS_QUIET", "1")]);
    assert!(quiet.stderr.is_empty(), "{:?}", text(&quiet.stderr));

    let normal = run(&[], &[]);
    assert_eq!(own_lines(&normal.stderr).len(), 1);

    let verbose = run(&["-v"], &[]);
    assert_code(&verbose, 124);
    let lines = own_lines(&verbose.stderr);
    assert!(lines.len() > 1, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("stale after")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("debug: ")), "{lines:?}");
    let debug = run(&[], &[("QUIETUS_VERBOSE", "2")]);
    assert!(
        own_lines(&debug.stderr)
            .iter()
            .any(|l| l.contains("debug: "))
    );
    // The command line wins as a whole: -v beats QUIETUS_QUIET.
    let verbose = run(&["-v"], &[("QUIETUS_QUIET", "1")]);
    assert!(own_lines(&verbose.stderr).len() > 1);
    // RUST_LOG chooses the filter when set, whatever -q says; -q still drops the line.
    let logged = run(&["-q"], &[("RUST_LOG", "debug")]);
    let lines = own_lines(&logged.stderr);
    assert!(lines.iter().any(|l| l.contains("debug: ")), "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.starts_with("quietus: ended")),
        "{lines:?}"
    );
    assert_no_leak(&marker);
}

#[test]
fn watch_with_no_watch_warns() {
    let marker = Marker::new("cli_opt_watch_no_watch");
    let output = sw(&marker)
        .args(&["-w", "notes", "--no-watch"])
        .sh("exit 0")
        .output();
    assert_code(&output, 0);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("warning: --watch has no effect with --no-watch"),
        "{stderr}"
    );
    assert_no_leak(&marker);
}

/// `quietus ARGS` with raw (possibly non-UTF-8) arguments and variables, the marker in the
/// environment, none of the outside `QUIETUS_*` variables; run to the end.
fn raw_output(
    marker: &Marker,
    args: &[std::ffi::OsString],
    envs: &[(&str, std::ffi::OsString)],
    adjust: impl FnOnce(&mut std::process::Command),
) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"));
    cmd.args(args);
    cli_support::isolate(&mut cmd, marker);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    adjust(&mut cmd);
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(common::GENEROUS);
    cmd.output().expect("quietus runs")
}

/// `name` followed by the byte 0xff: not UTF-8, a legitimate Linux file name.
fn not_utf8(dir: &Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0xff);
    dir.join(std::ffi::OsStr::from_bytes(&bytes))
}

/// Issue 11, item 10: paths are bytes. A watched folder, the report, the events file and the
/// log folder whose names are not UTF-8 work, from the command line and from the environment.
#[test]
fn paths_that_are_not_utf8_are_accepted() {
    for from_env in [false, true] {
        let marker = Marker::new("cli_opt_not_utf8");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let d = dir.path();
        let watch = not_utf8(d, "watch");
        fs::create_dir(&watch).expect("the watched folder");
        let report = not_utf8(d, "report.json");
        let events = not_utf8(d, "events.jsonl");
        let logs = not_utf8(d, "logs");
        // Silent but for a file written every 50 ms for 2.5 s under the watched folder, with an
        // idle timeout of 1.5 s (FILE_IDLE): it lives only if that folder is watched. 5000 bytes
        // of output make a log.
        let script = "head -c 5000 /dev/zero; i=0; while [ $i -lt 50 ]; do \
                      echo $i > \"$W/f\"; i=$((i+1)); sleep 0.05; done; exit 0";
        let paths = [
            ("watch", &watch),
            ("report", &report),
            ("events", &events),
            ("log-dir", &logs),
        ];
        let mut args: Vec<std::ffi::OsString> = vec!["-i".into(), FILE_IDLE.into()];
        let mut envs: Vec<(&str, std::ffi::OsString)> = vec![("W", watch.clone().into())];
        for (option, path) in paths {
            if from_env {
                let var = match option {
                    "watch" => "QUIETUS_WATCH",
                    "report" => "QUIETUS_REPORT",
                    "events" => "QUIETUS_EVENTS",
                    _ => "QUIETUS_LOG_DIR",
                };
                envs.push((var, path.clone().into()));
            } else {
                args.push(format!("--{option}").into());
                args.push(path.clone().into());
            }
        }
        args.extend(
            ["--no-children", "--", "sh", "-c", script, marker.as_str()]
                .map(std::ffi::OsString::from),
        );
        let output = raw_output(&marker, &args, &envs, |_| {});
        assert_code(&output, 0);
        let r: serde_json::Value =
            serde_json::from_slice(&fs::read(&report).expect("the report")).expect("JSON");
        assert_eq!(r["outcome"], "exited", "{r}");
        assert!(r["activity_count"]["files"].as_u64() >= Some(1), "{r}");
        assert_eq!(r["log"][0]["bytes"], 5000, "{r}");
        assert!(
            text(&fs::read(&events).expect("the events")).contains("\"closed\""),
            "from_env {from_env}"
        );
        assert_eq!(fs::read_dir(&logs).expect("the log folder").count(), 1);
        assert_no_leak(&marker);
    }
}

/// Where a value must be text (durations, globs, signals, flags), a value that is not UTF-8 is
/// rejected naming the option, or the variable it came from.
#[test]
fn text_values_that_are_not_utf8_name_the_option_or_variable() {
    use std::os::unix::ffi::OsStrExt;
    let marker = Marker::new("cli_opt_not_utf8_text");
    let bad = std::ffi::OsStr::from_bytes(b"5\xffs").to_os_string();
    let program = ["--", "sh", "-c", "echo ran", marker.as_str()].map(std::ffi::OsString::from);
    for option in ["--idle-timeout", "--grace", "--signal", "--exclude"] {
        let mut args = vec![option.into(), bad.clone()];
        args.extend(program.clone());
        let output = raw_output(&marker, &args, &[], |_| {});
        assert_code(&output, 125);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(option), "{option}: {stderr}");
        assert!(stderr.contains("UTF-8"), "{option}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing ran");
    }
    for var in [
        "QUIETUS_IDLE_TIMEOUT",
        "QUIETUS_SIGNAL",
        "QUIETUS_EXCLUDE",
        "QUIETUS_NO_WATCH",
        "QUIETUS_VERBOSE",
    ] {
        let output = raw_output(&marker, &program, &[(var, bad.clone())], |_| {});
        assert_code(&output, 125);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(var), "{var}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing ran");
    }
    assert_no_leak(&marker);
}

/// The hints of two messages: `--log-dir ''` is not given the watch folders' examples, and a
/// negative duration is not told to go after `--`.
#[test]
fn empty_log_dir_and_negative_durations_get_the_right_hint() {
    let marker = Marker::new("cli_opt_hints");
    let output = sw(&marker).args(&["--log-dir", ""]).sh("echo ran").output();
    assert_code(&output, 125);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("--log-dir"), "{stderr}");
    assert!(!stderr.contains(".agent"), "{stderr}");
    assert!(stderr.contains("/var/log/agents"), "{stderr}");
    for option in ["-i", "-g", "-t", "--check-interval"] {
        let output = sw(&marker).args(&[option, "-5s"]).sh("echo ran").output();
        assert_code(&output, 125);
        let stderr = text(&output.stderr);
        assert!(!stderr.contains("'-- -5"), "{option}: {stderr}");
        assert!(
            stderr.contains("\"-5s\" is not a duration"),
            "{option}: {stderr}"
        );
        assert!(stderr.contains("negative"), "{option}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing ran");
    }
    assert_no_leak(&marker);
}

/// With `HOME` unset the logs (asked for by `--report`) go to a folder of the user's own under
/// the temporary folder; one that others can write to (or that someone else owns) is not used,
/// as ssh refuses such a folder: the program runs without a log, and quietus says why.
#[test]
fn without_home_the_log_folder_must_be_the_users_own() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let marker = Marker::new("cli_opt_no_home");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let uid = rustix::process::geteuid().as_raw();
    let logs = tmp.path().join(format!("quietus-{uid}-logs"));
    let report = tmp.path().join("report.json");
    let run = |script: &str| {
        let args = [
            "-q",
            "--report",
            report.to_str().expect("a UTF-8 temp path"),
            "--",
            "sh",
            "-c",
            script,
            marker.as_str(),
        ]
        .map(std::ffi::OsString::from);
        raw_output(&marker, &args, &[], |cmd| {
            cmd.env_remove("HOME")
                .env_remove("XDG_CACHE_HOME")
                .env("TMPDIR", tmp.path());
        })
    };
    // Made by quietus: the user's, mode 0700; 5000 bytes make a log there.
    let output = run("head -c 5000 /dev/zero");
    assert_code(&output, 0);
    let meta = fs::metadata(&logs).expect("the default log folder");
    assert_eq!(meta.uid(), uid);
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::read_dir(&logs).expect("the log folder").count(), 1);
    // Writable by others (a folder someone else prepared, or left open): not used.
    fs::set_permissions(&logs, fs::Permissions::from_mode(0o777)).expect("chmod");
    let output = run("head -c 5000 /dev/zero");
    assert_code(&output, 0);
    assert_eq!(output.stdout.len(), 5000, "the program ran");
    let report = fs::read_to_string(&report).expect("the report");
    assert!(report.contains("writable by others"), "{report}");
    assert_eq!(fs::read_dir(&logs).expect("the log folder").count(), 1);
    assert_no_leak(&marker);
}

/// `.agent` a symbolic link to `/`: the walk neither crosses into `/proc` and `/sys` nor
/// arms tens of thousands of watches whose churn would hide the stall. The root is too large
/// to watch: the report's `unavailable` says so, few watches are taken, and a stalled bash
/// (a sleep) is ended at the idle timeout (124), not kept alive to its own end (0).
#[test]
fn a_watched_folder_leading_to_the_whole_machine_is_refused_and_the_stall_seen() {
    let marker = Marker::new("cli_opt_watch_root");
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::os::unix::fs::symlink("/", dir.path().join(".agent")).unwrap();
    let report = dir.path().join("report.json");
    let script = format!("sleep 30; : {}", marker.as_str());
    let started = Instant::now();
    let running = sw(&marker)
        .dir(dir.path())
        .args(&["-i", "2s", "--report"])
        .args(&[report.to_str().unwrap(), "--", "bash", "-c", &script])
        .spawn();
    let pid = running.pid();
    let mut most = 0;
    while alive(pid) && started.elapsed() < Duration::from_secs(60) {
        most = most.max(cli_support::inotify_watches(pid));
        std::thread::sleep(Duration::from_millis(20));
        if fs::metadata(&report).is_ok_and(|m| m.len() > 0) {
            break;
        }
    }
    let finished = running.wait();
    assert_eq!(
        finished.status.code(),
        Some(124),
        "the stall was hidden; stderr: {}",
        finished.stderr_text()
    );
    assert!(
        most < 100,
        "{most} inotify watches taken for a root leading to /"
    );
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    let unavailable = report["unavailable"].as_array().unwrap();
    assert!(
        unavailable.iter().any(|u| u["source"] == "files"
            && u["path"].as_str().is_some_and(|p| p.ends_with(".agent"))
            && u["reason"]
                .as_str()
                .is_some_and(|r| r.contains("folders to watch"))),
        "{unavailable:?}"
    );
    assert!(
        finished.stderr_text().contains("folders to watch"),
        "{}",
        finished.stderr_text()
    );
    assert_no_leak(&marker);
}
