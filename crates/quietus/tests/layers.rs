//! The rooms of the library and their layers, as `docs/design.md` lists them ("The rooms of
//! the code"), checked against the code: every `crate::` path in `crates/quietus/src/` is an
//! edge from the room of its file to the room it names; none may run upwards, none may close a
//! circle between rooms, and every room must be in the list. The list is read from the page
//! itself, so the page and the code cannot drift apart. The `unsafe` blocks are counted here
//! too: at most eight, all in `process/sys/unsafe_calls.rs` (the two of the direct start, issue 50,
//! among them). The command's crate (`crates/quietus-cli/src/`) is checked by the same rules
//! against its own list of layers in the page: no import upwards, no circle between its rooms
//! or inside one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The library's sources.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("read the source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The layer of each room of the library, from the numbered list of `design.md`: room name
/// (`monitor`, `outcome`…) → its number (1 is the top). Names that are not rooms of the
/// library (the command's `cli/`, a sub-folder like `monitor/tree/`) are skipped.
fn layers_from_design(design: &str, rooms: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let start = design
        .find("The imports run")
        .expect("design.md says how the imports run");
    let end = design[start..]
        .find("A room may use rooms of its own layer")
        .map(|i| start + i)
        .expect("design.md's layer list ends with its rule");
    let mut layers = BTreeMap::new();
    let mut current = None;
    for line in design[start..end].lines() {
        let trimmed = line.trim_start();
        let number = trimmed
            .split_once(". ")
            .and_then(|(n, _)| n.parse::<usize>().ok())
            .filter(|_| !line.starts_with(' '));
        if let Some(n) = number {
            current = Some(n);
        }
        let Some(layer) = current else { continue };
        for (i, name) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue; // outside backticks
            }
            let room = name.trim_end_matches('/').trim_end_matches(".rs");
            if room.contains('/') || !rooms.contains(room) {
                continue;
            }
            if let Some(before) = layers.insert(room.to_owned(), layer) {
                assert_eq!(before, layer, "design.md lists {room} in two layers");
            }
        }
    }
    layers
}

/// The top-level rooms of the library: each module of `src/` but `lib.rs`.
fn rooms() -> BTreeSet<String> {
    fs::read_dir(src())
        .expect("read src")
        .map(|e| e.expect("an entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            if path.is_dir() {
                // A folder is a room when it is a module of its own (`mod.rs`) or the
                // submodules of a file room (`diagnosis/` beside `diagnosis.rs`).
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|n| *n != "lib")
                    .map(str::to_owned)
            }
        })
        .collect()
}

/// The room of a file: the first component of its path under `src/`, without `.rs`.
fn room_of(file: &Path) -> String {
    let relative = file.strip_prefix(src()).expect("a file of src");
    let first = relative
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The text without its comments (line and doc comments: intra-doc links name rooms too, but
/// are no imports) and without the contents of string literals.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_string = false;
                out.push('"');
            }
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'"' && (i == 0 || bytes[i - 1] != b'\'') {
            in_string = true;
        }
        out.push(c as char);
        i += 1;
    }
    out
}

/// The rooms a file's code names through `crate::` (`use crate::a::B`, `crate::a::f()`,
/// `use crate::{a::B, c::D}`); `pub(in crate::x)` is a visibility, not an edge.
fn named_rooms(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        let after = &rest[at + "crate::".len()..];
        rest = after;
        let prefixed = before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        if prefixed || before.ends_with("in ") {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            // The first identifier of each item at the group's top level.
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && (c.is_alphabetic() || c == '_') => {
                        let ident: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        named.push(ident);
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let ident: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                named.push(ident);
            }
        }
    }
    named
}

/// The names the crate root re-exports (`pub use pid::{InvalidPid, Pid};` in `lib.rs`, an
/// alias by its alias) → the room that defines each: `use crate::Pid` is an edge to `pid`,
/// not to the root, which is above every room.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let code = code_only(lib);
    let mut names = BTreeMap::new();
    for statement in code.split("\npub use ").skip(1) {
        let Some((path, _)) = statement.split_once(';') else {
            continue;
        };
        let path: String = path.chars().filter(|c| !c.is_whitespace()).collect();
        let (prefix, items) = match path.split_once("::{") {
            Some((prefix, group)) => (prefix.to_owned(), group.trim_end_matches('}').to_owned()),
            None => match path.rsplit_once("::") {
                Some((prefix, item)) => (prefix.to_owned(), item.to_owned()),
                None => continue, // `pub use dependency;`: no room of the crate
            },
        };
        let room = prefix.trim_start_matches("crate::");
        let room = room.split("::").next().unwrap_or(room).to_owned();
        for item in items.split(',').filter(|i| !i.is_empty()) {
            let name = item.rsplit_once("as").map_or(item, |(_, alias)| alias);
            let name = name.rsplit("::").next().unwrap_or(name);
            names.insert(name.to_owned(), room.clone());
        }
    }
    names
}

