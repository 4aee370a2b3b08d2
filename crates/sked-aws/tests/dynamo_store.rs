//! What the DynamoDB store does beyond the shared contract, against a real moto server:
//! transactions larger than DynamoDB's 100-item limit, racing claims (of one run, and of
//! runs of one `queue_one` job), TTL on finished runs,
//! the due index's look-ahead, and error mapping with sources kept.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use sked_aws::DynamoStore;
use sked_aws::dynamo::codec::key;
use sked_aws::dynamo::keys::{JOB_SK, job_pk, pending_pk, pending_sk, run_sk};
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::ports::store::{
    ClaimBatch, ClaimOutcome, Completion, Firing, JobClaim, JobStore, JobStoreExt, RunTransition, StoreError,
};
use sked_core::ports::{Clock, Dispatch, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::timestamp::{Timestamp, trunc_ms};
use sked_testkit::contract::fixtures;
use std::collections::HashMap;
use std::sync::Arc;

async fn store() -> (Arc<DynamoStore>, aws_sdk_dynamodb::Client, String) {
    let (clients, config) = common::fresh_table().await;
    let store = DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    (Arc::new(store), clients.dynamodb, config.table)
}

/// Clients of `config`'s endpoint whose requests are counted, and their counter.
async fn counted_clients(config: &sked_aws::AwsConfig) -> (sked_aws::AwsClients, sked_aws::RequestCounter) {
    let counter = sked_aws::RequestCounter::new();
    let clients = sked_aws::connect(&sked_aws::AwsConfig {
        request_counter: Some(counter.clone()),
        ..config.clone()
    })
    .await;
    (clients, counter)
}

fn now() -> Timestamp {
    trunc_ms(SystemClock.now())
}

fn job_at(id: &str, next: Timestamp) -> Job {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "schedule": {"every": "1s", "anchor": "2026-03-01T00:00:00.000Z"},
        "task": {"command": {"argv": ["ok"]}},
        "overlap": "allow",
    }))
    .unwrap();
    Job {
        tenant: TenantId::from("t1"),
        id: JobId::from(id),
        spec,
        state: JobState::Active,
        next_fire_at: Some(next),
        version: 1,
        created_at: now(),
        updated_at: now(),
    }
}

/// The firing at `at` of `job` as created (version 1): `runs` inserted, the job kept ACTIVE and
/// due next at `next`.
fn firing_of(job: &Job, runs: Vec<Run>, next: Timestamp, at: Timestamp) -> Firing {
    Firing {
        tenant: job.tenant.clone(),
        job_id: job.id.clone(),
        expected_version: 1,
        expected_next_fire_at: job.next_fire_at,
        next_fire_at: Some(next),
        state: JobState::Active,
        runs,
        cancel: vec![],
        skipped: vec![],
        at,
    }
}

fn run_at(job: &str, at: Timestamp) -> Run {
    run_at_of(&job_at(job, at), at)
}

/// A PENDING run of `job` at `at`.
fn run_at_of(job: &Job, at: Timestamp) -> Run {
    Run::new_pending(job.tenant.clone(), job.id.clone(), at, Trigger::Schedule, 5, at, 3, at)
}

#[tokio::test]
async fn a_firing_larger_than_one_transaction_inserts_every_run() {
    let (store, _, _) = store().await;
    let t0 = fixtures::t0();
    let job = job_at("big", t0);
    store.create_jobs(std::slice::from_ref(&job), None).await.unwrap();
    let runs: Vec<Run> = (0..150)
        .map(|i| run_at("big", t0 + chrono::Duration::seconds(i)))
        .collect();
    store.insert_run(&runs[10]).await.unwrap();
    let firing = firing_of(&job, runs.clone(), t0 + chrono::Duration::seconds(150), t0);
    let inserted = store.fire_one(&firing).await.unwrap();
    assert_eq!(inserted.len(), 149, "all but the one that existed");
    let active = store.active_runs_of(&job.tenant, &job.id).await.unwrap();
    assert_eq!(active.len(), 150);
    let after = store.get_job(&job.tenant, &job.id).await.unwrap().unwrap();
    assert_eq!(after.next_fire_at, firing.next_fire_at);
    assert!(matches!(store.fire_one(&firing).await, Err(StoreError::Conflict(_))));
}

