//! [`SqliteDb`]: one database file shared by the store, the queue, and every process that
//! opens it (`sked server`, `sked worker`s).
//!
//! - One writer connection, owned by one writer thread. Writes are closures sent to it;
//!   it runs whatever has queued up (at most [`GROUP_MAX`]) in one `BEGIN IMMEDIATE`
//!   transaction and commits once (group commit). A closure that fails must leave no trace
//!   while the others' changes stay: the group first runs without savepoints (a savepoint
//!   copies every page a closure touches into its sub-journal: ~8 % of the writer's time);
//!   if any closure fails, the transaction is rolled back and the group replayed with each
//!   closure in its own `SAVEPOINT`, rolled back to it if it fails again. Closures are
//!   therefore `FnMut` and must depend only on what they captured and what they read in the
//!   transaction. Each closure still reads and writes under the file's write lock, so its
//!   conditional update holds in this process and against other processes (SQLite's file
//!   lock serialises writers; `busy_timeout` makes them wait their turn). Answers are sent
//!   only after the commit: a caller never sees a result that is not durable in the file.
//! - WAL checkpoints run on a checkpointer thread with its own connection (`PASSIVE`, asked
//!   for every [`CHECKPOINT_COMMITS`] commits or [`CHECKPOINT_ROWS`] rows changed), not inside a commit of the writer thread: a checkpoint
//!   syncs the file, and on a real disk that stalled every write for tens of milliseconds
//!   (stream lag p99 went from ~110 ms to single digits; see BENCHMARKS.md). Only when the
//!   WAL still holds more than [`WAL_LIMIT_FRAMES`] after a pass does the writer checkpoint
//!   itself, between two groups, to bound the WAL (at 200k jobs it does; at 1M the file
//!   still grew to ~2.3 GiB — open, see BENCHMARKS.md).
//! - A small pool of read-only connections for plain reads; WAL lets them run beside the
//!   writer. Reads run in `tokio::task::spawn_blocking`, never on the async threads.
//!
//! Must not: hold any in-process lock that correctness depends on across processes. The
//! writer thread only serialises this process's use of its one connection.

use super::error::{OpenError, TxError, is_busy, is_not_a_database};
use super::schema::{self, MigrateError};
use rusqlite::{Connection, OpenFlags};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// Most writes committed together in one transaction.
pub const GROUP_MAX: usize = 256;

/// Commits, or rows changed, after which the writer asks the checkpointer for a pass
/// (whichever comes first). Asking after every commit kept the checkpointer syncing the file
/// nonstop under many small commits, which slowed the writer down.
pub const CHECKPOINT_COMMITS: u32 = 100;

/// See [`CHECKPOINT_COMMITS`].
pub const CHECKPOINT_ROWS: u64 = 2_000;

/// WAL frames (pages) left after the checkpointer's last pass above which the writer
/// checkpoints itself, between two groups: under nonstop bulk writing a checkpoint beside the
/// writer never catches up, and the WAL (restarted only after a complete checkpoint) would
/// grow without bound. 16,384 pages of 4 KiB = 64 MiB.
pub const WAL_LIMIT_FRAMES: u32 = 16_384;

/// How long a `RESTART` checkpoint may wait for readers (and hold writers back) before it
/// gives up until the next pass.
pub const RESTART_WAIT: Duration = Duration::from_millis(2);

/// The size the WAL file is cut back to when the WAL restarts (`journal_size_limit`): the
/// same 64 MiB as [`WAL_LIMIT_FRAMES`].
pub const WAL_SIZE_LIMIT_BYTES: i64 = WAL_LIMIT_FRAMES as i64 * 4096;

/// Settings for opening a database file. `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long a statement waits for another connection's lock before failing with a
    /// transient error. Default 5 s.
    pub busy_timeout: Duration,
    /// Read connections kept open for reuse. Default 16 (every worker slot reads while it
    /// claims; a connection opened past the pool re-reads the schema on first use).
    pub readers: usize,
    /// Prepared statements cached per connection. Default 64.
    pub statement_cache: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            readers: 16,
            statement_cache: 64,
        }
    }
}

/// An open sked database file. Cheap to share behind an `Arc`; give it to
/// [`super::SqliteStore::new`] and [`super::SqliteQueue::new`].
#[derive(Debug)]
pub struct SqliteDb {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The file.
    path: PathBuf,
    /// Settings it was opened with.
    options: SqliteOptions,
    /// Sends writes to the writer thread (which owns the one writing connection).
    writes: Mutex<Option<mpsc::Sender<WriteJob>>>,
    /// The writer thread, joined on drop.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Idle read-only connections.
    readers: Mutex<Vec<Connection>>,
    /// Woken after every enqueue in this process, so long polls here return at once.
    enqueued: Notify,
}