/// The room a name after `crate::` stands for: the room itself, or the room that defines a
/// name re-exported by the root.
fn room_named(named: String, reexports: &BTreeMap<String, String>) -> String {
    reexports.get(&named).cloned().unwrap_or(named)
}

/// The shipped code of a file: without its test modules (`#[cfg(test)] mod tests { … }`,
/// `#[cfg(all(test, target_os = "linux"))] mod …`). A test inside a room may drive the whole
/// from above (a session, in a test of the monitor's wait), as the integration tests do: the
/// layers are those of what is shipped, as in the structure drawing. Test files of their own
/// (`tests.rs`) are left out by [`edges`].
fn shipped_only(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(") {
        let attribute_end = rest[at..].find(']').map_or(rest.len(), |i| at + i + 1);
        let attribute = &rest[at..attribute_end];
        let after = rest[attribute_end..].trim_start();
        let is_test = attribute
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word == "test");
        if !(is_test && after.starts_with("mod ")) {
            out.push_str(&rest[..attribute_end]);
            rest = &rest[attribute_end..];
            continue;
        }
        out.push_str(&rest[..at]);
        let item = &rest[rest.len() - after.len()..];
        let (Some(open), semi) = (item.find('{'), item.find(';')) else {
            rest = &item[item.find(';').map_or(item.len(), |i| i + 1)..];
            continue;
        };
        if semi.is_some_and(|semi| semi < open) {
            rest = &item[semi.map_or(item.len(), |i| i + 1)..]; // `mod tests;`
            continue;
        }
        let mut depth = 0;
        let mut end = item.len();
        for (i, c) in item[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every edge between two rooms: (from, to) → the files that make it.
fn edges(rooms: &BTreeSet<String>) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let lib = fs::read_to_string(src().join("lib.rs")).expect("read lib.rs");
    let reexports = root_reexports(&lib);
    for file in rust_files(&src()) {
        if file == src().join("lib.rs") {
            continue; // the crate root re-exports every room: it is above them all
        }
        if file.file_name().is_some_and(|name| name == "tests.rs") {
            continue; // a test module's file: no part of what is shipped
        }
        let from = room_of(&file);
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        let code = shipped_only(&code);
        for named in named_rooms(&code) {
            let to = room_named(named, &reexports);
            if to != from && rooms.contains(&to) {
                let shown = file.strip_prefix(src()).unwrap().display().to_string();
                edges.entry((from.clone(), to)).or_default().insert(shown);
            }
        }
    }
    edges
}

#[test]
fn every_import_runs_down_the_layers_of_design_md() {
    let rooms = rooms();
    let design =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/design.md"))
            .expect("read docs/design.md");
    let layers = layers_from_design(&design, &rooms);
    let unlisted: Vec<&String> = rooms.iter().filter(|r| !layers.contains_key(*r)).collect();
    assert!(
        unlisted.is_empty(),
        "rooms missing from design.md's layer list: {unlisted:?}"
    );
    let upward: Vec<String> = edges(&rooms)
        .iter()
        .filter(|((from, to), _)| layers[to] < layers[from])
        .map(|((from, to), files)| {
            format!(
                "{from} (layer {}) -> {to} (layer {}) in {files:?}",
                layers[from], layers[to]
            )
        })
        .collect();
    assert!(
        upward.is_empty(),
        "imports running upwards:\n{}",
        upward.join("\n")
    );
}

/// Every name a library file takes through the crate root (`crate::Pid` for `crate::pid::Pid`):
/// file → the names. The root re-exports for users; inside the crate a name comes from its
/// room, so no arrow runs up through `lib.rs` (issue 47, item 6).
fn imports_through_the_root() -> BTreeMap<String, BTreeSet<String>> {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("read lib.rs");
    let reexports = root_reexports(&lib);
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&src()) {
        if file == src().join("lib.rs") || file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        for named in named_rooms(&shipped_only(&code)) {
            if reexports.contains_key(&named) {
                let shown = file.strip_prefix(src()).unwrap().display().to_string();
                found.entry(shown).or_default().insert(named);
            }
        }
    }
    found
}

