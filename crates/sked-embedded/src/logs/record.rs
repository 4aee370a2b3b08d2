//! The on-disk form of a log line: one record of [`sked_core::log_record`] per line, so `jq`
//! and other tools read the files directly.

use sked_core::log_record;
pub use sked_core::log_record::{decode, marker_text};
use sked_core::ports::LogLine;
use sked_core::timestamp::Timestamp;

/// `line` as one line of the file, with its `\n`.
pub fn encode(line: &LogLine) -> Vec<u8> {
    with_newline(log_record::encode(line))
}

/// The truncation marker as one line of the file, with its `\n`.
pub fn encode_marker(ts: Timestamp, cap: u64) -> Vec<u8> {
    with_newline(log_record::encode_marker(ts, cap))
}

fn with_newline(record: String) -> Vec<u8> {
    let mut bytes = record.into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::ports::LogStream;
    use sked_core::timestamp;

    #[test]
    fn each_record_is_one_line_of_the_file() {
        let ts = timestamp::parse("2026-12-01T09:00:00.250Z").unwrap();
        let line = LogLine {
            ts,
            stream: LogStream::Stdout,
            line: "two\nlines".into(),
        };
        let bytes = encode(&line);
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(decode(&bytes[..bytes.len() - 1]), Some((line, false)));
        let marker = encode_marker(ts, 100);
        assert_eq!(marker.last(), Some(&b'\n'));
        assert_eq!(decode(&marker[..marker.len() - 1]).map(|(_, t)| t), Some(true));
    }
}