impl SqliteDb {
    /// Opens (creating if needed) the database at `path` with default options.
    /// Blocking: call it at startup, or inside `spawn_blocking`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed, with missing parent directories) the database at
    /// `path`: WAL journal, `synchronous = NORMAL`, foreign keys on, schema migrated to the
    /// latest version. Refuses a file that is not a sked database, and reports a file
    /// another process keeps locked.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let classify = |e: rusqlite::Error| classify(&path, &options, e);
        let refused = |e: MigrateError| match e {
            MigrateError::Sql(e) => classify(e),
            MigrateError::NotSked(reason) => OpenError::NotSked {
                path: path.clone(),
                reason,
                source: None,
            },
            MigrateError::TooNew(found) => OpenError::TooNew {
                path: path.clone(),
                found,
                supported: schema::LATEST,
            },
        };

        let mut writer = Connection::open(&path).map_err(classify)?;
        configure(&writer, &options).map_err(classify)?;
        // Before anything is written (switching to WAL rewrites the header): a file that is
        // not ours stays exactly as it was.
        schema::check_ours(&writer).map_err(refused)?;
        let mode: String = writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(classify)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(OpenError::Setup {
                path,
                reason: format!("journal mode stayed {mode:?}, WAL is required"),
            });
        }
        writer.pragma_update(None, "synchronous", "NORMAL").map_err(classify)?;
        // A WAL file keeps its high-water size after the WAL restarts unless told otherwise:
        // a burst of bulk writes (a million jobs created) would leave it at gigabytes.
        writer
            .pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)
            .map_err(classify)?;
        // Each write of a group runs in a savepoint, whose sub-journal spills to a temporary
        // file past 64 KiB: every group created and deleted one (a third of the writer
        // thread's time in a no-op burst went to ext4 create/unlink). Keep it in memory.
        writer.pragma_update(None, "temp_store", "MEMORY").map_err(classify)?;
        schema::migrate(&mut writer).map_err(refused)?;

        let reader = open_reader(&path, &options).map_err(classify)?;
        // The writer never checkpoints in its commits; the checkpointer does, beside it.
        writer.pragma_update(None, "wal_autocheckpoint", 0).map_err(classify)?;
        let checkpointer = Connection::open(&path).map_err(classify)?;
        configure(&checkpointer, &options).map_err(classify)?;
        let (checkpoints, wanted) = mpsc::sync_channel::<()>(1);
        let busy_timeout = options.busy_timeout;
        let wal_frames = Arc::new(AtomicU32::new(0));
        let wal_frames_writer = wal_frames.clone();
        std::thread::Builder::new()
            .name("sked-sqlite-checkpoint".into())
            .spawn(move || {
                while wanted.recv().is_ok() {
                    if let Some(left) = checkpoint(&checkpointer) {
                        wal_frames.store(left, Ordering::Relaxed);
                        if left == 0 {
                            restart_wal(&checkpointer, busy_timeout);
                        }
                    }
                }
            })
            .map_err(|e| OpenError::Setup {
                path: path.clone(),
                reason: format!("cannot start the checkpoint thread: {e}"),
            })?;
        let (writes, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sked-sqlite-writer".into())
            .spawn(move || writer_loop(writer, queue, checkpoints, wal_frames_writer))
            .map_err(|e| OpenError::Setup {
                path: path.clone(),
                reason: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(SqliteDb {
            inner: Arc::new(Inner {
                path,
                options,
                writes: Mutex::new(Some(writes)),
                writer: Mutex::new(Some(thread)),
                readers: Mutex::new(vec![reader]),
                enqueued: Notify::new(),
            }),
        })
    }

    /// The file this handle opened.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the writer connection inside a `BEGIN IMMEDIATE` transaction (shared
    /// with the other writes queued at the same time). Answers once committed; `f`'s changes
    /// are rolled back if it returns an error. `f` may run more than once (a group is
    /// replayed when one of its writes fails), each time from the same state of the file.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, TxError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Answer<T>>();
        let job: WriteJob = Box::new(Pending { f, result: None, reply });
        let sent = match &*self.inner.writes.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(writes) => writes.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(TxError::Sql(rusqlite::Error::InvalidQuery));
        }
        match answer.await {
            Ok(Answer::Done(out)) => out,
            Ok(Answer::Panicked(panic)) => std::panic::resume_unwind(panic),
            Err(_) => Err(TxError::Sql(rusqlite::Error::InvalidQuery)),
        }
    }

    /// Runs `f` on a read-only connection from the pool, on the blocking pool.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, TxError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || {
            let idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let conn = match idle {
                Some(conn) => conn,
                None => open_reader(&inner.path, &inner.options)?,
            };
            let out = f(&conn);
            let mut idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < inner.options.readers {
                idle.push(conn);
            }
            out
        })
        .await
    }

    /// Wakes this process's long polls: something was just enqueued.
    pub(crate) fn notify_enqueued(&self) {
        self.inner.enqueued.notify_waiters();
    }

    /// The notifier [`Self::notify_enqueued`] wakes.
    pub(crate) fn enqueued(&self) -> &Notify {
        &self.inner.enqueued
    }
}

