//! The process executor: runs a `command` task as a process tied to its worker.
//!
//! What it owns: spawning argv directly (no shell), the environment (`worker env` + task env +
//! the `SKED_*` context, later ones winning), capturing stdout and stderr line by line, stopping
//! the payload (TERM to its process group, `grace`, KILL), and describing how it ended.
//!
//! How a payload stays tied to its worker:
//! - **Own process group**: stops and clean-up signal the whole group, so `sh -c 'a | b'` or a
//!   script's background children go too. After the main process exits, whatever is left of
//!   its group is killed: an attempt ends when its process does, and nothing of it runs on
//!   beside a retry. (A descendant that moves itself to another group or session escapes this.)
//! - **Spawner** ([`ProcessExecutor::with_spawner`], on in `sked server`/`sked worker`): payloads
//!   are started by a helper process that kills every payload's whole group when the worker
//!   dies, even by SIGKILL (see [`super::spawner`]). It is also what makes starting cheap.
//! - Without a spawner, payloads are direct children with a parent-death signal, which ends
//!   the payload but not its own children (see [`super::direct`]).
//! - **Cancellation**: if the `execute` future is dropped, the payload's group is killed.
//!
//! What it must not do: decide retries or timeouts (the worker does), or read the system time
//! (line timestamps come from the injected [`Clock`]).

use super::group::signal_group;
use super::lines::LineSplitter;
use super::payload::{End, Payload};
use super::spawner::Spawner;
use super::{direct, wait_for_stop};
use async_trait::async_trait;
use rustix::process::Signal;
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{CommandTask, Task};
use sked_core::timestamp;
use std::io::PipeReader;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How long the output readers may keep reading after the payload's process group is gone:
/// enough to drain the pipes, short enough that an escaped descendant holding a pipe open
/// cannot keep the attempt alive.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(500);

/// Runs `command` tasks as child processes. See the module header for how they are tied to
/// the worker.
pub struct ProcessExecutor {
    /// Stamps output lines.
    clock: Arc<dyn Clock>,
    /// Starts payloads, where configured (see [`super::spawner`]); else they start directly.
    spawner: Option<Spawner>,
    /// Longest wait for the output readers after the process group is gone.
    drain: Duration,
}

impl ProcessExecutor {
    /// A process executor stamping lines with `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        ProcessExecutor {
            clock,
            spawner: None,
            drain: DEFAULT_DRAIN,
        }
    }

    /// Starts every payload through `spawner`, so a worker killed with SIGKILL takes the
    /// payload's grandchildren with it too, and no payload start forks the worker.
    pub fn with_spawner(mut self, spawner: Spawner) -> Self {
        self.spawner = Some(spawner);
        self
    }

    /// Changes how long output is still read after the payload ended (default [`DEFAULT_DRAIN`]).
    pub fn with_drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Runs one command task; see [`Executor::execute`].
    async fn run(
        &self,
        task: &CommandTask,
        request: &ExecRequest,
        output: mpsc::Sender<LogLine>,
        mut stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        let Some(program) = task.argv.first() else {
            return failure("command task has an empty argv".into());
        };
        // A stop asked for before the start: do not start at all.
        if let Some(reason) = *stop.borrow_and_update() {
            return ExecResult {
                stopped: Some(reason),
                error: Some("stopped before it started".into()),
                ..Default::default()
            };
        }

        let started = match &self.spawner {
            Some(spawner) => spawner.start(task, &request.context).await.map_err(|e| e.to_string()),
            None => direct::start(task, &request.context).map_err(|e| e.to_string()),
        };
        let Payload {
            pgid,
            stdout,
            stderr,
            end: mut payload,
        } = match started {
            Ok(payload) => payload,
            Err(e) => {
                return failure(match &task.cwd {
                    Some(cwd) => format!("failed to start `{program}` in `{cwd}`: {e}"),
                    None => format!("failed to start `{program}`: {e}"),
                });
            }
        };
        let (cut, cut_rx) = watch::channel(false);
        let stdout = pump(
            stdout,
            LogStream::Stdout,
            self.clock.clone(),
            output.clone(),
            cut_rx.clone(),
        );
        let stderr = pump(stderr, LogStream::Stderr, self.clock.clone(), output, cut_rx);
        let mut group = GroupGuard {
            pgid: Some(pgid),
            // One task reads both pipes.
            reader: tokio::spawn(async move {
                tokio::join!(stdout, stderr);
            }),
            cut,
        };

        let ended = tokio::select! {
            status = payload.wait() => Ended::Exited(status),
            reason = wait_for_stop(&mut stop) => Ended::StopAsked(reason),
        };
        let (status, stopped) = match ended {
            Ended::Exited(status) => (status, None),
            Ended::StopAsked(reason) => (
                terminate(&mut payload, &group, request.grace_for(reason).0).await,
                Some(reason),
            ),
        };
        // Whatever is left of the group (background children) ends with the payload.
        if !payload.group_ended_with_it() {
            group.kill(Signal::KILL);
        }
        group.drain(self.drain).await;

        let mut result = match status {
            Ok(status) => ExecResult {
                success: status.success(),
                exit_code: status.code(),
                error: (!status.success()).then(|| describe(status)),
                ..Default::default()
            },
            Err(e) => failure(format!("failed to wait for `{program}`: {e}")),
        };
        if stopped.is_some() {
            result.success = false;
            result.stopped = stopped;
        }
        result
    }
}

