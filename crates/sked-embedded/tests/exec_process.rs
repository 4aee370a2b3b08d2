//! The process executor against real processes: output capture, environment, working
//! directory, exit statuses, stopping (TERM, grace, KILL) of the whole process group, and what
//! happens to payloads when their worker is killed. Every behaviour is checked both ways a
//! payload can start: directly, and through the spawner process (as `sked` runs them).

use sked_core::duration::Dur;
use sked_core::ports::{ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{CommandTask, Task};
use sked_core::timestamp;
use sked_embedded::exec::{ProcessExecutor, Spawner, TaskExecutor};
use sked_testkit::clock::ManualClock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(timestamp::parse("2026-12-01T09:00:00.250Z").unwrap()))
}

fn command(argv: &[&str]) -> CommandTask {
    CommandTask {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        cwd: None,
    }
}

fn sh(script: &str) -> CommandTask {
    command(&["sh", "-c", script])
}

fn request(task: CommandTask) -> ExecRequest {
    ExecRequest {
        task: Task::Command(task),
        context: context(),
        grace: Dur::millis(200),
        lease_lost_grace: Dur::millis(200),
    }
}

fn context() -> Vec<(String, String)> {
    [
        ("SKED_JOB_ID", "backup"),
        ("SKED_RUN_ID", "backup@20261201T090000.000Z"),
        ("SKED_ATTEMPT", "2"),
        ("SKED_SCHEDULED_FOR", "2026-12-01T09:00:00.000Z"),
        ("SKED_FENCING_TOKEN", "17"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// How payloads start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// As children of the test process, with a parent-death signal.
    Direct,
    /// Through a spawner process (this test binary, running `spawner_helper`).
    Spawner,
}

/// Both ways, each test runs with.
const HOW: [How; 2] = [How::Direct, How::Spawner];

/// Set in the environment of the spawner process (see `spawner_helper`).
const SPAWNER_ENV: &str = "SKED_TEST_SPAWNER";

/// Not a test on its own: when run as a spawner (see [`executor`]), serves its worker.
#[test]
fn spawner_helper() {
    if std::env::var_os(SPAWNER_ENV).is_some() {
        std::process::exit(sked_embedded::exec::spawner::serve());
    }
}

/// A process executor starting payloads `how`.
fn executor(how: How) -> ProcessExecutor {
    // Shown with the output of a failing test: which way it failed.
    eprintln!("payloads start: {how:?}");
    let executor = ProcessExecutor::new(clock());
    match how {
        How::Direct => executor,
        How::Spawner => executor.with_spawner(Spawner::new(|| {
            let mut command = std::process::Command::new(std::env::current_exe().unwrap());
            command
                .args(["--exact", "spawner_helper", "--nocapture", "--test-threads=1"])
                .env(SPAWNER_ENV, "1");
            command
        })),
    }
}

/// Runs `task` to its end with nobody asking for a stop; returns the result and all output.
async fn run(how: How, task: CommandTask) -> (ExecResult, Vec<LogLine>) {
    let executor = executor(how);
    let (output, mut lines) = mpsc::channel(1024);
    let (_stop, stop_rx) = watch::channel(None);
    // Collect while it runs: the executor waits when the channel is full.
    let collect = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(line) = lines.recv().await {
            all.push(line);
        }
        all
    });
    let result = executor.execute(request(task), output, stop_rx).await;
    (result, collect.await.unwrap())
}

fn texts(lines: &[LogLine], stream: LogStream) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l.stream == stream)
        .map(|l| l.line.as_str())
        .collect()
}

/// A payload started in the background, with its output channel and its stop switch.
struct Running {
    result: tokio::task::JoinHandle<ExecResult>,
    lines: mpsc::Receiver<LogLine>,
    stop: watch::Sender<Option<StopReason>>,
}

fn start(how: How, task: CommandTask, grace: Dur) -> Running {
    let executor = executor(how);
    let (output, lines) = mpsc::channel(1024);
    let (stop, stop_rx) = watch::channel(None);
    let request = ExecRequest {
        grace,
        lease_lost_grace: grace,
        ..request(task)
    };
    let result = tokio::spawn(async move { executor.execute(request, output, stop_rx).await });
    Running { result, lines, stop }
}

impl Running {
    /// The next line of output (the payload's way of saying it got somewhere).
    async fn line(&mut self) -> String {
        self.lines.recv().await.expect("payload ended before printing").line
    }
}

