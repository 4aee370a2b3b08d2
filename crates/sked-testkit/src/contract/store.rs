//! The store contract: every [`JobStore`] adapter must pass these cases.
//!
//! Each case takes a fresh, empty store and checks one promise of the trait doc (in
//! sked-core's `ports/store.rs`). Cases only use the port, fixed instants from
//! [`fixtures`](super::fixtures), and never the wall clock.
//! Run them all with [`store_contract!`](crate::store_contract).
//!
//! Long because it is a list: one case per promise of the port (about 60), each a few dozen
//! lines, in the order of the trait's methods.

pub use sked_core::ports::store::JobStore;

use super::claiming::without_jobs;
use super::fixtures::{
    at, claims, completion, firing, job, job_with_labels, one_shot, planned_firing, result, run, run_keys, spec, t0,
    tenant, worker,
};
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::{Job, JobState, Overlap};
use sked_core::ports::store::{
    AttemptResult, ClaimBatch, ClaimOutcome, Completion, FiredRunListing, JobClaim, JobFilter, JobStoreExt, Page,
    PageRequest, RunFilter, RunTransition, StoreError,
};
use sked_core::run::{Attempt, AttemptOutcome, Lease, Run, RunState, Trigger};
use sked_core::timestamp::Timestamp;
use std::sync::Arc;

/// The store under test.
pub type Store = Arc<dyn JobStore>;

// ----- helpers -----

async fn create(store: &Store, jobs: &[Job]) {
    store.create_jobs(jobs, None).await.expect("create_jobs");
}

async fn insert(store: &Store, r: &Run) {
    assert!(
        store.insert_run(r).await.expect("insert_run"),
        "run {} should be new",
        r.run_id
    );
}

async fn get(store: &Store, r: &Run) -> Run {
    store
        .get_run(&r.tenant, &r.run_id)
        .await
        .expect("get_run")
        .expect("run exists")
}

/// Claims `r` for `w` at `now` with a lease until `until`; panics unless Claimed.
async fn claim(store: &Store, r: &Run, w: &str, now: Timestamp, until: Timestamp) -> (Run, u64) {
    match store
        .claim_one(&r.tenant, &r.run_id, &worker(w), now, until)
        .await
        .expect("claim")
    {
        ClaimOutcome::Claimed { run, token } => (run, token),
        other => panic!("expected Claimed, got {other:?}"),
    }
}

/// `j` as read now, asserted COMPLETED with nothing left to fire and its version unmoved
/// (a firing bumps none), with no job due at all.
async fn completed_for_good(store: &Store, j: &Job) -> Job {
    let after = store.get_job(&j.tenant, &j.id).await.unwrap().unwrap();
    assert_eq!(
        (after.state, after.next_fire_at, after.version),
        (JobState::Completed, None, j.version)
    );
    assert!(store.due_jobs(at(10_000), 10).await.unwrap().is_empty());
    assert_eq!(store.next_due_at().await.unwrap(), None);
    after
}

fn page(limit: usize, cursor: Option<String>) -> PageRequest {
    PageRequest { cursor, limit }
}

fn ids(p: &Page<Job>) -> Vec<&str> {
    p.items.iter().map(|j| j.id.as_str()).collect()
}

fn run_ids(runs: &[Run]) -> Vec<String> {
    runs.iter().map(|r| r.run_id.0.clone()).collect()
}

fn is_conflict<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Conflict(_)))
}

fn is_fenced<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Fenced))
}

fn is_not_found<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::NotFound))
}

async fn all_runs(store: &Store, t: &TenantId) -> Vec<Run> {
    store
        .list_runs(t, &RunFilter::default(), &page(1000, None))
        .await
        .expect("list_runs")
        .items
}

// ----- jobs -----

/// `create_jobs` inserts every job; each reads back equal.
pub async fn create_jobs_inserts_all(store: Store) {
    let (a, b) = (job("t1", "a"), job("t1", "b"));
    create(&store, &[a.clone(), b.clone()]).await;
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(a));
    assert_eq!(store.get_job(&b.tenant, &b.id).await.unwrap(), Some(b));
}

/// One existing id fails the whole batch: nothing of it is written.
pub async fn create_jobs_is_all_or_nothing(store: Store) {
    create(&store, &[job("t1", "a")]).await;
    let res = store
        .create_jobs(&[job("t1", "b"), job("t1", "a")], Some(("k", "fp")))
        .await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert_eq!(
        store.get_job(&tenant("t1"), &"b".into()).await.unwrap(),
        None,
        "b must not be written"
    );
}

/// An id that exists in a live state (ACTIVE, PAUSED, COMPLETED) is a conflict; the stored
/// job is unchanged. The same id in another tenant is no conflict.
pub async fn create_jobs_conflicts_on_live_id(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    for state in [JobState::Active, JobState::Paused, JobState::Completed] {
        let mut current = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
        let (expected, next) = (current.version, current.next_fire_at);
        current.state = state;
        current.version += 1;
        store.update_job(&current, expected, next).await.unwrap();
        let mut again = job("t1", "a");
        again.spec = spec("other");
        let res = store.create_jobs(&[again], None).await;
        assert!(is_conflict(&res), "state {state}: expected Conflict, got {res:?}");
        assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(current));
    }
    create(&store, &[job("t2", "a")]).await;
}

/// A DELETED job of that id is replaced by the new one.
pub async fn create_jobs_replaces_a_deleted_job(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let mut deleted = a.clone();
    deleted.state = JobState::Deleted;
    deleted.version = 2;
    store.update_job(&deleted, 1, a.next_fire_at).await.unwrap();
    let mut fresh = job("t1", "a");
    fresh.spec = spec("second life");
    fresh.created_at = at(100);
    fresh.updated_at = at(100);
    create(&store, &[fresh.clone()]).await;
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(fresh));
}

/// With an idempotency key, `(key, fingerprint) → job ids` is recorded for the tenant.
pub async fn create_jobs_records_idempotency_key(store: Store) {
    let t = tenant("t1");
    assert_eq!(store.idempotency_lookup(&t, "k1").await.unwrap(), None);
    store
        .create_jobs(&[job("t1", "a"), job("t1", "b")], Some(("k1", "fp-1")))
        .await
        .unwrap();
    assert_eq!(
        store.idempotency_lookup(&t, "k1").await.unwrap(),
        Some(("fp-1".to_string(), vec![JobId::from("a"), JobId::from("b")]))
    );
    assert_eq!(store.idempotency_lookup(&t, "k2").await.unwrap(), None);
    assert_eq!(
        store.idempotency_lookup(&tenant("t2"), "k1").await.unwrap(),
        None,
        "keys are per tenant"
    );
}

/// A failed create records no key (same transaction).
pub async fn create_jobs_failed_records_no_idempotency_key(store: Store) {
    create(&store, &[job("t1", "a")]).await;
    let res = store.create_jobs(&[job("t1", "a")], Some(("k1", "fp"))).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert_eq!(store.idempotency_lookup(&tenant("t1"), "k1").await.unwrap(), None);
}

/// A key already recorded cannot be recorded again: the second create is a conflict and
/// writes nothing (the caller then looks the key up and answers from it).
pub async fn create_jobs_reused_idempotency_key_conflicts(store: Store) {
    store
        .create_jobs(&[job("t1", "a")], Some(("k1", "fp-1")))
        .await
        .unwrap();
    let res = store.create_jobs(&[job("t1", "b")], Some(("k1", "fp-2"))).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert_eq!(store.get_job(&tenant("t1"), &"b".into()).await.unwrap(), None);
    assert_eq!(
        store.idempotency_lookup(&tenant("t1"), "k1").await.unwrap(),
        Some(("fp-1".to_string(), vec![JobId::from("a")]))
    );
}

/// `get_job` returns jobs in any state, only to their tenant; unknown ids are `None`.
pub async fn get_job_is_tenant_scoped(store: Store) {
    let mut a = job("t1", "a");
    a.state = JobState::Deleted;
    create(&store, std::slice::from_ref(&a)).await;
    assert_eq!(store.get_job(&tenant("t1"), &"a".into()).await.unwrap(), Some(a));
    assert_eq!(store.get_job(&tenant("t2"), &"a".into()).await.unwrap(), None);
    assert_eq!(store.get_job(&tenant("t1"), &"zz".into()).await.unwrap(), None);
}

/// `get_jobs` answers each (tenant, id) as `get_job` would, in order.
pub async fn get_jobs_answers_each_like_get_job(store: Store) {
    let (a1, b1, a2) = (job("t1", "a"), job("t1", "b"), job("t2", "a"));
    create(&store, &[a1.clone(), b1.clone()]).await;
    create(&store, std::slice::from_ref(&a2)).await;
    let asked = [
        (tenant("t2"), JobId::from("a")),
        (tenant("t1"), JobId::from("nope")),
        (tenant("t1"), JobId::from("b")),
        (tenant("t1"), JobId::from("a")),
    ];
    let answers = store.get_jobs(&asked).await.unwrap();
    assert_eq!(answers, vec![Some(a2), None, Some(b1), Some(a1)]);
    assert!(store.get_jobs(&[]).await.unwrap().is_empty());
}

/// `update_job` stores the job as given when the version matches, else Conflict and no change.
pub async fn update_job_compares_and_sets_version(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let mut v2 = a.clone();
    v2.version = 2;
    v2.state = JobState::Paused;
    v2.spec = spec("renamed");
    v2.next_fire_at = None;
    v2.updated_at = at(5);
    store.update_job(&v2, 1, a.next_fire_at).await.unwrap();
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(v2.clone()));

    let mut stale = a.clone();
    stale.version = 2;
    stale.spec = spec("lost update");
    let res = store.update_job(&stale, 1, a.next_fire_at).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(v2));
}