#[async_trait]
impl Executor for ProcessExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        match &request.task {
            Task::Command(task) => self.run(task, &request, output, stop).await,
            other => failure(format!(
                "the process executor runs command tasks, not {} tasks",
                other.kind()
            )),
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

/// How a process ended, in words: `exit status 3`, `killed by signal 9`.
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => format!("ended with {status}"),
    }
}

/// The polite stop: TERM to the group, up to `grace` for the child to exit, then KILL.
async fn terminate(payload: &mut End, group: &GroupGuard, grace: Duration) -> std::io::Result<ExitStatus> {
    group.kill(Signal::TERM);
    match tokio::time::timeout(grace, payload.wait()).await {
        Ok(status) => status,
        Err(_) => {
            group.kill(Signal::KILL);
            payload.wait().await
        }
    }
}

/// Why the wait for the payload ended.
enum Ended {
    /// The main process exited (or waiting for it failed).
    Exited(std::io::Result<ExitStatus>),
    /// A stop was asked for.
    StopAsked(StopReason),
}

/// Reads one pipe to its end (or until `cut` turns true), sending each line (stamped by
/// `clock`) to `output`. Keeps reading when `output` is closed, so the payload never blocks
/// on a full pipe; when `output` is full it waits (the consumer sets the pace).
async fn pump(
    pipe: PipeReader,
    stream: LogStream,
    clock: Arc<dyn Clock>,
    output: mpsc::Sender<LogLine>,
    cut: watch::Receiver<bool>,
) {
    match pipe::Receiver::from_owned_fd(OwnedFd::from(pipe)) {
        Ok(pipe) => pump_lines(pipe, stream, clock, output, cut).await,
        // Dropping the read end: the payload's writes fail rather than block.
        Err(e) => tracing::warn!(error = %e, ?stream, "cannot read the payload's output"),
    }
}

/// [`pump`] on a readable pipe.
async fn pump_lines(
    mut pipe: impl AsyncRead + Unpin,
    stream: LogStream,
    clock: Arc<dyn Clock>,
    output: mpsc::Sender<LogLine>,
    mut cut: watch::Receiver<bool>,
) {
    let mut splitter = LineSplitter::default();
    let mut buf = vec![0u8; 16 * 1024];
    let mut lines = Vec::new();
    loop {
        let read = tokio::select! {
            biased;
            read = pipe.read(&mut buf) => read,
            // Only ever changes to true; a dropped sender means the same.
            _ = cut.changed() => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        splitter.feed(&buf[..n], |line| lines.push(line));
        send(&mut lines, stream, &*clock, &output).await;
    }
    splitter.finish(|line| lines.push(line));
    send(&mut lines, stream, &*clock, &output).await;
}

/// Stamps and sends the lines collected so far (dropping them if nobody listens).
async fn send(lines: &mut Vec<String>, stream: LogStream, clock: &dyn Clock, output: &mpsc::Sender<LogLine>) {
    if lines.is_empty() {
        return;
    }
    let ts = timestamp::trunc_ms(clock.now());
    for line in lines.drain(..) {
        if output.is_closed() {
            continue;
        }
        let _ = output.send(LogLine { ts, stream, line }).await;
    }
}

/// The payload's process group and its output reader: kills the group and stops the reader
/// when dropped, so a cancelled `execute` leaves nothing behind.
struct GroupGuard {
    /// The group to signal; `None` once it must not be signalled any more.
    pgid: Option<i32>,
    /// Reads stdout and stderr.
    reader: JoinHandle<()>,
    /// Tells the reader to stop reading (it still sends what it has).
    cut: watch::Sender<bool>,
}

impl GroupGuard {
    /// Sends `signal` to every process of the group (a group already gone is fine).
    fn kill(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, signal);
        }
    }

    /// Gives the reader up to `limit` to reach the end of both pipes (a descendant that
    /// escaped the group may hold them open), then cuts it off and waits for it to hand over
    /// what it read. The group is not signalled after this: once empty, its id may be reused.
    async fn drain(&mut self, limit: Duration) {
        if tokio::time::timeout(limit, &mut self.reader).await.is_err() {
            tracing::debug!("payload output still open after it ended; stopped reading");
            let _ = self.cut.send(true);
            let _ = (&mut self.reader).await;
        }
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill(Signal::KILL);
        self.reader.abort();
    }
}