/// Runs `f` on tokio's blocking pool; a panic inside is resumed here.
async fn run_blocking<T, F>(f: F) -> Result<T, TxError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, TxError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(out) => out,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(TxError::Join(e)),
    }
}

/// Per-connection settings shared by the writer and the readers.
fn configure(conn: &Connection, options: &SqliteOptions) -> rusqlite::Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    conn.set_prepared_statement_cache_capacity(options.statement_cache);
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// A read-only connection (the writer has already created the file and set WAL).
fn open_reader(path: &Path, options: &SqliteOptions) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    configure(&conn, options)?;
    Ok(conn)
}

/// Turns an SQLite error met while opening into the error people should read.
fn classify(path: &Path, options: &SqliteOptions, e: rusqlite::Error) -> OpenError {
    let path = path.to_path_buf();
    if is_not_a_database(&e) {
        OpenError::NotSked {
            path,
            reason: e.to_string(),
            source: Some(e),
        }
    } else if is_busy(&e) {
        OpenError::Locked {
            path,
            waited_ms: options.busy_timeout.as_millis(),
            source: e,
        }
    } else {
        OpenError::Sqlite { path, source: e }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel ends the writer thread once it has committed what it holds;
        // it runs `PRAGMA optimize` and closes the connection on its way out.
        drop(self.writes.get_mut().unwrap_or_else(PoisonError::into_inner).take());
        if let Some(thread) = self.writer.get_mut().unwrap_or_else(PoisonError::into_inner).take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

/// What a write answers its caller: its result, or the panic of its closure.
enum Answer<T> {
    /// The closure's result, or the commit's failure.
    Done(Result<T, TxError>),
    /// The closure panicked (its savepoint was rolled back); resumed in the caller.
    Panicked(Box<dyn Any + Send>),
}

/// One queued write, its closure's type erased.
trait Write: Send {
    /// Runs the closure on `conn` (again, if it ran before: the result replaces the earlier
    /// one); whether it succeeded.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Sends the answer once the group's fate is known: the closure's result if it ran and
    /// the group committed, else the error that stopped it.
    fn deliver(self: Box<Self>, outcome: Result<(), &rusqlite::Error>);
}

/// A write as queued.
type WriteJob = Box<dyn Write>;

/// A write's closure, then its result, and where its answer goes.
struct Pending<T, F> {
    /// The closure.
    f: F,
    /// Its result (or panic), once it has run.
    result: Option<std::thread::Result<Result<T, TxError>>>,
    /// The caller.
    reply: oneshot::Sender<Answer<T>>,
}

impl<T, F> Write for Pending<T, F>
where
    T: Send + 'static,
    F: FnMut(&Connection) -> Result<T, TxError> + Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let f = &mut self.f;
        let result = catch_unwind(AssertUnwindSafe(|| f(conn)));
        let ok = matches!(result, Ok(Ok(_)));
        self.result = Some(result);
        ok
    }

    fn deliver(self: Box<Self>, outcome: Result<(), &rusqlite::Error>) {
        let answer = match (self.result, outcome) {
            (Some(Err(panic)), _) => Answer::Panicked(panic),
            (Some(Ok(Err(e))), _) => Answer::Done(Err(e)),
            (Some(Ok(Ok(v))), Ok(())) => Answer::Done(Ok(v)),
            (_, Err(e)) => Answer::Done(Err(TxError::Sql(copy_error(e)))),
            (None, Ok(())) => Answer::Done(Err(TxError::Sql(rusqlite::Error::InvalidQuery))),
        };
        let _ = self.reply.send(answer);
    }
}

