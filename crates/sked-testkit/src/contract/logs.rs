//! The log contract: every [`LogStore`] adapter must pass these cases.
//!
//! Each case takes a fresh, empty store keeping at most [`CAP`] bytes of line text per
//! attempt, and checks one promise of the port (sked-core's `ports/logs.rs`): lines read back
//! in order, by stream, by tail, and from a cursor while a writer is still appending; the cap
//! with its one marker line, reported by every read and by `finish`; attempts and tenants kept
//! apart; and a log with no line, or none at all, reading as [`LogError::NotFound`] or empty
//! (the port allows either; core shows both as an empty log).
//!
//! A store may write in the background, so a line appended by a writer still open is awaited
//! (read again until it shows, for at most 5 s of real time); once `finish` has
//! returned, every line must read back at once. Cursors are opaque: the cases only pass back
//! what a page answered.
//! Run them all with [`log_contract!`](crate::log_contract).

pub use sked_core::ports::logs::LogStore;

use super::fixtures::{at_ms, tenant};
use sked_core::ids::RunId;
use sked_core::log_record::marker_text;
use sked_core::ports::logs::{LogError, LogKey, LogLine, LogPage, LogQuery, LogStream, LogWriter};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The store under test.
pub type Logs = Arc<dyn LogStore>;

/// The cap, in bytes of line text per attempt, of the stores the cases get.
pub const CAP: u64 = 1000;

/// Real time within which an appended line must be readable while its writer is open.
const VISIBLE: Duration = Duration::from_secs(5);

/// Attempt `attempt` of tenant `acme`'s run of `backup.nightly`.
fn key(attempt: u32) -> LogKey {
    LogKey {
        tenant: tenant("acme"),
        run_id: RunId::from("backup.nightly@20260301T000000.000Z"),
        attempt,
    }
}

/// Line `i`, read `i` ms after t0: even ones on stdout, odd ones on stderr, reading
/// `line <i>`.
fn line(i: i64) -> LogLine {
    LogLine {
        ts: at_ms(i),
        stream: if i % 2 == 0 {
            LogStream::Stdout
        } else {
            LogStream::Stderr
        },
        line: format!("line {i}"),
    }
}

/// Lines `from..to`.
fn lines(from: i64, to: i64) -> Vec<LogLine> {
    (from..to).map(line).collect()
}

fn texts(page: &LogPage) -> Vec<&str> {
    page.lines.iter().map(|l| l.line.as_str()).collect()
}

fn query(stream: Option<LogStream>, tail: Option<usize>, after: Option<u64>) -> LogQuery {
    LogQuery { stream, tail, after }
}

/// A writer for `key` that has appended `lines`.
async fn writer_with(logs: &Logs, key: &LogKey, lines: &[LogLine]) -> Box<dyn LogWriter> {
    let mut writer = logs.writer(key).await.expect("writer");
    for l in lines {
        writer.append(l.clone()).await.expect("append");
    }
    writer
}

/// Reads `key` as `query` asks.
async fn read(logs: &Logs, key: &LogKey, query: &LogQuery) -> LogPage {
    logs.read(key, query).await.expect("read")
}

