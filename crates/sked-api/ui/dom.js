// Building the page: a small element helper (text is always set as text, never parsed as HTML,
// so nothing the API returns can inject markup) and the widgets every page uses.

import { localTime, relative } from './words.js';

/**
 * h('a', {href: '#/jobs', class: 'x'}, 'text', child) — attributes (`on*` functions become
 * listeners; `false`/`null` leave the attribute out) and children (strings, nodes, arrays).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value == null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces `el`'s children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Text for screen readers only. */
export const hidden = (text) => h('span', { class: 'sr-only' }, text);

/** A state (job or run) as a coloured badge whose text is the state itself. */
export function badge(state) {
  const s = String(state ?? 'UNKNOWN');
  return h('span', { class: `badge badge-${s.toLowerCase().replaceAll('_', '-')}` }, s.replaceAll('_', ' '));
}

/** An instant: local time, with how far from now; the exact UTC instant in its title. */
export function when(iso, { ago = true } = {}) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const rel = ago ? relative(iso) : '';
  return h(
    'time',
    { datetime: iso, title: iso },
    h('span', { class: 'abs' }, localTime(iso)),
    rel ? h('span', { class: 'rel' }, ` (${rel})`) : null,
  );
}

/** A run id with a line-break opportunity after its `@` (ids are long, windows narrow). */
export function runIdText(id) {
  const at = id.indexOf('@');
  return at < 0 ? id : [id.slice(0, at + 1), h('wbr'), id.slice(at + 1)];
}

/** `#/...` link to a job. */
export const jobLink = (id) => h('a', { href: `#/jobs/${encodeURIComponent(id)}` }, id);

/** `#/...` link to a run. */
export const runLink = (id, text = runIdText(id)) => h('a', { href: `#/runs/${encodeURIComponent(id)}` }, text);

/** A table with a caption and column headings; `rows` are arrays of cells (text or nodes). */
export function table(caption, columns, rows, { empty = 'Nothing to show.', attrs = {} } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h(
    'table',
    { ...attrs, class: `list ${attrs.class ?? ''}`.trim() },
    h('caption', { class: 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
    h(
      'tbody',
      {},
      rows.map((cells) =>
        h('tr', {}, cells.map((cell, i) => h('td', { dataset: { label: columns[i] } }, h('div', { class: 'cell' }, cell ?? '')))),
      ),
    ),
  );
}

/** A button that runs `action` once at a time, with a busy state screen readers hear. */
export function actionButton(label, action, { kind = '', describedBy } = {}) {
  const button = h('button', { type: 'button', class: `btn ${kind}`, 'aria-describedby': describedBy }, label);
  button.addEventListener('click', async () => {
    if (button.getAttribute('aria-busy') === 'true') return;
    button.setAttribute('aria-busy', 'true');
    button.disabled = true;
    try {
      await action();
    } finally {
      button.removeAttribute('aria-busy');
      button.disabled = false;
    }
  });
  return button;
}

/** A labelled key–value list (`<dl>`). */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(Boolean).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v ?? '—'))),
  );
}

/** Label chips: `key=value`. */
export function labels(map) {
  const entries = Object.entries(map ?? {});
  if (!entries.length) return h('span', { class: 'muted' }, '—');
  return h('ul', { class: 'labels' }, entries.map(([k, v]) => h('li', {}, `${k}=${v}`)));
}
