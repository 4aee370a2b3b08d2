// The jobs page (#/jobs?state=&label=&cursor=): one page of jobs from GET /v1/jobs (server-side
// paging by cursor, 50 a page, so it is as fast with 100k jobs as with 10), filtered by state
// and labels; a row's last run is read once the row is on screen, for that row alone.

import { get, path } from './api.js';
import { badge, fill, h, jobLink, labels, runLink, table, when } from './dom.js';
import { localTime, parseLabels, relative, scheduleInWords } from './words.js';

export const PAGE_SIZE = 50;
const STATES = ['ACTIVE', 'PAUSED', 'COMPLETED', 'DELETED'];
/** Last-run look-ups in flight at once (a browser opens about 6 connections to one host). */
const LOOKUPS = 6;

function hashFor(state, label, cursor) {
  const q = new URLSearchParams();
  if (state) q.set('state', state);
  if (label) q.set('label', label);
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return `#/jobs${s ? `?${s}` : ''}`;
}

function filters(state, label, navigate) {
  const select = h(
    'select',
    { id: 'f-state', name: 'state' },
    h('option', { value: '' }, 'All but deleted'),
    STATES.map((s) => h('option', { value: s, selected: s === state }, s.toLowerCase())),
  );
  const input = h('input', {
    id: 'f-label',
    name: 'label',
    value: label,
    placeholder: 'team=data',
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-describedby': 'f-label-help',
  });
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter jobs' },
    h('div', { class: 'field' }, h('label', { for: 'f-state' }, 'State'), select),
    h(
      'div',
      { class: 'field grow' },
      h('label', { for: 'f-label' }, 'Labels'),
      input,
      h('span', { id: 'f-label-help', class: 'help' }, 'key=value; several, separated by spaces, must all match'),
    ),
    h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Filter')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(hashFor(select.value, parseLabels(input.value).join(' '), ''));
  });
  return form;
}

function openById(navigate) {
  const input = h('input', { id: 'open-id', name: 'id', autocomplete: 'off', spellcheck: 'false', placeholder: 'nightly-report' });
  const form = h(
    'form',
    { class: 'filters open', 'aria-label': 'Open a job by id' },
    h('div', { class: 'field grow' }, h('label', { for: 'open-id' }, 'Open a job by id'), input),
    h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'btn' }, 'Open')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = input.value.trim();
    if (id) navigate(`#/jobs/${encodeURIComponent(id)}`);
  });
  return form;
}

/** Reads one job's latest run into `cell`. */
async function lastRun(id, cell, signal) {
  try {
    const page = await get(path`/v1/jobs/${id}/runs`, { limit: 1 }, { signal });
    const last = page.items[0];
    fill(
      cell,
      last
        ? [badge(last.state), ' ', runLink(last.run_id, localTime(last.scheduled_for)), h('span', { class: 'rel' }, ` (${relative(last.scheduled_for)})`)]
        : h('span', { class: 'muted' }, 'none yet'),
    );
  } catch (e) {
    if (e.name !== 'AbortError') fill(cell, h('span', { class: 'muted' }, 'unavailable'));
  }
}

/**
 * Reads each row's latest run once the row is on screen (or nearly), a few at a time: a page
 * costs one request for the jobs and one per row looked at, never one per job stored.
 */
function fillLastRuns(cells, signal) {
  const queue = [];
  let active = 0;
  const pump = () => {
    while (active < LOOKUPS && queue.length && !signal.aborted) {
      const [id, cell] = queue.shift();
      active += 1;
      lastRun(id, cell, signal).finally(() => {
        active -= 1;
        pump();
      });
    }
  };
  const byCell = new Map(cells.map(([id, cell]) => [cell, id]));
  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        observer.unobserve(entry.target);
        queue.push([byCell.get(entry.target), entry.target]);
      }
      pump();
    },
    { rootMargin: '300px 0px' },
  );
  for (const cell of byCell.keys()) observer.observe(cell);
  signal.addEventListener('abort', () => observer.disconnect());
}

export async function render(main, { query, signal, setTitle, navigate }) {
  const state = query.get('state') ?? '';
  const label = query.get('label') ?? '';
  const cursor = query.get('cursor') ?? '';
  setTitle('Jobs');
  const page = await get('/v1/jobs', { state, label: parseLabels(label), cursor, limit: PAGE_SIZE }, { signal });
  const lastRunCells = [];
  const rows = page.items.map((job) => {
    const cell = h('span', { class: 'muted' }, 'loading…');
    lastRunCells.push([job.id, cell]);
    return [
      [jobLink(job.id), job.name ? h('div', { class: 'muted small' }, job.name) : null],
      badge(job.state),
      h('span', { title: JSON.stringify(job.schedule) }, scheduleInWords(job.schedule)),
      when(job.next_fire_at),
      cell,
      labels(job.labels),
    ];
  });
  const filtered = state || label;
  const summary = page.items.length
    ? `${page.items.length} job${page.items.length === 1 ? '' : 's'} on this page${cursor ? '' : ', from the first'}${page.next_cursor ? '; more on the next page.' : '.'}`
    : '';
  fill(
    main,
    h('h1', { tabindex: '-1' }, 'Jobs'),
    h('div', { class: 'toolbar' }, filters(state, label, navigate), openById(navigate)),
    h('p', { class: 'summary', id: 'jobs-summary' }, summary),
    table('Jobs, ordered by id', ['Job', 'State', 'Schedule', 'Next run', 'Last run', 'Labels'], rows, {
      empty: filtered ? 'No job matches these filters.' : 'No jobs yet: create one with sked jobs create, or POST /v1/jobs.',
      attrs: { class: 'jobs', 'aria-describedby': 'jobs-summary' },
    }),
    h(
      'nav',
      { class: 'pager', 'aria-label': 'Pages of jobs' },
      cursor ? h('a', { class: 'btn', href: hashFor(state, label, '') }, '« First page') : null,
      page.next_cursor ? h('a', { class: 'btn', href: hashFor(state, label, page.next_cursor), rel: 'next' }, 'Next page »') : null,
    ),
  );
  fillLastRuns(lastRunCells, signal);
}
