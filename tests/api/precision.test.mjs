// precision.test.mjs — the "precision" field of a training job (issue 7, mixed
// precision): fp32, fp16 or bf16, the half ones with backend cuda only, refused by
// name otherwise, on /api/v1/jobs and /api/v1/models alike; and on a server that
// pretends to have a GPU (DEEPDESK_FAKE_GPUS=1) a bf16 cuda job is accepted, keeps
// its precision, and its worker gets as far as the (stand-in) plugin, which answers
// "no GPU" as a real one would on this machine.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { standInPlugin, startFakeGpuServer } from '../lib/gpu.mjs';
import { join } from 'node:path';
import {
  startServer, waitState, assertError, killTrackedPids, writeColourFolders, TINY_NET,
  folderDataset, endServer,
} from './helpers.mjs';

const model = (dataset, extra = {}) => ({
  kind: 'model', name: 'prec', params: { dataset, network: { prototxt: TINY_NET }, epochs: 1, ...extra },
});

describe('precision', () => {
  let server;
  before(async () => { server = await startServer(); });
  after(async () => { killTrackedPids(); await server?.stop(); server?.cleanup(); });

  test('a half precision needs the cuda backend; other values are refused by name', async () => {
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { precision: 'fp16' })), 400, 'invalid',
      /^precision: "fp16" only with "backend": "cuda"/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'ref', precision: 'bf16' })), 400,
      'invalid', /^precision: "bf16" only with "backend": "cuda"/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', precision: 'fp8' })), 400,
      'invalid', /^precision: must be one of fp32, fp16, bf16/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { precision: 16 })), 400, 'invalid',
      /^precision: must be one of/);
    // /api/v1/models knows the field (it is not an unknown one) and checks it the same way
    const m = await server.api('POST', '/api/v1/models',
      { name: 'm', dataset: 1, network: { prototxt: TINY_NET }, precision: 'half' });
    assert.equal(m.status, 400, JSON.stringify(m.body));
    assert.doesNotMatch(m.body.error.message, /unknown field/);
    const list = await server.api('GET', '/api/v1/jobs');
    assert.equal(list.body.jobs.length, 0, 'nothing was queued');
  });
});

describe('precision on a server with a (pretend) GPU', () => {
  let server, work, dsId;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-prec-'));
    writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [20, 40, 210] }, 8);
    server = await startFakeGpuServer({ gpus: 1, plugin: standInPlugin(work), args: ['--data-root', work] });
    dsId = await folderDataset(server, join(work, 'colours'));
  });
  after(() => endServer(server, work));

  test('a bf16 cuda job is accepted, keeps its precision, and runs until the plugin answers', async () => {
    const r = await server.api('POST', '/api/v1/jobs', model(dsId, { backend: 'cuda', precision: 'bf16' }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.job.params.precision, 'bf16');
    const done = await waitState(server, r.body.job.id, ['done', 'error'], 30000);
    assert.equal(done.state, 'error');
    assert.match(done.error, /cuda: stand-in plugin: no GPU answers/);
    const jj = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(r.body.job.id), 'job.json'), 'utf8'));
    assert.equal(jj.params.precision, 'bf16');
  });
});
