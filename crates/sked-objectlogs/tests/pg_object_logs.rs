//! [`PgObjectLogs`] on real parts: a private PostgreSQL cluster (`sked_postgres::testing`) and
//! a moto server as the S3 (`sked_aws::testing`), no SDK mocks. The log contract (sked-testkit)
//! runs against it, each case on a fresh database and bucket; then what only this store does:
//! a finished log becomes one object and leaves the database, a running one is read from its
//! rows, a failed upload keeps the rows readable, a follower crosses from rows to object
//! without a gap, a silent attempt uploads nothing, and retention removes rows and objects.

use chrono::Duration;
use sked_core::ports::{LogError, LogKey, LogLine, LogQuery, LogRetention, LogStore, LogStream, LogWriter};
use sked_objectlogs::testing::{client, fresh_bucket, unique_bucket};
use sked_objectlogs::{Archived, LogBucket, ObjectLogs, PgObjectLogs};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgLogs, PgOptions};
use sked_testkit::contract::fixtures::{at_ms, tenant};
use std::sync::Arc;
use std::time::Instant;

/// A store on a fresh database and a fresh bucket (prefix `team/`), and its parts.
struct Fixture {
    /// The store under test.
    store: PgObjectLogs,
    /// Its database.
    db: PgDb,
    /// A client of the S3 server.
    s3: aws_sdk_s3::Client,
    /// Its bucket.
    bucket: LogBucket,
}

async fn fixture(cap: u64) -> Fixture {
    let s3 = client(&sked_aws::testing::moto().endpoint);
    let bucket = fresh_bucket(&s3, "team").await;
    on_bucket(cap, s3, bucket).await
}

/// A store whose bucket is `bucket` (created or not).
async fn on_bucket(cap: u64, s3: aws_sdk_s3::Client, bucket: LogBucket) -> Fixture {
    let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
        .await
        .expect("connect");
    let store = PgObjectLogs::new(
        PgLogs::new(db.clone()).with_cap(cap),
        ObjectLogs::new(s3.clone(), bucket.clone()),
    );
    Fixture { store, db, s3, bucket }
}

sked_testkit::log_contract!(|cap: u64| async move { Arc::new(fixture(cap).await.store) as Arc<dyn LogStore> });

fn key(run: &str) -> LogKey {
    LogKey {
        tenant: tenant("acme"),
        run_id: format!("{run}@20260301T000000.000Z").as_str().into(),
        attempt: 1,
    }
}

fn line(i: i64) -> LogLine {
    LogLine {
        ts: at_ms(i),
        stream: LogStream::Stdout,
        line: format!("line {i}"),
    }
}

fn texts(lines: &[LogLine]) -> Vec<String> {
    lines.iter().map(|l| l.line.clone()).collect()
}

fn expected(from: i64, to: i64) -> Vec<String> {
    (from..to).map(|i| format!("line {i}")).collect()
}

impl Fixture {
    /// A writer of `key` that has appended lines `0..n`.
    async fn writer(&self, key: &LogKey, n: i64) -> Box<dyn LogWriter> {
        let mut writer = self.store.writer(key).await.unwrap();
        for i in 0..n {
            writer.append(line(i)).await.unwrap();
        }
        writer
    }

    /// How many rows `key` has in `log_lines`.
    async fn rows(&self, key: &LogKey) -> i64 {
        let conn = self.db.get().await.unwrap();
        conn.query_one(
            "SELECT count(*) FROM log_lines WHERE tenant = $1 AND run_id = $2 AND attempt = $3",
            &[&key.tenant.as_str(), &key.run_id.as_str(), &i64::from(key.attempt)],
        )
        .await
        .unwrap()
        .get(0)
    }

