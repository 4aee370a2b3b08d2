//! The stored form of an attempt's log line, shared by every log store (the local files,
//! CloudWatch Logs and S3) so that tools and people read them all the same way: one JSON
//! object per line, exactly as [`LogLine`] serialises (`{"ts","stream","line"}`).
//!
//! The truncation marker is an ordinary stderr line with one extra field,
//! `"truncated": true`: readers that ignore it still see the marker text, and the store can
//! tell the real marker from a payload that prints the same words.
//!
//! A finished log kept as one object (S3 in the AWS deployment, S3-compatible storage in the
//! self-hosted one) is these records, one a line, named by [`object_key`]; [`parse`] reads
//! such a body back and [`select`] answers a [`LogQuery`] from it, a cursor being a record's
//! index — so every store that keeps whole logs pages them the same way.

use crate::ports::{LogKey, LogLine, LogPage, LogQuery, LogStream};
use crate::timestamp::{self, Timestamp};
use serde::Deserialize;

/// Where finished logs live in a bucket, under the deployment's own prefix if any (a bucket
/// lifecycle rule can filter on it).
pub const LOG_PREFIX: &str = "logs/";

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
    encode_record(&line, true)
}

/// `line` as one record, without a newline, marked as the truncation marker if `marker`
/// (a store that kept the marker as a line of its own writes it back this way).
pub fn encode_record(line: &LogLine, marker: bool) -> String {
    let mut text = encode(line);
    if marker {
        // `{...}` → `{...,"truncated":true}`
        text.pop();
        text.push_str(",\"truncated\":true}");
    }
    text
}

/// The object key of `key`'s finished log: `logs/<tenant>/<run_id>/<attempt>.jsonl`
/// (after the deployment's prefix, if it has one).
pub fn object_key(key: &LogKey) -> String {
    format!("{LOG_PREFIX}{}/{}/{}.jsonl", key.tenant, key.run_id, key.attempt)
}

/// Whether `key` names a log safely: tenant and run id single, harmless path components, so
/// no two keys share an object (or a file, or a CloudWatch stream, which refuses `:` and `*`).
pub fn key_is_safe(key: &LogKey) -> bool {
    let part = |s: &str, extra: &[u8]| {
        (1..=255).contains(&s.len())
            && s != "."
            && s != ".."
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
    };
    part(key.tenant.as_str(), b"_.-") && part(key.run_id.as_str(), b"_.-@")
}

/// The records of a whole log's body, one a line (`None`: a line that is not a record; it
/// still counts for the cursor).
pub fn parse(body: &[u8]) -> Vec<Option<(LogLine, bool)>> {
    body.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(decode)
        .collect()
}