#[test]
fn no_library_file_takes_a_name_through_the_crate_root() {
    let found = imports_through_the_root();
    assert!(
        found.is_empty(),
        "names taken through the crate root (import them from their room): {found:?}"
    );
    // The checker sees the forms that were there: `use crate::Stdin;` and `crate::Pid` inline.
    let lib = fs::read_to_string(src().join("lib.rs")).expect("read lib.rs");
    let reexports = root_reexports(&lib);
    let sample = "use crate::Stdin;\nfn f() -> Option<crate::Pid> { None }\nuse crate::pid::Pid;";
    let named: Vec<String> = named_rooms(sample)
        .into_iter()
        .filter(|n| reexports.contains_key(n))
        .collect();
    assert_eq!(named, ["Stdin", "Pid"]);
}

#[test]
fn no_import_circle_between_rooms() {
    let rooms = rooms();
    let circles = circles_of(&edges(&rooms).into_keys().collect());
    assert!(circles.is_empty(), "import circles: {circles:?}");
}

#[test]
fn the_parser_finds_edges_and_skips_visibilities_and_comments() {
    let code = code_only(
        "use crate::a::B;\nuse crate::{c::D, e};\npub(in crate::f) fn g() { crate::h::i(); }\n\
         // crate::j::k\n/// [x](crate::l)\nlet s = \"crate::m\";\nlet t = $crate::n;\n",
    );
    assert_eq!(named_rooms(&code), ["a", "c", "e", "h"]);
    let rooms: BTreeSet<String> = ["monitor", "outcome", "sources"].map(String::from).into();
    let design = "The imports run\ndownwards:\n\n1. the monitor: `monitor/` (a `monitor/tree/`);\n\
                  2. results: `outcome.rs`,\n   `sources/` and `cli/`;\n\n\
                  A room may use rooms of its own layer";
    let layers = layers_from_design(design, &rooms);
    assert_eq!(layers["monitor"], 1);
    assert_eq!(layers["outcome"], 2);
    assert_eq!(layers["sources"], 2, "a continued line stays in its layer");
    assert_eq!(layers.len(), 3);
}

#[test]
fn an_import_through_the_root_is_the_edge_to_the_room_that_defines_it() {
    let lib = "mod pid;\nmod outcome;\n/// pub use fake::Doc;\npub use pid::{InvalidPid, Pid};\n\
               pub use outcome::{\n    MonitorResult,\n    Outcome as End,\n};\n\
               pub use process::sys::proc::ProcUnavailable;\npub mod supervisor {\n    \
               pub use crate::outcome::SupervisorDeath;\n}\n";
    let reexports = root_reexports(lib);
    let expected = [
        ("End", "outcome"),
        ("InvalidPid", "pid"),
        ("MonitorResult", "outcome"),
        ("Pid", "pid"),
        ("ProcUnavailable", "process"),
    ];
    let expected: BTreeMap<String, String> = expected
        .iter()
        .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
        .collect();
    assert_eq!(
        reexports, expected,
        "a nested module's names are not the root's"
    );
    // A leaf (`pid`, layer 2) importing an upper room (`outcome`, layer 1) through the root is
    // the upward edge it is, and a room's own name is left as it is.
    let code = code_only(
        "use crate::Pid;\nfn f() -> crate::End { todo!() }\nuse crate::{pid, MonitorResult};\n",
    );
    let named: Vec<String> = named_rooms(&code)
        .into_iter()
        .map(|n| room_named(n, &reexports))
        .collect();
    assert_eq!(named, ["pid", "outcome", "pid", "outcome"]);
}

#[test]
fn test_modules_are_no_edges_of_the_shipped_code() {
    let code = "use crate::a::B;\n#[cfg(test)]\nmod tests {\n    use crate::c::D;\n    \
                fn f() { if x { crate::e::g(); } }\n}\n#[cfg(all(test, target_os = \"linux\"))]\n\
                mod more;\n#[cfg(target_os = \"linux\")]\nmod linux {\n    use crate::h::I;\n}\n\
                #[cfg(test)]\nfn helper() {}\nuse crate::j::K;\n";
    assert_eq!(named_rooms(&shipped_only(code)), ["a", "h", "j"]);
}

