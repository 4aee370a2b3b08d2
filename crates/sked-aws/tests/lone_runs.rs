//! Lone jobs and runs on moto (`sked_aws::dynamo` module `lone`): a run fired while no job's
//! `after` names its job ends without reading edges, and every way a downstream can come while
//! the mark is out — a run in flight, a sweep that read the job before, an update decided on an
//! earlier read, a job created again over a DELETED one or in the batch that names it —
//! leaves no run that ends without releasing it.

mod common;

use sked_aws::DynamoStore;
use sked_aws::dynamo::codec::key;
use sked_aws::dynamo::keys::{JOB_SK, job_pk, run_sk};
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::ports::store::{ClaimOutcome, Completion, Firing, JobStore, JobStoreExt, RunTransition, StoreError};
use sked_core::ports::{Clock, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::timestamp::{Timestamp, trunc_ms};
use sked_testkit::contract::fixtures;
use std::sync::Arc;

/// One table; a store whose requests are counted (the sweeper's and worker's, which read
/// jobs lone) and a plain one (another process: the API's).
struct Setup {
    store: DynamoStore,
    api: DynamoStore,
    counter: sked_aws::RequestCounter,
    client: aws_sdk_dynamodb::Client,
    config: sked_aws::AwsConfig,
}

async fn setup() -> Setup {
    let (clients, config) = common::fresh_table().await;
    let counter = sked_aws::RequestCounter::new();
    let counted = sked_aws::connect(&sked_aws::AwsConfig {
        request_counter: Some(counter.clone()),
        ..config.clone()
    })
    .await;
    Setup {
        store: DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock)),
        api: DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock)),
        counter,
        client: clients.dynamodb,
        config,
    }
}

impl Setup {
    /// Whether the item at `pk`/`sk` carries the mark `lone`.
    async fn marked(&self, pk: String, sk: String) -> bool {
        let item = common::stored_item(&self.client, &self.config.table, key(pk, sk))
            .await
            .expect("the item");
        item.contains_key("lone")
    }

    async fn job_marked(&self, id: &str) -> bool {
        self.marked(job_pk("t1", id), JOB_SK.into()).await
    }

    async fn run_marked(&self, run: &Run) -> bool {
        self.marked(
            job_pk("t1", run.job_id.as_str()),
            run_sk(run.scheduled_for.timestamp_millis()),
        )
        .await
    }

    /// The sweep's read of the due jobs (which notes them lone or not), with `id` among them.
    async fn sweep_reads(&self, id: &str) {
        let due = self
            .store
            .due_jobs(now() + chrono::Duration::seconds(1), 100)
            .await
            .unwrap();
        assert!(due.iter().any(|j| j.id.as_str() == id), "{id} due: {due:?}");
    }

    /// Fires `job`'s run at `at` and claims it: the run, RUNNING, and its token.
    async fn fire_and_claim(&self, job: &Job, at: Timestamp) -> (Run, u64) {
        let run = Run::new_pending(job.tenant.clone(), job.id.clone(), at, Trigger::Schedule, 5, at, 1, at);
        let firing = Firing {
            tenant: job.tenant.clone(),
            job_id: job.id.clone(),
            expected_version: job.version,
            expected_next_fire_at: job.next_fire_at,
            next_fire_at: Some(at + chrono::Duration::hours(1)),
            state: JobState::Active,
            runs: vec![run.clone()],
            cancel: vec![],
            skipped: vec![],
            at,
        };
        assert_eq!(self.store.fire_one(&firing).await.unwrap().len(), 1);
        let lease = at + chrono::Duration::seconds(30);
        match self
            .store
            .claim_one(&run.tenant, &run.run_id, &WorkerId::from("w"), at, lease)
            .await
            .unwrap()
        {
            ClaimOutcome::Claimed { token, .. } => (run, token),
            other => panic!("claim: {other:?}"),
        }
    }

    /// Ends `run` (claimed with `token`) SUCCEEDED.
    async fn succeed(&self, run: &Run, token: u64) {
        self.store
            .complete(&Completion {
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
                token,
                result: fixtures::result(AttemptOutcome::Succeeded, now()),
                next: RunTransition::Finish(RunState::Succeeded),
                only_if_expired_by: None,
            })
            .await
            .unwrap();
    }

