// charts.test.mjs — the chart tools of a model page, in a real Chromium against a real
// server (the test build, UI embedded: run `make all` first), on two tiny models
// trained through the API:
//
//   log scale turns the loss axis logarithmic; the smoothing slider changes the plotted
//   train loss (and 0 gives the stored values back); "Compare with…" adds the other
//   model's curves as extra series; the CSV download holds every stored metric point
//   (checked against /api/v1/jobs/{id}/events); the best-validation marker sits at the
//   best validation's epoch; the snapshot list's "Keep last" asks with what it frees,
//   then deletes; and the new-model form sends a sweep (comma lists) as one request.
//
//   node --test --test-concurrency=1 tests/browser/charts.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, BIN } from '../lib/server.mjs';
import { writeColourFolders, folderDataset, TINY_NET } from '../api/helpers.mjs';

const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };
const FIELDS = ['kind', 'iteration', 'epoch', 't', 'lr', 'loss', 'accuracy', 'accuracy_top5', 'images_per_s', 'eta_s'];

let server, browser, page, work;
let pageErrors = [];
let modelId, otherId;

async function train(name, extra = {}) {
  const r = await server.api('POST', '/api/v1/models', {
    name, dataset: extra.dataset, network: { prototxt: TINY_NET }, epochs: 4, batch_size: 2, solver: { base_lr: 0.05 }, ...extra,
  });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  const end = await waitState(server, r.body.job.id, ['done', 'error', 'aborted'], 120000);
  assert.equal(end.state, 'done', end.error);
  return r.body.job.id;
}

async function metricEvents(id) {
  const out = [];
  let after = 0;
  for (;;) {
    const r = await server.api('GET', `/api/v1/jobs/${id}/events?after=${after}&limit=5000`);
    assert.equal(r.status, 200);
    out.push(...r.body.events);
    after = r.body.last;
    if (!r.body.more) break;
  }
  return out.filter((e) => e.type === 'metric' && (e.kind === 'train' || e.kind === 'val'));
}

/** What the loss chart draws, read from its Chart.js instance in the page: the y axis
 *  type, the marker, and each series' y values by key. */
function lossChart() {
  return page.evaluate(async () => {
    const { Chart } = await import('/vendor/chart.js/chart.mjs');
    const ch = Chart.getChart(document.querySelector('[data-chart="loss"] canvas'));
    return {
      yType: ch.scales.y.type, optType: ch.options.scales.y.type, marker: ch.options.plugins.ddMarker,
      sets: Object.fromEntries(ch.data.datasets.map((d) => [d.key, d.data.map((p) => p.y)])),
    };
  });
}
async function until(what, fn, timeout = 15000) {
  const end = Date.now() + timeout;
  for (;;) {
    const c = await lossChart();
    if (fn(c)) return c;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(c).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const slide = (v) => page.locator(`#m${modelId}-smooth`).evaluate((el, x) => {
  el.value = x;
  el.dispatchEvent(new Event('input', { bubbles: true }));
}, String(v));

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  work = mkdtempSync(join(tmpdir(), 'deepdesk-charts-'));
  writeColourFolders(join(work, 'colours'), COLOURS, 16);
  server = await startServer({ args: ['--data-root', work] });
  const dsId = await folderDataset(server, join(work, 'colours'));
  modelId = await train('charted', { dataset: dsId });
  otherId = await train('other', { dataset: dsId, solver: { base_lr: 0.01 } });
  ({ browser, page, errors: pageErrors } = await openPage({ width: 1360, height: 900, timeout: 60000 }));
  await page.goto(`${server.url}/models/${modelId}`);
  await page.locator('[data-chart="loss"] canvas[data-ready="1"]').waitFor();
  const n = (await metricEvents(modelId)).filter((e) => e.kind === 'train').length;
  await page.locator(`[data-chart="loss"] canvas[data-train-points="${n}"]`).waitFor();
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  if (work) rmSync(work, { recursive: true, force: true });
});