/// The writer thread: takes every write queued (up to [`GROUP_MAX`]), runs them in one
/// transaction, commits, answers. Ends when every sender is gone.
fn writer_loop(
    conn: Connection,
    queue: mpsc::Receiver<WriteJob>,
    checkpoints: mpsc::SyncSender<()>,
    wal_frames: Arc<AtomicU32>,
) {
    let (mut commits, mut rows_at) = (0u32, conn.total_changes());
    let mut group: Vec<WriteJob> = Vec::with_capacity(GROUP_MAX);
    let mut ran: Vec<(WriteJob, Option<rusqlite::Error>)> = Vec::with_capacity(GROUP_MAX);
    while let Ok(first) = queue.recv() {
        group.push(first);
        while group.len() < GROUP_MAX {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        if let Err(e) = run_group(&conn, &mut group, &mut ran) {
            // No transaction (the file is locked past the busy timeout): every write of the
            // group fails with that error.
            if !conn.is_autocommit() {
                let _ = exec_cached(&conn, "ROLLBACK");
            }
            for job in group.drain(..) {
                job.deliver(Err(&e));
            }
            continue;
        }
        let committed = exec_cached(&conn, "COMMIT");
        if committed.is_err() {
            let _ = exec_cached(&conn, "ROLLBACK");
        }
        if wal_frames.load(Ordering::Relaxed) > WAL_LIMIT_FRAMES {
            // Nonstop bulk writing: checkpoint here, between groups, so it can complete and
            // the next transaction restart the WAL from its beginning. PASSIVE: never waits
            // for readers (RESTART could hold every write of this process for the busy
            // timeout, and measured no better at 1M jobs).
            if let Some(left) = checkpoint(&conn) {
                wal_frames.store(left, Ordering::Relaxed);
            }
        } else {
            commits += 1;
            let rows = conn.total_changes();
            if commits >= CHECKPOINT_COMMITS || rows.wrapping_sub(rows_at) >= CHECKPOINT_ROWS {
                (commits, rows_at) = (0, rows);
                // Full means a pass is already asked for; it covers these commits too.
                let _ = checkpoints.try_send(());
            }
        }
        for (job, failed) in ran.drain(..) {
            match (&failed, &committed) {
                (Some(e), _) | (None, Err(e)) => job.deliver(Err(e)),
                (None, Ok(())) => job.deliver(Ok(())),
            }
        }
    }
    // Let SQLite refresh its planner statistics where they are stale; cheap, and failure
    // (a busy file) only means it happens another time. Then fold the WAL back into the file.
    let _ = conn.execute_batch("PRAGMA optimize;");
    drop(checkpoints);
    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
}

/// After a complete passive checkpoint: restarts the WAL from its beginning if it can within
/// [`RESTART_WAIT`] (a `RESTART` checkpoint waits for readers still on the WAL, and writers
/// wait while it is pending). Under a steady light load every write commits alone, and the
/// idle workers' polls keep a reader on the WAL almost always, so a passive checkpoint never
/// let the WAL restart: it grew to hundreds of MiB, and cutting it back stalled writes.
fn restart_wal(conn: &Connection, busy_timeout: Duration) {
    if conn.busy_timeout(RESTART_WAIT).is_ok() {
        let _ = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
    }
    let _ = conn.busy_timeout(busy_timeout);
}

/// Runs a group's writes in one transaction, left open for the caller to commit: first all
/// of them without savepoints; if one fails, the transaction is rolled back and every write
/// replayed in its own savepoint, so that only the failing ones leave no trace. Each write
/// moves to `ran` with the error of its savepoint statements, if any. An error here means
/// no transaction could begin; the writes are then still in `group`.
fn run_group(
    conn: &Connection,
    group: &mut Vec<WriteJob>,
    ran: &mut Vec<(WriteJob, Option<rusqlite::Error>)>,
) -> rusqlite::Result<()> {
    exec_cached(conn, "BEGIN IMMEDIATE")?;
    if group.iter_mut().all(|job| !conn.is_autocommit() && job.run(conn)) {
        ran.extend(group.drain(..).map(|job| (job, None)));
        return Ok(());
    }
    if !conn.is_autocommit() {
        exec_cached(conn, "ROLLBACK")?;
    }
    exec_cached(conn, "BEGIN IMMEDIATE")?;
    for mut job in group.drain(..) {
        // An I/O or disk-full failure can end the whole transaction early; the writes after
        // it must not run outside one.
        let failed = if conn.is_autocommit() {
            Some(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the group's transaction ended early".into()),
            ))
        } else {
            run_in_savepoint(conn, job.as_mut())
        };
        ran.push((job, failed));
    }
    Ok(())
}