/// A sweep moves `next_fire_at` without bumping the version; an update read before it must
/// not undo the sweep: Conflict and no change.
pub async fn update_job_conflicts_when_a_sweep_moved_next_fire_at(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let swept = firing(&a, vec![run("t1", "a", 60)], Some(at(120)));
    store.fire_one(&swept).await.unwrap();
    let mut paused = a.clone();
    paused.version = 2;
    paused.state = JobState::Paused;
    let res = store.update_job(&paused, 1, a.next_fire_at).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    let stored = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((stored.state, stored.next_fire_at), (JobState::Active, Some(at(120))));
    paused.next_fire_at = stored.next_fire_at;
    store.update_job(&paused, 1, stored.next_fire_at).await.unwrap();
}

/// Updating a job that does not exist (for this tenant) is NotFound.
pub async fn update_job_unknown_is_not_found(store: Store) {
    create(&store, &[job("t1", "a")]).await;
    let zz = job("t1", "zz");
    let res = store.update_job(&zz, 1, zz.next_fire_at).await;
    assert!(is_not_found(&res), "expected NotFound, got {res:?}");
    let other = job("t2", "a");
    let res = store.update_job(&other, 1, other.next_fire_at).await;
    assert!(is_not_found(&res), "other tenant's job: expected NotFound, got {res:?}");
    assert_eq!(store.get_job(&tenant("t2"), &"a".into()).await.unwrap(), None);
}

/// Five jobs, limit 2: three pages in id order, the last with no cursor.
pub async fn list_jobs_pages_with_cursors(store: Store) {
    let jobs: Vec<Job> = ["e", "b", "d", "a", "c"].iter().map(|id| job("t1", id)).collect();
    create(&store, &jobs).await;
    create(&store, &[job("t0", "a0"), job("t2", "b0")]).await;
    let t = tenant("t1");
    let f = JobFilter::default();
    let p1 = store.list_jobs(&t, &f, &page(2, None)).await.unwrap();
    assert_eq!(ids(&p1), ["a", "b"]);
    assert!(p1.next_cursor.is_some());
    let p2 = store.list_jobs(&t, &f, &page(2, p1.next_cursor.clone())).await.unwrap();
    assert_eq!(ids(&p2), ["c", "d"]);
    assert!(p2.next_cursor.is_some());
    let p3 = store.list_jobs(&t, &f, &page(2, p2.next_cursor.clone())).await.unwrap();
    assert_eq!(ids(&p3), ["e"]);
    assert_eq!(p3.next_cursor, None);
    assert_eq!(p1.items[0], job("t1", "a"));
}

