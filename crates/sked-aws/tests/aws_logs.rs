//! The CloudWatch/S3 log store against a real moto server: lines written while an attempt
//! "runs" are read (and followed) from its CloudWatch stream; after `finish` they are read
//! from its S3 object, or from its table item when small (tail, stream filter, cursor), and a
//! cursor taken on the stream continues on the finished log; the cap with its one marker; an
//! attempt that prints nothing makes no request; unknown attempts are `NotFound`; the
//! bootstrap's bucket lifecycle and group retention.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::*;
use sked_aws::logs::{object_key, stream_name};
use sked_aws::{AwsClients, AwsConfig, CloudWatchLogStore, LogsConfig};
use sked_core::ports::{LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogStream, LogWriter};
use sked_core::timestamp::{self, Timestamp};
use std::time::{Duration, Instant};

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
            let stream = if i % 2 == 0 {
                LogStream::Stdout
            } else {
                LogStream::Stderr
            };
            line(i, stream, &format!("line {i}"))
        })
        .collect()
}

fn logs_config(config: &AwsConfig) -> LogsConfig {
    config.logs.clone().expect("logs config")
}

/// Finished logs go to S3 whatever their size.
fn always_s3(logs: &mut LogsConfig) {
    logs.inline_bytes = 0;
}

async fn store_with(f: impl FnOnce(&mut LogsConfig)) -> (CloudWatchLogStore, AwsClients, LogsConfig) {
    let (store, clients, logs, _) = store_and_table_with(f).await;
    (store, clients, logs)
}

/// [`store_with`], and the table's name.
async fn store_and_table_with(f: impl FnOnce(&mut LogsConfig)) -> (CloudWatchLogStore, AwsClients, LogsConfig, String) {
    let (clients, config) = fresh_logs().await;
    let mut logs = logs_config(&config);
    f(&mut logs);
    let store = CloudWatchLogStore::new(&clients, &config.table, logs.clone());
    (store, clients, logs, config.table)
}

async fn write_all(store: &CloudWatchLogStore, key: &LogKey, lines: &[LogLine]) -> Box<dyn LogWriter> {
    let mut writer = store.writer(key).await.unwrap();
    for l in lines {
        writer.append(l.clone()).await.unwrap();
    }
    writer
}

/// `key`'s page for `query`; an empty one while the attempt has no log yet (its stream is
/// created with its first batch).
async fn read_or_empty(store: &CloudWatchLogStore, key: &LogKey, query: &LogQuery) -> LogPage {
    match store.read(key, query).await {
        Err(LogError::NotFound) => LogPage::default(),
        page => page.unwrap(),
    }
}