#[test]
fn the_crate_root_holds_as_many_names_as_design_md_says_and_at_most_45() {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("read lib.rs");
    let modules = code_only(&lib)
        .lines()
        .filter(|line| line.starts_with("pub mod "))
        .count();
    let names = root_reexports(&lib).len() + modules;
    let design =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/design.md"))
            .expect("read docs/design.md");
    let said = design
        .split_once("The library's public API is ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse::<usize>().ok())
        .expect("design.md gives the number of names at the crate root");
    assert_eq!(names, said, "{modules} modules and the re-exports");
    assert!(
        names <= 45,
        "the root is for what a user starts from: {names} names"
    );
}

#[test]
fn at_most_eight_unsafe_blocks_all_in_unsafe_calls() {
    let fenced = src().join("process/sys/unsafe_calls.rs");
    let mut inside = 0;
    let mut outside = Vec::new();
    for file in rust_files(&src()) {
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        let blocks = code
            .match_indices("unsafe")
            .filter(|(at, _)| {
                let before = code[..*at].chars().next_back();
                let after = code[at + "unsafe".len()..].trim_start();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && after.starts_with('{')
            })
            .count();
        if file == fenced {
            inside = blocks;
        } else if blocks > 0 {
            outside.push(file.display().to_string());
        }
    }
    assert!(
        outside.is_empty(),
        "unsafe blocks outside unsafe_calls.rs: {outside:?}"
    );
    assert!(
        inside <= 8,
        "{inside} unsafe blocks in unsafe_calls.rs: at most 8"
    );
    assert!(inside > 0, "the count found the fenced blocks");
}

/// The generic arguments of every `Result<…>` in `code`, split at their top level.
fn result_arguments(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("Result<") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `RetryResult<`, `io::Result<` is fine: its `::` is no identifier
        }
        let mut depth = 0;
        let mut args = vec![String::new()];
        for c in code[at + "Result".len()..].chars() {
            match c {
                '<' | '(' | '[' => {
                    depth += 1;
                    if depth == 1 {
                        continue;
                    }
                }
                '>' | ')' | ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut().expect("one argument").push(c);
        }
        found.push(
            args.into_iter()
                .map(|a| a.split_whitespace().collect())
                .collect(),
        );
    }
    found
}

#[test]
fn no_result_with_a_string_error_in_the_library() {
    let mut stringly = Vec::new();
    for file in rust_files(&src()) {
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        for args in result_arguments(&code) {
            if args.len() == 2 && matches!(args[1].as_str(), "String" | "&str" | "&'staticstr") {
                stringly.push(format!("{}: Result<{}>", file.display(), args.join(", ")));
            }
        }
    }
    assert!(
        stringly.is_empty(),
        "errors that are strings, not types:\n{}",
        stringly.join("\n")
    );
    // The search itself: it sees through line breaks and nested generics.
    let seen = result_arguments("fn f() -> Result<(PathBuf,\n String), String> {}");
    assert_eq!(seen, [["(PathBuf,String)", "String"]]);
}

/// Reasons are types too: no field of the library named as a reason (`reason`, `why`,
/// `error`, `problem`, `failed`) holds a `String`, bare or in an `Option`. The one kind left in
/// words is a parser's own message about a pattern it rejected
/// (`ConfigError::InvalidGlob` / `InvalidPattern`): globset's and regex's error types are not
/// to appear in a public signature, so their text is what is kept.
#[test]
fn no_reason_is_a_string_in_the_library() {
    let mut stringly = Vec::new();
    for file in rust_files(&src()) {
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        let words: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
        for name in ["reason", "why", "error", "problem", "failed"] {
            for ty in ["String", "Option<String>"] {
                for field in [format!("{name}: {ty},"), format!("{name}: {ty} }}")] {
                    let mut at = 0;
                    while let Some(found) = words[at..].find(&field) {
                        let start = at + found;
                        // A whole word: `first_error: String` is another name.
                        let whole = start == 0
                            || !words[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_');
                        let parser_message =
                            words[start.saturating_sub(120)..start].contains("pattern: String,");
                        if whole && !parser_message {
                            stringly.push(format!("{}: {field}", file.display()));
                        }
                        at = start + field.len();
                    }
                }
            }
        }
    }
    assert!(
        stringly.is_empty(),
        "reasons that are strings, not types:\n{}",
        stringly.join("\n")
    );
}

/// The module path of a source file (`monitor/tree/mod.rs` → `monitor::tree`), from its path
/// under `src/`.
fn module_of(relative: &str) -> Vec<String> {
    let mut path: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if path
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        path.pop();
    }
    path
}

