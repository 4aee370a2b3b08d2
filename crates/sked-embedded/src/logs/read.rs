//! Reading one log file: from a cursor forwards, or its last lines backwards (without
//! reading the whole file), while a writer may still be appending to it.
//!
//! Only complete lines count: a last line without its `\n` is being written and is left for
//! the next read. A cursor is the byte offset just after the last complete line returned
//! (or considered), so `after: cursor` continues exactly there.
//!
//! Blocking I/O: the store calls this on the blocking pool.

use super::record;
use sked_core::ports::{LogError, LogLine, LogPage, LogQuery};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// How much is read at a time when walking the file backwards.
const BLOCK: u64 = 64 * 1024;

/// Reads the log at `path` as `query` asks.
pub fn read(path: &Path, query: &LogQuery) -> Result<LogPage, LogError> {
    let mut file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => LogError::NotFound,
        _ => LogError::Io(Box::new(e)),
    })?;
    let len = file.metadata().map_err(io_error)?.len();
    let end = complete_end(&mut file, len).map_err(io_error)?;

    // The marker, when there is one, is the last complete line: nothing is written after it.
    let mut backward = Backward::new(&mut file, end);
    let last = backward.next_line().map_err(io_error)?;
    let truncated = last
        .as_deref()
        .and_then(record::decode)
        .is_some_and(|(_, marker)| marker);

    let matches = |line: &LogLine| query.stream.is_none_or(|s| s == line.stream);
    let lines = match (query.after, query.tail) {
        (None, Some(n)) => {
            // Newest first, then turned around. Unreadable lines are skipped.
            let mut lines = Vec::new();
            let mut next = last;
            while lines.len() < n {
                let Some(bytes) = next else { break };
                if let Some((line, _)) = record::decode(&bytes)
                    && matches(&line)
                {
                    lines.push(line);
                }
                next = backward.next_line().map_err(io_error)?;
            }
            lines.reverse();
            lines
        }
        (after, _) => {
            let start = after.unwrap_or(0);
            if start >= end {
                return Ok(LogPage {
                    lines: Vec::new(),
                    truncated,
                    cursor: start.max(end),
                });
            }
            let mut bytes = vec![0; (end - start) as usize];
            file.seek(SeekFrom::Start(start)).map_err(io_error)?;
            file.read_exact(&mut bytes).map_err(io_error)?;
            bytes
                .split(|&b| b == b'\n')
                .filter_map(record::decode)
                .map(|(line, _)| line)
                .filter(|line| matches(line))
                .collect()
        }
    };
    Ok(LogPage {
        lines,
        truncated,
        cursor: end,
    })
}

/// The offset just after the last `\n` of the first `len` bytes (0 if there is none).
fn complete_end(file: &mut File, len: u64) -> io::Result<u64> {
    let mut pos = len;
    let mut buf = vec![0; BLOCK as usize];
    while pos > 0 {
        let n = pos.min(BLOCK);
        pos -= n;
        let chunk = &mut buf[..n as usize];
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(pos + i as u64 + 1);
        }
    }
    Ok(0)
}

/// Walks the complete lines of a file from the last to the first.
struct Backward<'f> {
    /// The file.
    file: &'f mut File,
    /// Where the bytes in `buf` start.
    pos: u64,
    /// Bytes `[pos, pos + buf.len())` not yet handed out, without the `\n` ending them.
    buf: Vec<u8>,
    /// Whether the first line has been handed out.
    done: bool,
}

impl<'f> Backward<'f> {
    /// Lines of the file up to `end` (just after a `\n`, or 0).
    fn new(file: &'f mut File, end: u64) -> Self {
        // Drop the last line's `\n` so that every `\n` left in front separates two lines.
        Backward {
            file,
            pos: end.saturating_sub(1),
            buf: Vec::new(),
            done: end == 0,
        }
    }

    /// The line before the ones already handed out, without its `\n`.
    fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        loop {
            if let Some(i) = self.buf.iter().rposition(|&b| b == b'\n') {
                let line = self.buf.split_off(i + 1);
                self.buf.truncate(i);
                return Ok(Some(line));
            }
            if self.pos == 0 {
                self.done = true;
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
            let n = self.pos.min(BLOCK);
            self.pos -= n;
            let mut chunk = vec![0; n as usize];
            self.file.seek(SeekFrom::Start(self.pos))?;
            self.file.read_exact(&mut chunk)?;
            chunk.append(&mut self.buf);
            self.buf = chunk;
        }
    }
}

/// An I/O failure as a log error, keeping its source.
fn io_error(e: io::Error) -> LogError {
    LogError::Io(Box::new(e))
}