/// Reads until `enough` holds for the page (a writer may flush in the background), for at
/// most [`VISIBLE`]. Until the writer's first line lands, the log may not be found: the port
/// lets a store create it with that line, and readers treat it as empty meanwhile.
async fn read_until(logs: &Logs, key: &LogKey, query: &LogQuery, enough: impl Fn(&LogPage) -> bool) -> LogPage {
    let deadline = Instant::now() + VISIBLE;
    loop {
        let page = match logs.read(key, query).await {
            Ok(page) => Some(page),
            Err(LogError::NotFound) => None,
            Err(e) => panic!("read: {e}"),
        };
        if let Some(page) = page.filter(|p| enough(p)) {
            return page;
        }
        assert!(Instant::now() < deadline, "lines not readable after {VISIBLE:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The lines of a log that may not exist: [`LogError::NotFound`] reads as none.
async fn lines_or_none(logs: &Logs, key: &LogKey) -> Vec<LogLine> {
    match logs.read(key, &LogQuery::default()).await {
        Ok(page) => page.lines,
        Err(LogError::NotFound) => Vec::new(),
        Err(e) => panic!("reading {key:?}: {e}"),
    }
}

/// Lines come back as appended (instant, stream, text), oldest first, and `finish` sums the
/// bytes of their text; a stream filter keeps that stream's lines in order.
pub async fn lines_read_back_in_order_with_a_stream_filter(logs: Logs) {
    let written = lines(0, 10);
    let summary = writer_with(&logs, &key(1), &written).await.finish().await.unwrap();
    assert_eq!(summary.bytes, written.iter().map(|l| l.line.len() as u64).sum::<u64>());
    assert!(!summary.truncated);

    let all = read(&logs, &key(1), &LogQuery::default()).await;
    assert_eq!(all.lines, written);
    assert!(!all.truncated);

    let stderr = read(&logs, &key(1), &query(Some(LogStream::Stderr), None, None)).await;
    assert_eq!(texts(&stderr), ["line 1", "line 3", "line 5", "line 7", "line 9"]);
    let stdout = read(&logs, &key(1), &query(Some(LogStream::Stdout), None, None)).await;
    assert_eq!(texts(&stdout), ["line 0", "line 2", "line 4", "line 6", "line 8"]);
}

/// `tail: n` answers the last `n` matching lines, oldest first: of both streams, of one, all
/// of them when there are fewer, none for zero.
pub async fn tail_answers_the_last_matching_lines(logs: Logs) {
    let written = lines(0, 10);
    writer_with(&logs, &key(1), &written).await.finish().await.unwrap();

    let tail = read(&logs, &key(1), &query(None, Some(3), None)).await;
    assert_eq!(tail.lines, written[7..]);
    let tail = read(&logs, &key(1), &query(Some(LogStream::Stdout), Some(2), None)).await;
    assert_eq!(texts(&tail), ["line 6", "line 8"]);
    let tail = read(&logs, &key(1), &query(None, Some(100), None)).await;
    assert_eq!(tail.lines, written);
    let tail = read(&logs, &key(1), &query(None, Some(0), None)).await;
    assert!(tail.lines.is_empty());
}

/// A follower reads what a writer still open has appended, then from its cursor only what
/// came since: nothing (and the same cursor) until more is appended, then exactly the new
/// lines, with `tail` ignored. After `finish`, reading from the last cursor answers nothing.
pub async fn a_follower_reads_from_its_cursor_while_the_writer_appends(logs: Logs) {
    let written = lines(0, 6);
    let mut writer = writer_with(&logs, &key(1), &written[..2]).await;

    let first = read_until(&logs, &key(1), &LogQuery::default(), |p| p.lines.len() >= 2).await;
    assert_eq!(first.lines, written[..2]);
    let nothing_new = read(&logs, &key(1), &query(None, None, Some(first.cursor))).await;
    assert!(nothing_new.lines.is_empty(), "{nothing_new:?}");
    assert_eq!(nothing_new.cursor, first.cursor);

    for l in &written[2..] {
        writer.append(l.clone()).await.unwrap();
    }
    let follow = query(None, None, Some(first.cursor));
    let next = read_until(&logs, &key(1), &follow, |p| p.lines.len() >= 4).await;
    assert_eq!(next.lines, written[2..]);
    assert_ne!(next.cursor, first.cursor);
    let with_tail = read(&logs, &key(1), &query(None, Some(1), Some(first.cursor))).await;
    assert_eq!(with_tail.lines, written[2..], "tail is ignored when following");
    let stderr = read(
        &logs,
        &key(1),
        &query(Some(LogStream::Stderr), None, Some(first.cursor)),
    )
    .await;
    assert_eq!(texts(&stderr), ["line 3", "line 5"]);

    writer.finish().await.unwrap();
    let end = read(&logs, &key(1), &query(None, None, Some(next.cursor))).await;
    assert!(end.lines.is_empty(), "{end:?}");
    assert_eq!(read(&logs, &key(1), &LogQuery::default()).await.lines, written);
}

/// The line that would take the text past the cap is replaced by one marker line (the
/// shared marker text, at that line's instant) and every later line is dropped; `finish`
/// reports the bytes kept and the truncation, and every way of reading reports it too.
pub async fn the_cap_keeps_one_marker_and_finish_reports_it(logs: Logs) {
    // Nine lines of 100 bytes (900), then one of 150 that would pass 1000, then more.
    let kept: Vec<LogLine> = (0..9)
        .map(|i| LogLine {
            line: format!("{i}{}", "x".repeat(99)),
            ..line(i)
        })
        .collect();
    let crossing = LogLine {
        line: "y".repeat(150),
        ..line(9)
    };
    let mut writer = writer_with(&logs, &key(1), &kept).await;
    writer.append(crossing).await.unwrap();
    for i in 10..20 {
        writer.append(line(i)).await.unwrap();
    }
    let summary = writer.finish().await.unwrap();
    assert_eq!(summary.bytes, 900);
    assert!(summary.truncated);

    let page = read(&logs, &key(1), &LogQuery::default()).await;
    assert!(page.truncated);
    assert_eq!(page.lines.len(), kept.len() + 1, "the kept lines and one marker");
    assert_eq!(page.lines[..9], kept[..]);
    let marker = &page.lines[9];
    assert_eq!(marker.line, marker_text(CAP));
    assert_eq!(marker.ts, at_ms(9), "the marker carries the instant the cap was hit");

    for q in [
        query(None, Some(1), None),
        query(Some(LogStream::Stdout), None, None),
        query(None, None, Some(page.cursor)),
    ] {
        assert!(read(&logs, &key(1), &q).await.truncated, "{q:?}");
    }
    let last = read(&logs, &key(1), &query(None, Some(1), None)).await;
    assert_eq!(texts(&last), [marker_text(CAP)]);
}

/// Text exactly at the cap is kept whole, without a marker.
pub async fn a_log_exactly_at_the_cap_is_not_truncated(logs: Logs) {
    let full = [
        LogLine {
            line: "a".repeat(600),
            ..line(0)
        },
        LogLine {
            line: "b".repeat(400),
            ..line(1)
        },
    ];
    let summary = writer_with(&logs, &key(1), &full).await.finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (CAP, false));
    let page = read(&logs, &key(1), &LogQuery::default()).await;
    assert_eq!(page.lines, full);
    assert!(!page.truncated);
}

/// Each attempt has its own log, and so does each tenant: another attempt's or tenant's log
/// of the same run reads as not found or empty, never as this one.
pub async fn attempts_and_tenants_are_kept_apart(logs: Logs) {
    writer_with(&logs, &key(1), &lines(0, 1)).await.finish().await.unwrap();
    writer_with(&logs, &key(2), &lines(0, 3)).await.finish().await.unwrap();
    assert_eq!(lines_or_none(&logs, &key(1)).await, lines(0, 1));
    assert_eq!(lines_or_none(&logs, &key(2)).await, lines(0, 3));
    assert!(lines_or_none(&logs, &key(3)).await.is_empty(), "attempt 3 has no log");
    let other_tenant = LogKey {
        tenant: tenant("globex"),
        ..key(1)
    };
    assert!(
        lines_or_none(&logs, &other_tenant).await.is_empty(),
        "another tenant's run of the same id has no log"
    );
    let other_run = LogKey {
        run_id: RunId::from("backup.nightly@20260301T000100.000Z"),
        ..key(1)
    };
    assert!(lines_or_none(&logs, &other_run).await.is_empty());
}

/// A log never written reads as not found or empty; so does one whose writer finished
/// without a line, and its summary is zero bytes, not truncated.
pub async fn a_log_without_lines_reads_as_not_found_or_empty(logs: Logs) {
    assert!(lines_or_none(&logs, &key(1)).await.is_empty());
    let tail = query(None, Some(10), None);
    match logs.read(&key(1), &tail).await {
        Ok(page) => assert!(page.lines.is_empty() && !page.truncated, "{page:?}"),
        Err(LogError::NotFound) => {}
        Err(e) => panic!("{e}"),
    }
    let summary = logs.writer(&key(2)).await.unwrap().finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (0, false));
    assert!(lines_or_none(&logs, &key(2)).await.is_empty());
}
