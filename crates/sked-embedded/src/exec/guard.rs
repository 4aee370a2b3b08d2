//! The payload guard: a small process between a worker and its payload that takes the
//! payload's whole process group down when the worker dies, grandchildren included.
//!
//! Why: the kernel's parent-death signal (`PR_SET_PDEATHSIG`) reaches only the worker's direct
//! child and is reset on fork, so `sh -c 'a & b'` would leave `a` and `b` running beside the
//! retry of a worker killed with SIGKILL. With a guard, the chain is
//! `worker → guard (group leader) → payload → …`, all in one process group:
//!
//! - the guard's parent-death signal is [`GUARD_DEATH_SIGNAL`]; its handler SIGKILLs the
//!   whole group (itself included), so nothing of the attempt outlives the worker;
//! - a stop from the worker (SIGTERM to the group) is for the payload: the guard ignores it,
//!   waits for the payload and ends the way the payload ended (same exit code, or the same
//!   signal), so the executor reports what the payload did;
//! - a payload that cannot start makes the guard print why on stderr and exit 127.
//!
//! The binary exposes [`guard_main`] as a hidden subcommand; [`super::ProcessExecutor::with_guard`]
//! turns it on. What this module must not do: anything after the payload ends but report it.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};

/// The signal the kernel sends the guard when its worker dies.
pub const GUARD_DEATH_SIGNAL: libc::c_int = libc::SIGUSR1;

/// Exit code of a guard whose payload could not be started (as shells do).
pub const CANNOT_START: i32 = 127;

/// Kills the caller's own process group (the guard, the payload and all they started).
extern "C" fn kill_own_group(_signal: libc::c_int) {
    // SAFETY: killpg is async-signal-safe and takes plain integers.
    #[allow(unsafe_code)]
    unsafe {
        libc::killpg(0, libc::SIGKILL);
    }
}

/// Sets the disposition of `signal` (a handler address, `SIG_IGN` or `SIG_DFL`).
#[allow(unsafe_code)]
fn set_disposition(signal: libc::c_int, disposition: libc::sighandler_t) {
    // SAFETY: `signal` installs a disposition; handlers passed here are async-signal-safe.
    unsafe {
        libc::signal(signal, disposition);
    }
}

/// Runs the guard: `worker_pid` is the worker that started it, `argv` the payload. Returns
/// the exit code to end with (when the payload was killed by a signal, the guard kills itself
/// with that signal instead of returning).
pub fn guard_main(worker_pid: u32, argv: &[OsString]) -> i32 {
    set_disposition(GUARD_DEATH_SIGNAL, kill_own_group as *const () as libc::sighandler_t);
    // The parent-death signal is already set by the worker (inherited through exec); the
    // worker may have died before the handler above was installed.
    #[allow(unsafe_code)]
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    if parent as u32 != worker_pid {
        kill_own_group(GUARD_DEATH_SIGNAL);
    }
    set_disposition(libc::SIGTERM, libc::SIG_IGN);
    set_disposition(libc::SIGINT, libc::SIG_IGN);

    let Some((program, args)) = argv.split_first() else {
        eprintln!("sked guard: no payload to run");
        return CANNOT_START;
    };
    let mut payload = std::process::Command::new(program);
    payload.args(args);
    // SAFETY: between fork and exec the closure only resets signal dispositions (async-signal-
    // safe system calls); ignored signals would otherwise stay ignored in the payload.
    #[allow(unsafe_code)]
    unsafe {
        payload.pre_exec(|| {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(GUARD_DEATH_SIGNAL, libc::SIG_DFL);
            Ok(())
        });
    }
    let status = match payload.spawn().and_then(|mut child| child.wait()) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("failed to start `{}`: {e}", program.to_string_lossy());
            return CANNOT_START;
        }
    };
    if let Some(signal) = status.signal() {
        set_disposition(signal, libc::SIG_DFL);
        // SAFETY: raise has no preconditions; with the default disposition the guard ends
        // the way its payload did.
        #[allow(unsafe_code)]
        unsafe {
            libc::raise(signal);
        }
    }
    status.code().unwrap_or(CANNOT_START)
}
