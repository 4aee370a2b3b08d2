//! The store, queue, work port and key store contract suites (sked-testkit) against SQLite:
//! each case gets a fresh database file in its own temporary directory, shared by store and
//! queue (and quotas, and the work port) the way the local deployment shares it.

use sked_core::ports::{Clock, DispatchQueue, JobStore, KeyStore, QuotaStore, WebhookSecrets};
use sked_embedded::sqlite::{SqliteDb, SqliteKeys, SqliteQueue, SqliteStore, SqliteWork};
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::work::WorkPorts;
use std::sync::Arc;

/// A fresh database in a temporary directory; the directory lives as long as the process
/// (leaked on purpose: the suites hand us no place to keep it, and it is tiny).
fn fresh_db() -> Arc<SqliteDb> {
    let dir = tempfile::tempdir().expect("tempdir").keep();
    Arc::new(SqliteDb::open(dir.join("sked.db")).expect("open sqlite"))
}

sked_testkit::store_contract!(async || Arc::new(SqliteStore::new(fresh_db())) as Arc<dyn JobStore>);

sked_testkit::concurrency_contract!(async || Arc::new(SqliteStore::new(fresh_db())) as Arc<dyn JobStore>);
sked_testkit::dependency_contract!(async || Arc::new(SqliteStore::new(fresh_db())) as Arc<dyn JobStore>);

sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
    Arc::new(SqliteQueue::new(fresh_db(), clock as Arc<dyn Clock>)) as Arc<dyn DispatchQueue>
});

sked_testkit::work_contract!(|clock: Arc<ManualClock>| async move {
    let db = fresh_db();
    let as_clock = clock.clone() as Arc<dyn Clock>;
    WorkPorts {
        store: Arc::new(SqliteStore::new(db.clone())),
        queue: Arc::new(SqliteQueue::new(db.clone(), as_clock.clone())),
        work: Arc::new(SqliteWork::new(db, as_clock)),
        clock,
    }
});

sked_testkit::keys_contract!(async || Arc::new(SqliteKeys::new(fresh_db())) as Arc<dyn KeyStore>);

sked_testkit::quota_contract!(async || {
    let store = Arc::new(SqliteStore::new(fresh_db()));
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = Arc::new(SqliteStore::new(fresh_db()));
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});
