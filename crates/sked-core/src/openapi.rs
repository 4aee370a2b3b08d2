//! OpenAPI schemas (build feature `utoipa`) of the wire types whose serde form is written by
//! hand here: durations ([`Dur`]), schedules ([`Schedule`]), env values ([`EnvValue`]) and the
//! string enums declared with `wire_enum!`. Types whose serde form is derived get a derived
//! `ToSchema` on the type itself (`#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]`).
//! sked-api assembles them into its document; nothing else in sked-core uses this module.
//!
//! Each schema here says what the type's `Deserialize` accepts: a value the schema allows
//! decodes, and one it refuses does not. (Rules that need more than one field — a jitter below
//! the interval, a cron expression that matches a date — are validation's, answered 422.)

use crate::duration::Dur;
use crate::job::OnTimeout;
use crate::schedule::Schedule;
use crate::secret::EnvValue;
use crate::task::{CommandTask, ContainerTask, HttpTask, Task};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{PartialSchema, ToSchema};

/// The schema written as JSON (the OpenAPI 3.1 form), as utoipa's type. Panics on JSON that is
/// not a schema: every caller passes a literal, and the document's tests build them all.
pub fn from_json(schema: Value) -> RefOr<Schema> {
    serde_json::from_value(schema).expect("a literal OpenAPI schema")
}

/// What [`Dur`]'s parser reads from a string: up to five `<digits><unit>` parts (`1h30m`,
/// `250ms`), or a plain number of seconds (`90`, `1.5`). Digit counts are bounded so that every
/// string that matches also fits (the parser refuses a sum beyond 2^64 ms).
pub const DURATION_PATTERN: &str = r"^(([0-9]{1,9}(ms|s|m|h|d)){1,5}|[0-9]{1,9}(\.[0-9]{1,3})?)$";

/// [`Dur`] as JSON: a string in [`DURATION_PATTERN`] or a number of seconds ≥ 0.
pub fn duration_json() -> Value {
    json!({
        "description": "A duration: \"90s\", \"5m\", \"1h30m\", \"250ms\", \"2d\", or a number of seconds. Read back normalised (\"1h30m\").",
        "oneOf": [
            {"type": "string", "pattern": DURATION_PATTERN},
            {"type": "number", "minimum": 0}
        ]
    })
}

impl PartialSchema for Dur {
    fn schema() -> RefOr<Schema> {
        from_json(duration_json())
    }
}

impl ToSchema for Dur {}

/// An RFC 3339 instant, or `null`.
fn nullable_instant(description: &str) -> Value {
    json!({"type": ["string", "null"], "format": "date-time", "description": description})
}

impl PartialSchema for Schedule {
    fn schema() -> RefOr<Schema> {
        let absent = json!({"type": "null"});
        let zones: Vec<Value> = chrono_tz::TZ_VARIANTS
            .iter()
            .map(|tz| Value::from(tz.name()))
            .chain([Value::Null])
            .collect();
        from_json(json!({
            "description": "When the job fires: exactly one of `at`, `every`, `cron` or `after` (the other keys absent or null).",
            "oneOf": [
                {
                    "title": "at",
                    "type": "object",
                    "properties": {
                        "at": {"type": "string", "format": "date-time", "description": "Once, at this instant (in the past: at once)."},
                        "every": absent, "anchor": absent, "cron": absent, "timezone": absent, "after": absent
                    },
                    "required": ["at"],
                    "additionalProperties": false
                },
                {
                    "title": "every",
                    "type": "object",
                    "properties": {
                        "every": duration_json(),
                        "anchor": nullable_instant("The grid `anchor + k·every` starts here; the creation time if absent."),
                        "at": absent, "cron": absent, "timezone": absent, "after": absent
                    },
                    "required": ["every"],
                    "additionalProperties": false
                },
                {
                    "title": "cron",
                    "type": "object",
                    "properties": {
                        "cron": {"type": "string", "description": "5 fields, 6 (leading seconds) or a macro such as `@daily`."},
                        "timezone": {"type": ["string", "null"], "enum": zones, "description": "IANA time zone; `UTC` if absent or null."},
                        "at": absent, "every": absent, "anchor": absent, "after": absent
                    },
                    "required": ["cron"],
                    "additionalProperties": false
                },
                {
                    "title": "after",
                    "type": "object",
                    "properties": {
                        "after": {
                            "type": "object",
                            "description": "Run at each nominal time the upstream jobs ran at, once each of their runs at that time ended as `on` asks; never by the clock.",
                            "properties": {
                                "jobs": {
                                    "type": "array",
                                    "items": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"},
                                    "minItems": 1,
                                    "maxItems": crate::dependency::MAX_UPSTREAMS,
                                    "uniqueItems": true,
                                    "description": "The upstream jobs, of the same tenant: each must exist, and none may run after this job (directly or through others)."
                                },
                                "on": {"type": "string", "enum": ["success", "failure", "any"], "description": "How each upstream's run must end: `success` (default), `failure` (FAILED or TIMED_OUT), `any`."},
                                "within": {
                                    "anyOf": [duration_json(), {"type": "null"}],
                                    "description": "Give the occurrence up (a SKIPPED run, reason `upstream_timeout`) if the upstreams have not all ended this long (1s to 7d) after the first did."
                                }
                            },
                            "required": ["jobs"],
                            "additionalProperties": false
                        },
                        "at": absent, "every": absent, "anchor": absent, "cron": absent, "timezone": absent
                    },
                    "required": ["after"],
                    "additionalProperties": false
                }
            ]
        }))
    }
}

