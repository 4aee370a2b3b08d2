//! The on-disk form of a log line: one JSON object per line, exactly as [`LogLine`]
//! serialises (`{"ts","stream","line"}`), so `jq` and other tools read the files directly.
//!
//! The truncation marker is an ordinary stderr line with one extra field,
//! `"truncated": true`: readers that ignore it still see the marker text, and this store can
//! tell the real marker from a payload that prints the same words.

use serde::Deserialize;
use sked_core::ports::{LogLine, LogStream};
use sked_core::timestamp::{self, Timestamp};

/// The marker's text when a log is cut at `cap` bytes.
pub fn marker_text(cap: u64) -> String {
    format!("[sked: log truncated at {cap} bytes]")
}

/// `line` as one line of the file, with its `\n`.
pub fn encode(line: &LogLine) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(line).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The truncation marker as one line of the file, with its `\n`.
pub fn encode_marker(ts: Timestamp, cap: u64) -> Vec<u8> {
    let line = LogLine {
        ts,
        stream: LogStream::Stderr,
        line: marker_text(cap),
    };
    let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
    // `{...}` → `{...,"truncated":true}`
    bytes.pop();
    bytes.extend_from_slice(b",\"truncated\":true}\n");
    bytes
}

/// One line of the file as read back.
#[derive(Debug, Deserialize)]
struct Stored {
    /// When the line was read.
    #[serde(with = "timestamp::serde_ms")]
    ts: Timestamp,
    /// Which output.
    stream: LogStream,
    /// The text.
    line: String,
    /// Set on the truncation marker only.
    #[serde(default)]
    truncated: bool,
}

/// Parses one line of the file (without its `\n`): the line, and whether it is the
/// truncation marker. `None` for a line that is not a record (never written by this store).
pub fn decode(bytes: &[u8]) -> Option<(LogLine, bool)> {
    let stored: Stored = serde_json::from_slice(bytes).ok()?;
    Some((
        LogLine {
            ts: stored.ts,
            stream: stored.stream,
            line: stored.line,
        },
        stored.truncated,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_the_marker_is_recognised() {
        let ts = timestamp::parse("2026-12-01T09:00:00.250Z").unwrap();
        let line = LogLine {
            ts,
            stream: LogStream::Stdout,
            line: "hello \"world\"".into(),
        };
        let bytes = encode(&line);
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(decode(&bytes[..bytes.len() - 1]), Some((line, false)));

        let marker = encode_marker(ts, 100);
        let (line, truncated) = decode(&marker[..marker.len() - 1]).unwrap();
        assert!(truncated);
        assert_eq!(line.stream, LogStream::Stderr);
        assert_eq!(line.line, "[sked: log truncated at 100 bytes]");
    }

    #[test]
    fn a_payload_printing_the_marker_text_is_not_the_marker() {
        let ts = timestamp::parse("2026-12-01T09:00:00Z").unwrap();
        let fake = LogLine {
            ts,
            stream: LogStream::Stderr,
            line: marker_text(100),
        };
        let bytes = encode(&fake);
        assert_eq!(decode(&bytes[..bytes.len() - 1]).map(|(_, t)| t), Some(false));
    }
}