/// A `PASSIVE` checkpoint on `conn`: the WAL frames it could not copy yet (`None` if it
/// failed). Zero means complete: the next write transaction restarts the WAL.
fn checkpoint(conn: &Connection) -> Option<u32> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        let (log, done): (i64, i64) = (r.get(1)?, r.get(2)?);
        Ok(u32::try_from((log - done).max(0)).unwrap_or(u32::MAX))
    })
    .ok()
}

/// Runs one write in its own savepoint: released if it succeeded, rolled back if not.
/// Returns the error of the savepoint statements themselves, if one failed.
fn run_in_savepoint(conn: &Connection, job: &mut dyn Write) -> Option<rusqlite::Error> {
    if let Err(e) = exec_cached(conn, "SAVEPOINT w") {
        return Some(e);
    }
    let ended = if job.run(conn) {
        exec_cached(conn, "RELEASE w")
    } else {
        exec_cached(conn, "ROLLBACK TO w").and_then(|()| exec_cached(conn, "RELEASE w"))
    };
    ended.err()
}

/// Runs one transaction-control statement through the connection's statement cache: these
/// run several times per group, and parsing them each time was ~10 % of the writer thread.
pub(crate) fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// A copy of an SQLite error, for each write of a group whose commit failed.
fn copy_error(e: &rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, msg) => rusqlite::Error::SqliteFailure(*code, msg.clone()),
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many rows `t` holds with key `k`.
    fn count(conn: &Connection, k: i64) -> Result<i64, TxError> {
        Ok(conn.query_row("SELECT count(*) FROM t WHERE k = ?1", [k], |r| r.get(0))?)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failing_or_panicking_write_leaves_no_trace_and_the_rest_of_its_group_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(SqliteDb::open(dir.path().join("sked.db")).unwrap());
        db.write(|c| Ok(c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")?))
            .await
            .unwrap();
        // The writer thread is held inside a first write until the others have been sent,
        // so they run as one group.
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let held = tokio::spawn({
            let db = db.clone();
            // Replay-safe, as every write must be: the group may run it twice.
            let mut released = false;
            async move {
                db.write(move |_| {
                    released = released || gate.recv_timeout(Duration::from_secs(10)).is_ok();
                    Ok(released)
                })
                .await
            }
        });
        let insert = |k: i64, outcome: Result<(), &'static str>| {
            let db = db.clone();
            tokio::spawn(async move {
                db.write(move |c| {
                    c.execute("INSERT INTO t (k) VALUES (?1)", [k])?;
                    match outcome {
                        Ok(()) => Ok(k),
                        Err("panic") => panic!("write {k} panics"),
                        Err(why) => Err(TxError::bad(why)),
                    }
                })
                .await
            })
        };
        let writes = [
            insert(1, Ok(())),
            insert(2, Err("refused")),
            insert(3, Ok(())),
            insert(4, Err("panic")),
            insert(5, Ok(())),
        ];
        // On this single-threaded runtime, yielding lets every spawned write send itself.
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        assert!(held.await.unwrap().unwrap(), "the first write was released");

        let mut answers = Vec::new();
        for write in writes {
            answers.push(match write.await {
                Ok(Ok(k)) => format!("ok {k}"),
                Ok(Err(e)) => format!("err {e:?}"),
                Err(join) => format!("panicked {}", join.is_panic()),
            });
        }
        assert_eq!(answers[0], "ok 1");
        assert!(answers[1].starts_with("err "), "{}", answers[1]);
        assert_eq!(answers[2], "ok 3");
        assert_eq!(answers[3], "panicked true");
        assert_eq!(answers[4], "ok 5");
        let kept = db
            .read(|c| (1..=5).map(|k| count(c, k)).collect::<Result<Vec<_>, _>>())
            .await
            .unwrap();
        assert_eq!(kept, [1, 0, 1, 0, 1], "rows of keys 1..=5 after the group");
    }

    #[tokio::test]
    async fn a_group_without_failures_runs_each_write_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(SqliteDb::open(dir.path().join("sked.db")).unwrap());
        db.write(|c| Ok(c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, n INTEGER NOT NULL)")?))
            .await
            .unwrap();
        let writes: Vec<_> = (0..50)
            .map(|k| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut runs = 0;
                    db.write(move |c| {
                        runs += 1;
                        c.execute("INSERT INTO t (k, n) VALUES (?1, ?2)", [k, runs])?;
                        Ok(runs)
                    })
                    .await
                })
            })
            .collect();
        let mut runs = Vec::new();
        for write in writes {
            runs.push(write.await.unwrap().unwrap());
        }
        assert!(runs.iter().all(|&n| n == 1), "{runs:?}");
    }
}
