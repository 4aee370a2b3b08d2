// Failed runs of the last day across jobs (#/failed?state=FAILED|TIMED_OUT&since=&cursor=):
// GET /v1/runs?state=…&since=…, newest first, paged by cursor; each with its last attempt's
// exit code or error, and a retry (a new run of its job).

import { get, path, post } from './api.js';
import { actionButton, badge, fill, h, jobLink, runLink, table, when } from './dom.js';
import { elapsed, runDuration } from './words.js';

const PAGE_SIZE = 50;
const DAY_MS = 86_400_000;
const KINDS = [
  ['FAILED', 'Failed'],
  ['TIMED_OUT', 'Timed out'],
];

function hashFor(state, since, cursor) {
  const q = new URLSearchParams({ state });
  if (since) q.set('since', since);
  if (cursor) q.set('cursor', cursor);
  return `#/failed?${q}`;
}

function why(run) {
  const last = run.attempts.at(-1);
  const parts = [];
  if (last?.exit_code != null) parts.push(`exit ${last.exit_code}`);
  if (last?.http_status != null) parts.push(`HTTP ${last.http_status}`);
  // "exit status 3" says again what "exit 3" said.
  if (last?.error && last.error !== `exit status ${last.exit_code}`) parts.push(last.error);
  if (!parts.length && run.reason) parts.push(run.reason);
  return parts.join(': ');
}

export async function render(main, { query, signal, setTitle, announce }) {
  const state = KINDS.some(([s]) => s === query.get('state')) ? query.get('state') : 'FAILED';
  // The window is fixed when the first page opens, so the pages after it are of the same list.
  const since = query.get('since') ?? new Date(Date.now() - DAY_MS).toISOString();
  const cursor = query.get('cursor') ?? '';
  setTitle('Failed runs');
  const page = await get('/v1/runs', { state, since, cursor, limit: PAGE_SIZE }, { signal });

  const retry = (run) => async () => {
    try {
      const next = await post(path`/v1/jobs/${run.job_id}/trigger`);
      announce([`Job ${run.job_id} triggered again: `, runLink(next.run_id), '.'], 'ok');
    } catch (e) {
      announce(`Could not retry job ${run.job_id}: ${e.message}`, 'error');
    }
  };
  const rows = page.items.map((run) => [
    h('span', { class: 'mono small' }, runLink(run.run_id)),
    jobLink(run.job_id),
    badge(run.state),
    when(run.finished_at ?? run.scheduled_for),
    String(run.attempts.length),
    elapsed(runDuration(run)),
    h('span', { class: 'why' }, why(run)),
    actionButton('Retry', retry(run), { describedBy: 'retry-help' }),
  ]);

  const tabs = h(
    'nav',
    { class: 'tabs', 'aria-label': 'Which runs' },
    KINDS.map(([s, label]) => h('a', { href: hashFor(s, '', ''), 'aria-current': s === state ? 'page' : null, class: 'tab' }, label)),
  );
  fill(
    main,
    h('h1', { tabindex: '-1' }, 'Failed runs of the last day'),
    tabs,
    h(
      'p',
      { class: 'summary', id: 'failed-summary' },
      `${KINDS.find(([s]) => s === state)[1]} runs due since `,
      when(since),
      `, newest first, across all jobs${page.items.length ? `: ${page.items.length} on this page` : ''}.`,
    ),
    h('p', { id: 'retry-help', class: 'help' }, 'Retry triggers the run’s job again now: a new run (a failed attempt is retried by sked itself, up to the job’s max_retries, before its run fails).'),
    table('Failed runs, newest first', ['Run', 'Job', 'State', 'Ended', 'Attempts', 'Duration', 'Why', 'Action'], rows, {
      empty: `No ${state === 'FAILED' ? 'failed' : 'timed-out'} runs in the last day.`,
      attrs: { class: 'failed', 'aria-describedby': 'failed-summary' },
    }),
    h(
      'nav',
      { class: 'pager', 'aria-label': 'Pages of failed runs' },
      cursor ? h('a', { class: 'btn', href: hashFor(state, '', '') }, '« Newest') : null,
      page.next_cursor ? h('a', { class: 'btn', href: hashFor(state, since, page.next_cursor), rel: 'next' }, 'Older »') : null,
    ),
  );
}
