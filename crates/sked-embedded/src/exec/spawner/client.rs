//! The worker's side of the spawner: [`Spawner`] starts the spawner process (again, if it
//! died), sends it spawn requests and hands each caller its payload's start and end.
//!
//! One connection = one spawner process and one socket. Requests are written under a mutex
//! (a blocking write of a few hundred bytes, which the spawner reads at once); a reader thread
//! dispatches replies to the waiting callers. If the spawner goes away, the reader kills the
//! groups of the payloads it had started (they would otherwise run on unwatched) and every
//! waiting caller gets an error; the next start begins a new spawner.
//!
//! What it must not do: block an async caller beyond that write, or leave a payload running
//! that nobody waits for (a caller that gave up before the start was reported is covered: the
//! reader kills that payload's group as soon as the start is reported).

use super::wire::{self, Reply, SpawnRequest};
use crate::exec::group::signal_group;
use crate::exec::payload::{End, OutputPipes, Payload};
use rustix::process::Signal;
use sked_core::task::CommandTask;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The hidden subcommand of the `sked` binary that runs [`super::serve`].
pub const SPAWNER_SUBCOMMAND: &str = "__spawner";

/// Why a payload could not be started through the spawner.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The spawner tried and the operating system refused (e.g. no such program).
    #[error("{0}")]
    Refused(String),
    /// The spawner could not be started or reached.
    #[error("payload spawner: {0}")]
    Io(#[from] io::Error),
    /// The spawner ended before it answered.
    #[error("the payload spawner ended before starting it")]
    Gone,
}

/// Starts payloads through a long-lived spawner process (see [`super`]).
pub struct Spawner {
    /// Builds the command that runs the spawner (`sked __spawner`).
    command: Box<dyn Fn() -> Command + Send + Sync>,
    /// The running spawner, once started.
    connection: Mutex<Option<Arc<Connection>>>,
}

impl Spawner {
    /// A spawner run by `command` (called again for each new spawner process), which must
    /// end up in [`super::serve`]. The spawner starts with the first payload.
    pub fn new(command: impl Fn() -> Command + Send + Sync + 'static) -> Self {
        Spawner {
            command: Box::new(command),
            connection: Mutex::new(None),
        }
    }

    /// A spawner run as `<sked_binary> __spawner`.
    pub fn sked(sked_binary: PathBuf) -> Self {
        Spawner::new(move || {
            let mut command = Command::new(&sked_binary);
            command.arg(SPAWNER_SUBCOMMAND);
            command
        })
    }

    /// Starts `task` with `context` on top of its environment; answers once it runs.
    pub(crate) async fn start(&self, task: &CommandTask, context: &[(String, String)]) -> Result<Payload, SpawnError> {
        let connection = self.connection()?;
        let pipes = OutputPipes::new()?;
        let (started, started_rx) = oneshot::channel();
        let (exited, exited_rx) = oneshot::channel();
        let id = connection.expect(Waiter {
            started: Some(started),
            exited,
            pgid: None,
        })?;
        let request = SpawnRequest {
            id,
            argv: task.argv.clone(),
            env: sked_core::secret::payload_vars(&task.env)
                .chain(context.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cwd: task.cwd.clone(),
        };
        let fds = [pipes.stdout_writer.as_fd(), pipes.stderr_writer.as_fd()];
        if let Err(e) = connection.send(&request, fds) {
            connection.forget(id);
            return Err(e.into());
        }
        // Only the payload may hold the write ends now, so its end is the pipes' end.
        drop((pipes.stdout_writer, pipes.stderr_writer));
        match started_rx.await {
            Ok(Ok(pgid)) => Ok(Payload {
                pgid,
                stdout: pipes.stdout,
                stderr: pipes.stderr,
                end: End::Reported(exited_rx),
            }),
            Ok(Err(error)) => Err(SpawnError::Refused(error)),
            Err(_) => Err(SpawnError::Gone),
        }
    }

    /// The live connection, or a new spawner if there is none or it went away.
    fn connection(&self) -> io::Result<Arc<Connection>> {
        let mut live = self.connection.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(connection) = live.as_ref().filter(|c| c.is_open()) {
            return Ok(connection.clone());
        }
        let connection = Arc::new(Connection::start((self.command)())?);
        *live = Some(connection.clone());
        Ok(connection)
    }
}

/// A caller waiting for its payload.
struct Waiter {
    /// Told the pid once it runs, or why it could not start.
    started: Option<oneshot::Sender<Result<i32, String>>>,
    /// Told the raw wait status when it ends.
    exited: oneshot::Sender<i32>,
    /// The payload's group, once started.
    pgid: Option<i32>,
}

/// The callers waiting on one spawner.
struct Waiting {
    /// False once the spawner is gone.
    open: bool,
    /// By request id.
    runs: HashMap<u64, Waiter>,
}

/// One spawner process and its socket.
struct Connection {
    /// The writing side; one request at a time.
    socket: Mutex<UnixStream>,
    /// Shared with the reply reader.
    waiting: Arc<Mutex<Waiting>>,
    /// The next request id.
    next_id: AtomicU64,
}

impl Connection {
    /// Runs `command` as a spawner with its end of a new socket as stdin, in its own process
    /// group, and starts the reply reader.
    fn start(mut command: Command) -> io::Result<Connection> {
        let (ours, theirs) = UnixStream::pair()?;
        let child = command
            .stdin(OwnedFd::from(theirs))
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        drop(command); // closes our copy of the spawner's end
        let waiting = Arc::new(Mutex::new(Waiting {
            open: true,
            runs: HashMap::new(),
        }));
        let reader = ours.try_clone()?;
        let shared = waiting.clone();
        std::thread::Builder::new()
            .name("sked-spawner-replies".into())
            .spawn(move || read_replies(reader, &shared, child))?;
        Ok(Connection {
            socket: Mutex::new(ours),
            waiting,
            next_id: AtomicU64::new(1),
        })
    }

