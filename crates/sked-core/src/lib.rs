//! sked-core: the scheduler itself, written once against ports.
//!
//! - [`ids`], [`duration`], [`timestamp`], [`integer`]: small value types and their wire
//!   formats.
//! - [`auth`]: API keys, roles, and the principal a request acts as.
//! - [`job`], [`task`], [`schedule`], [`run`]: the domain (what a user defines, what fires);
//!   [`secret`]: env values that are secrets (never shown, masked in output).
//! - [`dependency`]: jobs that run after others, by nominal time (the `after` schedule).
//! - [`validate`]: every field of a job checked before anything is written.
//! - [`quota`]: per-tenant limits and the submit-rate rule.
//! - [`firing`]: a sweep's plan for one due job (runs to fire, occurrences skipped and why,
//!   the next fire time); [`lifecycle`]: the run state machine (claim, heartbeat, complete,
//!   cancel) as pure functions every store applies in its own transaction, deciding the
//!   values of [`attempt`] (a claim's answer, an attempt's end, the run's next step).
//! - [`ledger`]: the occurrence ledger (what became of each nominal time of a job);
//!   [`paused`]: what becomes of a paused job's runs that come due.
//! - [`alert`]: failure alerts (a job's `notify`, the alert its runs carry, delivery tries,
//!   signatures).
//! - [`retry`]: backoff and the attempt-outcome state machine.
//! - [`fairness`]: the order in which a local queue serves several tenants (turns).
//! - [`ports`]: the traits adapters implement (clock, store, queue, work, logs, executor,
//!   keys, quotas); [`work`]: the work port over any store and any queue; [`log_record`]: the stored form of a log line, shared by every log store.
//! - [`error`]: the errors services answer with ([`CoreError`], [`FieldError`]).
//! - `openapi` (build feature `utoipa`): the OpenAPI schemas of the wire types whose serde
//!   form is hand-written (the derived ones sit on their types).
//! - [`service`]: submit, update, cancel, sweep, work and reap — the behaviour both
//!   deployments share.
//!
//! This crate must not know which store, queue or executor it drives: no SQL, HTTP or AWS.

pub mod alert;
pub mod attempt;
pub mod auth;
pub mod concurrency;
pub mod dependency;
pub mod duration;
pub mod error;
pub mod fairness;
pub mod firing;
pub mod ids;
pub mod integer;
pub mod job;
pub mod ledger;
pub mod lifecycle;
pub mod log_record;
#[cfg(feature = "utoipa")]
pub mod openapi;
pub mod paused;
pub mod ports;
pub mod quota;
pub mod retry;
pub mod run;
pub mod run_settings;
pub mod schedule;
pub mod secret;
pub mod service;
pub mod task;
pub mod timestamp;
pub mod unwritten_firing;
pub mod validate;
pub mod work;

pub use error::{CoreError, FieldError};
pub use ids::{JobId, RunId, TenantId, WorkerId};
pub use job::{Job, JobSpec, JobState};
pub use run::{Attempt, Run, RunState};
pub use timestamp::Timestamp;