#[tokio::test]
async fn a_create_larger_than_one_transaction_is_all_or_nothing() {
    let (store, _, _) = store().await;
    let t = fixtures::t0();
    store.create_jobs(&[job_at("clash", t)], None).await.unwrap();
    let jobs: Vec<Job> = (0..150).map(|i| job_at(&format!("j{i:03}"), t)).collect();
    // The clash comes last, in the second transaction: the first must be undone.
    let mut clashing = jobs.clone();
    clashing.push(job_at("clash", t));
    let res = store.create_jobs(&clashing, Some(("k", "fp"))).await;
    assert!(matches!(res, Err(StoreError::Conflict(_))), "{res:?}");
    // Undone as a deleted job is (absent to every reader, and never created lone again:
    // tests/lone_runs.rs).
    let undone = store
        .get_job(&TenantId::from("t1"), &JobId::from("j000"))
        .await
        .unwrap()
        .map(|j| j.state);
    assert_eq!(undone, Some(JobState::Deleted));
    assert!(
        store
            .list_jobs(&TenantId::from("t1"), &Default::default(), &page(500))
            .await
            .unwrap()
            .items
            .iter()
            .all(|j| j.id.as_str() == "clash")
    );
    assert_eq!(
        store.idempotency_lookup(&TenantId::from("t1"), "k").await.unwrap(),
        None
    );
    store.create_jobs(&jobs, Some(("k", "fp"))).await.unwrap();
    let (_, ids) = store
        .idempotency_lookup(&TenantId::from("t1"), "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids.len(), 150);
}

#[tokio::test]
async fn racing_claims_start_exactly_one_attempt() {
    let (store, _, _) = store().await;
    let at = now();
    let run = run_at("race", at);
    store.insert_run(&run).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, run) = (store.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let lease = at + chrono::Duration::seconds(60);
            store
                .claim_one(&run.tenant, &run.run_id, &WorkerId(format!("w{i}")), at, lease)
                .await
                .unwrap()
        }));
    }
    let mut claimed = 0;
    for t in tasks {
        match t.await.unwrap() {
            ClaimOutcome::Claimed { .. } => claimed += 1,
            ClaimOutcome::Leased(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(claimed, 1);
    let stored = store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
    assert_eq!(stored.attempts.len(), 1);
}

#[tokio::test]
async fn racing_claims_of_different_runs_of_one_job_alone_start_exactly_one() {
    let (store, _, _) = store().await;
    let at = now();
    // Eight runs of one job, each claimed "alone" (queue_one) by its own worker at once.
    let runs: Vec<Run> = (0..8)
        .map(|i| run_at("serial", at - chrono::Duration::seconds(i)))
        .collect();
    for run in &runs {
        store.insert_run(run).await.unwrap();
    }
    let mut tasks = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let (store, run) = (store.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let lease = at + chrono::Duration::seconds(60);
            let batch = ClaimBatch {
                runs: vec![(run.tenant.clone(), run.run_id.clone())],
                worker: WorkerId(format!("w{i}")),
                owners: Vec::new(),
                now: at,
                lease_until: lease,
                read_jobs: false,
                hold: Vec::new(),
                alone: true,
            };
            match store.claim(&batch).await.unwrap().remove(0).unwrap() {
                JobClaim::Claimed(outcome, _) => outcome,
                JobClaim::Held(job) => panic!("held {}", job.id),
            }
        }));
    }
    let mut claimed = 0;
    for t in tasks {
        match t.await.unwrap() {
            ClaimOutcome::Claimed { .. } => claimed += 1,
            ClaimOutcome::Leased(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(claimed, 1, "one run of the job at a time");
    let mut running = 0;
    for run in &runs {
        let stored = store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
        running += usize::from(stored.state == RunState::Running);
    }
    assert_eq!(running, 1);
}

#[tokio::test]
async fn finished_runs_carry_a_ttl_and_live_ones_do_not() {
    let (store, client, table) = store().await;
    let at = fixtures::t0();
    let run = run_at("ttl", at);
    store.insert_run(&run).await.unwrap();
    let ttl_of = async || {
        let item = client
            .get_item()
            .table_name(&table)
            .set_key(Some(key(job_pk("t1", "ttl"), run_sk(at.timestamp_millis()))))
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        item.get("ttl")
            .and_then(|v| v.as_n().ok())
            .map(|n| n.parse::<i64>().unwrap())
    };
    assert_eq!(ttl_of().await, None);
    let ClaimOutcome::Claimed { token, .. } = store
        .claim_one(
            &run.tenant,
            &run.run_id,
            &WorkerId::from("w"),
            at,
            at + chrono::Duration::seconds(30),
        )
        .await
        .unwrap()
    else {
        panic!("claim")
    };
    let done = at + chrono::Duration::seconds(5);
    store
        .complete(&Completion {
            tenant: run.tenant.clone(),
            run_id: run.run_id.clone(),
            token,
            result: fixtures::result(AttemptOutcome::Succeeded, done),
            next: RunTransition::Finish(RunState::Succeeded),
            only_if_expired_by: None,
        })
        .await
        .unwrap();
    assert_eq!(
        ttl_of().await,
        Some(done.timestamp() + 30 * 24 * 3600),
        "default retention: 30 days"
    );
}

/// A run of `job` due at `at`, inserted and claimed at `at` with a lease until `lease_until`,
/// and its fencing token.
async fn running(store: &DynamoStore, job: &str, at: Timestamp, lease_until: Timestamp) -> (Run, u64) {
    let run = run_at(job, at);
    store.insert_run(&run).await.unwrap();
    match store
        .claim_one(&run.tenant, &run.run_id, &WorkerId::from("w"), at, lease_until)
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed { token, .. } => (run, token),
        other => panic!("claim {job}: {other:?}"),
    }
}

/// The jobs of the runs `expired_leases(now, limit)` answers, sorted.
async fn expired_jobs(store: &DynamoStore, now: Timestamp, limit: usize) -> Vec<String> {
    let mut jobs: Vec<String> = store
        .expired_leases(now, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job_id.to_string())
        .collect();
    jobs.sort();
    jobs
}

/// `run`'s item as the table holds it (a consistent read).
async fn run_item_as_stored(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    run: &Run,
) -> HashMap<String, AttributeValue> {
    client
        .get_item()
        .table_name(table)
        .set_key(Some(key(
            job_pk(run.tenant.as_str(), run.job_id.as_str()),
            run_sk(run.scheduled_for.timestamp_millis()),
        )))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap()
}

/// Writes `item` as it is, past the store: an item as an older release wrote it.
async fn put_as_is(client: &aws_sdk_dynamodb::Client, table: &str, item: HashMap<String, AttributeValue>) {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

/// The `live` index files a running run by its `not_before` while its lease expires within a
/// 5-minute step of it, else by the step its lease expires in: a heartbeat that keeps the key
/// leaves the entry where it is (so it writes no index), one that crosses into the next step
/// moves it; the reaper reads every entry filed by now and answers exactly the runs whose
/// lease expired — not those alive under the same key.
#[tokio::test]
async fn running_runs_are_filed_by_their_lease_step_and_reaped_by_their_real_expiry() {
    let (store, client, table) = store().await;
    let step = fixtures::t0(); // 2026-03-01T00:00:00Z: a step's start
    let secs = chrono::Duration::seconds;
    let live_key = async |run: &Run| {
        let item = run_item_as_stored(&client, &table, run).await;
        item.get("gsi3sk").map(|v| v.as_s().unwrap().clone())
    };
    let (soon, soon_token) = running(&store, "soon", step, step + secs(10)).await;
    let (later, _) = running(&store, "later", step, step + secs(240)).await;
    let (next_step, _) = running(&store, "next-step", step, step + secs(360)).await;
    assert_eq!(live_key(&soon).await, live_key(&later).await, "one step, one key");
    assert_ne!(live_key(&soon).await, live_key(&next_step).await);

    let before = live_key(&soon).await;
    store
        .heartbeat(&soon.tenant, &soon.run_id, soon_token, step + secs(5), step + secs(20))
        .await
        .unwrap();
    assert_eq!(
        live_key(&soon).await,
        before,
        "a heartbeat within the step keeps the key"
    );

    let expired = async |now: Timestamp| expired_jobs(&store, now, 100).await;
    assert!(expired(step + secs(19)).await.is_empty(), "extended to 20 s");
    assert_eq!(expired(step + secs(21)).await, ["soon"]);
    assert_eq!(expired(step + secs(241)).await, ["later", "soon"]);
    assert_eq!(expired(step + secs(361)).await, ["later", "next-step", "soon"]);

    // A heartbeat whose extension crosses into the next step moves the entry there.
    store
        .heartbeat(
            &soon.tenant,
            &soon.run_id,
            soon_token,
            step + secs(15),
            step + secs(310),
        )
        .await
        .unwrap();
    assert_eq!(live_key(&soon).await, live_key(&next_step).await);
    assert_eq!(expired(step + secs(305)).await, ["later"]);
}

/// The reaper's read of the `live` index goes past a full batch of runs alive in the current
/// step (more than one `BatchGetItem`) to the one whose lease expired in it, and answers a
/// lease expired in an older step first.
#[tokio::test]
async fn the_reaper_finds_an_expired_lease_among_more_live_runs_than_one_batch() {
    let (store, _, _) = store().await;
    let step = fixtures::t0() + chrono::Duration::minutes(5);
    let secs = chrono::Duration::seconds;
    for i in 0..120 {
        running(&store, &format!("alive-{i:03}"), step, step + secs(200)).await;
    }
    running(&store, "expired-in-step", step, step + secs(30)).await;
    let now = step + secs(60);
    assert_eq!(expired_jobs(&store, now, 1).await, ["expired-in-step"]);

    running(&store, "expired-a-step-before", step - secs(100), step - secs(10)).await;
    let first = store.expired_leases(now, 1).await.unwrap();
    assert_eq!(
        first[0].job_id.as_str(),
        "expired-a-step-before",
        "older steps are read first"
    );
    let all = store.expired_leases(now, 10).await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
}

#[tokio::test]
async fn the_due_index_answers_near_jobs_and_leaves_far_ones_to_a_later_look() {
    let (store, client, table) = store().await;
    let soon = now() + chrono::Duration::minutes(3);
    store.create_jobs(&[job_at("soon", soon)], None).await.unwrap();
    assert!(store.due_jobs(now(), 10).await.unwrap().is_empty());
    assert_eq!(store.next_due_at().await.unwrap(), Some(soon));
    let due = store.due_jobs(soon, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    // Due within the filing lead (10 minutes): filed under the minute it was written, one of
    // the shards.
    let bucket = due_bucket(&client, &table, "soon").await;
    let written = now();
    let minutes = [written - chrono::Duration::minutes(1), written].map(|t| t.format("DUE#%Y%m%d%H%M#").to_string());
    assert!(minutes.iter().any(|m| bucket.starts_with(m)), "{bucket}");

    let mut far = job_at("soon", now() + chrono::Duration::hours(2));
    far.version = 2;
    store.update_job(&far, 1, Some(soon)).await.unwrap();
    assert_eq!(store.next_due_at().await.unwrap(), None, "beyond the 15-minute window");
    // Due later than the lead: filed the lead before it is due.
    let lead = (far.next_fire_at.unwrap() - chrono::Duration::minutes(10))
        .format("DUE#%Y%m%d%H%M#")
        .to_string();
    let bucket = due_bucket(&client, &table, "soon").await;
    assert!(bucket.starts_with(&lead), "{bucket}");
    let horizon = now() + chrono::Duration::hours(3);
    assert_eq!(
        store.due_jobs(horizon, 10).await.unwrap().len(),
        1,
        "a due query still finds it"
    );
}

/// The `sched` partition key of job `id` of tenant `t1` (its due bucket).
async fn due_bucket(client: &aws_sdk_dynamodb::Client, table: &str, id: &str) -> String {
    let item = client
        .get_item()
        .table_name(table)
        .set_key(Some(key(job_pk("t1", id), JOB_SK.into())))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    item["gsi1pk"].as_s().unwrap().clone()
}

/// A job is filed 10 minutes before it is due: a sweeper looking only 10 s ahead finds the
/// bucket holding it "empty" of due jobs for minutes. Its watermark must not pass that bucket
/// (the job would never be read again): it checks the bucket holds nothing before passing it.
#[tokio::test]
async fn a_short_look_ahead_does_not_pass_a_bucket_holding_a_job_not_yet_due() {
    let (clients, config) = common::fresh_table().await;
    let t0 = trunc_ms(SystemClock.now());
    let clock = Arc::new(sked_testkit::clock::ManualClock::new(t0));
    let store = DynamoStore::new(clients.dynamodb.clone(), &config, clock.clone());
    let due = t0 + chrono::Duration::minutes(6);
    store.create_jobs(&[job_at("later", due)], None).await.unwrap();
    let look = chrono::Duration::seconds(10);
    // Minute by minute until just before it is due: nothing to fire, the watermark moves on
    // as far as it may.
    for minute in 1..6 {
        clock.set(t0 + chrono::Duration::minutes(minute));
        let now = clock.now();
        assert!(
            store.due_jobs(now + look, 10).await.unwrap().is_empty(),
            "minute {minute}"
        );
    }
    clock.set(due - chrono::Duration::seconds(5));
    let fired = store.due_jobs(clock.now() + look, 10).await.unwrap();
    assert_eq!(fired.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["later"]);
}

/// A sweep at the default look-ahead reads the due buckets from its watermark to about now
/// (5 minutes × shards), not to its horizon (13 minutes × shards before jobs were filed
/// ahead); the same minutes again the next tick.
#[tokio::test]
async fn a_sweep_reads_the_buckets_up_to_about_now_not_up_to_its_horizon() {
    let (_, config) = common::fresh_table().await;
    let (counted, counter) = counted_clients(&config).await;
    let store = DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock));
    store
        .create_jobs(&[job_at("in-8-minutes", now() + chrono::Duration::minutes(8))], None)
        .await
        .unwrap();
    for _ in 0..2 {
        counter.reset();
        let due = store.due_jobs(now() + chrono::Duration::minutes(10), 10).await.unwrap();
        assert_eq!(due.len(), 1, "found through the bucket it was filed in: now");
        let queries = counter.of("DynamoDB", "Query");
        assert!(
            queries <= 5 * u64::from(config.shards),
            "{queries} queries for {} shards",
            config.shards
        );
    }
}

#[tokio::test]
async fn aws_errors_keep_their_source_and_code() {
    let (clients, mut config) = common::fresh_table().await;
    config.table = "no-such-table".into();
    let store = DynamoStore::new(clients.dynamodb, &config, Arc::new(SystemClock));
    let err = store
        .get_job(&TenantId::from("t1"), &JobId::from("a"))
        .await
        .unwrap_err();
    let StoreError::Other(inner) = &err else {
        panic!("expected Other, got {err:?}")
    };
    let call = inner.downcast_ref::<sked_aws::error::CallError>().expect("a CallError");
    assert_eq!(call.code.as_deref(), Some("ResourceNotFoundException"));
    assert!(std::error::Error::source(call).is_some(), "the SDK error is kept");
    assert!(
        sked_aws::error::is_transient_code("ProvisionedThroughputExceededException")
            && sked_aws::error::is_transient_code("ThrottlingException")
            && sked_aws::error::is_transient_code("InternalServerError")
    );
}

/// A job's overlap check at claim reads its active runs through the sparse local index
/// `active`, not its partition: with 300 ended runs kept in the job's partition, reading its
/// two active runs evaluates two index entries, where a query of the partition filtered on
/// state evaluated (and was billed for) every run kept — a per-second job keeps 86,400 a day.
#[tokio::test]
async fn active_runs_read_costs_nothing_per_ended_run() {
    let (clients, config) = common::fresh_table().await;
    let (counted, counter) = counted_clients(&config).await;
    let plain = DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    let store = DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock));
    let t0 = now() - chrono::Duration::hours(1);
    plain.create_jobs(&[job_at("busy", t0)], None).await.unwrap();
    for i in 0..300 {
        let mut ended = run_at("busy", t0 + chrono::Duration::seconds(i));
        ended.state = RunState::Succeeded;
        ended.finished_at = Some(ended.scheduled_for);
        assert!(plain.insert_run(&ended).await.unwrap());
    }
    let active = [
        run_at("busy", t0 + chrono::Duration::seconds(400)),
        run_at("busy", t0 + chrono::Duration::seconds(401)),
    ];
    for run in &active {
        assert!(plain.insert_run(run).await.unwrap());
    }

    let found = store
        .active_runs_of(&TenantId::from("t1"), &JobId::from("busy"))
        .await
        .unwrap();
    let ids: Vec<_> = found.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(ids, active.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>());
    assert_eq!(
        counter.items_scanned(),
        2,
        "items evaluated to find 2 active runs among 302"
    );
    let read = counter.dynamodb_capacity().read_units;
    assert!(read <= 4.0, "{read} read units for 2 active runs");

    // A run leaves the index when it ends.
    store
        .cancel_run(&TenantId::from("t1"), &found[0].run_id, now(), "test")
        .await
        .unwrap();
    let left = store
        .active_runs_of(&TenantId::from("t1"), &JobId::from("busy"))
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].run_id, active[1].run_id);
}

