// Unit tests of the dashboard's words (crates/sked-api/ui/words.js) on node's own test runner:
// `node --test scripts/dashboard/words.test.mjs` (scripts/dashboard-test.sh runs it first).
import assert from 'node:assert/strict';
import test from 'node:test';
import {
  cronInWords,
  durationInWords,
  durationMs,
  elapsed,
  occurrenceKind,
  parseLabels,
  relative,
  scheduleInWords,
  shellWord,
} from '../../crates/sked-api/ui/words.js';

test('every: durations in words, a single unit without its 1', () => {
  assert.equal(scheduleInWords({ every: '5m' }), 'every 5 minutes');
  assert.equal(scheduleInWords({ every: '1m' }), 'every minute');
  assert.equal(scheduleInWords({ every: '1h30m', anchor: '2026-01-01T00:00:00Z' }), 'every 1 hour 30 minutes');
  assert.equal(scheduleInWords({ every: '250ms' }), 'every 250 milliseconds');
  assert.equal(durationInWords('2d'), '2 days');
  assert.equal(durationInWords('weird'), 'weird');
  assert.equal(durationMs('1h30m'), 5_400_000);
  assert.ok(Number.isNaN(durationMs('5x')));
});

test('cron: common forms read as phrases, with the time zone', () => {
  const cases = [
    ['* * * * *', 'every minute'],
    ['*/15 * * * *', 'every 15 minutes'],
    ['0 * * * *', 'every hour, on the hour'],
    ['5 * * * *', 'every hour at 5 past'],
    ['0 */2 * * *', 'every 2 hours, on the hour'],
    ['30 2 * * *', 'every day at 02:30'],
    ['0 9,17 * * *', 'every day at 09:00 and 17:00'],
    ['0 9 * * MON-FRI', 'every weekday at 09:00'],
    ['0 9 * * 1-5', 'every weekday at 09:00'],
    ['0 10 * * SAT,SUN', 'every weekend day at 10:00'],
    ['0 8 * * 1', 'every Monday at 08:00'],
    ['0 8 * * MON,WED,FRI', 'every Monday, Wednesday and Friday at 08:00'],
    ['0 6 1 * *', 'on the 1st of every month at 06:00'],
    ['0 6 22 * *', 'on the 22nd of every month at 06:00'],
    ['0 0 25 12 *', 'every year on 25 December at 00:00'],
    ['*/10 * * * * *', 'every 10 seconds'],
    ['0 30 2 * * *', 'every day at 02:30'],
    ['@daily', 'every day at 00:00'],
    ['@hourly', 'every hour, on the hour'],
  ];
  for (const [expr, words] of cases) assert.equal(cronInWords(expr), words, expr);
  // Anything else: the expression itself.
  assert.equal(cronInWords('0 9-17/2 * * *'), null);
  assert.equal(scheduleInWords({ cron: '0 9-17/2 * * *', timezone: 'UTC' }), 'cron 0 9-17/2 * * * (UTC)');
  assert.equal(scheduleInWords({ cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin' }), 'every weekday at 09:00 (Europe/Berlin)');
});

test('at and after', () => {
  assert.match(scheduleInWords({ at: '2026-12-01T09:00:00.000Z' }), /^once at 2026-12-0[12] \d\d:00:00$/);
  assert.equal(scheduleInWords({ after: { jobs: ['a', 'b'], on: 'success' } }), 'after a, b (on success)');
  assert.equal(scheduleInWords({ after: { jobs: ['a'], on: 'any', within: '1h' } }), 'after a (whatever the outcome, within 1 hour)');
});

test('times and durations', () => {
  const now = Date.parse('2026-12-01T09:00:00Z');
  assert.equal(relative('2026-12-01T09:00:04Z', now), 'in 4 s');
  assert.equal(relative('2026-12-01T08:57:00Z', now), '3 min ago');
  assert.equal(relative('2026-12-01T09:00:00.300Z', now), 'just now');
  assert.equal(elapsed(120), '120 ms');
  assert.equal(elapsed(1234), '1.2 s');
  assert.equal(elapsed(184_000), '3 min 4 s');
});

test('occurrences: late above 1 s, skipped whatever its lag', () => {
  assert.equal(occurrenceKind({ outcome: 'fired', lag_ms: 3 }), 'fired');
  assert.equal(occurrenceKind({ outcome: 'fired', lag_ms: 1500 }), 'late');
  assert.equal(occurrenceKind({ outcome: 'fired', lag_ms: null }), 'fired');
  assert.equal(occurrenceKind({ outcome: 'skipped', reason: 'overlap' }), 'skipped');
});

test('label filters', () => {
  assert.deepEqual(parseLabels(' team=data, env=prod  tier=1 '), ['team=data', 'env=prod', 'tier=1']);
  assert.deepEqual(parseLabels(''), []);
});

test('command arguments are shown as a shell would need them', () => {
  assert.equal(shellWord('echo'), 'echo');
  assert.equal(shellWord('/usr/bin/backup'), '/usr/bin/backup');
  assert.equal(shellWord('--level=full'), '--level=full');
  assert.equal(shellWord("echo 'hi' >&2"), `'echo '\\''hi'\\'' >&2'`);
  assert.equal(shellWord(''), "''");
});
