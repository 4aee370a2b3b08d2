//! Request bodies of the job routes, decoded into core types: create (full or
//! [shorthand](crate::shorthand)), batch, replace (PUT) and merge patch (PATCH).
//!
//! Decoding problems (not an object, wrong type, unknown or missing field) are
//! [`BodyError::Malformed`] and answer 400; a caller-given id that breaks the id rules is
//! [`BodyError::Invalid`] and answers 422 like other validation failures. Semantic checks
//! of the definition itself belong to `sked-core` and are not repeated here, except that a
//! batch with malformed entries also reports the other entries' validation problems, so one
//! answer lists every invalid entry.

use crate::error::ApiError;
use crate::extract::decode;
use crate::merge_patch;
use crate::shorthand;
use serde_json::{Map, Value};
use sked_core::error::{BatchFieldError, FieldError};
use sked_core::ids::JobId;
use sked_core::job::JobSpec;
use sked_core::service::jobs::NewJob;
use sked_core::timestamp::Timestamp;
use sked_core::validate;

/// Most jobs one batch may create.
pub const MAX_BATCH: usize = 1_000;

/// Why a body could not become a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The body does not have the request's shape (400).
    Malformed(FieldError),
    /// The body is well formed but a field breaks a rule (422).
    Invalid(FieldError),
}

impl BodyError {
    fn field_error(self) -> FieldError {
        match self {
            BodyError::Malformed(e) | BodyError::Invalid(e) => e,
        }
    }
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::Malformed(e) => ApiError::malformed(e),
            BodyError::Invalid(e) => ApiError::invalid(vec![e]),
        }
    }
}

fn object(value: Value, what: &str) -> Result<Map<String, Value>, BodyError> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(BodyError::Malformed(FieldError::new(
            "",
            format!("{what} must be a JSON object"),
        ))),
    }
}

/// A create body: a job definition plus an optional `id`, or the shorthand. `now` is the
/// shorthand's default `scheduled_time`.
pub fn new_job(value: Value, now: Timestamp) -> Result<NewJob, BodyError> {
    let mut map = object(value, "a job")?;
    if shorthand::is_shorthand(&map) {
        map = shorthand::expand(map, now).map_err(BodyError::Malformed)?;
    }
    let id = map.remove("id");
    let spec = decode::<JobSpec>(Value::Object(map), "").map_err(BodyError::Malformed)?;
    let id = match id {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match validate::validate_job_id(&s) {
            None => Some(JobId(s)),
            Some(e) => return Err(BodyError::Invalid(e)),
        },
        Some(_) => {
            return Err(BodyError::Malformed(FieldError::new(
                "id",
                "invalid type: expected a string",
            )));
        }
    };
    Ok(NewJob { id, spec })
}

/// A batch body `{"jobs": [...]}` of at most [`MAX_BATCH`] create bodies. Any invalid entry
/// fails the whole batch with a 422 listing every problem found by index.
pub fn batch(value: Value, now: Timestamp) -> Result<Vec<NewJob>, ApiError> {
    let mut map = object(value, "a batch").map_err(ApiError::from)?;
    if let Some(key) = map.keys().find(|k| *k != "jobs") {
        return Err(ApiError::bad_request(
            Some(key),
            format!("unknown field `{key}`, expected `jobs`"),
        ));
    }
    let entries = match map.remove("jobs") {
        Some(Value::Array(entries)) => entries,
        None => return Err(ApiError::bad_request(Some("jobs"), "missing field `jobs`")),
        Some(_) => return Err(ApiError::bad_request(Some("jobs"), "jobs must be an array of jobs")),
    };
    if entries.len() > MAX_BATCH {
        return Err(ApiError::bad_request(
            Some("jobs"),
            format!("a batch holds at most {MAX_BATCH} jobs, got {}", entries.len()),
        ));
    }
    let mut jobs = Vec::with_capacity(entries.len());
    let mut errors = Vec::new();
    for (index, entry) in entries.into_iter().enumerate() {
        match new_job(entry, now) {
            Ok(job) => jobs.push((index, job)),
            Err(e) => {
                let FieldError { field, message } = e.field_error();
                errors.push(BatchFieldError { index, field, message });
            }
        }
    }
    if errors.is_empty() {
        return Ok(jobs.into_iter().map(|(_, job)| job).collect());
    }
    for (index, job) in &jobs {
        for FieldError { field, message } in validate::validate_spec(&job.spec, now) {
            errors.push(BatchFieldError {
                index: *index,
                field,
                message,
            });
        }
    }
    Err(ApiError::invalid_batch(errors))
}

/// Takes an `id` out of a replace body: absent, or equal to the path's.
fn take_matching_id(map: &mut Map<String, Value>, path_id: &JobId) -> Result<(), BodyError> {
    match map.remove("id") {
        None => Ok(()),
        Some(Value::String(s)) if s == path_id.as_str() => Ok(()),
        Some(_) => Err(BodyError::Malformed(FieldError::new(
            "id",
            "a job's id cannot be changed; it must match the path",
        ))),
    }
}

/// A PUT body: a full definition (an `id`, if present, must match the path).
pub fn replacement(value: Value, path_id: &JobId) -> Result<JobSpec, BodyError> {
    let mut map = object(value, "a job")?;
    take_matching_id(&mut map, path_id)?;
    decode(Value::Object(map), "").map_err(BodyError::Malformed)
}