/// Two processes' stores on one table: the first claims a run (and keeps its copy as its
/// next read–decide–put's first guess); whatever the second writes meanwhile is what the
/// first's next heartbeat and completion see — a cancel is answered, a reclaim fences them
/// off — never overwritten from the first's copy.
#[tokio::test]
async fn a_run_written_by_another_process_is_read_again_not_overwritten() {
    let (clients, config) = common::fresh_table().await;
    let process = || DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    let (first, second) = (process(), process());
    let at = now();
    let lease = |from: Timestamp| from + chrono::Duration::seconds(30);
    let claimed = async |store: &DynamoStore, run: &Run, worker: &str, when: Timestamp| match store
        .claim_one(&run.tenant, &run.run_id, &WorkerId::from(worker), when, lease(when))
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed { token, .. } => token,
        other => panic!("claim: {other:?}"),
    };

    // A cancel by the other process reaches the heartbeat.
    let cancelled = run_at("cancelled-meanwhile", at);
    first.insert_run(&cancelled).await.unwrap();
    let token = claimed(&first, &cancelled, "w1", at).await;
    let beat = first
        .heartbeat(&cancelled.tenant, &cancelled.run_id, token, at, lease(at))
        .await
        .unwrap();
    assert!(!beat.cancel_requested);
    second
        .cancel_run(&cancelled.tenant, &cancelled.run_id, at, "by the other process")
        .await
        .unwrap();
    let beat = first
        .heartbeat(&cancelled.tenant, &cancelled.run_id, token, at, lease(at))
        .await
        .unwrap();
    assert!(beat.cancel_requested, "the heartbeat sees the other process's cancel");

    // A reclaim by the other process after the lease expired fences the first off.
    let reclaimed = run_at("reclaimed-meanwhile", at);
    first.insert_run(&reclaimed).await.unwrap();
    let old = claimed(&first, &reclaimed, "w1", at).await;
    let later = lease(at) + chrono::Duration::seconds(1);
    let new = claimed(&second, &reclaimed, "w2", later).await;
    assert!(new > old);
    let fenced = first
        .heartbeat(&reclaimed.tenant, &reclaimed.run_id, old, later, lease(later))
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");
    let done = first
        .complete(&Completion {
            tenant: reclaimed.tenant.clone(),
            run_id: reclaimed.run_id.clone(),
            token: old,
            result: fixtures::result(AttemptOutcome::Succeeded, later),
            next: RunTransition::Finish(RunState::Succeeded),
            only_if_expired_by: None,
        })
        .await;
    assert!(matches!(done, Err(StoreError::Fenced)), "{done:?}");
    let stored = second
        .get_run(&reclaimed.tenant, &reclaimed.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, RunState::Running);
    assert_eq!(stored.attempts.len(), 2, "the second attempt stands: {stored:?}");
}

