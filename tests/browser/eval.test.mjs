// eval.test.mjs — evaluate a model from its page, in a real Chromium against a real
// server: a tiny network trained (through the API) on 8×8 colour squares whose
// classes include a name made of HTML; the model page's Evaluate button and dialog
// start an evaluation of the validation split; the evaluation page shows top-1 as the
// API has it, the per-class table, the 3×3 confusion heat map, and images that load;
// the HTML class name stays text everywhere.
//
//   make all && node --test --test-concurrency=1 tests/browser/eval.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { ROOT } from '../lib/server.mjs';
import {
  startServer, waitState, writeColourFolders, killTrackedPids, folderDataset, trainModel, trainColourModel,
} from '../api/helpers.mjs';

const ARTIFACTS = join(ROOT, 'tests', 'artifacts');
const XSS = '<img src=x onerror=window.evalxss=1>';
const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], [XSS]: [200, 30, 30] };

let server, browser, page, pageErrors, work, modelId;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  work = mkdtempSync(join(tmpdir(), 'deepdesk-evalui-'));
  server = await startServer({ args: ['--data-root', work] });
  ({ modelId } = await trainColourModel(server, work, COLOURS, { n: 12 }));
  ({ browser, page, errors: pageErrors } = await openPage({ width: 1360, height: 900, timeout: 15000 }));
});

/** The server answers: GET /api/v1/info is 200.  node's pooled connection may have
 *  sat idle (through a test's browser part) past the server's 5 s keep-alive, and a
 *  request on one the server has closed fails at the socket with no answer, which
 *  says nothing of the server: such a failure is retried on another connection.  A
 *  refused connection (the server gone) or any answer but 200 fails the test. */
async function serverAnswers() {
  let r;
  for (let attempt = 1; !r; attempt++) {
    try {
      r = await server.api('GET', '/api/v1/info');
    } catch (e) {
      const code = e.cause?.code;
      if (attempt >= 3 || !['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'].includes(code)) {
        throw new Error(`the server does not answer (its exit: ${server.proc.exitCode ?? server.proc.signalCode ?? 'none, it runs'}): ${e.message}${code ? ` (${code})` : ''}`, { cause: e });
      }
    }
  }
  assert.equal(r.status, 200, JSON.stringify(r.body));
}

after(async () => {
  if (browser) await browser.close();
  killTrackedPids();
  if (server) { await server.stop(); server.cleanup(); }
  rmSync(work, { recursive: true, force: true });
});

/** Confirm the Evaluate dialog dlg: the page goes to the new evaluation, which
 *  finishes; its id. */
async function evaluateConfirmed(dlg) {
  await dlg.locator('[data-action="evaluate-confirm"]').click();
  await page.waitForURL(/\/jobs\/\d+$/);
  const evalId = Number(new URL(page.url()).pathname.split('/').pop());
  const st = await waitState(server, evalId, ['done', 'error'], 60000);
  assert.equal(st.state, 'done', st.error);
  return evalId;
}

test('Evaluate from the model page: progress, accuracy, per-class table, confusion, images', async () => {
  await page.goto(`${server.url}/models/${modelId}`);
  await page.locator('[data-action="evaluate"]').click();
  const dlg = page.locator('dialog[aria-label="Evaluate"]');
  await dlg.waitFor();
  assert.equal(await dlg.locator('select').first().inputValue(), '2', 'the latest snapshot first');
  const evalId = await evaluateConfirmed(dlg);

  const api = (await server.api('GET', `/api/v1/evaluations/${evalId}`)).body.evaluation.metrics;
  assert.equal(api.count, 9);
  await page.locator('.eval-heat').waitFor();
  const top1 = await page.locator('.eval-summary .tile', { hasText: 'Top-1' }).locator('.tile-value').textContent();
  assert.equal(top1, `${(api.accuracy * 100).toFixed(2)}%`);
  // the per-class table: a row a class, the HTML name as text
  const classRows = page.locator('.eval-classes .eval-table tbody tr');
  assert.equal(await classRows.count(), 3);
  const x = api.labels.indexOf(XSS);
  assert.ok(x >= 0, JSON.stringify(api.labels));
  assert.equal(await classRows.nth(x).locator('th').textContent(), XSS);
  // the latest rows, as they came (the last 12 of 9: all), the newest first
  await page.locator('.eval-latest tbody tr').first().waitFor();
  assert.equal(await page.locator('.eval-latest tbody tr').count(), 9);
  assert.equal(await page.locator('.eval-latest tbody tr td').first().textContent(), '8');
  // the confusion matrix: 3×3 cells summing to the count
  const cells = await page.locator('.eval-heat tbody td').allTextContents();
  assert.equal(cells.length, 9);
  assert.equal(cells.reduce((a, c) => a + (Number(c) || 0), 0), api.count);
  assert.equal(await page.locator('.eval-heat thead th').nth(x + 1).textContent(), XSS);
  // top images of a class: thumbnails that load
  await page.locator('.eval-top .eval-thumb img').first().waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll('.eval-top img')].every((i) => i.complete && i.naturalWidth > 0));
  assert.ok(await page.locator('.eval-top .eval-thumb').count() >= 1);
  // the downloads answer
  const href = await page.locator('.eval-downloads a').first().getAttribute('href');
  // fetched by the page: a connection of node's own idle this long may be one the
  // server has closed (its keep-alive is 5 s), which says nothing of this route
  const dl = await page.evaluate(async (u) => { const r = await fetch(u); return [r.status, (await r.text()).split('\n')[0]]; }, href);
  assert.equal(dl[0], 200);
  assert.match(dl[1], /^n,name,true_label,/);
  assert.equal(await page.evaluate(() => window.evalxss), undefined, 'the class name stayed text');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(ARTIFACTS, 'eval-1-done.png'), fullPage: true, timeout: 30000 });
  assert.deepEqual(pageErrors, []);
});

