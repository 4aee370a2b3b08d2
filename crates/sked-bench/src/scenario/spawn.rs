//! spawn (opt-in, `--only spawn`): the process executor alone, without store, queue or logs:
//! N executions of `/bin/true`, `slots` at once, through the `sked` spawner and started
//! directly (fork of this process + parent-death signal). Figure: executions per second.
//! Compared with `burst --exec true`, it shows whether starting payloads or scheduling them
//! is what limits the drain.

use super::Settings;
use crate::stats::{Record, round1};
use sked_core::duration::Dur;
use sked_core::ports::{Clock, ExecRequest, Executor, SystemClock};
use sked_core::task::{CommandTask, Task};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// Runs every size both ways.
pub async fn run(settings: &Settings) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for n in settings.sizes_or(&[2_000], &[10_000]) {
        for spawner in [true, false] {
            out.push(one(settings, spawner, n).await?);
        }
    }
    Ok(out)
}

/// `n` executions, `settings.slots.total()` at once.
async fn one(settings: &Settings, spawner: bool, n: usize) -> anyhow::Result<Record> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let executor = Arc::new(crate::engine::process_executor(clock, spawner));
    let slots = settings.slots.total().max(1);
    let started = Instant::now();
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..slots {
        let executor = executor.clone();
        // Lane `lane` runs executions lane, lane + slots, … below n.
        let count = (lane..n).step_by(slots).count();
        lanes.spawn(async move {
            for _ in 0..count {
                let (output, _lines) = mpsc::channel(16);
                let (_stop, stop) = watch::channel(None);
                let result = executor.execute(true_request(), output, stop).await;
                anyhow::ensure!(result.success, "/bin/true failed: {result:?}");
            }
            Ok(())
        });
    }
    while let Some(lane) = lanes.join_next().await {
        lane??;
    }
    let took = super::secs(started.elapsed());
    let rate = n as f64 / took;
    let how = if spawner { "spawner" } else { "direct" };
    let mut r = Record::new("spawn", how, n);
    r.set("slots", slots)
        .set("took_ms", round1(took * 1000.0))
        .set("runs_per_s", rate.round());
    r.key = rate;
    r.headline = format!("{rate:.0} runs/s ({:.0} ms, {slots} at once)", took * 1000.0);
    Ok(r)
}

/// A `/bin/true` command with a `SKED_*` variable, as a worker would run it.
fn true_request() -> ExecRequest {
    ExecRequest {
        task: Task::Command(CommandTask {
            argv: vec!["/bin/true".into()],
            env: Default::default(),
            cwd: None,
        }),
        context: vec![("SKED_JOB_ID".into(), "spawn".into())],
        grace: Dur::secs(1),
        lease_lost_grace: Dur::secs(1),
    }
}
