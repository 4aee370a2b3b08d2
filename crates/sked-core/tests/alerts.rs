//! Failure alerts through the notifier, on in-memory ports and a manual clock: runs are ended
//! by hand as a worker would, and a receiver of our own [`WebhookSender`] port answers each
//! post as the case asks (the HTTP adapter is tested against a real server in the `sked`
//! crate).

use async_trait::async_trait;
use sked_core::alert::{self, AlertOn, AlertState, MAX_DELIVERIES, Notify};
use sked_core::auth::{Principal, Role};
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ports::{
    AttemptResult, ClaimOutcome, Completion, JobStore, JobStoreExt, RunTransition, WebhookPost, WebhookSender,
};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::service::alerts::{Notifier, NotifierConfig, NotifierPorts, WebhookSecretService};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemPorts, MemStore};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers posts from a script (then 200), keeping every post.
#[derive(Default)]
struct Receiver {
    answers: Mutex<VecDeque<Result<u16, String>>>,
    posts: Mutex<Vec<WebhookPost>>,
}

#[async_trait]
impl WebhookSender for Receiver {
    async fn post(&self, post: &WebhookPost) -> Result<u16, String> {
        self.posts.lock().unwrap().push(post.clone());
        self.answers.lock().unwrap().pop_front().unwrap_or(Ok(200))
    }
}

impl Receiver {
    fn answering(answers: &[Result<u16, &str>]) -> Arc<Self> {
        let r = Receiver::default();
        *r.answers.lock().unwrap() = answers.iter().map(|a| a.map_err(str::to_string)).collect();
        Arc::new(r)
    }

    fn posts(&self) -> Vec<WebhookPost> {
        self.posts.lock().unwrap().clone()
    }
}

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    receiver: Arc<Receiver>,
    tenant: TenantId,
}

const BACKOFF: Duration = Duration::from_secs(2);

impl Harness {
    fn new(receiver: Arc<Receiver>) -> Self {
        let MemPorts { clock, store, .. } = MemPorts::at("2026-12-01T10:00:00Z");
        Harness {
            clock,
            store,
            receiver,
            tenant: TenantId::from("acme"),
        }
    }

    fn notifier(&self) -> Notifier {
        let ports = NotifierPorts {
            store: self.store.clone(),
            secrets: self.store.clone(),
            sender: self.receiver.clone(),
            clock: self.clock.clone(),
        };
        let config = NotifierConfig {
            backoff_base: BACKOFF,
            ..NotifierConfig::default()
        };
        Notifier::new(ports, config)
    }

    async fn make_secret(&self) -> String {
        let service = WebhookSecretService::new(self.store.clone(), self.clock.clone());
        let admin = Principal::new(self.tenant.clone(), Role::Admin);
        service.rotate(&admin).await.unwrap().secret
    }

    /// A run of `job` that ends `state` now, its job notifying `on`.
    async fn end_run(&self, job: &str, on: &[AlertOn], outcome: AttemptOutcome, state: RunState) -> Run {
        let now = self.clock.now();
        let mut run = Run::new_pending(
            self.tenant.clone(),
            JobId::from(job),
            now,
            Trigger::Schedule,
            5,
            now,
            1,
            now,
        );
        run.alert = Some(alert::Alert::new(Notify {
            on: on.to_vec(),
            webhook: "https://hooks.example/sked".into(),
        }));
        self.store.insert_run(&run).await.unwrap();
        let claimed = self
            .store
            .claim_one(
                &self.tenant,
                &run.run_id,
                &WorkerId::from("w"),
                now,
                now + chrono::Duration::seconds(30),
            )
            .await
            .unwrap();
        let ClaimOutcome::Claimed { token, .. } = claimed else {
            panic!("{claimed:?}")
        };
        let result = AttemptResult {
            finished_at: now,
            outcome,
            exit_code: Some(1),
            http_status: None,
            error: None,
            log_bytes: 0,
            log_truncated: false,
        };
        let done = Completion {
            tenant: self.tenant.clone(),
            run_id: run.run_id.clone(),
            token,
            result,
            next: RunTransition::Finish(state),
            only_if_expired_by: None,
        };
        self.store.complete(&done).await.unwrap().run
    }

    async fn alert_of(&self, run: &Run) -> alert::Alert {
        let stored = self.store.get_run(&self.tenant, &run.run_id).await.unwrap().unwrap();
        stored.alert.unwrap()
    }
}

