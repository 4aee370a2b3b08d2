//! The file log store on a real directory: append and read back, tail, stream filter, the
//! cap with its marker, following with a cursor while the writer appends, partial lines, and
//! keys that name no log.

use sked_core::ports::{LogError, LogKey, LogLine, LogQuery, LogRetention, LogStore, LogStream, LogWriter};
use sked_core::timestamp::{self, Timestamp};
use sked_embedded::logs::FileLogStore;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

fn key(attempt: u32) -> LogKey {
    LogKey {
        tenant: "acme".into(),
        run_id: "backup.nightly@20261201T090000.000Z".into(),
        attempt,
    }
}

fn at(ms: i64) -> Timestamp {
    timestamp::from_ms(timestamp::parse("2026-12-01T09:00:00Z").unwrap().timestamp_millis() + ms)
}

fn line(i: i64, stream: LogStream, text: &str) -> LogLine {
    LogLine {
        ts: at(i),
        stream,
        line: text.to_string(),
    }
}

/// Lines `0..n`, even ones on stdout, odd ones on stderr, reading `line <i>`.
fn lines(n: i64) -> Vec<LogLine> {
    (0..n)
        .map(|i| {
            line(
                i,
                if i % 2 == 0 {
                    LogStream::Stdout
                } else {
                    LogStream::Stderr
                },
                &format!("line {i}"),
            )
        })
        .collect()
}

async fn write_all(store: &FileLogStore, key: &LogKey, lines: &[LogLine]) -> Box<dyn LogWriter> {
    let mut writer = store.writer(key).await.unwrap();
    for l in lines {
        writer.append(l.clone()).await.unwrap();
    }
    writer
}