/// Whether the attributes just before `at` make the item there test code (`#[cfg(test)]`,
/// `#[cfg(all(test, …))]`).
fn under_cfg_test(code: &str, at: usize) -> bool {
    let before = code[..at].trim_end();
    before.ends_with(']')
        && before.rfind("#[").is_some_and(|open| {
            let attribute = &before[open..];
            attribute.starts_with("#[cfg(") && attribute.contains("test")
        })
}

/// The modules a file declares as test code (`#[cfg(test)] mod tests;`): their files are
/// left out, as test code draws no arrow of the house.
fn test_files_declared(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        let rest = &code[at + "mod ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].starts_with(';') && under_cfg_test(code, at) {
            found.push(name);
        }
    }
    found
}

/// The inline modules of a file's code (`mod tests { … }`): where each one's body starts and
/// ends, its name (so that a `super::` inside one is read from the right module), and whether
/// it is test code.
fn inline_modules(code: &str) -> Vec<(usize, usize, String, bool)> {
    // Braces in character literals are no blocks.
    let code = code.replace("'{'", "' '").replace("'}'", "' '");
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[at + "mod ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue; // `mod x;`: a file of its own
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let test = under_cfg_test(&code, at);
                        found.push((open, open + i, name.clone(), test));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// Every path of a file's code that starts at `crate::`, `super::` or `self::`, with where it
/// is, its leading segments (the keyword included) up to its first item or group, and for a
/// group (`use super::{a::B, c}`) one path per item, with the item's first segment.
fn paths_in(code: &str) -> Vec<(usize, Vec<String>)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let Some(start) = ["crate::", "super::", "self::"]
            .iter()
            .filter_map(|k| rest.find(k))
            .min()
        else {
            break;
        };
        let begin = at + start;
        at = begin + 1;
        let before = &code[..begin];
        if before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':')
            || before.ends_with("in ")
        {
            continue; // inside another path, a macro's `$crate`, or `pub(in crate::x)`
        }
        let mut segments = Vec::new();
        let mut tail = &code[begin..];
        loop {
            let name = ident(tail);
            if name.is_empty() {
                break;
            }
            tail = &tail[name.len()..];
            segments.push(name);
            match tail.strip_prefix("::") {
                Some(next) => tail = next,
                None => break,
            }
        }
        if let Some(group) = tail.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && (c.is_alphabetic() || c == '_') => {
                        let mut path = segments.clone();
                        path.push(ident(&group[i..]));
                        found.push((begin, path));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            found.push((begin, segments));
        }
    }
    found
}

/// The module a path names, read from the module `here` (`super::` and `self::` resolved).
fn resolve(here: &[String], path: &[String]) -> Vec<String> {
    let mut module = here.to_vec();
    let mut segments = path.iter().peekable();
    match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            module.clear();
            segments.next();
        }
        Some("self") => {
            segments.next();
        }
        _ => {}
    }
    for segment in segments {
        match segment.as_str() {
            "super" => {
                module.pop();
            }
            "self" => {}
            name => module.push(name.to_owned()),
        }
    }
    module
}

/// Every edge between two files (or folders) side by side inside a room: (the folder, from,
/// to) → the files that make it. `files` holds each source file's path under `src/` and its
/// code. A folder's own module (its `mod.rs`, or `x.rs` beside `x/`) is above its files, as
/// `lib.rs` is above the rooms: what it imports from them, and what they take from it, are no
/// edges between them. Test code (a `#[cfg(test)]` module, inline or a file) is left out.
fn edges_inside_rooms(
    files: &[(String, String)],
) -> BTreeMap<(String, String, String), BTreeSet<String>> {
    let known: BTreeSet<Vec<String>> = files.iter().map(|(path, _)| module_of(path)).collect();
    let tests: BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|(path, code)| {
            let parent = module_of(path);
            test_files_declared(code).into_iter().map(move |name| {
                let mut module = parent.clone();
                module.push(name);
                module
            })
        })
        .collect();
    let mut edges: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for (path, code) in files {
        let file_module = module_of(path);
        if tests.iter().any(|test| file_module.starts_with(test)) {
            continue;
        }
        let inline = inline_modules(code);
        for (at, segments) in paths_in(code) {
            let mut here = file_module.clone();
            // The inline modules around the path, outermost first.
            let mut around: Vec<&(usize, usize, String, bool)> = inline
                .iter()
                .filter(|(open, close, _, _)| *open < at && at < *close)
                .collect();
            if around.iter().any(|(_, _, _, test)| *test) {
                continue;
            }
            around.sort_by_key(|(open, _, _, _)| *open);
            here.extend(around.iter().map(|(_, _, name, _)| name.clone()));
            let target = resolve(&here, &segments);
            let common = file_module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            // Inside a room: below the top level, between two files of one folder.
            if common == 0 || common >= file_module.len() || common >= target.len() {
                continue;
            }
            let to = &target[..=common];
            if !known.contains(to) {
                continue; // an item of the folder's own module
            }
            edges
                .entry((
                    file_module[..common].join("::"),
                    file_module[common].clone(),
                    target[common].clone(),
                ))
                .or_default()
                .insert(path.clone());
        }
    }
    edges
}

