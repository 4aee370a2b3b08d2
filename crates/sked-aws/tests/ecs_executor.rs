//! The ECS executor against a real moto server: a container task goes through RunTask and
//! DescribeTasks to its exit code, with its command, environment and tier overrides visible
//! in DescribeTasks; a stop signal becomes StopTask (on a server of its own whose task
//! transitions are frozen, so the task stays RUNNING until stopped); RunTask refusals and
//! other task kinds are failures.
//!
//! What moto does not do: nothing runs. A task advances RUNNING → DEACTIVATING → STOPPING →
//! DEPROVISIONING → STOPPED, one step per DescribeTasks, and its container always reports
//! exit code 0 (also after StopTask), with no `stopCode`. So a non-zero exit code and a task
//! that fails to start are covered by the unit tests of `ecs::outcome` on described tasks,
//! and "the task really stopped" is asserted as STOPPED with sked's `stoppedReason`.

mod common;

use common::*;
use sked_aws::{AwsClients, AwsConfig, EcsConfig, EcsExecutor};
use sked_core::duration::Dur;
use sked_core::ports::{ExecRequest, ExecResult, Executor, LogLine, StopReason, SystemClock};
use sked_core::task::{CommandTask, ContainerTask, Task};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// A server of this binary's own whose ECS tasks never advance by themselves.
fn frozen() -> &'static MotoServer {
    static FROZEN: OnceLock<MotoServer> = OnceLock::new();
    FROZEN.get_or_init(|| {
        let server = MotoServer::start();
        freeze_ecs_tasks(&server);
        server
    })
}

fn ecs_config(config: &AwsConfig) -> EcsConfig {
    config.ecs.clone().expect("ecs config")
}

fn executor(clients: &AwsClients, config: &AwsConfig) -> EcsExecutor {
    EcsExecutor::new(clients.ecs.clone(), ecs_config(config), Arc::new(SystemClock))
}

fn container(image: &str, command: &[&str]) -> Task {
    Task::Container(ContainerTask {
        image: image.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::from([("GREETING".into(), "hello".into())]),
    })
}

fn request(task: Task, resources: Option<&str>) -> ExecRequest {
    let mut context = vec![
        ("SKED_RUN_ID".to_string(), "report@20261201T090000.000Z".to_string()),
        ("SKED_ATTEMPT".to_string(), "1".to_string()),
    ];
    if let Some(tier) = resources {
        context.push(("SKED_RESOURCES".into(), tier.into()));
    }
    // A unique fencing token keeps RunTask's client token unique per test run.
    context.push(("SKED_FENCING_TOKEN".into(), unique("token")));
    ExecRequest {
        task,
        context,
        grace: Dur::secs(1),
        lease_lost_grace: Dur::secs(1),
    }
}

/// Runs `request` to its end; the result and the output lines.
async fn run(executor: &EcsExecutor, request: ExecRequest) -> (ExecResult, Vec<LogLine>) {
    let (tx, mut rx) = mpsc::channel(16);
    let (_stop_tx, stop_rx) = watch::channel(None);
    let result = tokio::time::timeout(Duration::from_secs(30), executor.execute(request, tx, stop_rx))
        .await
        .expect("the task ends");
    let mut lines = Vec::new();
    while let Ok(l) = rx.try_recv() {
        lines.push(l);
    }
    (result, lines)
}

/// The task ARN named by the executor's output line.
fn task_arn(lines: &[LogLine]) -> String {
    let line = &lines.first().expect("an output line").line;
    assert!(line.starts_with("[sked] ECS task arn:aws:ecs:"), "{line}");
    line.split_whitespace().nth(3).unwrap().to_string()
}

async fn describe(clients: &AwsClients, config: &AwsConfig, arn: &str) -> aws_sdk_ecs::types::Task {
    let out = clients
        .ecs
        .describe_tasks()
        .cluster(&ecs_config(config).cluster)
        .tasks(arn)
        .send()
        .await
        .unwrap();
    out.tasks()[0].clone()
}