test('log scale turns the loss axis logarithmic, and back', async () => {
  assert.equal((await lossChart()).yType, 'linear');
  await page.getByLabel('Log scale').check();
  await until('a log axis', (c) => c.yType === 'logarithmic' && c.optType === 'logarithmic');
  await page.getByLabel('Log scale').uncheck();
  await until('a linear axis', (c) => c.yType === 'linear');
});

test('the smoothing slider changes the plotted values; 0 plots the stored losses', async () => {
  const stored = (await metricEvents(modelId)).filter((e) => e.kind === 'train').map((e) => e.loss);
  const raw = (await lossChart()).sets['train-loss'];
  assert.deepEqual(raw, stored, 'unsmoothed, the plot is the stored losses');
  await slide(0.9);
  const smooth = (await until('smoothed values', (c) => c.sets['train-loss'].some((y, i) => Math.abs(y - raw[i]) > 1e-9))).sets['train-loss'];
  assert.equal(smooth.length, raw.length);
  assert.ok(Math.abs(smooth[0] - raw[0]) < 1e-9, 'the debiased average starts at the first value');
  // an average never leaves the range of the values so far
  for (let i = 0; i < raw.length; i++) {
    const seen = raw.slice(0, i + 1);
    assert.ok(smooth[i] >= Math.min(...seen) - 1e-9 && smooth[i] <= Math.max(...seen) + 1e-9, `point ${i}`);
  }
  assert.equal(await page.locator('.smooth-val').textContent(), '0.90');
  await slide(0);
  await until('the stored values again', (c) => c.sets['train-loss'].every((y, i) => y === raw[i]));
});

test('the best-validation marker sits at the best validation\'s epoch', async () => {
  const val = (await metricEvents(modelId)).filter((e) => e.kind === 'val');
  assert.ok(val.length >= 2);
  const best = val.reduce((a, b) => (b.accuracy > a.accuracy ? b : a));
  const { marker } = await lossChart();
  assert.ok(marker, 'a marker');
  assert.equal(marker.x, best.epoch);
  assert.equal(marker.label, `best ${(best.accuracy * 100).toFixed(1)}%`);
  await page.locator(`.snaps-table tr[data-epoch="${best.epoch}"] .best-tag`).waitFor();
});

test('"Compare with…" adds the other model\'s curves as extra series', async () => {
  const before = Object.keys((await lossChart()).sets);
  assert.ok(!before.some((k) => k.startsWith(`c${otherId}-`)));
  const sel = page.locator('.cmp-select');
  await sel.focus();
  await page.locator(`.cmp-select option[value="${otherId}"]`).waitFor({ state: 'attached' });
  await sel.selectOption(String(otherId));
  const other = await metricEvents(otherId);
  const { sets } = await until('the compared series', (c) => (c.sets[`c${otherId}-train`] || []).length === other.filter((e) => e.kind === 'train').length);
  assert.deepEqual(sets[`c${otherId}-train`], other.filter((e) => e.kind === 'train').map((e) => e.loss));
  assert.deepEqual(sets[`c${otherId}-val`], other.filter((e) => e.kind === 'val').map((e) => e.loss));
  assert.ok(sets['train-loss'].length > 0, 'the model\'s own series stay');
  assert.equal(Object.keys(sets).length, before.length + 3, 'train loss, val loss and val accuracy of the other model');
  await page.locator(`.cmp-chip[data-compare="${otherId}"]`).waitFor();
});

