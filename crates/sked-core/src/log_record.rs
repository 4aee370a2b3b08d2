//! The stored form of an attempt's log line, shared by every log store (the local files,
//! CloudWatch Logs and S3) so that tools and people read them all the same way: one JSON
//! object per line, exactly as [`LogLine`] serialises (`{"ts","stream","line"}`).
//!
//! The truncation marker is an ordinary stderr line with one extra field,
//! `"truncated": true`: readers that ignore it still see the marker text, and the store can
//! tell the real marker from a payload that prints the same words.

use crate::ports::{LogLine, LogStream};
use crate::timestamp::{self, Timestamp};
use serde::Deserialize;

/// The marker's text when a log is cut at `cap` bytes.
pub fn marker_text(cap: u64) -> String {
    format!("[sked: log truncated at {cap} bytes]")
}

/// `line` as one record, without a newline.
pub fn encode(line: &LogLine) -> String {
    serde_json::to_string(line).unwrap_or_default()
}

/// The truncation marker as one record, without a newline.
pub fn encode_marker(ts: Timestamp, cap: u64) -> String {
    let line = LogLine {
        ts,
        stream: LogStream::Stderr,
        line: marker_text(cap),
    };
    let mut text = encode(&line);
    // `{...}` → `{...,"truncated":true}`
    text.pop();
    text.push_str(",\"truncated\":true}");
    text
}

/// One record as read back.
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

/// Parses one record: the line, and whether it is the truncation marker. `None` for text
/// that is not a record (never written by a sked log store).
pub fn decode(text: &[u8]) -> Option<(LogLine, bool)> {
    let stored: Stored = serde_json::from_slice(text).ok()?;
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

    fn at(s: &str) -> Timestamp {
        timestamp::parse(s).unwrap()
    }

    #[test]
    fn lines_round_trip_and_the_marker_is_recognised() {
        let ts = at("2026-12-01T09:00:00.250Z");
        let line = LogLine {
            ts,
            stream: LogStream::Stdout,
            line: "hello \"world\"".into(),
        };
        let text = encode(&line);
        assert_eq!(
            text,
            r#"{"ts":"2026-12-01T09:00:00.250Z","stream":"stdout","line":"hello \"world\""}"#
        );
        assert_eq!(decode(text.as_bytes()), Some((line, false)));

        let (marker, truncated) = decode(encode_marker(ts, 100).as_bytes()).unwrap();
        assert!(truncated);
        assert_eq!(marker.stream, LogStream::Stderr);
        assert_eq!(marker.line, "[sked: log truncated at 100 bytes]");
    }

    #[test]
    fn a_payload_printing_the_marker_text_is_not_the_marker() {
        let fake = LogLine {
            ts: at("2026-12-01T09:00:00Z"),
            stream: LogStream::Stderr,
            line: marker_text(100),
        };
        assert_eq!(decode(encode(&fake).as_bytes()).map(|(_, t)| t), Some(false));
    }
}