/// The circles of a directed graph, each as `a -> b -> a`.
fn circles_of(edges: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from.as_str()).or_default().push(to.as_str());
    }
    // Depth first; a node met again while on the path closes a circle.
    fn visit<'a>(
        node: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node);
            circles.push(circle.join(" -> "));
            return;
        }
        if !done.insert(node) {
            return;
        }
        path.push(node);
        for to in next.get(node).into_iter().flatten() {
            visit(to, next, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for node in next.keys() {
        visit(node, &next, &mut Vec::new(), &mut done, &mut circles);
    }
    circles
}

/// The circles between the files of one folder, each with the folder and the files that make
/// its edges.
fn circles_inside_rooms(files: &[(String, String)]) -> Vec<String> {
    let edges = edges_inside_rooms(files);
    let folders: BTreeSet<&String> = edges.keys().map(|(folder, _, _)| folder).collect();
    let mut found = Vec::new();
    for folder in folders {
        let inside: BTreeSet<(String, String)> = edges
            .keys()
            .filter(|(f, _, _)| f == folder)
            .map(|(_, from, to)| (from.clone(), to.clone()))
            .collect();
        for circle in circles_of(&inside) {
            let steps: Vec<&str> = circle.split(" -> ").collect();
            let made_by: BTreeSet<&String> = steps
                .windows(2)
                .filter_map(|step| {
                    edges.get(&(folder.clone(), step[0].to_owned(), step[1].to_owned()))
                })
                .flatten()
                .collect();
            found.push(format!("in {folder}: {circle} (imports in {made_by:?})"));
        }
    }
    found
}

/// The circles inside rooms not yet taken apart, each as the checker names it; the list may
/// only shrink (a circle taken apart must leave it, and a new one fails the test).
const CIRCLES_LEFT: &[&str] = &[];

#[test]
fn no_import_circle_inside_a_room() {
    let files: Vec<(String, String)> = rust_files(&src())
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(src()).unwrap().display().to_string();
            let code = code_only(&fs::read_to_string(file).expect("read a source file"));
            (relative, code)
        })
        .collect();
    let circles = circles_inside_rooms(&files);
    let named: Vec<&str> = circles
        .iter()
        .map(|c| c.split(" (imports in").next().unwrap_or(c))
        .collect();
    let new: Vec<&String> = circles
        .iter()
        .zip(&named)
        .filter(|(_, name)| !CIRCLES_LEFT.contains(name))
        .map(|(circle, _)| circle)
        .collect();
    assert!(
        new.is_empty(),
        "import circles inside rooms:\n{}",
        new.iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let gone: Vec<&&str> = CIRCLES_LEFT
        .iter()
        .filter(|left| !named.contains(left))
        .collect();
    assert!(
        gone.is_empty(),
        "circles taken apart, to strike from CIRCLES_LEFT: {gone:?}"
    );
}

