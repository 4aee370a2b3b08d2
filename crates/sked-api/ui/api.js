// The dashboard's only way to the server: the JSON API under /v1, with the key the user signed
// in with. The key lives in this tab's sessionStorage (gone when the tab closes), goes out only
// in the Authorization header, and is never put in a URL or logged.

const KEY = 'sked.key';

export function key() {
  return sessionStorage.getItem(KEY);
}

export function setKey(value) {
  sessionStorage.setItem(KEY, value);
}

export function clearKey() {
  sessionStorage.removeItem(KEY);
}

/** An answer other than 2xx: the API's `{"error": {code, message, field}}`, with its status. */
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

function url(path, query) {
  const u = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value == null || value === '') continue;
    for (const v of Array.isArray(value) ? value : [value]) u.searchParams.append(name, v);
  }
  return u;
}

function headers(json) {
  const h = { Authorization: `Bearer ${key()}`, Accept: 'application/json' };
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

async function failure(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  const e = body?.error ?? {};
  if (res.status === 401) {
    clearKey();
    window.dispatchEvent(new CustomEvent('sked:signed-out', { detail: e.message }));
  }
  return new ApiError(res.status, e.code ?? 'http_error', e.message ?? `${res.status} ${res.statusText}`, e.field);
}

/** One API call; resolves to the decoded JSON body, rejects with an ApiError. */
export async function call(method, path, { query, body, signal } = {}) {
  const res = await fetch(url(path, query), {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: 'no-store',
    credentials: 'omit',
  });
  if (!res.ok) throw await failure(res);
  return res.status === 204 ? null : res.json();
}

export const get = (path, query, options = {}) => call('GET', path, { ...options, query });
export const post = (path, body, options = {}) => call('POST', path, { ...options, body });

/** `/v1/...` with each id segment escaped. */
export function path(strings, ...ids) {
  return strings.reduce((out, s, i) => out + s + (i < ids.length ? encodeURIComponent(ids[i]) : ''), '');
}

/**
 * Follows an attempt's log (`?follow=true`, newline-delimited JSON) and calls `onLine` with each
 * line object as it arrives. Resolves when the server ends the stream (the attempt ended and
 * its last lines were sent) or `signal` aborts.
 */
export async function followLog(runId, { attempt, tail, signal, onLine }) {
  const res = await fetch(url(path`/v1/runs/${runId}/logs`, { follow: 'true', attempt, tail }), {
    headers: headers(false),
    signal,
    cache: 'no-store',
    credentials: 'omit',
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    const lines = buffered.split('\n');
    buffered = lines.pop();
    for (const line of lines) if (line.trim()) onLine(JSON.parse(line));
  }
  if (buffered.trim()) onLine(JSON.parse(buffered));
}
