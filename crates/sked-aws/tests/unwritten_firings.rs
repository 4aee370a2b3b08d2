//! One-shots' firings left unwritten on moto (`AwsConfig::unwritten_one_shots`; module
//! `unwritten` and `claim_unwritten` of `sked_aws::dynamo`): the claim that reads its job is
//! the run's first write, built from the job — and a change of the job in the send window
//! decides what, if anything, the claim starts. Two stores on one table: the sweeper's and
//! worker's process (its requests counted), and the API's (another process, which knows
//! nothing of what the first one sent).

mod common;

use sked_aws::DynamoStore;
use sked_aws::dynamo::codec::{key, ms};
use sked_aws::dynamo::keys::{ACTIVE_SK, job_pk, run_sk};
use sked_core::ids::WorkerId;
use sked_core::job::{Job, JobState};
use sked_core::ports::store::{
    ClaimBatch, ClaimOutcome, JobClaim, JobFilter, JobStore, JobStoreExt, PageRequest, StoreError,
};
use sked_core::ports::{FiredRunListing, SystemClock};
use sked_core::run::{Run, RunState};
use sked_testkit::contract::fixtures::{at, one_shot, planned_firing};
use std::sync::Arc;

struct Setup {
    store: DynamoStore,
    api: DynamoStore,
    counter: sked_aws::RequestCounter,
    client: aws_sdk_dynamodb::Client,
    table: String,
}

async fn setup() -> Setup {
    let (clients, mut config) = common::fresh_table().await;
    config.unwritten_one_shots = true;
    let counter = sked_aws::RequestCounter::new();
    let counted = sked_aws::connect(&sked_aws::AwsConfig {
        request_counter: Some(counter.clone()),
        ..config.clone()
    })
    .await;
    Setup {
        store: DynamoStore::new(counted.dynamodb, &config, Arc::new(SystemClock)),
        api: DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock)),
        counter,
        client: clients.dynamodb,
        table: config.table.clone(),
    }
}

impl Setup {
    /// The item of `run`, read directly.
    async fn item(&self, run: &Run) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
        let (pk, sk) = (
            job_pk(run.tenant.as_str(), run.job_id.as_str()),
            run_sk(ms(run.scheduled_for)),
        );
        common::stored_item(&self.client, &self.table, key(pk, sk))
            .await
            .expect("the run's item")
    }

    /// Creates the one-shot `a` (due at `at(60)`) and fires it unwritten; the run it stands for.
    async fn fired(&self, sent: bool) -> (Job, Run) {
        let a = one_shot("t1", "a", 60);
        self.store.create_jobs(std::slice::from_ref(&a), None).await.unwrap();
        let firing = planned_firing(&a, 10);
        let fired = self.store.fire_one(&firing).await.unwrap();
        if sent {
            self.store.firings_sent(std::slice::from_ref(&firing)).await.unwrap();
        }
        let [run] = fired.as_slice() else {
            panic!("one run fired: {fired:?}")
        };
        (a, run.clone())
    }

    /// The worker's claim of `run` at its time, reading its job.
    async fn claim(&self, run: &Run) -> Result<JobClaim, StoreError> {
        let batch = ClaimBatch {
            runs: vec![(run.tenant.clone(), run.run_id.clone())],
            worker: WorkerId::from("w1"),
            owners: vec![],
            now: run.not_before,
            lease_until: run.not_before + chrono::Duration::seconds(30),
            read_jobs: true,
            hold: vec![],
            alone: false,
        };
        let mut answers = self.store.claim(&batch).await.unwrap();
        answers.pop().expect("one answer")
    }
}

#[tokio::test]
async fn a_claim_reading_its_job_puts_the_run_a_firing_left_unwritten() {
    let s = setup().await;
    assert_eq!(s.store.fired_run_listing(), FiredRunListing::OnceWritten);
    let (a, run) = s.fired(true).await;
    assert_eq!(
        s.counter.of("DynamoDB", "TransactWriteItems"),
        0,
        "the firing wrote nothing"
    );
    assert!(
        s.api.get_run(&run.tenant, &run.run_id).await.unwrap().is_none(),
        "no item holds it yet"
    );
    s.counter.reset();
    let claim = s.claim(&run).await.unwrap();
    let JobClaim::Claimed(ClaimOutcome::Claimed { run: started, token: 1 }, Some(job)) = claim else {
        panic!("claimed: {claim:?}")
    };
    assert_eq!(
        (started.run_id.clone(), started.state),
        (run.run_id.clone(), RunState::Running)
    );
    assert_eq!(job.version, a.version);
    // The job read once, the run put, the job read again (no read of the run).
    assert_eq!(s.counter.of("DynamoDB", "PutItem"), 1);
    assert_eq!(
        s.counter.of("DynamoDB", "GetItem") + s.counter.of("DynamoDB", "BatchGetItem"),
        2
    );
    // In no index of active runs: its message carries it (`codec::KEYED`).
    let item = s.item(&started).await;
    for index_key in ["gsi3pk", "gsi3sk", "act"] {
        assert!(!item.contains_key(index_key), "{index_key} on {item:?}");
    }
    // Another process sees what was written: the run, and its job COMPLETED.
    assert_eq!(s.api.get_run(&run.tenant, &run.run_id).await.unwrap(), Some(started));
    let shown = s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((shown.state, shown.next_fire_at), (JobState::Completed, None));
}