/// A run travels with its message (`sked_aws::run_copies`): in two processes' ports (a
/// sweeper's and a worker's), the worker claims a fired run from the copy its message carried,
/// reading no item; a copy gone stale (the run was cancelled between its send and its
/// receive) is read again, and the claim answers what the item says, never writing the copy
/// over it.
#[tokio::test]
async fn a_claim_starts_from_the_copy_in_the_message_and_reads_a_stale_one_again() {
    let (clients, config) = common::fresh_resources().await;
    let sweeper = sked_aws::ports(&clients, &config, Arc::new(SystemClock));
    let (counted, counter) = counted_clients(&config).await;
    let worker = sked_aws::ports(&counted, &config, Arc::new(SystemClock));
    let t = now();
    let job = job_at("copied", t);
    sweeper
        .store
        .create_jobs(std::slice::from_ref(&job), None)
        .await
        .unwrap();
    let runs: Vec<Run> = (0..3)
        .map(|i| run_at("copied", t + chrono::Duration::milliseconds(i)))
        .collect();
    let firing = firing_of(&job, runs.clone(), t + chrono::Duration::hours(1), t);
    let fired = sweeper.store.fire_one(&firing).await.unwrap();
    let dispatches: Vec<Dispatch> = fired.iter().map(Dispatch::from).collect();
    sweeper.queue.enqueue(&dispatches).await.unwrap();
    // The last run is cancelled after its message left: its copy is stale.
    sweeper
        .store
        .cancel_run(&job.tenant, &runs[2].run_id, t, "test")
        .await
        .unwrap();
    let mut received = Vec::new();
    while received.len() < 3 {
        received.extend(worker.queue.receive(3, Dur::secs(30), Dur::secs(1)).await.unwrap());
    }
    let worker_id = WorkerId::from("w");
    let until = t + chrono::Duration::seconds(30);
    let claim = async |run: &Run| {
        worker
            .store
            .claim_one(
                &job.tenant,
                &run.run_id,
                &worker_id,
                t + chrono::Duration::seconds(1),
                until,
            )
            .await
            .unwrap()
    };
    // The first claim of the process reads the tenant's quota (then cached).
    assert!(matches!(claim(&runs[0]).await, ClaimOutcome::Claimed { token: 1, .. }));
    counter.reset();
    let first = claim(&runs[1]).await;
    assert!(matches!(first, ClaimOutcome::Claimed { token: 1, .. }), "{first:?}");
    assert_eq!(
        counter.of("DynamoDB", "GetItem"),
        0,
        "claimed from the message's copy: {:?}",
        counter.snapshot()
    );
    let second = claim(&runs[2]).await;
    assert!(!matches!(second, ClaimOutcome::Claimed { .. }), "{second:?}");
    let stored = sweeper
        .store
        .get_run(&job.tenant, &runs[2].run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, RunState::Cancelled, "{stored:?}");
    assert!(stored.attempts.is_empty(), "{stored:?}");
}