    /// Every key in the bucket.
    async fn objects(&self) -> Vec<String> {
        let listed = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket.bucket)
            .send()
            .await
            .unwrap();
        listed
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect()
    }

    /// `key`'s object's body, if any.
    async fn object(&self, key: &LogKey) -> Option<String> {
        let got = self
            .s3
            .get_object()
            .bucket(&self.bucket.bucket)
            .key(self.bucket.key_of(key))
            .send()
            .await;
        let body = got.ok()?.body.collect().await.unwrap().into_bytes();
        Some(String::from_utf8(body.to_vec()).unwrap())
    }

    /// `key`'s whole log.
    async fn read(&self, key: &LogKey) -> Result<Vec<String>, LogError> {
        Ok(texts(&self.store.read(key, &LogQuery::default()).await?.lines))
    }

    /// Reads `key` until it holds `n` lines (its writer's last batch may still be on its way).
    async fn read_until(&self, key: &LogKey, n: usize) -> Vec<String> {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match self.read(key).await {
                Ok(lines) if lines.len() >= n => return lines,
                Ok(_) | Err(LogError::NotFound) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(Instant::now() < deadline, "{n} lines not readable in 5 s");
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test]
async fn a_finished_log_becomes_one_object_in_the_shared_format_and_its_rows_are_gone() {
    let f = fixture(1000).await;
    let k = key("report");
    f.writer(&k, 3).await.finish().await.unwrap();

    assert_eq!(f.rows(&k).await, 0);
    assert_eq!(f.objects().await, [format!("team/logs/acme/{}/1.jsonl", k.run_id)]);
    let body = f.object(&k).await.unwrap();
    assert_eq!(body.lines().count(), 3);
    assert_eq!(
        body.lines().next().unwrap(),
        r#"{"ts":"2026-03-01T00:00:00.000Z","stream":"stdout","line":"line 0"}"#
    );
    assert_eq!(f.read(&k).await.unwrap(), expected(0, 3));
}

#[tokio::test]
async fn a_log_read_while_running_comes_from_its_rows() {
    let f = fixture(1000).await;
    let k = key("report");
    let writer = f.writer(&k, 4).await;
    assert_eq!(f.read_until(&k, 4).await, expected(0, 4));
    assert_eq!(f.rows(&k).await, 4);
    assert!(f.objects().await.is_empty(), "nothing uploaded before finish");
    writer.finish().await.unwrap();
    assert_eq!(f.objects().await.len(), 1);
}

#[tokio::test]
async fn a_truncated_log_reads_the_same_from_its_object() {
    let f = fixture(20).await;
    let k = key("chatty");
    let summary = f.writer(&k, 10).await.finish().await.unwrap();
    assert!(summary.truncated);
    let page = f.store.read(&k, &LogQuery::default()).await.unwrap();
    assert_eq!(f.rows(&k).await, 0);
    assert!(page.truncated);
    assert_eq!(
        texts(&page.lines),
        ["line 0", "line 1", "line 2", "[sked: log truncated at 20 bytes]"]
    );
    assert!(f.object(&k).await.unwrap().ends_with(",\"truncated\":true}\n"));
}

#[tokio::test]
async fn a_follower_continues_from_the_rows_onto_the_object_without_a_gap_or_a_repeat() {
    let f = fixture(1000).await;
    let k = key("report");
    let mut writer = f.writer(&k, 3).await;
    f.read_until(&k, 3).await;
    let first = f.store.read(&k, &LogQuery::default()).await.unwrap();
    for i in 3..6 {
        writer.append(line(i)).await.unwrap();
    }
    writer.finish().await.unwrap();
    assert_eq!(f.rows(&k).await, 0, "the rest is read from the object");
    let follow = LogQuery {
        after: Some(first.cursor),
        ..Default::default()
    };
    let next = f.store.read(&k, &follow).await.unwrap();
    assert_eq!(texts(&next.lines), expected(3, 6));
    let end = LogQuery {
        after: Some(next.cursor),
        ..Default::default()
    };
    assert!(f.store.read(&k, &end).await.unwrap().lines.is_empty());
}

#[tokio::test]
async fn a_failed_upload_keeps_the_rows_and_the_log_stays_readable() {
    let s3 = client(&sked_aws::testing::moto().endpoint);
    let missing: LogBucket = format!("s3://{}", unique_bucket()).parse().unwrap();
    let f = on_bucket(1000, s3, missing).await;
    let k = key("report");
    let summary = f.writer(&k, 3).await.finish().await.unwrap();
    assert_eq!(summary.bytes, 18);
    assert_eq!(f.rows(&k).await, 3);
    assert_eq!(f.read(&k).await.unwrap(), expected(0, 3));
    assert!(f.store.archive(&k).await.is_err(), "archiving again fails the same way");
    assert_eq!(f.rows(&k).await, 3);
}

#[tokio::test]
async fn a_silent_attempt_uploads_nothing() {
    let f = fixture(1000).await;
    let k = key("quiet");
    let summary = f.store.writer(&k).await.unwrap().finish().await.unwrap();
    assert_eq!((summary.bytes, summary.truncated), (0, false));
    assert!(f.objects().await.is_empty());
    assert!(matches!(f.read(&k).await, Err(LogError::NotFound)));
    assert_eq!(f.store.archive(&k).await.unwrap(), Archived::Nothing);
}

/// A process that died between upload and delete leaves the log in both places: reads keep
/// answering from the rows (the same lines), and retention removes both.
#[tokio::test]
async fn a_log_left_in_both_places_reads_from_its_rows_and_retention_removes_both() {
    let f = fixture(1000).await;
    let k = key("crashed");
    let rows_only = PgLogs::new(f.db.clone());
    let mut writer = rows_only.writer(&k).await.unwrap();
    for i in 0..3 {
        writer.append(line(i)).await.unwrap();
    }
    writer.finish().await.unwrap();
    let copy = rows_only.rows_to_archive(&k).await.unwrap().unwrap();
    let meta = sked_objectlogs::ObjectMeta {
        lines: copy.lines,
        truncated: copy.truncated,
    };
    f.store.objects().put(&k, copy.body, meta).await.unwrap();
    assert_eq!(f.read(&k).await.unwrap(), expected(0, 3));

    // The lines are from t0 (2026-03-01); the object was written just now.
    let after_both = chrono::Utc::now() + Duration::minutes(1);
    assert_eq!(f.store.remove_before(after_both, 10).await.unwrap(), 4);
    assert_eq!(f.rows(&k).await, 0);
    assert!(f.objects().await.is_empty());
    assert!(matches!(f.read(&k).await, Err(LogError::NotFound)));
}

/// Retention removes objects last written before the cutoff, a bounded batch per call,
/// walking the bucket's logs once across the calls of a pass; newer ones stay.
#[tokio::test]
async fn retention_removes_old_objects_in_bounded_batches() {
    let f = fixture(1000).await;
    for run in 0..5 {
        f.writer(&key(&format!("r{run}")), 1).await.finish().await.unwrap();
    }
    // Something else in the bucket, outside sked's prefix, is never touched.
    f.s3.put_object()
        .bucket(&f.bucket.bucket)
        .key("team/other.txt")
        .body(Vec::from("x").into())
        .send()
        .await
        .unwrap();
    let before_them = chrono::Utc::now() - Duration::minutes(1);
    assert_eq!(f.store.remove_before(before_them, 2).await.unwrap(), 0);
    assert_eq!(f.objects().await.len(), 6);

    let after_them = chrono::Utc::now() + Duration::minutes(1);
    let batches = [
        f.store.remove_before(after_them, 2).await.unwrap(),
        f.store.remove_before(after_them, 2).await.unwrap(),
        f.store.remove_before(after_them, 2).await.unwrap(),
    ];
    assert_eq!(batches, [2, 2, 1]);
    assert_eq!(f.objects().await, ["team/other.txt"]);
    assert_eq!(f.store.remove_before(after_them, 2).await.unwrap(), 0);
}
