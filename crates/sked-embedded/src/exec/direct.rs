//! Starting a payload as a direct child of the worker, tied to it by the kernel's
//! parent-death signal (`PR_SET_PDEATHSIG(SIGKILL)`, Linux): if the worker is killed with
//! SIGKILL, the kernel kills the payload. Used where no spawner is configured (library use,
//! tests); `sked server` and `sked worker` use the spawner, which also ends grandchildren.
//!
//! The signal is tied to the *thread* that forked the child, not the process: the executor
//! must be awaited on a runtime worker thread (a plain `tokio::spawn`ed task, or the runtime's
//! main future), never inside `spawn_blocking` or on a thread that may exit before the payload
//! does, or the payload is killed when that thread ends. Tokio's runtime worker threads live
//! as long as the runtime. Setting the signal needs a `pre_exec` closure, so std forks the
//! whole worker process for each payload (no `posix_spawn`): fine for tests, slow for a busy
//! worker (see "Payloads start through a spawner process" in BENCHMARKS.md).
//!
//! What it must not do: outlive the payload's start (the executor owns the running payload).

use super::payload::{End, OutputPipes, Payload};
use sked_core::task::CommandTask;
use std::io;
use std::process::Stdio;
use tokio::process::Command;

/// Starts `task` with `context` on top of its environment, in a process group of its own.
pub fn start(task: &CommandTask, context: &[(String, String)]) -> io::Result<Payload> {
    let Some((program, args)) = task.argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    };
    let pipes = OutputPipes::new()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(sked_core::secret::payload_vars(&task.env))
        .envs(context.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(pipes.stdout_writer)
        .stderr(pipes.stderr_writer)
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &task.cwd {
        command.current_dir(cwd);
    }
    tie_to_parent(&mut command);
    let child = command.spawn()?;
    // With process_group(0) the group id is the child's pid.
    let pgid = child.id().map_or(0, |pid| pid as i32);
    Ok(Payload {
        pgid,
        stdout: pipes.stdout,
        stderr: pipes.stderr,
        end: End::Child(child),
    })
}

/// Makes the kernel SIGKILL the child when the thread that spawned it dies, closing the race
/// where the worker died between fork and prctl.
#[allow(unsafe_code)]
fn tie_to_parent(command: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl, getppid) and
    // builds `io::Error`s from raw OS codes, which allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
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