#[tokio::test]
async fn a_container_task_runs_to_its_exit_code_with_command_and_environment() {
    let (clients, config) = fresh_ecs_on(moto()).await;
    let ecs = ecs_config(&config);
    let started = Instant::now();
    let (result, lines) = run(
        &executor(&clients, &config),
        request(container(&ecs.bootstrap_image, &["sh", "-c", "echo hi"]), None),
    )
    .await;
    let took = started.elapsed();
    assert!(result.success, "{result:?}");
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stopped, None);
    println!("RunTask to STOPPED on moto: {took:?}");

    // One line names the task and, the task definition logging with awslogs, its stream.
    assert_eq!(lines.len(), 1);
    let arn = task_arn(&lines);
    let task_id = arn.rsplit('/').next().unwrap();
    let logs = config.logs.as_ref().unwrap();
    assert!(
        lines[0]
            .line
            .ends_with(&format!("{} / ecs/main/{task_id}", logs.log_group)),
        "{}",
        lines[0].line
    );

    let task = describe(&clients, &config, &arn).await;
    assert_eq!(task.last_status(), Some("STOPPED"));
    assert_eq!(task.launch_type().map(|l| l.as_str()), Some("FARGATE"));
    let overrides = task.overrides().unwrap();
    // No tier in the context: the executor's default, small.
    assert_eq!((overrides.cpu(), overrides.memory()), (Some("256"), Some("512")));
    let c = &overrides.container_overrides()[0];
    assert_eq!(c.name(), Some("main"));
    assert_eq!(c.command(), ["sh", "-c", "echo hi"]);
    let env: BTreeMap<_, _> = c
        .environment()
        .iter()
        .map(|kv| (kv.name().unwrap(), kv.value().unwrap()))
        .collect();
    assert_eq!(env.get("GREETING"), Some(&"hello"));
    assert_eq!(env.get("SKED_RUN_ID"), Some(&"report@20261201T090000.000Z"));
    assert_eq!(env.get("SKED_ATTEMPT"), Some(&"1"));
    // On the configured task definition and network.
    assert!(
        task.task_definition_arn()
            .unwrap()
            .contains(&format!("task-definition/{}:", ecs.task_definition)),
        "{:?}",
        task.task_definition_arn()
    );
    let subnet = task.attachments()[0]
        .details()
        .iter()
        .find(|d| d.name() == Some("subnetId"))
        .and_then(|d| d.value());
    assert_eq!(subnet, ecs.subnets.first().map(String::as_str));
}

#[tokio::test]
async fn resource_tiers_become_task_level_cpu_and_memory_overrides() {
    let (clients, config) = fresh_ecs_on(moto()).await;
    let executor = executor(&clients, &config);
    let image = ecs_config(&config).bootstrap_image;
    for (tier, cpu, memory) in [
        ("small", "256", "512"),
        ("medium", "512", "1024"),
        ("large", "1024", "2048"),
        ("xlarge", "2048", "4096"),
    ] {
        let (result, lines) = run(&executor, request(container(&image, &["true"]), Some(tier))).await;
        assert!(result.success, "{tier}: {result:?}");
        let task = describe(&clients, &config, &task_arn(&lines)).await;
        let o = task.overrides().unwrap();
        assert_eq!((o.cpu(), o.memory()), (Some(cpu), Some(memory)), "{tier}");
    }
}

#[tokio::test]
async fn another_image_runs_on_a_registered_copy_of_the_task_definition() {
    let (clients, config) = fresh_ecs_on(moto()).await;
    let executor = executor(&clients, &config);
    let family = ecs_config(&config).task_definition;
    let (result, lines) = run(&executor, request(container("alpine:3.20", &["true"]), None)).await;
    assert!(result.success, "{result:?}");
    let task = describe(&clients, &config, &task_arn(&lines)).await;
    let def_arn = task.task_definition_arn().unwrap().to_string();
    assert!(def_arn.contains(&format!("task-definition/{family}-img-")), "{def_arn}");
    let def = clients
        .ecs
        .describe_task_definition()
        .task_definition(&def_arn)
        .send()
        .await
        .unwrap()
        .task_definition
        .unwrap();
    assert_eq!(def.container_definitions()[0].image(), Some("alpine:3.20"));

    // The same image again (a new executor: a restarted worker) reuses that revision.
    let again = EcsExecutor::new(clients.ecs.clone(), ecs_config(&config), Arc::new(SystemClock));
    let (_, lines) = run(&again, request(container("alpine:3.20", &["true"]), None)).await;
    let task = describe(&clients, &config, &task_arn(&lines)).await;
    assert_eq!(task.task_definition_arn(), Some(def_arn.as_str()));
}

