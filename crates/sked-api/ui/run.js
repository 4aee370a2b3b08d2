// A run's page (#/runs/RUN_ID): its state and times, its failure alert, its attempts (worker, outcome, exit code or
// HTTP status, error, duration), an attempt's log — followed live (GET .../logs?follow=true)
// while the attempt runs, read once (its last 1,000 lines) after — and the actions cancel and
// retry (a new run of its job: POST /v1/jobs/{id}/trigger).

import { followLog, get, path, post } from './api.js';
import { actionButton, badge, facts, fill, h, jobLink, runIdText, table, when } from './dom.js';
import { attemptDuration, elapsed, localTime, runDuration } from './words.js';

const TAIL = 1000;
/** Lines kept on screen; older ones are dropped so a chatty attempt cannot slow the page. */
const MAX_LINES = 5000;
const REFRESH_MS = 2000;
const LIVE = new Set(['PENDING', 'RUNNING']);
const RETRYABLE = new Set(['FAILED', 'TIMED_OUT', 'CANCELLED']);

/** The run's failure alert in words: where its webhook delivery stands, and its last try. */
function alertText(alert) {
  const on = alert.notify.on.join(', ');
  const tries = alert.deliveries.length;
  const last = alert.deliveries.at(-1);
  const answer = last ? (last.status != null ? `HTTP ${last.status}` : last.error) : null;
  switch (alert.state) {
    case 'idle':
      return `posted on ${on} (not this end)`;
    case 'pending':
      return tries ? `${alert.event}: try ${tries} answered ${answer}; next try ${localTime(alert.next_try_at)}` : `${alert.event}: posting`;
    case 'delivered':
      return `${alert.event}: delivered (${tries === 1 ? '1 try' : `${tries} tries`})`;
    default:
      return `${alert.event}: gave up after ${tries} tries (last: ${answer})`;
  }
}

function attemptRows(run, pick) {
  return run.attempts.map((a) => [
    String(a.attempt),
    a.worker,
    when(a.started_at, { ago: false }),
    a.finished_at ? when(a.finished_at, { ago: false }) : h('span', { class: 'muted' }, 'running'),
    elapsed(attemptDuration(a)),
    a.outcome ? badge(a.outcome) : badge('RUNNING'),
    a.exit_code != null ? String(a.exit_code) : a.http_status != null ? `HTTP ${a.http_status}` : '—',
    a.error ?? '',
    h('button', { type: 'button', class: 'btn small', onclick: () => pick(a.attempt) }, `Log of attempt ${a.attempt}`),
  ]);
}

