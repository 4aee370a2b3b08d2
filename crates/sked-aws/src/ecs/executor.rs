//! [`EcsExecutor`]: `RunTask`, then `DescribeTasks` until STOPPED, `StopTask` when told to
//! stop. See the module header of [`crate::ecs`] for the whole picture.
//!
//! Failures of the calls are outcomes, never panics: a refused `RunTask` (an error, or a
//! `failures` entry such as `RESOURCE:ENI`) fails the attempt with the reason; while the task
//! runs, failed `DescribeTasks` calls are retried on the next tick, and only after
//! [`MAX_DESCRIBE_FAILURES`] in a row is the task stopped and the attempt failed (the
//! executor cannot watch it any more).
//!
//! If the `execute` future is dropped while a task runs (the worker itself is being torn
//! down), a `StopTask` is sent from a spawned task, so nothing keeps running beside a retry.

use super::outcome::{client_token, ended, environment, fargate_size, stop_reason, tier};
use super::taskdef::{Resolved, TaskDefs};
use crate::config::EcsConfig;
use crate::error::classify;
use async_trait::async_trait;
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, ContainerOverride, KeyValuePair, LaunchType, NetworkConfiguration,
    TaskOverride,
};
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{ContainerTask, Task};
use sked_core::timestamp;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Failed `DescribeTasks` in a row after which the executor gives up on a task.
pub const MAX_DESCRIBE_FAILURES: u32 = 10;

/// Runs `container` tasks as ECS Fargate tasks.
pub struct EcsExecutor {
    /// ECS.
    client: aws_sdk_ecs::Client,
    /// Cluster, task definition, network, polling.
    config: EcsConfig,
    /// Which task definition runs an image.
    task_defs: TaskDefs,
    /// Stamps the executor's own output line.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for EcsExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcsExecutor")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl EcsExecutor {
    /// An executor running tasks as `config` says, stamping its output line with `clock`.
    pub fn new(client: aws_sdk_ecs::Client, config: EcsConfig, clock: Arc<dyn Clock>) -> Self {
        let task_defs = TaskDefs::new(
            client.clone(),
            config.task_definition.clone(),
            config.container_name.clone(),
        );
        EcsExecutor {
            client,
            config,
            task_defs,
            clock,
        }
    }

    /// The executor's configuration.
    pub fn config(&self) -> &EcsConfig {
        &self.config
    }

    /// Runs one container task; see [`Executor::execute`].
    async fn run(
        &self,
        task: &ContainerTask,
        request: &ExecRequest,
        output: mpsc::Sender<LogLine>,
        mut stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        if let Some(reason) = *stop.borrow_and_update() {
            return ExecResult {
                stopped: Some(reason),
                error: Some("stopped before it started".into()),
                ..Default::default()
            };
        }
        let def = match self.task_defs.resolve(&task.image).await {
            Ok(def) => def,
            Err(e) => return failure(format!("no task definition for image {:?}: {e}", task.image)),
        };
        let arn = match self.start(task, request, &def).await {
            Ok(arn) => arn,
            Err(e) => return failure(e),
        };
        // From here on a dropped future stops the task.
        let mut guard = StopOnDrop {
            client: self.client.clone(),
            cluster: self.config.cluster.clone(),
            arn: Some(arn.clone()),
        };
        let _ = output
            .send(LogLine {
                ts: timestamp::trunc_ms(self.clock.now()),
                stream: LogStream::Stderr,
                line: self.started_line(&arn, &def),
            })
            .await;
        drop(output);

        let mut failures = 0;
        let mut next_poll = Instant::now() + self.config.poll_interval;
        loop {
            tokio::select! {
                biased;
                reason = wait_for_stop(&mut stop) => {
                    let result = self.stop(&arn, reason).await;
                    if result.is_some() {
                        guard.disarm();
                    }
                    let mut result = result.unwrap_or_else(|| failure(format!(
                        "task {arn} did not reach STOPPED within {:?} of StopTask",
                        self.config.stop_wait
                    )));
                    result.success = false;
                    result.stopped = Some(reason);
                    return result;
                }
                () = tokio::time::sleep_until(next_poll) => {}
            }
            next_poll = Instant::now() + self.config.poll_interval;
            match self.describe(&arn).await {
                Ok(Some(result)) => {
                    guard.disarm();
                    return result;
                }
                Ok(None) => failures = 0,
                Err(e) => {
                    failures += 1;
                    tracing::warn!(task = %arn, failures, error = %e, "DescribeTasks failed");
                    if failures >= MAX_DESCRIBE_FAILURES {
                        // Not watched any more: stop it rather than leave it running unseen.
                        let _ = self.stop_task(&arn, "sked: the worker cannot watch this task").await;
                        guard.disarm();
                        return failure(format!("lost track of task {arn}: {e}"));
                    }
                }
            }
        }
    }