#[test]
fn the_room_checker_finds_a_circle_between_the_files_of_a_room() {
    let file = |path: &str, code: &str| (path.to_owned(), code_only(code));
    let files = [
        file(
            "m/mod.rs",
            "mod a; mod b; mod c; pub use a::A; fn helper() {}",
        ),
        file("m/a.rs", "use super::b::B; use super::helper;"),
        file("m/b.rs", "use crate::m::{c::C, helper};"),
        // From inside an inline module, `super::super` is the folder.
        file(
            "m/c.rs",
            "fn f() {}\nmod tests { use super::super::a::A; use super::f; }",
        ),
        // Another room's circle-free files, and an import across rooms.
        file("n/mod.rs", "mod d; mod e; mod f;"),
        file(
            "n/d.rs",
            "use super::e::E; use crate::m::a::A; use super::f::F;",
        ),
        file("n/e.rs", "const S: &str = \"super::d\"; // super::d"),
        // Test code draws no arrow: an inline test module, and a test file.
        file(
            "n/f.rs",
            "#[cfg(test)]\nmod tests { use super::super::d::D; }\n\
             #[cfg(all(test, unix))]\nmod more;",
        ),
        file("n/f/more.rs", "use crate::n::d::D;"),
    ];
    let edges: Vec<(String, String, String)> = edges_inside_rooms(&files).into_keys().collect();
    let edge = |f: &str, a: &str, b: &str| (f.to_owned(), a.to_owned(), b.to_owned());
    assert_eq!(
        edges,
        [
            edge("m", "a", "b"),
            edge("m", "b", "c"),
            edge("m", "c", "a"),
            edge("n", "d", "e"),
            edge("n", "d", "f")
        ]
    );
    let circles = circles_inside_rooms(&files);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(
        circles[0].starts_with("in m: a -> b -> c -> a"),
        "{circles:?}"
    );
    // A circle of two, and none once it is broken.
    let two = [
        file("m/x/mod.rs", ""),
        file("m/x/p.rs", "use super::q;"),
        file("m/x/q.rs", "pub fn g() { super::p::h() }"),
    ];
    assert_eq!(circles_inside_rooms(&two).len(), 1);
    assert!(circles_inside_rooms(&two[..2]).is_empty());
}

/// The functions of `code` named for a reason (a word of their name is `reason`, `why`,
/// `error`, `problem` or `failed`: `sink_error`, `why_not`) that return it as text
/// (`String`, `Option<String>`, `&str`, `Option<&str>`), each as `name -> type`.
fn reason_getters_in_words(code: &str) -> Vec<String> {
    let words: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = Vec::new();
    for (at, _) in words.match_indices("fn ") {
        if words[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &words[at + "fn ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let reason = name
            .split('_')
            .any(|w| ["reason", "why", "error", "problem", "failed"].contains(&w));
        // The signature: from the name to the body or the end of a declaration.
        let end = rest.find(['{', ';']).unwrap_or(rest.len());
        let Some((_, returned)) = rest[..end].rsplit_once("->") else {
            continue;
        };
        let returned = returned.split(" where ").next().unwrap_or("").trim();
        let text = [
            "String",
            "Option<String>",
            "&str",
            "Option<&str>",
            "&'static str",
        ];
        if reason && text.contains(&returned) {
            found.push(format!("{name} -> {returned}"));
        }
    }
    found
}

/// Reasons are types in what functions return too: no function of the library named for a
/// reason returns it as text (`Session::sink_error` did).
#[test]
fn no_reason_getter_returns_text_in_the_library() {
    let mut stringly = Vec::new();
    for file in rust_files(&src()) {
        let code = code_only(&fs::read_to_string(&file).expect("read a source file"));
        for getter in reason_getters_in_words(&code) {
            stringly.push(format!("{}: {getter}", file.display()));
        }
    }
    assert!(
        stringly.is_empty(),
        "reasons returned as text, not types:\n{}",
        stringly.join("\n")
    );
    // The search itself: over line breaks, by a word of the name, not a part of one.
    let code = "pub fn sink_error(&self, s: Stream)\n -> Option<String> { x }\n\
                fn why_not(&self) -> &str;\nfn errors(&self) -> String {}\n\
                fn error(&self) -> Option<SinkError> {}\nfn name(&self) -> String {}\n\
                fn failed_with<T>(t: T) -> String where T: Debug {}";
    assert_eq!(
        reason_getters_in_words(code),
        [
            "sink_error -> Option<String>",
            "why_not -> &str",
            "failed_with -> String"
        ]
    );
}

/// The command's crate's sources (`crates/quietus-cli/src`): a client of the library with
/// rooms and layers of its own, listed in `design.md` and checked by the same rules.
fn cli_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../quietus-cli/src")
}

/// The command's crate's rooms: each module of its `src/` but `main.rs`, which is above them.
fn cli_rooms() -> BTreeSet<String> {
    fs::read_dir(cli_src())
        .expect("read the command's src")
        .map(|e| e.expect("an entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|n| *n != "main")
                    .map(str::to_owned)
            }
        })
        .collect()
}