/// Reads until `enough` holds for the page (lines reach CloudWatch in batches), for at most
/// five seconds.
async fn read_until(store: &CloudWatchLogStore, query: &LogQuery, enough: impl Fn(&LogPage) -> bool) -> LogPage {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let page = read_or_empty(store, &key(1), query).await;
        if enough(&page) {
            return page;
        }
        assert!(Instant::now() < deadline, "lines not visible after 5 s: {page:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A store with the default config, and the same store through clients whose requests are
/// counted.
async fn store_and_counted() -> (
    CloudWatchLogStore,
    CloudWatchLogStore,
    sked_aws::RequestCounter,
    AwsClients,
    LogsConfig,
) {
    let (clients, mut config) = fresh_logs().await;
    let logs = logs_config(&config);
    let store = CloudWatchLogStore::new(&clients, &config.table, logs.clone());
    let counter = sked_aws::RequestCounter::new();
    config.request_counter = Some(counter.clone());
    let counted = CloudWatchLogStore::new(&sked_aws::connect(&config).await, &config.table, logs.clone());
    (store, counted, counter, clients, logs)
}

/// The log group holds no stream.
async fn assert_no_stream(clients: &AwsClients, logs: &LogsConfig) {
    let streams = clients
        .logs
        .describe_log_streams()
        .log_group_name(&logs.log_group)
        .send()
        .await
        .unwrap();
    assert!(streams.log_streams().is_empty(), "{streams:?}");
}

async fn object_exists(clients: &AwsClients, logs: &LogsConfig, key: &LogKey) -> bool {
    clients
        .s3
        .head_object()
        .bucket(&logs.bucket)
        .key(object_key(key))
        .send()
        .await
        .is_ok()
}

fn texts(page: &LogPage) -> Vec<&str> {
    page.lines.iter().map(|l| l.line.as_str()).collect()
}

#[tokio::test]
async fn a_running_attempt_is_read_and_followed_from_cloudwatch_then_from_s3() {
    // Streamed from the first line (`stream_after` is what the next tests are about).
    let (store, clients, logs) = store_with(|l| {
        always_s3(l);
        l.stream_after = Duration::ZERO;
    })
    .await;
    let written = lines(6);
    let mut writer = write_all(&store, &key(1), &written[..2]).await;

    // Running: the stream has the lines within the flush interval; no object yet.
    let started = Instant::now();
    let first = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 2).await;
    let lag = started.elapsed();
    assert!(lag < Duration::from_secs(1), "visible after {lag:?}");
    assert_eq!(first.lines, written[..2]);
    assert_eq!(first.cursor, 2);
    assert!(!object_exists(&clients, &logs, &key(1)).await);
    let events = clients
        .logs
        .get_log_events()
        .log_group_name(&logs.log_group)
        .log_stream_name(stream_name(&key(1)))
        .start_from_head(true)
        .send()
        .await
        .unwrap();
    let message = events.events()[0].message().unwrap();
    assert_eq!(
        serde_json::from_str::<LogLine>(message).unwrap(),
        written[0],
        "{message}"
    );

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

    for l in &written[2..4] {
        writer.append(l.clone()).await.unwrap();
    }
    let follow = LogQuery {
        after: Some(first.cursor),
        ..Default::default()
    };
    let next = read_until(&store, &follow, |p| p.lines.len() == 2).await;
    assert_eq!(next.lines, written[2..4]);
    assert_eq!(next.cursor, 4);

    // The last lines go out with finish; the follower continues on the object.
    for l in &written[4..] {
        writer.append(l.clone()).await.unwrap();
    }
    let summary = writer.finish().await.unwrap();
    assert_eq!(summary.bytes, written.iter().map(|l| l.line.len() as u64).sum::<u64>());
    assert!(!summary.truncated);
    assert!(object_exists(&clients, &logs, &key(1)).await);
    let rest = store
        .read(
            &key(1),
            &LogQuery {
                after: Some(next.cursor),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rest.lines, written[4..]);
    assert_eq!(rest.cursor, 6);

    // The object: JSON lines as the file store writes them, with a small summary.
    let object = clients
        .s3
        .get_object()
        .bucket(&logs.bucket)
        .key("logs/acme/backup.nightly@20261201T090000.000Z/1.jsonl")
        .send()
        .await
        .unwrap();
    let meta = object.metadata().cloned().unwrap_or_default();
    assert_eq!(meta.get("sked-truncated").map(String::as_str), Some("false"));
    assert_eq!(meta.get("sked-lines").map(String::as_str), Some("6"));
    let body = object.body.collect().await.unwrap().into_bytes();
    let text = std::str::from_utf8(&body).unwrap();
    assert!(
        text.starts_with("{\"ts\":\"2026-12-01T09:00:00.000Z\",\"stream\":\"stdout\",\"line\":\"line 0\"}\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 6);
}

#[tokio::test]
async fn a_finished_log_is_read_from_s3_with_tail_and_stream_filter() {
    let (store, clients, logs) = store_with(always_s3).await;
    let written = lines(10);
    write_all(&store, &key(1), &written).await.finish().await.unwrap();
    assert!(object_exists(&clients, &logs, &key(1)).await);
    assert_finished_reads(&store, &written).await;
}

#[tokio::test]
async fn a_small_finished_log_is_one_table_item_and_no_s3_object() {
    let (store, clients, logs, table) = store_and_table_with(|_| {}).await;
    let written = lines(10);
    let mut writer = write_all(&store, &key(1), &written[..4]).await;
    let running = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 4).await;
    for l in &written[4..] {
        writer.append(l.clone()).await.unwrap();
    }
    writer.finish().await.unwrap();
    assert!(
        !object_exists(&clients, &logs, &key(1)).await,
        "a log of ten short lines costs no S3 PUT"
    );
    let item = clients
        .dynamodb
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            AttributeValue::S("T#acme#LOG#backup.nightly@20261201T090000.000Z".into()),
        )
        .key("sk", AttributeValue::S("ATTEMPT#1".into()))
        .send()
        .await
        .unwrap()
        .item
        .expect("the log's item");
    let body = item["lines"].as_s().unwrap();
    assert_eq!(body.lines().count(), 10);
    assert!(item["ttl"].as_n().unwrap().parse::<i64>().unwrap() > chrono::Utc::now().timestamp() + 29 * 86_400);
    // A follower that started on the stream continues on the item.
    let rest = store
        .read(
            &key(1),
            &LogQuery {
                after: Some(running.cursor),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rest.lines, written[4..]);
    assert_finished_reads(&store, &written).await;

    // One byte more than the limit goes to S3.
    let (store, clients, logs) = store_with(|l| l.inline_bytes = body.len()).await;
    write_all(&store, &key(1), &written).await.finish().await.unwrap();
    assert!(
        !object_exists(&clients, &logs, &key(1)).await,
        "exactly the limit is inline"
    );
    let mut more = written.clone();
    more[9].line.push('!');
    write_all(&store, &key(2), &more).await.finish().await.unwrap();
    assert!(object_exists(&clients, &logs, &key(2)).await, "past the limit is in S3");
    assert_eq!(store.read(&key(2), &LogQuery::default()).await.unwrap().lines, more);
}

/// The finished log of `key(1)`, `written` (10 lines), read whole, by stream, by tail and
/// after a cursor.
async fn assert_finished_reads(store: &CloudWatchLogStore, written: &[LogLine]) {
    let all = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert_eq!(all.lines, written);
    assert_eq!(all.cursor, 10);
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
    assert_eq!(texts(&stderr), ["line 1", "line 3", "line 5", "line 7", "line 9"]);
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
    assert_eq!(tail.cursor, 10);
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
    assert_eq!(texts(&tail), ["line 6", "line 8"]);
    // `after` is a line index over both streams; `tail` is ignored with it.
    let after = store
        .read(
            &key(1),
            &LogQuery {
                after: Some(7),
                tail: Some(1),
                stream: Some(LogStream::Stdout),
            },
        )
        .await
        .unwrap();
    assert_eq!(texts(&after), ["line 8"]);
}

#[tokio::test]
async fn the_cap_keeps_one_marker_and_drops_the_rest_while_running_and_after() {
    let (store, _clients, _) = store_with(|l| l.cap_bytes = 12).await;
    let mut writer = store.writer(&key(1)).await.unwrap();
    for (i, text) in ["12345", "678901", "this one crosses the cap", "x", "y"]
        .iter()
        .enumerate()
    {
        writer.append(line(i as i64, LogStream::Stdout, text)).await.unwrap();
    }
    let expected = [
        (LogStream::Stdout, "12345"),
        (LogStream::Stdout, "678901"),
        (LogStream::Stderr, "[sked: log truncated at 12 bytes]"),
    ];
    // Running: the stream shows the marker.
    let running = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 3).await;
    assert!(running.truncated);
    let got: Vec<_> = running.lines.iter().map(|l| (l.stream, l.line.as_str())).collect();
    assert_eq!(got, expected);

    let summary = writer.finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (11, true));
    let page = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert!(page.truncated);
    let got: Vec<_> = page.lines.iter().map(|l| (l.stream, l.line.as_str())).collect();
    assert_eq!(got, expected);
    assert_eq!(
        page.lines[2].ts,
        at(2),
        "the marker carries the instant the cap was hit"
    );
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
    let (store, _clients, _) = store_with(|_| {}).await;
    let fake = line(0, LogStream::Stderr, "[sked: log truncated at 10485760 bytes]");
    let writer = write_all(&store, &key(1), &[fake]).await;
    assert!(
        !read_until(&store, &LogQuery::default(), |p| p.lines.len() == 1)
            .await
            .truncated
    );
    writer.finish().await.unwrap();
    assert!(!store.read(&key(1), &LogQuery::default()).await.unwrap().truncated);
}

#[tokio::test]
async fn a_line_too_long_for_cloudwatch_is_cut_in_the_stream_and_whole_in_s3() {
    let (store, _clients, _) = store_with(always_s3).await;
    let long = line(0, LogStream::Stdout, &"z".repeat(300 * 1024));
    let writer = write_all(&store, &key(1), &[long.clone(), line(1, LogStream::Stdout, "after")]).await;
    let running = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 2).await;
    assert!(running.lines[0].line.len() < 256 * 1024);
    assert!(running.lines[0].line.ends_with('…'));
    assert_eq!(running.lines[1].line, "after");
    writer.finish().await.unwrap();
    let done = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert_eq!(done.lines[0], long);
}