test('the CSV download holds every stored metric point', async () => {
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-action="csv"]').click()]);
  assert.equal(dl.suggestedFilename(), `model-${modelId}-metrics.csv`);
  const text = readFileSync(await dl.path(), 'utf8');
  const [head, ...rows] = text.trimEnd().split('\n');
  assert.equal(head, FIELDS.join(','));
  const events = await metricEvents(modelId);
  assert.equal(rows.length, events.length, 'one row per stored point');
  const parsed = rows.map((r) => Object.fromEntries(r.split(',').map((c, i) => [FIELDS[i], c])));
  const key = (o) => `${String(o.kind).replace(/"/g, '')}@${o.iteration}`;
  const byKey = new Map(parsed.map((p) => [key(p), p]));
  for (const e of events) {
    const row = byKey.get(key(e));
    assert.ok(row, `a row for ${key(e)}`);
    for (const f of ['epoch', 'loss', 'lr', 'accuracy']) if (typeof e[f] === 'number') assert.equal(Number(row[f]), e[f], `${f} of ${key(e)}`);
  }
});

test('the snapshot list: "Keep last" says what it frees, then deletes', async () => {
  const m = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
  assert.equal(m.snapshots.length, 4);
  const dry = (await server.api('POST', `/api/v1/models/${modelId}/snapshots/prune`, { keep_last: 2, dry_run: true })).body;
  await page.locator(`#m${modelId}-keep`).fill('2');
  await page.locator('[data-action="keep-last"]').click();
  const dlg = page.locator('dialog[open]');
  await dlg.waitFor();
  assert.equal(Number(await dlg.locator('[data-frees]').getAttribute('data-frees')), dry.freed_bytes);
  assert.match(await dlg.textContent(), /epochs 1, 2/);
  await dlg.getByRole('button', { name: /^Delete and free/ }).click();
  await page.waitForFunction(() => document.querySelectorAll('.snaps-table tbody tr').length === 2);
  const after = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
  assert.deepEqual(after.snapshots.map((s) => s.label), ['3', '4']);
  assert.deepEqual(pageErrors, []);
});

test('the new-model form sends a sweep as one request; the server makes one job per combination, in one group', async () => {
  // cloned from the charted model: its dataset and custom network come along
  await page.goto(`${server.url}/models/new?from=${modelId}`);
  await page.locator('.alert-info').filter({ hasText: 'Cloning' }).waitFor();
  // no GPU listed by /info on this machine's test server: CPU and the reference backend only
  const info = (await server.api('GET', '/api/v1/info')).body;
  const gpus = Array.isArray(info.gpus) ? info.gpus.length : 0;
  assert.equal(await page.locator('input[name="backend"]').count(), 2 + gpus + (gpus >= 2 ? 1 : 0)); // and "All N GPUs"
  await page.locator('#f-solver-base_lr').fill('0.01, 0.02');
  await page.locator('#f-batch_size').fill('2, 4');
  await page.locator('#f-mirror').check();
  await page.locator('#f-name').fill('swept');
  await page.locator('#f-group').fill('');
  await page.locator('[data-action="create-model"] .btn-label', { hasText: 'Create 4 models' }).waitFor();
  const posts = [];
  page.on('request', (q) => { if (q.method() === 'POST' && new URL(q.url()).pathname === '/api/v1/models') posts.push(q.postDataJSON()); });
  await page.locator('[data-action="create-model"]').click();
  await page.waitForURL(/\/models$/);
  assert.equal(posts.length, 1, 'one request');
  assert.deepEqual(posts[0].solver.base_lr, [0.01, 0.02]);
  assert.deepEqual(posts[0].batch_size, [2, 4]);
  assert.equal(posts[0].mirror, true);
  const list = (await server.api('GET', '/api/v1/jobs?kind=model&limit=50')).body.jobs.filter((j) => j.name.startsWith('swept'));
  try {
    assert.deepEqual(list.map((j) => j.name).sort(), ['swept lr=0.01 bs=2', 'swept lr=0.01 bs=4', 'swept lr=0.02 bs=2', 'swept lr=0.02 bs=4']);
    for (const j of list) {
      const d = (await server.api('GET', `/api/v1/jobs/${j.id}`)).body.job;
      assert.equal(d.params.group, 'swept');
      assert.equal(d.params.mirror, true);
    }
  } finally {
    for (const j of list) await server.api('POST', `/api/v1/jobs/${j.id}/abort`);
  }
  assert.deepEqual(pageErrors, []);
});
