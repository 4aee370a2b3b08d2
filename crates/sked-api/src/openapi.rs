//! The OpenAPI 3.1 document, generated from the code: the route table's `#[utoipa::path]`
//! annotations ([`crate::routes`]), the views' and core types' `ToSchema`, and what this module
//! adds — the document's info, the bearer security scheme, the answers every authenticated
//! route can give (401, 403, 500, 503), and the request bodies whose schema is derived from
//! [`JobSpec`]'s: a create body (a job, or the seed-style shorthand), a batch, and a JSON merge
//! patch. Served by `GET /v1/openapi.json`.
//!
//! This module decides nothing about requests; it only describes them. Where a handler's
//! checks and a schema could disagree, the schema is built from the same constants
//! ([`crate::extract::MAX_LIMIT`], [`crate::input::MAX_BATCH`], …).

use serde_json::{Map, Value, json};
use sked_core::job::JobSpec;
use sked_core::openapi::{JOB_ID_PATTERN, from_json};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use utoipa::openapi::{RefOr, schema::Schema};
use utoipa::{PartialSchema, ToSchema};

/// Name of the bearer security scheme.
pub const BEARER: &str = "bearer";

/// The document's root: info and tags. Paths come from the route table; [`document`] adds
/// the security scheme and the shared answers.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "sked",
        description = "A distributed job scheduler. Timestamps are RFC 3339 (answered in UTC with milliseconds); durations are \"90s\", \"5m\", \"1h30m\", \"250ms\" or a number of seconds. Every route but `GET /healthz` and `GET /readyz` needs `Authorization: Bearer <key>`; the key decides the tenant, and another tenant's job, run, log or key is 404 as if it did not exist. Bad input is answered 400 (malformed: a wrong JSON type, an unknown or missing field, a bad query parameter or header) or 422 (well formed, but breaking a rule only validation can check: a cron expression that never matches, a jitter not below the interval, end_at before start_at …), naming the field; nothing is changed. This document is generated from the code.",
    ),
    components(schemas(
        crate::error::ErrorBody,
        sked_core::error::FieldError,
        sked_core::error::BatchFieldError
    )),
    tags(
        (name = "jobs", description = "Job definitions and their lifecycle"),
        (name = "runs", description = "Runs (firings) and their attempts"),
        (name = "logs", description = "Attempts' captured output"),
        (name = "keys", description = "API keys"),
        (name = "tenants", description = "Tenants' quotas (operators only)"),
        (name = "alerts", description = "The webhook secret that signs a tenant's failure alerts"),
        (name = "ops", description = "Health and this document"),
    ),
)]
pub struct ApiDoc;

/// What every authenticated route may also answer (the auth layer's refusals, and failures of
/// the store or queue), added to each operation by [`document`].
const SHARED_ANSWERS: [(&str, &str); 4] = [
    (
        "401",
        "No key, or one that is malformed, unknown or revoked (`unauthenticated`)",
    ),
    ("403", "The key's role may not do this (`permission_denied`)"),
    ("500", "An internal failure (`internal`); its cause is logged, not sent"),
    (
        "503",
        "A transient failure of the store or queue (`unavailable`); retry shortly",
    ),
];

/// The answer of an error: the `Error` schema, with `description`.
pub fn error_answer(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

/// The whole document as JSON, built once: the route table's, plus the bearer scheme (required
/// by every operation but those annotated `security(())`, the health check) and
/// [`SHARED_ANSWERS`] on every authenticated operation.
pub fn document() -> &'static Value {
    static DOC: LazyLock<Value> = LazyLock::new(|| {
        let (_, doc) = crate::routes::table().split_for_parts();
        let mut doc = serde_json::to_value(doc).expect("the document serialises");
        doc["components"]["securitySchemes"][BEARER] = json!({
            "type": "http",
            "scheme": "bearer",
            "description": "An API key: `sked_` and 48 hex digits"
        });
        if let Some(paths) = doc["paths"].as_object_mut() {
            for item in paths.values_mut().filter_map(Value::as_object_mut) {
                for op in item.values_mut().filter_map(Value::as_object_mut) {
                    if op.contains_key("security") {
                        op.insert("security".into(), json!([]));
                        continue;
                    }
                    op.insert("security".into(), json!([{ BEARER: [] }]));
                    let responses = op
                        .entry("responses")
                        .or_insert_with(|| json!({}))
                        .as_object_mut()
                        .expect("responses is an object");
                    for (status, description) in SHARED_ANSWERS {
                        responses.entry(status).or_insert_with(|| error_answer(description));
                    }
                }
            }
        }
        add_links(&mut doc);
        doc
    });
    &DOC
}