    /// Whether the spawner is still there.
    fn is_open(&self) -> bool {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner).open
    }

    /// Registers `waiter` under a new request id.
    fn expect(&self, waiter: Waiter) -> Result<u64, SpawnError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if !waiting.open {
            return Err(SpawnError::Gone);
        }
        waiting.runs.insert(id, waiter);
        Ok(id)
    }

    /// Drops the waiter of a request that was never sent.
    fn forget(&self, id: u64) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .runs
            .remove(&id);
    }

    /// Sends one request with the payload's output pipes.
    fn send(&self, request: &SpawnRequest, fds: [std::os::fd::BorrowedFd<'_>; wire::REQUEST_FDS]) -> io::Result<()> {
        let socket = self.socket.lock().unwrap_or_else(PoisonError::into_inner);
        wire::send_request(&socket, request, fds)
    }
}

impl Drop for Connection {
    /// Closing the socket tells the spawner to end every payload and exit.
    fn drop(&mut self) {
        let socket = self.socket.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = socket.shutdown(std::net::Shutdown::Both);
    }
}

/// Dispatches replies until the spawner goes away; then kills the groups it had started,
/// fails every waiting caller and reaps the spawner.
fn read_replies(socket: UnixStream, waiting: &Mutex<Waiting>, mut spawner: Child) {
    // Replies often come several at once: one read takes them all.
    let mut replies = std::io::BufReader::new(&socket);
    loop {
        let reply = match wire::read_reply(&mut replies) {
            Ok(Some(reply)) => reply,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable reply from the payload spawner; restarting it");
                break;
            }
        };
        let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
        match reply {
            Reply::Started { id, pid } => {
                let Some(waiter) = waiting.runs.get_mut(&id) else {
                    continue;
                };
                waiter.pgid = Some(pid);
                let told = waiter
                    .started
                    .take()
                    .is_some_and(|started| started.send(Ok(pid)).is_ok());
                if !told {
                    // The caller gave up while it was starting: nobody will stop it.
                    signal_group(pid, Signal::KILL);
                }
            }
            Reply::Failed { id, error } => {
                if let Some(started) = waiting.runs.remove(&id).and_then(|w| w.started) {
                    let _ = started.send(Err(error));
                }
            }
            Reply::Exited { id, status } => {
                if let Some(waiter) = waiting.runs.remove(&id) {
                    let _ = waiter.exited.send(status);
                }
            }
        }
    }
    let orphans = {
        let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.open = false;
        std::mem::take(&mut waiting.runs)
    };
    if !orphans.is_empty() {
        tracing::warn!(
            payloads = orphans.len(),
            "the payload spawner ended; killing its payloads"
        );
    }
    for pgid in orphans.values().filter_map(|w| w.pgid) {
        signal_group(pgid, Signal::KILL);
    }
    let _ = socket.shutdown(std::net::Shutdown::Both);
    let _ = spawner.wait();
}