impl ToSchema for Schedule {}

impl PartialSchema for EnvValue {
    fn schema() -> RefOr<Schema> {
        from_json(json!({
            "description": "A plain value, or a secret: `{\"secret\": \"<value>\"}` (reaches the payload, never shown), which reads back as `{\"secret\": true}`; written back in a replacement, `{\"secret\": true}` keeps the secret the job has under that name.",
            "oneOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {"secret": {"anyOf": [{"type": "string"}, {"type": "boolean", "enum": [true]}]}},
                    "required": ["secret"],
                    "additionalProperties": false
                }
            ]
        }))
    }
}

impl ToSchema for EnvValue {}

/// A string enum of `values` (the `wire_enum!` types).
pub fn string_enum(values: &[&str]) -> RefOr<Schema> {
    from_json(json!({"type": "string", "enum": values}))
}

/// A job's `labels`: at most 32, keys 1 to 63 of `A-Z a-z 0-9 _ . - /`, values up to 256
/// characters (what validation enforces).
pub fn labels() -> RefOr<Schema> {
    use crate::validate::{MAX_LABEL_KEY, MAX_LABEL_VALUE, MAX_LABELS};
    from_json(json!({
        "type": "object",
        "maxProperties": MAX_LABELS,
        "propertyNames": {"type": "string", "pattern": format!("^[A-Za-z0-9_./-]{{1,{MAX_LABEL_KEY}}}$")},
        "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE}
    }))
}

/// An HTTP task's method: one of the methods validation accepts.
pub fn http_method() -> RefOr<Schema> {
    from_json(json!({"type": "string", "enum": crate::validate::HTTP_METHODS, "default": "GET"}))
}

/// A task's `env`: at most 64 variables, each a plain value or a secret ([`EnvValue`]).
pub fn env() -> RefOr<Schema> {
    let value = match EnvValue::schema() {
        RefOr::T(schema) => serde_json::to_value(schema).expect("a schema serialises"),
        RefOr::Ref(_) => unreachable!("EnvValue's schema is inline"),
    };
    from_json(json!({
        "type": "object",
        "maxProperties": crate::validate::MAX_ENV,
        "additionalProperties": value
    }))
}

impl PartialSchema for OnTimeout {
    fn schema() -> RefOr<Schema> {
        from_json(json!({
            "description": "What a timed-out attempt leads to: `fail` (the run ends TIMED_OUT), `retry` (like a failure, counting against `max_retries`), or `{\"run_job\": \"<id>\"}` (the run ends TIMED_OUT and that job of the same tenant is triggered once).",
            "oneOf": [
                {"type": "string", "enum": ["fail", "retry"]},
                {
                    "type": "object",
                    "properties": {"run_job": {"type": "string", "pattern": JOB_ID_PATTERN}},
                    "required": ["run_job"],
                    "additionalProperties": false
                }
            ]
        }))
    }
}

impl ToSchema for OnTimeout {}

/// A job id: 1 to 128 of `A-Z a-z 0-9 _ . -` ([`crate::ids::is_valid_id`]).
pub const JOB_ID_PATTERN: &str = "^[A-Za-z0-9_.-]{1,128}$";

impl PartialSchema for Task {
    fn schema() -> RefOr<Schema> {
        let kind = |key: &str, component: &str, description: &str| {
            json!({
                "type": "object",
                "description": description,
                "properties": {key: {"$ref": format!("#/components/schemas/{component}")}},
                "required": [key],
                "additionalProperties": false
            })
        };
        from_json(json!({
            "description": "What a job runs: exactly one kind, `{\"command\": {...}}`, `{\"http\": {...}}` or `{\"container\": {...}}`.",
            "oneOf": [
                kind("command", "CommandTask", "A program exec'd directly (no shell unless argv asks for one)."),
                kind("http", "HttpTask", "One HTTP request; success is the expected status."),
                kind("container", "ContainerTask", "A container image run as an ECS Fargate task (AWS deployment only: 422 `unsupported` locally).")
            ]
        }))
    }
}

impl ToSchema for Task {
    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        out.push(("CommandTask".into(), CommandTask::schema()));
        out.push(("HttpTask".into(), HttpTask::schema()));
        out.push(("ContainerTask".into(), ContainerTask::schema()));
        CommandTask::schemas(out);
        HttpTask::schemas(out);
        ContainerTask::schemas(out);
    }
}
