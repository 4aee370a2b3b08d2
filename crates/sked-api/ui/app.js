// The dashboard's shell: sign-in, the hash router (#/jobs, #/jobs/ID, #/runs/RUN, #/failed)
// and what every page shares (the status line, focus on navigation, stopping a page's timers
// and streams when another opens). Each page is a module with `render(main, context)`.

import { ApiError, clearKey, get, key, setKey } from './api.js';
import { h, fill } from './dom.js';
import * as jobs from './jobs.js';
import * as job from './job.js';
import * as run from './run.js';
import * as failed from './failed.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const status = document.getElementById('status');

/** The page on screen: its abort controller (stops its requests, timers and streams). */
let current = null;

/** Whether the status line's message is to outlive the next navigation (it led there). */
let keepStatus = false;

/**
 * Says `content` (text or nodes) in the status line (a polite live region): action results and
 * errors. It stays until the next message or the next page, or the one after with `keep`.
 */
function announce(content, kind = 'info', { keep = false } = {}) {
  status.className = `status status-${kind}`;
  keepStatus = keep;
  fill(status, content);
}

/** `#/jobs/abc?state=PAUSED` → {parts: ['jobs', 'abc'], query: URLSearchParams}. */
function parseHash() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(2) : 'jobs';
  const [pathPart, queryPart = ''] = hash.split('?');
  const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(queryPart) };
}

function pageFor(parts) {
  switch (parts[0]) {
    case undefined:
    case 'jobs':
      return parts[1] === undefined ? jobs : job;
    case 'runs':
      return parts[1] === undefined ? failed : run;
    case 'failed':
      return failed;
    default:
      return null;
  }
}

function setTitle(text) {
  document.title = `${text} · sked`;
}

async function show() {
  current?.abort();
  const controller = new AbortController();
  current = controller;
  if (keepStatus) keepStatus = false;
  else fill(status);
  if (!key()) {
    signIn();
    return;
  }
  nav.hidden = false;
  const { parts, query } = parseHash();
  for (const a of nav.querySelectorAll('a')) {
    const here = a.getAttribute('href') === `#/${parts[0] ?? 'jobs'}`;
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const page = pageFor(parts);
  if (!page) {
    fill(main, h('h1', { tabindex: '-1' }, 'Not found'), h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs')));
    setTitle('Not found');
    focusHeading();
    return;
  }
  fill(main, h('p', { class: 'loading' }, 'Loading…'));
  try {
    window.scrollTo(0, 0);
    await page.render(main, {
      params: parts.slice(1),
      query,
      signal: controller.signal,
      announce,
      setTitle,
      navigate: (hash, { keep = false } = {}) => {
        keepStatus = keep;
        location.hash = hash;
      },
    });
    if (!controller.signal.aborted) focusHeading();
  } catch (e) {
    if (controller.signal.aborted || e.name === 'AbortError') return;
    if (e instanceof ApiError && e.status === 401) return; // signed out: the sign-in page shows
    fill(
      main,
      h('h1', { tabindex: '-1' }, e instanceof ApiError && e.status === 404 ? 'Not found' : 'Something went wrong'),
      h('p', { class: 'error', role: 'alert' }, e.message),
      h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs')),
    );
    setTitle('Error');
    focusHeading();
  }
}

/** Moves focus to the page's heading, so a screen reader announces where the user is. */
function focusHeading() {
  const heading = main.querySelector('h1');
  if (heading && !main.contains(document.activeElement)) heading.focus({ preventScroll: true });
  else if (heading && document.activeElement === document.body) heading.focus({ preventScroll: true });
}

function signIn(message) {
  nav.hidden = true;
  setTitle('Sign in');
  const input = h('input', {
    id: 'key',
    name: 'key',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'key-help',
  });
  const error = h('p', { id: 'signin-error', class: 'error', role: 'alert' }, message ?? '');
  const button = h('button', { type: 'submit', class: 'btn primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin', method: 'post' },
    h('label', { for: 'key' }, 'API key'),
    input,
    h(
      'p',
      { id: 'key-help', class: 'help' },
      h('code', {}, 'make run'),
      ' wrote an operator key to ',
      h('code', {}, 'sked-data/admin.key'),
      '. The key stays in this tab only (session storage) and is sent only in the Authorization header.',
    ),
    button,
    error,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) return;
    button.disabled = true;
    error.textContent = '';
    setKey(value);
    try {
      await get('/v1/jobs', { limit: 1 });
      input.value = '';
      announce('Signed in.', 'ok', { keep: true });
      show();
    } catch (e) {
      clearKey();
      error.textContent =
        e instanceof ApiError && e.status === 401 ? 'That key was refused: unknown or revoked.' : `Could not sign in: ${e.message}`;
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  fill(main, h('section', { class: 'card narrow' }, h('h1', { tabindex: '-1' }, 'Sign in to sked'), form));
  input.focus();
}

document.getElementById('signout').addEventListener('click', () => {
  clearKey();
  announce('Signed out.', 'info', { keep: true });
  show();
});

// The skip link moves focus without touching the hash the router reads.
document.querySelector('.skip').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});

window.addEventListener('sked:signed-out', (event) => {
  current?.abort();
  signIn(event.detail ? `Signed out: ${event.detail}` : 'Signed out: the key was refused.');
});

window.addEventListener('hashchange', () => {
  if (location.hash === '' || location.hash.startsWith('#/')) show();
});

show();