#[tokio::test]
async fn a_failed_run_is_posted_once_signed_with_the_tenants_secret() {
    let h = Harness::new(Receiver::answering(&[]));
    let secret = h.make_secret().await;
    let run = h
        .end_run("nightly", &[AlertOn::Failed], AttemptOutcome::Failed, RunState::Failed)
        .await;
    let notifier = h.notifier();
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);
    assert_eq!(notifier.deliver_due().await.unwrap(), 0, "delivered: not posted again");

    let posts = h.receiver.posts();
    assert_eq!(posts.len(), 1);
    let post = &posts[0];
    assert_eq!(post.url, "https://hooks.example/sked");
    let header = |name: &str| post.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
    let signature = header(alert::SIGNATURE_HEADER).unwrap();
    assert!(alert::verify(&secret, &signature, &post.body), "{signature}");
    assert!(!alert::verify("whsec_other", &signature, &post.body));
    assert_eq!(header(alert::EVENT_HEADER).as_deref(), Some("failed"));
    assert_eq!(header(alert::DELIVERY_HEADER).as_deref(), Some(run.run_id.as_str()));
    let event: serde_json::Value = serde_json::from_slice(&post.body).unwrap();
    assert_eq!(event["type"], "run.failed");
    assert_eq!(event["job_id"], "nightly");
    assert_eq!(event["exit_code"], 1);

    let stored = h.alert_of(&run).await;
    assert_eq!(stored.state, AlertState::Delivered);
    assert_eq!(stored.deliveries.len(), 1);
    assert_eq!(stored.deliveries[0].status, Some(200));
}

#[tokio::test]
async fn an_end_not_listed_in_on_is_not_posted() {
    let h = Harness::new(Receiver::answering(&[]));
    h.make_secret().await;
    h.end_run("a", &[AlertOn::Failed], AttemptOutcome::Succeeded, RunState::Succeeded)
        .await;
    h.end_run("b", &[AlertOn::Failed], AttemptOutcome::TimedOut, RunState::TimedOut)
        .await;
    assert_eq!(h.notifier().deliver_due().await.unwrap(), 0);
    assert!(h.receiver.posts().is_empty());
}

