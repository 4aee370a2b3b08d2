// Words for what the API answers in codes: schedules, durations and instants. Pure functions
// (no DOM, no fetch), so node's test runner checks them (scripts/dashboard/words.test.mjs).

const UNITS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
const UNIT_WORDS = { d: 'day', h: 'hour', m: 'minute', s: 'second', ms: 'millisecond' };

/** Milliseconds of a duration as the API writes it ("1h30m", "250ms", "90s"); NaN if not one. */
export function durationMs(text) {
  if (typeof text === 'number') return text * 1000;
  const parts = String(text).match(/(\d+)(ms|d|h|m|s)/g);
  if (!parts || parts.join('') !== String(text)) return NaN;
  return parts.reduce((sum, part) => {
    const [, n, unit] = part.match(/(\d+)(ms|d|h|m|s)/);
    return sum + Number(n) * UNITS[unit];
  }, 0);
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** "5m" → "5 minutes", "1h30m" → "1 hour 30 minutes"; anything else as it was written. */
export function durationInWords(text) {
  const parts = String(text).match(/(\d+)(ms|d|h|m|s)/g);
  if (!parts || parts.join('') !== String(text)) return String(text);
  return parts
    .map((part) => {
      const [, n, unit] = part.match(/(\d+)(ms|d|h|m|s)/);
      return plural(Number(n), UNIT_WORDS[unit]);
    })
    .join(' ');
}

/** "every 5m" → "every 5 minutes"; "every 1m" → "every minute". */
function everyInWords(text) {
  const words = durationInWords(text);
  return `every ${words.replace(/^1 (\w+)$/, '$1')}`;
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const DAY_NAMES = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
const MONTHS = [
  'January', 'February', 'March', 'April', 'May', 'June',
  'July', 'August', 'September', 'October', 'November', 'December',
];
const MACROS = {
  '@yearly': 'every year on 1 January at 00:00',
  '@annually': 'every year on 1 January at 00:00',
  '@monthly': 'on the 1st of every month at 00:00',
  '@weekly': 'every Sunday at 00:00',
  '@daily': 'every day at 00:00',
  '@midnight': 'every day at 00:00',
  '@hourly': 'every hour, on the hour',
};

const isNum = (f) => /^\d+$/.test(f);
const pad = (n) => String(n).padStart(2, '0');

function ordinal(n) {
  const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' }[n % 10] ?? 'th');
  return `${n}${s}`;
}

/** A day-of-week field in words ("MON-FRI" → "weekday"), or null if not a common form. */
function daysInWords(field) {
  const day = (d) => (isNum(d) ? Number(d) % 7 : DAY_NAMES[d.toUpperCase()]);
  const f = field.toUpperCase();
  if (f === 'MON-FRI' || f === '1-5') return 'weekday';
  if (f === 'SAT,SUN' || f === 'SUN,SAT' || f === '0,6' || f === '6,0' || f === '6,7') return 'weekend day';
  const list = f.split(',').map(day);
  if (list.some((d) => d === undefined || Number.isNaN(d))) return null;
  if (list.length === 1) return DAYS[list[0]];
  return `${list.slice(0, -1).map((d) => DAYS[d]).join(', ')} and ${DAYS[list.at(-1)]}`;
}

/** A cron expression (5 fields, 6 with leading seconds, or a macro) in words, or null. */
export function cronInWords(expr) {
  const text = String(expr).trim();
  if (MACROS[text.toLowerCase()]) return MACROS[text.toLowerCase()];
  let fields = text.split(/\s+/);
  if (fields.length === 6) {
    const [sec, ...rest] = fields;
    const step = sec.match(/^(?:\*|0)\/(\d+)$/);
    if (rest.every((f) => f === '*')) {
      if (sec === '*') return 'every second';
      if (step) return `every ${plural(Number(step[1]), 'second')}`;
    }
    if (sec !== '0') return null;
    fields = rest;
  }
  if (fields.length !== 5) return null;
  const [min, hour, dom, mon, dow] = fields;
  const everyDay = dom === '*' && mon === '*' && dow === '*';
  const minStep = min.match(/^(?:\*|0)\/(\d+)$/);
  const hourStep = hour.match(/^(?:\*|0)\/(\d+)$/);
  if (everyDay && hour === '*') {
    if (min === '*') return 'every minute';
    if (minStep) return `every ${plural(Number(minStep[1]), 'minute')}`;
    if (min === '0') return 'every hour, on the hour';
    if (isNum(min)) return `every hour at ${Number(min)} past`;
    return null;
  }
  if (everyDay && hourStep && isNum(min)) {
    const at = min === '0' ? 'on the hour' : `at ${Number(min)} past`;
    return `every ${plural(Number(hourStep[1]), 'hour')}, ${at}`;
  }
  if (!isNum(min)) return null;
  const times = hour.split(',');
  if (!times.every(isNum)) return null;
  const at = times.map((h) => `${pad(h)}:${pad(min)}`).join(' and ');
  if (everyDay) return `every day at ${at}`;
  if (dom === '*' && mon === '*') {
    const days = daysInWords(dow);
    return days ? `every ${days} at ${at}` : null;
  }
  if (isNum(dom) && dow === '*') {
    if (mon === '*') return `on the ${ordinal(Number(dom))} of every month at ${at}`;
    if (isNum(mon) && Number(mon) >= 1 && Number(mon) <= 12) {
      return `every year on ${Number(dom)} ${MONTHS[Number(mon) - 1]} at ${at}`;
    }
  }
  return null;
}

/** An instant as the browser's local date and time: "2026-12-01 09:00:00". */
export function localTime(iso, { seconds = true } = {}) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const date = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? `:${pad(d.getSeconds())}` : ''}`;
  return `${date} ${time}`;
}

/**
 * A job's schedule in words: {every} → "every 5 minutes", {cron} → a phrase for common forms
 * (else the expression) and its time zone, {at} → the instant, {after} → "after a, b (on
 * success)".
 */
export function scheduleInWords(schedule) {
  if (!schedule || typeof schedule !== 'object') return 'no schedule';
  if ('every' in schedule) return everyInWords(schedule.every);
  if ('cron' in schedule) {
    const words = cronInWords(schedule.cron) ?? `cron ${schedule.cron}`;
    const tz = schedule.timezone;
    return tz && tz !== 'UTC' ? `${words} (${tz})` : `${words} (UTC)`;
  }
  if ('at' in schedule) return `once at ${localTime(schedule.at)}`;
  if ('after' in schedule) {
    const after = schedule.after ?? {};
    const on = { success: 'on success', failure: 'on failure', any: 'whatever the outcome' }[after.on ?? 'success'] ?? `on ${after.on}`;
    const within = after.within ? `, within ${durationInWords(after.within)}` : '';
    return `after ${(after.jobs ?? []).join(', ')} (${on}${within})`;
  }
  return JSON.stringify(schedule);
}

/** Milliseconds in words: "120 ms", "1.2 s", "3 min 4 s", "2 h 5 min". */
export function elapsed(ms) {
  if (ms == null || Number.isNaN(ms)) return '';
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(abs < 10_000 ? 1 : 0)} s`;
  const s = Math.round(abs / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** How far `iso` is from `now`: "in 4 s", "3 min ago", "just now". */
export function relative(iso, now = Date.now()) {
  if (!iso) return '';
  const diff = new Date(iso).getTime() - now;
  if (Number.isNaN(diff)) return '';
  if (Math.abs(diff) < 1000) return 'just now';
  const abs = Math.abs(diff);
  const amount =
    abs < 60_000 ? `${Math.round(abs / 1000)} s`
      : abs < 3_600_000 ? `${Math.round(abs / 60_000)} min`
        : abs < 86_400_000 ? `${Math.round(abs / 3_600_000)} h`
          : `${Math.round(abs / 86_400_000)} d`;
  return diff > 0 ? `in ${amount}` : `${amount} ago`;
}

/** A run's duration: from its first attempt's start to its end (or to `now` while it runs). */
export function runDuration(run, now = Date.now()) {
  if (!run?.started_at) return null;
  const end = run.finished_at ? new Date(run.finished_at).getTime() : now;
  return end - new Date(run.started_at).getTime();
}

/** An attempt's duration in ms, or null before it started. */
export function attemptDuration(attempt, now = Date.now()) {
  if (!attempt?.started_at) return null;
  const end = attempt.finished_at ? new Date(attempt.finished_at).getTime() : now;
  return end - new Date(attempt.started_at).getTime();
}

/** The lag above which a fired occurrence counts as late on the timeline. */
export const LATE_MS = 1000;

/** An occurrence's kind on the timeline: "fired", "late" or "skipped". */
export function occurrenceKind(occurrence) {
  if (occurrence.outcome === 'skipped') return 'skipped';
  return (occurrence.lag_ms ?? 0) > LATE_MS ? 'late' : 'fired';
}

/** One sentence for an occurrence, for its title and screen readers. */
export function occurrenceText(occurrence) {
  const at = localTime(occurrence.scheduled_for);
  const kind = occurrenceKind(occurrence);
  if (kind === 'skipped') return `${at}: skipped (${(occurrence.reason ?? 'no reason given').replaceAll('_', ' ')})`;
  const lag = occurrence.lag_ms == null ? 'not started yet' : `started ${elapsed(occurrence.lag_ms)} after its time`;
  return `${at}: fired${kind === 'late' ? ' late' : ''}, ${lag}`;
}

/** An argument as a POSIX shell would need it written: quoted only when it has to be. */
export function shellWord(arg) {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${String(arg).replaceAll("'", "'\\''")}'`;
}

/** A label filter typed as "k=v k2=v2" (or comma-separated) → ["k=v", "k2=v2"]. */
export function parseLabels(text) {
  return String(text ?? '')
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
}