/// A PATCH body applied as a JSON merge patch to `current`'s JSON form.
///
/// A problem with a value the patch itself gives (a string where a number goes, an unknown
/// field) makes the patch malformed: 400. A problem only the merged document has — a required
/// field removed, keys of two schedule or task kinds side by side — means the patch is well
/// formed but would leave an invalid job: 422 (RFC 5789 §2.2), naming the field.
pub fn patched(current: &JobSpec, patch: &Value, path_id: &JobId) -> Result<JobSpec, BodyError> {
    if !patch.is_object() {
        return Err(BodyError::Malformed(FieldError::new(
            "",
            "a merge patch must be a JSON object",
        )));
    }
    let mut doc = serde_json::to_value(current)
        .map_err(|e| BodyError::Malformed(FieldError::new("", format!("stored job is not serialisable: {e}"))))?;
    merge_patch::apply(&mut doc, patch);
    let mut map = object(doc, "a patched job")?;
    take_matching_id(&mut map, path_id)?;
    decode(Value::Object(map), "").map_err(|e| {
        if patch_gives_leaf(patch, &e.field) {
            BodyError::Malformed(e)
        } else {
            BodyError::Invalid(e)
        }
    })
}

/// Whether `patch` itself gives a value other than an object or null at `field` (a dotted path
/// with `[i]` indices, as [`decode`] names fields).
fn patch_gives_leaf(patch: &Value, field: &str) -> bool {
    let mut at = patch;
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = part.split_once('[').map_or((part, ""), |(n, rest)| (n, rest));
        if !name.is_empty() {
            match at.get(name) {
                Some(v) => at = v,
                None => return false,
            }
        }
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            let index = index.trim_end_matches(']').parse::<usize>().ok();
            match index.and_then(|i| at.get(i)) {
                Some(v) => at = v,
                None => return false,
            }
        }
    }
    !(at.is_object() || at.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sked_core::schedule::Schedule;
    use sked_core::timestamp;

    fn now() -> Timestamp {
        timestamp::parse("2026-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn create_with_id() {
        let j = new_job(
            json!({"id": "a.b", "schedule": {"every": "5m"}, "task": {"command": {"argv": ["x"]}}}),
            now(),
        )
        .unwrap();
        assert_eq!(j.id, Some(JobId::from("a.b")));
        assert!(matches!(j.spec.schedule, Schedule::Every { .. }));
    }

    #[test]
    fn bad_ids() {
        let body = |id: Value| json!({"id": id, "schedule": {"every": "5m"}, "task": {"command": {"argv": ["x"]}}});
        assert!(matches!(new_job(body(json!("a b")), now()), Err(BodyError::Invalid(e)) if e.field == "id"));
        assert!(matches!(new_job(body(json!(7)), now()), Err(BodyError::Malformed(e)) if e.field == "id"));
    }

    #[test]
    fn shorthand_create() {
        let j = new_job(json!({"payload": "echo", "id": "s1", "max_retries": 0}), now()).unwrap();
        assert_eq!(j.spec.schedule, Schedule::At(now()));
        assert_eq!(j.spec.max_retries, 0);
        assert_eq!(j.id, Some(JobId::from("s1")));
    }

    #[test]
    fn batch_envelope() {
        assert_eq!(
            batch(json!({"jobs": 3}), now()).unwrap_err().field.as_deref(),
            Some("jobs")
        );
        assert_eq!(
            batch(json!({"job": []}), now()).unwrap_err().field.as_deref(),
            Some("job")
        );
        let many = vec![json!({"payload": "x"}); MAX_BATCH + 1];
        let e = batch(json!({ "jobs": many }), now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.field.as_deref()), (400, Some("jobs")));
    }

    #[test]
    fn patch_merges_and_keeps_id() {
        let current = new_job(
            json!({"schedule": {"every": "5m"}, "task": {"command": {"argv": ["x"]}}}),
            now(),
        )
        .unwrap()
        .spec;
        let spec = patched(&current, &json!({"priority": 8, "id": "j"}), &JobId::from("j")).unwrap();
        assert_eq!(spec.priority, 8);
        let e = patched(&current, &json!({"priority": "x"}), &JobId::from("j")).unwrap_err();
        assert!(matches!(e, BodyError::Malformed(e) if e.field == "priority"));
        let e = patched(&current, &json!({"id": "k"}), &JobId::from("j")).unwrap_err();
        assert!(matches!(e, BodyError::Malformed(e) if e.field == "id"));
        let e = patched(
            &current,
            &json!({"task": {"command": {"argv": [1]}}}),
            &JobId::from("j"),
        )
        .unwrap_err();
        assert!(matches!(e, BodyError::Malformed(e) if e.field == "task.command.argv[0]"));
    }

    #[test]
    fn a_well_formed_patch_that_leaves_an_invalid_job_is_invalid_not_malformed() {
        // Given: an `every` job.
        let current = new_job(
            json!({"schedule": {"every": "5m"}, "task": {"command": {"argv": ["x"]}}}),
            now(),
        )
        .unwrap()
        .spec;
        let id = JobId::from("j");
        // When the patch is well formed but the merged job is not, then it is 422, naming
        // the field: two schedule kinds, two task kinds, a required field removed, an object
        // where `on_timeout` takes a name.
        for (patch, field) in [
            (json!({"schedule": {"at": "2026-01-01T00:00:00Z"}}), "schedule"),
            (json!({"task": {"http": {"url": "https://example.com"}}}), "task"),
            (json!({"task": null}), "task"),
            (json!({"on_timeout": {}}), "on_timeout"),
        ] {
            let e = patched(&current, &patch, &id).unwrap_err();
            assert!(
                matches!(&e, BodyError::Invalid(e) if e.field == field),
                "{patch}: {e:?}"
            );
        }
    }
}
