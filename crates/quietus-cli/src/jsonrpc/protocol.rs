//! JSON-RPC 2.0 as `quietus serve` and `quietus mcp` speak it: one JSON object per line,
//! requests with an `id`, notifications without; the error codes; and reading named parameters
//! with messages that name the field and what it accepts.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The line is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The JSON is not a request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// A parameter is missing or invalid.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The program could not be started (`data.kind` says which step failed).
pub(crate) const SPAWN_FAILED: i64 = -32000;
/// Internal error (a thread that cannot be started, a process forgotten at once).
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// A process with this `processId` exists already.
pub(crate) const DUPLICATE_PROCESS: i64 = -32001;
/// The server's limit of live processes is reached.
pub(crate) const TOO_MANY_PROCESSES: i64 = -32002;
/// No process has this `processId` (`process/wait`, `process/snapshot`).
pub(crate) const UNKNOWN_PROCESS: i64 = -32003;
/// The child does not read its stdin and the writes waiting for it reached the limit.
pub(crate) const STDIN_BACKLOG: i64 = -32004;

/// An error answer: code, message, optional data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32602 for `field`: `invalid params: <field>: <what>`.
    pub(crate) fn param(field: &str, what: impl std::fmt::Display) -> Self {
        Self::new(INVALID_PARAMS, format!("invalid params: {field}: {what}"))
    }

    /// -32003 for `process_id`.
    pub(crate) fn unknown_process(process_id: &str) -> Self {
        Self {
            code: UNKNOWN_PROCESS,
            message: format!(
                "unknown_process: no process has processId {}",
                quote_str(process_id)
            ),
            data: Some(json!({"status": "unknown_process"})),
        }
    }
}

/// At most this many bytes of what a client sent are quoted in an error message.
pub(crate) const QUOTE_MAX: usize = 64;

/// What a client sent, as an error message quotes it: its JSON text (a string in quotes), cut
/// to [`QUOTE_MAX`] bytes with the whole length said when longer — so an error line never
/// echoes a 10 MiB method name or value back.
pub(crate) fn quote(value: &Value) -> String {
    match value {
        Value::String(text) => quote_str(text),
        other => shortened(&other.to_string(), |head| head.to_owned()),
    }
}

/// [`quote`] of a string a client sent (a method, a key, a process id).
pub(crate) fn quote_str(text: &str) -> String {
    shortened(text, |head| format!("{head:?}"))
}

/// `show(text)` when `text` is short, else `show` of its first [`QUOTE_MAX`] bytes (cut at a
/// character) followed by the whole length.
fn shortened(text: &str, show: impl Fn(&str) -> String) -> String {
    if text.len() <= QUOTE_MAX {
        return show(text);
    }
    let cut = (0..=QUOTE_MAX)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}… ({} bytes in all)", show(&text[..cut]), text.len())
}

/// A message from the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Incoming {
    /// `None` for a notification (no answer is sent).
    pub(crate) id: Option<Value>,
    pub(crate) method: String,
    pub(crate) params: Map<String, Value>,
}

/// Reads one line: the request, or the error to answer (with the id when one was readable).
pub(crate) fn parse_line(line: &[u8]) -> Result<Incoming, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
        )
    })?;
    let invalid = |id: Value, what: &str| {
        (
            id,
            RpcError::new(INVALID_REQUEST, format!("invalid request: {what}")),
        )
    };
    let Value::Object(mut object) = value else {
        let what = if value.is_array() {
            "batches are not supported: send one request object per line"
        } else {
            "expected a request object {\"jsonrpc\":\"2.0\",\"id\":…,\"method\":…,\"params\":{…}}"
        };
        return Err(invalid(Value::Null, what));
    };
    let id = object.remove("id");
    let answer_id = id.clone().unwrap_or(Value::Null);
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return Err(invalid(
            Value::Null,
            "id must be a string, a number or null",
        ));
    }
    match object.get("jsonrpc") {
        None => {}
        Some(Value::String(v)) if v == "2.0" => {}
        Some(_) => return Err(invalid(answer_id, "jsonrpc must be \"2.0\" (or left out)")),
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return Err(invalid(answer_id, "method must be a string")),
        None => return Err(invalid(answer_id, "method is missing")),
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err((
                answer_id,
                RpcError::new(
                    INVALID_PARAMS,
                    "invalid params: params must be an object of named parameters",
                ),
            ));
        }
    };
    Ok(Incoming { id, method, params })
}