/// Whether process `pid` is gone (or a zombie nobody reaped: it runs no more).
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S ...`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Waits (up to 5 s: killing is asynchronous) for `pid` to be gone.
async fn assert_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !is_gone(pid) {
        assert!(Instant::now() < deadline, "process {pid} still runs");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn captures_stdout_and_stderr_in_order_with_clock_timestamps() {
    for how in HOW {
        let (result, lines) = run(how, sh("echo out1; echo err1 >&2; echo out2; printf 'err2' >&2")).await;
        assert_eq!(
            result,
            ExecResult {
                success: true,
                exit_code: Some(0),
                ..Default::default()
            }
        );
        assert_eq!(texts(&lines, LogStream::Stdout), ["out1", "out2"]);
        assert_eq!(texts(&lines, LogStream::Stderr), ["err1", "err2"]);
        let expected = clock().now();
        assert!(lines.iter().all(|l| l.ts == expected), "timestamps come from the clock");
    }
}

#[tokio::test]
async fn long_lines_are_split_and_invalid_utf8_replaced() {
    for how in HOW {
        let (result, lines) = run(
            how,
            sh("head -c 70000 /dev/zero | tr '\\0' a; echo; printf 'a\\377b\\n'"),
        )
        .await;
        assert!(result.success, "{result:?}");
        let out = texts(&lines, LogStream::Stdout);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].len(), 64 * 1024);
        assert_eq!(out[1].len(), 70000 - 64 * 1024);
        assert_eq!(out[2], "a\u{fffd}b");
    }
}

#[tokio::test]
async fn environment_has_the_context_and_the_task_env() {
    for how in HOW {
        let mut task = sh(
            "echo \"$SKED_JOB_ID|$SKED_RUN_ID|$SKED_ATTEMPT|$SKED_SCHEDULED_FOR|$SKED_FENCING_TOKEN|$GREETING|${PATH:+path}\"",
        );
        task.env.insert("GREETING".into(), "hello".into());
        // The context wins over a task that tries to set it.
        task.env.insert("SKED_ATTEMPT".into(), "99".into());
        let (result, lines) = run(how, task).await;
        assert!(result.success, "{result:?}");
        assert_eq!(
            texts(&lines, LogStream::Stdout),
            ["backup|backup@20261201T090000.000Z|2|2026-12-01T09:00:00.000Z|17|hello|path"]
        );
    }
}

#[tokio::test]
async fn runs_in_the_working_directory() {
    for how in HOW {
        let dir = tempfile::tempdir().unwrap();
        let mut task = command(&["pwd", "-P"]);
        task.cwd = Some(dir.path().to_str().unwrap().to_string());
        let (result, lines) = run(how, task).await;
        assert!(result.success, "{result:?}");
        let expected = dir.path().canonicalize().unwrap();
        assert_eq!(texts(&lines, LogStream::Stdout), [expected.to_str().unwrap()]);
    }
}

#[tokio::test]
async fn nonzero_exit_is_a_failure_with_its_status() {
    for how in HOW {
        let (result, _) = run(how, sh("exit 3")).await;
        assert_eq!(
            result,
            ExecResult {
                success: false,
                exit_code: Some(3),
                error: Some("exit status 3".into()),
                ..Default::default()
            }
        );
    }
}

#[tokio::test]
async fn death_by_signal_is_described() {
    for how in HOW {
        let (result, _) = run(how, sh("kill -9 $$")).await;
        assert!(!result.success);
        assert_eq!(result.exit_code, None);
        assert_eq!(result.error.as_deref(), Some("killed by signal 9"));
    }
}

#[tokio::test]
async fn a_missing_program_fails_to_start() {
    for how in HOW {
        let (result, lines) = run(how, command(&["sked-no-such-program", "x"])).await;
        assert!(!result.success);
        assert_eq!(result.exit_code, None);
        assert_eq!(
            result.error.as_deref(),
            Some("failed to start `sked-no-such-program`: No such file or directory (os error 2)")
        );
        assert!(lines.is_empty());
    }
}

#[tokio::test]
async fn a_missing_working_directory_fails_to_start() {
    for how in HOW {
        let mut task = command(&["true"]);
        task.cwd = Some("/sked/no/such/dir".into());
        let (result, _) = run(how, task).await;
        assert!(!result.success);
        assert!(
            result
                .error
                .as_deref()
                .unwrap()
                .starts_with("failed to start `true` in `/sked/no/such/dir`: "),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn stop_terminates_a_sleeping_payload_within_the_grace() {
    for how in HOW {
        let mut running = start(how, sh("echo started; exec sleep 30"), Dur::millis(200));
        assert_eq!(running.line().await, "started");
        let asked = Instant::now();
        running.stop.send(Some(StopReason::Timeout)).unwrap();
        let result = running.result.await.unwrap();
        assert!(asked.elapsed() < Duration::from_secs(1), "took {:?}", asked.elapsed());
        assert_eq!(result.stopped, Some(StopReason::Timeout));
        assert!(!result.success);
        assert_eq!(result.error.as_deref(), Some("killed by signal 15"));
    }
}

#[tokio::test]
async fn a_payload_ignoring_term_is_killed_after_the_grace() {
    for how in HOW {
        let mut running = start(how, sh("trap '' TERM; echo ready; sleep 30"), Dur::millis(200));
        assert_eq!(running.line().await, "ready");
        let asked = Instant::now();
        running.stop.send(Some(StopReason::Cancelled)).unwrap();
        let result = running.result.await.unwrap();
        let took = asked.elapsed();
        assert!(
            took >= Duration::from_millis(200),
            "KILL came before the grace ended: {took:?}"
        );
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert_eq!(result.stopped, Some(StopReason::Cancelled));
        assert_eq!(result.error.as_deref(), Some("killed by signal 9"));
    }
}

#[tokio::test]
async fn a_stop_before_the_start_runs_nothing() {
    for how in HOW {
        let executor = executor(how);
        let (output, _lines) = mpsc::channel(16);
        let (_stop, stop_rx) = watch::channel(Some(StopReason::Shutdown));
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let task = command(&["touch", marker.to_str().unwrap()]);
        let result = executor.execute(request(task), output, stop_rx).await;
        assert_eq!(result.stopped, Some(StopReason::Shutdown));
        assert!(!marker.exists());
    }
}

#[tokio::test]
async fn stop_reaches_grandchildren() {
    for how in HOW {
        let mut running = start(how, sh("sleep 30 & echo $!; wait"), Dur::millis(200));
        let grandchild: u32 = running.line().await.parse().unwrap();
        assert!(!is_gone(grandchild));
        running.stop.send(Some(StopReason::LeaseLost)).unwrap();
        let result = running.result.await.unwrap();
        assert_eq!(result.stopped, Some(StopReason::LeaseLost));
        assert_gone(grandchild).await;
    }
}

#[tokio::test]
async fn background_children_end_with_the_payload_and_do_not_hold_it_open() {
    for how in HOW {
        // The background sleep inherits stdout: without the group kill, reading would wait 30 s.
        let started = Instant::now();
        let (result, lines) = run(how, sh("sleep 30 & echo $!")).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert!(result.success, "{result:?}");
        let grandchild: u32 = texts(&lines, LogStream::Stdout)[0].parse().unwrap();
        assert_gone(grandchild).await;
    }
}

#[tokio::test]
async fn the_router_runs_commands_and_refuses_containers() {
    let executor = TaskExecutor::new(clock());
    let (output, mut lines) = mpsc::channel(16);
    let (_stop, stop_rx) = watch::channel(None);
    let result = executor
        .execute(request(command(&["echo", "routed"])), output, stop_rx.clone())
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(lines.recv().await.unwrap().line, "routed");

    let container = sked_core::task::ContainerTask {
        image: "busybox".into(),
        command: vec![],
        env: BTreeMap::new(),
    };
    let request = ExecRequest {
        task: Task::Container(container),
        context: context(),
        grace: Dur::millis(200),
        lease_lost_grace: Dur::millis(200),
    };
    let (output, _lines) = mpsc::channel(16);
    let result = executor.execute(request, output, stop_rx).await;
    assert!(!result.success);
    assert_eq!(
        result.error.as_deref(),
        Some("container tasks need the ECS executor of the AWS deployment")
    );
}

/// Set in the environment of the helper "worker" of the worker-killed tests: how it starts
/// its payload (`Direct` or `Spawner`).
const HELPER_ENV: &str = "SKED_TEST_WORKER_HELPER";

/// Not a test on its own: when run as the helper (see below), starts a payload that starts a
/// child of its own, prints both pids, and blocks until it is killed.
#[test]
fn worker_helper() {
    let how = match std::env::var(HELPER_ENV).as_deref() {
        Ok("Direct") => How::Direct,
        Ok("Spawner") => How::Spawner,
        _ => return,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // libtest prints "test worker_helper ... " before this; the pids follow a marker.
        let executor = executor(how);
        let (output, mut lines) = mpsc::channel(16);
        let (_stop, stop_rx) = watch::channel(None);
        let run = executor.execute(request(sh("sleep 30 & echo $$ $!; wait")), output, stop_rx);
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => panic!("the payload ended early"),
            line = lines.recv() => println!("PAYLOAD {}", line.unwrap().line),
        }
        run.await;
    });
}

/// Starts the helper worker with payloads starting `how`, SIGKILLs it once its payload runs,
/// and answers the pids of the payload and of the payload's own child.
fn kill_a_worker_mid_payload(how: How) -> (u32, u32) {
    use std::io::BufRead;
    // Run this test binary again as the "worker", only its helper test, with output shown.
    let mut worker = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker_helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, format!("{how:?}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(worker.stdout.take().unwrap());
    let (payload, child) = stdout
        .lines()
        .map(|l| l.unwrap())
        .find_map(|l| {
            let (_, pids) = l.split_once("PAYLOAD ")?;
            let (payload, child) = pids.trim().split_once(' ')?;
            Some((payload.parse().unwrap(), child.parse().unwrap()))
        })
        .expect("the helper printed its payload's pids");
    assert!(!is_gone(payload) && !is_gone(child));

    // SIGKILL: the worker runs no clean-up; the payload is in another process group.
    worker.kill().unwrap();
    worker.wait().unwrap();
    (payload, child)
}

/// Waits (up to 5 s) for `pid` to be gone, without a runtime.
fn wait_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !is_gone(pid) {
        assert!(Instant::now() < deadline, "{what} {pid} outlived its worker");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_worker_killed_with_sigkill_takes_its_direct_payload_along() {
    let (payload, child) = kill_a_worker_mid_payload(How::Direct);
    wait_gone(payload, "payload");
    // The parent-death signal reaches the direct child only (why `sked` uses the spawner).
    kill_leftover(child);
}

#[test]
fn a_worker_killed_with_sigkill_takes_its_spawned_payload_and_its_children_along() {
    let (payload, child) = kill_a_worker_mid_payload(How::Spawner);
    wait_gone(payload, "payload");
    wait_gone(child, "the payload's child");
}

/// Ends a leftover process of a test.
fn kill_leftover(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

#[tokio::test]
async fn a_dead_spawner_fails_its_runs_kills_their_payloads_and_is_replaced() {
    let executor = Arc::new(executor(How::Spawner));
    let (output, mut lines) = mpsc::channel(16);
    let (_stop, stop_rx) = watch::channel(None);
    // The payload's parent is the spawner.
    let task = sh("echo $PPID $$; exec sleep 30");
    let running = {
        let executor = executor.clone();
        tokio::spawn(async move { executor.execute(request(task), output, stop_rx).await })
    };
    let line = lines.recv().await.unwrap().line;
    let (spawner, payload) = line.split_once(' ').unwrap();
    let (spawner, payload): (u32, u32) = (spawner.parse().unwrap(), payload.parse().unwrap());
    kill_leftover(spawner);

    let result = running.await.unwrap();
    assert!(!result.success);
    assert_eq!(
        result.error.as_deref(),
        Some("failed to wait for `sh`: the payload spawner ended"),
        "{result:?}"
    );
    assert_gone(payload).await;

    let (output, lines) = mpsc::channel(16);
    let (_stop, stop_rx) = watch::channel(None);
    let result = executor.execute(request(sh("echo $PPID")), output, stop_rx).await;
    assert!(result.success, "{result:?}");
    let new_spawner: u32 = collect(lines).await[0].line.parse().unwrap();
    assert_ne!(new_spawner, spawner);
}

/// Every line left in `lines` (its sender is gone).
async fn collect(mut lines: mpsc::Receiver<LogLine>) -> Vec<LogLine> {
    let mut all = Vec::new();
    while let Some(line) = lines.recv().await {
        all.push(line);
    }
    all
}