/// Without a state filter DELETED jobs are hidden; with one, only that state is listed.
pub async fn list_jobs_filters_by_state(store: Store) {
    let mut jobs = vec![job("t1", "a"), job("t1", "b"), job("t1", "c"), job("t1", "d")];
    jobs[1].state = JobState::Paused;
    jobs[2].state = JobState::Deleted;
    jobs[3].state = JobState::Completed;
    create(&store, &jobs).await;
    let t = tenant("t1");
    let list = async |state: Option<JobState>| {
        let p = store
            .list_jobs(&t, &JobFilter { state, labels: vec![] }, &page(10, None))
            .await
            .unwrap();
        p.items.iter().map(|j| j.id.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(list(None).await, ["a", "b", "d"]);
    assert_eq!(list(Some(JobState::Active)).await, ["a"]);
    assert_eq!(list(Some(JobState::Paused)).await, ["b"]);
    assert_eq!(list(Some(JobState::Deleted)).await, ["c"]);
    assert_eq!(list(Some(JobState::Completed)).await, ["d"]);
}

/// A label filter keeps jobs carrying every one of its pairs.
pub async fn list_jobs_filters_by_labels(store: Store) {
    create(
        &store,
        &[
            job_with_labels("t1", "a", &[("team", "core"), ("env", "prod")]),
            job_with_labels("t1", "b", &[("team", "core"), ("env", "dev")]),
            job_with_labels("t1", "c", &[("team", "web"), ("env", "prod")]),
            job_with_labels("t1", "d", &[]),
        ],
    )
    .await;
    let t = tenant("t1");
    let list = async |labels: &[(&str, &str)]| {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let p = store
            .list_jobs(&t, &JobFilter { state: None, labels }, &page(10, None))
            .await
            .unwrap();
        p.items.iter().map(|j| j.id.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(list(&[]).await, ["a", "b", "c", "d"]);
    assert_eq!(list(&[("team", "core")]).await, ["a", "b"]);
    assert_eq!(list(&[("env", "prod")]).await, ["a", "c"]);
    assert_eq!(list(&[("team", "core"), ("env", "prod")]).await, ["a"]);
    assert_eq!(list(&[("team", "nobody")]).await, Vec::<String>::new());
}

/// A tenant lists only its own jobs.
pub async fn list_jobs_is_tenant_scoped(store: Store) {
    create(&store, &[job("t1", "a"), job("t2", "b"), job("t2", "c")]).await;
    let p = store
        .list_jobs(&tenant("t2"), &JobFilter::default(), &page(10, None))
        .await
        .unwrap();
    assert_eq!(ids(&p), ["b", "c"]);
    assert_eq!(p.next_cursor, None);
    let p = store
        .list_jobs(&tenant("t3"), &JobFilter::default(), &page(10, None))
        .await
        .unwrap();
    assert!(p.items.is_empty());
}

/// `due_jobs`: ACTIVE jobs of any tenant with `next_fire_at <= horizon`, earliest first,
/// at most `limit`.
pub async fn due_jobs_horizon_order_limit_across_tenants(store: Store) {
    let mut jobs = vec![job("t1", "a"), job("t2", "b"), job("t1", "c"), job("t3", "d")];
    jobs[0].next_fire_at = Some(at(30));
    jobs[1].next_fire_at = Some(at(10));
    jobs[2].next_fire_at = Some(at(20));
    jobs[3].next_fire_at = Some(at(41));
    for j in &jobs {
        create(&store, std::slice::from_ref(j)).await;
    }
    let due = |js: Vec<Job>| js.iter().map(|j| j.id.0.clone()).collect::<Vec<_>>();
    assert_eq!(due(store.due_jobs(at(40), 10).await.unwrap()), ["b", "c", "a"]);
    assert_eq!(
        due(store.due_jobs(at(30), 10).await.unwrap()),
        ["b", "c", "a"],
        "horizon is inclusive"
    );
    assert_eq!(due(store.due_jobs(at(40), 2).await.unwrap()), ["b", "c"]);
    assert_eq!(due(store.due_jobs(at(5), 10).await.unwrap()), Vec::<String>::new());
    assert_eq!(store.due_jobs(at(40), 10).await.unwrap()[0], jobs[1]);
}

/// Only ACTIVE jobs are due; jobs with nothing left to fire are not.
pub async fn due_jobs_only_active(store: Store) {
    let mut jobs = vec![
        job("t1", "a"),
        job("t1", "b"),
        job("t1", "c"),
        job("t1", "d"),
        job("t1", "e"),
    ];
    jobs[1].state = JobState::Paused;
    jobs[2].state = JobState::Completed;
    jobs[3].state = JobState::Deleted;
    jobs[4].next_fire_at = None;
    create(&store, &jobs).await;
    let due = store.due_jobs(at(1000), 10).await.unwrap();
    assert_eq!(due.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["a"]);
}

/// `next_due_at` is the earliest `next_fire_at` of any ACTIVE job, `None` when there is none.
pub async fn next_due_at_is_earliest_active(store: Store) {
    assert_eq!(store.next_due_at().await.unwrap(), None);
    let mut jobs = vec![job("t1", "a"), job("t2", "b"), job("t1", "c")];
    jobs[0].next_fire_at = Some(at(30));
    jobs[1].next_fire_at = Some(at(20));
    jobs[2].next_fire_at = Some(at(5));
    jobs[2].state = JobState::Paused;
    for j in &jobs {
        create(&store, std::slice::from_ref(j)).await;
    }
    assert_eq!(store.next_due_at().await.unwrap(), Some(at(20)));
}

/// `fire` inserts the runs, sets `next_fire_at` and state, and leaves `version` alone.
pub async fn fire_inserts_runs_and_advances_job(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let r = run("t1", "a", 60);
    let inserted = store
        .fire_one(&firing(&a, vec![r.clone()], Some(at(120))))
        .await
        .unwrap();
    assert_eq!(inserted, vec![r.clone()]);
    assert_eq!(get(&store, &r).await, r);
    let after = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!(after.next_fire_at, Some(at(120)));
    assert_eq!(after.state, JobState::Active);
    assert_eq!(after.version, a.version, "sweeps do not bump version");
    let expected = Job {
        next_fire_at: Some(at(120)),
        ..a
    };
    assert_eq!(after, expected);
}

/// The skip records of a firing's plan are written with it; `record_skips` replaces a
/// record by its `from` (a pause opened, then closed); `skip_records` answers those reaching
/// into a window, latest `from` first, up to a limit, for that job only; a refused firing
/// writes none.
pub async fn fire_writes_its_skip_records_and_a_window_reads_them_back(store: Store) {
    use sked_core::firing::SkipReason;
    use sked_core::ledger::SkipRecord;
    let (a, b) = (job("t1", "a"), job("t1", "b"));
    create(&store, &[a.clone(), b.clone()]).await;
    let record = |from: i64, to: i64, count: u32, reason: SkipReason| SkipRecord {
        from: at(from),
        to: at(to),
        count,
        reason,
        alert: None,
    };
    let mut f = firing(&a, vec![run("t1", "a", 60)], Some(at(120)));
    f.skipped = vec![
        record(0, 30, 4, SkipReason::Misfire),
        record(40, 40, 1, SkipReason::Overlap),
    ];
    store.fire_one(&f).await.unwrap();
    assert!(store.fire_one(&f).await.is_err(), "the job moved on");
    let (t, a_id) = (tenant("t1"), a.id.clone());
    let all = store.skip_records(&t, &a_id, (at(0), at(1000)), 10).await.unwrap();
    assert_eq!(all, vec![f.skipped[1].clone(), f.skipped[0].clone()], "latest first");
    let reaching = store.skip_records(&t, &a_id, (at(30), at(40)), 10).await.unwrap();
    assert_eq!(
        reaching,
        vec![f.skipped[0].clone()],
        "a record reaching into the window by its end"
    );
    assert_eq!(
        store.skip_records(&t, &a_id, (at(0), at(1000)), 1).await.unwrap().len(),
        1
    );
    assert!(
        store
            .skip_records(&t, &b.id, (at(0), at(1000)), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .skip_records(&tenant("t2"), &a_id, (at(0), at(1000)), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let pause = SkipRecord::pause(at(100));
    store
        .record_skips(&t, &a_id, std::slice::from_ref(&pause))
        .await
        .unwrap();
    let open = sked_core::ledger::open();
    let window = (open - chrono::Duration::milliseconds(1), open);
    assert_eq!(
        store.skip_records(&t, &a_id, window, 10).await.unwrap(),
        vec![pause.clone()]
    );
    let closed = SkipRecord { to: at(150), ..pause };
    store
        .record_skips(&t, &a_id, std::slice::from_ref(&closed))
        .await
        .unwrap();
    assert!(
        store.skip_records(&t, &a_id, window, 10).await.unwrap().is_empty(),
        "closed"
    );
    let all = store.skip_records(&t, &a_id, (at(0), at(1000)), 10).await.unwrap();
    assert_eq!(all.first(), Some(&closed));
    assert_eq!(all.len(), 3, "replaced, not added");
}

/// Repeating a firing is a conflict (its `next_fire_at` moved on) and creates nothing.
pub async fn fire_twice_conflicts_and_creates_nothing(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let f = firing(&a, vec![run("t1", "a", 60)], Some(at(120)));
    store.fire_one(&f).await.unwrap();
    let mut again = f.clone();
    again.runs.push(run("t1", "a", 61));
    let res = store.fire_one(&again).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert_eq!(
        run_ids(&all_runs(&store, &a.tenant).await),
        run_ids(&[run("t1", "a", 60)])
    );
    assert_eq!(
        store.get_job(&a.tenant, &a.id).await.unwrap().unwrap().next_fire_at,
        Some(at(120))
    );
}

/// A firing made against an older version conflicts and changes nothing.
pub async fn fire_conflicts_when_version_moved(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let mut v2 = a.clone();
    v2.version = 2;
    v2.updated_at = at(1);
    store.update_job(&v2, 1, a.next_fire_at).await.unwrap();
    let mut f = firing(&a, vec![run("t1", "a", 60)], Some(at(120)));
    f.state = JobState::Completed;
    let res = store.fire_one(&f).await;
    assert!(is_conflict(&res), "expected Conflict, got {res:?}");
    assert!(all_runs(&store, &a.tenant).await.is_empty());
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(v2));
}

/// Runs whose id exists are left as they are and are not in the returned list.
pub async fn fire_returns_only_inserted_runs(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let mut existing = run("t1", "a", 0);
    existing.priority = 1;
    existing.trigger = Trigger::Manual;
    insert(&store, &existing).await;
    let (r0, r60) = (run("t1", "a", 0), run("t1", "a", 60));
    let inserted = store
        .fire_one(&firing(&a, vec![r0, r60.clone()], Some(at(120))))
        .await
        .unwrap();
    assert_eq!(inserted, vec![r60]);
    assert_eq!(get(&store, &existing).await, existing, "existing run untouched");
}

/// `fire` cancels the listed runs first: PENDING ones end CANCELLED, RUNNING ones get
/// `cancel_requested`.
pub async fn fire_cancels_listed_runs(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let (pending, running, other) = (run("t1", "a", 0), run("t1", "a", 1), run("t1", "a", 2));
    for r in [&pending, &running, &other] {
        insert(&store, r).await;
    }
    claim(&store, &running, "w1", at(50), at(100)).await;
    let mut f = firing(&a, vec![run("t1", "a", 60)], Some(at(120)));
    f.cancel = vec![pending.run_id.clone(), running.run_id.clone()];
    assert_eq!(store.fire_one(&f).await.unwrap().len(), 1);
    let p = get(&store, &pending).await;
    assert_eq!(p.state, RunState::Cancelled);
    assert!(p.finished_at.is_some());
    let r = get(&store, &running).await;
    assert_eq!(r.state, RunState::Running);
    assert!(r.cancel_requested);
    assert_eq!(get(&store, &other).await, other);
}

/// A firing with nothing left completes the job: it is no longer due.
pub async fn fire_can_complete_the_job(store: Store) {
    let a = job("t1", "a");
    create(&store, std::slice::from_ref(&a)).await;
    let mut f = firing(&a, vec![run("t1", "a", 60)], None);
    f.state = JobState::Completed;
    store.fire_one(&f).await.unwrap();
    completed_for_good(&store, &a).await;
}

/// The firing of a one-shot (as a sweep plans it) reads back as written, by every read, once
/// its run is sent (`firings_sent`) and the next sweep has looked for due jobs: the job COMPLETED with nothing left to fire, its
/// run PENDING — got, listed, active, ready for the repair pass — and nothing else. It is not
/// fired or inserted again; no attempt of its run can be renewed or closed before a claim,
/// and the claim starts it. The run is the one planned, dated by the firing or by its job's
/// last write. (A store that leaves a one-shot's firing unwritten,
/// `sked_core::unwritten_firing`, knows only the latter, and shows the firing from the next
/// sweep on: until then the job reads as not fired yet.)
pub async fn fire_of_a_one_shot_reads_back_by_every_read(store: Store) {
    let a = one_shot("t1", "a", 60);
    create(&store, std::slice::from_ref(&a)).await;
    let f = planned_firing(&a, 10);
    let fired = store.fire_one(&f).await.unwrap();
    store.firings_sent(std::slice::from_ref(&f)).await.unwrap();
    assert!(store.due_jobs(at(10), 10).await.unwrap().is_empty(), "the next sweep");
    let [r] = fired.as_slice() else {
        panic!("one run fired: {fired:?}")
    };
    assert!(
        [f.at, a.updated_at].contains(&r.created_at),
        "dated {} by neither the firing nor the job",
        r.created_at
    );
    assert_eq!(
        Run {
            created_at: f.at,
            ..r.clone()
        },
        f.runs[0],
        "the run planned"
    );
    assert_eq!(&get(&store, r).await, r);
    let after = completed_for_good(&store, &a).await;
    assert_eq!(store.active_runs_of(&a.tenant, &a.id).await.unwrap(), vec![r.clone()]);
    let pending = RunFilter {
        state: Some(RunState::Pending),
        ..RunFilter::default()
    };
    let of_a = RunFilter {
        job_id: Some(a.id.clone()),
        ..pending.clone()
    };
    let listed = store.list_runs(&a.tenant, &of_a, &page(10, None)).await.unwrap();
    assert_eq!(listed.items, vec![r.clone()], "its job's runs");
    let across_jobs = store.list_runs(&a.tenant, &pending, &page(10, None)).await.unwrap();
    let stale = store.stale_pending(at(100), 10).await.unwrap();
    let listing = store.fired_run_listing();
    match listing {
        FiredRunListing::AtFiring => {
            assert_eq!(all_runs(&store, &a.tenant).await, vec![r.clone()]);
            assert_eq!(across_jobs.items, vec![r.clone()]);
            assert_eq!(stale, vec![r.clone()]);
        }
        FiredRunListing::OnceWritten => {
            assert!(across_jobs.items.is_empty(), "listed across jobs once written");
            assert!(stale.is_empty(), "its message is out: nothing to repair");
        }
    }
    let completed = JobFilter {
        state: Some(JobState::Completed),
        ..JobFilter::default()
    };
    let jobs = store.list_jobs(&a.tenant, &completed, &page(10, None)).await.unwrap();
    assert_eq!(jobs.items, vec![after]);

    assert!(is_conflict(&store.fire_one(&f).await), "fired once");
    assert!(!store.insert_run(r).await.unwrap(), "its run exists");
    let fenced = store.heartbeat(&r.tenant, &r.run_id, 1, at(60), at(90)).await;
    assert!(is_fenced(&fenced), "no attempt to renew: {fenced:?}");
    let done = completion(
        r,
        1,
        &result(AttemptOutcome::Succeeded, at(61)),
        RunTransition::Finish(RunState::Succeeded),
    );
    assert!(is_fenced(&store.complete(&done).await), "no attempt to close");

    let (running, _) = claim(
        &store,
        r,
        "w1",
        r.not_before,
        r.not_before + chrono::Duration::seconds(30),
    )
    .await;
    assert_eq!((running.state, running.attempts.len()), (RunState::Running, 1));
    assert_eq!(get(&store, r).await, running);
    assert_eq!(all_runs(&store, &a.tenant).await, vec![running], "listed across jobs");
    let job_now = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((job_now.state, job_now.version), (JobState::Completed, 1));
}

/// A fired one-shot changed before its run is claimed (after the next sweep: see
/// [`fire_of_a_one_shot_reads_back_by_every_read`]) keeps its run: a pause leaves it
/// PENDING and active, a cancel ends it, a deferral moves it, and none of them makes the job
/// due again.
pub async fn a_fired_one_shot_changed_before_its_claim_keeps_its_run(store: Store) {
    let (a, b) = (one_shot("t1", "a", 60), one_shot("t1", "b", 60));
    create(&store, &[a.clone(), b.clone()]).await;
    let firings = [planned_firing(&a, 10), planned_firing(&b, 10)];
    let fired = store.fire(&firings).await.unwrap();
    store.firings_sent(&firings).await.unwrap();
    let (ra, rb) = match fired.as_slice() {
        [Ok(ra), Ok(rb)] => (ra[0].clone(), rb[0].clone()),
        other => panic!("both fired: {other:?}"),
    };
    assert!(store.due_jobs(at(10), 10).await.unwrap().is_empty(), "the next sweep");

    let read = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    let paused = Job {
        state: JobState::Paused,
        version: read.version + 1,
        ..read.clone()
    };
    store
        .update_job(&paused, read.version, read.next_fire_at)
        .await
        .unwrap();
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap().unwrap(), paused);
    assert_eq!(get(&store, &ra).await, ra, "the pause leaves its run");
    assert_eq!(store.active_runs_of(&a.tenant, &a.id).await.unwrap(), vec![ra.clone()]);
    let cancelled = store
        .cancel_run(&ra.tenant, &ra.run_id, at(20), "by hand")
        .await
        .unwrap()
        .run;
    assert_eq!(
        (cancelled.state, cancelled.reason.as_deref()),
        (RunState::Cancelled, Some("by hand"))
    );
    assert_eq!(get(&store, &ra).await, cancelled);
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap().unwrap(), paused);

    assert!(store.defer_pending(&rb.tenant, &rb.run_id, at(90)).await.unwrap());
    let deferred = get(&store, &rb).await;
    assert_eq!((deferred.state, deferred.not_before), (RunState::Pending, at(90)));
    let b_now = store.get_job(&b.tenant, &b.id).await.unwrap().unwrap();
    assert_eq!((b_now.state, b_now.next_fire_at), (JobState::Completed, None));
    assert!(store.due_jobs(at(10_000), 10).await.unwrap().is_empty());
}

/// `fire` applies each firing on its own, in order: one that conflicts changes nothing and
/// gets its own `Conflict`, the others are written as each would be alone.
pub async fn fire_applies_each_firing_on_its_own(store: Store) {
    let (a, b, c) = (job("t1", "a"), job("t1", "b"), job("t2", "c"));
    create(&store, &[a.clone(), b.clone()]).await;
    create(&store, std::slice::from_ref(&c)).await;
    let mut stale = firing(&b, vec![run("t1", "b", 60)], Some(at(120)));
    stale.expected_version = b.version + 1;
    let (ra, rc) = (run("t1", "a", 60), run("t2", "c", 60));
    let mut done = firing(&c, vec![rc.clone()], None);
    done.state = JobState::Completed;
    let answers = store
        .fire(&[firing(&a, vec![ra.clone()], Some(at(120))), stale, done])
        .await
        .expect("fire");
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0].as_ref().ok(), Some(&vec![ra.clone()]));
    assert!(is_conflict(&answers[1]), "expected Conflict, got {:?}", answers[1]);
    assert_eq!(answers[2].as_ref().ok(), Some(&vec![rc.clone()]));
    assert_eq!(get(&store, &ra).await, ra);
    assert_eq!(get(&store, &rc).await, rc);
    assert!(
        all_runs(&store, &b.tenant).await.iter().all(|r| r.job_id != b.id),
        "b fired nothing"
    );
    let job_of = |j: &Job| {
        let (store, j) = (store.clone(), j.clone());
        async move { store.get_job(&j.tenant, &j.id).await.unwrap().unwrap() }
    };
    assert_eq!(job_of(&a).await.next_fire_at, Some(at(120)));
    assert_eq!(job_of(&b).await, b, "b unchanged");
    let c_after = job_of(&c).await;
    assert_eq!((c_after.state, c_after.next_fire_at), (JobState::Completed, None));
    assert!(store.fire(&[]).await.unwrap().is_empty());
}

// ----- runs -----

/// `insert_run` inserts once; a second insert of the same id is a no-op returning false.
pub async fn insert_run_is_idempotent(store: Store) {
    let r = run("t1", "a", 0);
    assert!(store.insert_run(&r).await.unwrap());
    let mut second = r.clone();
    second.priority = 9;
    second.not_before = at(99);
    assert!(!store.insert_run(&second).await.unwrap());
    assert_eq!(get(&store, &r).await, r);
}

/// Run ids are scoped by tenant: the same job id and nominal time in two tenants are two runs.
pub async fn insert_run_same_id_in_two_tenants(store: Store) {
    let (r1, r2) = (run("t1", "a", 0), run("t2", "a", 0));
    assert_eq!(r1.run_id, r2.run_id);
    insert(&store, &r1).await;
    insert(&store, &r2).await;
    claim(&store, &r1, "w1", at(1), at(30)).await;
    assert_eq!(get(&store, &r2).await, r2, "the other tenant's run is untouched");
}

/// A run read back equals the run written, every field included.
pub async fn get_run_round_trips(store: Store) {
    let mut r = Run::new_pending(tenant("t1"), "a".into(), at(60), Trigger::Manual, 7, at(61), 4, at(59));
    r.created_at = super::fixtures::at_ms(59_123);
    r.state = RunState::Running;
    r.started_at = Some(super::fixtures::at_ms(62_005));
    r.attempts = vec![
        Attempt {
            attempt: 1,
            worker: worker("w1"),
            started_at: super::fixtures::at_ms(62_005),
            finished_at: Some(super::fixtures::at_ms(63_999)),
            outcome: Some(AttemptOutcome::Failed),
            exit_code: Some(3),
            http_status: Some(503),
            error: Some("boom: ünïcode".into()),
            log_bytes: 1234,
            log_truncated: true,
        },
        Attempt {
            attempt: 2,
            worker: worker("w2"),
            started_at: at(80),
            finished_at: None,
            outcome: None,
            exit_code: None,
            http_status: None,
            error: None,
            log_bytes: 0,
            log_truncated: false,
        },
    ];
    r.lease = Some(Lease {
        owner: worker("w2"),
        token: 7,
        expires_at: super::fixtures::at_ms(95_001),
    });
    r.cancel_requested = true;
    r.reason = Some("why not".into());
    insert(&store, &r).await;
    assert_eq!(get(&store, &r).await, r);

    let mut done = run("t1", "a", 0);
    done.state = RunState::Succeeded;
    done.finished_at = Some(at(5));
    done.trigger = Trigger::Handler;
    insert(&store, &done).await;
    assert_eq!(get(&store, &done).await, done);
    assert_eq!(
        store.get_run(&tenant("t2"), &r.run_id).await.unwrap(),
        None,
        "tenant scoped"
    );
    assert_eq!(
        store.get_run(&tenant("t1"), &RunId::from("a@nope")).await.unwrap(),
        None
    );
}

/// `list_runs` pages newest nominal time first; five runs at limit 2 make three pages.
pub async fn list_runs_newest_first_with_cursors(store: Store) {
    for s in [30, 10, 50, 20, 40] {
        insert(&store, &run("t1", "a", s)).await;
    }
    insert(&store, &run("t2", "a", 45)).await;
    let t = tenant("t1");
    let f = RunFilter::default();
    let p1 = store.list_runs(&t, &f, &page(2, None)).await.unwrap();
    let p2 = store.list_runs(&t, &f, &page(2, p1.next_cursor.clone())).await.unwrap();
    let p3 = store.list_runs(&t, &f, &page(2, p2.next_cursor.clone())).await.unwrap();
    assert!(p1.next_cursor.is_some() && p2.next_cursor.is_some());
    assert_eq!(p3.next_cursor, None);
    assert_eq!(run_ids(&p1.items), run_ids(&[run("t1", "a", 50), run("t1", "a", 40)]));
    assert_eq!(run_ids(&p2.items), run_ids(&[run("t1", "a", 30), run("t1", "a", 20)]));
    assert_eq!(run_ids(&p3.items), run_ids(&[run("t1", "a", 10)]));
    assert_eq!(p1.items[0], run("t1", "a", 50));
}

/// `list_runs` filters by job, state, `since` (inclusive) and `until` (exclusive), and
/// never shows another tenant's runs.
pub async fn list_runs_filters(store: Store) {
    for s in [10, 20, 30] {
        insert(&store, &run("t1", "a", s)).await;
        insert(&store, &run("t1", "b", s)).await;
        insert(&store, &run("t2", "a", s)).await;
    }
    let b10 = run("t1", "b", 10);
    store
        .cancel_run(&b10.tenant, &b10.run_id, at(11), "test")
        .await
        .unwrap();
    let t = tenant("t1");
    let list = async |f: RunFilter| run_ids(&store.list_runs(&t, &f, &page(100, None)).await.unwrap().items);
    let job_a = RunFilter {
        job_id: Some("a".into()),
        ..Default::default()
    };
    assert_eq!(
        list(job_a.clone()).await,
        run_ids(&[run("t1", "a", 30), run("t1", "a", 20), run("t1", "a", 10)])
    );
    assert_eq!(
        list(RunFilter {
            state: Some(RunState::Cancelled),
            ..Default::default()
        })
        .await,
        run_ids(&[b10])
    );
    assert_eq!(
        list(RunFilter {
            since: Some(at(20)),
            until: Some(at(30)),
            ..job_a.clone()
        })
        .await,
        run_ids(&[run("t1", "a", 20)])
    );
    assert_eq!(
        list(RunFilter {
            since: Some(at(21)),
            ..job_a
        })
        .await,
        run_ids(&[run("t1", "a", 30)])
    );
    assert_eq!(list(RunFilter::default()).await.len(), 6);
}

/// `active_runs`: the job's PENDING and RUNNING runs, oldest nominal time first.
pub async fn active_runs_oldest_first(store: Store) {
    let rs: Vec<Run> = [40, 10, 30, 20].iter().map(|s| run("t1", "a", *s)).collect();
    for r in &rs {
        insert(&store, r).await;
    }
    insert(&store, &run("t1", "b", 5)).await;
    insert(&store, &run("t2", "a", 5)).await;
    claim(&store, &rs[2], "w1", at(31), at(60)).await; // 30 running
    store
        .cancel_run(&rs[3].tenant, &rs[3].run_id, at(21), "test")
        .await
        .unwrap(); // 20 cancelled
    let active = store.active_runs_of(&tenant("t1"), &"a".into()).await.unwrap();
    assert_eq!(
        run_ids(&active),
        run_ids(&[run("t1", "a", 10), run("t1", "a", 30), run("t1", "a", 40)])
    );
    assert_eq!(active[1].state, RunState::Running);
}

/// `active_runs` answers each job on its own, in order, across tenants: as it answers that job
/// asked alone; with `scheduled_by`, only the runs scheduled at or before it.
pub async fn active_runs_answers_each_job_like_active_runs_of(store: Store) {
    for r in [
        run("t1", "a", 20),
        run("t1", "a", 10),
        run("t1", "b", 5),
        run("t2", "a", 5),
    ] {
        insert(&store, &r).await;
    }
    let (t1, t2) = (tenant("t1"), tenant("t2"));
    let asked = [
        (t2.clone(), JobId::from("a")),
        (t1.clone(), JobId::from("a")),
        (t1.clone(), JobId::from("none")),
    ];
    let answers = store.active_runs(&asked, None).await.unwrap();
    let ids: Vec<Vec<String>> = answers.iter().map(|runs| run_ids(runs)).collect();
    assert_eq!(
        ids,
        vec![
            run_ids(&[run("t2", "a", 5)]),
            run_ids(&[run("t1", "a", 10), run("t1", "a", 20)]),
            vec![],
        ]
    );
    for ((tenant, job), answer) in asked.iter().zip(&answers) {
        assert_eq!(&store.active_runs_of(tenant, job).await.unwrap(), answer);
    }
    assert!(store.active_runs(&[], None).await.unwrap().is_empty());

    // Bounded by nominal time: t1/a's run at 20 s is left out at 19 s and kept at 20 s.
    let by = |secs: i64| Some(run("t1", "a", secs).scheduled_for);
    let bounded = store.active_runs(&asked, by(19)).await.unwrap();
    let ids: Vec<Vec<String>> = bounded.iter().map(|runs| run_ids(runs)).collect();
    assert_eq!(
        ids,
        vec![run_ids(&[run("t2", "a", 5)]), run_ids(&[run("t1", "a", 10)]), vec![]]
    );
    let at_20 = store
        .active_runs_due(&t1, &JobId::from("a"), by(20).unwrap())
        .await
        .unwrap();
    assert_eq!(run_ids(&at_20), run_ids(&[run("t1", "a", 10), run("t1", "a", 20)]));
    assert!(
        store
            .active_runs(&asked, by(0))
            .await
            .unwrap()
            .iter()
            .all(Vec::is_empty)
    );
}

// ----- claim -----

/// Claiming a run that does not exist for the tenant is NotFound.
pub async fn claim_unknown_run_is_not_found(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let res = store
        .claim_one(&tenant("t2"), &r.run_id, &worker("w"), at(1), at(30))
        .await;
    assert!(is_not_found(&res), "expected NotFound, got {res:?}");
    let res = store
        .claim_one(&tenant("t1"), &RunId::from("a@nope"), &worker("w"), at(1), at(30))
        .await;
    assert!(is_not_found(&res), "expected NotFound, got {res:?}");
}

/// `claim` answers each run on its own, in order, and starts the attempts of the claimable
/// ones — across tenants, with an unknown run among them; a batch that reads no job answers
/// each claim without one.
pub async fn claim_answers_each_run_in_order(store: Store) {
    let (due, mut later, other) = (run("t1", "a", 0), run("t1", "b", 0), run("t2", "a", 0));
    later.not_before = at(10);
    for r in [&due, &later, &other] {
        insert(&store, r).await;
    }
    let mut ids = run_keys(&[&due, &later, &other]);
    ids.push((tenant("t1"), RunId::from("a@nope")));
    let answers = without_jobs(store.claim(&claims(ids.clone(), "w1", at(1), at(30))).await.unwrap());
    assert_eq!(answers.len(), 4);
    for (i, r) in [(0, &due), (2, &other)] {
        let Ok(ClaimOutcome::Claimed { run, token }) = &answers[i] else {
            panic!("expected Claimed, got {:?}", answers[i]);
        };
        assert_eq!((run.state, run.attempt_count()), (RunState::Running, 1));
        assert_eq!(
            run.lease.as_ref().map(|l| (l.token, l.expires_at)),
            Some((*token, at(30)))
        );
        assert_eq!(&get(&store, r).await, run);
    }
    assert!(
        matches!(answers[1], Ok(ClaimOutcome::NotYet(t)) if t == at(10)),
        "{:?}",
        answers[1]
    );
    assert!(is_not_found(&answers[3]), "expected NotFound, got {:?}", answers[3]);
    assert_eq!(get(&store, &later).await, later, "unchanged");
    // Claimed again at once: both are leased now.
    let again = without_jobs(
        store
            .claim(&claims(ids[..1].to_vec(), "w2", at(2), at(31)))
            .await
            .unwrap(),
    );
    assert!(
        matches!(again[0], Ok(ClaimOutcome::Leased(t)) if t == at(30)),
        "{:?}",
        again[0]
    );
    assert!(
        store
            .claim(&claims(vec![], "w1", at(1), at(30)))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A batch with `read_jobs: false` answers every claim `Claimed(_, None)`, also for runs whose
/// job exists, and claims them as the batch would with no job to read.
pub async fn claim_without_read_jobs_answers_no_job(store: Store) {
    let mut queued = job("t1", "q");
    queued.spec.overlap = Some(Overlap::QueueOne);
    create(&store, &[job("t1", "a"), queued]).await;
    let (ra, rq, mut later) = (run("t1", "a", 0), run("t1", "q", 0), run("t1", "a", 10));
    later.not_before = at(10);
    for r in [&ra, &rq, &later] {
        insert(&store, r).await;
    }
    let answers = store
        .claim(&claims(run_keys(&[&ra, &rq, &later]), "w1", at(1), at(30)))
        .await
        .unwrap();
    assert_eq!(answers.len(), 3);
    for (i, r) in [(0, &ra), (1, &rq)] {
        let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, None)) = &answers[i] else {
            panic!("expected Claimed without a job, got {:?}", answers[i]);
        };
        assert_eq!(run.state, RunState::Running);
        assert_eq!(&get(&store, r).await, run);
    }
    assert_eq!(
        answers[2].as_ref().ok(),
        Some(&JobClaim::Claimed(ClaimOutcome::NotYet(at(10)), None))
    );
}

/// `claim` with `read_jobs` holds back a backfill run of a job whose policy is not `allow`
/// (it waits its turn), even when that policy is not in `hold`; a backfill run of an `allow`
/// job, and a scheduled run of the other job, are claimed.
pub async fn claim_reading_jobs_holds_backfill_runs_that_take_turns(store: Store) {
    let mut forbid = job("t1", "f");
    forbid.spec.overlap = Some(Overlap::Forbid);
    let mut allow = job("t1", "a");
    allow.spec.overlap = Some(Overlap::Allow);
    create(&store, &[forbid.clone(), allow.clone()]).await;
    let (mut in_turn, mut side_by_side, scheduled) = (run("t1", "f", 0), run("t1", "a", 0), run("t1", "f", 5));
    in_turn.trigger = Trigger::Backfill;
    side_by_side.trigger = Trigger::Backfill;
    for r in [&in_turn, &side_by_side, &scheduled] {
        insert(&store, r).await;
    }
    let batch = ClaimBatch {
        read_jobs: true,
        ..claims(run_keys(&[&in_turn, &side_by_side, &scheduled]), "w1", at(6), at(36))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers[0].as_ref().ok(), Some(&JobClaim::Held(forbid.clone())));
    assert_eq!(get(&store, &in_turn).await, in_turn, "a held run is not claimed");
    for (i, r) in [(1, &side_by_side), (2, &scheduled)] {
        let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(_))) = &answers[i] else {
            panic!("expected Claimed with its job, got {:?}", answers[i]);
        };
        assert_eq!(&get(&store, r).await, run);
    }
}