/// A result line.
pub(crate) fn response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error line.
pub(crate) fn error_response(id: Value, error: RpcError) -> Value {
    let mut body = json!({"code": error.code, "message": error.message});
    if let Some(data) = error.data {
        body["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}

/// A notification line.
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// Named parameters, read field by field; every field must be known.
#[derive(Debug)]
pub(crate) struct Params<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Params<'a> {
    /// Checks that every field is one of `known`.
    pub(crate) fn new(map: &'a Map<String, Value>, known: &[&str]) -> Result<Self, RpcError> {
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "invalid params: unknown field {}; this method accepts {}",
                    quote_str(unknown),
                    known.join(", ")
                ),
            ));
        }
        Ok(Self { map })
    }

    /// Every field as given.
    pub(crate) fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// The field, when present and not null.
    pub(crate) fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    /// A required field.
    pub(crate) fn required(&self, field: &str) -> Result<&'a Value, RpcError> {
        self.get(field)
            .ok_or_else(|| RpcError::param(field, "missing (required)"))
    }

    /// The required `processId`: a non-empty string of at most 256 bytes.
    pub(crate) fn process_id(&self) -> Result<&'a str, RpcError> {
        match self.required("processId")? {
            Value::String(s) if !s.is_empty() && s.len() <= 256 => Ok(s),
            other => Err(RpcError::param(
                "processId",
                format!(
                    "{} is not a process id; it accepts a string of 1 to 256 bytes",
                    quote(other)
                ),
            )),
        }
    }

    /// An optional string.
    pub(crate) fn string(&self, field: &str) -> Result<Option<&'a str>, RpcError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(RpcError::param(
                field,
                format!("{} is not a string; it accepts a string", quote(other)),
            )),
        }
    }

    /// An optional boolean.
    pub(crate) fn boolean(&self, field: &str) -> Result<Option<bool>, RpcError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(RpcError::param(
                field,
                format!(
                    "{} is not a boolean; it accepts true or false",
                    quote(other)
                ),
            )),
        }
    }

    /// An optional whole number from `min` to `max`.
    pub(crate) fn integer(&self, field: &str, min: u64, max: u64) -> Result<Option<u64>, RpcError> {
        match self.get(field) {
            None => Ok(None),
            Some(value) => whole_number(field, value, min, max).map(Some),
        }
    }

    /// An optional duration in milliseconds (a whole number from 0 to about 584 million
    /// years: the range the setting accepts is checked by the configuration).
    pub(crate) fn millis(&self, field: &str) -> Result<Option<Duration>, RpcError> {
        Ok(self.integer(field, 0, u64::MAX)?.map(Duration::from_millis))
    }

    /// An optional array of strings.
    pub(crate) fn strings(&self, field: &str) -> Result<Option<Vec<&'a str>>, RpcError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str())
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| {
                    RpcError::param(
                        field,
                        "has an item that is not a string; it accepts an array of strings",
                    )
                }),
            Some(other) => Err(RpcError::param(
                field,
                format!(
                    "{} is not an array; it accepts an array of strings",
                    quote(other)
                ),
            )),
        }
    }
}

/// `value` as a whole number from `min` to `max`, or the error naming `field`.
pub(crate) fn whole_number(
    field: &str,
    value: &Value,
    min: u64,
    max: u64,
) -> Result<u64, RpcError> {
    let accepts = format!("it accepts a whole number from {min} to {max}");
    // `1000.0` is the whole number 1000, as JSON Schema's "integer" has it (and a Python client
    // computing milliseconds from seconds sends it).
    let whole = value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    });
    match whole {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        Some(_) => Err(RpcError::param(
            field,
            format!("{} is out of range; {accepts}", quote(value)),
        )),
        // A whole number outside the range (a negative one too) is out of range; anything else
        // (`"5s"`, `true`, `1000.0`, null) is not a whole number at all.
        _ if value.is_u64() || value.is_i64() => Err(RpcError::param(
            field,
            format!("{} is out of range; {accepts}", quote(value)),
        )),
        _ => Err(RpcError::param(
            field,
            format!("{} is not a whole number; {accepts}", quote(value)),
        )),
    }
}

/// `snake_case` keys to `camelCase`, all the way down (the command's report, as the protocol
/// names its fields).
pub(crate) fn camel_case_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (camel(&k), camel_case_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(camel_case_keys).collect()),
        other => other,
    }
}

fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(line: &str) -> (Value, i64) {
        let (id, e) = parse_line(line.as_bytes()).expect_err("an error");
        (id, e.code)
    }

    #[test]
    fn a_whole_number_is_told_from_a_value_of_another_type() {
        assert_eq!(whole_number("n", &json!(1000.0), 1, 2000), Ok(1000));
        let message = |v: Value| whole_number("n", &v, 1, 10).unwrap_err().message;
        for v in [
            json!("5s"),
            json!(true),
            json!(1.5),
            Value::Null,
            json!([1]),
        ] {
            assert!(message(v.clone()).contains("is not a whole number"), "{v}");
        }
        for v in [json!(0), json!(11), json!(-1), json!(11.0)] {
            assert!(message(v.clone()).contains("is out of range"), "{v}");
        }
    }

    #[test]
    fn what_a_client_sent_is_quoted_short() {
        assert_eq!(quote_str("process/list"), "\"process/list\"");
        assert_eq!(quote(&json!(5)), "5");
        let long = "é".repeat(5 << 20); // 10 MiB of two-byte characters
        let quoted = quote_str(&long);
        assert!(quoted.len() < 2 * QUOTE_MAX, "{} bytes", quoted.len());
        assert!(quoted.ends_with("… (10485760 bytes in all)"), "{quoted}");
        let quoted = quote(&json!({"x": "y".repeat(1 << 20)}));
        assert!(
            quoted.starts_with("{\"x\":\"yyy") && quoted.len() < 2 * QUOTE_MAX,
            "{quoted}"
        );
        let e = Params::new(
            &serde_json::from_value(json!({"k".repeat(1 << 20): 1})).unwrap(),
            &["argv"],
        )
        .expect_err("unknown");
        assert!(e.message.len() < 256, "{}", e.message);
    }

    #[test]
    fn reads_requests_with_or_without_the_version() {
        let with = parse_line(br#"{"jsonrpc":"2.0","id":1,"method":"process/list"}"#).unwrap();
        assert_eq!(with.id, Some(json!(1)));
        assert_eq!(with.method, "process/list");
        let without = parse_line(br#"{"id":"a","method":"m","params":{"x":1}}"#).unwrap();
        assert_eq!(without.id, Some(json!("a")));
        assert_eq!(without.params["x"], 1);
        let note = parse_line(br#"{"method":"m"}"#).unwrap();
        assert_eq!(note.id, None);
    }

    #[test]
    fn bad_lines_get_their_codes() {
        assert_eq!(error_of("{not json"), (Value::Null, PARSE_ERROR));
        assert_eq!(error_of("[1,2]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(error_of("42"), (Value::Null, INVALID_REQUEST));
        assert_eq!(error_of(r#"{"id":7}"#), (json!(7), INVALID_REQUEST));
        assert_eq!(
            error_of(r#"{"id":7,"method":3}"#),
            (json!(7), INVALID_REQUEST)
        );
        assert_eq!(
            error_of(r#"{"id":{},"method":"m"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            error_of(r#"{"jsonrpc":"1.0","id":2,"method":"m"}"#),
            (json!(2), INVALID_REQUEST)
        );
        assert_eq!(
            error_of(r#"{"id":3,"method":"m","params":[1]}"#),
            (json!(3), INVALID_PARAMS)
        );
    }

    #[test]
    fn params_name_the_field_and_what_it_accepts() {
        let map = json!({"processId": 5, "n": -1, "xs": ["a", 1]});
        let map = map.as_object().unwrap();
        let params = Params::new(map, &["processId", "n", "xs"]).unwrap();
        let e = params.process_id().unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(
            e.message.starts_with("invalid params: processId: 5 is not"),
            "{}",
            e.message
        );
        let e = params.integer("n", 1, 10).unwrap_err();
        assert!(
            e.message
                .contains("n: -1 is out of range; it accepts a whole number from 1 to 10")
        );
        assert!(
            params
                .strings("xs")
                .unwrap_err()
                .message
                .contains("xs: has an item")
        );
        let e = Params::new(map, &["processId"]).unwrap_err();
        assert!(e.message.contains("unknown field \"n\""), "{}", e.message);
        assert!(
            params
                .required("missing")
                .unwrap_err()
                .message
                .contains("missing: missing")
        );
    }

    #[test]
    fn report_keys_become_camel_case() {
        let v = camel_case_keys(
            json!({"exit_code": 1, "idle_ms": {"output": 2}, "log": [{"sha256": "x", "stream_name": "y"}]}),
        );
        assert_eq!(
            v,
            json!({"exitCode": 1, "idleMs": {"output": 2}, "log": [{"sha256": "x", "streamName": "y"}]})
        );
    }
}