#[tokio::test]
async fn a_job_moved_in_the_send_window_leaves_its_claim_nothing() {
    let s = setup().await;
    let (a, run) = s.fired(false).await;
    // The API read the job as not fired (nothing was marked sent) and moves it.
    let read = s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!(read.state, JobState::Active);
    let moved = Job {
        next_fire_at: Some(at(120)),
        version: read.version + 1,
        ..one_shot("t1", "a", 120)
    };
    s.api.update_job(&moved, read.version, read.next_fire_at).await.unwrap();
    let claim = s.claim(&run).await;
    assert!(matches!(claim, Err(StoreError::NotFound)), "{claim:?}");
    assert!(s.api.get_run(&run.tenant, &run.run_id).await.unwrap().is_none());
    assert_eq!(s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap(), moved);
}

#[tokio::test]
async fn a_change_read_before_the_claim_is_refused_once_the_claim_put_the_run() {
    let s = setup().await;
    let (a, run) = s.fired(false).await;
    let read = s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!(read.state, JobState::Active, "read in the send window");
    let claim = s.claim(&run).await.unwrap();
    assert!(
        matches!(claim, JobClaim::Claimed(ClaimOutcome::Claimed { .. }, _)),
        "{claim:?}"
    );
    let moved = Job {
        version: read.version + 1,
        ..one_shot("t1", "a", 120)
    };
    let refused = s.api.update_job(&moved, read.version, read.next_fire_at).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    let shown = s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((shown.state, shown.version), (JobState::Completed, read.version));
    let running = s.api.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
    assert_eq!(running.state, RunState::Running);
}

/// A run put by its claim has no `active` entry: its job's active runs read it by key — by
/// its job's one-shot time, and, once a change moved the job, by the time that change
/// settled — so the overlap check and a new downstream's pass over them still find it.
#[tokio::test]
async fn a_claimed_run_is_found_by_its_key_even_after_its_job_moved() {
    let s = setup().await;
    let (a, run) = s.fired(true).await;
    let claim = s.claim(&run).await.unwrap();
    let JobClaim::Claimed(ClaimOutcome::Claimed { run: running, .. }, _) = claim else {
        panic!("claimed: {claim:?}")
    };
    let item = s.item(&run).await;
    assert!(!item.contains_key(ACTIVE_SK), "no active entry: {item:?}");
    assert!(item.contains_key("lone"), "fired from a lone job");
    assert_eq!(
        s.api.active_runs_of(&a.tenant, &a.id).await.unwrap(),
        vec![running.clone()]
    );

    // Moved (read as fired): the change settles the firing, and the job names another time.
    let read = s.api.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!(read.state, JobState::Completed);
    let moved = Job {
        version: read.version + 1,
        ..one_shot("t1", "a", 120)
    };
    s.api.update_job(&moved, read.version, read.next_fire_at).await.unwrap();
    assert_eq!(
        s.api.active_runs_of(&a.tenant, &a.id).await.unwrap(),
        vec![running.clone()]
    );

    // A downstream comes: the run still running loses its lone mark (its end reads edges).
    let mut down = one_shot("t1", "down", 600);
    down.spec.schedule = serde_json::from_value(serde_json::json!({"after": {"jobs": ["a"]}})).unwrap();
    down.next_fire_at = None;
    s.api.create_jobs(std::slice::from_ref(&down), None).await.unwrap();
    assert!(!s.item(&run).await.contains_key("lone"), "the mark taken off");
}

/// Due reads pass the jobs sent unwritten without counting them against the sweep's batch:
/// a bucket with more one-shots than a batch is fired whole, one batch after another (a
/// read that stopped at the first `limit` items would find only sent ones, and starve the
/// rest of the bucket).
#[tokio::test]
async fn sweeps_of_one_job_each_fire_a_bucket_of_one_shots_whole() {
    let s = setup().await;
    let jobs: Vec<Job> = (0..6).map(|i| one_shot("t1", &format!("j{i}"), 60)).collect();
    s.store.create_jobs(&jobs, None).await.unwrap();
    let horizon = at(600);
    let mut fired = std::collections::BTreeSet::new();
    for _ in 0..jobs.len() * 2 {
        let due = s.store.due_jobs(horizon, 1).await.unwrap();
        let [job] = due.as_slice() else {
            break;
        };
        let firing = planned_firing(job, 10);
        s.store.fire_one(&firing).await.unwrap();
        s.store.firings_sent(std::slice::from_ref(&firing)).await.unwrap();
        assert!(fired.insert(job.id.clone()), "{} fired twice", job.id);
    }
    assert_eq!(fired.len(), jobs.len(), "fired: {fired:?}");
}

/// A listing of COMPLETED jobs reads the ACTIVE ones too (a fired one-shot left unwritten is
/// stored ACTIVE) and keeps those shown COMPLETED: a page its filter emptied still goes on.
#[tokio::test]
async fn completed_jobs_are_listed_past_pages_of_jobs_not_fired() {
    let s = setup().await;
    let not_fired: Vec<Job> = ["a", "b"].iter().map(|id| one_shot("t1", id, 60)).collect();
    s.store.create_jobs(&not_fired, None).await.unwrap();
    let c = one_shot("t1", "c", 60);
    s.store.create_jobs(std::slice::from_ref(&c), None).await.unwrap();
    let firing = planned_firing(&c, 10);
    s.store.fire_one(&firing).await.unwrap();
    s.store.firings_sent(std::slice::from_ref(&firing)).await.unwrap();
    let completed = JobFilter {
        state: Some(JobState::Completed),
        ..JobFilter::default()
    };
    let mut listed = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = PageRequest { cursor, limit: 1 };
        let got = s.store.list_jobs(&c.tenant, &completed, &page).await.unwrap();
        listed.extend(got.items.into_iter().map(|j| j.id));
        cursor = got.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(listed, vec![c.id]);
}