/// Reads until `enough` holds for the page (the writer's flush is asynchronous), for at most
/// a second.
async fn read_until(
    store: &FileLogStore,
    query: &LogQuery,
    enough: impl Fn(&sked_core::ports::LogPage) -> bool,
) -> sked_core::ports::LogPage {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let page = store.read(&key(1), query).await.unwrap();
        if enough(&page) {
            return page;
        }
        assert!(Instant::now() < deadline, "lines not visible after a second: {page:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn lines_are_read_back_as_written_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let written = lines(5);
    let summary = write_all(&store, &key(1), &written).await.finish().await.unwrap();
    assert_eq!(summary.bytes, written.iter().map(|l| l.line.len() as u64).sum::<u64>());
    assert!(!summary.truncated);

    let page = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert_eq!(page.lines, written);
    assert!(!page.truncated);
    let file = dir.path().join("acme/backup.nightly@20261201T090000.000Z/1.log");
    assert_eq!(page.cursor, std::fs::metadata(&file).unwrap().len());

    // One JSON object per line, as LogLine serialises.
    let text = std::fs::read_to_string(&file).unwrap();
    let first: LogLine = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first, written[0]);
    assert!(
        text.starts_with(r#"{"ts":"2026-12-01T09:00:00.000Z","stream":"stdout","line":"line 0"}"#),
        "{text}"
    );
}

#[tokio::test]
async fn stream_filter_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let written = lines(10);
    write_all(&store, &key(1), &written).await.finish().await.unwrap();

    let stderr = store
        .read(
            &key(1),
            &LogQuery {
                stream: Some(LogStream::Stderr),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        stderr.lines.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
        ["line 1", "line 3", "line 5", "line 7", "line 9"]
    );

    let tail = store
        .read(
            &key(1),
            &LogQuery {
                tail: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail.lines, written[7..]);
    assert_eq!(tail.cursor, stderr.cursor);

    let tail = store
        .read(
            &key(1),
            &LogQuery {
                stream: Some(LogStream::Stdout),
                tail: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        tail.lines.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
        ["line 6", "line 8"]
    );

    let all = store
        .read(
            &key(1),
            &LogQuery {
                tail: Some(100),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(all.lines, written);
    let none = store
        .read(
            &key(1),
            &LogQuery {
                tail: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(none.lines.is_empty());
}

#[tokio::test]
async fn tail_of_a_large_log_reads_across_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    // ~2 MB with lines of varying length, some longer than a read block.
    let written: Vec<_> = (0..3000)
        .map(|i| {
            line(
                i,
                LogStream::Stdout,
                &format!(
                    "{i}:{}",
                    "y".repeat(if i % 500 == 7 { 70_000 } else { (i % 300) as usize })
                ),
            )
        })
        .collect();
    write_all(&store, &key(1), &written).await.finish().await.unwrap();
    for n in [1, 2, 999, 2500, 3000] {
        let page = store
            .read(
                &key(1),
                &LogQuery {
                    tail: Some(n),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.lines, written[3000 - n..], "tail {n}");
    }
}

#[tokio::test]
async fn the_cap_keeps_one_marker_and_drops_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path()).with_cap(12);
    let mut writer = store.writer(&key(1)).await.unwrap();
    for (i, text) in ["12345", "678901", "this one crosses the cap", "x", "y"]
        .iter()
        .enumerate()
    {
        writer.append(line(i as i64, LogStream::Stdout, text)).await.unwrap();
    }
    let summary = writer.finish().await.unwrap();
    assert_eq!(summary.bytes, 11);
    assert!(summary.truncated);

    let page = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert!(page.truncated);
    let got: Vec<_> = page.lines.iter().map(|l| (l.stream, l.line.as_str())).collect();
    assert_eq!(
        got,
        [
            (LogStream::Stdout, "12345"),
            (LogStream::Stdout, "678901"),
            (LogStream::Stderr, "[sked: log truncated at 12 bytes]"),
        ]
    );
    assert_eq!(
        page.lines[2].ts,
        at(2),
        "the marker carries the instant the cap was hit"
    );

    // Every way of reading reports it.
    for query in [
        LogQuery {
            tail: Some(1),
            ..Default::default()
        },
        LogQuery {
            stream: Some(LogStream::Stdout),
            ..Default::default()
        },
        LogQuery {
            after: Some(page.cursor),
            ..Default::default()
        },
    ] {
        assert!(store.read(&key(1), &query).await.unwrap().truncated, "{query:?}");
    }
}

#[tokio::test]
async fn a_payload_printing_the_marker_text_does_not_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let fake = line(0, LogStream::Stderr, "[sked: log truncated at 10485760 bytes]");
    write_all(&store, &key(1), &[fake]).await.finish().await.unwrap();
    assert!(!store.read(&key(1), &LogQuery::default()).await.unwrap().truncated);
}

#[tokio::test]
async fn a_follower_reads_new_lines_from_its_cursor_while_the_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let written = lines(6);
    let mut writer = write_all(&store, &key(1), &written[..2]).await;

    let first = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 2).await;
    assert_eq!(first.lines, written[..2]);
    let nothing_new = store
        .read(
            &key(1),
            &LogQuery {
                after: Some(first.cursor),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(nothing_new.lines.is_empty());
    assert_eq!(nothing_new.cursor, first.cursor);

    let appended = Instant::now();
    for l in &written[2..] {
        writer.append(l.clone()).await.unwrap();
    }
    let follow = LogQuery {
        after: Some(first.cursor),
        ..Default::default()
    };
    let next = read_until(&store, &follow, |p| p.lines.len() == 4).await;
    assert!(
        appended.elapsed() < Duration::from_millis(100),
        "visible after {:?}",
        appended.elapsed()
    );
    assert_eq!(next.lines, written[2..]);
    assert!(next.cursor > first.cursor);

    // `tail` is ignored when following.
    let follow_tail = LogQuery {
        after: Some(first.cursor),
        tail: Some(1),
        ..Default::default()
    };
    assert_eq!(store.read(&key(1), &follow_tail).await.unwrap().lines.len(), 4);
    writer.finish().await.unwrap();
}

#[tokio::test]
async fn a_partial_last_line_waits_for_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    write_all(&store, &key(1), &lines(1)).await.finish().await.unwrap();
    let path = store.path(&key(1)).unwrap();
    let whole = serde_json::to_string(&line(1, LogStream::Stdout, "half written")).unwrap() + "\n";
    let (head, rest) = whole.split_at(20);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(head.as_bytes()).unwrap();

    let page = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert_eq!(page.lines.len(), 1);
    let tail = store
        .read(
            &key(1),
            &LogQuery {
                tail: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail.lines.len(), 1);
    assert_eq!(tail.cursor, page.cursor);

    file.write_all(rest.as_bytes()).unwrap();
    let next = store
        .read(
            &key(1),
            &LogQuery {
                after: Some(page.cursor),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        next.lines.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
        ["half written"]
    );
}

#[tokio::test]
async fn an_empty_log_leaves_no_file_and_reads_as_not_found() {
    // The logs API promises an attempt's lines, not for a file per attempt; core reads a missing
    // log as an empty one (`Sked::read_page`), so a silent attempt costs no file-system work.
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let summary = store.writer(&key(1)).await.unwrap().finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (0, false));
    assert!(
        !store.path(&key(1)).unwrap().exists(),
        "no file for a log without lines"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "and no folder either"
    );
    let tail = LogQuery {
        tail: Some(10),
        ..Default::default()
    };
    assert!(matches!(store.read(&key(1), &tail).await, Err(LogError::NotFound)));
}

#[tokio::test]
async fn the_file_exists_once_the_first_line_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let mut writer = store.writer(&key(1)).await.unwrap();
    assert!(!store.path(&key(1)).unwrap().exists());
    writer.append(lines(1)[0].clone()).await.unwrap();
    assert!(store.path(&key(1)).unwrap().exists(), "readers find the log at once");
    let summary = writer.finish().await.unwrap();
    assert_eq!(summary.bytes, "line 0".len() as u64);
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines, lines(1));
}

#[tokio::test]
async fn attempts_are_kept_apart_and_unknown_ones_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    write_all(&store, &key(1), &lines(1)).await.finish().await.unwrap();
    write_all(&store, &key(2), &lines(3)).await.finish().await.unwrap();
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines.len(), 1);
    assert_eq!(store.read(&key(2), &LogQuery::default()).await.unwrap().lines.len(), 3);

    assert!(matches!(
        store.read(&key(3), &LogQuery::default()).await,
        Err(LogError::NotFound)
    ));
    let other_tenant = LogKey {
        tenant: "globex".into(),
        ..key(1)
    };
    assert!(matches!(
        store.read(&other_tenant, &LogQuery::default()).await,
        Err(LogError::NotFound)
    ));
}

