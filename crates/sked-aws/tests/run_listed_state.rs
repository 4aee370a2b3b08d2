//! `RunListedState::Unsuccessful` on moto: a run that succeeds carries no `state` for the
//! `list` index (its end writes no index entry), one that fails still does; listings across
//! jobs filtered on either find exactly their runs, page by page, whatever the copies carry.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use sked_aws::dynamo::codec::{LISTED_STATE, key, ms};
use sked_aws::dynamo::keys::{job_pk, run_sk};
use sked_aws::{DynamoStore, RunListedState};
use sked_core::ports::store::{Completion, PageRequest, RunFilter, RunTransition};
use sked_core::ports::{ClaimOutcome, JobStore, JobStoreExt, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState};
use sked_testkit::contract::fixtures::{at, result, run, tenant, worker};
use std::collections::HashMap;
use std::sync::Arc;

/// Claims `run` and ends its attempt with `outcome`, the run with `state`.
async fn end(store: &DynamoStore, run: &Run, outcome: AttemptOutcome, state: RunState) {
    let claimed = store
        .claim_one(&run.tenant, &run.run_id, &worker("w"), at(100), at(130))
        .await
        .unwrap();
    let ClaimOutcome::Claimed { token, .. } = claimed else {
        panic!("not claimed: {claimed:?}")
    };
    let completion = Completion {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        token,
        result: result(outcome, at(101)),
        next: RunTransition::Finish(state),
        only_if_expired_by: None,
    };
    store.complete(&completion).await.unwrap();
}

#[tokio::test]
async fn successes_carry_no_listed_state_and_every_state_is_listed_page_by_page() {
    let (clients, mut config) = common::fresh_table().await;
    config.run_listed_state = RunListedState::Unsuccessful;
    let store = DynamoStore::new(clients.dynamodb.clone(), &config, Arc::new(SystemClock));
    let runs: Vec<Run> = [("a", 10), ("b", 10), ("a", 20), ("b", 20), ("a", 30), ("b", 30)]
        .iter()
        .map(|(job, secs)| run("t1", job, *secs))
        .collect();
    for r in &runs {
        store.insert_run(r).await.unwrap();
    }
    let [a10, b10, a20, b20, a30, b30] = runs.as_slice() else {
        unreachable!()
    };
    end(&store, a10, AttemptOutcome::Succeeded, RunState::Succeeded).await;
    end(&store, b20, AttemptOutcome::Succeeded, RunState::Succeeded).await;
    end(&store, a20, AttemptOutcome::Failed, RunState::Failed).await;

    let item = async |r: &Run| -> HashMap<String, AttributeValue> {
        let k = key(job_pk("t1", r.job_id.as_str()), run_sk(ms(r.scheduled_for)));
        common::stored_item(&clients.dynamodb, &config.table, k).await.unwrap()
    };
    assert!(!item(a10).await.contains_key(LISTED_STATE), "a success carries none");
    assert_eq!(item(a20).await[LISTED_STATE].as_s().unwrap(), "FAILED");

    // Every page of one run, so each filtered listing goes on past copies its filter drops.
    let listed = async |state: RunState| -> Vec<String> {
        let filter = RunFilter {
            state: Some(state),
            ..Default::default()
        };
        let (mut ids, mut cursor) = (Vec::new(), None);
        loop {
            let page = PageRequest { limit: 1, cursor };
            let page = store.list_runs(&tenant("t1"), &filter, &page).await.unwrap();
            ids.extend(page.items.iter().map(|r| r.run_id.to_string()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return ids,
            }
        }
    };
    let ids = |rs: &[&Run]| rs.iter().map(|r| r.run_id.to_string()).collect::<Vec<_>>();
    assert_eq!(listed(RunState::Succeeded).await, ids(&[b20, a10]));
    assert_eq!(listed(RunState::Failed).await, ids(&[a20]));
    assert_eq!(listed(RunState::Pending).await, ids(&[b30, a30, b10]));
}
