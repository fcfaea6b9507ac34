//! The controls table: each action a client may ask of a running session, defined once for
//! `serve`'s `process/control` and `mcp`'s `exec_control` — its `type`, its field (the
//! spelling on each surface, whether it is required), its doc line, and the library's
//! [`ControlAction`]s it makes. One parser ([`parse_action`]) and one schema
//! ([`action_schema`]) for both surfaces.

use std::time::Duration;

use quietus::{ControlAction, ControlAnswer, Registry};
use serde_json::{Map, Value as Json, json};

use super::def::Surface;
use super::json::ms_of;
use crate::jsonrpc::protocol::{self, Params, RpcError, whole_number};

/// A control's field: a timeout in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// Its key in `serve`'s action: `timeoutMs`.
    pub(crate) serve: &'static str,
    /// Its key in `mcp`'s action: `timeout_ms`.
    pub(crate) mcp: &'static str,
    /// Whether the action needs it.
    pub(crate) required: bool,
}

impl Field {
    /// The key on `surface` (the command line has no controls: `serve`'s spelling).
    pub(crate) fn key(self, surface: Surface) -> &'static str {
        match surface {
            Surface::Mcp => self.mcp,
            Surface::Serve | Surface::Command => self.serve,
        }
    }
}

/// One control action.
#[derive(Debug)]
pub(crate) struct Control {
    /// Its `type`: `keepalive`.
    pub(crate) name: &'static str,
    /// Its field, if it has one.
    pub(crate) field: Option<Field>,
    /// One line: what it does.
    pub(crate) doc: &'static str,
    /// The library's actions, in order, from the field's value.
    pub(crate) actions: fn(Option<Duration>) -> Vec<ControlAction>,
}

/// Every control action, in the order the docs list them.
pub(crate) const CONTROLS: &[Control] = &[
    Control {
        name: "keepalive",
        field: Some(Field {
            serve: "extendTimeoutMs",
            mcp: "extend_timeout_ms",
            required: false,
        }),
        doc: "Counts as activity now (the idle timeout starts over); with the field, also sets a new idle timeout.",
        actions: |timeout| {
            std::iter::once(ControlAction::Keepalive)
                .chain(timeout.map(ControlAction::SetIdleTimeout))
                .collect()
        },
    },
    Control {
        name: "send_ctrl_c",
        field: None,
        doc: "Interrupts the program, as Ctrl-C (INT).",
        actions: |_| vec![ControlAction::Interrupt],
    },
    Control {
        name: "terminate",
        field: None,
        doc: "Ends the whole tree: the ladder's first signal, the grace, then KILL.",
        actions: |_| vec![ControlAction::Terminate],
    },
    Control {
        name: "force_kill",
        field: None,
        doc: "Kills the whole tree now.",
        actions: |_| vec![ControlAction::Kill],
    },
    Control {
        name: "set_idle_timeout",
        field: Some(Field {
            serve: "timeoutMs",
            mcp: "timeout_ms",
            required: true,
        }),
        doc: "Sets a new idle timeout.",
        actions: |timeout| {
            timeout
                .map(ControlAction::SetIdleTimeout)
                .into_iter()
                .collect()
        },
    },
];

/// The range (ms) of a control's timeout on `surface`: `mcp` keeps a model to its idle
/// timeout's range; `serve` reads any whole number and the session checks it (a timeout out
/// of the library's range is answered `reject`).
fn range(surface: Surface) -> (u64, u64) {
    match surface {
        Surface::Mcp => mcp_timeout_range(),
        Surface::Serve | Surface::Command => (0, u64::MAX),
    }
}

/// The range (ms) `mcp` accepts for the idle timeout, from the settings table (also the range
/// of its controls' timeouts).
pub(crate) fn mcp_timeout_range() -> (u64, u64) {
    let (min, max) = super::by_name("idle_timeout")
        .and_then(super::Def::mcp_range)
        .expect("the settings table has the idle timeout, with a range");
    (ms_of(min), ms_of(max))
}

