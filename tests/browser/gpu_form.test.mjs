// gpu_form.test.mjs — several GPUs in the new-model form (issue 7), in Chromium
// against a server that pretends to have two (DEEPDESK_FAKE_GPUS=2) and whose
// workers load a stand-in CUDA plugin (built here with cc) that waits a few
// seconds and answers "no GPU":
//   - the Device choices are CPU, Reference, GPU 0, GPU 1 and "All 2 GPUs"; picking
//     the last says the batch size is per GPU and halves the LR preview's steps per
//     epoch, picking one GPU takes both back;
//   - cloning a job that asked for "gpus": 2 restores "All 2 GPUs", one that asked
//     for [1, 0] gets a choice of its own, and creating the clone sends gpus [0, 1];
//   - the model page of a running two-GPU job lists both GPUs it holds.
//
//   make all && node --test --test-concurrency=1 tests/browser/gpu_form.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { waitState, waitFor } from '../lib/server.mjs';
import { standInPlugin, startFakeGpuServer } from '../lib/gpu.mjs';
import { writeColourFolders, folderDataset, TINY_NET } from '../api/helpers.mjs';

let server, browser, page, errors = [], work, dsId;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'deepdesk-gpuform-'));
  writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [20, 40, 210] }, 8);
  server = await startFakeGpuServer({ gpus: 2, plugin: standInPlugin(work, 6000), args: ['--data-root', work, '--cpu-slots', '4'] });
  dsId = await folderDataset(server, join(work, 'colours'));
  ({ browser, page, errors } = await openPage({ timeout: 60000 }));
});
after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  if (work) rmSync(work, { recursive: true, force: true });
});

const radio = (v) => page.locator(`input[name="backend"][value="${v}"]`);
const hint = () => page.locator('#hint-f-batch_size').textContent();
const model = async (name, gpus) => {
  const r = await server.api('POST', '/api/v1/models',
    { name, dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1, backend: 'cuda', gpus });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.job.id;
};
const settle = async (id) => {
  const j = await waitState(server, id, ['done', 'error'], 60000);
  assert.equal(j.state, 'error');
  assert.match(j.error, /stand-in plugin: no GPU answers/);
};

test('the form offers each GPU and all of them; all of them makes the batch size per GPU', async () => {
  await page.goto(`${server.url}/models/new?dataset=${dsId}`);
  await radio('cuda:0,1').waitFor({ state: 'attached' });
  const choices = await page.locator('input[name="backend"]').evaluateAll((l) => l.map((i) => i.value));
  assert.deepEqual(choices, ['cpu', 'ref', 'cuda:0', 'cuda:1', 'cuda:0,1']);
  assert.match(await page.locator(`label[for="${await radio('cuda:0,1').getAttribute('id')}"]`).textContent(), /All 2 GPUs/);
  assert.doesNotMatch(await hint(), /per GPU/i);
  // the LR preview counts an epoch's steps: with both GPUs a step takes twice the images
  const ds = (await server.api('GET', `/api/v1/datasets/${dsId}`)).body;
  const train = (ds.dataset || ds).summary.splits.train.images;
  assert.ok(train >= 8, JSON.stringify(ds).slice(0, 300));
  const preview = (want) => page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/api/v1/lr-preview') &&
    JSON.parse(r.postData() || '{}').iterations_per_epoch === want);
  let seen = preview(Math.ceil(train / 2));
  await page.locator('#f-batch_size').fill('2');
  await seen;
  seen = preview(Math.ceil(train / 4));
  await page.locator(`label[for="${await radio('cuda:0,1').getAttribute('id')}"]`).click();
  await seen;
  assert.equal(await radio('cuda:0,1').isChecked(), true);
  assert.match(await hint(), /^Per GPU: each step trains 2 × this many images/);
  seen = preview(Math.ceil(train / 2));
  await page.locator(`label[for="${await radio('cuda:1').getAttribute('id')}"]`).click();
  await seen;
  assert.doesNotMatch(await hint(), /per GPU/i);
  assert.deepEqual(errors, []);
});

test('a clone restores several GPUs; the form sends them; the model page lists both', async () => {
  // a list that is not "all" in order gets a choice of its own
  const odd = await model('odd', [1, 0]);
  await page.goto(`${server.url}/models/new?from=${odd}`);
  await radio('cuda:1,0').waitFor({ state: 'attached' });
  assert.equal(await radio('cuda:1,0').isChecked(), true);
  assert.match(await hint(), /^Per GPU: each step trains 2 ×/);
  await settle(odd);

  const first = await model('first', 2);
  await page.goto(`${server.url}/models/new?from=${first}`);
  await page.waitForFunction(() => document.querySelector('input[name="backend"][value="cuda:0,1"]')?.checked === true);
  assert.match(await hint(), /^Per GPU: each step trains 2 ×/);
  await settle(first);
  await page.locator('#f-name').fill('clone on two GPUs');
  const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/api/v1/models'));
  await page.locator('[data-action="create-model"]').click();
  const body = JSON.parse((await posted).postData());
  assert.equal(body.backend, 'cuda');
  assert.deepEqual(body.gpus, [0, 1]);
  await page.waitForURL(/\/models\/\d+$/);
  const id = Number(/\/models\/(\d+)$/.exec(page.url())[1]);
  assert.ok(id > first);
  await waitState(server, id, ['running'], 30000);
  // the hardware card lists both GPUs the run holds
  const gpus = page.locator('.hw-card [data-hw="gpus"] > div');
  await waitFor(async () => (await gpus.count()) === 2, 60000, 'two GPUs on the model page');
  assert.deepEqual(await gpus.allTextContents(), ['GPU 0 · simulated GPU 0', 'GPU 1 · simulated GPU 1']);
  const jj = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(id), 'job.json'), 'utf8'));
  assert.deepEqual(jj.resources.gpus, [0, 1]);
  await settle(id);
  assert.deepEqual(errors, []);
});