    /// `down`'s runs, by state.
    async fn runs_of(&self, down: &str) -> Vec<RunState> {
        let runs = self
            .api
            .active_runs_of(&TenantId::from("t1"), &JobId::from(down))
            .await
            .unwrap();
        runs.iter().map(|r| r.state).collect()
    }
}

fn now() -> Timestamp {
    trunc_ms(SystemClock.now())
}

fn job(id: &str, schedule: serde_json::Value, next: Option<Timestamp>) -> Job {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "schedule": schedule,
        "task": {"command": {"argv": ["ok"]}},
        "overlap": "allow",
    }))
    .unwrap();
    Job {
        tenant: TenantId::from("t1"),
        id: JobId::from(id),
        spec,
        state: JobState::Active,
        next_fire_at: next,
        version: 1,
        created_at: now(),
        updated_at: now(),
    }
}

/// A job every second, due now.
fn upstream(id: &str) -> Job {
    job(
        id,
        serde_json::json!({"every": "1s", "anchor": "2026-03-01T00:00:00.000Z"}),
        Some(now()),
    )
}

/// A job after `up`.
fn downstream(id: &str, up: &str) -> Job {
    job(id, serde_json::json!({"after": {"jobs": [up]}}), None)
}

#[tokio::test]
async fn a_run_of_a_job_no_after_names_ends_without_reading_edges() {
    let s = setup().await;
    let up = upstream("up");
    s.store.create_jobs(std::slice::from_ref(&up), None).await.unwrap();
    assert!(s.job_marked("up").await, "a new job no other names is lone");
    s.sweep_reads("up").await;
    let (run, token) = s.fire_and_claim(&up, up.next_fire_at.unwrap()).await;
    assert!(s.run_marked(&run).await, "fired from a lone read: the run is lone");
    s.counter.reset();
    s.succeed(&run, token).await;
    assert_eq!(s.counter.of("DynamoDB", "Query"), 0, "{:?}", s.counter.snapshot());
}

/// The run was fired lone and claimed; a downstream comes, and the run then ends: the worker's
/// copy (lone) is refused and the end reads the edges and releases the downstream.
#[tokio::test]
async fn a_downstream_created_while_a_lone_run_is_out_is_released_when_it_ends() {
    let s = setup().await;
    let up = upstream("up");
    s.store.create_jobs(std::slice::from_ref(&up), None).await.unwrap();
    s.sweep_reads("up").await;
    let (run, token) = s.fire_and_claim(&up, up.next_fire_at.unwrap()).await;
    assert!(s.run_marked(&run).await);

    s.api.create_jobs(&[downstream("down", "up")], None).await.unwrap();
    assert!(!s.job_marked("up").await, "named by a downstream: not lone");
    assert!(!s.run_marked(&run).await, "its running run is not lone either");
    assert!(s.job_marked("down").await, "the downstream itself is named by none");

    s.succeed(&run, token).await;
    assert_eq!(
        s.runs_of("down").await,
        vec![RunState::Pending],
        "released at the run's time"
    );
}

/// The sweep read the job lone; a downstream comes before its firing: the firing writes
/// runs that are not lone, and their end releases the downstream.
#[tokio::test]
async fn a_firing_decided_on_a_lone_read_after_a_downstream_came_fires_runs_not_lone() {
    let s = setup().await;
    let up = upstream("up");
    s.api.create_jobs(std::slice::from_ref(&up), None).await.unwrap();
    s.sweep_reads("up").await;
    s.api.create_jobs(&[downstream("down", "up")], None).await.unwrap();

    let (run, token) = s.fire_and_claim(&up, up.next_fire_at.unwrap()).await;
    assert!(!s.run_marked(&run).await);
    s.succeed(&run, token).await;
    assert_eq!(s.runs_of("down").await, vec![RunState::Pending]);
}

