//! What a run copies from its job when it is written — priority, attempts, concurrency key,
//! alert — and how a run that has not started takes them again from a job changed since
//! (runs fired ahead of their time, as on AWS, exist minutes before they start).

use crate::alert::{Alert, Notify};
use crate::concurrency::Concurrency;
use crate::job::JobSpec;
use crate::run::{Run, RunState};

/// The settings a run keeps of its job's spec ([`Run::of_job`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSettings {
    /// 0..=9.
    pub priority: u8,
    /// `max_retries + 1`.
    pub max_attempts: u32,
    /// The concurrency key and its limit.
    pub concurrency: Option<Concurrency>,
    /// Where its end is posted.
    pub notify: Option<Notify>,
}

impl RunSettings {
    /// The settings a run of a job with `spec` is written with.
    pub fn of(spec: &JobSpec) -> Self {
        RunSettings {
            priority: spec.priority,
            max_attempts: spec.max_attempts(),
            concurrency: spec.concurrency.clone(),
            notify: spec.notify.clone(),
        }
    }
}

impl Run {
    /// The settings this run was written with (or has taken since).
    pub fn settings(&self) -> RunSettings {
        RunSettings {
            priority: self.priority,
            max_attempts: self.max_attempts,
            concurrency: self.concurrency.clone(),
            notify: self.alert.as_ref().map(|a| a.notify.clone()),
        }
    }

    /// Whether the run has not started: PENDING with no attempt. A change of its job reaches
    /// such a run; an attempt made runs to its end as it started.
    pub fn is_unstarted(&self) -> bool {
        self.state == RunState::Pending && self.attempts.is_empty()
    }

    /// Takes `settings` if the run has not started ([`Run::is_unstarted`]) and they differ
    /// from its own; returns whether it changed. An alert taken is a fresh one (an unstarted
    /// run has none armed).
    pub fn take_settings(&mut self, settings: &RunSettings) -> bool {
        if !self.is_unstarted() || self.settings() == *settings {
            return false;
        }
        self.priority = settings.priority;
        self.max_attempts = settings.max_attempts;
        self.concurrency = settings.concurrency.clone();
        self.alert = settings.notify.clone().map(Alert::new);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkerId;
    use crate::run::Trigger;
    use crate::timestamp::parse;

    fn pending() -> Run {
        let t = parse("2026-12-01T00:00:00Z").unwrap();
        Run::new_pending("t".into(), "j".into(), t, Trigger::Schedule, 5, t, 1, t)
    }

    fn changed() -> RunSettings {
        RunSettings {
            priority: 9,
            max_attempts: 4,
            concurrency: Some(Concurrency {
                key: "db".into(),
                limit: 1,
            }),
            notify: None,
        }
    }

    #[test]
    fn an_unstarted_run_takes_changed_settings_once() {
        let mut run = pending();
        assert!(run.take_settings(&changed()));
        assert_eq!(run.settings(), changed());
        assert!(!run.take_settings(&changed()), "the same settings change nothing");
    }

    #[test]
    fn a_run_with_an_attempt_keeps_its_settings() {
        let mut run = pending();
        let t = run.not_before;
        run.start_attempt(&WorkerId::from("w"), t, t, 1);
        let before = run.settings();
        assert!(!run.take_settings(&changed()));
        assert_eq!(run.settings(), before);
    }
}