test('Evaluate a folder of images uploaded from the dialog: labels from its folders, its images shown', async () => {
  const dir = join(work, 'pick');
  writeColourFolders(join(dir, 'mine'), { blue: COLOURS.blue, green: COLOURS.green, unsorted: COLOURS.green }, 2);
  await serverAnswers(); // the last test's results.csv did not take the server down
  await page.goto(`${server.url}/models/${modelId}`);
  await page.locator('[data-action="evaluate"]').click();
  const dlg = page.locator('dialog[aria-label="Evaluate"]');
  await dlg.waitFor();
  await dlg.locator('select').nth(1).selectOption('folder');
  await dlg.locator('input[webkitdirectory]').setInputFiles(join(dir, 'mine'));
  const evalId = await evaluateConfirmed(dlg);
  const m = (await server.api('GET', `/api/v1/evaluations/${evalId}`)).body.evaluation.metrics;
  assert.deepEqual([m.count, m.labelled, m.errors], [6, 4, 0], 'unsorted/ is no class of the model');
  assert.equal(m.source.upload, 'folder.tar');
  await page.locator('.eval-top .eval-thumb img').first().waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll('.eval-top img')].every((i) => i.complete && i.naturalWidth === 8));
  const src = await page.locator('.eval-top .eval-thumb img').first().getAttribute('src');
  assert.match(src, new RegExp(`^/api/v1/evaluations/${evalId}/images/\\d+$`));
  assert.deepEqual(pageErrors, []);
});

test('a 1,000-class confusion matrix: only the cells in view are built, the names held as it scrolls', async () => {
  // 1,000 classes of two 4×4 squares each (one to train, one to validate)
  const colours = {};
  for (let k = 0; k < 1000; k++) colours[`class${String(k).padStart(4, '0')}`] = [k % 10 * 25, Math.floor(k / 10) % 10 * 25, Math.floor(k / 100) * 25];
  writeColourFolders(join(work, 'many'), colours, 2, 4);
  await serverAnswers();
  const manyDs = await folderDataset(server, join(work, 'many'),
    { name: 'many', options: { width: 4, height: 4, val_pct: 50 }, timeout: 120000 });
  const wide = await trainModel(server, manyDs, { name: 'wide', epochs: 1, timeout: 120000 });
  const e = await server.api('POST', '/api/v1/evaluations', { model: wide, source: { dataset: manyDs }, top_n: 2 });
  assert.equal(e.status, 202, JSON.stringify(e.body));
  assert.equal((await waitState(server, e.body.job.id, ['done', 'error'], 120000)).state, 'done');

  await page.goto(`${server.url}/jobs/${e.body.job.id}`);
  await page.locator('.eval-vm-cell').first().waitFor();
  const built = await page.locator('.eval-vm-cell').count();
  assert.ok(built > 20 && built < 3000, `${built} cells built of a million`);
  assert.equal(await page.locator('.eval-vm-row').first().textContent(), 'class0000');
  assert.equal(await page.locator('.eval-vm-top .eval-vm-head').first().textContent(), 'class0000');
  // to the far corner: the last class's row and column are built, and their names held in view
  await page.locator('.eval-vm-body').evaluate((b) => { b.scrollTop = b.scrollHeight; b.scrollLeft = b.scrollWidth; });
  await page.waitForFunction(() => [...document.querySelectorAll('.eval-vm-row')].some((r) => r.textContent === 'class0999'));
  await page.waitForFunction(() => [...document.querySelectorAll('.eval-vm-top .eval-vm-head')].some((r) => r.textContent === 'class0999'));
  const seen = await page.evaluate(() => {
    const body = document.querySelector('.eval-vm-body').getBoundingClientRect();
    const row = [...document.querySelectorAll('.eval-vm-row')].find((r) => r.textContent === 'class0999').getBoundingClientRect();
    const col = [...document.querySelectorAll('.eval-vm-top .eval-vm-head')].find((r) => r.textContent === 'class0999').getBoundingClientRect();
    return { rowIn: row.top >= body.top - 1 && row.bottom <= body.bottom + 1, colIn: col.left >= body.left - 1 && col.right <= body.right + 1 };
  });
  assert.deepEqual(seen, { rowIn: true, colIn: true });
  assert.ok(await page.locator('.eval-vm-cell').count() < 3000);
  await page.locator('.eval-confusion').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS, 'eval-2-thousand.png'), timeout: 30000 });
  assert.deepEqual(pageErrors, []);
});
