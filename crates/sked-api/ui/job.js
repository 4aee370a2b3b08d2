// A job's page (#/jobs/ID?runs=CURSOR&occ=CURSOR): what it is and does, its next fire times
// (GET .../preview), its occurrences as a timeline (GET .../occurrences: fired on time, late,
// skipped — a skipped one explains itself through GET .../why), its runs with outcomes and
// durations (GET .../runs, paged), and the actions pause, resume and trigger. While the page is
// visible it reads the job and its newest runs again every 2 s, and redraws only what changed.

import { get, path, post } from './api.js';
import { actionButton, badge, facts, fill, h, hidden, labels, runLink, table, when } from './dom.js';
import {
  durationInWords,
  elapsed,
  localTime,
  occurrenceKind,
  occurrenceText,
  runDuration,
  scheduleInWords,
  shellWord,
} from './words.js';

const RUNS_PAGE = 20;
const OCCURRENCES = 60;
const REFRESH_MS = 2000;

function taskText(task) {
  if (task?.command) return h('code', {}, task.command.argv.map(shellWord).join(' '));
  if (task?.http) return h('code', {}, `${task.http.method ?? 'GET'} ${task.http.url}`);
  if (task?.container) return h('code', {}, `container ${task.container.image ?? ''}`);
  return h('code', {}, JSON.stringify(task));
}

function scheduleFacts(job) {
  const s = job.schedule;
  const raw = 'cron' in s ? s.cron : 'every' in s ? s.every : 'at' in s ? s.at : null;
  return [
    ['Schedule', [scheduleInWords(s), raw ? [' ', h('code', { class: 'muted nowrap' }, raw)] : null]],
    ['Next run', job.state === 'PAUSED' && job.next_fire_at ? [h('strong', {}, 'paused'), ' — would be ', when(job.next_fire_at)] : when(job.next_fire_at)],
    ['Task', taskText(job.task)],
    ['Labels', labels(job.labels)],
    ['Priority', String(job.priority)],
    ['Retries', `${job.max_retries}, backoff from ${durationInWords(job.backoff?.initial ?? '')}`],
    ['Timeout', `${durationInWords(job.timeout)}, then ${typeof job.on_timeout === 'string' ? job.on_timeout : JSON.stringify(job.on_timeout)}`],
    ['Overlap', job.overlap],
    ['Misfire', job.misfire.replaceAll('_', ' ')],
    job.concurrency ? ['Concurrency', `${job.concurrency.key} (limit ${job.concurrency.limit})`] : null,
    ['Created', when(job.created_at)],
  ];
}

function exitOf(run) {
  const last = run.attempts.at(-1);
  if (!last) return run.reason ?? '';
  if (last.exit_code != null) return `exit ${last.exit_code}`;
  if (last.http_status != null) return `HTTP ${last.http_status}`;
  return last.error ?? last.outcome ?? 'running';
}

function runRows(runs) {
  return runs.map((run) => [
    runLink(run.run_id, localTime(run.scheduled_for)),
    run.trigger,
    badge(run.state),
    String(run.attempts.length),
    elapsed(runDuration(run)) || h('span', { class: 'muted' }, '—'),
    exitOf(run),
  ]);
}

