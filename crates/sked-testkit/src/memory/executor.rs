//! [`FakeExecutor`]: a scripted [`Executor`] for service tests.
//!
//! It interprets a command task's argv instead of starting a process:
//!
//! | argv | behaviour |
//! |---|---|
//! | `["ok"]` | exits 0 |
//! | `["fail", "<code>"]` | exits with `code` |
//! | `["print", "a", "err:b", …]` | prints each line (stdout; `err:` prefix → stderr), exits 0 |
//! | `["hang"]` | runs until a stop is asked for |
//! | `["sleep", "<ms>"]` | waits `ms` on the injected clock (stop still honoured), exits 0 |
//!
//! Anything else fails to start; http and container tasks fail with a message. Every call is
//! recorded (request and context) for assertions. The records sit behind a std `Mutex`,
//! never held across an `.await`. It must not start processes or touch the network.

use async_trait::async_trait;
use sked_core::ports::Clock;
use sked_core::ports::executor::{ExecRequest, ExecResult, Executor, StopReason};
use sked_core::ports::logs::{LogLine, LogStream};
use sked_core::task::Task;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};

/// An executor that plays scripted commands against an injected clock.
pub struct FakeExecutor {
    /// Time for `sleep` and for output timestamps.
    clock: Arc<dyn Clock>,
    /// Every request received, oldest first.
    requests: Mutex<Vec<ExecRequest>>,
}

impl FakeExecutor {
    /// A fake executor timed by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        FakeExecutor {
            clock,
            requests: Mutex::new(Vec::new()),
        }
    }

    /// How many times `execute` was called.
    pub fn calls(&self) -> usize {
        self.lock().len()
    }

    /// Every request received, oldest first.
    pub fn requests(&self) -> Vec<ExecRequest> {
        self.lock().clone()
    }

    /// The `context` (the `SKED_*` variables) of every call, oldest first.
    pub fn contexts(&self) -> Vec<Vec<(String, String)>> {
        self.lock().iter().map(|r| r.context.clone()).collect()
    }

    /// The value of `name` in the context of the latest call, if any.
    pub fn last_context_var(&self, name: &str) -> Option<String> {
        self.lock()
            .last()?
            .context
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<ExecRequest>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn print(&self, lines: &[String], output: &mpsc::Sender<LogLine>) {
        for l in lines {
            let (stream, text) = match l.strip_prefix("err:") {
                Some(rest) => (LogStream::Stderr, rest),
                None => (LogStream::Stdout, l.as_str()),
            };
            // A closed receiver means nobody wants the output; the payload carries on.
            let _ = output
                .send(LogLine {
                    ts: self.clock.now(),
                    stream,
                    line: text.to_string(),
                })
                .await;
        }
    }
}

fn exited(code: i32) -> ExecResult {
    ExecResult {
        success: code == 0,
        exit_code: Some(code),
        error: (code != 0).then(|| format!("exited with code {code}")),
        ..Default::default()
    }
}

fn failed(error: impl Into<String>) -> ExecResult {
    ExecResult {
        success: false,
        error: Some(error.into()),
        ..Default::default()
    }
}

fn stopped(reason: StopReason) -> ExecResult {
    ExecResult {
        success: false,
        error: Some(format!("stopped: {reason:?}")),
        stopped: Some(reason),
        ..Default::default()
    }
}

/// Waits for a stop request; pends forever if the sender is gone (no stop can come).
async fn stop_requested(stop: &mut watch::Receiver<Option<StopReason>>) -> StopReason {
    // Copy the reason out at once: the watch guard must not live across an await.
    let asked = stop
        .wait_for(Option::is_some)
        .await
        .map(|reason| reason.unwrap_or(StopReason::Shutdown));
    match asked {
        Ok(reason) => reason,
        Err(_) => std::future::pending().await,
    }
}