/// A sweep's firings written alone go out side by side (`PARALLEL_FIRINGS` at a time), not one
/// after another (at ~20 ms a transaction, one at a time was ~50 jobs a second): 12 jobs of 12
/// tenants (so no two share a transaction) fired in one `fire` call have several transactions
/// out at once, and each answer is in its place.
#[tokio::test]
async fn firings_go_out_side_by_side_each_answered_in_its_place() {
    let (_, config) = common::fresh_table().await;
    let (counted, counter) = counted_clients(&config).await;
    let store = DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock));
    let t = now();
    let jobs: Vec<Job> = (0..12)
        .map(|i| Job {
            tenant: TenantId(format!("t{i:02}")),
            ..job_at(&format!("j{i:02}"), t)
        })
        .collect();
    for job in &jobs {
        store.create_jobs(std::slice::from_ref(job), None).await.unwrap();
    }
    let firings: Vec<Firing> = jobs
        .iter()
        .map(|job| firing_of(job, vec![run_at_of(job, t)], t + chrono::Duration::hours(1), t))
        .collect();
    counter.reset();
    let answers = store.fire(&firings).await.unwrap();
    assert!(
        counter.most_in_flight() > 1,
        "firings one at a time: {:?}",
        counter.snapshot()
    );
    assert_eq!(counter.of("DynamoDB", "TransactWriteItems"), 12);
    assert_eq!(answers.len(), jobs.len());
    for (job, answer) in jobs.iter().zip(answers) {
        let runs = answer.unwrap();
        assert_eq!(runs.len(), 1, "{}", job.id);
        assert_eq!((&runs[0].tenant, &runs[0].job_id), (&job.tenant, &job.id));
    }
}

/// A tenant's firings that cancel nothing share one transaction (`fire_together`): 12 jobs'
/// firings are one `TransactWriteItems`, each answered with its run. A group with a firing
/// whose job moved on is refused whole and its firings are written alone: the others fire,
/// the stale one answers a conflict and writes nothing.
#[tokio::test]
async fn a_tenant_s_firings_share_a_transaction_and_a_refused_one_is_written_alone() {
    let (_, config) = common::fresh_table().await;
    let (counted, counter) = counted_clients(&config).await;
    let store = DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock));
    let t = now();
    let next = t + chrono::Duration::hours(1);
    let jobs: Vec<Job> = (0..15).map(|i| job_at(&format!("j{i:02}"), t)).collect();
    store.create_jobs(&jobs, None).await.unwrap();
    let firing = |job: &Job| firing_of(job, vec![run_at(job.id.as_str(), t)], next, t);

    counter.reset();
    let answers = store
        .fire(&jobs[..12].iter().map(firing).collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(
        counter.of("DynamoDB", "TransactWriteItems"),
        1,
        "{:?}",
        counter.snapshot()
    );
    for (job, answer) in jobs.iter().zip(answers) {
        let runs = answer.unwrap();
        assert_eq!(runs.len(), 1, "{}", job.id);
        assert_eq!(runs[0].job_id, job.id);
        let stored = store.get_job(&job.tenant, &job.id).await.unwrap().unwrap();
        assert_eq!(stored.next_fire_at, Some(next), "{}", job.id);
    }

    let mut stale = firing(&jobs[13]);
    stale.expected_version = 7;
    let answers = store
        .fire(&[firing(&jobs[12]), stale, firing(&jobs[14])])
        .await
        .unwrap();
    assert_eq!(answers[0].as_ref().unwrap().len(), 1);
    assert!(matches!(answers[1], Err(StoreError::Conflict(_))), "{:?}", answers[1]);
    assert_eq!(answers[2].as_ref().unwrap().len(), 1);
    let runs_of = async |job: &Job| store.active_runs_of(&job.tenant, &job.id).await.unwrap().len();
    assert_eq!(
        (
            runs_of(&jobs[12]).await,
            runs_of(&jobs[13]).await,
            runs_of(&jobs[14]).await
        ),
        (1, 0, 1)
    );
    let moved = store.get_job(&jobs[13].tenant, &jobs[13].id).await.unwrap().unwrap();
    assert_eq!(moved.next_fire_at, Some(t), "the stale firing changed nothing");
}

