//! A row of the settings table as `serve` and `mcp` read it: its value from JSON (the
//! caller's key in every message) and its JSON Schema.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::def::{Def, Item, Kind, SettingValue, Surface};
use quietus::Containment;

use super::parse::{
    RESERVED_EXIT_CODES, parse_containment, parse_duration, parse_duration_or_none, parse_signal,
    parse_solo_caps,
};
use crate::jsonrpc::protocol::{self, RpcError, whole_number};

/// A duration in whole milliseconds.
pub(crate) fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Def {
    /// Reads the setting's JSON value (`key` is how the caller spelled it; `range` the range
    /// its surface accepts).
    pub(crate) fn read_json(
        &self,
        key: &str,
        value: &Json,
        range: Option<(Duration, Duration)>,
    ) -> Result<SettingValue, RpcError> {
        let bad = |accepts: &str| {
            RpcError::param(
                key,
                format!(
                    "{} is not valid; it accepts {accepts}",
                    protocol::quote(value)
                ),
            )
        };
        let millis = |v: &Json| -> Result<Duration, RpcError> {
            let n = match range {
                Some((min, max)) => whole_number(key, v, ms_of(min), ms_of(max))?,
                None => whole_number(key, v, 0, u64::MAX)?,
            };
            Ok(Duration::from_millis(n))
        };
        let text = |parse: fn(&str) -> Result<SettingValue, String>| {
            let text = value.as_str().ok_or_else(|| bad("a string"))?;
            parse(text).map_err(|e| RpcError::param(key, e))
        };
        match self.kind {
            Kind::Duration => millis(value).map(SettingValue::Duration),
            Kind::DurationOrNone if value.is_null() => Ok(SettingValue::DurationOrNone(None)),
            Kind::DurationOrNone => millis(value).map(|d| SettingValue::DurationOrNone(Some(d))),
            Kind::Switch => value
                .as_bool()
                .map(SettingValue::Switch)
                .ok_or_else(|| bad("true or false")),
            Kind::ExitCode => {
                let code = whole_number(key, value, 1, 255)?;
                u8::try_from(code)
                    .ok()
                    .filter(|c| !RESERVED_EXIT_CODES.contains(c))
                    .map(SettingValue::ExitCode)
                    .ok_or_else(|| bad("1 to 255 but 125, 126 and 127"))
            }
            Kind::Signal => text(|t| parse_signal(t).map(SettingValue::Signal)),
            Kind::Containment => text(|t| parse_containment(t).map(SettingValue::Containment)),
            Kind::List(item) => read_list(key, value, item),
        }
    }

    /// The setting's JSON Schema on `surface` (integer milliseconds, a boolean, a string, an
    /// array of strings).
    pub(crate) fn json_schema(&self, surface: Surface) -> Json {
        let mut schema = match self.kind {
            Kind::Duration => json!({"type": "integer"}),
            Kind::DurationOrNone => json!({"type": ["integer", "null"]}),
            Kind::Switch => json!({"type": "boolean"}),
            Kind::ExitCode => json!({"type": "integer", "minimum": 1, "maximum": 255,
                                     "not": {"enum": RESERVED_EXIT_CODES}}),
            Kind::Signal => json!({"type": "string"}),
            Kind::Containment => json!({"type": "string", "enum": ["auto", "cgroup", "group"]}),
            Kind::List(_) => json!({"type": "array", "items": {"type": "string"}}),
        };
        if let Some((min, max)) = self.range_on(surface) {
            schema["minimum"] = json!(ms_of(min));
            schema["maximum"] = json!(ms_of(max));
        }
        schema["description"] = json!(self.doc);
        schema
    }
}

impl SettingValue {
    /// The value as JSON (durations in milliseconds, none as null).
    pub(crate) fn to_json(&self) -> Json {
        match self {
            SettingValue::Duration(d) => json!(ms_of(*d)),
            SettingValue::DurationOrNone(d) => d.map_or(Json::Null, |d| json!(ms_of(d))),
            SettingValue::Switch(on) => json!(on),
            SettingValue::ExitCode(code) => json!(code),
            SettingValue::Signal(signal) => json!(signal.name()),
            SettingValue::Containment(mode) => json!(match mode {
                Containment::Cgroup => "cgroup",
                Containment::Group => "group",
                _ => "auto",
            }),
            SettingValue::Paths(paths) => {
                json!(
                    paths
                        .iter()
                        .map(|p| p.to_string_lossy())
                        .collect::<Vec<_>>()
                )
            }
            SettingValue::Texts(texts) => json!(texts),
            SettingValue::SoloCaps(_) | SettingValue::Probes(_) => Json::Null,
        }
    }
}

impl Def {
    /// The default in a JSON Schema: the value the command's default stands for (a duration
    /// in milliseconds, none as null), or null where the default is words.
    pub(crate) fn default_json(&self) -> Json {
        let super::def::Default::Value(text) = self.default else {
            return Json::Null;
        };
        let value = match self.kind {
            Kind::Duration => parse_duration(text).map(SettingValue::Duration),
            Kind::DurationOrNone => parse_duration_or_none(text).map(SettingValue::DurationOrNone),
            Kind::ExitCode => super::parse::parse_exit_code(text).map(SettingValue::ExitCode),
            Kind::Signal => parse_signal(text).map(SettingValue::Signal),
            Kind::Containment => parse_containment(text).map(SettingValue::Containment),
            Kind::Switch | Kind::List(_) => return Json::Null,
        };
        value.map_or(Json::Null, |v| v.to_json())
    }
}

/// An array of strings, each an `item` (folders and files as given; the other items are not
/// offered in JSON, and are read as the command line reads them).
fn read_list(key: &str, value: &Json, item: Item) -> Result<SettingValue, RpcError> {
    let items = match value {
        Json::Array(items) => items
            .iter()
            .map(Json::as_str)
            .collect::<Option<Vec<&str>>>()
            .ok_or_else(|| {
                RpcError::param(
                    key,
                    "has an item that is not a string; it accepts an array of strings",
                )
            })?,
        other => {
            return Err(RpcError::param(
                key,
                format!(
                    "{} is not an array; it accepts an array of strings",
                    protocol::quote(other)
                ),
            ));
        }
    };
    let invalid = |e: String| RpcError::param(key, e);
    Ok(match item {
        Item::Folder | Item::File => SettingValue::Paths(items.iter().map(PathBuf::from).collect()),
        Item::Glob | Item::Regex => {
            SettingValue::Texts(items.iter().map(|t| (*t).to_owned()).collect())
        }
        Item::SoloCap => SettingValue::SoloCaps(
            items
                .iter()
                .map(|t| parse_solo_caps(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(invalid)?
                .concat(),
        ),
        Item::Probe => SettingValue::Probes(
            items
                .iter()
                .map(|t| crate::probe::parse(t))
                .collect::<Result<_, _>>()
                .map_err(invalid)?,
        ),
    })
}
