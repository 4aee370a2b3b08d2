//! The process executor: runs a `command` task as a child process of the worker.
//!
//! What it owns: spawning argv directly (no shell), the environment (`worker env` + task env +
//! the `SKED_*` context, later ones winning), capturing stdout and stderr line by line, stopping
//! the payload (TERM to its process group, `grace`, KILL), and describing how it ended.
//!
//! How a payload stays tied to its worker:
//! - **Own process group** (`process_group(0)`): stops and clean-up signal the whole group, so
//!   `sh -c 'a | b'` or a script's background children go too. After the main process exits,
//!   whatever is left of its group is killed: an attempt ends when its process does, and nothing
//!   of it runs on beside a retry. (A descendant that moves itself to another group or session
//!   escapes this; it still has its own parent-death signal only if it set one.)
//! - **Parent-death signal** (`PR_SET_PDEATHSIG(SIGKILL)`, Linux): if the worker is killed with
//!   SIGKILL, the kernel kills the child. The signal is tied to the *thread* that forked the child,
//!   not the process: [`ProcessExecutor::execute`] must be awaited on a runtime worker thread (a
//!   plain `tokio::spawn`ed task, or the runtime's main future), never inside `spawn_blocking` or
//!   on a thread that may exit before the payload does, or the payload is killed when that thread
//!   ends. Tokio's runtime worker threads live as long as the runtime.
//! - **Guard** (optional, [`ProcessExecutor::with_guard`], on in `sked server`/`sked worker`):
//!   the parent-death signal reaches only the direct child, so the payload runs under a guard
//!   process that kills the whole group when the worker dies (see [`super::guard`]).
//! - **kill_on_drop**: if the `execute` future is dropped, the child is killed and, through a
//!   guard, its whole group.
//!
//! What it must not do: decide retries or timeouts (the worker does), or read the system time
//! (line timestamps come from the injected [`Clock`]).

use super::guard::GUARD_DEATH_SIGNAL;
use super::lines::LineSplitter;
use super::wait_for_stop;
use async_trait::async_trait;
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{CommandTask, Task};
use sked_core::timestamp;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The binary's hidden subcommand that runs [`super::guard::guard_main`].
pub const GUARD_SUBCOMMAND: &str = "__guard";

/// How long the output readers may keep reading after the payload's process group is gone:
/// enough to drain the pipes, short enough that an escaped descendant holding a pipe open
/// cannot keep the attempt alive.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(500);

/// Runs `command` tasks as child processes. See the module header for how they are tied to
/// the worker.
pub struct ProcessExecutor {
    /// Stamps output lines.
    clock: Arc<dyn Clock>,
    /// The `sked` binary, to start each payload under a guard (see [`super::guard`]).
    guard: Option<PathBuf>,
    /// Longest wait for the output readers after the process group is gone.
    drain: Duration,
}

impl ProcessExecutor {
    /// A process executor stamping lines with `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        ProcessExecutor {
            clock,
            guard: None,
            drain: DEFAULT_DRAIN,
        }
    }

    /// Starts every payload under a guard run as `<sked_binary> __guard <worker pid> <argv…>`,
    /// so a worker killed with SIGKILL takes the payload's grandchildren with it too.
    pub fn with_guard(mut self, sked_binary: PathBuf) -> Self {
        self.guard = Some(sked_binary);
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

        let mut command = match &self.guard {
            Some(guard) => {
                let mut command = Command::new(guard);
                command
                    .arg(GUARD_SUBCOMMAND)
                    .arg(std::process::id().to_string())
                    .args(&task.argv);
                command
            }
            None => {
                let mut command = Command::new(program);
                command.args(&task.argv[1..]);
                command
            }
        };
        command
            .envs(&task.env)
            .envs(request.context.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &task.cwd {
            command.current_dir(cwd);
        }
        let death_signal = if self.guard.is_some() {
            GUARD_DEATH_SIGNAL
        } else {
            libc::SIGKILL
        };
        tie_to_parent(&mut command, death_signal);

        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                return failure(match &task.cwd {
                    Some(cwd) => format!("failed to start `{program}` in `{cwd}`: {e}"),
                    None => format!("failed to start `{program}`: {e}"),
                });
            }
        };
        // With process_group(0) the group id is the child's pid.
        let (cut, cut_rx) = watch::channel(false);
        let mut group = GroupGuard {
            pgid: child.id().map(|pid| pid as libc::pid_t),
            readers: Vec::new(),
            cut,
        };
        if let Some(out) = child.stdout.take() {
            let pump = pump(
                out,
                LogStream::Stdout,
                self.clock.clone(),
                output.clone(),
                cut_rx.clone(),
            );
            group.readers.push(tokio::spawn(pump));
        }
        if let Some(err) = child.stderr.take() {
            group.readers.push(tokio::spawn(pump(
                err,
                LogStream::Stderr,
                self.clock.clone(),
                output,
                cut_rx,
            )));
        }

        let ended = tokio::select! {
            status = child.wait() => Ended::Exited(status),
            reason = wait_for_stop(&mut stop) => Ended::StopAsked(reason),
        };
        let (status, stopped) = match ended {
            Ended::Exited(status) => (status, None),
            Ended::StopAsked(reason) => (terminate(&mut child, &group, request.grace.0).await, Some(reason)),
        };
        // Whatever is left of the group (background children) ends with the payload.
        group.kill(libc::SIGKILL);
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
async fn terminate(child: &mut Child, group: &GroupGuard, grace: Duration) -> std::io::Result<ExitStatus> {
    group.kill(libc::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            group.kill(libc::SIGKILL);
            child.wait().await
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

/// The payload's process group and its output readers: kills the group and stops the readers
/// when dropped, so a cancelled `execute` leaves nothing behind.
struct GroupGuard {
    /// The group to signal; `None` once it must not be signalled any more.
    pgid: Option<libc::pid_t>,
    /// The stdout and stderr readers.
    readers: Vec<JoinHandle<()>>,
    /// Tells the readers to stop reading (they still send what they have).
    cut: watch::Sender<bool>,
}

impl GroupGuard {
    /// Sends `signal` to every process of the group (a group already gone is fine).
    fn kill(&self, signal: libc::c_int) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, signal);
        }
    }

    /// Gives the readers up to `limit` to reach the end of their pipes (a descendant that
    /// escaped the group may hold them open), then cuts them off and waits for them to hand
    /// over what they read. The group is not signalled after this: once empty, its id may be
    /// reused.
    async fn drain(&mut self, limit: Duration) {
        let mut readers = std::pin::pin!(futures::future::join_all(self.readers.iter_mut()));
        if tokio::time::timeout(limit, &mut readers).await.is_err() {
            tracing::debug!("payload output still open after it ended; stopped reading");
            let _ = self.cut.send(true);
            readers.await;
        }
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill(libc::SIGKILL);
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// `killpg(pgid, signal)`, ignoring "no such group".
fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    if pgid <= 1 {
        return; // never signal "every process" or init's group by mistake
    }
    // SAFETY: killpg takes plain integers and touches no memory of ours.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::killpg(pgid, signal) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, signal, error = %err, "failed to signal the payload's process group");
        }
    }
}

/// Makes the kernel SIGKILL the child when the thread that spawned it dies (Linux
/// `PR_SET_PDEATHSIG`), closing the race where the worker died between fork and prctl.
#[allow(unsafe_code)]
fn tie_to_parent(command: &mut Command, death_signal: libc::c_int) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl, getppid) and
    // builds `io::Error`s from raw OS codes, which allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before prctl took effect: do not run unattended.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