fn page(limit: usize) -> sked_core::ports::store::PageRequest {
    sked_core::ports::store::PageRequest { limit, cursor: None }
}

/// A tenant whose active jobs are counted (a `max_active_jobs` quota).
async fn counted_tenant(store: &DynamoStore, max_active_jobs: u64) {
    let quota = sked_core::quota::Quota {
        max_active_jobs: Some(max_active_jobs),
        ..Default::default()
    };
    sked_core::ports::QuotaStore::put_quota(store, &TenantId::from("t1"), &quota)
        .await
        .unwrap();
}

/// A chunked create refused by its count (written after its jobs and idempotency key, alone
/// in the second transaction) leaves its jobs DELETED and its idempotency key unrecorded: the same
/// key then creates the jobs.
#[tokio::test]
async fn a_chunked_create_refused_by_the_count_leaves_no_idempotency_key() {
    let (store, _, _) = store().await;
    let t = fixtures::t0();
    counted_tenant(&store, 130).await;
    let first: Vec<Job> = (0..40).map(|i| job_at(&format!("a{i:03}"), t)).collect();
    store.create_jobs(&first, None).await.unwrap();
    // 99 jobs and the key fill the first transaction; the count opens the second.
    let jobs: Vec<Job> = (0..99).map(|i| job_at(&format!("j{i:03}"), t)).collect();
    let res = store.create_jobs(&jobs, Some(("k", "fp"))).await;
    assert!(matches!(res, Err(StoreError::QuotaExceeded(_))), "{res:?}");
    assert_eq!(
        store.idempotency_lookup(&TenantId::from("t1"), "k").await.unwrap(),
        None
    );
    let j050 = store
        .get_job(&TenantId::from("t1"), &JobId::from("j050"))
        .await
        .unwrap();
    assert_eq!(j050.map(|j| j.state), Some(JobState::Deleted));
    // 40 + 90 fit the quota of 130: nothing of the refused batch is counted.
    store.create_jobs(&jobs[..90], Some(("k", "fp"))).await.unwrap();
    let more = store.create_jobs(&[job_at("one-more", t)], None).await;
    assert!(matches!(more, Err(StoreError::QuotaExceeded(_))), "{more:?}");
}

/// A chunked create whose count was written (in its first transaction) and whose later
/// transaction fails gives the count back. The later one here holds the `after` edges, and
/// fails as DynamoDB refuses a transaction writing one item twice (a job naming its upstream
/// twice): the stand-in for any failure of a later transaction.
#[tokio::test]
async fn a_chunked_create_that_fails_after_its_count_gives_the_count_back() {
    let (store, _, _) = store().await;
    let t = fixtures::t0();
    counted_tenant(&store, 100).await;
    let mut jobs: Vec<Job> = (0..99).map(|i| job_at(&format!("j{i:03}"), t)).collect();
    let mut twice: JobSpec = serde_json::from_value(serde_json::json!({
        "schedule": {"after": {"jobs": ["up", "up"]}},
        "task": {"command": {"argv": ["ok"]}},
    }))
    .unwrap();
    twice.labels = Default::default();
    jobs[98].spec = twice;
    jobs[98].next_fire_at = None;
    let res = store.create_jobs(&jobs, None).await;
    assert!(res.is_err(), "the edges' transaction writes one item twice");
    let j000 = store
        .get_job(&TenantId::from("t1"), &JobId::from("j000"))
        .await
        .unwrap();
    assert_eq!(j000.map(|j| j.state), Some(JobState::Deleted));
    // The whole quota is free again.
    let hundred: Vec<Job> = (0..100).map(|i| job_at(&format!("k{i:03}"), t)).collect();
    store.create_jobs(&hundred, None).await.unwrap();
}

