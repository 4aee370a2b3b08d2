//! The alert contract: what every store that keeps runs' failure alerts
//! ([`sked_core::alert`]) and tenants' webhook secrets must do, one `pub async fn` per case;
//! run them all with [`alert_contract!`](crate::alert_contract). Each case gets the same store
//! as both ports.

use super::fixtures::{at, at_ms, claims, completion, firing, job, result, run, tenant, worker};
use sked_core::alert::{Alert, AlertKey, AlertOn, AlertState, Answer, DueAlert, Notify, WebhookSecret, arm_skips};
use sked_core::firing::SkipReason;
use sked_core::ledger::SkipRecord;
use sked_core::ports::store::{JobStoreExt, RunTransition};
pub use sked_core::ports::{JobStore, WebhookSecrets};
use sked_core::run::{AttemptOutcome, Run, RunState};
use std::sync::Arc;
use std::time::Duration;

/// One store, as both ports.
pub type Stores = (Arc<dyn JobStore>, Arc<dyn WebhookSecrets>);

/// A run of `job_id` at `at(secs)` whose job posts `on` (one attempt, so a failure ends it).
fn run_notifying(job_id: &str, secs: i64, on: &[AlertOn]) -> Run {
    let mut r = run("t1", job_id, secs);
    r.max_attempts = 1;
    r.alert = Some(Alert::new(Notify {
        on: on.to_vec(),
        webhook: "https://hooks.example/sked".into(),
    }));
    r
}

/// Claims `r` at `at(secs)` and completes its attempt as `outcome` one second later.
async fn run_to_end(store: &Arc<dyn JobStore>, r: &Run, secs: i64, outcome: AttemptOutcome, state: RunState) {
    let (now, lease_until) = (at(secs), at(secs + 30));
    let claimed = store
        .claim_one(&r.tenant, &r.run_id, &worker("w1"), now, lease_until)
        .await
        .unwrap();
    let token = match claimed {
        sked_core::ports::store::ClaimOutcome::Claimed { token, .. } => token,
        other => panic!("not claimed: {other:?}"),
    };
    let done = completion(r, token, &result(outcome, at(secs + 1)), RunTransition::Finish(state));
    store.complete(&done).await.unwrap();
}

/// The delivery ids of due alerts (a run's id for a run's alert).
fn ids(due: &[DueAlert]) -> Vec<String> {
    due.iter().map(DueAlert::delivery_id).collect()
}

fn run_ids<const N: usize>(runs: [&Run; N]) -> Vec<String> {
    runs.iter().map(|r| r.run_id.to_string()).collect()
}

fn run_key(r: &Run) -> AlertKey {
    AlertKey::Run {
        tenant: r.tenant.clone(),
        run_id: r.run_id.clone(),
    }
}

