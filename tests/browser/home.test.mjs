// home.test.mjs — the UI in a real Chromium against a real server (the test build, with
// the UI embedded at build time: run `make all` first).
//
//   cd /work/main && make all && node --test tests/browser/
//
// DEEPDESK_SCREENSHOTS=/tmp also writes light and dark screenshots (ui-*.png) there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, BIN, holdWorker } from '../lib/server.mjs';
import { apiSaying } from '../api/helpers.mjs';

const SHOTS = process.env.DEEPDESK_SCREENSHOTS || '';

let server, browser, page;
let pageErrors = [];
const workers = new Set(); // pids this file holds with SIGSTOP: killed at the end, whatever failed

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  server = await startServer(); // no --ui-dir: this tests the UI built into the binary
  ({ browser, page, errors: pageErrors } = await openPage());
});

after(async () => {
  for (const pid of workers) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
});

/** server.api, with the network-level cause in the message when a request fails. */
const api = (method, path, body) => apiSaying(server, method, path, body);

async function createJob(body) {
  const r = await api('POST', '/api/v1/jobs', body);
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.job;
}

/** The state, badge text and progress (0..100 or null) of a job's row in the list. */
function rowInfo(id) {
  return page.evaluate((jid) => {
    const tr = document.querySelector(`tr[data-id="${jid}"]`);
    if (!tr) return null;
    const bar = tr.querySelector('[role=progressbar]');
    const barShown = bar && bar.offsetParent !== null;
    return {
      state: tr.dataset.state,
      badge: tr.querySelector('.badge').textContent.trim(),
      progress: barShown ? Number(bar.getAttribute('aria-valuenow')) : null,
    };
  }, id);
}

