//! The README's library example as a user copies it: its Rust blocks hide no line (a doctest's
//! `# …` lines are left out of what the reader sees, so a snippet that needs one does not
//! compile pasted), each is a whole program, and its dependency line works before a release:
//! a path to this crate from a project beside the clone.

use std::path::Path;

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).expect("the README")
}

/// The bodies of the README's code blocks in `language`.
fn blocks(text: &str, language: &str) -> Vec<String> {
    let open = format!("```{language}\n");
    text.split(&open)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_readme_rust_blocks_are_whole_programs_with_no_hidden_line() {
    let rust = blocks(&readme(), "rust");
    assert!(!rust.is_empty(), "the README has a Rust example");
    for block in &rust {
        for line in block.lines() {
            let hidden = line == "#" || line.trim_start().starts_with("# ");
            assert!(!hidden, "a hidden doctest line in the README: {line:?}");
        }
        assert!(block.contains("fn main()"), "not a whole program:\n{block}");
    }
}

#[test]
fn the_readme_dependency_line_names_this_crate_by_path() {
    let toml = blocks(&readme(), "toml");
    let line = toml
        .iter()
        .flat_map(|b| b.lines())
        .find(|l| l.starts_with("quietus = "))
        .expect("a dependency line for quietus");
    let path = line
        .split("path = \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("not a path dependency (nothing is published yet): {line}"));
    // From a project beside the clone: `../quietus/` is the clone's root.
    let inside = path
        .strip_prefix("../quietus/")
        .unwrap_or_else(|| panic!("{path}: not a path into a clone beside the project"));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(inside)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    assert!(
        text.contains("name = \"quietus\""),
        "{}",
        manifest.display()
    );
}

/// The commands a user copies run as they are for root (a container, CI) and for a user with
/// sudo: none starts with `sudo` (root may have no sudo); the prose says to add it.
#[test]
fn the_readme_shell_commands_do_not_start_with_sudo() {
    for block in blocks(&readme(), "sh") {
        for line in block.lines() {
            assert!(!line.starts_with("sudo "), "{line}");
        }
    }
}