export async function render(main, { params, signal, setTitle, announce, navigate }) {
  const runId = params[0];
  let run = await get(path`/v1/runs/${runId}`, {}, { signal });
  setTitle(`Run ${runId}`);

  const stateEl = h('span', { id: 'run-state' });
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Run actions' });
  const factsEl = h('div');
  const attemptsEl = h('div', { id: 'attempts' });
  const logTitle = h('h2', { id: 'h-log' }, 'Log');
  const logStatus = h('p', { id: 'log-status', class: 'log-status', role: 'status' });
  const log = h('pre', { id: 'log', class: 'log', tabindex: '0', 'aria-labelledby': 'h-log', 'aria-describedby': 'log-status' });
  let logController = null;
  let following = null; // the attempt number being followed, or 0 for "the first, once it starts"
  let logOf = 0; // the attempt whose log is shown
  let picked = false; // the user chose an attempt: do not move to a newer one by ourselves
  let shown = '';

  function draw() {
    const key = JSON.stringify(run);
    if (key === shown) return;
    shown = key;
    fill(stateEl, badge(run.state), run.cancel_requested && LIVE.has(run.state) ? h('span', { class: 'muted' }, ' cancel requested') : null);
    fill(
      factsEl,
      facts([
        ['Job', jobLink(run.job_id)],
        ['Scheduled for', when(run.scheduled_for)],
        ['Trigger', run.trigger],
        ['Started', when(run.started_at)],
        ['Finished', when(run.finished_at)],
        ['Duration', elapsed(runDuration(run)) || '—'],
        run.reason ? ['Reason', run.reason] : null,
        ['Priority', String(run.priority)],
        run.concurrency ? ['Concurrency', `${run.concurrency.key} (limit ${run.concurrency.limit})`] : null,
        run.alert ? ['Alert', alertText(run.alert)] : null,
      ]),
    );
    const buttons = [];
    if (LIVE.has(run.state) && !run.cancel_requested) buttons.push(actionButton('Cancel run', cancel, { kind: 'danger' }));
    if (RETRYABLE.has(run.state)) {
      buttons.push(actionButton('Retry', retry, { kind: 'primary', describedBy: 'retry-help' }));
      buttons.push(h('span', { id: 'retry-help', class: 'help' }, `Retry triggers job ${run.job_id} again now: a new run.`));
    }
    fill(actions, buttons);
    fill(
      attemptsEl,
      table('Attempts, oldest first', ['#', 'Worker', 'Started', 'Ended', 'Duration', 'Outcome', 'Exit code', 'Error', 'Log'], attemptRows(run, (n) => {
        picked = true;
        showLog(n, true);
      }), {
        empty: run.state === 'PENDING' ? 'No attempt yet: the run is waiting to start.' : 'No attempts.',
      }),
    );
  }

  async function reload() {
    run = await get(path`/v1/runs/${runId}`, {}, { signal });
    draw();
    // A retry started while an ended attempt's log was shown: show the new one, live.
    if (!picked && following === null && run.attempts.length > logOf) showLog(0);
  }

  function addLine(line) {
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.append(h('span', { class: `line ${line.stream}` }, h('span', { class: 'ts', 'aria-hidden': 'true' }, `${localTime(line.ts).slice(11)} `), line.line, '\n'));
    while (log.childElementCount > MAX_LINES) log.firstElementChild.remove();
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  /** Shows attempt `n`'s log (the latest when 0): followed live if it is running. */
  async function showLog(n, focus = false) {
    logController?.abort();
    const controller = new AbortController();
    logController = controller;
    signal.addEventListener('abort', () => controller.abort());
    log.replaceChildren();
    const latest = run.attempts.length;
    const attempt = n || latest;
    logOf = attempt;
    const running = attempt === 0 ? LIVE.has(run.state) : !run.attempts[attempt - 1].finished_at;
    fill(logTitle, attempt ? `Log of attempt ${attempt}` : 'Log');
    if (focus) log.focus();
    try {
      if (running) {
        following = attempt;
        logStatus.textContent = attempt ? 'Following live: lines appear as the attempt prints them.' : 'Waiting for the first attempt to start…';
        log.setAttribute('aria-busy', 'true');
        await followLog(runId, { attempt: attempt || undefined, tail: TAIL, signal: controller.signal, onLine: (line) => {
          if (following === 0) {
            following = -1;
            logStatus.textContent = 'Following live: lines appear as the attempt prints them.';
          }
          addLine(line);
        } });
        log.removeAttribute('aria-busy');
        await reload();
        following = null;
        const now = run.attempts.length;
        if (LIVE.has(run.state) && now > attempt) return showLog(now);
        if (!attempt && now) {
          // It followed "the first attempt, once it starts": that is attempt `now` (1, or the
          // latest if several ran before the follow began).
          logOf = now;
          fill(logTitle, `Log of attempt ${now}`);
        }
        logStatus.textContent = `The attempt ended (${run.state.toLowerCase().replaceAll('_', ' ')}); ${log.childElementCount} line${log.childElementCount === 1 ? '' : 's'}.`;
      } else if (!attempt) {
        following = null;
        logStatus.textContent = `No attempt was made (${run.state.toLowerCase().replaceAll('_', ' ')}): nothing was printed.`;
      } else {
        following = null;
        const page = await get(path`/v1/runs/${runId}/logs`, { attempt, tail: TAIL }, { signal: controller.signal });
        page.lines.forEach(addLine);
        const n = page.lines.length;
        logStatus.textContent = n
          ? `${n === TAIL ? `The last ${TAIL}` : `All ${n}`} line${n === 1 ? '' : 's'} of attempt ${attempt}${page.truncated ? ' (the log hit its 10 MiB cap)' : ''}.`
          : `Attempt ${attempt} printed nothing.`;
      }
    } catch (e) {
      log.removeAttribute('aria-busy');
      if (e.name === 'AbortError' || controller.signal.aborted) return;
      logStatus.textContent = `Could not read the log: ${e.message}`;
    }
  }

  async function cancel() {
    try {
      run = await post(path`/v1/runs/${runId}/cancel`);
      draw();
      announce(run.state === 'CANCELLED' ? `Run ${runId} cancelled.` : `Cancel asked for: run ${runId} stops shortly.`, 'ok');
    } catch (e) {
      announce(`Could not cancel run ${runId}: ${e.message}`, 'error');
    }
  }

  async function retry() {
    try {
      const next = await post(path`/v1/jobs/${run.job_id}/trigger`);
      announce(`Job ${run.job_id} triggered again: this is the new run.`, 'ok');
      navigate(`#/runs/${encodeURIComponent(next.run_id)}`, { keep: true });
    } catch (e) {
      announce(`Could not retry: ${e.message}`, 'error');
    }
  }

  draw();
  fill(
    main,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', jobLink(run.job_id), ' / run'),
    h('div', { class: 'title' }, h('h1', { tabindex: '-1' }, h('span', { class: 'kind' }, 'Run '), runIdText(runId)), stateEl),
    actions,
    h('section', { 'aria-labelledby': 'h-run', class: 'card' }, h('h2', { id: 'h-run', class: 'sr-only' }, 'About this run'), factsEl),
    h('section', { 'aria-labelledby': 'h-attempts', class: 'card' }, h('h2', { id: 'h-attempts' }, 'Attempts'), attemptsEl),
    h('section', { 'aria-labelledby': 'h-log', class: 'card' }, logTitle, logStatus, log),
  );
  showLog(0);

  const timer = setInterval(() => {
    if (document.visibilityState !== 'visible' || !LIVE.has(run.state)) return;
    reload().catch(() => {
      // Keep what is shown; the next tick tries again.
    });
  }, REFRESH_MS);
  signal.addEventListener('abort', () => clearInterval(timer));
}
