//! The spawner process (`sked __spawner`): starts payloads for one worker process and ends
//! them all when that worker dies.
//!
//! It is started once per worker process with its end of the socket as stdin, in its own
//! process group (a terminal's Ctrl-C is for the worker, which stops payloads itself). Then:
//! - [`SPAWN_THREADS`] threads take turns reading a [`SpawnRequest`] and start each payload with
//!   `posix_spawn` (std's `Command` without `pre_exec`): a process group of its own, stdin
//!   `/dev/null`, stdout and stderr the pipes the worker sent. They answer [`Reply::Started`]
//!   or [`Reply::Failed`]. Several, because `posix_spawn` holds its thread until the payload's
//!   exec is done (~0.3 ms here): one thread capped a worker at ~1,300 starts/s.
//! - the reaper thread waits for any child; when a payload ends it SIGKILLs what is left of
//!   the payload's group, then answers [`Reply::Exited`] with the raw wait status. An exit
//!   reaped before its starter recorded the pid is parked until then, so `Started` always
//!   comes first.
//! - end of file on the socket means the worker is gone (killed with SIGKILL included: the
//!   kernel closes its descriptors): every running payload's group gets SIGKILL and the
//!   spawner exits. Nothing of an attempt outlives its worker.
//!
//! What it must not do: stop payloads on its own account (the worker signals the groups it
//! was told about), or outlive its worker.

use super::wire::{self, Reply, SpawnRequest};
use crate::exec::group::signal_group;
use rustix::process::{Signal, WaitOptions};
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};

/// Threads starting payloads at once.
pub const SPAWN_THREADS: usize = 4;

/// Payloads started and not yet reported as ended.
#[derive(Default)]
struct Running {
    /// Request id by process id (= process group id), from the `Started` reply on.
    ids: HashMap<i32, u64>,
    /// Wait statuses of payloads reaped before their starter recorded them.
    early: HashMap<i32, i32>,
}

/// What the starting threads and the reaper share.
struct Shared {
    /// The socket's reading side: one thread reads a whole request at a time.
    requests: Mutex<UnixStream>,
    /// Held (shared) by each starter from its spawn until the pid is recorded; held alone by
    /// [`Shared::end_all_and_exit`], so no payload is between the two when it kills them all.
    spawning: RwLock<()>,
    /// Running payloads.
    running: Mutex<Running>,
    /// Wakes the reaper when a payload starts (with none, `wait` would fail at once).
    started: Condvar,
    /// The socket's writing side, one reply at a time.
    replies: Mutex<UnixStream>,
}

impl Shared {
    /// State around the socket on stdin.
    fn on_stdin() -> std::io::Result<Shared> {
        let socket = UnixStream::from(std::io::stdin().as_fd().try_clone_to_owned()?);
        Ok(Shared {
            replies: Mutex::new(socket.try_clone()?),
            requests: Mutex::new(socket),
            spawning: RwLock::new(()),
            running: Mutex::default(),
            started: Condvar::new(),
        })
    }

    /// Sends `reply`. An error means the worker is gone: the caller ends everything, once it
    /// holds no lock.
    fn send(&self, reply: &Reply) -> std::io::Result<()> {
        let mut socket = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        wire::write_reply(&mut *socket, reply)
    }

    /// Sends `reply`, or ends everything if the worker cannot be told. Call without locks.
    fn reply(&self, reply: &Reply) {
        if self.send(reply).is_err() {
            self.end_all_and_exit();
        }
    }

    /// SIGKILLs every running payload's group, then exits the process. Call without locks.
    fn end_all_and_exit(&self) -> ! {
        let _no_spawn_in_flight = self.spawning.write().unwrap_or_else(PoisonError::into_inner);
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for &pid in running.ids.keys() {
            signal_group(pid, Signal::KILL);
        }
        std::process::exit(0)
    }
}

