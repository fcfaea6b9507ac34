//! The settings table: each setting a client can give a session, defined once (as ripgrep's
//! `crates/core/flags/defs.rs` defines each flag once): its name, type, range, default, the
//! command's flag and environment variable, its key in `serve`'s `process/start` and in `mcp`'s
//! `exec_command` (or why a surface leaves it out), its doc line, and how it sets the library's
//! [`MonitorConfig`](quietus::MonitorConfig).
//!
//! From this table come: the command's options for these settings (clap arguments,
//! [`cli_args`]) and their environment variables; `serve`'s and `mcp`'s reading of them
//! ([`apply_json`], one path for both) and their schema entries ([`Def::json_schema`]); the
//! error messages of all three, which name the setting as the caller spelled it
//! ([`Surface`]); the `process/start` part of `quietus serve --schema`; and the rows of the
//! option tables in `docs/cli.md`, `docs/serve.md` and `docs/mcp.md` (a test fails when they
//! differ). The control actions have their table beside it ([`controls`]).
//!
//! The files: `table` (the rows), `def` (what a row is; the [`Draft`] the rows apply to),
//! `arg` (a row as a clap option), `json` (a row in JSON), `parse` (the parsers every
//! surface shares), `controls`. Adding a setting is one row in [`SETTINGS`] whose `apply`
//! calls the library's setter.

use std::time::Duration;

use clap::Arg;
use quietus::error::Setting;
use serde_json::{Value as Json, json};

use crate::jsonrpc::protocol::RpcError;

mod arg;
pub(crate) mod controls;
mod def;
mod json;
pub(crate) mod parse;
mod table;

pub(crate) use def::{Def, Default, Draft, Item, Key, Kind, SettingValue, Surface, default_grace};
use json::ms_of;
pub(crate) use table::SETTINGS;

/// The setting named `name`.
pub(crate) fn by_name(name: &str) -> Option<&'static Def> {
    SETTINGS.iter().find(|d| d.name == name)
}

/// The setting the library calls `setting`.
pub(crate) fn by_setting(setting: Setting) -> Option<&'static Def> {
    SETTINGS.iter().find(|d| d.setting == Some(setting))
}

/// The command's arguments for every setting with a flag, shown first in `--help`.
pub(crate) fn cli_args() -> impl Iterator<Item = Arg> {
    SETTINGS.iter().enumerate().filter_map(|(i, d)| d.arg(i))
}

/// Every setting with a key on `surface`, read from the request's params and applied.
pub(crate) fn apply_json(
    mut config: Draft,
    params: &serde_json::Map<String, Json>,
    surface: Surface,
) -> Result<Draft, RpcError> {
    for def in SETTINGS {
        let Some(key) = def.key(surface) else {
            continue;
        };
        let Some(value) = params.get(&key) else {
            continue;
        };
        // A model's client sends null for an argument it leaves out: mcp reads it so where
        // null does not mean "none"; serve takes null only where it means "none", as its
        // schema says, and for a list (no list, as `watch` always read it).
        let absent = match surface {
            Surface::Mcp => def.kind != Kind::DurationOrNone,
            Surface::Serve | Surface::Command => matches!(def.kind, Kind::List(_)),
        };
        if value.is_null() && absent {
            continue;
        }
        // The range in the caller's words (its key, milliseconds): mcp keeps a model to its
        // own, narrower one.
        let value = def.read_json(&key, value, def.range_on(surface))?;
        config = (def.apply)(config, value);
    }
    Ok(config)
}

/// The keys of every setting on `surface`.
pub(crate) fn keys(surface: Surface) -> impl Iterator<Item = String> {
    SETTINGS.iter().filter_map(move |d| d.key(surface))
}

/// The `process/start` properties of the settings (for `serve --schema`).
pub(crate) fn serve_properties() -> serde_json::Map<String, Json> {
    SETTINGS
        .iter()
        .filter_map(|d| {
            let mut schema = d.json_schema(Surface::Serve);
            // The setting's name, for clients that name it in their own words (Python's
            // keyword arguments): an annotation JSON Schema validators ignore.
            schema["x-setting"] = json!(d.name);
            Some((d.serve.on()?.to_owned(), schema))
        })
        .collect()
}

/// The key a [`quietus::ConfigError`] is reported under on `surface`: the setting's key there,
/// if the setting has one.
pub(crate) fn error_key(error: &quietus::ConfigError, surface: Surface) -> Option<String> {
    by_setting(error.setting()?)?.key(surface)
}

/// The hidden subcommand that prints [`table_json`]: `quietus __settings`.
pub(crate) const PRINT_SUBCOMMAND: &str = "__settings";