/// What the error of a bad action says it accepts, in the words of `surface`.
fn accepts(surface: Surface) -> String {
    let all: Vec<String> = CONTROLS
        .iter()
        .map(|c| match c.field {
            Some(f) if f.required => {
                format!("{{\"type\": \"{}\", \"{}\"}}", c.name, f.key(surface))
            }
            Some(f) => format!("{{\"type\": \"{}\", \"{}\"?}}", c.name, f.key(surface)),
            None => format!("{{\"type\": \"{}\"}}", c.name),
        })
        .collect();
    format!("it accepts {}", all.join(", "))
}

/// Reads an action (`{"type": …, field?}`) on `surface` into the library's actions. `mcp`
/// refuses fields an action does not have; `serve` leaves them aside.
pub(crate) fn parse_action(
    action: &Json,
    surface: Surface,
) -> Result<Vec<ControlAction>, RpcError> {
    let bad = || {
        RpcError::param(
            "action",
            format!(
                "{} is not an action; {}",
                protocol::quote(action),
                accepts(surface)
            ),
        )
    };
    let object = action.as_object().ok_or_else(bad)?;
    let name = object.get("type").and_then(Json::as_str).ok_or_else(bad)?;
    let control = CONTROLS.iter().find(|c| c.name == name).ok_or_else(bad)?;
    let timeout = match control.field {
        None => {
            fields_known(object, &["type"], surface)?;
            None
        }
        Some(field) => {
            let key = field.key(surface);
            fields_known(object, &["type", key], surface)?;
            let timeout = read_timeout(object, key, surface)?;
            if field.required && timeout.is_none() {
                return Err(RpcError::param(
                    &format!("action.{key}"),
                    format!("missing (required by {})", control.name),
                ));
            }
            timeout
        }
    };
    Ok((control.actions)(timeout))
}

/// `mcp`: no field but `known` (an error under `action`).
fn fields_known(
    object: &Map<String, Json>,
    known: &[&str],
    surface: Surface,
) -> Result<(), RpcError> {
    if surface != Surface::Mcp {
        return Ok(());
    }
    Params::new(object, known)
        .map(drop)
        .map_err(|e| RpcError::param("action", e.message.trim_start_matches("invalid params: ")))
}

/// The timeout under `key` (null: none), in the surface's range.
fn read_timeout(
    object: &Map<String, Json>,
    key: &str,
    surface: Surface,
) -> Result<Option<Duration>, RpcError> {
    let Some(value) = object.get(key).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let (min, max) = range(surface);
    let name = match surface {
        // mcp names the field under `action` (as it names an unknown one).
        Surface::Mcp => key.to_owned(),
        Surface::Serve | Surface::Command => format!("action.{key}"),
    };
    let ms = whole_number(&name, value, min, max).map_err(|e| match surface {
        Surface::Mcp => RpcError::param("action", e.message.trim_start_matches("invalid params: ")),
        Surface::Serve | Surface::Command => e,
    })?;
    Ok(Some(Duration::from_millis(ms)))
}

/// The JSON Schema of an action on `surface` (one of the table's).
pub(crate) fn action_schema(surface: Surface) -> Json {
    let timeout = match surface {
        Surface::Mcp => {
            let (min, max) = mcp_timeout_range();
            json!({"type": "integer", "minimum": min, "maximum": max})
        }
        Surface::Serve | Surface::Command => json!({"type": "integer", "minimum": 1}),
    };
    let one_of: Vec<Json> = CONTROLS
        .iter()
        .map(|c| {
            let mut properties = json!({"type": {"const": c.name, "description": c.doc}});
            let mut required = vec!["type"];
            if let Some(field) = c.field {
                properties[field.key(surface)] = timeout.clone();
                if field.required {
                    required.push(field.key(surface));
                }
            }
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        })
        .collect();
    json!({"oneOf": one_of})
}

