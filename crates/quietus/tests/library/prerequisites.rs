//! The shared kit's prerequisite check (issue 46, item 3): a missing program fails the test
//! that needs it, naming the program and the line that installs it; a script asks for the
//! programs it runs.

use crate::support as common;

use std::panic;

use common::prerequisites::{PREREQUISITES, find_program, programs_in, require};

/// The text of the panic `f` raises (it must raise one).
fn panic_text(f: impl FnOnce() + panic::UnwindSafe) -> String {
    let payload = panic::catch_unwind(f).expect_err("it panics");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .expect("a text message")
}

#[test]
fn a_missing_program_fails_naming_it_and_its_install_line() {
    let tool = "quietus-test-no-such-program-46";
    assert_eq!(find_program(tool), None);
    let message = panic_text(|| {
        require(tool, "apt-get install quietus-no-such-package");
    });
    assert!(
        message.starts_with("missing prerequisite: `quietus-test-no-such-program-46`"),
        "{message}"
    );
    assert!(
        message.contains("`apt-get install quietus-no-such-package`"),
        "{message}"
    );
    // The same through a path that names no program.
    let message = panic_text(|| {
        require("/nonexistent/quietus-46/tmux", "apt-get install tmux");
    });
    assert!(
        message.contains("/nonexistent/quietus-46/tmux"),
        "{message}"
    );
    assert!(message.contains("`apt-get install tmux`"), "{message}");
}

#[test]
fn a_present_program_is_found_where_path_has_it() {
    let sh = require("sh", "apt-get install dash");
    assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
    // A folder or a file that cannot be run is no program.
    assert_eq!(find_program("/"), None);
    let dir = tempfile::tempdir().expect("a scratch folder");
    let plain = dir.path().join("not-a-program");
    std::fs::write(&plain, "#!/bin/sh\n").expect("written");
    assert_eq!(find_program(plain.to_str().expect("UTF-8")), None);
    assert_eq!(find_program("/bin/sh"), Some("/bin/sh".into()));
}

#[test]
fn a_script_asks_for_the_programs_it_runs_and_only_those() {
    assert_eq!(programs_in("exec python3 -c 'print(1)'"), ["python3"]);
    assert_eq!(
        programs_in("for i in 1 2; do cc -O2 -c w.c; done; (perl -e 1)|tmux ls"),
        ["tmux", "perl", "cc"]
    );
    assert!(programs_in("echo ready; sleep 1; cat typescript; ccache -s").is_empty());
    // Every listed program has a line that installs it.
    for (tool, install) in PREREQUISITES {
        assert!(install.starts_with("apt-get install "), "{tool}: {install}");
    }
}