/// `claim` with `read_jobs` holds back a run of a PAUSED job whatever its overlap policy,
/// even with nothing in `hold` (the worker skips a scheduled one: fired before the pause, it
/// must not start); the run is left unchanged, and the run of the active job beside it is
/// claimed. Without `read_jobs` (the worker's second batch) the paused job's run is claimed.
pub async fn claim_reading_jobs_holds_runs_of_paused_jobs(store: Store) {
    let mut paused = job("t1", "p");
    paused.state = JobState::Paused;
    paused.spec.overlap = Some(Overlap::Allow);
    let active = job("t1", "a");
    create(&store, &[paused.clone(), active.clone()]).await;
    let (held, claimed) = (run("t1", "p", 0), run("t1", "a", 0));
    for r in [&held, &claimed] {
        insert(&store, r).await;
    }
    let batch = ClaimBatch {
        read_jobs: true,
        ..claims(run_keys(&[&held, &claimed]), "w1", at(1), at(31))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers[0].as_ref().ok(), Some(&JobClaim::Held(paused)));
    assert_eq!(get(&store, &held).await, held, "a held run is not claimed");
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(job_a))) = &answers[1] else {
        panic!("expected Claimed with its job, got {:?}", answers[1]);
    };
    assert_eq!((run.state, job_a), (RunState::Running, &active));

    let second = claims(run_keys(&[&held]), "w1", at(2), at(32));
    let answers = store.claim(&second).await.unwrap();
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, None)) = &answers[0] else {
        panic!("expected Claimed without reading its job, got {:?}", answers[0]);
    };
    assert_eq!(run.state, RunState::Running);
}

