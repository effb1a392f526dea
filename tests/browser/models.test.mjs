// models.test.mjs — DIGITS' getting-started tutorial, walked in a real Chromium against a
// real server (the test build, with the UI embedded: run `make all` first):
//
//   1. create the Fashion-MNIST example dataset from the new-dataset form;
//   2. open New model, pick LeNet, set a short training, check the network, create it;
//   3. watch the curves receive points live, reload mid-training and find them all again;
//   4. abort, resume, and check the curve goes on past where it stopped;
//   5. see the model's accuracy and loss sparkline on the home page.
//
//   cd /work/main && make all && node --test --test-concurrency=1 tests/browser/models.test.mjs
//
// To stay near a minute on two cores the dataset keeps 80 images per class (the form's
// "Max images per class"), and LeNet trains 6 epochs of 40 iterations at batch 16 with the cpu backend.
// Screenshots of each page are written to tests/artifacts/ (not committed).
//
// Where the server has the network routes (GET /api/v1/networks, POST /networks/check and
// /networks/visualize), the test also checks that LeNet validates with its layer table,
// that an error in custom prototxt lands in the editor's gutter, and that Visualize draws.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, waitFor, BIN, ROOT } from '../lib/server.mjs';

const ARTIFACTS = join(ROOT, 'tests', 'artifacts');
const XSS = 'LeNet <img src=x onerror="window.__xss=1">';

let server, browser, page;
let pageErrors = [];
let datasetId = null, modelId = null, networksRoutes = false;

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startServer(); // no --ui-dir: the UI built into the binary
  ({ browser, page, errors: pageErrors } = await openPage({ width: 1360, height: 900, timeout: 60000 }));
  networksRoutes = (await server.api('GET', '/api/v1/networks')).status === 200;
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
});

async function shot(name) {
  // A full-page shot of a scrolled page repeats the sticky bars, and toasts float mid-page.
  await page.evaluate(() => { window.scrollTo(0, 0); document.getElementById('toasts').replaceChildren(); });
  await page.screenshot({ path: join(ARTIFACTS, `models-${name}.png`), fullPage: true, timeout: 30000 });
}
const attr = (sel, name) => page.locator(sel).getAttribute(name);

test('1. the Fashion-MNIST example dataset, from the form', async () => {
  await page.goto(`${server.url}/datasets/new`);
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.locator('label[for="src-example"]').click();
  assert.equal(await page.locator('#f-name').inputValue(), 'Fashion-MNIST');
  assert.equal(await page.locator('#f-width').inputValue(), '28');
  // A small one: 80 images per class, a fifth of them to validate.
  await page.locator('#f-max_per_class').fill('80');
  await page.locator('#f-val_pct').fill('20');
  await page.getByRole('button', { name: 'Create dataset' }).click();
  await page.waitForURL(/\/datasets\/\d+$/);
  datasetId = Number(new URL(page.url()).pathname.split('/').pop());
  const job = await waitState(server, datasetId, ['done', 'error'], 90000);
  assert.equal(job.state, 'done', job.error);
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'done');
  await page.locator('.tile[data-tile="train"]').waitFor();
  await shot('1-dataset');
});