/// The page `query` asks for out of a whole log's records. The cursor is a record's index
/// (the number of records before it, marker included), so a follower that read the log while
/// it was written line by line, numbered from 1, continues here without a gap or a repeat.
pub fn select(records: Vec<Option<(LogLine, bool)>>, query: &LogQuery) -> LogPage {
    let total = records.len() as u64;
    // The marker, when there is one, is the last record: nothing is written after it.
    let truncated = matches!(records.last(), Some(Some((_, true))));
    let matches = |line: &LogLine| query.stream.is_none_or(|s| s == line.stream);
    let lines = records.into_iter().map(|r| r.map(|(line, _)| line));
    let lines: Vec<LogLine> = match (query.after, query.tail) {
        (Some(after), _) => lines
            .skip(usize::try_from(after).unwrap_or(usize::MAX))
            .flatten()
            .filter(|l| matches(l))
            .collect(),
        (None, Some(n)) => {
            let all: Vec<LogLine> = lines.flatten().filter(|l| matches(l)).collect();
            let from = all.len().saturating_sub(n);
            all[from..].to_vec()
        }
        (None, None) => lines.flatten().filter(|l| matches(l)).collect(),
    };
    LogPage {
        lines,
        truncated,
        cursor: query.after.map_or(total, |a| a.max(total)),
    }
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

    fn line(i: i64, stream: LogStream) -> LogLine {
        LogLine {
            ts: timestamp::from_ms(1_800_000_000_000 + i),
            stream,
            line: format!("line {i}"),
        }
    }

    /// Records `0..n`, even on stdout, odd on stderr; the last one a marker if `marker`.
    fn records(n: i64, marker: bool) -> Vec<Option<(LogLine, bool)>> {
        (0..n)
            .map(|i| {
                let stream = if i % 2 == 0 {
                    LogStream::Stdout
                } else {
                    LogStream::Stderr
                };
                Some((line(i, stream), marker && i == n - 1))
            })
            .collect()
    }

    fn texts(page: &LogPage) -> Vec<&str> {
        page.lines.iter().map(|l| l.line.as_str()).collect()
    }

    #[test]
    fn objects_are_named_tenant_run_attempt_and_unsafe_keys_are_refused() {
        let key = LogKey {
            tenant: "acme".into(),
            run_id: "backup.nightly@20261201T090000.250Z".into(),
            attempt: 2,
        };
        assert_eq!(
            object_key(&key),
            "logs/acme/backup.nightly@20261201T090000.250Z/2.jsonl"
        );
        assert!(key_is_safe(&key));
        for (tenant, run) in [
            ("..", "r"),
            ("a/b", "r"),
            ("t", "a:b"),
            ("t", "*"),
            ("", "r"),
            ("t@x", "r"),
        ] {
            let key = LogKey {
                tenant: tenant.into(),
                run_id: run.into(),
                attempt: 1,
            };
            assert!(!key_is_safe(&key), "{tenant:?} {run:?}");
        }
    }

    #[test]
    fn a_body_parses_record_by_record_and_the_marker_round_trips() {
        let ts = at("2026-12-01T09:00:00Z");
        let first = line(0, LogStream::Stdout);
        let marker = LogLine {
            ts,
            stream: LogStream::Stderr,
            line: marker_text(10),
        };
        let body = format!("{}\nnot a record\n{}\n", encode(&first), encode_record(&marker, true));
        assert_eq!(encode_record(&marker, true), encode_marker(ts, 10));
        assert_eq!(
            parse(body.as_bytes()),
            [Some((first, false)), None, Some((marker, true))]
        );
    }

    #[test]
    fn given_a_log_when_selecting_then_tail_filter_and_cursor_are_line_indexes() {
        let all = select(records(6, false), &LogQuery::default());
        assert_eq!(all.lines.len(), 6);
        assert_eq!(all.cursor, 6);
        assert!(!all.truncated);

        let tail = LogQuery {
            tail: Some(2),
            stream: Some(LogStream::Stdout),
            ..Default::default()
        };
        let page = select(records(6, false), &tail);
        assert_eq!(texts(&page), ["line 2", "line 4"]);
        assert_eq!(page.cursor, 6);

        // `after` counts every record (both streams); `tail` is then ignored.
        let after = LogQuery {
            after: Some(3),
            tail: Some(1),
            stream: Some(LogStream::Stderr),
        };
        assert_eq!(texts(&select(records(6, false), &after)), ["line 3", "line 5"]);
        let beyond = select(
            records(6, false),
            &LogQuery {
                after: Some(9),
                ..Default::default()
            },
        );
        assert!(beyond.lines.is_empty());
        assert_eq!(beyond.cursor, 9);
    }

    #[test]
    fn undecodable_records_count_for_the_cursor_only_and_the_marker_is_seen_last() {
        let mut recs = records(3, true);
        recs.insert(1, None);
        let page = select(recs, &LogQuery::default());
        assert_eq!(texts(&page), ["line 0", "line 1", "line 2"]);
        assert_eq!(page.cursor, 4);
        assert!(page.truncated);
        let page = select(
            records(3, true),
            &LogQuery {
                after: Some(3),
                ..Default::default()
            },
        );
        assert!(page.truncated && page.lines.is_empty());
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