/// OpenAPI links: what an answer names that other operations take (a created job's `id`, a
/// triggered run's `run_id`), so clients — and schemathesis's stateful phase — can follow
/// them. `(operation, status, path parameter, value, operations it feeds)`.
///
/// A created key's `id` is not linked to `revoke_key`: the schemathesis run pins that
/// operation's id to a key that does not exist (it must never revoke the key it acts with; see
/// scripts/schemathesis.toml), and a link it cannot follow would be reported as a created
/// resource that is not found.
const LINKS: [(&str, &str, &str, &str, &[&str]); 2] = [
    (
        "create_job",
        "201",
        "id",
        "$response.body#/id",
        &[
            "get_job",
            "replace_job",
            "patch_job",
            "delete_job",
            "pause_job",
            "resume_job",
            "trigger_job",
            "backfill_job",
            "preview_job",
            "list_job_runs",
            "list_occurrences",
            "explain_occurrence",
        ],
    ),
    (
        "trigger_job",
        "201",
        "run_id",
        "$response.body#/run_id",
        &["get_run", "cancel_run", "read_logs"],
    ),
];

/// Adds [`LINKS`] to the answers of `doc`'s operations.
fn add_links(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in item.values_mut().filter_map(Value::as_object_mut) {
            let id = op.get("operationId").and_then(Value::as_str).unwrap_or("").to_string();
            for (from, status, param, value, targets) in LINKS {
                if id != from {
                    continue;
                }
                let links: Map<String, Value> = targets
                    .iter()
                    .map(|to| (to.to_string(), json!({"operationId": to, "parameters": {param: value}})))
                    .collect();
                if let Some(answer) = op.get_mut("responses").and_then(|r| r.get_mut(status)) {
                    answer["links"] = Value::Object(links);
                }
            }
        }
    }
}

/// [`document`] serialised, once.
pub fn json() -> &'static str {
    static JSON: LazyLock<String> =
        LazyLock::new(|| serde_json::to_string_pretty(document()).expect("the document serialises"));
    &JSON
}

// ----- schemas derived from JobSpec's -----

/// [`JobSpec`]'s own schema and the components it refers to, as JSON.
fn job_spec() -> (Map<String, Value>, BTreeMap<String, Value>) {
    let spec = match serde_json::to_value(<JobSpec as PartialSchema>::schema()) {
        Ok(Value::Object(map)) => map,
        other => panic!("JobSpec's schema is an object: {other:?}"),
    };
    let mut deps = Vec::new();
    <JobSpec as ToSchema>::schemas(&mut deps);
    let deps = deps
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).expect("a schema serialises")))
        .collect();
    (spec, deps)
}

/// The components a schema built from [`JobSpec`]'s refers to (for `ToSchema::schemas`).
pub fn job_spec_components(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push((JobSpec::name().into_owned(), JobSpec::schema()));
    <JobSpec as ToSchema>::schemas(out);
}

fn properties(schema: &mut Map<String, Value>) -> &mut Map<String, Value> {
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("properties is an object")
}

fn require(schema: &mut Map<String, Value>, names: &[&str]) {
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .expect("required is an array");
    for name in names {
        if !required.iter().any(|r| r == name) {
            required.push(Value::from(*name));
        }
    }
}

/// A job as answered: its normalised definition (secrets as `{"secret": true}`) plus `id`,
/// `state`, `next_fire_at`, `version`, `created_at` and `updated_at`.
pub fn job_view() -> RefOr<Schema> {
    let (mut schema, _) = job_spec();
    schema.insert(
        "description".into(),
        Value::from("A job: its definition as normalised (defaults filled in, secrets as {\"secret\": true}) and its identity and lifecycle."),
    );
    schema.remove("additionalProperties");
    let instant = |d: &str| json!({"type": "string", "format": "date-time", "description": d});
    let props = properties(&mut schema);
    props.insert(
        "id".into(),
        json!({"type": "string", "pattern": JOB_ID_PATTERN, "description": "Job id"}),
    );
    props.insert("state".into(), json!({"$ref": "#/components/schemas/JobState"}));
    props.insert(
        "next_fire_at".into(),
        json!({"type": ["string", "null"], "format": "date-time", "description": "The next nominal fire time; null once nothing is left to fire"}),
    );
    props.insert(
        "version".into(),
        json!({"type": "integer", "minimum": 0, "description": "Optimistic-lock version (`If-Match`)"}),
    );
    props.insert("created_at".into(), instant("Creation time"));
    props.insert("updated_at".into(), instant("Last change by a user"));
    // Every field but the optional `name` and `jitter` is written, defaults included.
    require(
        &mut schema,
        &[
            "id",
            "labels",
            "start_at",
            "end_at",
            "dst",
            "priority",
            "max_retries",
            "backoff",
            "timeout",
            "on_timeout",
            "overlap",
            "misfire",
            "resources",
            "state",
            "next_fire_at",
            "version",
            "created_at",
            "updated_at",
        ],
    );
    from_json(Value::Object(schema))
}