/// The table as JSON: one object per setting (`name`, `kind`, `range_ms`, `default`, `flag`,
/// `short`, `env`, `serve`, `mcp`, `mcp_range_ms`, `doc`), for clients' tests.
pub(crate) fn table_json() -> Json {
    let range =
        |r: Option<(Duration, Duration)>| r.map(|(min, max)| json!([ms_of(min), ms_of(max)]));
    let settings: Vec<Json> = SETTINGS
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "kind": kind_name(d.kind),
                "range_ms": range(d.range),
                "default": match d.default {
                    Default::Value(v) => v,
                    Default::Words(w) => w,
                },
                "flag": d.key(Surface::Command),
                "short": d.short.map(|c| format!("-{c}")),
                "env": d.env,
                "serve": d.serve.on(),
                "mcp": d.key(Surface::Mcp),
                "mcp_range_ms": range(d.mcp.on().and(d.mcp_range())),
                "not_on": {
                    "serve": not_on(d.serve),
                    "mcp": not_on(d.mcp),
                },
                "doc": d.doc,
            })
        })
        .collect();
    json!({"version": env!("CARGO_PKG_VERSION"), "settings": settings})
}

/// A kind's name in [`table_json`].
fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Duration => "duration",
        Kind::DurationOrNone => "duration_or_none",
        Kind::Switch => "switch",
        Kind::ExitCode => "exit_code",
        Kind::Signal => "signal",
        Kind::Containment => "containment",
        Kind::List(Item::Folder | Item::File) => "paths",
        Kind::List(_) => "list",
    }
}

/// Why a surface does not offer a setting (null: it does).
fn not_on(key: Key) -> Option<&'static str> {
    match key {
        Key::On(_) => None,
        Key::Not(why) => Some(why),
    }
}