#[tokio::test]
async fn an_attempt_that_ends_within_stream_after_makes_no_cloudwatch_request() {
    let (store, counted, counter, clients, logs) = store_and_counted().await;
    assert_eq!(logs.stream_after, Duration::from_secs(1), "the default");
    let written = lines(3);
    let summary = write_all(&counted, &key(1), &written).await.finish().await.unwrap();
    assert!(!summary.truncated);
    assert_eq!(
        counter.of("CloudWatch Logs", "CreateLogStream") + counter.of("CloudWatch Logs", "PutLogEvents"),
        0,
        "no stream for an attempt that ended within stream_after: {:?}",
        counter.snapshot()
    );
    // Its lines are in the finished log (one table item), none in CloudWatch.
    assert_eq!(counter.total(), 1, "{:?}", counter.snapshot());
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines, written);
    assert_no_stream(&clients, &logs).await;
}

#[tokio::test]
async fn a_longer_attempt_streams_its_lines_once_it_has_run_stream_after() {
    let stream_after = Duration::from_secs(3);
    let (store, _clients, _) = store_with(|l| l.stream_after = stream_after).await;
    let started = Instant::now();
    let written = lines(2);
    let writer = write_all(&store, &key(1), &written).await;
    // Read at once: nothing sent yet (the first batch waits for `stream_after`).
    assert!(
        read_or_empty(&store, &key(1), &LogQuery::default())
            .await
            .lines
            .is_empty()
    );
    let running = read_until(&store, &LogQuery::default(), |p| p.lines.len() == 2).await;
    assert!(
        started.elapsed() >= stream_after,
        "streamed after {:?}",
        started.elapsed()
    );
    assert_eq!(running.lines, written);
    writer.finish().await.unwrap();
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines, written);
}

