//! Seed-style shorthand for one-shot jobs.
//!
//! A create body that has `scheduled_time` and/or `payload` (and no `schedule` or `task`) is
//! read as a one-shot job:
//!
//! | shorthand field   | becomes |
//! |---|---|
//! | `scheduled_time`  | `schedule: {"at": …}` — RFC 3339, or a number of Unix epoch seconds (fractions allowed); absent means now |
//! | `payload`         | `task`: a task object (`{"command": {...}}` or `{"http": {...}}`) as is; an array of strings as `{"command": {"argv": [...]}}`; a string `s` as `{"command": {"argv": ["/bin/sh", "-c", s]}}`. Required. |
//! | `priority`, `max_retries`, `timeout`, `id` | the same fields of a full job |
//!
//! Any other field in a shorthand body is refused as unknown. The result goes through the same
//! decoding and validation as a full body; this module only rewrites the JSON.

use serde_json::{Map, Value, json};
use sked_core::error::FieldError;
use sked_core::timestamp::{self, Timestamp};

/// Fields only the shorthand uses; their presence selects it.
const MARKERS: [&str; 2] = ["scheduled_time", "payload"];
/// Every field a shorthand body may carry.
const ALLOWED: [&str; 6] = ["scheduled_time", "payload", "priority", "max_retries", "timeout", "id"];

/// Earliest `scheduled_time` in epoch seconds: 0000-01-01T00:00:00Z.
pub const MIN_EPOCH_SECONDS: f64 = -62_167_219_200.0;
/// `scheduled_time` in epoch seconds is below this (10^11 s, in the year 5138).
pub const MAX_EPOCH_SECONDS: f64 = 1e11;

/// Whether `body` is written in the shorthand.
pub fn is_shorthand(body: &Map<String, Value>) -> bool {
    MARKERS.iter().any(|k| body.contains_key(*k))
}

/// Rewrites a shorthand body into a full create body (`schedule`, `task`, and the common
/// fields). `now` stands in for an absent `scheduled_time`. Errors name the shorthand field.
pub fn expand(body: Map<String, Value>, now: Timestamp) -> Result<Map<String, Value>, FieldError> {
    for key in body.keys() {
        if !ALLOWED.contains(&key.as_str()) {
            let message = if key == "schedule" || key == "task" {
                format!("`{key}` cannot be combined with the shorthand fields `scheduled_time`/`payload`")
            } else {
                format!(
                    "unknown field `{key}` in a shorthand body, expected one of {}",
                    ALLOWED.join(", ")
                )
            };
            return Err(FieldError::new(key, message));
        }
    }
    let mut out = Map::new();
    let at = match body.get("scheduled_time") {
        None | Some(Value::Null) => timestamp::trunc_ms(now),
        Some(v) => scheduled_time(v)?,
    };
    out.insert("schedule".into(), json!({ "at": timestamp::format(&at) }));
    let task = match body.get("payload") {
        None | Some(Value::Null) => return Err(FieldError::new("payload", "missing field `payload`: the task to run")),
        Some(v) => payload(v)?,
    };
    out.insert("task".into(), task);
    for key in ["priority", "max_retries", "timeout", "id"] {
        if let Some(v) = body.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    Ok(out)
}

fn scheduled_time(v: &Value) -> Result<Timestamp, FieldError> {
    let bad = |why: String| FieldError::new("scheduled_time", why);
    match v {
        Value::String(s) => timestamp::parse(s).map_err(|e| bad(format!("invalid timestamp {s:?}: {e}"))),
        Value::Number(n) => match n.as_f64() {
            // Before year 0 an instant has no RFC 3339 form (it would not read back), and
            // beyond 10^11 s (year ~5100) is not a plausible schedule; refuse rather than clamp.
            Some(secs) if secs.is_finite() && (MIN_EPOCH_SECONDS..MAX_EPOCH_SECONDS).contains(&secs) => {
                Ok(timestamp::from_ms((secs * 1000.0).round() as i64))
            }
            _ => Err(bad(format!("epoch seconds out of range: {n}"))),
        },
        _ => Err(bad("must be an RFC 3339 timestamp or a number of epoch seconds".into())),
    }
}

fn payload(v: &Value) -> Result<Value, FieldError> {
    match v {
        Value::Object(_) => Ok(v.clone()),
        Value::String(s) => Ok(json!({ "command": { "argv": ["/bin/sh", "-c", s] } })),
        Value::Array(items) => {
            if let Some(i) = items.iter().position(|x| !x.is_string()) {
                return Err(FieldError::new(format!("payload[{i}]"), "argv entries must be strings"));
            }
            Ok(json!({ "command": { "argv": items } }))
        }
        _ => Err(FieldError::new(
            "payload",
            "must be a task object, an argv array or a shell command string",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn now() -> Timestamp {
        timestamp::parse("2026-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn string_payload_runs_in_a_shell_at_epoch_seconds() {
        let out = expand(
            obj(json!({"payload": "echo hi", "scheduled_time": 1767225600, "priority": 7})),
            now(),
        )
        .unwrap();
        assert_eq!(out["schedule"]["at"], "2026-01-01T00:00:00.000Z");
        assert_eq!(out["task"]["command"]["argv"], json!(["/bin/sh", "-c", "echo hi"]));
        assert_eq!(out["priority"], 7);
    }

    #[test]
    fn argv_and_task_payloads() {
        let out = expand(obj(json!({"payload": ["echo", "x"]})), now()).unwrap();
        assert_eq!(out["task"]["command"]["argv"], json!(["echo", "x"]));
        assert_eq!(out["schedule"]["at"], "2026-01-01T00:00:00.000Z");
        let http = json!({"http": {"url": "https://example.com"}});
        let out = expand(
            obj(json!({"payload": http, "scheduled_time": "2026-02-01T10:00:00+01:00"})),
            now(),
        )
        .unwrap();
        assert_eq!(out["task"], http);
        assert_eq!(out["schedule"]["at"], "2026-02-01T09:00:00.000Z");
    }

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(
            expand(obj(json!({"scheduled_time": 5})), now()).unwrap_err().field,
            "payload"
        );
        assert_eq!(
            expand(obj(json!({"payload": "x", "scheduled_time": "soon"})), now())
                .unwrap_err()
                .field,
            "scheduled_time"
        );
        assert_eq!(
            expand(obj(json!({"payload": "x", "labels": {}})), now())
                .unwrap_err()
                .field,
            "labels"
        );
        assert_eq!(
            expand(obj(json!({"payload": ["a", 1]})), now()).unwrap_err().field,
            "payload[1]"
        );
        assert_eq!(expand(obj(json!({"payload": 3})), now()).unwrap_err().field, "payload");
        // Before year 0 (no RFC 3339 form) is refused as the shorthand's own field.
        assert_eq!(
            expand(obj(json!({"payload": "x", "scheduled_time": -99_999_999_998.9})), now())
                .unwrap_err()
                .field,
            "scheduled_time"
        );
    }
}