#[async_trait]
impl Executor for FakeExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        mut stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        self.lock().push(request.clone());
        let argv = match &request.task {
            Task::Command(c) => c.argv.clone(),
            other => return failed(format!("fake executor: {} tasks are not supported", other.kind())),
        };
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["ok"] => exited(0),
            ["fail", code] => match code.parse() {
                Ok(code) => exited(code),
                Err(_) => failed(format!("fake executor: bad exit code {code:?}")),
            },
            ["print", ..] => {
                self.print(&argv[1..], &output).await;
                exited(0)
            }
            ["hang"] => stopped(stop_requested(&mut stop).await),
            ["sleep", ms] => {
                let Ok(ms) = ms.parse::<i64>() else {
                    return failed(format!("fake executor: bad sleep {ms:?}"));
                };
                let deadline = self.clock.now() + chrono::Duration::milliseconds(ms);
                // `biased`: a stop asked for at the instant the sleep ends wins, every time
                // (simulations replay byte for byte).
                tokio::select! {
                    biased;
                    reason = stop_requested(&mut stop) => stopped(reason),
                    _ = self.clock.sleep_until(deadline) => exited(0),
                }
            }
            _ => failed(format!("fake executor: failed to start {argv:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::contract::fixtures::t0;
    use sked_core::duration::Dur;
    use std::time::Duration;

    fn command(argv: &[&str]) -> ExecRequest {
        let task = serde_json::from_value(serde_json::json!({"command": {"argv": argv}})).unwrap();
        ExecRequest {
            task,
            context: vec![("SKED_RUN_ID".into(), "a@x".into())],
            grace: Dur::secs(1),
            lease_lost_grace: Dur::secs(1),
        }
    }

    struct Harness {
        clock: Arc<ManualClock>,
        exec: Arc<FakeExecutor>,
        stop: watch::Sender<Option<StopReason>>,
        rx: mpsc::Receiver<LogLine>,
        tx: mpsc::Sender<LogLine>,
    }

    fn harness() -> Harness {
        let clock = Arc::new(ManualClock::new(t0()));
        let (tx, rx) = mpsc::channel(16);
        Harness {
            exec: Arc::new(FakeExecutor::new(clock.clone())),
            clock,
            stop: watch::Sender::new(None),
            rx,
            tx,
        }
    }

    impl Harness {
        async fn run(&self, argv: &[&str]) -> ExecResult {
            self.exec
                .execute(command(argv), self.tx.clone(), self.stop.subscribe())
                .await
        }
        fn spawn(&self, argv: &[&str]) -> tokio::task::JoinHandle<ExecResult> {
            let (exec, req, tx, stop) = (self.exec.clone(), command(argv), self.tx.clone(), self.stop.subscribe());
            tokio::spawn(async move { exec.execute(req, tx, stop).await })
        }
    }

    #[tokio::test]
    async fn ok_and_fail() {
        let h = harness();
        assert_eq!(
            h.run(&["ok"]).await,
            ExecResult {
                success: true,
                exit_code: Some(0),
                ..Default::default()
            }
        );
        let r = h.run(&["fail", "3"]).await;
        assert_eq!((r.success, r.exit_code, r.stopped), (false, Some(3), None));
        assert!(r.error.is_some());
        let r = h.run(&["nonsense"]).await;
        assert_eq!((r.success, r.exit_code), (false, None));
        assert_eq!(h.exec.calls(), 3);
        assert_eq!(h.exec.last_context_var("SKED_RUN_ID").as_deref(), Some("a@x"));
        assert_eq!(h.exec.contexts().len(), 3);
    }

    #[tokio::test]
    async fn print_streams_lines() {
        let mut h = harness();
        assert!(h.run(&["print", "a", "err:b"]).await.success);
        let a = h.rx.recv().await.unwrap();
        let b = h.rx.recv().await.unwrap();
        assert_eq!((a.stream, a.line.as_str(), a.ts), (LogStream::Stdout, "a", t0()));
        assert_eq!((b.stream, b.line.as_str()), (LogStream::Stderr, "b"));
    }

    #[tokio::test]
    async fn hang_ends_on_stop() {
        let h = harness();
        let task = h.spawn(&["hang"]);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!task.is_finished());
        h.stop.send_replace(Some(StopReason::Timeout));
        let r = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((r.success, r.stopped), (false, Some(StopReason::Timeout)));
    }

    #[tokio::test]
    async fn sleep_waits_on_the_clock_and_honours_stop() {
        let h = harness();
        let task = h.spawn(&["sleep", "5000"]);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!task.is_finished());
        h.clock.advance(Dur::secs(5));
        let r = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap()
            .unwrap();
        assert!(r.success);

        let task = h.spawn(&["sleep", "5000"]);
        tokio::time::sleep(Duration::from_millis(20)).await;
        h.stop.send_replace(Some(StopReason::Cancelled));
        let r = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.stopped, Some(StopReason::Cancelled));
    }

    #[tokio::test]
    async fn http_and_container_tasks_fail_with_a_message() {
        let h = harness();
        for task in [
            serde_json::json!({"http": {"url": "http://127.0.0.1:1/"}}),
            serde_json::json!({"container": {"image": "alpine"}}),
        ] {
            let req = ExecRequest {
                task: serde_json::from_value(task).unwrap(),
                context: vec![],
                grace: Dur::secs(1),
                lease_lost_grace: Dur::secs(1),
            };
            let r = h.exec.execute(req, h.tx.clone(), h.stop.subscribe()).await;
            assert!(!r.success);
            assert!(r.error.unwrap().contains("not supported"));
        }
    }
}
