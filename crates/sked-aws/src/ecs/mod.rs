//! `container` tasks on ECS Fargate: [`EcsExecutor`], the `Executor` of the AWS deployment
//! for them (a worker routes `command` and `http` tasks to the local executors).
//!
//! One attempt is one ECS task: `RunTask` on Fargate in the configured cluster and subnets,
//! from the configured task definition, with the job's command and environment (its own
//! plus the `SKED_*` context) as container overrides and its resource tier as task-level
//! CPU/memory overrides; then `DescribeTasks` every [`EcsConfig::poll_interval`] until the
//! task is STOPPED, and the container's exit code is the outcome (0 = success). A stop
//! (timeout, cancel, lost lease, shutdown) is `StopTask` with a reason naming it, and the
//! attempt ends once the task is STOPPED. The request's `grace` does not apply: ECS sends
//! SIGTERM, then SIGKILL after the container's `stopTimeout` in the task definition (30 s by
//! default, at most 120 s on Fargate).
//!
//! The tier: ECS requests carry no job, so the executor reads the tier from the request's
//! `SKED_RESOURCES` context variable (see [`RESOURCES_VAR`]) and falls back to
//! [`EcsConfig::default_resources`](crate::config::EcsConfig::default_resources).
//!
//! Output: the executor sends one line naming the task (ARN, and the container's log stream
//! when the task definition logs with `awslogs`). The container's own output goes to
//! CloudWatch Logs through the task definition's `awslogs` configuration; it is not copied
//! into the attempt's log.
//!
//! Modules:
//! - `outcome`: pure decisions — tier → Fargate size, a described task → [`ExecResult`],
//!   the container's environment, stop reasons in words.
//! - `taskdef`: which task definition runs an image (the configured one, or a revision of
//!   it registered for another image).
//! - `executor`: the calls and the polling loop.
//!
//! What this module must not do: decide retries or timeouts (the worker does).
//!
//! [`EcsConfig::poll_interval`]: crate::config::EcsConfig::poll_interval
//! [`ExecResult`]: sked_core::ports::ExecResult

mod executor;
pub mod outcome;
mod taskdef;

pub use executor::EcsExecutor;
pub use outcome::{RESOURCES_VAR, fargate_size};