/// A run that ends as its `notify.on` asks is due from its end, in the write that ended it;
/// one that ends otherwise, or has no alert, or is still running, is never due; the earliest
/// due comes first and `limit` is kept.
pub async fn an_ended_run_is_due_from_its_end_only_if_notify_asks((store, _): Stores) {
    let failed = run_notifying("a", 0, &[AlertOn::Failed]);
    let early = run_notifying("b", 0, &[AlertOn::Failed, AlertOn::Succeeded]);
    let ok = run_notifying("c", 0, &[AlertOn::Failed]);
    let plain = run("t1", "d", 0);
    let running = run_notifying("e", 0, &[AlertOn::Failed]);
    for r in [&failed, &early, &ok, &plain, &running] {
        assert!(store.insert_run(r).await.unwrap());
    }
    run_to_end(&store, &early, 5, AttemptOutcome::Succeeded, RunState::Succeeded).await;
    run_to_end(&store, &failed, 10, AttemptOutcome::Failed, RunState::Failed).await;
    run_to_end(&store, &ok, 10, AttemptOutcome::Succeeded, RunState::Succeeded).await;
    run_to_end(&store, &plain, 10, AttemptOutcome::Failed, RunState::Failed).await;
    store
        .claim(&claims(
            vec![(running.tenant.clone(), running.run_id.clone())],
            "w2",
            at(10),
            at(40),
        ))
        .await
        .unwrap();

    assert!(
        store
            .due_alerts(at(6) - chrono::Duration::milliseconds(1), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(ids(&store.due_alerts(at(6), 10).await.unwrap()), run_ids([&early]));
    let due = store.due_alerts(at(100), 10).await.unwrap();
    assert_eq!(ids(&due), run_ids([&early, &failed]), "earliest due first");
    assert_eq!(ids(&store.due_alerts(at(100), 1).await.unwrap()), run_ids([&early]));
    let alert = due[1].alert().unwrap();
    assert_eq!(
        (alert.state, alert.event, alert.due),
        (AlertState::Pending, Some(AlertOn::Failed), Some(at(11)))
    );
}

/// A pending run cancelled is due at once when `on` lists `cancelled`.
pub async fn a_cancel_arms_the_alert_in_its_write((store, _): Stores) {
    let r = run_notifying("a", 0, &[AlertOn::Cancelled]);
    assert!(store.insert_run(&r).await.unwrap());
    store.cancel_run(&r.tenant, &r.run_id, at(3), "by user").await.unwrap();
    let due = store.due_alerts(at(3), 10).await.unwrap();
    assert_eq!(ids(&due), run_ids([&r]));
    assert_eq!(due[0].alert().unwrap().event, Some(AlertOn::Cancelled));
}

/// `save_alert` replaces the alert only while its `due` is still the one given: a lease taken
/// by one notifier makes another's save of the same try fail; a delivered alert is due no more
/// and reads back with its tries.
pub async fn save_alert_is_conditional_on_the_due_it_read((store, _): Stores) {
    let r = run_notifying("a", 0, &[AlertOn::Failed]);
    assert!(store.insert_run(&r).await.unwrap());
    run_to_end(&store, &r, 10, AttemptOutcome::Failed, RunState::Failed).await;
    let read = store.due_alerts(at(20), 10).await.unwrap().remove(0);
    let key = run_key(&r);
    assert_eq!(read.key(), key);
    let mut first = read.alert().cloned().unwrap();
    let due = first.due.unwrap();
    assert!(first.lease(at(20)));
    assert!(store.save_alert(&key, due, &first).await.unwrap());
    let mut second = read.alert().cloned().unwrap();
    assert!(second.lease(at(20)));
    assert!(
        !store.save_alert(&key, due, &second).await.unwrap(),
        "a second notifier took the same try"
    );
    assert!(store.due_alerts(at(20), 10).await.unwrap().is_empty(), "leased");

    let leased = first.due.unwrap();
    first.record(at_ms(20_500), Answer::Status(500), Duration::from_secs(2));
    assert!(store.save_alert(&key, leased, &first).await.unwrap());
    let retry_at = first.due.unwrap();
    assert_eq!(retry_at, at_ms(22_500));
    assert_eq!(ids(&store.due_alerts(retry_at, 10).await.unwrap()), run_ids([&r]));

    assert!(first.lease(retry_at));
    assert!(store.save_alert(&key, retry_at, &first).await.unwrap());
    let leased = first.due.unwrap();
    first.record(at(23), Answer::Status(204), Duration::from_secs(2));
    assert!(store.save_alert(&key, leased, &first).await.unwrap());
    assert!(store.due_alerts(at(10_000), 10).await.unwrap().is_empty());
    let stored = store.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
    let alert = stored.alert.unwrap();
    assert_eq!(alert.state, AlertState::Delivered);
    assert_eq!(
        alert.deliveries.iter().map(|d| d.status).collect::<Vec<_>>(),
        [Some(500), Some(204)]
    );
    assert_eq!(stored.state, RunState::Failed, "the run is unchanged");
    let elsewhere = AlertKey::Run {
        tenant: tenant("t2"),
        run_id: r.run_id.clone(),
    };
    assert!(
        !store.save_alert(&elsewhere, leased, &first).await.unwrap(),
        "another tenant's run of that id does not exist"
    );
}

/// A firing's skip records of occurrences carry the alert its plan armed, written with the
/// firing: due from the firing, saved on condition like a run's; a pause record has none.
pub async fn a_firing_s_skipped_occurrences_are_due_with_their_record((store, _): Stores) {
    let mut j = job("t1", "hourly");
    j.spec.notify = Some(Notify {
        on: vec![AlertOn::Skipped],
        webhook: "https://hooks.example/sked".into(),
    });
    store.create_jobs(std::slice::from_ref(&j), None).await.unwrap();
    let mut f = firing(&j, vec![run("t1", "hourly", 60)], Some(at(120)));
    f.skipped = vec![SkipRecord {
        from: at(0),
        to: at(30),
        count: 2,
        reason: SkipReason::Misfire,
        alert: None,
    }];
    arm_skips(j.spec.notify.as_ref(), &mut f.skipped, at(61));
    store.fire(&[f]).await.unwrap().pop().unwrap().unwrap();
    store
        .record_skips(&j.tenant, &j.id, &[SkipRecord::pause(at(200))])
        .await
        .unwrap();

    assert!(
        store.due_alerts(at(60), 10).await.unwrap().is_empty(),
        "due from the firing"
    );
    let due = store.due_alerts(at(300), 10).await.unwrap();
    assert_eq!(due.len(), 1, "the pause has no alert: {due:?}");
    let DueAlert::Skipped {
        tenant: t,
        job_id,
        record,
    } = &due[0]
    else {
        panic!("{due:?}")
    };
    assert_eq!(
        (t, job_id, record.from, record.to, record.count),
        (&j.tenant, &j.id, at(0), at(30), 2)
    );
    let key = due[0].key();
    let mut alert = due[0].alert().cloned().unwrap();
    assert!(alert.lease(at(61)));
    assert!(store.save_alert(&key, at(61), &alert).await.unwrap());
    assert!(!store.save_alert(&key, at(61), &alert).await.unwrap(), "taken once");
    let leased = alert.due.unwrap();
    alert.record(at(62), Answer::Status(200), Duration::from_secs(2));
    assert!(store.save_alert(&key, leased, &alert).await.unwrap());
    assert!(store.due_alerts(at(10_000), 10).await.unwrap().is_empty());
    let records = store
        .skip_records(&j.tenant, &j.id, (at(0), at(100)), 10)
        .await
        .unwrap();
    assert_eq!(records[0].alert.as_ref().map(|a| a.state), Some(AlertState::Delivered));
}

/// A tenant's webhook secret reads back as written, a second replaces it, and another tenant
/// has none.
pub async fn webhook_secrets_read_back_per_tenant((_, secrets): Stores) {
    let t1 = tenant("t1");
    assert_eq!(secrets.webhook_secret(&t1).await.unwrap(), None);
    let one = WebhookSecret {
        secret: "whsec_one".into(),
        created_at: at(1),
    };
    secrets.put_webhook_secret(&t1, &one).await.unwrap();
    assert_eq!(secrets.webhook_secret(&t1).await.unwrap(), Some(one));
    let two = WebhookSecret {
        secret: "whsec_two".into(),
        created_at: at(2),
    };
    secrets.put_webhook_secret(&t1, &two).await.unwrap();
    assert_eq!(secrets.webhook_secret(&t1).await.unwrap(), Some(two));
    assert_eq!(secrets.webhook_secret(&tenant("t2")).await.unwrap(), None);
}