/// The command's crate's files: (path under its `src/`, shipped code without comments).
fn cli_files() -> Vec<(String, String)> {
    rust_files(&cli_src())
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(cli_src()).unwrap().display().to_string();
            let code = code_only(&fs::read_to_string(file).expect("read a source file"));
            (relative, code)
        })
        .collect()
}

/// Every edge between two rooms of the command's crate: (from, to) → the files that make it.
fn cli_edges(rooms: &BTreeSet<String>) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (path, code) in cli_files() {
        let from = path
            .split('/')
            .next()
            .unwrap_or(&path)
            .trim_end_matches(".rs");
        if from == "main" {
            continue; // the crate root: above every room
        }
        for to in named_rooms(&shipped_only(&code)) {
            if to != from && rooms.contains(&to) {
                edges
                    .entry((from.to_owned(), to))
                    .or_default()
                    .insert(path.clone());
            }
        }
    }
    edges
}

/// The layer of each room of the command's crate, from its numbered list in `design.md`.
fn cli_layers_from_design(design: &str, rooms: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let start = design
        .find("The command's crate has layers of its own")
        .expect("design.md lists the command's layers");
    let end = design[start..]
        .find("Its rooms follow the same rules")
        .map(|i| start + i)
        .expect("design.md's list of the command's layers ends with its rule");
    let mut layers = BTreeMap::new();
    let mut current = None;
    for line in design[start..end].lines() {
        let number = line
            .split_once(". ")
            .and_then(|(n, _)| n.parse::<usize>().ok());
        if let Some(n) = number {
            current = Some(n);
        }
        let Some(layer) = current else { continue };
        for (i, name) in line.split('`').enumerate() {
            let room = name.trim_end_matches('/').trim_end_matches(".rs");
            if i % 2 == 1 && rooms.contains(room) {
                assert!(
                    layers.insert(room.to_owned(), layer).is_none(),
                    "design.md lists the command's {room} twice"
                );
            }
        }
    }
    layers
}

#[test]
fn the_command_crate_imports_run_down_its_layers_without_a_circle() {
    let rooms = cli_rooms();
    let design =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/design.md"))
            .expect("read docs/design.md");
    let layers = cli_layers_from_design(&design, &rooms);
    let unlisted: Vec<&String> = rooms.iter().filter(|r| !layers.contains_key(*r)).collect();
    assert!(
        unlisted.is_empty(),
        "rooms of the command missing from design.md's list: {unlisted:?}"
    );
    let edges = cli_edges(&rooms);
    let upward: Vec<String> = edges
        .iter()
        .filter(|((from, to), _)| layers[to] < layers[from])
        .map(|((from, to), files)| format!("{from} -> {to} in {files:?}"))
        .collect();
    assert!(
        upward.is_empty(),
        "the command's imports running upwards:\n{}",
        upward.join("\n")
    );
    let circles = circles_of(&edges.into_keys().collect());
    assert!(
        circles.is_empty(),
        "import circles between the command's rooms: {circles:?}"
    );
    let inside = circles_inside_rooms(&cli_files());
    assert!(
        inside.is_empty(),
        "import circles inside the command's rooms:\n{}",
        inside.join("\n")
    );
}

#[test]
fn the_command_crate_checker_finds_an_upward_import_and_a_circle() {
    let rooms: BTreeSet<String> = ["cli", "settings", "sys"].map(str::to_owned).into();
    let design = "The command's crate has layers of its own\n\n1. `cli/`;\n2. `settings/`;\n\
                  3. `sys.rs`.\n\nIts rooms follow the same rules";
    let layers = cli_layers_from_design(design, &rooms);
    assert_eq!(layers["cli"], 1);
    assert_eq!(layers["sys"], 3);
    // `settings` naming `cli` runs up; with `cli` naming `settings`, a circle.
    let code = shipped_only(&code_only(
        "use crate::cli::options::command;\n#[cfg(test)]\nmod tests { use crate::sys::x; }",
    ));
    assert_eq!(named_rooms(&code), ["cli"]);
    let edges: BTreeSet<(String, String)> = [("settings", "cli"), ("cli", "settings")]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .into();
    assert_eq!(circles_of(&edges).len(), 1);
    let files = [
        ("settings/a.rs".to_owned(), code_only("use super::b::B;")),
        ("settings/b.rs".to_owned(), code_only("use super::a::A;")),
    ];
    assert_eq!(circles_inside_rooms(&files).len(), 1);
}
