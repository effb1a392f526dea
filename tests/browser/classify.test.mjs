// classify.test.mjs — the model page's "Classify an image" card in a real Chromium
// against a real server (the test build, UI embedded: run `make all` first):
//
//   1. a small convolutional model trained through the API on 8×8 colour squares
//      (one class named like markup, which must stay text);
//   2. an image dropped on the card: the top classes as bars and a table whose
//      probabilities are the API's own answer for the same bytes, the image as the
//      network saw it, the time taken;
//   3. "Show inside the network": each blob's tiles, statistics and histogram, the
//      convolution's weights;
//   4. a multi-MB phone photo (tests/lib/photos.mjs: 4032×3024 stored, EXIF
//      Orientation 6) dropped: the API's top 5 for the same bytes, and the server's
//      size for it the one the browser shows (3024×4032);
//   5. errors in words: a file that is not an image, one too big, a model with no
//      snapshot yet.
//
//   node --test --test-concurrency=1 tests/browser/classify.test.mjs
//
// Screenshots go to tests/artifacts/classify-*.png (not committed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, BIN, ROOT } from '../lib/server.mjs';
import { writeColourFolders, folderDataset, trainModel } from '../api/helpers.mjs';
import { png, CONV_NET } from '../api/infer_fixtures.mjs';
import { photos } from '../lib/photos.mjs';

const ARTIFACTS = join(ROOT, 'tests', 'artifacts');
const XSS = '<img src=x onerror=document.body.dataset.xss=1>'; // no '_': folder names' become spaces
const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], [XSS]: [200, 30, 30] };

let server, browser, page, work, modelId, dsId;
let pageErrors = [];

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  mkdirSync(ARTIFACTS, { recursive: true });
  work = mkdtempSync(join(tmpdir(), 'deepdesk-classify-ui-'));
  writeColourFolders(join(work, 'colours'), COLOURS, 12);
  server = await startServer({ args: ['--data-root', work, '--cpu-slots', '1'] });
  ({ browser, page, errors: pageErrors } = await openPage({ width: 1360, height: 900, timeout: 60000 }));
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  if (work) rmSync(work, { recursive: true, force: true });
});

async function shot(name) {
  await page.evaluate(() => { window.scrollTo(0, 0); document.getElementById('toasts')?.replaceChildren(); });
  await page.screenshot({ path: join(ARTIFACTS, `classify-${name}.png`), fullPage: true, timeout: 30000 });
}

/** Drop bytes on the drop zone as a file named name, the way a browser's drag and drop does. */
async function dropFile(name, bytes, type = 'image/png') {
  await page.locator('.classify-card [data-drop]').evaluate((zone, [n, b64, t]) => {
    const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bin], n, { type: t }));
    for (const kind of ['dragenter', 'dragover', 'drop']) zone.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [name, bytes.toString('base64'), type]);
}

test('1. a small convolutional model, trained through the API', async () => {
  dsId = await folderDataset(server, join(work, 'colours'));
  modelId = await trainModel(server, dsId, { name: 'convy', prototxt: CONV_NET, epochs: 3 });
});

test('2. an image dropped: the bars and the table are the API\'s answer, with the image as seen and the time', async () => {
  await page.goto(`${server.url}/models/${modelId}`);
  await page.locator('.classify-card').waitFor();
  // the snapshot choice offers the latest, the best by validation, and every epoch
  await page.locator('.classify-card select option[data-best]').waitFor({ state: 'attached' });
  const options = await page.locator('.classify-card select option').allTextContents();
  assert.match(options[0], /Latest \(epoch 3\)/);
  assert.ok(options.some((o) => /^Epoch 1$/.test(o)), options.join(' | '));

  const img = png(10, 10, COLOURS.green);
  const res = await fetch(`${server.url}/api/v1/models/${modelId}/classify?top=5`, { method: 'POST', body: img });
  const api = await res.json();
  assert.equal(res.status, 200, JSON.stringify(api));

  await dropFile('leaf.png', img);
  await page.locator('.cl-top tbody tr').first().waitFor();
  const rows = await page.locator('.cl-top tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    label: tr.querySelector('.cl-label').textContent, p: Number(tr.querySelector('.cl-prob').dataset.p),
  })));
  assert.deepEqual(rows.map((r) => r.label), api.predictions.map((p) => p.label));
  rows.forEach((r, i) => assert.ok(Math.abs(r.p - api.predictions[i].probability) < 1e-6, `${r.p} vs ${api.predictions[i].probability}`));
  assert.equal(rows[0].label, 'green');
  // the bar chart holds the same numbers, in percent
  const bars = await page.locator('.cl-chart canvas').evaluate(async (c) => {
    const { Chart } = await import('/vendor/chart.js/chart.mjs');
    const ch = Chart.getChart(c);
    return ch && { labels: ch.data.labels, data: ch.data.datasets[0].data, axis: ch.options.indexAxis };
  });
  assert.ok(bars, 'a chart is drawn');
  assert.equal(bars.axis, 'y', 'horizontal bars');
  assert.deepEqual(bars.labels, api.predictions.map((p) => p.label));
  bars.data.forEach((v, i) => assert.ok(Math.abs(v - api.predictions[i].probability * 100) < 1e-4));
  // the image as the network saw it, decoded by the browser, and the time
  await page.waitForFunction(() => [...document.querySelectorAll('.cl-img')].every((i) => i.complete && i.naturalWidth > 0));
  assert.equal(await page.locator('.cl-img').count(), 2);
  assert.match(await page.locator('.cl-images figcaption').nth(1).textContent(), /3×8×8/);
  assert.match(await page.locator('.cl-time').textContent(), /Snapshot 3 · [\d.]+ ms in the server/);
  // a label that looks like markup is text
  assert.equal(await page.evaluate(() => document.body.dataset.xss), undefined);
  assert.equal(await page.locator('.classify-card img:not(.cl-img)').count(), 0);
  assert.ok(rows.some((r) => r.label === XSS), JSON.stringify(rows));
  await shot('1-top5');
});