/// Applies `actions` in order to session `id` and answers as the first that is not an `Ack`
/// (the rest are not applied), or `Ack`.
pub(crate) fn apply(registry: &Registry, id: u32, actions: Vec<ControlAction>) -> ControlAnswer {
    for action in actions {
        let answer = registry.control(id, action);
        if answer != ControlAnswer::Ack {
            return answer;
        }
    }
    ControlAnswer::Ack
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two surfaces' spelling of one action, with a timeout of `ms` if it has a field.
    fn spelled(control: &Control, surface: Surface, ms: Option<u64>) -> Json {
        let mut action = json!({"type": control.name});
        if let (Some(field), Some(ms)) = (control.field, ms) {
            action[field.key(surface)] = json!(ms);
        }
        action
    }

    #[test]
    fn each_action_parses_identically_through_serve_and_mcp() {
        let (min, max) = mcp_timeout_range();
        for control in CONTROLS {
            for ms in [None, Some(min), Some(60_000), Some(max)] {
                let serve = parse_action(&spelled(control, Surface::Serve, ms), Surface::Serve);
                let mcp = parse_action(&spelled(control, Surface::Mcp, ms), Surface::Mcp);
                match (&serve, &mcp) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{} {ms:?}", control.name),
                    (Err(a), Err(b)) => {
                        // A required field left out: both say which, in their spelling.
                        assert!(
                            ms.is_none(),
                            "{}: {} / {}",
                            control.name,
                            a.message,
                            b.message
                        );
                        assert!(a.message.contains("missing (required by"), "{}", a.message);
                        assert!(b.message.contains("missing (required by"), "{}", b.message);
                    }
                    _ => panic!("{} {ms:?}: serve {serve:?}, mcp {mcp:?}", control.name),
                }
                assert!(serve.is_ok() || control.field.is_some_and(|f| f.required));
            }
        }
        assert_eq!(
            parse_action(
                &json!({"type": "keepalive", "extendTimeoutMs": 90_000}),
                Surface::Serve
            )
            .unwrap(),
            [
                ControlAction::Keepalive,
                ControlAction::SetIdleTimeout(Duration::from_secs(90))
            ]
        );
    }

    #[test]
    fn every_action_is_in_both_schemas_and_its_accepts_line() {
        for surface in [Surface::Serve, Surface::Mcp] {
            let schema = action_schema(surface);
            let one_of = schema["oneOf"].as_array().unwrap();
            assert_eq!(one_of.len(), CONTROLS.len());
            for (control, schema) in CONTROLS.iter().zip(one_of) {
                assert_eq!(schema["properties"]["type"]["const"], control.name);
                if let Some(field) = control.field {
                    assert!(schema["properties"].get(field.key(surface)).is_some());
                }
                assert!(accepts(surface).contains(&format!("\"{}\"", control.name)));
            }
        }
    }

    #[test]
    fn bad_actions_are_named_in_the_callers_words() {
        let err = parse_action(&json!({"type": "explode"}), Surface::Mcp).unwrap_err();
        assert!(err.message.contains("is not an action"), "{}", err.message);
        assert!(
            err.message.contains("\"extend_timeout_ms\"?"),
            "{}",
            err.message
        );
        let err = parse_action(&json!({"type": "set_idle_timeout"}), Surface::Serve).unwrap_err();
        assert!(
            err.message.contains("action.timeoutMs: missing"),
            "{}",
            err.message
        );
        let err = parse_action(&json!({"type": "terminate", "x": 1}), Surface::Mcp).unwrap_err();
        assert!(
            err.message.contains("action: unknown field"),
            "{}",
            err.message
        );
        assert!(parse_action(&json!({"type": "terminate", "x": 1}), Surface::Serve).is_ok());
        let err = parse_action(
            &json!({"type": "keepalive", "extend_timeout_ms": 5}),
            Surface::Mcp,
        )
        .unwrap_err();
        assert!(
            err.message
                .contains("action: extend_timeout_ms: 5 is out of range"),
            "{}",
            err.message
        );
    }
}