#[tokio::test]
async fn many_lines_go_out_in_batches_of_flush_lines() {
    let (store, _clients, _) = store_with(|l| {
        l.flush_lines = 100;
        l.flush_interval = Duration::from_secs(60);
    })
    .await;
    // 250 lines: two full batches go out at once; the last 50 wait (60 s) until finish.
    let written = lines(250);
    let writer = write_all(&store, &key(1), &written).await;
    let running = read_until(&store, &LogQuery::default(), |p| p.lines.len() >= 200).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let running_later = store.read(&key(1), &LogQuery::default()).await.unwrap();
    assert_eq!(running.lines.len(), 200);
    assert_eq!(running_later.lines.len(), 200);
    writer.finish().await.unwrap();
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines, written);
}

#[tokio::test]
async fn an_attempt_that_prints_nothing_makes_no_request_and_has_no_log() {
    let (store, counted, counter, clients, logs) = store_and_counted().await;
    let writer = counted.writer(&key(1)).await.unwrap();
    let summary = writer.finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (0, false));
    assert_eq!(
        counter.total(),
        0,
        "no stream, item or object for a silent attempt: {:?}",
        counter.snapshot()
    );
    // Nothing to read, before and after: sked-core shows that as an empty log.
    for query in [
        LogQuery::default(),
        LogQuery {
            tail: Some(10),
            ..Default::default()
        },
    ] {
        assert!(matches!(store.read(&key(1), &query).await, Err(LogError::NotFound)));
    }
    assert!(!object_exists(&clients, &logs, &key(1)).await);
    assert_no_stream(&clients, &logs).await;
}

#[tokio::test]
async fn attempts_are_kept_apart_and_unknown_ones_are_not_found() {
    let (store, _clients, _) = store_with(|_| {}).await;
    write_all(&store, &key(1), &lines(1)).await.finish().await.unwrap();
    let running = write_all(&store, &key(2), &lines(3)).await;
    assert_eq!(store.read(&key(1), &LogQuery::default()).await.unwrap().lines.len(), 1);
    let page = read_until_key(&store, &key(2), 3).await;
    assert_eq!(page.lines.len(), 3);

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
    let unsafe_key = LogKey {
        run_id: "a:b".into(),
        ..key(1)
    };
    assert!(matches!(
        store.read(&unsafe_key, &LogQuery::default()).await,
        Err(LogError::NotFound)
    ));
    assert!(store.writer(&unsafe_key).await.is_err());
    running.finish().await.unwrap();
}

async fn read_until_key(store: &CloudWatchLogStore, key: &LogKey, n: usize) -> LogPage {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let page = read_or_empty(store, key, &LogQuery::default()).await;
        if page.lines.len() >= n || Instant::now() > deadline {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn bootstrap_creates_the_bucket_with_a_lifecycle_rule_and_the_group_with_retention() {
    let mut config = with_logs(fresh_config());
    if let Some(logs) = config.logs.as_mut() {
        logs.retention_days = 45;
    }
    let clients = sked_aws::connect(&config).await;
    sked_aws::create_resources(&clients, &config).await.unwrap();
    // Twice: idempotent.
    sked_aws::create_resources(&clients, &config).await.unwrap();
    let logs = logs_config(&config);

    let lifecycle = clients
        .s3
        .get_bucket_lifecycle_configuration()
        .bucket(&logs.bucket)
        .send()
        .await
        .unwrap();
    let rule = &lifecycle.rules()[0];
    assert_eq!(rule.id(), Some(sked_aws::bootstrap::LOG_LIFECYCLE_RULE));
    assert_eq!(rule.expiration().and_then(|e| e.days()), Some(45));
    assert_eq!(rule.filter().and_then(|f| f.prefix()), Some("logs/"));

    let groups = clients
        .logs
        .describe_log_groups()
        .log_group_name_prefix(&logs.log_group)
        .send()
        .await
        .unwrap();
    let group = &groups.log_groups()[0];
    assert_eq!(group.log_group_name(), Some(logs.log_group.as_str()));
    assert_eq!(group.retention_in_days(), Some(60), "45 days rounds up to 60");
}
