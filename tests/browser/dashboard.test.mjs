// dashboard.test.mjs — classes in a real Chromium against a server with accounts
// on (issue 8): a learner logs in, cannot see another learner's model, starts a
// model from a lab preset whose locked field is disabled and hidden field absent;
// the instructor finds the class through the header's "Classes" link and sees
// both learners' runs on the dashboard, updating live, each a link to its model.
//
//   make all && node --test tests/browser/dashboard.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer } from '../lib/server.mjs';
import { makeAccounts, userClient, PASSWORD } from '../lib/auth.mjs';
import { writeColourFolders, TINY_NET, TEST_TMP, waitState } from '../api/helpers.mjs';

let server, acc, work, browser;
let ivy, ann, ben, classId, annModel, benModel, presetId, bigId, liveModel;
const XSS = '<img src=x onerror="window.pwned=1">';

before(async () => {
  acc = makeAccounts({ ivy: 'instructor', ann: 'learner', ben: 'learner' });
  work = mkdtempSync(join(TEST_TMP, 'deepdesk-dash-'));
  writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [20, 40, 210] }, 8);
  writeColourFolders(join(work, 'big'), { red: [200, 30, 30], blue: [20, 40, 210] }, 300);
  server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--data-root', work, '--cpu-slots', '2'] });
  [ivy, ann, ben] = await Promise.all(['ivy', 'ann', 'ben'].map((n) => userClient(server, n)));
  classId = (await ivy('POST', '/api/v1/classes', { name: `Lab ${XSS}` })).body.class.id;
  assert.equal((await ivy('POST', `/api/v1/classes/${classId}/roster`, { csv: 'ann\nben\n' })).status, 201);
  const ds = await ivy('POST', '/api/v1/datasets', {
    name: 'colours', source: { type: 'folder', train: join(work, 'colours') },
    options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
  });
  assert.equal((await waitState({ api: (m, p) => ivy(m, p) }, ds.body.job.id, ['done', 'error'], 60000)).state, 'done');
  const p = await ivy('POST', `/api/v1/classes/${classId}/presets`, {
    name: 'Lab 1', settings: { dataset: ds.body.job.id, network: { prototxt: TINY_NET }, epochs: 1, solver: { base_lr: 0.02 } },
    locked: ['network', 'epochs'], hidden: ['solver.base_lr'],
  });
  assert.equal(p.status, 201, JSON.stringify(p.body));
  presetId = p.body.preset.id;
  const am = await ann('POST', '/api/v1/models', { preset: presetId, name: `ann-model ${XSS}` });
  assert.equal(am.status, 202, JSON.stringify(am.body));
  annModel = am.body.job.id;
  await waitState({ api: (m, q) => ann(m, q) }, annModel, ['done', 'error'], 60000);
  const bm = await ben('POST', '/api/v1/models', { name: 'ben-model', dataset: ds.body.job.id, network: { prototxt: TINY_NET }, epochs: 2 });
  assert.equal(bm.status, 202, JSON.stringify(bm.body));
  benModel = bm.body.job.id;
  await waitState({ api: (m, q) => ben(m, q) }, benModel, ['done', 'error'], 60000);
  // for the live test, a dataset on which a run goes on for long (at batch 1)
  const big = await ivy('POST', '/api/v1/datasets', {
    name: 'big', source: { type: 'folder', train: join(work, 'big') },
    options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
  });
  assert.equal((await waitState({ api: (m, q) => ivy(m, q) }, big.body.job.id, ['done', 'error'], 60000)).state, 'done');
  assert.equal((await ivy('POST', `/api/v1/classes/${classId}/datasets`, { dataset: big.body.job.id })).status, 200);
  bigId = big.body.job.id;
});

