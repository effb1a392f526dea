// digits.test.mjs — DIGITS' read-only JSON routes, requested as DIGITS' docs/API.md
// shows them (plain GETs of /index.json, /datasets/<job_id>.json,
// /models/<job_id>.json), answered in DIGITS' shapes from a real dataset and a
// real trained model: status names, snapshots as epochs, [H, W, C] image
// dimensions, width and height the right way round (DIGITS swapped them), and
// clean 404s for what is not there or of the other kind.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, waitState, assertError, killTrackedPids, writeColourFolders, TINY_NET, trainColourModel, endServer } from './helpers.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };

async function getJson(server, path) {
  const res = await fetch(server.url + path);
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text, headers: res.headers };
}

/** getJson's body, once the answer was a 200 (its text the message where not). */
async function getOk(server, path) {
  const r = await getJson(server, path);
  assert.equal(r.status, 200, r.text);
  return r.body;
}

describe('digits', () => {
  let server, work, dsId, modelId, queuedId;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-digits-'));
    server = await startServer({ args: ['--data-root', work] });
    ({ dsId, modelId } = await trainColourModel(server, work, COLOURS, { n: 12, options: { width: 12, test_pct: 25 } }));
  });
  after(() => endServer(server, work));

  test('GET /index.json: version, jobs_dir, datasets and models with DIGITS\' fields', async () => {
    const r = await getJson(server, '/index.json');
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('content-type'), /application\/json/);
    assert.equal(typeof r.body.version, 'string');
    assert.equal(r.body.jobs_dir, join(server.dataDir, 'jobs'));
    assert.deepEqual(r.body.datasets, [{ id: dsId, name: 'colours', status: 'Done' }]);
    assert.equal(r.body.models.length, 1);
    const m = r.body.models[0];
    assert.equal(m.id, modelId);
    assert.equal(m.name, 'tiny');
    assert.equal(m.status, 'Done');
    assert.equal(m.dataset_id, dsId);
    assert.equal(m['job id'], modelId);
    assert.match(m['creation time'], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$/);
    assert.equal(m.framework, 'caffe');
    assert.deepEqual(m['image dimensions'], [8, 12, 3]);
    assert.equal(m['image resize mode'], 'squash');
    assert.equal(m['snapshot file'], 'snapshot_epoch_2.safetensors');
    assert.equal(m.snapshots, undefined, 'the list form has no snapshots (DIGITS: verbose only)');
  });

  test('running jobs come first, then the rest, each newest first', async () => {
    // a model that waits in the queue behind nothing but cannot start: all slots taken by a long one
    const long = await server.api('POST', '/api/v1/models', {
      name: 'long', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 500, solver: { base_lr: 0.01 },
    });
    assert.equal(long.status, 202, JSON.stringify(long.body));
    queuedId = long.body.job.id;
    await waitState(server, queuedId, ['running', 'queued'], 60000);
    const r = await getJson(server, '/index.json');
    assert.deepEqual(r.body.models.map((m) => m.id), [queuedId, modelId]);
    assert.ok(['Running', 'Waiting'].includes(r.body.models[0].status), r.body.models[0].status);
    const mj = await getJson(server, `/models/${queuedId}.json`);
    assert.ok(['Running', 'Waiting'].includes(mj.body.status));
    assert.equal((await server.api('POST', `/api/v1/jobs/${queuedId}/abort`)).status < 300, true);
    await waitState(server, queuedId, ['aborted', 'done'], 30000);
    assert.equal((await getJson(server, `/models/${queuedId}.json`)).body.status, 'Aborted');
  });

  test('GET /datasets/<job_id>.json: the parse and create-db tasks, width and height not swapped', async () => {
    const d = await getOk(server, `/datasets/${dsId}.json`);
    assert.equal(d.id, dsId);
    assert.equal(d.name, 'colours');
    assert.equal(d.status, 'Done');
    assert.equal(d.directory, join(server.dataDir, 'jobs', String(dsId)));
    assert.equal(d.ParseFolderTasks.length, 1);
    const p = d.ParseFolderTasks[0];
    assert.equal(p.label_count, 3);
    assert.equal(p.train_count + p.val_count + p.test_count, 36);
    assert.ok(p.val_count > 0 && p.test_count > 0);
    assert.deepEqual(d.CreateDbTasks.map((t) => t.name), ['Create DB (train)', 'Create DB (val)', 'Create DB (test)']);
    for (const t of d.CreateDbTasks) {
      assert.equal(t.image_width, 12);
      assert.equal(t.image_height, 8);
      assert.equal(t.image_channels, 3);
      assert.equal(t.backend, 'lmdb');
      assert.equal(t.encoding, 'png');
      assert.equal(t.compression, 'none');
    }
    assert.equal(d.CreateDbTasks[0].entries, p.train_count);
  });

  test('GET /models/<job_id>.json: DIGITS\' model fields and snapshots as epochs', async () => {
    const m = await getOk(server, `/models/${modelId}.json`);
    assert.equal(m.id, modelId);
    assert.equal(m.status, 'Done');
    assert.equal(m.dataset_id, dsId);
    assert.equal(m.directory, join(server.dataDir, 'jobs', String(modelId)));
    assert.deepEqual(m.snapshots, [1, 2]);
    assert.equal(m['labels file'], 'labels.txt');
    assert.equal(m['mean file'], 'mean.binaryproto');
    assert.equal(m['mean subtraction'], 'image');
    assert.equal(m.username, 'local');
  });

  test('what is not there: 404 in the API\'s error shape; other methods: 405', async () => {
    assertError(await getJson(server, '/models/999.json'), 404, 'not_found', /no job 999/);
    assertError(await getJson(server, `/models/${dsId}.json`), 404, 'not_found', /not a model/);
    assertError(await getJson(server, `/datasets/${modelId}.json`), 404, 'not_found', /not a dataset/);
    assertError(await getJson(server, '/datasets/abc.json'), 404, 'not_found', /not a valid id/);
    const post = await fetch(`${server.url}/index.json`, { method: 'POST' });
    assert.equal(post.status, 405);
    assert.match(post.headers.get('allow'), /GET/);
    // the classify_one.json route beside them still answers
    const f = new FormData();
    f.append('job_id', String(modelId));
    const c = await fetch(`${server.url}/models/images/classification/classify_one.json`, { method: 'POST', body: f });
    assert.equal(c.status, 400);
  });
});