test('3. inside the network: tiles, statistics and histograms per blob, conv weights', async () => {
  await page.locator('.classify-card label.tool', { hasText: 'Show inside the network' }).click();
  await page.locator('.cl-layer[data-blob="prob"]').waitFor();
  const blobs = await page.locator('.cl-layer').evaluateAll((as) => as.map((a) => a.dataset.blob));
  assert.deepEqual(blobs, ['data', 'conv', 'ip', 'prob']);
  await page.waitForFunction(() => [...document.querySelectorAll('.cl-tiles')].every((i) => i.complete && i.naturalWidth > 0));
  const conv = page.locator('.cl-layer[data-blob="conv"]');
  assert.equal(await conv.locator('img.cl-tiles').count(), 2, 'activations and weights');
  assert.match(await conv.locator('.cl-layer-head').textContent(), /Convolution.*1×4×6×6/);
  assert.match(await conv.locator('.cl-weights').textContent(), /Weights 4×3×3×3/);
  assert.equal(await conv.locator('.cl-stats').first().locator('.cl-bar').count(), 20);
  const kv = await conv.locator('.cl-stats').first().locator('dt').allTextContents();
  assert.deepEqual(kv, ['mean', 'std', 'min', 'max']);
  // the classification did not change with the insides on
  const top = await page.locator('.cl-top tbody tr .cl-label').first().textContent();
  assert.equal(top, 'green');
  await shot('2-insides');
});

test('4. a multi-MB phone photo dropped: the API\'s top 5, and the size the browser shows', async () => {
  const P = photos(1);
  const e = P.manifest.find((x) => x.kind === 'exif6' && x.stored[0] > 4000);
  const bytes = readFileSync(P.path(e.file));
  assert.ok(bytes.length > 2 << 20, `${bytes.length} bytes`);
  const res = await fetch(`${server.url}/api/v1/models/${modelId}/classify?top=5`, { method: 'POST', body: bytes });
  const api = await res.json();
  assert.equal(res.status, 200, JSON.stringify(api));
  assert.deepEqual(api.image, { width: 3024, height: 4032 }, 'EXIF orientation 6: portrait');

  const name = basename(e.file);
  await dropFile(name, bytes, 'image/jpeg');
  await page.waitForFunction((n) => document.querySelector('.cl-images figcaption')?.textContent.includes(n), name, { timeout: 30000 });
  assert.match(await page.locator('.cl-images figcaption').first().textContent(), /3024×4032/);
  const rows = await page.locator('.cl-top tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    label: tr.querySelector('.cl-label').textContent, p: Number(tr.querySelector('.cl-prob').dataset.p),
  })));
  assert.deepEqual(rows.map((r) => r.label), api.predictions.map((p) => p.label));
  rows.forEach((r, i) => assert.ok(Math.abs(r.p - api.predictions[i].probability) < 1e-6, `${r.p} vs ${api.predictions[i].probability}`));
  // the browser turns the photo upright as the server did
  await page.waitForFunction(() => { const i = document.querySelector('.cl-img'); return i && i.complete && i.naturalWidth > 0; });
  const shown = await page.locator('.cl-img').first().evaluate((i) => [i.naturalWidth, i.naturalHeight]);
  assert.deepEqual(shown, [api.image.width, api.image.height]);
  await shot('2b-photo');
});

test('5. errors in words: not an image; a model with no snapshot yet', async () => {
  await dropFile('notes.png', Buffer.from('these are my notes, not a picture'));
  const err = page.locator('.classify-card .cl-error');
  await err.waitFor();
  assert.match(await err.textContent(), /notes\.png/);
  assert.equal(await page.locator('.cl-results').isHidden(), true);
  await shot('3-not-an-image');
  // a header claiming 60000×60000 pixels: refused before decoding, in words
  await page.locator('.classify-card .cl-error').evaluate((e) => { e.textContent = ''; });
  await dropFile('huge.png', png(60000, 60000, [0, 0, 0], { bare: true }));
  await page.waitForFunction(() => /60000/.test(document.querySelector('.classify-card .cl-error').textContent));
  assert.match(await err.textContent(), /huge\.png.*60000/);

  // the one CPU slot held by a test job: a second model waits, with no snapshot
  const blocker = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 2000, step_ms: 50 } });
  assert.equal(blocker.status, 202);
  await waitState(server, blocker.body.job.id, ['running'], 60000);
  const m = await server.api('POST', '/api/v1/models', { name: 'waiting', dataset: dsId, network: { prototxt: CONV_NET }, epochs: 1 });
  assert.equal(m.status, 202);
  await page.goto(`${server.url}/models/${m.body.job.id}`);
  await page.locator('.classify-card').waitFor();
  await dropFile('leaf.png', png(8, 8, COLOURS.green));
  await page.locator('.classify-card .cl-error').waitFor();
  assert.match(await page.locator('.classify-card .cl-error').textContent(), /no snapshot yet/);
  await shot('4-no-snapshot');
  for (const id of [m.body.job.id, blocker.body.job.id]) await server.api('POST', `/api/v1/jobs/${id}/abort`);
  assert.deepEqual(pageErrors, []);
});