/// Runs the spawner on the socket it was given as stdin; returns only on a broken start.
pub fn serve() -> i32 {
    match Shared::on_stdin() {
        Ok(shared) => {
            let shared = Arc::new(shared);
            let threads = (1..SPAWN_THREADS).map(|n| {
                let starter = shared.clone();
                std::thread::Builder::new()
                    .name(format!("sked-spawn-{n}"))
                    .spawn(move || start_requested(&starter))
            });
            let reaper = shared.clone();
            let reaper = std::thread::Builder::new()
                .name("sked-reaper".into())
                .spawn(move || reap(&reaper));
            if let Some(Err(e)) = threads.chain([reaper]).find(Result::is_err) {
                eprintln!("sked spawner: cannot start its threads: {e}");
                shared.end_all_and_exit();
            }
            start_requested(&shared)
        }
        Err(e) => {
            eprintln!("sked spawner: no socket to its worker on stdin: {e}");
            1
        }
    }
}

/// Reads requests and starts their payloads until the worker is gone, then ends everything.
fn start_requested(shared: &Shared) -> ! {
    loop {
        let received = {
            let socket = shared.requests.lock().unwrap_or_else(PoisonError::into_inner);
            wire::receive_request(&socket)
        };
        match received {
            Ok(Some((request, fds))) => start(shared, request, fds),
            Ok(None) => shared.end_all_and_exit(),
            Err(e) => {
                eprintln!("sked spawner: reading from the worker: {e}");
                shared.end_all_and_exit()
            }
        }
    }
}

/// Starts one payload and answers `Started` or `Failed` (and `Exited`, if it was that quick).
fn start(shared: &Shared, request: SpawnRequest, fds: Vec<OwnedFd>) {
    let id = request.id;
    let Ok([stdout, stderr]) = <[OwnedFd; wire::REQUEST_FDS]>::try_from(fds) else {
        let error = "the request came without the payload's stdout and stderr".into();
        return shared.reply(&Reply::Failed { id, error });
    };
    let Some((program, args)) = request.argv.split_first() else {
        let error = "empty argv".into();
        return shared.reply(&Reply::Failed { id, error });
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(request.env)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if let Some(cwd) = request.cwd {
        command.current_dir(cwd);
    }
    let spawning = shared.spawning.read().unwrap_or_else(PoisonError::into_inner);
    let spawned = command.spawn();
    // Our copies of the pipes' write ends must close, or the worker never reads their end.
    drop(command);
    let pid = match spawned {
        Ok(child) => child.id() as i32,
        Err(e) => {
            drop(spawning);
            return shared.reply(&Reply::Failed {
                id,
                error: e.to_string(),
            });
        }
    };
    let mut running = shared.running.lock().unwrap_or_else(PoisonError::into_inner);
    let mut sent = shared.send(&Reply::Started { id, pid });
    match running.early.remove(&pid) {
        Some(status) => sent = sent.and_then(|()| shared.send(&Reply::Exited { id, status })),
        None => {
            running.ids.insert(pid, id);
            shared.started.notify_one();
        }
    }
    drop(running);
    drop(spawning);
    if sent.is_err() {
        shared.end_all_and_exit();
    }
}

/// Reaps payloads as they end: kills the rest of each one's group, then reports the exit.
fn reap(shared: &Shared) {
    loop {
        {
            let running = shared.running.lock().unwrap_or_else(PoisonError::into_inner);
            let _running = shared
                .started
                .wait_while(running, |r| r.ids.is_empty())
                .unwrap_or_else(PoisonError::into_inner);
        }
        let (pid, status) = match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some(ended)) => ended,
            // Interrupted, or (never expected) no child although one is listed: try again.
            Ok(None) | Err(_) => continue,
        };
        let pid = pid.as_raw_nonzero().get();
        // At once, while the leader's id cannot have been reused by another group.
        signal_group(pid, Signal::KILL);
        let mut running = shared.running.lock().unwrap_or_else(PoisonError::into_inner);
        match running.ids.remove(&pid) {
            Some(id) => {
                drop(running);
                shared.reply(&Reply::Exited {
                    id,
                    status: status.as_raw(),
                });
            }
            // Its starter has not recorded it yet and will report both.
            None => {
                running.early.insert(pid, status.as_raw());
            }
        }
    }
}
