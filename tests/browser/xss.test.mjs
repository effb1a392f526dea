// xss.test.mjs — stored XSS: a dataset and models whose names, notes and group are
// HTML that would run script if a page put it into innerHTML.  Every page that shows
// them (home, the dataset and model lists, the job pages, the model page and its
// "Compare with…" menu) must show the text as text: window.__xss stays undefined, no
// <img src=x> or <script> of ours appears in the document, and the hostile string is
// on the page literally.  Real server, real Chromium (run `make all` first).
//
//   node --test --test-concurrency=1 tests/browser/xss.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, BIN } from '../lib/server.mjs';
import { writeColourFolders, folderDataset, TINY_NET } from '../api/helpers.mjs';

const IMG = '<img src=x onerror=window.__xss=1>';
const SCRIPT = '<script>window.__xss=1</script>';
const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };

let server, browser, page, work;
let pageErrors = [];
let dsId, modelId, otherId;
const dsName = `ds ${IMG}`, modelName = `m ${IMG} ${SCRIPT}`, group = `g ${IMG}`, otherName = `o ${SCRIPT}`;
const notes = `notes ${SCRIPT} ${IMG}`;

async function patchNotes(id, text) {
  const r = await server.api('PATCH', `/api/v1/jobs/${id}`, { notes: text });
  assert.equal(r.status, 200, JSON.stringify(r.body));
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  work = mkdtempSync(join(tmpdir(), 'deepdesk-xss-'));
  writeColourFolders(join(work, 'colours'), COLOURS, 8);
  server = await startServer({ args: ['--data-root', work] });
  dsId = await folderDataset(server, join(work, 'colours'), { name: dsName });
  await patchNotes(dsId, notes);
  const ids = [];
  for (const name of [modelName, otherName]) {
    const m = await server.api('POST', '/api/v1/models', { name, group, dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    ids.push(m.body.job.id);
    await patchNotes(m.body.job.id, notes);
  }
  [modelId, otherId] = ids;
  for (const id of ids) {
    const end = await waitState(server, id, ['done', 'error', 'aborted'], 60000);
    assert.equal(end.state, 'done', end.error);
  }
  ({ browser, page, errors: pageErrors } = await openPage({ width: 1360, height: 900, timeout: 60000 }));
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Nothing ran and nothing of ours was parsed as HTML; each of texts is on the page. */
async function assertInert(where, texts) {
  for (const t of texts) {
    await page.waitForFunction((s) => document.body.innerText.includes(s), t, { timeout: 60000 })
      .catch(() => assert.fail(`${where}: "${t}" is not shown literally`));
  }
  const found = await page.evaluate(() => ({
    xss: window.__xss,
    imgs: document.querySelectorAll('img[src="x"]').length,
    scripts: [...document.scripts].filter((s) => s.textContent.includes('__xss')).length,
    attrs: [...document.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
  }));
  assert.deepEqual(found, { xss: undefined, imgs: 0, scripts: 0, attrs: 0 }, where);
}

test('home: a running model is listed by its name, as text; and every job under All jobs', async () => {
  // home lists what is running: a long training with a hostile name, aborted after
  const r = await server.api('POST', '/api/v1/models', { name: `run ${IMG}`, group, dataset: dsId, network: { prototxt: TINY_NET }, epochs: 10000 });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  try {
    await page.goto(`${server.url}/`);
    await assertInert('home', [`run ${IMG}`]);
  } finally {
    await server.api('POST', `/api/v1/jobs/${r.body.job.id}/abort`);
    await waitState(server, r.body.job.id, ['done', 'error', 'aborted'], 60000);
  }
  await page.goto(`${server.url}/jobs`);
  await assertInert('all jobs', [dsName, modelName, otherName]);
});

test('the lists: datasets and models', async () => {
  await page.goto(`${server.url}/datasets`);
  await assertInert('datasets', [dsName]);
  await page.goto(`${server.url}/models`);
  await assertInert('models', [modelName, otherName]);
});

test('the job pages: name and notes', async () => {
  await page.goto(`${server.url}/jobs/${dsId}`);
  await assertInert('dataset job page', [dsName, notes]);
  await page.goto(`${server.url}/jobs/${otherId}`);
  await assertInert('model job page', [otherName, notes]);
});

test('the model page: name, notes, group; and its compare menu', async () => {
  await page.goto(`${server.url}/models/${modelId}`);
  await assertInert('model page', [modelName, notes]);
  const sel = page.locator('.cmp-select');
  await sel.focus();
  await page.locator(`.cmp-select option[value="${otherId}"]`).waitFor({ state: 'attached' });
  const options = await sel.locator('option').allTextContents();
  assert.ok(options.includes(`#${otherId} ${otherName}`), JSON.stringify(options));
  assert.ok(options.some((o) => o.includes(`“${group}”`)), `the group option: ${JSON.stringify(options)}`);
  // compare with the whole group: its chip carries the other model's name
  await sel.selectOption('group');
  await page.locator(`.cmp-chip[data-compare="${otherId}"]`).waitFor();
  await assertInert('model page, comparing', [modelName, otherName]);
  assert.deepEqual(pageErrors, []);
});
