//! The spawner's wire format, over one Unix stream socket between a worker and its spawner.
//!
//! Every message is a frame: a little-endian `u32` length, then that many bytes of JSON.
//! - worker → spawner: [`SpawnRequest`], with the payload's stdout and stderr write ends
//!   attached (`SCM_RIGHTS`) to the frame's first bytes;
//! - spawner → worker: [`Reply`] frames, no descriptors.
//!
//! What this module must not do: decide anything. It only moves messages and descriptors.

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Descriptors attached to a request: the payload's stdout and stderr.
pub const REQUEST_FDS: usize = 2;

/// Largest frame accepted (argv and environment of one payload; Linux allows 2 MiB of them).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Start one payload (worker → spawner).
#[derive(Debug, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// The worker's name for this payload, repeated in every reply about it.
    pub id: u64,
    /// Program and arguments (never empty).
    pub argv: Vec<String>,
    /// Variables set on top of the spawner's (= the worker's) environment, later ones winning.
    pub env: Vec<(String, String)>,
    /// Working directory, if not the spawner's.
    pub cwd: Option<String>,
}

/// What became of a payload (spawner → worker).
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Running as `pid`, which is also its process group id.
    Started {
        /// The request's id.
        id: u64,
        /// Process (and process group) id.
        pid: i32,
    },
    /// Could not be started.
    Failed {
        /// The request's id.
        id: u64,
        /// Why, as the operating system said it.
        error: String,
    },
    /// Ended; what is left of its group has been sent SIGKILL.
    Exited {
        /// The request's id.
        id: u64,
        /// The raw wait status (`ExitStatus::from_raw`).
        status: i32,
    },
}

/// The length prefix of a frame holding `body`.
fn length_prefix(body: &[u8]) -> io::Result<[u8; 4]> {
    if body.len() > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "spawner message too large"));
    }
    Ok((body.len() as u32).to_le_bytes())
}

/// Reads the body announced by `prefix` and decodes it.
fn read_body<T: for<'de> Deserialize<'de>>(mut from: impl Read, prefix: [u8; 4]) -> io::Result<T> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "spawner message too large"));
    }
    let mut body = vec![0; len];
    from.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Sends `request` with `fds` attached. Callers serialise sends on one socket.
pub fn send_request(socket: &UnixStream, request: &SpawnRequest, fds: [BorrowedFd<'_>; REQUEST_FDS]) -> io::Result<()> {
    let body = serde_json::to_vec(request).map_err(io::Error::other)?;
    let prefix = length_prefix(&body)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(REQUEST_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the payload's descriptors"));
    }
    let frame = [&prefix[..], &body[..]].concat();
    let sent = rustix::net::sendmsg(socket, &[IoSlice::new(&frame)], &mut control, SendFlags::NOSIGNAL)?;
    // A stream socket may take less at once; the descriptors went with the first bytes.
    (&*socket).write_all(&frame[sent..])?;
    Ok(())
}

/// Receives the next request and its descriptors; `None` when the worker closed the socket.
pub fn receive_request(socket: &UnixStream) -> io::Result<Option<(SpawnRequest, Vec<OwnedFd>)>> {
    let mut prefix = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(REQUEST_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut prefix)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if received.bytes == 0 {
        return Ok(None);
    }
    let mut fds = Vec::with_capacity(REQUEST_FDS);
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    (&*socket).read_exact(&mut prefix[received.bytes..])?;
    Ok(Some((read_body(socket, prefix)?, fds)))
}

/// Writes one reply frame.
pub fn write_reply(mut to: impl Write, reply: &Reply) -> io::Result<()> {
    let body = serde_json::to_vec(reply).map_err(io::Error::other)?;
    let prefix = length_prefix(&body)?;
    to.write_all(&[&prefix[..], &body[..]].concat())
}

/// Reads the next reply; `None` when the spawner closed the socket between frames.
pub fn read_reply(mut from: impl Read) -> io::Result<Option<Reply>> {
    let mut prefix = [0u8; 4];
    match from.read_exact(&mut prefix) {
        Ok(()) => read_body(from, prefix).map(Some),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_request_arrives_whole_with_its_two_descriptors() {
        let (worker, spawner) = UnixStream::pair().unwrap();
        let (_out_r, out_w) = std::io::pipe().unwrap();
        let (_err_r, err_w) = std::io::pipe().unwrap();
        let request = SpawnRequest {
            id: 7,
            argv: vec!["sh".into(), "-c".into(), "x".repeat(300_000)],
            env: vec![("A".into(), "1".into())],
            cwd: Some("/tmp".into()),
        };
        // Large enough to need more than one write: the reader must run beside the writer.
        let reader = std::thread::spawn(move || receive_request(&spawner).unwrap().unwrap());
        send_request(&worker, &request, [out_w.as_fd(), err_w.as_fd()]).unwrap();
        let (got, fds) = reader.join().unwrap();
        assert_eq!(got.id, 7);
        assert_eq!(got.argv, request.argv);
        assert_eq!(got.env, request.env);
        assert_eq!(got.cwd.as_deref(), Some("/tmp"));
        assert_eq!(fds.len(), 2);
    }

    #[test]
    fn replies_round_trip_and_a_closed_socket_reads_as_none() {
        let (mut spawner, worker) = UnixStream::pair().unwrap();
        write_reply(&mut spawner, &Reply::Exited { id: 3, status: 9 }).unwrap();
        drop(spawner);
        match read_reply(&worker).unwrap() {
            Some(Reply::Exited { id: 3, status: 9 }) => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(read_reply(&worker).unwrap().is_none());
    }
}