/// `claim` with `read_jobs` holds back a run of a DELETED job (answered with the job: the
/// worker ends it, as the delete would have), and claims it when the job is not read.
pub async fn claim_reading_jobs_holds_runs_of_deleted_jobs(store: Store) {
    let d = job("t1", "d");
    create(&store, std::slice::from_ref(&d)).await;
    let held = run("t1", "d", 0);
    insert(&store, &held).await;
    let deleted = Job {
        state: JobState::Deleted,
        next_fire_at: None,
        version: d.version + 1,
        ..d.clone()
    };
    store.update_job(&deleted, d.version, d.next_fire_at).await.unwrap();
    let batch = ClaimBatch {
        read_jobs: true,
        ..claims(run_keys(&[&held]), "w1", at(1), at(31))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers[0].as_ref().ok(), Some(&JobClaim::Held(deleted)));
    assert_eq!(get(&store, &held).await, held, "a held run is not claimed");
    let (run, _) = claim(&store, &held, "w1", at(2), at(32)).await;
    assert_eq!(run.state, RunState::Running);
}

/// `claim` with `read_jobs` holds back a run of the schedule never tried whose time, after the
/// job's last change, is not an occurrence of its timing (fired ahead before a schedule change
/// dropped that time: the worker skips it), unchanged; a manual run at such a time, and a run
/// at an occurrence, are claimed.
pub async fn claim_reading_jobs_holds_runs_at_times_the_timing_dropped(store: Store) {
    let every_second = job("t1", "s");
    create(&store, std::slice::from_ref(&every_second)).await;
    let at_ms = super::fixtures::at_ms;
    let pending = |ms: i64, trigger: Trigger| {
        Run::new_pending(
            tenant("t1"),
            JobId::from("s"),
            at_ms(ms),
            trigger,
            5,
            at_ms(ms),
            3,
            at_ms(ms),
        )
    };
    let dropped = pending(500, Trigger::Schedule);
    let (manual, occurrence) = (pending(700, Trigger::Manual), run("t1", "s", 1));
    for r in [&dropped, &manual, &occurrence] {
        insert(&store, r).await;
    }
    let batch = ClaimBatch {
        read_jobs: true,
        ..claims(run_keys(&[&dropped, &manual, &occurrence]), "w1", at(2), at(32))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers[0].as_ref().ok(), Some(&JobClaim::Held(every_second)));
    assert_eq!(get(&store, &dropped).await, dropped, "a held run is not claimed");
    for (answer, r) in answers[1..].iter().zip([&manual, &occurrence]) {
        let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(_))) = answer else {
            panic!("expected {} Claimed, got {answer:?}", r.run_id);
        };
        assert_eq!(run.state, RunState::Running);
    }
}