after(async () => {
  if (browser) await browser.close();
  if (ben && liveModel) await ben('POST', `/api/v1/jobs/${liveModel}/abort`).catch(() => {});
  if (server) await server.stop();
  if (acc) rmSync(acc.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  if (work) rmSync(work, { recursive: true, force: true });
});

async function logIn(page, name) {
  await page.waitForSelector('#login-name');
  await page.fill('#login-name', name);
  await page.fill('#login-password', PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForSelector('#user-box');
}

test('a learner cannot see another learner\'s model, and starts one from a lab preset', async () => {
  const o = await openPage();
  browser = o.browser;
  const { page, errors } = o;
  await page.goto(`${server.url}/models`);
  await logIn(page, 'ann');
  assert.equal(await page.$('#nav-classes'), null, 'no Classes link for a learner');
  await page.waitForFunction(() => document.body.textContent.includes('ann-model'));
  assert.ok(!(await page.textContent('main')).includes('ben-model'), 'ben\'s model is not listed');
  // ben's model by its address: as missing as a model that does not exist
  await page.goto(`${server.url}/models/${benModel}`);
  await page.waitForFunction(() => /does not exist|not found/i.test(document.querySelector('main').textContent));
  assert.ok(!(await page.textContent('main')).includes('ben-model'));

  await page.goto(`${server.url}/models/new?preset=${presetId}`);
  await page.waitForSelector('.preset-card:not([hidden])');
  assert.equal(await page.isDisabled('#preset-epochs'), true, 'a locked field is disabled');
  assert.equal(await page.$('#preset-solver-base_lr'), null, 'a hidden field is absent');
  assert.equal(await page.isDisabled('#preset-batch_size'), false);
  assert.equal(await page.isVisible('form.newmodel'), false, 'the full form steps aside');
  await page.fill('#preset-batch_size', '4');
  await page.fill('#preset-name', 'from the page');
  await page.click('[data-action=create-from-preset]');
  await page.waitForURL(/\/models\/\d+$/);
  const id = Number(new URL(page.url()).pathname.split('/').pop());
  const job = (await ann('GET', `/api/v1/jobs/${id}`)).body.job;
  assert.equal(job.name, 'from the page');
  assert.equal(job.params.batch_size, 4);
  assert.equal(job.params.epochs, 1);
  // the preset hides base_lr: the learner's own job does not show it, the class's instructor's view does
  assert.equal(job.params.solver?.base_lr, undefined, 'a hidden value is not shown to the learner');
  assert.equal((await ivy('GET', `/api/v1/jobs/${id}`)).body.job.params.solver.base_lr, 0.02);
  await waitState({ api: (m, q) => ann(m, q) }, id, ['done', 'error'], 60000);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.deepEqual(errors, []);
  await browser.close();
  browser = null;
});

test('the instructor sees both learners\' runs on the dashboard, live, each a link to its model', async () => {
  const o = await openPage();
  browser = o.browser;
  const { page, errors } = o;
  await page.goto(`${server.url}/`);
  await logIn(page, 'ivy');
  await page.click('#nav-classes');
  await page.waitForSelector(`tr[data-class="${classId}"] a`);
  assert.equal((await page.textContent(`tr[data-class="${classId}"] a`)).trim(), `Lab ${XSS}`, 'the class name is text');
  await page.click(`tr[data-class="${classId}"] a`);
  await page.waitForSelector(`tr[data-run="${benModel}"]`);
  await page.waitForSelector(`tr[data-run="${annModel}"]`);
  const users = await page.$$eval('.dash-table tbody tr', (rows) => rows.map((r) => r.dataset.user));
  assert.ok(users.includes('ann') && users.includes('ben'), JSON.stringify(users));
  assert.equal((await page.textContent(`tr[data-run="${annModel}"] a`)).trim(), `ann-model ${XSS}`);
  assert.equal(await page.getAttribute(`tr[data-run="${annModel}"] a`, 'href'), `/models/${annModel}`);
  assert.match(await page.textContent(`tr[data-run="${annModel}"] .dash-acc`), /^\d+(\.\d+)?%$/, 'best val accuracy');
  assert.equal(await page.getAttribute(`tr[data-run="${benModel}"] .badge`, 'data-state'), 'done');
  // live: a new run of ben's appears without a reload, and follows its state when it is aborted
  const lm = await ben('POST', '/api/v1/models', { name: 'ben-live', dataset: bigId, network: { prototxt: TINY_NET }, epochs: 10000, batch_size: 1 });
  assert.equal(lm.status, 202, JSON.stringify(lm.body));
  liveModel = lm.body.job.id;
  await page.waitForSelector(`tr[data-run="${liveModel}"][data-user="ben"]`, { timeout: 30000 });
  assert.equal((await ivy('POST', `/api/v1/jobs/${liveModel}/abort`)).status, 202);
  await page.waitForSelector(`tr[data-run="${liveModel}"] .badge[data-state="aborted"]`, { timeout: 30000 });
  // the learner's chart one click away
  await page.click(`tr[data-run="${annModel}"] a`);
  await page.waitForURL(new RegExp(`/models/${annModel}$`));
  await page.waitForSelector('canvas');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.deepEqual(errors, []);
});