#[tokio::test]
async fn a_stop_signal_stops_the_task_with_stop_task() {
    let server = frozen();
    let (clients, config) = fresh_ecs_on(server).await;
    let executor = Arc::new(executor(&clients, &config));
    let image = ecs_config(&config).bootstrap_image;
    for reason in [StopReason::Timeout, StopReason::Cancelled, StopReason::LeaseLost] {
        let (tx, mut rx) = mpsc::channel(16);
        let (stop_tx, stop_rx) = watch::channel(None);
        let exec = executor.clone();
        let req = request(container(&image, &["sleep", "3600"]), None);
        let running = tokio::spawn(async move { exec.execute(req, tx, stop_rx).await });

        let line = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let arn = task_arn(&[line]);
        // Frozen: it stays RUNNING however often it is described.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(describe(&clients, &config, &arn).await.last_status(), Some("RUNNING"));
        assert!(!running.is_finished());

        stop_tx.send(Some(reason)).unwrap();
        let result = tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(result.stopped, Some(reason));
        assert!(!result.success);
        let task = describe(&clients, &config, &arn).await;
        assert_eq!(task.last_status(), Some("STOPPED"));
        let stopped_reason = task.stopped_reason().unwrap_or_default();
        assert!(stopped_reason.starts_with("sked: "), "{stopped_reason:?}");
        let expected = match reason {
            StopReason::Timeout => "timed out",
            StopReason::Cancelled => "cancelled",
            _ => "lease",
        };
        assert!(stopped_reason.contains(expected), "{stopped_reason:?}");
    }
}

#[tokio::test]
async fn a_dropped_execution_stops_its_task() {
    let server = frozen();
    let (clients, config) = fresh_ecs_on(server).await;
    let executor = Arc::new(executor(&clients, &config));
    let (tx, mut rx) = mpsc::channel(16);
    let (_stop_tx, stop_rx) = watch::channel(None);
    let exec = executor.clone();
    let req = request(
        container(&ecs_config(&config).bootstrap_image, &["sleep", "3600"]),
        None,
    );
    let running = tokio::spawn(async move { exec.execute(req, tx, stop_rx).await });
    let line = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let arn = task_arn(&[line]);
    running.abort();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let task = describe(&clients, &config, &arn).await;
        if task.last_status() == Some("STOPPED") {
            assert_eq!(task.stopped_reason(), Some("sked: the worker abandoned the attempt"));
            break;
        }
        assert!(Instant::now() < deadline, "not stopped after the future was dropped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stop_before_the_start_runs_nothing() {
    let (clients, config) = fresh_ecs_on(moto()).await;
    let (tx, _rx) = mpsc::channel(16);
    let (_stop_tx, stop_rx) = watch::channel(Some(StopReason::Cancelled));
    let req = request(container(&ecs_config(&config).bootstrap_image, &["true"]), None);
    let result = executor(&clients, &config).execute(req, tx, stop_rx).await;
    assert_eq!(result.stopped, Some(StopReason::Cancelled));
    let listed = clients
        .ecs
        .list_tasks()
        .cluster(&ecs_config(&config).cluster)
        .send()
        .await
        .unwrap();
    assert!(listed.task_arns().is_empty());
}

#[tokio::test]
async fn a_refused_run_task_is_a_failure_with_the_reason() {
    let (clients, mut config) = fresh_ecs_on(moto()).await;
    let image = ecs_config(&config).bootstrap_image;
    if let Some(ecs) = config.ecs.as_mut() {
        ecs.cluster = "no-such-cluster".into();
    }
    let (result, lines) = run(
        &executor(&clients, &config),
        request(container(&image, &["true"]), None),
    )
    .await;
    assert!(!result.success);
    assert!(lines.is_empty());
    let error = result.error.unwrap();
    assert!(
        error.starts_with("RunTask failed:") && error.contains("ClusterNotFoundException"),
        "{error}"
    );

    let (clients, mut config) = fresh_ecs_on(moto()).await;
    if let Some(ecs) = config.ecs.as_mut() {
        ecs.task_definition = "no-such-family".into();
    }
    let (result, _) = run(
        &executor(&clients, &config),
        request(container(&image, &["true"]), None),
    )
    .await;
    let error = result.error.unwrap();
    assert!(error.starts_with("no task definition for image"), "{error}");
}

#[tokio::test]
async fn other_task_kinds_are_refused() {
    let (clients, config) = fresh_ecs_on(moto()).await;
    let task = Task::Command(CommandTask {
        argv: vec!["true".into()],
        env: BTreeMap::new(),
        cwd: None,
    });
    let (result, lines) = run(&executor(&clients, &config), request(task, None)).await;
    assert!(!result.success);
    assert!(lines.is_empty());
    assert_eq!(
        result.error.as_deref(),
        Some("the ECS executor runs container tasks, not command tasks")
    );
}
