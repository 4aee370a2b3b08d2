// The dashboard in a real browser: headless Chromium (Debian's) driven by playwright-core,
// against a `sked server` that scripts/dashboard-test.sh started on 127.0.0.1. Each step waits
// on a condition (a locator, or a function polled in the page), never a fixed time. Screenshots
// of every page, wide and 375 px narrow, go to $SHOTS.
//
// Environment: SKED_URL, SKED_KEY_FILE (the server's admin.key), CHROMIUM (the executable),
// SHOTS (screenshot directory), NODE_MODULES (where playwright-core was installed).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const { SKED_URL: url, SKED_KEY_FILE, CHROMIUM, SHOTS, NODE_MODULES } = process.env;
const { chromium } = createRequire(join(NODE_MODULES, '..', 'package.json'))('playwright-core');
const key = readFileSync(SKED_KEY_FILE, 'utf8').trim();
const WAIT_MS = 20_000;
/** An occurrence whose run started over this long after its time is marked late (ui/words.js). */
const LATE_MS = 1000;

if (!url.startsWith('http://127.0.0.1:')) throw new Error(`only 127.0.0.1 is tested, not ${url}`);

// ----- the API, to set the scene -----

async function api(method, path, body) {
  const res = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

const SLOW = "echo 'warming up' >&2; for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.5; done";
// The one-shots' time is read when the scene is set (after Chromium has started), not here.
const jobs = (now) => [
  {
    id: 'slow',
    name: 'Prints eight lines, half a second apart',
    schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin' },
    task: { command: { argv: ['sh', '-c', SLOW] } },
    labels: { team: 'data', tier: 'batch' },
  },
  {
    id: 'hello',
    name: 'Says hello once',
    schedule: { at: now },
    task: { command: { argv: ['echo', 'hello from sked'] } },
    labels: { team: 'data' },
  },
  {
    id: 'broken',
    schedule: { at: now },
    task: { command: { argv: ['sh', '-c', 'echo starting; echo "cannot reach the database" >&2; exit 3'] } },
    max_retries: 0,
    labels: { team: 'platform' },
  },
  {
    id: 'tick',
    name: 'Every second, runs 1.5 s: every other occurrence is skipped',
    schedule: { every: '1s' },
    task: { command: { argv: ['sleep', '1.5'] } },
    overlap: 'forbid',
    labels: { team: 'platform' },
  },
  {
    id: 'report',
    schedule: { after: { jobs: ['hello', 'broken'], on: 'any', within: '1h' } },
    task: { command: { argv: ['true'] } },
  },
];

/** Polls `probe` (every 100 ms, up to WAIT_MS) until it answers something truthy. */
async function until(probe, what) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const lastState = async (job) => (await api('GET', `/v1/jobs/${job}/runs?limit=1`)).items[0]?.state;

// ----- steps -----

const results = [];
let page;

async function step(name, body) {
  const began = Date.now();
  try {
    await body();
    results.push({ name, ok: true });
    console.log(`ok - ${name} (${Date.now() - began} ms)`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`not ok - ${name}: ${e.message.split('\n')[0]}`);
    console.log(e.stack);
    if (page) await page.screenshot({ path: join(SHOTS, `failed-${results.length}.png`), fullPage: true }).catch(() => {});
    throw e;
  }
}

async function shot(p, name) {
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

function check(cond, message) {
  if (!cond) throw new Error(message);
}

/** Accessibility basics of what is on screen; the problems found. */
function audit(p) {
  return p.evaluate(() => {
    const problems = [];
    if (!document.documentElement.lang) problems.push('no lang on <html>');
    if (document.querySelectorAll('h1').length !== 1) problems.push(`${document.querySelectorAll('h1').length} h1 elements`);
    for (const el of document.querySelectorAll('input, select, textarea')) {
      if (!el.labels?.length && !el.getAttribute('aria-label')) problems.push(`unlabelled ${el.tagName} #${el.id}`);
    }
    for (const el of document.querySelectorAll('button, a[href]')) {
      if (!el.textContent.trim() && !el.getAttribute('aria-label')) problems.push(`nameless ${el.tagName} ${el.outerHTML.slice(0, 80)}`);
    }
    for (const el of document.querySelectorAll('img')) if (!el.hasAttribute('alt')) problems.push('img without alt');
    const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
    const dup = ids.filter((id, i) => ids.indexOf(id) !== i);
    if (dup.length) problems.push(`duplicate ids ${dup.join(', ')}`);
    return problems;
  });
}

async function accessible(p, where) {
  const problems = await audit(p);
  check(problems.length === 0, `${where}: ${problems.join('; ')}`);
}

async function signIn(p) {
  await p.goto(`${url}/`);
  const input = p.getByLabel('API key');
  await input.waitFor();
  await input.fill(key);
  await input.press('Enter');
  await p.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
}

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const consoleErrors = [];
function watch(p) {
  p.setDefaultTimeout(WAIT_MS);
  p.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  p.on('pageerror', (e) => consoleErrors.push(e.message));
  // Nothing may leave 127.0.0.1.
  p.on('request', (r) => {
    if (!r.url().startsWith(url) && !r.url().startsWith('data:')) consoleErrors.push(`request off the server: ${r.url()}`);
  });
}

let status = 0;
try {
  await step('the scene: five jobs through the API', async () => {
    const now = new Date().toISOString();
    for (const job of jobs(now)) await api('POST', '/v1/jobs', job);
    // The one-shots end before the pages look at them (the jobs page reads each last run once).
    await until(async () => (await lastState('hello')) === 'SUCCEEDED', "hello's run to succeed");
    await until(async () => (await lastState('broken')) === 'FAILED', "broken's run to fail");
  });

  const wide = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await wide.newPage();
  watch(page);

  await step('sign in with the API key (Enter in the field); the key is in no URL', async () => {
    await page.goto(`${url}/`);
    await page.getByLabel('API key').waitFor();
    await accessible(page, 'sign-in');
    await page.getByLabel('API key').fill(key);
    await shot(page, '01-sign-in');
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
    check(!page.url().includes(key), 'the key is in the URL');
    const stored = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length }));
    check(stored.session === 1 && stored.local === 0, `storage: ${JSON.stringify(stored)}`);
  });

  await step('the jobs: state, schedule in words, next run, last run, labels', async () => {
    const slow = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'slow', exact: true }) });
    await slow.getByText('every day at 03:00 (Europe/Berlin)').waitFor();
    await slow.getByText('ACTIVE').waitFor();
    await slow.getByText('team=data').waitFor();
    const tick = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'tick', exact: true }) });
    await tick.getByText('every second', { exact: true }).waitFor();
    await page.getByRole('row').filter({ hasText: 'after hello, broken (whatever the outcome, within 1 hour)' }).waitFor();
    // Each row's last run is read once the row is on screen (all five are).
    await page.waitForFunction(() => !document.body.textContent.includes('loading…'));
    await page.getByRole('row').filter({ has: page.getByRole('link', { name: 'broken', exact: true }) }).getByText('FAILED').waitFor();
    await accessible(page, 'jobs');
    await shot(page, '02-jobs');
  });

  await step('filter the jobs by label', async () => {
    await page.getByLabel('Labels').fill('team=data');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(() => document.querySelectorAll('table.jobs tbody tr').length === 2);
    const ids = await page.locator('table.jobs tbody tr td:first-child a').allTextContents();
    check(ids.join(',') === 'hello,slow', `filtered: ${ids}`);
    await shot(page, '03-jobs-filtered');
  });

  await step("a one-shot's run succeeds on its job page", async () => {
    await page.getByRole('link', { name: 'hello', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Job hello' }).waitFor();
    await page.locator('#runs').getByText('SUCCEEDED').first().waitFor();
    await page.locator('#runs').getByText('exit 0').first().waitFor();
    // Its one occurrence links to its run, marked as the ledger says: on time or late is the
    // server's timing (a loaded machine may start it over 1 s late), not the page's to decide.
    // (Its time precedes its creation, so the ledger is read from that time, as the page does.)
    const { schedule } = await api('GET', '/v1/jobs/hello');
    const [occurrence] = (await api('GET', `/v1/jobs/hello/occurrences?since=${encodeURIComponent(schedule.at)}`)).items;
    check(occurrence?.run_id, `hello's occurrence: ${JSON.stringify(occurrence)}`);
    const kind = occurrence.lag_ms > LATE_MS ? 'late' : 'fired';
    await page.locator(`.timeline a.occ-${kind}[href="#/runs/${encodeURIComponent(occurrence.run_id)}"]`).waitFor();
    await accessible(page, 'job hello');
    await shot(page, '04-job-hello');
  });

  await step("trigger a job and follow its run's log while it prints", async () => {
    await page.goto(`${url}/#/jobs/slow`);
    await page.getByRole('heading', { level: 1, name: 'Job slow' }).waitFor();
    await page.getByRole('button', { name: 'Trigger now' }).click();
    await page.getByRole('status').getByText('Job slow triggered').waitFor();
    await page.locator('#runs a[href^="#/runs/slow%40"]').first().click();
    await page.getByRole('heading', { level: 1, name: /^Run slow@/ }).waitFor();
    // Line 2 shows while the run still runs, and line 8 is yet to come: the lines arrive live.
    const seen = await page.waitForFunction(() => {
      const log = document.getElementById('log')?.textContent ?? '';
      if (!log.includes('line 2')) return false;
      return { state: document.getElementById('run-state').textContent, last: log.includes('line 8') };
    });
    const mid = await seen.jsonValue();
    check(!mid.last, 'line 8 was there as soon as line 2: the log was not followed live');
    check(/PENDING|RUNNING/.test(mid.state), `the run was ${mid.state} while it printed`);
    await page.getByText('Following live').waitFor();
    await shot(page, '05-run-following');
    await page.locator('#log').getByText('line 8').waitFor();
    await page.locator('#run-state').getByText('SUCCEEDED').first().waitFor();
    await page.getByText(/The attempt ended \(succeeded\)/).waitFor();
    await page.locator('#attempts').getByText('succeeded').waitFor();
    await accessible(page, 'run');
    await shot(page, '06-run-succeeded');
  });

  await step('pause the job and see it paused', async () => {
    await page.locator('.crumbs').getByRole('link', { name: 'slow' }).click();
    await page.getByRole('heading', { level: 1, name: 'Job slow' }).waitFor();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('#job-state').getByText('PAUSED').waitFor();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    await page.getByRole('status').getByText('Job slow paused.').waitFor();
    await shot(page, '07-job-paused');
    await page.goto(`${url}/#/jobs?state=PAUSED`);
    await page.getByRole('row').filter({ has: page.getByRole('link', { name: 'slow', exact: true }) }).getByText('PAUSED').waitFor();
    const rows = await page.locator('table.jobs tbody tr').count();
    check(rows === 1, `${rows} paused jobs listed`);
  });

  await step('the failed runs of the last day', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Failed runs' }).click();
    await page.getByRole('heading', { level: 1, name: 'Failed runs of the last day' }).waitFor();
    const broken = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'broken', exact: true }) });
    await broken.getByText('exit 3').waitFor();
    await broken.getByRole('button', { name: 'Retry' }).waitFor();
    await accessible(page, 'failed runs');
    await shot(page, '08-failed');
  });

  await step('the occurrence timeline: fired and skipped, a skipped one explains itself', async () => {
    await page.goto(`${url}/#/jobs/tick`);
    await page.getByRole('heading', { level: 1, name: 'Job tick' }).waitFor();
    await page.locator('.timeline .occ-skipped').first().waitFor();
    // A fired occurrence links to its run (marked on time or late, as its start fell).
    await page.locator('.timeline a.occ').first().waitFor();
    // By keyboard: the row is one tab stop (the newest mark); the left arrow walks back to a
    // skipped mark, and Enter asks why it was skipped.
    await page.locator('.timeline [tabindex="0"]').focus();
    const onSkipped = () => page.evaluate(() => document.activeElement.classList.contains('occ-skipped'));
    const marks = await page.locator('.timeline .occ').count();
    for (let i = 0; i < marks && !(await onSkipped()); i++) await page.keyboard.press('ArrowLeft');
    check(await onSkipped(), 'the arrow keys reached no skipped mark');
    await page.keyboard.press('Enter');
    await page.locator('.occ-detail').getByText(/skipped/).waitFor();
    await page.locator('.occ-detail').getByText(/overlap policy is forbid/).waitFor();
    await accessible(page, 'job tick');
    await shot(page, '09-timeline');
  });

  await step('a narrow window (375 px): no sideways scrolling, every page usable', async () => {
    const narrow = await browser.newContext({ viewport: { width: 375, height: 740 } });
    const p = await narrow.newPage();
    watch(p);
    page = p;
    await signIn(p);
    const width = () => p.evaluate(() => document.documentElement.scrollWidth);
    check((await width()) <= 375, `jobs: ${await width()} px wide`);
    // A row's last run is read once the row is on screen: scroll to the last one.
    await p.locator('table.jobs tbody tr').last().scrollIntoViewIfNeeded();
    await p.waitForFunction(() => !document.body.textContent.includes('loading…'));
    await shot(p, '10-narrow-jobs');
    await p.goto(`${url}/#/jobs/slow`);
    await p.getByRole('heading', { level: 1, name: 'Job slow' }).waitFor();
    await p.locator('#runs').getByText('SUCCEEDED').first().waitFor();
    check((await width()) <= 375, `job: ${await width()} px wide`);
    await shot(p, '11-narrow-job');
    await p.locator('#runs a[href^="#/runs/slow%40"]').first().click();
    await p.locator('#log').getByText('line 8').waitFor();
    check((await width()) <= 375, `run: ${await width()} px wide`);
    await shot(p, '12-narrow-run');
    await p.goto(`${url}/#/failed`);
    await p.getByRole('row').filter({ hasText: 'broken' }).first().waitFor();
    check((await width()) <= 375, `failed: ${await width()} px wide`);
    await shot(p, '13-narrow-failed');
  });

  await step('sign out: the key is gone from the tab', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    check((await page.evaluate(() => sessionStorage.length)) === 0, 'the key stayed in sessionStorage');
  });

  await step('no console error, CSP violation or request off the server', async () => {
    check(consoleErrors.length === 0, consoleErrors.join('\n'));
  });
} catch {
  status = 1;
} finally {
  await browser.close();
}

const passed = results.filter((r) => r.ok).length;
console.log(`${passed} passed, ${results.length - passed} failed`);
process.exit(status);