/// The markdown table of the settings with a key on `surface`, as the docs hold it.
#[cfg(test)]
pub(crate) fn docs_table(surface: Surface) -> String {
    let mut out =
        String::from("| setting | type | range | default | doc |\n|---|---|---|---|---|\n");
    for def in SETTINGS {
        let Some(key) = def.key(surface) else {
            continue;
        };
        let key = match (surface, def.short) {
            (Surface::Command, Some(short)) => format!("`-{short}, {key}`"),
            _ => format!("`{key}`"),
        };
        let kind = match (surface, def.kind) {
            (Surface::Command, Kind::Duration) => "D".to_owned(),
            (Surface::Command, Kind::DurationOrNone) => "D or `none`".to_owned(),
            (Surface::Command, Kind::Switch) => "flag".to_owned(),
            (Surface::Command, Kind::Signal) => "SIG".to_owned(),
            (Surface::Command, Kind::Containment) => "`auto`, `cgroup` or `group`".to_owned(),
            (Surface::Command, Kind::List(item)) => format!("{}, repeatable", item.value_name()),
            (_, Kind::ExitCode) => "integer".to_owned(),
            (_, Kind::Duration) => "integer (ms)".to_owned(),
            (_, Kind::DurationOrNone) => "integer (ms) or null".to_owned(),
            (_, Kind::Switch) => "boolean".to_owned(),
            (_, Kind::Signal | Kind::Containment) => "string".to_owned(),
            (_, Kind::List(_)) => "array of strings".to_owned(),
        };
        let range = def.range_text(def.range_on(surface)).unwrap_or_default();
        let default = match def.default {
            Default::Value(v) => format!("`{v}`"),
            Default::Words(w) => w.to_owned(),
        };
        let env = match (surface, def.env) {
            (Surface::Command, Some(env)) => format!(" (`{env}`)"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "| {key}{env} | {kind} | {range} | {default} | {} |\n",
            def.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_the_librarys_and_every_range_is_the_one_it_checks() {
        let default = quietus::MonitorConfig::default();
        let applied = |value| {
            move |def: &Def| {
                (def.apply)(Draft::default(), value)
                    .build()
                    .expect("a value in range")
            }
        };
        for def in SETTINGS {
            if let Default::Value(text) = def.default {
                // The default as the command line reads it (clap's default, or `none`).
                let given = match def.kind {
                    Kind::DurationOrNone => vec!["--x".to_owned(), text.to_owned()],
                    _ => Vec::new(),
                };
                let value = from_command_line(def, &given).expect("a default value");
                let set = applied(value)(def);
                assert_eq!(set, default, "{}'s default {text}", def.name);
            }
            if def.kind == Kind::Switch {
                let off = applied(SettingValue::Switch(false))(def);
                assert_eq!(off, default, "{} off is the default", def.name);
                let on = applied(SettingValue::Switch(true))(def);
                assert_ne!(on, default, "{} on changes something", def.name);
            }
            let Some((min, max)) = def.range else {
                continue;
            };
            let with = |d: Duration| {
                let value = match def.kind {
                    Kind::DurationOrNone => SettingValue::DurationOrNone(Some(d)),
                    _ => SettingValue::Duration(d),
                };
                (def.apply)(Draft::default(), value).build().map(drop)
            };
            assert_eq!(with(min), Ok(()), "{} accepts its minimum", def.name);
            assert_eq!(with(max), Ok(()), "{} accepts its maximum", def.name);
            let above = with(max + Duration::from_millis(1)).unwrap_err();
            assert_eq!(above.setting(), def.setting, "{}: {above}", def.name);
            if let Some(below) = min.checked_sub(Duration::from_millis(1)) {
                let below = with(below).unwrap_err();
                assert_eq!(below.setting(), def.setting, "{}: {below}", def.name);
            }
            if let (Key::On(_), Some((mcp_min, mcp_max))) = (def.mcp, def.mcp_range) {
                assert!(
                    min <= mcp_min && mcp_max <= max,
                    "{}: mcp's range is narrower",
                    def.name
                );
            }
        }
    }

    /// What the command line reads for `def` from `args` (its flag spelled `--x`).
    fn from_command_line(def: &Def, args: &[String]) -> Option<SettingValue> {
        let arg = def.arg(0).expect("a flag").long("x");
        let command = clap::Command::new("quietus").arg(arg);
        let args = std::iter::once("quietus".to_owned()).chain(args.iter().cloned());
        let matches = command.try_get_matches_from(args).expect("parses");
        def.read_matches(&matches)
    }

    /// A value of `def`'s kind as the command line writes it, and as JSON.
    fn sample(def: &Def) -> (&'static str, Json) {
        match def.kind {
            Kind::Duration | Kind::DurationOrNone => ("3s", json!(3000)),
            Kind::Switch => ("", json!(true)),
            Kind::ExitCode => ("75", json!(75)),
            Kind::Signal => ("INT", json!("INT")),
            Kind::Containment => ("group", json!("group")),
            Kind::List(Item::SoloCap) => ("children=10m", json!(["children=10m"])),
            Kind::List(Item::Probe) => ("p=true", json!(["p=true"])),
            Kind::List(_) => ("notes", json!(["notes"])),
        }
    }

    /// Every row of the table reaches every surface, or says why not: clap parses its flag
    /// (in the command's own parser), `serve`'s process/start takes its key, `mcp`'s
    /// exec_command lists it in its schema and takes it; each applied changes the
    /// configuration. A row a surface leaves out names the reason.
    #[test]
    fn every_row_reaches_every_surface_or_says_why_not() {
        let command = crate::cli::options::command();
        let serve = crate::serve::ServeOptions {
            max_processes: 1,
            retain_bytes: 1024,
            shutdown_grace: Duration::ZERO,
            output_filter: crate::serve::CommandFilter::All,
            output_throttle: Duration::ZERO,
            log_dir: None,
        };
        let mcp = crate::mcp::McpOptions::default();
        let mcp_schema = crate::mcp::tools(&mcp)[0]["inputSchema"]["properties"].clone();
        for def in SETTINGS {
            let (text, value) = sample(def);
            // Only the exit statuses change nothing in the configuration (the command reads
            // them itself).
            let changes = |draft: Draft| draft != Draft::default() || def.kind == Kind::ExitCode;
            for surface in [Surface::Command, Surface::Serve, Surface::Mcp] {
                let key = match def.surface(surface) {
                    Key::On(key) => key,
                    Key::Not(why) => {
                        assert!(why.len() > 20, "{} on {surface:?}: why not?", def.name);
                        continue;
                    }
                };
                let name = format!("{} on {surface:?} as {key}", def.name);
                match surface {
                    Surface::Command => {
                        let mut args = vec!["quietus".to_owned(), format!("--{key}")];
                        if def.kind != Kind::Switch {
                            args.push(text.to_owned());
                        }
                        args.extend(["--".to_owned(), "x".to_owned()]);
                        let matches = command.clone().try_get_matches_from(&args);
                        let matches = matches.unwrap_or_else(|e| panic!("{name}: {e}"));
                        let read = def.read_matches(&matches).expect(&name);
                        assert!(changes((def.apply)(Draft::default(), read)), "{name}");
                    }
                    Surface::Serve => {
                        let params = json!({"processId": "p", "argv": ["true"], key: value});
                        let params = params.as_object().unwrap();
                        let start = crate::serve::parse_start(params, &serve);
                        assert!(start.is_ok(), "{name}: {:?}", start.err());
                    }
                    Surface::Mcp => {
                        let property = &mcp_schema[key];
                        assert_eq!(property["description"], def.doc, "{name}: the schema");
                        let arguments = json!({"cmd": "x", key: value});
                        let call = crate::mcp::parse_call(
                            "exec_command",
                            arguments.as_object().unwrap(),
                            &mcp,
                        );
                        assert!(call.is_ok(), "{name}: {call:?}");
                    }
                }
                if surface != Surface::Command {
                    let params = json!({key: value});
                    let draft = apply_json(Draft::default(), params.as_object().unwrap(), surface);
                    assert!(changes(draft.expect(&name)), "{name}: applied");
                }
            }
        }
    }

    /// serve's `watch: null` is no list (as `watch` was read before the table had it); its
    /// `idleTimeoutMs: null` is refused, null meaning nothing there.
    #[test]
    fn serve_reads_null_as_its_schema_says() {
        let apply = |params: Json| {
            apply_json(
                Draft::default(),
                params.as_object().unwrap(),
                Surface::Serve,
            )
        };
        assert_eq!(apply(json!({"watch": null})), Ok(Draft::default()));
        assert!(apply(json!({"idleTimeoutMs": null})).is_err());
        assert!(apply(json!({"hardTimeoutMs": null})).is_ok());
    }

    #[test]
    fn names_keys_and_settings_are_unique() {
        for surface in [Surface::Command, Surface::Serve, Surface::Mcp] {
            let mut keys: Vec<String> = keys(surface).collect();
            let count = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), count, "{surface:?}");
        }
        for (i, def) in SETTINGS.iter().enumerate() {
            assert!(SETTINGS[..i].iter().all(|d| d.name != def.name));
            if let Some(setting) = def.setting {
                assert!(SETTINGS[..i].iter().all(|d| d.setting != Some(setting)));
            }
            if let (Key::On(flag), Some(env)) = (def.flag, def.env) {
                assert_eq!(
                    env,
                    format!("QUIETUS_{}", flag.replace('-', "_").to_uppercase())
                );
                assert_eq!(
                    def.name,
                    flag.replace('-', "_"),
                    "the clap id is the flag's"
                );
            }
        }
    }

    #[test]
    fn json_values_are_read_with_the_callers_key_in_errors() {
        let def = by_name("idle_timeout").unwrap();
        let err = def
            .read_json("idle_timeout_ms", &json!(500), def.mcp_range())
            .unwrap_err();
        assert!(
            err.message.contains("idle_timeout_ms: 500 is out of range"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("a whole number from 1000 to 86400000"),
            "{}",
            err.message
        );
        let err = def
            .read_json("idleTimeoutMs", &json!("5m"), None)
            .unwrap_err();
        assert!(
            err.message
                .starts_with("invalid params: idleTimeoutMs: \"5m\""),
            "{}",
            err.message
        );
        let err = by_name("no_watch")
            .unwrap()
            .read_json("noWatch", &json!(1), None)
            .unwrap_err();
        assert!(
            err.message
                .contains("noWatch: 1 is not valid; it accepts true or false"),
            "{}",
            err.message
        );
        let hard = by_name("hard_timeout").unwrap();
        assert_eq!(
            hard.read_json("hardTimeoutMs", &Json::Null, hard.range)
                .unwrap(),
            SettingValue::DurationOrNone(None)
        );
    }

    /// The marker lines around a generated table in a doc.
    fn markers(surface: Surface) -> (String, String) {
        let name = match surface {
            Surface::Command => "command",
            Surface::Serve => "serve",
            Surface::Mcp => "mcp",
        };
        (
            format!(
                "<!-- settings:{name} (generated from crates/quietus-cli/src/settings/table.rs: \
                 QUIETUS_BLESS=1 cargo test -p quietus-cli settings rewrites it) -->"
            ),
            format!("<!-- /settings:{name} -->"),
        )
    }

    #[test]
    fn the_docs_tables_are_the_settings_table() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        for (file, surface) in [
            ("cli.md", Surface::Command),
            ("serve.md", Surface::Serve),
            ("mcp.md", Surface::Mcp),
        ] {
            let path = docs.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let (open, close) = markers(surface);
            let start = text
                .find(&open)
                .unwrap_or_else(|| panic!("{file} has no line {open}"));
            let end = text[start..]
                .find(&close)
                .map(|e| start + e)
                .unwrap_or_else(|| panic!("{file} has no line {close}"));
            let expected = format!("{open}\n{}{close}", docs_table(surface));
            if std::env::var_os("QUIETUS_BLESS").is_some() {
                let new = format!("{}{expected}{}", &text[..start], &text[end + close.len()..]);
                std::fs::write(&path, new).unwrap();
                continue;
            }
            assert_eq!(
                &text[start..end + close.len()],
                expected,
                "{file}'s settings table is not the settings table's: rerun with QUIETUS_BLESS=1"
            );
        }
    }
}