    /// `RunTask`; the task's ARN, or why it did not start.
    async fn start(&self, task: &ContainerTask, request: &ExecRequest, def: &Resolved) -> Result<String, String> {
        let (cpu, memory) = fargate_size(tier(&request.context, self.config.default_resources));
        let env = environment(task, &request.context)
            .into_iter()
            .map(|(name, value)| KeyValuePair::builder().name(name).value(value).build())
            .collect();
        let mut container = ContainerOverride::builder()
            .name(&self.config.container_name)
            .set_environment(Some(env));
        if !task.command.is_empty() {
            container = container.set_command(Some(task.command.clone()));
        }
        let overrides = TaskOverride::builder()
            .cpu(cpu.to_string())
            .memory(memory.to_string())
            .container_overrides(container.build())
            .build();
        let vpc = AwsVpcConfiguration::builder()
            .set_subnets(Some(self.config.subnets.clone()))
            .set_security_groups(Some(self.config.security_groups.clone()))
            .assign_public_ip(if self.config.assign_public_ip {
                AssignPublicIp::Enabled
            } else {
                AssignPublicIp::Disabled
            })
            .build()
            .map_err(|e| format!("cannot build the task's network configuration: {e}"))?;
        let out = self
            .client
            .run_task()
            .cluster(&self.config.cluster)
            .task_definition(&def.arn)
            .launch_type(LaunchType::Fargate)
            .count(1)
            .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
            .overrides(overrides)
            .started_by("sked")
            .client_token(client_token(&request.context))
            .send()
            .await
            .map_err(|e| format!("RunTask failed: {}", classify("ecs:RunTask", e, |_| None).into_call()))?;
        if let Some(f) = out.failures().first() {
            return Err(format!(
                "RunTask failed: {}{}",
                f.reason().unwrap_or("no reason given"),
                f.detail().map(|d| format!(" ({d})")).unwrap_or_default()
            ));
        }
        out.tasks()
            .first()
            .and_then(|t| t.task_arn())
            .map(str::to_string)
            .ok_or_else(|| "RunTask started no task and gave no reason".to_string())
    }

    /// The line sent to the attempt's log when the task started.
    fn started_line(&self, arn: &str, def: &Resolved) -> String {
        let mut line = format!("[sked] ECS task {arn} started in cluster {}", self.config.cluster);
        if let Some(logs) = &def.logs {
            let id = arn.rsplit('/').next().unwrap_or(arn);
            match &logs.prefix {
                Some(prefix) => line.push_str(&format!(
                    "; container output in CloudWatch Logs {} / {prefix}/{}/{id}",
                    logs.group, self.config.container_name
                )),
                None => line.push_str(&format!("; container output in CloudWatch Logs {}", logs.group)),
            }
        }
        line
    }

    /// `DescribeTasks` of one task: its result once STOPPED, `None` while it runs.
    async fn describe(&self, arn: &str) -> Result<Option<ExecResult>, String> {
        let out = self
            .client
            .describe_tasks()
            .cluster(&self.config.cluster)
            .tasks(arn)
            .send()
            .await
            .map_err(|e| classify("ecs:DescribeTasks", e, |_| None).into_call().to_string())?;
        match out.tasks().iter().find(|t| t.task_arn() == Some(arn)) {
            Some(task) => Ok(ended(task, &self.config.container_name)),
            None => {
                let why = out
                    .failures()
                    .first()
                    .and_then(|f| f.reason())
                    .unwrap_or("not in the answer");
                Err(format!("DescribeTasks did not describe the task: {why}"))
            }
        }
    }

    /// `StopTask`, then waits (polling) until the task is STOPPED, at most
    /// [`EcsConfig::stop_wait`]: its result then, or `None` if it did not stop in time.
    async fn stop(&self, arn: &str, reason: StopReason) -> Option<ExecResult> {
        if let Err(e) = self.stop_task(arn, stop_reason(reason)).await {
            // An already stopped task is refused by some services: the polls tell.
            tracing::warn!(task = %arn, error = %e, "StopTask failed");
        }
        let deadline = Instant::now() + self.config.stop_wait;
        loop {
            if let Ok(Some(result)) = self.describe(arn).await {
                return Some(result);
            }
            if Instant::now() + self.config.poll_interval > deadline {
                return None;
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    /// `StopTask` with `reason`.
    async fn stop_task(&self, arn: &str, reason: &str) -> Result<(), String> {
        stop_task(&self.client, &self.config.cluster, arn, reason).await
    }
}

/// `StopTask` of `arn` in `cluster`.
async fn stop_task(client: &aws_sdk_ecs::Client, cluster: &str, arn: &str, reason: &str) -> Result<(), String> {
    client
        .stop_task()
        .cluster(cluster)
        .task(arn)
        .reason(reason)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| classify("ecs:StopTask", e, |_| None).into_call().to_string())
}

#[async_trait]
impl Executor for EcsExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        match &request.task {
            Task::Container(task) => self.run(task, &request, output, stop).await,
            other => failure(format!(
                "the ECS executor runs container tasks, not {} tasks",
                other.kind()
            )),
        }
    }
}

/// Stops a started task if the `execute` future is dropped before the task ended.
struct StopOnDrop {
    /// ECS.
    client: aws_sdk_ecs::Client,
    /// The task's cluster.
    cluster: String,
    /// The task, until it is known to have stopped.
    arn: Option<String>,
}

impl StopOnDrop {
    /// The task is stopped: nothing to do on drop.
    fn disarm(&mut self) {
        self.arn = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let Some(arn) = self.arn.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(task = %arn, "execute dropped outside a runtime: the ECS task is not stopped");
            return;
        };
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        runtime.spawn(async move {
            if let Err(e) = stop_task(&client, &cluster, &arn, "sked: the worker abandoned the attempt").await {
                tracing::warn!(task = %arn, error = %e, "StopTask of an abandoned task failed");
            }
        });
    }
}

/// Returns once `stop` holds a reason (never, if its sender is gone without one).
async fn wait_for_stop(stop: &mut watch::Receiver<Option<StopReason>>) -> StopReason {
    loop {
        if let Some(reason) = *stop.borrow_and_update() {
            return reason;
        }
        if stop.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// A failed result with `error`.
fn failure(error: String) -> ExecResult {
    ExecResult {
        success: false,
        error: Some(error),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_name_sked_and_fit_ecs() {
        for r in [
            StopReason::Timeout,
            StopReason::Cancelled,
            StopReason::LeaseLost,
            StopReason::Shutdown,
        ] {
            let text = stop_reason(r);
            assert!(text.starts_with("sked: ") && text.len() <= 255);
        }
    }
}