/// `claim` with `read_jobs` answers each run with its job: claimed as it would be without
/// reading it when the job's overlap policy is not held, held back (unchanged) with its job
/// when it is.
pub async fn claim_reading_jobs_claims_or_holds_by_overlap_policy(store: Store) {
    let free = job("t1", "a");
    let mut queued = job("t1", "q");
    queued.spec.overlap = Some(Overlap::QueueOne);
    create(&store, &[free.clone(), queued.clone()]).await;
    let (ra, rq, orphan) = (run("t1", "a", 0), run("t1", "q", 0), run("t1", "gone", 0));
    for r in [&ra, &rq, &orphan] {
        insert(&store, r).await;
    }
    let mut ids = run_keys(&[&ra, &rq, &orphan]);
    ids.push((tenant("t1"), RunId::from("a@nope")));
    let batch = ClaimBatch {
        read_jobs: true,
        hold: vec![Overlap::QueueOne],
        ..claims(ids, "w1", at(1), at(30))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers.len(), 4);
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(job_a))) = &answers[0] else {
        panic!("expected Claimed with its job, got {:?}", answers[0]);
    };
    assert_eq!((run.state, job_a), (RunState::Running, &free));
    assert_eq!(&get(&store, &ra).await, run);
    assert_eq!(answers[1].as_ref().ok(), Some(&JobClaim::Held(queued)));
    assert_eq!(get(&store, &rq).await, rq, "a held run is not claimed");
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, None)) = &answers[2] else {
        panic!("expected Claimed without a job, got {:?}", answers[2]);
    };
    assert_eq!(&get(&store, &orphan).await, run);
    assert!(is_not_found(&answers[3]), "expected NotFound, got {:?}", answers[3]);
    let empty = ClaimBatch {
        read_jobs: true,
        ..claims(vec![], "w1", at(1), at(30))
    };
    assert!(store.claim(&empty).await.unwrap().is_empty());
}

/// `claim` with `alone` claims a run only while no other run of its job holds a live lease:
/// otherwise it answers `Leased` with the end of that lease and changes nothing. A run of
/// another job, and a run whose job's running run has ended or whose lease has expired, is
/// claimed as it would be without `alone`.
pub async fn claim_alone_waits_for_another_running_run_of_the_job(store: Store) {
    let (first, second, other) = (run("t1", "q", 0), run("t1", "q", 10), run("t1", "b", 0));
    for r in [&first, &second, &other] {
        insert(&store, r).await;
    }
    claim(&store, &first, "w1", at(11), at(41)).await;
    let alone = |runs: &[&Run], now, until| ClaimBatch {
        alone: true,
        ..claims(run_keys(runs), "w2", now, until)
    };
    let answers = without_jobs(store.claim(&alone(&[&second, &other], at(12), at(42))).await.unwrap());
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0].as_ref().ok(), Some(&ClaimOutcome::Leased(at(41))));
    assert_eq!(get(&store, &second).await, second, "unchanged while the first runs");
    let Ok(ClaimOutcome::Claimed { run: claimed, .. }) = &answers[1] else {
        panic!("another job's run is claimed, got {:?}", answers[1]);
    };
    assert_eq!(claimed.state, RunState::Running);

    // Past the first run's lease, the second may start (the claim of the first is then
    // closed as lost when that run is next claimed, not here).
    let late = without_jobs(store.claim(&alone(&[&second], at(42), at(72))).await.unwrap());
    assert!(matches!(late[0], Ok(ClaimOutcome::Claimed { .. })), "{late:?}");

    // Once the running run has ended, the next one starts at once.
    let (third, fourth) = (run("t1", "z", 0), run("t1", "z", 10));
    insert(&store, &third).await;
    insert(&store, &fourth).await;
    let (_, z_token) = claim(&store, &third, "w1", at(11), at(41)).await;
    let ok = result(AttemptOutcome::Succeeded, at(12));
    store
        .complete(&completion(
            &third,
            z_token,
            &ok,
            RunTransition::Finish(RunState::Succeeded),
        ))
        .await
        .unwrap();
    let after = without_jobs(store.claim(&alone(&[&fourth], at(13), at(43))).await.unwrap());
    assert!(matches!(after[0], Ok(ClaimOutcome::Claimed { .. })), "{after:?}");
}

/// A batch with `read_jobs`, `hold` and `alone` together: a run whose job's policy is held is
/// answered `Held` with its job (even while another run of its job runs) and left unchanged;
/// the rest are answered with their jobs: one whose job has another run under a live lease
/// is `Leased` until that lease ends and unchanged, the others (a PENDING run of the job is
/// no obstacle) are claimed.
pub async fn claim_alone_reading_jobs_holds_waits_or_claims(store: Store) {
    let mut forbid = job("t1", "f");
    forbid.spec.overlap = Some(Overlap::Forbid);
    let mut queued = job("t1", "q");
    queued.spec.overlap = Some(Overlap::QueueOne);
    let mut free = job("t1", "a");
    free.spec.overlap = Some(Overlap::Allow);
    create(&store, &[forbid.clone(), queued.clone(), free.clone()]).await;
    let (f0, f10) = (run("t1", "f", 0), run("t1", "f", 10));
    let (q0, q10) = (run("t1", "q", 0), run("t1", "q", 10));
    let (a0, a10, orphan) = (run("t1", "a", 0), run("t1", "a", 10), run("t1", "gone", 10));
    for r in [&f0, &f10, &q0, &q10, &a0, &a10, &orphan] {
        insert(&store, r).await;
    }
    for r in [&f0, &q0] {
        claim(&store, r, "w1", at(11), at(41)).await;
    }
    let batch = ClaimBatch {
        read_jobs: true,
        hold: vec![Overlap::Forbid],
        alone: true,
        ..claims(run_keys(&[&f10, &q10, &a10, &orphan]), "w2", at(12), at(42))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0].as_ref().ok(), Some(&JobClaim::Held(forbid)));
    assert_eq!(get(&store, &f10).await, f10, "a held run is not claimed");
    assert_eq!(
        answers[1].as_ref().ok(),
        Some(&JobClaim::Claimed(ClaimOutcome::Leased(at(41)), Some(queued)))
    );
    assert_eq!(
        get(&store, &q10).await,
        q10,
        "unchanged while the other run of its job runs"
    );
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(job_a))) = &answers[2] else {
        panic!(
            "expected Claimed with its job (its job's other run only waits), got {:?}",
            answers[2]
        );
    };
    assert_eq!((run.state, job_a), (RunState::Running, &free));
    assert_eq!(&get(&store, &a10).await, run);
    assert_eq!(get(&store, &a0).await, a0, "the waiting run of the job is untouched");
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, None)) = &answers[3] else {
        panic!("expected Claimed without a job, got {:?}", answers[3]);
    };
    assert_eq!(
        (run.state, run.lease.as_ref().map(|l| l.expires_at)),
        (RunState::Running, Some(at(42)))
    );
    assert_eq!(&get(&store, &orphan).await, run);
}

/// A PENDING run is not claimed before its `not_before`.
pub async fn claim_before_not_before_is_not_yet(store: Store) {
    let mut r = run("t1", "a", 0);
    r.not_before = at(10);
    insert(&store, &r).await;
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w"), at(9), at(40))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::NotYet(at(10)));
    assert_eq!(get(&store, &r).await, r, "unchanged");
    claim(&store, &r, "w", at(10), at(40)).await;
}

/// The first claim makes the run RUNNING under a lease, with attempt 1 and `started_at`.
pub async fn claim_starts_first_attempt(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (claimed, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    assert_eq!(claimed.state, RunState::Running);
    assert_eq!(claimed.started_at, Some(at(2)));
    assert_eq!(
        claimed.lease,
        Some(Lease {
            owner: worker("w1"),
            token,
            expires_at: at(32)
        })
    );
    assert_eq!(claimed.attempts.len(), 1);
    let a = &claimed.attempts[0];
    assert_eq!((a.attempt, &a.worker, a.started_at), (1, &worker("w1"), at(2)));
    assert_eq!((a.finished_at, a.outcome), (None, None));
    assert_eq!(get(&store, &r).await, claimed, "returned run is what is stored");
}

/// While a live lease holds the run, a claim answers Leased with the lease's expiry.
pub async fn claim_while_leased_is_leased(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (claimed, _) = claim(&store, &r, "w1", at(2), at(32)).await;
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(20), at(50))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::Leased(at(32)));
    assert_eq!(get(&store, &r).await, claimed, "unchanged");
}