async function screenshots(name) {
  if (!SHOTS) return;
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(300); // let colour transitions finish
    await page.screenshot({ path: join(SHOTS, `ui-${name}-${scheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

let doneJob; // the job of the first test, opened in the second

test('home page: a new job appears, progresses and finishes live, without a reload', async () => {
  await page.goto(`${server.url}/`);
  assert.equal(await page.locator('header .brand-name').textContent(), 'deepdesk');
  await page.locator('#conn[data-state="open"]').waitFor();

  // The tabs are keyboard-usable: from "Running", ArrowLeft wraps to "All jobs".
  const running = page.getByRole('tab', { name: /^Running/ });
  assert.equal(await running.getAttribute('aria-selected'), 'true');
  await running.focus();
  await page.keyboard.press('ArrowLeft');
  const all = page.getByRole('tab', { name: /^All jobs/ });
  assert.equal(await all.getAttribute('aria-selected'), 'true');
  assert.equal(await running.getAttribute('aria-selected'), 'false');
  assert.equal(new URL(page.url()).pathname, '/jobs');
  assert.equal(await page.evaluate(() => document.activeElement.textContent.startsWith('All jobs')), true);

  await page.evaluate(() => { window.__sameDocument = true; });
  const job = await createJob({ kind: 'test', name: 'browser job one', params: { steps: 20, step_ms: 150 } });
  doneJob = job;
  // held (SIGSTOP) at its first progress report, before the page has to show anything:
  // the job takes 3 s of sleeps, far longer than this takes to find it running
  const { pid } = await waitState(server, job.id, 'running', 60000);
  workers.add(pid);
  const dir = join(server.dataDir, 'jobs', String(job.id));
  const lastProgress = (ev) => ev.filter((e) => e.type === 'progress').at(-1)?.progress ?? 0;
  const h1 = lastProgress(await holdWorker(pid, dir, (ev) => lastProgress(ev) > 0 && lastProgress(ev) < 0.5, 'a first progress report'));

  // It shows up without a reload, by name, as a link to its page.
  const link = page.getByRole('link', { name: 'browser job one' });
  await link.waitFor();
  assert.equal(await link.getAttribute('href'), `/jobs/${job.id}`);

  // Progress moves while it runs: two different values strictly between 0 and 100.
  // The worker is held (SIGSTOP) right after a report each time, so the row has all
  // the time it needs to show it, however slow the machine and the browser are.
  const shown = async (what, ok) => {
    try {
      const h = await page.waitForFunction(([id, not]) => {
        const tr = document.querySelector(`tr[data-id="${id}"]`);
        const bar = tr?.querySelector('[role=progressbar]');
        if (!tr || tr.dataset.state !== 'running' || !bar || bar.offsetParent === null) return null;
        const v = Number(bar.getAttribute('aria-valuenow'));
        return v > 0 && v < 100 && v !== not ? v : null;
      }, [job.id, ok], { timeout: 60000 });
      return h.jsonValue();
    } catch (e) {
      const j = (await api('GET', `/api/v1/jobs/${job.id}`)).body.job;
      throw new Error(`the row did not show ${what}: last row ${JSON.stringify(await rowInfo(job.id))}; the server says ` +
        `${JSON.stringify({ state: j.state, progress: j.progress, error: j.error })} (${e.message})`);
    }
  };
  const p1 = await shown(`the progress ${h1}`, null);
  process.kill(pid, 'SIGCONT');
  await holdWorker(pid, dir, (ev) => lastProgress(ev) > h1 && lastProgress(ev) < 1, 'a later progress report');
  const p2 = await shown('a second progress value', p1);
  process.kill(pid, 'SIGCONT');
  assert.ok(p2 > p1, `progress moved on: ${p1} then ${p2}`);

  await page.waitForFunction((id) => {
    const tr = document.querySelector(`tr[data-id="${id}"]`);
    return tr && tr.dataset.state === 'done' && tr.querySelector('.badge').textContent.trim() === 'done';
  }, job.id);
  const rec = await api('GET', `/api/v1/jobs/${job.id}`);
  assert.equal(rec.body.job.state, 'done');
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page reloaded');

  // The "Running" tab no longer lists it; "All jobs" still does.
  await running.click();
  assert.equal(new URL(page.url()).pathname, '/');
  assert.equal(await page.locator(`tr[data-id="${job.id}"]`).count(), 0);
  await all.click();
  assert.equal((await rowInfo(job.id)).badge, 'done');
  await screenshots('home');
});

test('job page: log lines, metrics and the state history', async () => {
  assert.ok(doneJob, 'needs the job of the first test');
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.getByRole('link', { name: 'browser job one' }).click();
  await page.waitForURL(`**/jobs/${doneJob.id}`);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'following a link reloaded the page');

  const check = async () => {
    await page.getByRole('heading', { level: 1, name: 'browser job one' }).waitFor();
    const log = page.getByRole('log');
    await log.getByText('step 1 of 20', { exact: true }).waitFor();
    await log.getByText('step 20 of 20', { exact: true }).waitFor();
    const lines = await log.locator('.log-msg').allTextContents();
    const steps = lines.filter((l) => /^step \d+ of 20$/.test(l));
    assert.deepEqual(steps, Array.from({ length: 20 }, (_, i) => `step ${i + 1} of 20`), 'each step once, in order');
    assert.equal(await page.locator('.job-meta .badge').textContent(), 'done');
    const history = await page.locator('.timeline > li').evaluateAll((els) => els.map((e) => e.dataset.state));
    assert.deepEqual(history, ['queued', 'running', 'done']);
    assert.equal(await page.locator('tr[data-metric="loss"] td').first().textContent(), '0.05');
    assert.equal(await page.getByRole('button', { name: 'Abort' }).count(), 0, 'no Abort on a finished job');
  };
  await check();
  await screenshots('job-done');
  // A deep link survives a reload.
  await page.reload();
  await check();
});

test('job page: a long job streams its log live, refuses deletion while running, and aborts', async () => {
  const job = await createJob({ kind: 'test', name: 'long job', params: { steps: 1000, step_ms: 100 } });
  await page.goto(`${server.url}/jobs/${job.id}`);
  await page.getByRole('heading', { level: 1, name: 'long job' }).waitFor();
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'running');
  // Lines keep arriving after the page loaded.
  const log = page.getByRole('log');
  await log.getByText('step 3 of 1000', { exact: true }).waitFor();
  const before = await log.locator('.log-line').count();
  await page.waitForFunction((n) => document.querySelectorAll('.log .log-line').length >= n + 3, before);

  // Delete while running: the server says no (409) and the page shows its message.
  const refused = await api('DELETE', `/api/v1/jobs/${job.id}`);
  assert.equal(refused.status, 409);
  await page.getByRole('button', { name: 'Delete' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Delete job' }).click();
  const alert = page.getByRole('alert').filter({ hasText: refused.body.error.message });
  await alert.waitFor();
  assert.equal((await api('GET', `/api/v1/jobs/${job.id}`)).body.job.state, 'running');

  await page.getByRole('button', { name: 'Abort' }).click();
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'aborted');
  const ended = await waitState(server, job.id, 'aborted', 60000);
  assert.equal(ended.state, 'aborted');
  await page.locator('.timeline > li[data-state="aborted"]').waitFor();
  await page.getByRole('button', { name: /Abort/ }).waitFor({ state: 'hidden' });
  await screenshots('job-aborted');
});

test('info panel shows the machine', async () => {
  const info = (await api('GET', '/api/v1/info')).body;
  assert.ok(info.cpu.cores >= 1);
  await page.goto(`${server.url}/`);
  const panel = page.getByRole('complementary', { name: 'System' });
  await panel.locator('[data-info="cores"]').waitFor();
  assert.equal(await panel.locator('[data-info="cores"]').textContent(), `${info.cpu.cores} cores`);
  assert.equal(await panel.locator('[data-info="version"]').textContent(), `deepdesk ${info.version}`);
  const gpus = await panel.locator('[data-info="gpus"]').textContent();
  if (info.gpus.length === 0) assert.equal(gpus, 'no GPU');
  else assert.notEqual(gpus, 'no GPU');
  assert.deepEqual(pageErrors, [], 'no script errors in the page');
});