test('2. New model: LeNet on it, a short training, checked before it is queued', async () => {
  await page.goto(`${server.url}/models`);
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.locator('[data-action="new-model"]').click();
  await page.waitForURL('**/models/new');
  await page.getByRole('heading', { level: 1, name: 'New model' }).waitFor();

  // The dataset is chosen, its summary beside it.
  await page.locator(`#f-dataset option[value="${datasetId}"]`).waitFor({ state: 'attached' });
  assert.equal(await page.locator('#f-dataset').inputValue(), String(datasetId));
  assert.match(await page.locator('[data-fact="shape"]').textContent(), /28×28, 1 channel/);
  assert.equal(await page.locator('[data-fact="classes"]').textContent(), '10');

  // LeNet, 6 short epochs at batch 16 on the cpu backend.
  await page.locator('label[for="f-std-lenet"]').click();
  await page.locator('#f-epochs').fill('6');
  await page.locator('#f-batch_size').fill('16');
  assert.equal(await page.locator('#f-solver-base_lr').inputValue(), '0.01');
  assert.equal(await page.locator('#f-solver-lr_policy-policy').inputValue(), 'step');

  // The LR preview follows the policy: steps down from 0.01 by gamma 0.1.
  await page.locator('.lr-chart canvas[data-ready]').waitFor();
  await page.locator('.lr-note').filter({ hasText: /^Step down: from 0\.01 to / }).waitFor();

  if (networksRoutes) {
    // Checked against the dataset: each layer's output shape and the parameter count.
    await page.locator('.net-check[data-state="valid"]').waitFor();
    const params = Number(await attr('.net-check [data-params]', 'data-params'));
    assert.ok(params > 1000, `LeNet has ${params} parameters`);
    assert.ok(await page.locator('.layers-table tbody tr[data-layer]').count() >= 4);
    // and what training it will take (networks/memory.c's estimate)
    await page.locator('.net-check .check-memory').filter({ hasText: /^ · about \d+ MiB at batch 16$/ }).waitFor();

    // Customize: the text goes into the editor; a typo is marked at its line in the gutter.
    await page.locator('[data-action="customize"]').click();
    await page.locator('.CodeMirror').waitFor();
    await page.evaluate(() => {
      const cm = document.querySelector('.CodeMirror').CodeMirror;
      cm.replaceRange('bogus_field: 1\n', { line: 1, ch: 0 });
    });
    await page.locator('.net-check[data-state="invalid"]').waitFor();
    await page.locator('.CodeMirror .cm-err-marker').waitFor();
    assert.match(await page.locator('.net-check').textContent(), /line 2/);
    assert.ok(await page.locator('[data-action="create-model"]').isEnabled());
    await page.locator('#f-name').fill('must not be queued');
    await page.locator('[data-action="create-model"]').click();
    await page.locator('[data-field="network.prototxt"] .field-error:not([hidden])').waitFor();
    assert.equal((await server.api('GET', '/api/v1/models')).body.total, 0, 'nothing was queued');
    await shot('2-editor-error');

    // Visualize draws the graph as an image.
    await page.evaluate(() => { document.querySelector('.CodeMirror').CodeMirror.undo(); });
    await page.locator('.net-check[data-state="valid"]').waitFor();
    await page.locator('[data-action="visualize"]').click();
    await page.waitForFunction(() => { const i = document.querySelector('.graph-img'); return i && i.complete && i.naturalWidth > 0; });
    await page.keyboard.press('Escape');
    await page.locator('label[for="f-net-standard"]').click();
    await page.locator('.net-check[data-state="valid"]').waitFor();
  }

  // A field error is named, inline, and nothing is queued.
  await page.locator('#f-solver-base_lr').fill('fast');
  await page.locator('#f-name').fill('LeNet on Fashion-MNIST');
  await page.locator('[data-action="create-model"]').click();
  await page.locator('[data-field="solver.base_lr"] .field-error:not([hidden])').filter({ hasText: /“fast” is not a number/ }).waitFor();
  assert.equal(await attr('#f-solver-base_lr', 'aria-invalid'), 'true');
  assert.equal((await server.api('GET', '/api/v1/models')).body.total, 0, 'nothing was queued');
  await page.locator('#f-solver-base_lr').fill('0.01');
  await shot('2-new-model');

  // A name that is markup stays text.
  await page.locator('#f-name').fill(XSS);
  await page.locator('[data-action="create-model"]').click();
  await page.waitForURL(/\/models\/\d+$/);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'creating reloaded the page');
  modelId = Number(new URL(page.url()).pathname.split('/').pop());
  const m = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
  assert.deepEqual(m.params.network, { standard: 'lenet' });
  assert.equal(m.params.epochs, 6);
  assert.equal(m.params.batch_size, 16);
  assert.equal(m.params.dataset, datasetId);
  // The name is text, never markup.
  await page.locator('.job-name-text').filter({ hasText: XSS }).waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  // (renamed for the screenshots; the page follows the change live)
  assert.equal((await server.api('PATCH', `/api/v1/jobs/${modelId}`, { name: 'LeNet on Fashion-MNIST' })).status, 200);
  await page.locator('.job-name-text').filter({ hasText: /^LeNet on Fashion-MNIST$/ }).waitFor();
});