/** The occurrence ledger as a row of marks, oldest on the left; each says what it was. */
function timeline(jobId, occurrences, signal) {
  const detail = h('p', { class: 'occ-detail', 'aria-live': 'polite' }, 'Point at or focus a mark for its details; select a skipped one for why.');
  const counts = { fired: 0, late: 0, skipped: 0 };
  const marks = [...occurrences].reverse().map((o) => {
    const kind = occurrenceKind(o);
    counts[kind] += 1;
    const text = occurrenceText(o);
    const mark = o.run_id
      ? h('a', { href: `#/runs/${encodeURIComponent(o.run_id)}`, class: `occ occ-${kind}`, title: text }, hidden(text))
      : h('button', { type: 'button', class: `occ occ-${kind}`, title: text }, hidden(text));
    const show = () => {
      detail.textContent = text;
    };
    mark.addEventListener('mouseenter', show);
    mark.addEventListener('focus', show);
    if (!o.run_id) {
      mark.addEventListener('click', async () => {
        try {
          const why = await get(path`/v1/jobs/${jobId}/why`, { at: o.scheduled_for }, { signal });
          detail.textContent = why.explanation;
        } catch (e) {
          if (e.name !== 'AbortError') detail.textContent = `${text}. (${e.message})`;
        }
      });
    }
    return h('li', {}, mark);
  });
  if (!marks.length) return h('p', { class: 'empty' }, 'No occurrence yet: nothing of its schedule has come due (a run triggered by hand is not one).');
  // One tab stop for the whole row (the newest mark); the arrow keys, Home and End move along it.
  const focusables = marks.map((li) => li.firstChild);
  focusables.forEach((el, i) => el.setAttribute('tabindex', i === focusables.length - 1 ? '0' : '-1'));
  const list = h('ol', { class: 'timeline', 'aria-describedby': 'occ-summary occ-keys', 'aria-label': 'Occurrences, oldest first' }, marks);
  list.addEventListener('keydown', (event) => {
    const at = focusables.indexOf(document.activeElement);
    if (at < 0) return;
    const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: focusables.length - 1 }[event.key];
    if (to === undefined || to < 0 || to >= focusables.length) return;
    event.preventDefault();
    focusables[at].setAttribute('tabindex', '-1');
    focusables[to].setAttribute('tabindex', '0');
    focusables[to].focus();
  });
  const summary = `${occurrences.length} occurrence${occurrences.length === 1 ? '' : 's'}, oldest first: ${counts.fired} fired on time, ${counts.late} late (started more than 1 s after their time), ${counts.skipped} skipped.`;
  return h(
    'div',
    { class: 'timeline-wrap' },
    h('p', { id: 'occ-summary', class: 'summary' }, summary),
    list,
    h('p', { id: 'occ-keys', class: 'help' }, 'Tab reaches the newest mark; the arrow keys move along the row.'),
    h(
      'ul',
      { class: 'legend', 'aria-label': 'Legend' },
      h('li', {}, h('span', { class: 'occ occ-fired', 'aria-hidden': 'true' }), 'fired on time'),
      h('li', {}, h('span', { class: 'occ occ-late', 'aria-hidden': 'true' }), 'late (over 1 s)'),
      h('li', {}, h('span', { class: 'occ occ-skipped', 'aria-hidden': 'true' }), 'skipped'),
    ),
    detail,
  );
}

/**
 * The ledger's window: from the job's creation (its default), or from its instant for a one-shot
 * written with a time already past, whose one occurrence precedes the job.
 */
function since(job) {
  const at = job.schedule?.at;
  return at && Date.parse(at) < Date.parse(job.created_at) ? at : undefined;
}