/// A create body's full form: a job definition and an optional `id` (generated if absent).
pub fn new_job() -> RefOr<Schema> {
    let (mut schema, _) = job_spec();
    schema.insert(
        "description".into(),
        Value::from("A job definition and an optional id (a ULID is generated when absent or null)."),
    );
    properties(&mut schema).insert(
        "id".into(),
        json!({"type": ["string", "null"], "pattern": JOB_ID_PATTERN, "description": "1 to 128 of A-Z a-z 0-9 _ . -"}),
    );
    from_json(Value::Object(schema))
}

/// The seed-style one-shot create body ([`crate::shorthand`]).
pub fn shorthand() -> RefOr<Schema> {
    let (spec, _) = job_spec();
    let field = |name: &str| spec["properties"][name].clone();
    from_json(json!({
        "type": "object",
        "description": "A one-shot job in the seed-style shorthand: `payload` (a task object, an argv array, or a shell command string run with /bin/sh -c) at `scheduled_time` (RFC 3339 or epoch seconds; now if absent).",
        "properties": {
            "payload": {
                "oneOf": [
                    {"$ref": "#/components/schemas/Task"},
                    {"type": "array", "items": {"type": "string"}, "description": "argv"},
                    {"type": "string", "description": "a shell command"}
                ]
            },
            "scheduled_time": {
                "oneOf": [
                    {"type": "string", "format": "date-time"},
                    {"type": "number", "minimum": crate::shorthand::MIN_EPOCH_SECONDS, "exclusiveMaximum": crate::shorthand::MAX_EPOCH_SECONDS, "description": "Unix epoch seconds"},
                    {"type": "null"}
                ]
            },
            "priority": field("priority"),
            "max_retries": field("max_retries"),
            "timeout": field("timeout"),
            "id": {"type": ["string", "null"], "pattern": JOB_ID_PATTERN}
        },
        "required": ["payload"],
        "additionalProperties": false
    }))
}

/// `POST /v1/jobs`'s body: a job, or the shorthand.
pub fn create_body() -> RefOr<Schema> {
    from_json(json!({
        "oneOf": [
            {"$ref": "#/components/schemas/NewJob"},
            {"$ref": "#/components/schemas/Shorthand"}
        ]
    }))
}

/// `POST /v1/jobs:batch`'s body.
pub fn batch_body() -> RefOr<Schema> {
    from_json(json!({
        "type": "object",
        "properties": {
            "jobs": {
                "type": "array",
                "maxItems": crate::input::MAX_BATCH,
                "items": {"$ref": "#/components/schemas/CreateJob"},
                "description": "Created all or none, in order"
            }
        },
        "required": ["jobs"],
        "additionalProperties": false
    }))
}

/// A JSON merge patch (RFC 7386) of a job definition: every field optional, `null` removes
/// (back to the default, or — for `schedule` and `task` — leaving a job that is not valid,
/// 422), objects merge key by key, anything else replaces. A patch whose own values have the
/// wrong JSON type is malformed (400); one that would leave an invalid job is 422.
pub fn job_patch() -> RefOr<Schema> {
    let (spec, deps) = job_spec();
    let mut patch = partial(&Value::Object(spec), &deps);
    if let Value::Object(map) = &mut patch {
        map.insert(
            "description".into(),
            Value::from("A JSON merge patch (RFC 7386) of the job's definition: objects merge key by key, null removes a key, anything else replaces it."),
        );
    }
    from_json(patch)
}

/// The schema `schema` resolved through `#/components/schemas/…` references.
fn resolve<'a>(schema: &'a Value, deps: &'a BTreeMap<String, Value>) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or(r);
            resolve(deps.get(name).unwrap_or_else(|| panic!("no component {name}")), deps)
        }
        None => schema,
    }
}

