//! Pure decisions of the ECS executor, kept apart from the calls so they are tested without
//! a server (and so the cases moto cannot produce — non-zero exit codes, tasks that failed
//! to start — are tested at all).

use aws_sdk_ecs::types::Task;
use sked_core::job::Resources;
use sked_core::ports::{ExecResult, StopReason};
use sked_core::task::ContainerTask;
use std::collections::BTreeMap;

/// The context variable naming the job's resource tier (`small`, `medium`, …), when the
/// worker passes it; the executor's default tier applies otherwise.
pub const RESOURCES_VAR: &str = "SKED_RESOURCES";

/// Fargate task size of a tier: `(cpu units, memory MiB)`.
pub fn fargate_size(tier: Resources) -> (u32, u32) {
    match tier {
        Resources::Small => (256, 512),
        Resources::Medium => (512, 1024),
        Resources::Large => (1024, 2048),
        Resources::Xlarge => (2048, 4096),
        // A tier added later and not mapped here yet: the smallest size.
        _ => (256, 512),
    }
}

/// The tier a request asks for: its `SKED_RESOURCES` context variable, else `default`.
pub fn tier(context: &[(String, String)], default: Resources) -> Resources {
    context
        .iter()
        .find(|(k, _)| k == RESOURCES_VAR)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(default)
}

/// The container's environment overrides: the task's own, then the context (the context
/// wins, as for commands), sorted by name.
pub fn environment(task: &ContainerTask, context: &[(String, String)]) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = sked_core::secret::payload_vars(&task.env)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.extend(context.iter().cloned());
    env
}

/// `StopTask`'s reason for a stop (at most 255 characters; shown in the ECS console).
pub fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Timeout => "sked: attempt timed out",
        StopReason::Cancelled => "sked: run cancelled",
        StopReason::LeaseLost => "sked: worker lost its lease",
        StopReason::Shutdown => "sked: worker shutting down",
    }
}

/// A token making `RunTask` idempotent for one attempt: a hash of its context (run,
/// attempt, fencing token), so the SDK's retries of one call never start a second task.
/// Without a context (tests), a hash of the current instant and a counter.
pub fn client_token(context: &[(String, String)]) -> String {
    let mut hash = Fnv::default();
    if context.is_empty() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        hash.write(
            &chrono::Utc::now()
                .timestamp_nanos_opt()
                .unwrap_or_default()
                .to_le_bytes(),
        );
        hash.write(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        hash.write(&std::process::id().to_le_bytes());
    }
    for (k, v) in context {
        hash.write(k.as_bytes());
        hash.write(b"=");
        hash.write(v.as_bytes());
        hash.write(b"\0");
    }
    format!("sked-{:016x}", hash.0)
}