test('3. the curves follow live, and survive a reload mid-training', async () => {
  const trainPoints = async () => Number(await attr('canvas[data-train-points]', 'data-train-points'));
  await page.locator('canvas[data-train-points]').waitFor();
  await waitFor(async () => (await trainPoints()) >= 3, 30000, 'three training reports on the chart');
  // Progress with epoch, images/s and ETA shows once a timed report came.
  await page.locator('.model-progress:not([hidden]) .tile[data-tile="speed"] .tile-value').filter({ hasText: /\d/ }).waitFor();
  // The hardware panel: the worker's CPU and memory, polled while it runs.
  await page.locator('.hw-card:not([hidden]) [data-hw="rss"]').filter({ hasText: /\d/ }).waitFor();
  const before = await trainPoints();
  await page.reload();
  await page.locator('canvas[data-train-points]').waitFor();
  await waitFor(async () => (await trainPoints()) >= before, 60000, `at least the ${before} points seen before the reload`);
  const grew = await trainPoints();
  await waitFor(async () => (await trainPoints()) > grew, 30000, 'a new point after the reload (live again)');
  await shot('3-training');
});

let abortIteration = 0;
test('4. abort, resume, and the curve goes on', async () => {
  // Abort now, early in the training: the worker writes a snapshot where it stopped.
  await page.getByRole('button', { name: 'Abort' }).click();
  const aborted = await waitState(server, modelId, ['aborted', 'done', 'error'], 30000);
  assert.equal(aborted.state, 'aborted', `the model ended ${aborted.state} before the abort: ${aborted.error}`);
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'aborted');
  abortIteration = Number(await attr('canvas[data-last-iteration]', 'data-last-iteration'));
  assert.ok(abortIteration > 0);
  await page.locator('.snaps-table tbody tr[data-epoch]').first().waitFor();
  await shot('4-aborted');

  // Resume to the 6 epochs it was set to (extend by 0).
  await page.locator('[data-action="resume"]:not([hidden])').click();
  await page.locator('dialog #m' + modelId + '-extend').fill('0');
  await page.locator('[data-action="resume-confirm"]').click();
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent !== 'aborted');
  const done = await waitState(server, modelId, ['done', 'error', 'aborted'], 60000);
  assert.equal(done.state, 'done', done.error);
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'done');
  await waitFor(async () => Number(await attr('canvas[data-last-iteration]', 'data-last-iteration')) > abortIteration, 10000,
    `iterations after the abort point (${abortIteration})`);
  // The val accuracy at epoch 6 is in the snapshots' table, and the best is marked.
  await page.locator('.snaps-table tr[data-epoch="6"]').waitFor();
  await page.locator('.snaps-table .best-tag').waitFor();
  await shot('4-done');

  // Every stored point is in the CSV, the aborted run's too.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-action="csv"]').click()]);
  const csv = readFileSync(await dl.path(), 'utf8').trim().split('\n');
  assert.equal(csv[0], 'kind,iteration,epoch,t,lr,loss,accuracy,accuracy_top5,images_per_s,eta_s');
  const events = [];
  for (let after = 0; ;) {
    const r = (await server.api('GET', `/api/v1/jobs/${modelId}/events?after=${after}&limit=2000`)).body;
    events.push(...r.events);
    if (!r.more || !r.events.length) break;
    after = r.last;
  }
  assert.equal(csv.length - 1, events.filter((e) => e.type === 'metric').length);

  // Drag across the chart: it zooms; Reset puts it back.
  const box = await page.locator('[data-chart="loss"]').boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.5);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.5, { steps: 4 });
  await page.mouse.up();
  await page.locator('[data-action="reset-zoom"]:enabled').click();
  await page.locator('[data-action="reset-zoom"]:disabled').waitFor();
});

test('5. the home page shows the accuracy and a loss sparkline; no script errors', async () => {
  await page.goto(`${server.url}/models`);
  const row = page.locator(`tr[data-id="${modelId}"]`);
  await row.locator('.model-stats:not([hidden]) .model-acc').filter({ hasText: /val \d+\.\d%/ }).waitFor();
  await row.locator('.model-spark polyline').waitFor();
  assert.equal(await row.locator('.job-link').getAttribute('href'), `/models/${modelId}`);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await shot('5-home');
  assert.deepEqual(pageErrors, []);
});
