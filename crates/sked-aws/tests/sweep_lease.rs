//! `SweepLease` on moto: one holder at a time, taken over once expired, given back only by its
//! holder.

mod common;

use sked_aws::SweepLease;
use sked_core::ports::{Clock, SystemClock};
use std::sync::Arc;

fn in_secs(secs: i64) -> sked_core::Timestamp {
    SystemClock.now() + chrono::Duration::seconds(secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_until_release_or_expiry() {
    let (clients, config) = common::fresh_table().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let lease = SweepLease::new(clients.dynamodb.clone(), &config, clock);

    assert!(lease.acquire(0, "a", in_secs(60)).await.unwrap());
    assert!(!lease.acquire(0, "b", in_secs(60)).await.unwrap(), "held by a");
    assert!(
        lease.acquire(1, "b", in_secs(60)).await.unwrap(),
        "another lease is free"
    );
    assert!(
        lease.acquire(0, "a", in_secs(90)).await.unwrap(),
        "its holder renews it"
    );

    lease.release(0, "b").await.unwrap();
    assert!(
        !lease.acquire(0, "b", in_secs(60)).await.unwrap(),
        "only the holder releases"
    );
    lease.release(0, "a").await.unwrap();
    assert!(lease.acquire(0, "b", in_secs(-1)).await.unwrap(), "released");

    // b's lease has expired: c takes it over, and b's late release leaves c's alone.
    assert!(lease.acquire(0, "c", in_secs(60)).await.unwrap());
    lease.release(0, "b").await.unwrap();
    assert!(!lease.acquire(0, "d", in_secs(60)).await.unwrap(), "still c's");
}