/// A run item written before `run_state` existed (its state in `state` alone) reads back and
/// is listed by its state, tenant-wide (the `list` index) and for its job (the table), beside
/// runs written since (whose `state` appears only once they ended).
#[tokio::test]
async fn runs_written_before_run_state_existed_are_listed_by_state() {
    use sked_core::ports::store::RunFilter;
    let (store, client, table) = store().await;
    let t = fixtures::t0();
    let old = run_at("old", t);
    let new = run_at("new", t + chrono::Duration::seconds(1));
    store.insert_run(&old).await.unwrap();
    store.insert_run(&new).await.unwrap();
    let mut item = run_item_as_stored(&client, &table, &old).await;
    item.remove("run_state");
    item.insert("state".into(), AttributeValue::S("PENDING".into()));
    put_as_is(&client, &table, item).await;

    let listed = |state: RunState, job: Option<&str>| {
        let store = store.clone();
        let filter = RunFilter {
            state: Some(state),
            job_id: job.map(JobId::from),
            ..Default::default()
        };
        async move {
            let page = store
                .list_runs(&TenantId::from("t1"), &filter, &page(50))
                .await
                .unwrap();
            page.items.into_iter().map(|r| r.job_id.to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(RunState::Pending, None).await, vec!["new", "old"]);
    assert_eq!(listed(RunState::Pending, Some("old")).await, vec!["old"]);
    assert_eq!(listed(RunState::Pending, Some("new")).await, vec!["new"]);
    assert!(listed(RunState::Running, None).await.is_empty());
    assert!(listed(RunState::Succeeded, Some("old")).await.is_empty());
    assert_eq!(
        store.get_run(&old.tenant, &old.run_id).await.unwrap().unwrap().state,
        RunState::Pending
    );
}

/// A tenant's runs listed by an active state, a page at a time: PENDING and RUNNING runs
/// share the `list` index's copies without a state, so a page reads on until it has its
/// limit; every run of the state comes, once, newest first, through the cursors.
#[tokio::test]
async fn active_runs_listed_by_state_come_page_by_page_whatever_lies_between() {
    use sked_core::ports::store::RunFilter;
    let (store, _, _) = store().await;
    let t = fixtures::t0();
    let runs: Vec<Run> = (0..12)
        .map(|i| run_at(&format!("r{i:02}"), t + chrono::Duration::seconds(i)))
        .collect();
    for run in &runs {
        store.insert_run(run).await.unwrap();
    }
    for run in runs.iter().skip(1).step_by(2) {
        let claimed = store
            .claim_one(
                &run.tenant,
                &run.run_id,
                &WorkerId::from("w"),
                now(),
                now() + chrono::Duration::seconds(60),
            )
            .await
            .unwrap();
        assert!(matches!(claimed, ClaimOutcome::Claimed { .. }), "{claimed:?}");
    }
    for (state, first) in [(RunState::Pending, 0), (RunState::Running, 1)] {
        let filter = RunFilter {
            state: Some(state),
            ..Default::default()
        };
        let mut listed = Vec::new();
        let mut cursor = None;
        loop {
            let request = sked_core::ports::store::PageRequest { limit: 2, cursor };
            let page = store.list_runs(&TenantId::from("t1"), &filter, &request).await.unwrap();
            assert!(
                page.items.len() == 2 || page.next_cursor.is_none(),
                "{state:?}: a short page ends the listing"
            );
            listed.extend(page.items.into_iter().map(|r| r.job_id.to_string()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<String> = (first..12).step_by(2).rev().map(|i| format!("r{i:02}")).collect();
        assert_eq!(listed, expected, "{state:?}");
    }
}

/// A run's `live` entry is written by its firing and left where it is by a claim on time (so
/// the claim writes no index); the repair pass finds a PENDING run ready by a time from that
/// index, and still finds one last written when pending runs were filed in `sched`
/// (`PENDING#<shard>`, before 2026-12-04).
#[tokio::test]
async fn a_run_s_live_entry_stays_from_its_firing_through_its_claim() {
    let (store, client, table) = store().await;
    let at = fixtures::t0() + chrono::Duration::seconds(200);
    let secs = chrono::Duration::seconds;
    let live_key = async |run: &Run| {
        let item = run_item_as_stored(&client, &table, run).await;
        item.get("gsi3sk").map(|v| v.as_s().unwrap().clone())
    };
    let claimed = run_at("claimed", at);
    store.insert_run(&claimed).await.unwrap();
    let fired = live_key(&claimed).await;
    assert!(fired.is_some());
    store
        .claim_one(
            &claimed.tenant,
            &claimed.run_id,
            &WorkerId::from("w"),
            at,
            at + secs(15),
        )
        .await
        .unwrap();
    assert_eq!(live_key(&claimed).await, fired, "the claim leaves the entry");

    let waiting = run_at("waiting", at);
    store.insert_run(&waiting).await.unwrap();
    // As written before: filed in `sched`, not in `live`.
    let old = run_at("old", at - secs(60));
    store.insert_run(&old).await.unwrap();
    let mut item = run_item_as_stored(&client, &table, &old).await;
    item.remove("gsi3pk");
    item.remove("gsi3sk");
    let filed = (at - secs(60)).timestamp_millis();
    let sk = pending_sk(filed, filed, old.tenant.as_str(), old.run_id.as_str());
    item.insert("gsi1pk".into(), AttributeValue::S(pending_pk(0)));
    item.insert("gsi1sk".into(), AttributeValue::S(sk));
    put_as_is(&client, &table, item).await;

    let stale = store.stale_pending(at, 10).await.unwrap();
    let ids: Vec<&str> = stale.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids, ["old", "waiting"], "oldest first; the claimed run is not pending");
    assert!(store.stale_pending(at - secs(61), 10).await.unwrap().is_empty());
}

/// The one run of a firing that ends its job (a one-shot's) keeps its `active` entry when it
/// ends — the index delete of its end saved — and the readers of the index pass it: the job's
/// active runs are those still PENDING or RUNNING, before and after a change that makes the
/// job fire again. A run of a firing that keeps its job active leaves the index as before.
#[tokio::test]
async fn a_one_shot_s_run_keeps_its_active_entry_when_it_ends_and_readers_pass_it() {
    let (store, client, table) = store().await;
    let at = fixtures::t0();
    let secs = chrono::Duration::seconds;
    let (tenant, id) = (TenantId::from("t1"), JobId::from("once"));
    let job = job_at("once", at);
    store.create_jobs(std::slice::from_ref(&job), None).await.unwrap();
    let active_entry = async |run: &Run| run_item_as_stored(&client, &table, run).await.contains_key("act");
    let end = async |run: &Run, now: Timestamp| {
        let ClaimOutcome::Claimed { token, .. } = store
            .claim_one(&run.tenant, &run.run_id, &WorkerId::from("w"), now, now + secs(30))
            .await
            .unwrap()
        else {
            panic!("claim {}", run.run_id)
        };
        store
            .complete(&Completion {
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
                token,
                result: fixtures::result(AttemptOutcome::Succeeded, now + secs(1)),
                next: RunTransition::Finish(RunState::Succeeded),
                only_if_expired_by: None,
            })
            .await
            .unwrap();
    };

    // Fired into COMPLETED with its one run, which ends.
    let last = run_at_of(&job, at);
    let firing = Firing {
        next_fire_at: None,
        state: JobState::Completed,
        ..firing_of(&job, vec![last.clone()], at, at)
    };
    store.fire_one(&firing).await.unwrap();
    assert!(
        store
            .active_runs_of(&tenant, &id)
            .await
            .unwrap()
            .iter()
            .any(|r| r.run_id == last.run_id)
    );
    end(&last, at).await;
    assert!(active_entry(&last).await, "the entry stays where the firing put it");
    assert!(store.active_runs_of(&tenant, &id).await.unwrap().is_empty());

    // Changed to fire again, as a recurring job: its runs come and go; the ended one-shot's
    // entry is passed by every read, a claim's alone included.
    let mut again = store.get_job(&tenant, &id).await.unwrap().unwrap();
    let changed_at = at + secs(10);
    again.state = JobState::Active;
    again.next_fire_at = Some(changed_at);
    again.version += 1;
    store.update_job(&again, job.version, None).await.unwrap();
    let next = run_at_of(&job, changed_at);
    let firing = Firing {
        expected_version: again.version,
        ..firing_of(&again, vec![next.clone()], changed_at + secs(1), changed_at)
    };
    store.fire_one(&firing).await.unwrap();
    let ids = |runs: Vec<Run>| runs.into_iter().map(|r| r.run_id.to_string()).collect::<Vec<_>>();
    let only_next = [next.run_id.to_string()];
    assert_eq!(ids(store.active_runs_of(&tenant, &id).await.unwrap()), only_next);
    assert_eq!(
        ids(store.active_runs_due(&tenant, &id, changed_at).await.unwrap()),
        only_next
    );
    let batch = ClaimBatch {
        runs: vec![(tenant.clone(), next.run_id.clone())],
        worker: WorkerId::from("w"),
        owners: Vec::new(),
        now: changed_at,
        lease_until: changed_at + secs(30),
        read_jobs: false,
        hold: Vec::new(),
        alone: true,
    };
    let claimed = store.claim(&batch).await.unwrap();
    let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { token, .. }, _)) = &claimed[0] else {
        panic!("claimed alone past the ended one-shot's entry: {claimed:?}")
    };
    assert!(active_entry(&next).await);
    store
        .complete(&Completion {
            tenant: tenant.clone(),
            run_id: next.run_id.clone(),
            token: *token,
            result: fixtures::result(AttemptOutcome::Succeeded, changed_at + secs(1)),
            next: RunTransition::Finish(RunState::Succeeded),
            only_if_expired_by: None,
        })
        .await
        .unwrap();
    assert!(
        !active_entry(&next).await,
        "a run of a job kept active leaves the index"
    );
}

/// A job created due at once is written with its first firing in one transaction: the job as
/// the firing leaves it (COMPLETED, out of the due index) and its run, marked lone and as the
/// one run that ends its job; its idempotency key with them. Refused as a create is (an
/// existing job, a recorded key) with nothing written; left to a create and a firing apart,
/// with nothing written, where a run of the firing exists (a job created again over a DELETED
/// one) and where the tenant's active jobs are counted.
#[tokio::test]
async fn a_job_due_at_once_is_created_with_its_first_firing_in_one_transaction() {
    let (clients, config) = common::fresh_table().await;
    let (counted, counter) = counted_clients(&config).await;
    let store = DynamoStore::new(counted.dynamodb.clone(), &config, Arc::new(SystemClock));
    let (client, table) = (clients.dynamodb.clone(), config.table.clone());
    let at = now();
    let fired_at_once = |job: &Job| Firing {
        next_fire_at: None,
        state: JobState::Completed,
        ..firing_of(job, vec![run_at_of(job, at)], at, at)
    };
    let job_item = async |id: &str| {
        client
            .get_item()
            .table_name(&table)
            .set_key(Some(key(job_pk("t1", id), JOB_SK.into())))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
    };

    let job = job_at("now", at);
    counter.reset();
    let runs = store
        .create_fired(&job, Some(("key-1", "fp-1")), &fired_at_once(&job))
        .await
        .expect("written together")
        .unwrap();
    assert_eq!(counter.of("DynamoDB", "TransactWriteItems"), 1);
    assert_eq!(
        counter.of("DynamoDB", "PutItem") + counter.of("DynamoDB", "UpdateItem"),
        0
    );
    assert_eq!(runs, [run_at_of(&job, at)]);
    let item = job_item("now").await.unwrap();
    assert_eq!(item["state"].as_s().unwrap(), "COMPLETED");
    assert!(!item.contains_key("gsi1pk"), "never filed in the due index");
    let run = run_item_as_stored(&client, &table, &runs[0]).await;
    assert!(run.contains_key("lone") && run.contains_key("ends_job"), "{run:?}");
    let stored = store.get_job(&job.tenant, &job.id).await.unwrap().unwrap();
    assert_eq!((stored.state, stored.next_fire_at), (JobState::Completed, None));
    let (fingerprint, ids) = store.idempotency_lookup(&job.tenant, "key-1").await.unwrap().unwrap();
    assert_eq!((fingerprint.as_str(), ids), ("fp-1", vec![job.id.clone()]));

    // Refused as a create is, nothing written.
    let again = store.create_fired(&job, None, &fired_at_once(&job)).await;
    assert!(matches!(again, Some(Err(StoreError::Conflict(_)))), "{again:?}");
    let other = job_at("other", at);
    let reused = store
        .create_fired(&other, Some(("key-1", "fp-2")), &fired_at_once(&other))
        .await;
    assert!(matches!(reused, Some(Err(StoreError::Conflict(_)))), "{reused:?}");
    assert!(job_item("other").await.is_none());

    // Over a DELETED job whose run at that time exists: left to a create and a firing.
    let mut deleted = stored.clone();
    deleted.state = JobState::Deleted;
    deleted.version += 1;
    store.update_job(&deleted, stored.version, None).await.unwrap();
    let anew = Job {
        version: 1,
        ..job.clone()
    };
    assert!(store.create_fired(&anew, None, &fired_at_once(&anew)).await.is_none());
    assert_eq!(job_item("now").await.unwrap()["state"].as_s().unwrap(), "DELETED");

    // A tenant whose active jobs are counted: left to a create and a firing.
    counted_tenant(&store, 10).await;
    let counted_job = job_at("counted", at);
    assert!(
        store
            .create_fired(&counted_job, None, &fired_at_once(&counted_job))
            .await
            .is_none()
    );
    assert!(job_item("counted").await.is_none());
}
