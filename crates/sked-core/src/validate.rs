//! Validation of a job definition: every field is checked before anything is written, and
//! each problem names its field (`schedule.cron`, `task.http.url`, `priority`, …).

use crate::error::FieldError;
use crate::job::JobSpec;
use crate::timestamp::Timestamp;

/// Limits from SPEC §5.
pub const MAX_LABELS: usize = 32;
/// Most env entries of a command or container task.
pub const MAX_ENV: usize = 64;

/// What the deployment can run, for the checks that depend on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether `container` tasks can run (an ECS executor is configured).
    pub container_tasks: bool,
}

/// Every problem with `spec`, empty if it is valid. `now` is used for relative checks only.
pub fn validate_spec(spec: &JobSpec, now: Timestamp) -> Vec<FieldError> {
    let _ = (spec, now);
    todo!("validation helper")
}
