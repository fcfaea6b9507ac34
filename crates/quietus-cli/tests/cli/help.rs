//! Every example the help shows runs: the command lines of `quietus --help`'s EXAMPLES and of
//! `quietus -h`, and each option's `Example:` (with `-- PROGRAM` added where it names none),
//! as a user types them into a shell, with stand-ins for the agents they name (`codex`,
//! `claude`, `./flaky-test.sh`) on `PATH`. What an example says it does is checked too: "only
//! output counts" ends a program that is silent while its files, descendants' CPU and network
//! are busy.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cli_support::{assert_code, isolate, summary_line, text};
use common::{GENEROUS, Marker, assert_no_leak};

/// `quietus ARGS` as the user sees it: its stdout.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_quietus"))
        .args(args)
        .env_clear()
        .output()
        .expect("quietus --help runs");
    assert!(output.status.success(), "{output:?}");
    text(&output.stdout)
}

/// The command lines of the help's EXAMPLES section (`--help`) or `Example:` block (`-h`):
/// the lines that start with `quietus `.
fn example_lines(help: &str, heading: &str) -> Vec<String> {
    let start = help
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in the help:\n{help}"));
    help[start..]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| line.starts_with("quietus "))
        .map(str::to_owned)
        .collect()
}

/// Each option's `Example: …` in `--help`.
fn option_examples(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|line| line.trim().strip_prefix("Example: "))
        .map(str::to_owned)
        .collect()
}

/// A folder with stand-ins for the programs the examples name: each prints its name and
/// arguments and exits 0.
struct Stage {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    work: PathBuf,
}

impl Stage {
    fn new() -> Stage {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let bin = dir.path().join("bin");
        let work = dir.path().join("work");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&work).unwrap();
        for (folder, name) in [(&bin, "codex"), (&bin, "claude"), (&work, "flaky-test.sh")] {
            let path = folder.join(name);
            fs::write(&path, format!("#!/bin/sh\necho \"stand-in {name}: $*\"\n")).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Stage {
            _dir: dir,
            bin,
            work,
        }
    }

    /// Runs `line` with `sh -c` in the work folder (also `HOME`), the stand-ins and this
    /// build's quietus first on `PATH`.
    fn run(&self, marker: &Marker, line: &str) -> Output {
        let quietus = Path::new(env!("CARGO_BIN_EXE_quietus"));
        let path = format!(
            "{}:{}:{}",
            self.bin.display(),
            quietus.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(line).current_dir(&self.work);
        isolate(&mut cmd, marker);
        cmd.env("PATH", path).env("HOME", &self.work);
        let mut cmd = assert_cmd::Command::from_std(cmd);
        cmd.timeout(GENEROUS);
        cmd.write_stdin("").output().expect("sh runs")
    }
}

#[test]
fn every_example_of_the_help_runs() {
    let marker = Marker::new("cli_help_examples");
    let stage = Stage::new();
    let long = help(&["--help"]);
    let mut lines = example_lines(&long, "\nEXAMPLES\n");
    lines.extend(example_lines(&help(&["-h"]), "\nExample:\n"));
    assert!(lines.len() >= 4, "{lines:?}");
    for line in &lines {
        let output = stage.run(&marker, line);
        assert_code(&output, 0);
        let (program, args) = line
            .split_once(" -- ")
            .unwrap_or_else(|| panic!("{line}: no -- PROGRAM"));
        let name = args.split(' ').next().unwrap().trim_start_matches("./");
        assert!(
            text(&output.stdout).starts_with(&format!("stand-in {name}: ")),
            "{line}: {output:?}"
        );
        assert!(program.starts_with("quietus "), "{line}");
    }
    let options = option_examples(&long);
    assert!(options.len() >= 30, "{options:?}");
    for example in &options {
        let line = if example.contains(" -- ") {
            format!("quietus {example}")
        } else {
            format!("quietus {example} -- echo example ran")
        };
        let output = stage.run(&marker, &line);
        let stderr = text(&output.stderr);
        if example.starts_with("--containment cgroup") && output.status.code() == Some(125) {
            // Without the right to create a cgroup the mode is refused, as its help says.
            assert!(stderr.contains("cgroup"), "{line}: {stderr}");
            continue;
        }
        assert_code(&output, 0);
        let stdout = text(&output.stdout);
        assert!(
            stdout.contains("example ran") || stdout.contains("stand-in "),
            "{line}: {output:?}"
        );
    }
    assert_no_leak(&marker);
}

/// "Only output counts (a plain silence timeout)": with the example's options, a program that
/// prints once, then keeps a descendant on the CPU, writes under `.agent` and moves bytes on a
/// TCP connection, is ended once its output has been quiet for the idle timeout (shortened
/// from the example's 30s to 1s), and its end line names output alone.
#[test]
fn the_only_output_counts_example_is_a_plain_silence_timeout() {
    let marker = Marker::new("cli_help_only_output");
    let long = help(&["--help"]);
    let line = example_lines(&long, "\nEXAMPLES\n")
        .into_iter()
        .find(|line| line.contains("flaky-test.sh"))
        .expect("the help's only-output example");
    let options = line
        .strip_prefix("quietus ")
        .and_then(|l| l.strip_suffix(" -- ./flaky-test.sh"))
        .expect("quietus OPTIONS -- ./flaky-test.sh");
    assert!(options.ends_with("-i 30s"), "{line}");
    let options = options.replace("-i 30s", "-i 1s");
    let stage = Stage::new();
    // Busy everywhere but its output: a spinning descendant, a file under .agent every 100 ms,
    // and 64 KiB a second over a loopback TCP connection.
    let busy = r#"import os, socket, sys, time
os.makedirs(".agent", exist_ok=True)
print("started", flush=True)
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
client = socket.create_connection(server.getsockname()); peer, _ = server.accept()
if os.fork() == 0:
    while True: pass
while True:
    client.sendall(b"x" * 6554); peer.recv(65536)
    open(".agent/progress", "w").write(str(time.time()))
    time.sleep(0.1)
"#;
    fs::write(stage.work.join("busy.py"), busy).unwrap();
    let output = stage.run(
        &marker,
        &format!("quietus {options} -- python3 busy.py {}", marker.as_str()),
    );
    assert_code(&output, 124);
    assert_eq!(text(&output.stdout), "started\n");
    let summary = summary_line(&output.stderr);
    assert!(summary.contains("idle (output "), "{summary}");
    for source in ["files", "children", "network"] {
        assert!(!summary.contains(source), "only output counts: {summary}");
    }
    assert_no_leak(&marker);
}