/// What a merge patch may hold where a document has `schema`: itself (a replacement) or null,
/// and for an object with named properties (a struct), any of its properties, each as a patch
/// of its own; other keys only as null (removing a key that is not there changes nothing).
fn patch_value(schema: &Value, deps: &BTreeMap<String, Value>) -> Value {
    let schema = resolve(schema, deps);
    let branches: Vec<Value> = match schema.get("oneOf").or_else(|| schema.get("anyOf")) {
        Some(Value::Array(options)) => options.iter().map(|o| patch_branch(o, deps)).collect(),
        _ => vec![patch_branch(schema, deps)],
    };
    let mut any: Vec<Value> = branches;
    any.push(json!({"type": "null"}));
    json!({"anyOf": any})
}

fn patch_branch(schema: &Value, deps: &BTreeMap<String, Value>) -> Value {
    let schema = resolve(schema, deps);
    if schema.get("properties").is_some() {
        partial(schema, deps)
    } else if schema.get("type") == Some(&Value::from("object")) {
        // A map (labels, env, headers): each value replaced or removed.
        let value = schema.get("additionalProperties").cloned().unwrap_or(json!({}));
        json!({"type": "object", "additionalProperties": {"anyOf": [value, {"type": "null"}]}})
    } else {
        let mut copy = schema.clone();
        if let Value::Object(map) = &mut copy {
            map.remove("description");
        }
        copy
    }
}

/// An object schema with every property optional and patchable.
fn partial(schema: &Value, deps: &BTreeMap<String, Value>) -> Value {
    let props: Map<String, Value> = schema["properties"]
        .as_object()
        .map(|p| p.iter().map(|(k, v)| (k.clone(), patch_value(v, deps))).collect())
        .unwrap_or_default();
    json!({"type": "object", "properties": props, "additionalProperties": {"type": "null"}})
}

/// Declares a request-body type whose schema one of this module's functions builds from
/// [`JobSpec`]'s, with the components it refers to.
macro_rules! body_schema {
    ($($(#[$meta:meta])* $name:ident = $build:path;)+) => {$(
        $(#[$meta])*
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                $build()
            }
        }

        impl ToSchema for $name {
            fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
                job_spec_components(out);
                out.push(("NewJob".into(), new_job()));
                out.push(("Shorthand".into(), shorthand()));
                out.push(("CreateJob".into(), create_body()));
            }
        }
    )+};
}

body_schema! {
    /// `POST /v1/jobs`'s body: a job ([`new_job`]) or the shorthand ([`shorthand`]).
    CreateJob = create_body;
    /// `POST /v1/jobs:batch`'s body.
    JobBatch = batch_body;
    /// `PATCH /v1/jobs/{id}`'s body.
    JobPatch = job_patch;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `maximum` of query parameter `name` of `method path`.
    fn maximum(path: &str, method: &str, name: &str) -> Value {
        let params = document()["paths"][path][method]["parameters"].as_array().unwrap();
        let param = params.iter().find(|p| p["name"] == name).unwrap();
        param["schema"]["maximum"].clone()
    }

    #[test]
    fn documented_bounds_are_the_extractors() {
        assert_eq!(maximum("/v1/jobs", "get", "limit"), crate::extract::MAX_LIMIT);
        assert_eq!(maximum("/v1/runs", "get", "limit"), crate::extract::MAX_LIMIT);
        assert_eq!(maximum("/v1/jobs/{id}/runs", "get", "limit"), crate::extract::MAX_LIMIT);
        assert_eq!(
            maximum("/v1/jobs/{id}/preview", "get", "count"),
            crate::routes::jobs::MAX_PREVIEW
        );
        assert_eq!(
            maximum("/v1/runs/{run_id}/logs", "get", "tail"),
            crate::routes::logs::MAX_TAIL
        );
        let batch = &document()["components"]["schemas"]["JobBatch"]["properties"]["jobs"];
        assert_eq!(batch["maxItems"], crate::input::MAX_BATCH);
    }

    #[test]
    fn a_merge_patch_allows_null_and_partial_objects() {
        let patch = &document()["components"]["schemas"]["JobPatch"];
        assert!(patch["required"].is_null());
        assert_eq!(patch["additionalProperties"], json!({"type": "null"}));
        let backoff = &patch["properties"]["backoff"]["anyOf"];
        assert!(backoff.as_array().unwrap().iter().any(|b| b["type"] == "null"));
        assert!(backoff[0]["required"].is_null(), "{backoff}");
    }
}