/// FNV-1a, 64 bits: a small stable hash (client tokens, derived family names).
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// How a task ended, or `None` while it is not STOPPED yet. `container` is the container
/// that runs the job; its exit code is the outcome.
pub fn ended(task: &Task, container: &str) -> Option<ExecResult> {
    if task.last_status() != Some("STOPPED") {
        return None;
    }
    let c = task.containers().iter().find(|c| c.name() == Some(container));
    let exit_code = c.and_then(|c| c.exit_code());
    let why = || {
        let mut parts = Vec::new();
        if let Some(code) = task.stop_code() {
            parts.push(code.as_str().to_string());
        }
        if let Some(reason) = task.stopped_reason().filter(|r| !r.is_empty()) {
            parts.push(reason.to_string());
        }
        if let Some(reason) = c.and_then(|c| c.reason()).filter(|r| !r.is_empty()) {
            parts.push(format!("container: {reason}"));
        }
        parts.join(": ")
    };
    Some(match exit_code {
        Some(0) => ExecResult {
            success: true,
            exit_code: Some(0),
            ..Default::default()
        },
        Some(code) => {
            let why = why();
            ExecResult {
                success: false,
                exit_code: Some(code),
                error: Some(if why.is_empty() {
                    format!("exit status {code}")
                } else {
                    format!("exit status {code} ({why})")
                }),
                ..Default::default()
            }
        }
        None => {
            let why = why();
            let error = match (c.is_some(), why.is_empty()) {
                (false, _) => format!("the task has no container named {container:?}"),
                (true, true) => "the task stopped without an exit code".to_string(),
                (true, false) => format!("the task stopped without an exit code: {why}"),
            };
            ExecResult {
                success: false,
                error: Some(error),
                ..Default::default()
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecs::types::{Container, TaskStopCode};

    fn task(status: &str, exit: Option<i32>) -> Task {
        let mut c = Container::builder().name("main");
        if let Some(code) = exit {
            c = c.exit_code(code);
        }
        Task::builder().last_status(status).containers(c.build()).build()
    }

    #[test]
    fn tiers_map_to_fargate_sizes() {
        assert_eq!(fargate_size(Resources::Small), (256, 512));
        assert_eq!(fargate_size(Resources::Medium), (512, 1024));
        assert_eq!(fargate_size(Resources::Large), (1024, 2048));
        assert_eq!(fargate_size(Resources::Xlarge), (2048, 4096));
    }

    #[test]
    fn the_tier_comes_from_the_context_else_the_default() {
        let ctx = |v: &str| vec![(RESOURCES_VAR.to_string(), v.to_string())];
        assert_eq!(tier(&ctx("large"), Resources::Small), Resources::Large);
        assert_eq!(tier(&ctx("huge"), Resources::Medium), Resources::Medium);
        assert_eq!(tier(&[], Resources::Xlarge), Resources::Xlarge);
    }

    #[test]
    fn the_context_wins_over_the_task_environment() {
        let task = ContainerTask {
            image: "img".into(),
            command: vec![],
            env: BTreeMap::from([("A".into(), "1".into()), ("SKED_RUN_ID".into(), "fake".into())]),
        };
        let env = environment(&task, &[("SKED_RUN_ID".into(), "r@1".into())]);
        assert_eq!(env.get("A").map(String::as_str), Some("1"));
        assert_eq!(env.get("SKED_RUN_ID").map(String::as_str), Some("r@1"));
    }

    #[test]
    fn client_tokens_are_stable_per_context_and_fit_ecs() {
        let ctx = vec![("SKED_RUN_ID".to_string(), "r@1".to_string())];
        assert_eq!(client_token(&ctx), client_token(&ctx));
        assert_ne!(client_token(&[]), client_token(&[]));
        assert!(client_token(&ctx).len() <= 64);
    }

    #[test]
    fn a_running_task_has_not_ended() {
        assert_eq!(ended(&task("RUNNING", None), "main"), None);
        assert_eq!(ended(&task("DEPROVISIONING", Some(0)), "main"), None);
    }

    #[test]
    fn exit_zero_succeeds_and_other_codes_fail_with_the_reason() {
        let ok = ended(&task("STOPPED", Some(0)), "main").unwrap();
        assert!(ok.success);
        assert_eq!(ok.exit_code, Some(0));

        let failed = Task::builder()
            .last_status("STOPPED")
            .stop_code(TaskStopCode::EssentialContainerExited)
            .stopped_reason("Essential container in task exited")
            .containers(Container::builder().name("main").exit_code(3).build())
            .build();
        let r = ended(&failed, "main").unwrap();
        assert!(!r.success);
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(
            r.error.as_deref(),
            Some("exit status 3 (EssentialContainerExited: Essential container in task exited)")
        );
    }

    #[test]
    fn a_task_that_never_started_fails_with_why() {
        let t = Task::builder()
            .last_status("STOPPED")
            .stop_code(TaskStopCode::TaskFailedToStart)
            .stopped_reason("CannotPullContainerError: pull image manifest has been retried 1 time(s)")
            .containers(
                Container::builder()
                    .name("main")
                    .reason("CannotPullContainerError")
                    .build(),
            )
            .build();
        let r = ended(&t, "main").unwrap();
        assert!(!r.success);
        assert_eq!(r.exit_code, None);
        let error = r.error.unwrap();
        assert!(
            error.starts_with("the task stopped without an exit code: TaskFailedToStart: CannotPullContainerError"),
            "{error}"
        );

        let r = ended(&task("STOPPED", Some(0)), "other").unwrap();
        assert_eq!(r.error.as_deref(), Some("the task has no container named \"other\""));
    }
}