#[tokio::test]
async fn a_500_is_retried_after_the_backoff_and_every_try_is_kept_on_the_run() {
    let h = Harness::new(Receiver::answering(&[Ok(500), Err("could not connect")]));
    h.make_secret().await;
    let run = h
        .end_run(
            "nightly",
            &[AlertOn::TimedOut],
            AttemptOutcome::TimedOut,
            RunState::TimedOut,
        )
        .await;
    let notifier = h.notifier();
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);
    let after_first = h.alert_of(&run).await;
    assert_eq!(after_first.state, AlertState::Pending);
    assert_eq!(
        after_first.due,
        Some(h.clock.now() + chrono::Duration::from_std(BACKOFF).unwrap())
    );

    h.clock.advance(Dur::millis(1_999));
    assert_eq!(notifier.deliver_due().await.unwrap(), 0, "not before the backoff");
    h.clock.advance(Dur::millis(1));
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);
    h.clock.advance(Dur::secs(4));
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);

    let stored = h.alert_of(&run).await;
    assert_eq!(stored.state, AlertState::Delivered);
    let tries: Vec<_> = stored.deliveries.iter().map(|d| (d.status, d.error.clone())).collect();
    assert_eq!(
        tries,
        [
            (Some(500), None),
            (None, Some("could not connect".into())),
            (Some(200), None)
        ]
    );
    let numbers: Vec<u64> = h
        .receiver
        .posts()
        .iter()
        .map(|p| {
            serde_json::from_slice::<serde_json::Value>(&p.body).unwrap()["delivery"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(numbers, [1, 2, 3], "each try says which it is");
}

#[tokio::test]
async fn a_receiver_that_never_answers_2xx_is_given_up_after_the_last_try() {
    let h = Harness::new(Receiver::answering(&[Ok(503); MAX_DELIVERIES]));
    h.make_secret().await;
    let run = h
        .end_run("nightly", &[AlertOn::Failed], AttemptOutcome::Failed, RunState::Failed)
        .await;
    let notifier = h.notifier();
    for _ in 0..MAX_DELIVERIES {
        assert_eq!(notifier.deliver_due().await.unwrap(), 1);
        h.clock.advance(Dur::secs(3600));
    }
    assert_eq!(notifier.deliver_due().await.unwrap(), 0);
    let stored = h.alert_of(&run).await;
    assert_eq!((stored.state, stored.due), (AlertState::GaveUp, None));
    assert_eq!(stored.deliveries.len(), MAX_DELIVERIES);
}

#[tokio::test]
async fn without_a_secret_nothing_is_posted_and_the_try_says_why() {
    let h = Harness::new(Receiver::answering(&[]));
    let run = h
        .end_run("nightly", &[AlertOn::Failed], AttemptOutcome::Failed, RunState::Failed)
        .await;
    let notifier = h.notifier();
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);
    assert!(h.receiver.posts().is_empty(), "never posted unsigned");
    let stored = h.alert_of(&run).await;
    assert!(
        stored.deliveries[0]
            .error
            .as_deref()
            .unwrap()
            .contains("webhook secret")
    );
    assert_eq!(stored.state, AlertState::Pending);

    h.make_secret().await;
    h.clock.advance(Dur::secs(2));
    assert_eq!(notifier.deliver_due().await.unwrap(), 1);
    assert_eq!(h.receiver.posts().len(), 1);
    assert_eq!(h.alert_of(&run).await.state, AlertState::Delivered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn notifiers_racing_post_each_alert_once() {
    let h = Arc::new(Harness::new(Receiver::answering(&[])));
    h.make_secret().await;
    for i in 0..20 {
        h.end_run(
            &format!("j{i}"),
            &[AlertOn::Failed],
            AttemptOutcome::Failed,
            RunState::Failed,
        )
        .await;
    }
    let passes = (0..4).map(|_| {
        let notifier = h.notifier();
        tokio::spawn(async move { notifier.deliver_due().await.unwrap() })
    });
    let made: usize = futures::future::join_all(passes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert_eq!(made, 20);
    let mut posted: Vec<String> = h
        .receiver
        .posts()
        .iter()
        .map(|p| serde_json::from_slice::<serde_json::Value>(&p.body).unwrap()["run_id"].to_string())
        .collect();
    posted.sort();
    posted.dedup();
    assert_eq!(
        (posted.len(), h.receiver.posts().len()),
        (20, 20),
        "each alert posted once"
    );
}

#[tokio::test]
async fn only_an_admin_makes_the_secret_and_it_is_shown_once() {
    let h = Harness::new(Receiver::answering(&[]));
    let service = WebhookSecretService::new(h.store.clone(), h.clock.clone());
    let writer = Principal::new(h.tenant.clone(), Role::Write);
    assert!(service.rotate(&writer).await.is_err());
    assert!(service.created_at(&writer).await.is_err());
    let admin = Principal::new(h.tenant.clone(), Role::Admin);
    assert_eq!(service.created_at(&admin).await.unwrap(), None);
    let first = service.rotate(&admin).await.unwrap();
    let second = service.rotate(&admin).await.unwrap();
    assert_ne!(first.secret, second.secret);
    assert_eq!(service.created_at(&admin).await.unwrap(), Some(second.created_at));
}

#[tokio::test]
async fn occurrences_a_firing_skipped_are_posted_once_per_record() {
    use sked_core::service::jobs::NewJob;
    use sked_core::service::sweeper::{Sweeper, SweeperConfig};
    use sked_core::service::{Sked, SkedConfig, SweepSignal};
    let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
    let h = Harness {
        clock,
        store,
        receiver: Receiver::answering(&[]),
        tenant: TenantId::default(),
    };
    let secret = h.make_secret().await;
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let spec = serde_json::json!({
        "schedule": {"every": "1m"},
        "misfire": "skip",
        "task": {"command": {"argv": ["true"]}},
        "notify": {"on": ["skipped"], "webhook": "https://hooks.example/sked"},
    });
    let new = NewJob {
        id: Some(JobId::from("minutely")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    sked.create_job(&h.tenant, new, None).await.unwrap();
    // sked was down for five minutes: the sweep skips what it missed, by the misfire policy.
    h.clock.advance(Dur::secs(5 * 60 + 30));
    let sweeper = Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default());
    sweeper.sweep_once().await.unwrap();
    let notifier = h.notifier();
    assert_eq!(notifier.deliver_due().await.unwrap(), 1, "one post for the record");
    assert_eq!(notifier.deliver_due().await.unwrap(), 0);

    let posts = h.receiver.posts();
    let header = |name: &str| {
        posts[0]
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    assert!(alert::verify(
        &secret,
        &header(alert::SIGNATURE_HEADER).unwrap(),
        &posts[0].body
    ));
    assert_eq!(header(alert::EVENT_HEADER).as_deref(), Some("skipped"));
    let event: serde_json::Value = serde_json::from_slice(&posts[0].body).unwrap();
    assert_eq!(event["type"], "occurrences.skipped", "{event}");
    assert_eq!(event["job_id"], "minutely");
    assert_eq!(event["reason"], "misfire");
    assert!(event["count"].as_u64().unwrap() >= 4, "{event}");
    let delivery = header(alert::DELIVERY_HEADER).unwrap();
    assert!(
        delivery.starts_with("minutely@") && delivery.ends_with(".skipped"),
        "{delivery}"
    );
}
