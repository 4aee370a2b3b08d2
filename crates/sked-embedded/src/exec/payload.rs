//! A started payload as the process executor sees it, however it was started: its process
//! group, the read ends of its stdout and stderr, and how to learn how it ended.
//!
//! What this module must not do: start or stop anything (see `direct` and `spawner`).

use std::io::{self, PipeReader, PipeWriter};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use tokio::sync::oneshot;

/// A running payload.
pub struct Payload {
    /// Its process group id (= the pid of its main process).
    pub pgid: i32,
    /// Read end of its stdout.
    pub stdout: PipeReader,
    /// Read end of its stderr.
    pub stderr: PipeReader,
    /// How its end becomes known.
    pub end: End,
}

/// How the executor learns that a payload ended.
pub enum End {
    /// A child of the worker (started directly): waited for here.
    Child(tokio::process::Child),
    /// A child of the spawner, which reaps it, SIGKILLs the rest of its group and sends the
    /// raw wait status.
    Reported(oneshot::Receiver<i32>),
}

impl End {
    /// Waits for the main process to end (may be called again after being cancelled).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            End::Child(child) => child.wait().await,
            End::Reported(status) => status
                .await
                .map(ExitStatus::from_raw)
                .map_err(|_| io::Error::other("the payload spawner ended")),
        }
    }

    /// Whether what was left of the group has already been killed when [`End::wait`] returns.
    pub fn group_ended_with_it(&self) -> bool {
        matches!(self, End::Reported(_))
    }
}

/// Fresh pipes for a payload's stdout and stderr (close-on-exec; the starter hands the write
/// ends to the payload as fds 1 and 2).
pub struct OutputPipes {
    /// Read end of stdout.
    pub stdout: PipeReader,
    /// Write end of stdout.
    pub stdout_writer: PipeWriter,
    /// Read end of stderr.
    pub stderr: PipeReader,
    /// Write end of stderr.
    pub stderr_writer: PipeWriter,
}

impl OutputPipes {
    /// Two new pipes.
    pub fn new() -> io::Result<Self> {
        let (stdout, stdout_writer) = std::io::pipe()?;
        let (stderr, stderr_writer) = std::io::pipe()?;
        Ok(OutputPipes {
            stdout,
            stdout_writer,
            stderr,
            stderr_writer,
        })
    }
}