/// An update keeps the job lone (read lone at the version it updates, and still so); one
/// decided on a lone read after a downstream came writes it not lone; and a job no process
/// read lone is written not lone.
#[tokio::test]
async fn an_update_keeps_a_job_lone_only_while_no_downstream_names_it() {
    let s = setup().await;
    let up = upstream("up");
    s.api.create_jobs(std::slice::from_ref(&up), None).await.unwrap();
    let update = async |store: &DynamoStore, from: u64| {
        let current = store.get_job(&up.tenant, &up.id).await.unwrap().unwrap();
        assert_eq!(current.version, from);
        let next = Job {
            version: from + 1,
            ..current.clone()
        };
        store.update_job(&next, from, current.next_fire_at).await.unwrap();
    };
    update(&s.store, 1).await;
    assert!(s.job_marked("up").await, "kept lone");

    // Read lone at version 2; a downstream comes; the update goes through, not lone.
    let read = s.store.get_job(&up.tenant, &up.id).await.unwrap().unwrap();
    s.api.create_jobs(&[downstream("down", "up")], None).await.unwrap();
    let next = Job {
        version: 3,
        ..read.clone()
    };
    s.store.update_job(&next, 2, read.next_fire_at).await.unwrap();
    assert!(!s.job_marked("up").await);

    // A lone job updated by a process that did not read it so: written not lone.
    let other = upstream("other");
    s.api.create_jobs(std::slice::from_ref(&other), None).await.unwrap();
    let fresh = DynamoStore::new(s.client.clone(), &s.config, Arc::new(SystemClock));
    let next = Job {
        version: 2,
        ..other.clone()
    };
    fresh.update_job(&next, 1, other.next_fire_at).await.unwrap();
    assert!(!s.job_marked("other").await);
}

/// A job created over a DELETED one (whose old downstreams' edges are still in its partition)
/// is not lone; nor is one named by another job of its batch.
#[tokio::test]
async fn a_job_created_again_or_named_in_its_batch_is_not_lone() {
    let s = setup().await;
    let up = upstream("up");
    s.api
        .create_jobs(&[up.clone(), downstream("down", "up")], None)
        .await
        .unwrap();
    assert!(!s.job_marked("up").await, "named in its batch");
    assert!(s.job_marked("down").await);

    let gone = upstream("gone");
    s.api.create_jobs(std::slice::from_ref(&gone), None).await.unwrap();
    let deleted = Job {
        state: JobState::Deleted,
        next_fire_at: None,
        version: 2,
        ..gone.clone()
    };
    s.api.update_job(&deleted, 1, gone.next_fire_at).await.unwrap();
    s.api.create_jobs(std::slice::from_ref(&gone), None).await.unwrap();
    assert!(!s.job_marked("gone").await, "created over a DELETED item");
    assert_eq!(
        s.api.get_job(&gone.tenant, &gone.id).await.unwrap().unwrap().state,
        JobState::Active
    );
}

/// A batch create larger than one transaction that is refused leaves the jobs it wrote
/// DELETED: a downstream created meanwhile (here: after) wrote its edge in such a job's
/// partition, so the job created again is not lone, and its run's end releases the downstream.
#[tokio::test]
async fn a_job_of_a_refused_chunked_batch_created_again_is_not_lone() {
    let s = setup().await;
    s.api.create_jobs(&[upstream("clash")], None).await.unwrap();
    let mut batch: Vec<Job> = (0..150).map(|i| upstream(&format!("j{i:03}"))).collect();
    batch[0] = upstream("up");
    batch.push(upstream("clash"));
    let refused = s.api.create_jobs(&batch, None).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");

    s.api.create_jobs(&[downstream("down", "up")], None).await.unwrap();
    let up = upstream("up");
    s.store.create_jobs(std::slice::from_ref(&up), None).await.unwrap();
    assert!(
        !s.job_marked("up").await,
        "created over the refused batch's DELETED item"
    );

    s.sweep_reads("up").await;
    let (run, token) = s.fire_and_claim(&up, up.next_fire_at.unwrap()).await;
    s.succeed(&run, token).await;
    assert_eq!(s.runs_of("down").await, vec![RunState::Pending], "released");
}
