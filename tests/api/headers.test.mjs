// headers.test.mjs — every kind of answer carries the security headers (CSP,
// nosniff, no framing, no referrer), whichever code wrote it: JSON, 204s, the UI's
// files, images, the SVG drawing, and the downloads of a user's data (results.csv
// and .json, the confusion CSV, a snapshot, a bundle), which are also
// `Cache-Control: private, no-store`.  (HTTPS adds HSTS: tls.test.mjs.)
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, waitState, trainColourModel, killTrackedPids, TEST_TMP, TINY_NET, endServer } from './helpers.mjs';

const COLOURS = { red: [220, 20, 20], green: [20, 200, 20], blue: [20, 20, 220] };

function assertSecure(res, what) {
  const h = res.headers;
  assert.match(h.get('content-security-policy') || '', /default-src '(self|none)'/, `${what}: CSP`);
  assert.equal(h.get('x-content-type-options'), 'nosniff', `${what}: nosniff`);
  assert.equal(h.get('x-frame-options'), 'DENY', `${what}: framing`);
  assert.equal(h.get('referrer-policy'), 'no-referrer', `${what}: referrer`);
  assert.equal(h.get('strict-transport-security'), null, `${what}: no HSTS over plain HTTP`);
}

describe('security headers on every kind of answer', () => {
  let server, work, dsId, modelId, evalId;
  before(async () => {
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-headers-'));
    server = await startServer({ args: ['--data-root', work] });
    ({ dsId, modelId } = await trainColourModel(server, work, COLOURS, { n: 8 }));
    const e = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { dataset: dsId, split: 'val' } });
    assert.equal(e.status, 202, JSON.stringify(e.body));
    evalId = e.body.job.id;
    assert.equal((await waitState(server, evalId, ['done', 'error'], 60000)).state, 'done');
  });
  after(() => endServer(server, work));

  const get = async (path, init) => {
    const res = await fetch(server.url + path, init);
    await res.arrayBuffer();
    assert.ok(res.status < 300, `${path}: ${res.status}`);
    return res;
  };

  test('JSON, 204, the UI, images, the SVG drawing, the OpenAPI document, a 405', async () => {
    for (const path of ['/api/v1/info', '/', '/app.js', '/api/v1/openapi.json', `/api/v1/datasets/${dsId}/images/val/0`])
      assertSecure(await get(path), path);
    const svg = await get('/api/v1/networks/visualize', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prototxt: TINY_NET }) });
    assertSecure(svg, 'visualize');
    assert.equal(svg.headers.get('content-security-policy'), "default-src 'none'; style-src 'unsafe-inline'");
    const del = await fetch(`${server.url}/api/v1/jobs/${evalId}`, { method: 'PATCH', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'renamed' }) });
    assertSecure(del, 'PATCH');
    const m405 = await fetch(`${server.url}/api/v1/info`, { method: 'DELETE' });
    assert.equal(m405.status, 405);
    assert.match(m405.headers.get('allow') || '', /GET/);
    assert.equal((await m405.json()).error.code, 'method_not_allowed');
    assertSecure(m405, '405');
  });

  test('downloads of a user\'s data are private and never stored', async () => {
    for (const path of [`/api/v1/evaluations/${evalId}/results.csv`, `/api/v1/evaluations/${evalId}/results.json`,
      `/api/v1/evaluations/${evalId}/confusion?format=csv`, `/api/v1/models/${modelId}/snapshots/2`,
      `/api/v1/models/${modelId}/bundle`]) {
      const res = await get(path);
      assertSecure(res, path);
      assert.equal(res.headers.get('cache-control'), 'private, no-store', path);
      assert.match(res.headers.get('content-disposition') || '', /^attachment; filename="/, path);
    }
  });
});