#[tokio::test]
async fn keys_that_could_escape_the_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path().join("logs"));
    let escaping = [
        LogKey {
            tenant: "..".into(),
            ..key(1)
        },
        LogKey {
            tenant: "a/b".into(),
            ..key(1)
        },
        LogKey {
            run_id: "..".into(),
            ..key(1)
        },
        LogKey {
            run_id: "../../etc".into(),
            ..key(1)
        },
    ];
    for key in escaping {
        assert!(
            matches!(store.read(&key, &LogQuery::default()).await, Err(LogError::NotFound)),
            "{key:?}"
        );
        assert!(matches!(store.writer(&key).await, Err(LogError::Io(_))), "{key:?}");
    }
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing was created"
    );
}

#[tokio::test]
async fn retention_removes_old_logs_and_the_folders_they_leave_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let old_run = LogKey {
        run_id: "old@20261101T090000.000Z".into(),
        ..key(1)
    };
    write_all(&store, &old_run, &lines(1)).await.finish().await.unwrap();
    write_all(&store, &key(1), &lines(1)).await.finish().await.unwrap();
    write_all(&store, &key(2), &lines(1)).await.finish().await.unwrap();
    let ten_days_ago = SystemTime::now() - Duration::from_secs(10 * 86_400);
    for key in [&old_run, &key(1)] {
        let file = std::fs::File::options()
            .append(true)
            .open(store.path(key).unwrap())
            .unwrap();
        file.set_modified(ten_days_ago).unwrap();
    }

    let removed = store
        .remove_older_than(SystemTime::now() - Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(removed, 2);
    assert!(matches!(
        store.read(&key(1), &LogQuery::default()).await,
        Err(LogError::NotFound)
    ));
    assert_eq!(store.read(&key(2), &LogQuery::default()).await.unwrap().lines.len(), 1);
    assert!(
        !store.path(&old_run).unwrap().parent().unwrap().exists(),
        "the empty run folder is gone"
    );
}

/// Through the retention port: whole logs last written before the cutoff go, a bounded batch
/// per call (fewer than the limit once nothing old is left); recent logs stay.
#[tokio::test]
async fn the_retention_port_removes_old_logs_in_batches_and_keeps_recent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileLogStore::new(dir.path());
    let forty_days_ago = SystemTime::now() - Duration::from_secs(40 * 86_400);
    let old: Vec<LogKey> = (1..=3).map(key).collect();
    let recent = LogKey {
        run_id: "recent@20261101T090000.000Z".into(),
        ..key(1)
    };
    for key in old.iter().chain([&recent]) {
        write_all(&store, key, &lines(2)).await.finish().await.unwrap();
    }
    for key in &old {
        let file = std::fs::File::options()
            .append(true)
            .open(store.path(key).unwrap())
            .unwrap();
        file.set_modified(forty_days_ago).unwrap();
    }
    let cutoff = chrono::Utc::now() - chrono::Duration::days(30);

    assert_eq!(store.remove_before(cutoff, 2).await.unwrap(), 2);
    assert_eq!(store.remove_before(cutoff, 2).await.unwrap(), 1);
    assert_eq!(store.remove_before(cutoff, 2).await.unwrap(), 0);
    for key in &old {
        assert!(
            matches!(store.read(key, &LogQuery::default()).await, Err(LogError::NotFound)),
            "{key:?}"
        );
    }
    assert_eq!(store.read(&recent, &LogQuery::default()).await.unwrap().lines.len(), 2);
}