/// After a retry the next claim appends attempt n+1 with a greater token; `started_at`
/// keeps the first attempt's start.
pub async fn claim_after_retry_starts_next_attempt(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let mut last_token = 0;
    for n in 1..=3u32 {
        let now = at(i64::from(n) * 100);
        let (claimed, token) = claim(&store, &r, &format!("w{n}"), now, now + chrono::Duration::seconds(30)).await;
        assert!(token > last_token, "token {token} must exceed {last_token}");
        last_token = token;
        assert_eq!(claimed.attempts.len() as u32, n);
        assert_eq!(claimed.attempts[n as usize - 1].attempt, n);
        assert_eq!(claimed.started_at, Some(at(100)));
        let res = result(AttemptOutcome::Failed, now + chrono::Duration::seconds(1));
        let next = RunTransition::Retry {
            not_before: now + chrono::Duration::seconds(10),
        };
        store.complete(&completion(&r, token, &res, next)).await.unwrap();
    }
}

/// A RUNNING run whose lease expired is reclaimed: the abandoned attempt is closed as
/// WORKER_LOST at the lease's expiry and attempt n+1 starts with a greater token.
pub async fn claim_after_lease_expiry_closes_lost_attempt(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, t1) = claim(&store, &r, "w1", at(2), at(32)).await;
    let (claimed, t2) = claim(&store, &r, "w2", at(60), at(90)).await;
    assert!(t2 > t1);
    assert_eq!(claimed.attempts.len(), 2);
    let lost = &claimed.attempts[0];
    assert_eq!(lost.outcome, Some(AttemptOutcome::WorkerLost));
    assert_eq!(lost.finished_at, Some(at(32)), "closed at the lease's expiry");
    assert_eq!(
        (claimed.attempts[1].attempt, &claimed.attempts[1].worker),
        (2, &worker("w2"))
    );
    assert_eq!(
        claimed.lease,
        Some(Lease {
            owner: worker("w2"),
            token: t2,
            expires_at: at(90)
        })
    );
    assert_eq!(claimed.started_at, Some(at(2)));
    assert_eq!(get(&store, &r).await, claimed);
}

/// When the lost attempt was the last allowed one, the run ends FAILED and the claim is
/// Terminal.
pub async fn claim_last_attempt_lost_is_terminal_failed(store: Store) {
    let mut r = run("t1", "a", 0);
    r.max_attempts = 1;
    insert(&store, &r).await;
    claim(&store, &r, "w1", at(2), at(32)).await;
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(60), at(90))
        .await
        .unwrap();
    let ClaimOutcome::Terminal(ended) = res else {
        panic!("expected Terminal, got {res:?}")
    };
    assert_eq!(ended.state, RunState::Failed);
    assert!(ended.finished_at.is_some());
    assert_eq!(ended.lease, None);
    assert_eq!(ended.attempts.len(), 1);
    assert_eq!(ended.attempts[0].outcome, Some(AttemptOutcome::WorkerLost));
    assert_eq!(ended.attempts[0].finished_at, Some(at(32)));
    assert_eq!(get(&store, &r).await, ended);
}

/// A finished run is Terminal and stays as it is.
pub async fn claim_finished_run_is_terminal(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let done = store
        .complete(&completion(
            &r,
            token,
            &result(AttemptOutcome::Succeeded, at(5)),
            RunTransition::Finish(RunState::Succeeded),
        ))
        .await
        .unwrap()
        .run;
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(60), at(90))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::Terminal(done.clone()));
    assert_eq!(get(&store, &r).await, done);

    let c = run("t1", "a", 1);
    insert(&store, &c).await;
    let cancelled = store.cancel_run(&c.tenant, &c.run_id, at(1), "no").await.unwrap().run;
    let res = store
        .claim_one(&c.tenant, &c.run_id, &worker("w2"), at(60), at(90))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::Terminal(cancelled));
}

/// A run with `cancel_requested` is not claimed: Leased while its lease lives, then it
/// ends CANCELLED and the claim is Terminal.
pub async fn claim_with_cancel_requested(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    claim(&store, &r, "w1", at(2), at(32)).await;
    store.cancel_run(&r.tenant, &r.run_id, at(10), "stop it").await.unwrap();
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(20), at(50))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::Leased(at(32)));
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(60), at(90))
        .await
        .unwrap();
    let ClaimOutcome::Terminal(ended) = res else {
        panic!("expected Terminal, got {res:?}")
    };
    assert_eq!(ended.state, RunState::Cancelled);
    assert_eq!(ended.attempts.len(), 1, "no new attempt");
    assert!(ended.attempts[0].finished_at.is_some(), "abandoned attempt closed");
    assert_eq!(ended.lease, None);
    assert!(ended.finished_at.is_some());
}

// ----- heartbeat -----

/// A heartbeat renews the live lease and returns the run.
pub async fn heartbeat_extends_lease(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let hb = store
        .heartbeat(&r.tenant, &r.run_id, token, at(20), at(50))
        .await
        .unwrap();
    assert_eq!(
        hb.lease,
        Some(Lease {
            owner: worker("w1"),
            token,
            expires_at: at(50)
        })
    );
    assert_eq!(get(&store, &r).await, hb);
    let res = store
        .claim_one(&r.tenant, &r.run_id, &worker("w2"), at(40), at(70))
        .await
        .unwrap();
    assert_eq!(res, ClaimOutcome::Leased(at(50)), "the renewed lease holds");
}

/// The run a heartbeat returns shows `cancel_requested`.
pub async fn heartbeat_reports_cancel_requested(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    assert!(
        !store
            .heartbeat(&r.tenant, &r.run_id, token, at(10), at(40))
            .await
            .unwrap()
            .cancel_requested
    );
    store.cancel_run(&r.tenant, &r.run_id, at(12), "stop").await.unwrap();
    let hb = store
        .heartbeat(&r.tenant, &r.run_id, token, at(20), at(50))
        .await
        .unwrap();
    assert!(hb.cancel_requested);
    assert_eq!(hb.state, RunState::Running);
}

/// Heartbeats with a wrong token, an older attempt's token, or after the lease expired are
/// Fenced and change nothing.
pub async fn heartbeat_fenced(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (claimed, t1) = claim(&store, &r, "w1", at(2), at(32)).await;
    let res = store.heartbeat(&r.tenant, &r.run_id, t1 + 1000, at(10), at(40)).await;
    assert!(is_fenced(&res), "wrong token: expected Fenced, got {res:?}");
    let res = store.heartbeat(&r.tenant, &r.run_id, t1, at(40), at(70)).await;
    assert!(is_fenced(&res), "expired lease: expected Fenced, got {res:?}");
    assert_eq!(get(&store, &r).await, claimed, "unchanged");
    let (reclaimed, _) = claim(&store, &r, "w2", at(41), at(71)).await;
    let res = store.heartbeat(&r.tenant, &r.run_id, t1, at(42), at(72)).await;
    assert!(is_fenced(&res), "old attempt's token: expected Fenced, got {res:?}");
    assert_eq!(get(&store, &r).await, reclaimed, "unchanged");
}

// ----- complete -----

fn failed_result(at_: Timestamp) -> AttemptResult {
    AttemptResult {
        finished_at: at_,
        outcome: AttemptOutcome::Failed,
        exit_code: Some(3),
        http_status: None,
        error: Some("exited with code 3".into()),
        log_bytes: 42,
        log_truncated: true,
    }
}

/// Retry: the attempt is closed with the result, the run is PENDING again from
/// `not_before`, the lease is cleared.
pub async fn complete_retry(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let res = failed_result(at(5));
    let done = store
        .complete(&completion(
            &r,
            token,
            &res,
            RunTransition::Retry { not_before: at(15) },
        ))
        .await
        .unwrap()
        .run;
    assert_eq!(done.state, RunState::Pending);
    assert_eq!(done.not_before, at(15));
    assert_eq!(done.lease, None);
    assert_eq!(done.finished_at, None);
    let a = &done.attempts[0];
    assert_eq!(
        (a.finished_at, a.outcome, a.exit_code, a.http_status),
        (Some(at(5)), Some(AttemptOutcome::Failed), Some(3), None)
    );
    assert_eq!(
        (a.error.as_deref(), a.log_bytes, a.log_truncated),
        (Some("exited with code 3"), 42, true)
    );
    assert_eq!(get(&store, &r).await, done);
    assert_eq!(
        store
            .claim_one(&r.tenant, &r.run_id, &worker("w1"), at(10), at(40))
            .await
            .unwrap(),
        ClaimOutcome::NotYet(at(15))
    );
}

/// Finish: the run takes the terminal state with `finished_at = result.finished_at`.
pub async fn complete_finish(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let res = AttemptResult {
        http_status: Some(200),
        log_bytes: 7,
        ..result(AttemptOutcome::Succeeded, at(6))
    };
    let done = store
        .complete(&completion(&r, token, &res, RunTransition::Finish(RunState::Succeeded)))
        .await
        .unwrap()
        .run;
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(done.finished_at, Some(at(6)));
    assert_eq!(done.lease, None);
    let a = &done.attempts[0];
    assert_eq!(
        (a.finished_at, a.outcome, a.http_status, a.log_bytes),
        (Some(at(6)), Some(AttemptOutcome::Succeeded), Some(200), 7)
    );
    assert_eq!(get(&store, &r).await, done);
    assert!(store.active_runs_of(&r.tenant, &r.job_id).await.unwrap().is_empty());
}