export async function render(main, { params, query, signal, setTitle, announce }) {
  const id = params[0];
  const runsCursor = query.get('runs') ?? '';
  const occCursor = query.get('occ') ?? '';
  const base = `#/jobs/${encodeURIComponent(id)}`;
  const [job, preview, runs] = await Promise.all([
    get(path`/v1/jobs/${id}`, {}, { signal }),
    get(path`/v1/jobs/${id}/preview`, { count: 5 }, { signal }),
    get(path`/v1/jobs/${id}/runs`, { limit: RUNS_PAGE, cursor: runsCursor }, { signal }),
  ]);
  const ledger = { limit: OCCURRENCES, since: since(job) };
  const occurrences = await get(path`/v1/jobs/${id}/occurrences`, { ...ledger, cursor: occCursor }, { signal });
  setTitle(`Job ${id}`);

  const heading = h('h1', { tabindex: '-1' }, h('span', { class: 'kind' }, 'Job '), id);
  const stateEl = h('span', { id: 'job-state' });
  const pausedNote = h('p', { class: 'help' });
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Job actions' });
  const factsEl = h('div');
  const runsEl = h('div', { id: 'runs' });
  const occEl = h('div', { id: 'occurrences' });
  let shown = { job: '', runs: '', occ: '' };

  const drawJob = (j) => {
    const key = JSON.stringify(j);
    if (key === shown.job) return;
    shown.job = key;
    fill(stateEl, badge(j.state));
    pausedNote.textContent = j.state === 'PAUSED' ? 'Paused: none of these fires until it is resumed (then its misfire policy decides about the ones missed).' : '';
    fill(factsEl, facts(scheduleFacts(j)));
    const buttons = [];
    if (j.state === 'ACTIVE') buttons.push(actionButton('Pause', () => act('pause', `Job ${id} paused.`), { kind: 'warn' }));
    if (j.state === 'PAUSED') buttons.push(actionButton('Resume', () => act('resume', `Job ${id} resumed.`), { kind: 'primary' }));
    if (j.state === 'ACTIVE' || j.state === 'PAUSED') {
      buttons.push(actionButton('Trigger now', trigger, { describedBy: 'trigger-help' }));
      buttons.push(h('span', { id: 'trigger-help', class: 'help' }, 'Trigger runs the job once now, outside its schedule.'));
    }
    fill(actions, buttons);
  };
  // A part that holds the keyboard focus is not redrawn under it (the next refresh will).
  const drawRuns = (page) => {
    const key = JSON.stringify(page);
    if (key === shown.runs || runsEl.contains(document.activeElement)) return false;
    shown.runs = key;
    fill(
      runsEl,
      table(`Runs of ${id}, newest first`, ['Scheduled for', 'Trigger', 'State', 'Attempts', 'Duration', 'Exit'], runRows(page.items), {
        empty: runsCursor ? 'No older runs.' : 'No runs yet.',
      }),
      h(
        'nav',
        { class: 'pager', 'aria-label': 'Pages of runs' },
        runsCursor ? h('a', { class: 'btn', href: `${base}${occCursor ? `?occ=${encodeURIComponent(occCursor)}` : ''}` }, '« Newest runs') : null,
        page.next_cursor ? h('a', { class: 'btn', href: `${base}?runs=${encodeURIComponent(page.next_cursor)}`, rel: 'next' }, 'Older runs »') : null,
      ),
    );
    return true;
  };
  const drawOccurrences = (page) => {
    const key = JSON.stringify(page);
    if (key === shown.occ || occEl.contains(document.activeElement)) return;
    shown.occ = key;
    fill(
      occEl,
      timeline(id, page.items, signal),
      h(
        'nav',
        { class: 'pager', 'aria-label': 'Pages of occurrences' },
        occCursor ? h('a', { class: 'btn', href: base }, '« Newest occurrences') : null,
        page.next_cursor ? h('a', { class: 'btn', href: `${base}?occ=${encodeURIComponent(page.next_cursor)}` }, 'Older occurrences »') : null,
      ),
    );
  };

  async function refresh() {
    const reads = [get(path`/v1/jobs/${id}`, {}, { signal })];
    if (!runsCursor) reads.push(get(path`/v1/jobs/${id}/runs`, { limit: RUNS_PAGE }, { signal }));
    const [j, r] = await Promise.all(reads);
    drawJob(j);
    if (r && drawRuns(r) && !occCursor) {
      drawOccurrences(await get(path`/v1/jobs/${id}/occurrences`, ledger, { signal }));
    }
  }

  async function act(verb, done) {
    try {
      drawJob(await post(path`/v1/jobs/${id}/${verb}`));
      announce(done, 'ok');
      // The button pressed is gone (Pause became Resume): keep the focus on its successor.
      actions.querySelector('button')?.focus();
    } catch (e) {
      announce(`Could not ${verb} job ${id}: ${e.message}`, 'error');
    }
  }

  async function trigger() {
    try {
      const run = await post(path`/v1/jobs/${id}/trigger`);
      announce([`Job ${id} triggered: `, runLink(run.run_id), '.'], 'ok');
      await refresh();
    } catch (e) {
      announce(`Could not trigger job ${id}: ${e.message}`, 'error');
    }
  }

  drawJob(job);
  drawRuns(runs);
  drawOccurrences(occurrences);
  const upcoming = preview.items.length
    ? h('ol', { class: 'plain' }, preview.items.map((t) => h('li', {}, when(t))))
    : h('p', { class: 'empty' }, 'after' in job.schedule ? 'None of its own: it runs after its upstream jobs.' : 'None: nothing is left to fire.');

  fill(
    main,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', id),
    h('div', { class: 'title' }, heading, stateEl),
    job.name ? h('p', { class: 'lead' }, job.name) : null,
    actions,
    h('div', { class: 'grid' },
      h('section', { 'aria-labelledby': 'h-about', class: 'card' }, h('h2', { id: 'h-about' }, 'About'), factsEl),
      h('section', { 'aria-labelledby': 'h-next', class: 'card' }, h('h2', { id: 'h-next' }, 'Next fire times'), pausedNote, upcoming),
    ),
    h('section', { 'aria-labelledby': 'h-occ', class: 'card' }, h('h2', { id: 'h-occ' }, 'Occurrences'), occEl),
    h('section', { 'aria-labelledby': 'h-runs', class: 'card' }, h('h2', { id: 'h-runs' }, 'Runs'), runsEl),
  );

  const timer = setInterval(() => {
    if (document.visibilityState !== 'visible') return;
    refresh().catch(() => {
      // A failed refresh keeps what is shown; the next one tries again.
    });
  }, REFRESH_MS);
  signal.addEventListener('abort', () => clearInterval(timer));
}