/// A completion with a stale or wrong token, or for a run no longer RUNNING, is Fenced and
/// changes nothing.
pub async fn complete_with_stale_token_is_fenced_and_changes_nothing(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, t1) = claim(&store, &r, "w1", at(2), at(32)).await;
    let (current, t2) = claim(&store, &r, "w2", at(60), at(90)).await;
    let fin = RunTransition::Finish(RunState::Succeeded);
    let res = store
        .complete(&completion(&r, t1, &result(AttemptOutcome::Succeeded, at(61)), fin))
        .await;
    assert!(is_fenced(&res), "stale token: expected Fenced, got {res:?}");
    let res = store
        .complete(&completion(
            &r,
            t2 + 1000,
            &result(AttemptOutcome::Succeeded, at(61)),
            fin,
        ))
        .await;
    assert!(is_fenced(&res), "wrong token: expected Fenced, got {res:?}");
    assert_eq!(get(&store, &r).await, current, "unchanged");
    let done = store
        .complete(&completion(&r, t2, &result(AttemptOutcome::Succeeded, at(62)), fin))
        .await
        .unwrap()
        .run;
    let res = store
        .complete(&completion(
            &r,
            t2,
            &result(AttemptOutcome::Failed, at(63)),
            RunTransition::Finish(RunState::Failed),
        ))
        .await;
    assert!(is_fenced(&res), "run not RUNNING: expected Fenced, got {res:?}");
    assert_eq!(get(&store, &r).await, done, "unchanged");
}

/// The reaper's form: with `only_if_expired_by = Some(t)` the write is fenced unless the
/// lease expired before `t`.
pub async fn complete_only_if_expired_by(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (claimed, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let lost = result(AttemptOutcome::WorkerLost, at(32));
    let retry = RunTransition::Retry { not_before: at(40) };
    let res = store
        .complete(&Completion {
            only_if_expired_by: Some(at(20)),
            ..completion(&r, token, &lost, retry)
        })
        .await;
    assert!(is_fenced(&res), "lease still live: expected Fenced, got {res:?}");
    assert_eq!(get(&store, &r).await, claimed, "unchanged");
    let done = store
        .complete(&Completion {
            only_if_expired_by: Some(at(35)),
            ..completion(&r, token, &lost, retry)
        })
        .await
        .unwrap()
        .run;
    assert_eq!(done.state, RunState::Pending);
    assert_eq!(done.attempts[0].outcome, Some(AttemptOutcome::WorkerLost));
    assert_eq!(done.attempts[0].finished_at, Some(at(32)));
}

// ----- cancel -----

/// A PENDING run ends CANCELLED at once, with the reason.
pub async fn cancel_pending_run(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let c = store
        .cancel_run(&r.tenant, &r.run_id, at(3), "user asked")
        .await
        .unwrap()
        .run;
    assert_eq!(c.state, RunState::Cancelled);
    assert_eq!(c.reason.as_deref(), Some("user asked"));
    assert_eq!(c.finished_at, Some(at(3)));
    assert_eq!(get(&store, &r).await, c);
}

/// A RUNNING run gets `cancel_requested` and keeps running under its lease.
pub async fn cancel_running_run_requests_cancel(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (claimed, _) = claim(&store, &r, "w1", at(2), at(32)).await;
    let c = store
        .cancel_run(&r.tenant, &r.run_id, at(3), "user asked")
        .await
        .unwrap()
        .run;
    assert_eq!(c.state, RunState::Running);
    assert!(c.cancel_requested);
    assert_eq!(
        (&c.lease, &c.attempts, c.finished_at),
        (&claimed.lease, &claimed.attempts, None)
    );
    assert_eq!(get(&store, &r).await, c);
}

/// A terminal run is returned unchanged.
pub async fn cancel_terminal_run_is_unchanged(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let (_, token) = claim(&store, &r, "w1", at(2), at(32)).await;
    let done = store
        .complete(&completion(
            &r,
            token,
            &result(AttemptOutcome::Succeeded, at(5)),
            RunTransition::Finish(RunState::Succeeded),
        ))
        .await
        .unwrap()
        .run;
    assert_eq!(
        store
            .cancel_run(&r.tenant, &r.run_id, at(6), "too late")
            .await
            .unwrap()
            .run,
        done
    );
    assert_eq!(get(&store, &r).await, done);
}

/// Cancelling a run that does not exist for the tenant is NotFound.
pub async fn cancel_unknown_run_is_not_found(store: Store) {
    let r = run("t1", "a", 0);
    insert(&store, &r).await;
    let res = store.cancel_run(&tenant("t2"), &r.run_id, at(1), "x").await;
    assert!(is_not_found(&res), "expected NotFound, got {res:?}");
    let res = store
        .cancel_run(&tenant("t1"), &RunId::from("a@nope"), at(1), "x")
        .await;
    assert!(is_not_found(&res), "expected NotFound, got {res:?}");
    assert_eq!(get(&store, &r).await, r);
}

// ----- scans -----

/// `expired_leases`: RUNNING runs of any tenant whose lease expired before `now`, at most
/// `limit`.
pub async fn expired_leases_across_tenants(store: Store) {
    let (a, b, live, pending) = (
        run("t1", "a", 0),
        run("t2", "b", 0),
        run("t1", "c", 0),
        run("t1", "d", 0),
    );
    for r in [&a, &b, &live, &pending] {
        insert(&store, r).await;
    }
    claim(&store, &a, "w1", at(1), at(10)).await;
    claim(&store, &b, "w1", at(1), at(20)).await;
    claim(&store, &live, "w1", at(1), at(100)).await;
    let mut found = run_ids(&store.expired_leases(at(50), 10).await.unwrap());
    found.sort();
    let mut expected = run_ids(&[a.clone(), b.clone()]);
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(store.expired_leases(at(50), 1).await.unwrap().len(), 1);
    assert!(store.expired_leases(at(5), 10).await.unwrap().is_empty());
    let found = store.expired_leases(at(15), 10).await.unwrap();
    assert_eq!(run_ids(&found), run_ids(std::slice::from_ref(&a)));
    assert_eq!(found[0], get(&store, &a).await);
}

/// `defer_pending` moves a PENDING run's `not_before` (so `stale_pending` passes it over until
/// then), and changes nothing of a RUNNING or absent run.
pub async fn defer_pending_moves_not_before_of_pending_runs_only(store: Store) {
    let (waiting, running) = (run("t1", "a", 10), run("t1", "b", 10));
    for r in [&waiting, &running] {
        insert(&store, r).await;
    }
    let (claimed, _) = claim(&store, &running, "w1", at(11), at(1000)).await;
    assert!(
        store
            .defer_pending(&waiting.tenant, &waiting.run_id, at(500))
            .await
            .unwrap()
    );
    let deferred = get(&store, &waiting).await;
    assert_eq!((deferred.state, deferred.not_before), (RunState::Pending, at(500)));
    assert!(store.stale_pending(at(100), 10).await.unwrap().is_empty());
    assert_eq!(
        run_ids(&store.stale_pending(at(500), 10).await.unwrap()),
        run_ids(&[deferred])
    );
    assert!(
        !store
            .defer_pending(&running.tenant, &running.run_id, at(500))
            .await
            .unwrap()
    );
    assert_eq!(get(&store, &running).await, claimed);
    let absent = run("t1", "nope", 10);
    assert!(
        !store
            .defer_pending(&absent.tenant, &absent.run_id, at(500))
            .await
            .unwrap()
    );
}

/// `take_settings` gives a run that has not started its job's new settings — priority,
/// attempts, concurrency key, notify — as stored and read back, and changes nothing of a
/// run already claimed, an absent one, or one that has them already.
pub async fn take_settings_reaches_unstarted_runs_only(store: Store) {
    use sked_core::alert::{AlertOn, Notify};
    use sked_core::concurrency::Concurrency;
    use sked_core::run_settings::RunSettings;
    let (waiting, running) = (run("t1", "a", 10), run("t1", "b", 10));
    for r in [&waiting, &running] {
        insert(&store, r).await;
    }
    let (claimed, _) = claim(&store, &running, "w1", at(11), at(1000)).await;
    let settings = RunSettings {
        priority: 9,
        max_attempts: 7,
        concurrency: Some(Concurrency {
            key: "db".into(),
            limit: 2,
        }),
        notify: Some(Notify {
            on: vec![AlertOn::Failed],
            webhook: "http://127.0.0.1:9/hook".into(),
        }),
    };
    assert_ne!(waiting.settings(), settings);
    let taken = store
        .take_settings(&waiting.tenant, &waiting.run_id, &settings)
        .await
        .unwrap()
        .expect("an unstarted run takes the settings");
    assert_eq!(taken.settings(), settings);
    assert_eq!(get(&store, &waiting).await, taken, "as stored");
    let again = store.take_settings(&waiting.tenant, &waiting.run_id, &settings).await;
    assert_eq!(again.unwrap(), None, "the same settings change nothing");
    let refused = store.take_settings(&running.tenant, &running.run_id, &settings).await;
    assert_eq!(refused.unwrap(), None, "a claimed run keeps what it started with");
    assert_eq!(get(&store, &running).await, claimed);
    let absent = run("t1", "nope", 10);
    let nothing = store.take_settings(&absent.tenant, &absent.run_id, &settings).await;
    assert_eq!(nothing.unwrap(), None);
}

/// `stale_pending`: PENDING runs of any tenant with `not_before <= ready_before`, oldest
/// first, at most `limit`.
pub async fn stale_pending_oldest_first_across_tenants(store: Store) {
    let (a, b, c, later, running) = (
        run("t1", "a", 30),
        run("t2", "b", 10),
        run("t1", "c", 20),
        run("t1", "d", 90),
        run("t1", "e", 5),
    );
    for r in [&a, &b, &c, &later, &running] {
        insert(&store, r).await;
    }
    claim(&store, &running, "w1", at(6), at(1000)).await;
    let found = store.stale_pending(at(30), 10).await.unwrap();
    assert_eq!(run_ids(&found), run_ids(&[b.clone(), c.clone(), a.clone()]));
    assert_eq!(found[0], b);
    assert_eq!(
        run_ids(&store.stale_pending(at(30), 2).await.unwrap()),
        run_ids(&[b, c])
    );
    assert!(store.stale_pending(t0(), 10).await.unwrap().is_empty());
}
