// gpu.test.mjs — GPUs on the server side (issue 7): /api/v1/info lists them in the
// documented shape; a job that asks for the cuda backend is refused at creation on
// a server with no GPU, and its "gpus" field is checked; and, on a server told to
// pretend it has two (DEEPDESK_FAKE_GPUS=2), a cuda training job is given GPU 0 —
// its job.json names the device for the worker — holds it while it runs, so a
// second one that wants GPU 0 waits in the queue, and gives it back when it ends;
// a GPU job holds its share of the CPU slots, not all of them.  The workers
// there load a stand-in plugin built here with cc (DEEPDESK_CUDA_PLUGIN) that
// takes a moment and then answers "no GPU", as a real one would on this machine.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, assertError, assertSchema, loadOpenApi, killTrackedPids, writeColourFolders, TINY_NET,
  ROOT,
  folderDataset,
} from './helpers.mjs';

/** A plugin of this build's API version whose create waits ms and then fails. */
function standInPlugin(dir, ms) {
  const impl = readFileSync(join(ROOT, 'networks', 'backend_impl.h'), 'utf8');
  const version = Number(/#define BACKEND_API_VERSION (\d+)/.exec(impl)[1]);
  const src = join(dir, 'standin.c');
  writeFileSync(src, `#include <stdio.h>
#include <unistd.h>
struct dd_err { int code; char msg[480]; };
const int deepdesk_backend_api_version = ${version};
int deepdesk_cuda_create(const void *host, void **out, struct dd_err *err)
{
	*out = 0;
	usleep(${ms * 1000});
	if (err) { err->code = -1; snprintf(err->msg, sizeof err->msg, "stand-in plugin: no GPU answers"); }
	return -1;
}
int deepdesk_cuda_devices(void *out, int max, struct dd_err *err) { return 0; }
`);
  execFileSync('cc', ['-shared', '-fPIC', '-o', join(dir, 'standin.so'), src]);
  return join(dir, 'standin.so');
}

const model = (dataset, extra = {}) => ({
  kind: 'model', name: 'gpu', params: { dataset, network: { prototxt: TINY_NET }, epochs: 1, ...extra },
});

describe('gpus', () => {
  let server, doc, hasGpu;
  before(async () => {
    doc = loadOpenApi();
    server = await startServer();
  });
  after(async () => { killTrackedPids(); await server?.stop(); server?.cleanup(); });

  test('info lists the GPUs in the documented shape', async () => {
    const r = await server.api('GET', '/api/v1/info');
    assert.equal(r.status, 200);
    assertSchema(doc, 'Info', r.body);
    assert.ok(Array.isArray(r.body.gpus));
    hasGpu = r.body.gpus.length > 0;
    for (const [i, g] of r.body.gpus.entries()) {
      assert.equal(g.id, i);
      assert.ok(g.name.length > 0);
      assert.ok(g.memory_total > 0);
    }
  });

  test('a cuda job is refused at creation where there is no GPU', async (t) => {
    if (hasGpu) { t.skip('this server has a GPU'); return; }
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda' })), 400, 'invalid',
      /^backend: no GPU on this server/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', gpus: 'any' })), 400, 'invalid',
      /no GPU on this server/);
    // POST /api/v1/models goes through the same scheduler check (after its dataset check)
    const m = await server.api('POST', '/api/v1/models', { name: 'm', dataset: 1, network: { prototxt: TINY_NET }, backend: 'cuda' });
    assert.equal(m.status >= 400 && m.status < 500, true, JSON.stringify(m.body));
    const list = await server.api('GET', '/api/v1/jobs');
    assert.equal(list.body.jobs.length, 0, 'nothing was queued');
  });

  test('the gpus field is checked by name', async () => {
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { gpus: 1 })), 400, 'invalid',
      /^gpus: only with "backend": "cuda"/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', gpus: 2 })), 400, 'invalid',
      /^gpus: training on 2 GPUs at once \(NCCL/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', gpus: 'all' })), 400, 'invalid',
      /^gpus: must be 1, a list of one GPU id, or "any"/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', gpus: [] })), 400, 'invalid', /^gpus: /);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'tpu' })), 400, 'invalid',
      /^backend: must be one of cpu, ref, cuda/);
  });
});

describe('gpus on a server that pretends to have two', () => {
  let server, work, dsId;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-gpu-'));
    writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [20, 40, 210] }, 8);
    process.env.DEEPDESK_FAKE_GPUS = '2';
    process.env.DEEPDESK_CUDA_PLUGIN = standInPlugin(work, 2000);
    try {
      // CPU slots for both jobs at once: only the GPU can hold the second back
      server = await startServer({ args: ['--data-root', work, '--cpu-slots', '4'] });
    } finally {
      delete process.env.DEEPDESK_FAKE_GPUS;
      delete process.env.DEEPDESK_CUDA_PLUGIN;
    }
    dsId = await folderDataset(server, join(work, 'colours'));
  });
  after(async () => {
    killTrackedPids();
    await server?.stop();
    server?.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  test('info shows the GPUs; ids beyond them are refused', async () => {
    const i = (await server.api('GET', '/api/v1/info')).body;
    assert.deepEqual(i.gpus.map((g) => [g.id, g.name]), [[0, 'simulated GPU 0'], [1, 'simulated GPU 1']]);
    assertError(await server.api('POST', '/api/v1/jobs', model(dsId, { backend: 'cuda', gpus: [2] })), 400, 'invalid',
      /^gpus: GPU 2 is not on this server \(it has 2: 0 to 1\)/);
  });

  test('a cuda job gets GPU 0, its worker is told so, and the GPU is free again after', async () => {
    for (const gpus of ['any', [0]]) {
      const r = await server.api('POST', '/api/v1/jobs', model(dsId, { backend: 'cuda', gpus }));
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const id = r.body.job.id;
      const done = await waitState(server, id, ['done', 'error'], 30000);
      // the worker asked for cuda:0 and the (stand-in) plugin answered no GPU
      assert.equal(done.state, 'error');
      assert.match(done.error, /cuda: stand-in plugin: no GPU answers/);
      const jj = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(id), 'job.json'), 'utf8'));
      assert.deepEqual(jj.resources.gpus, [0]);
      assert.equal(jj.params.backend, 'cuda:0');
      // the job as the API shows it keeps what was asked for, and half the 4 CPU slots
      const shown = (await server.api('GET', `/api/v1/jobs/${id}`)).body.job;
      assert.equal(shown.params.backend, 'cuda');
      assert.equal(shown.resources.cpu_slots, 2);
      const free = await waitFor(async () => {
        const g = (await server.api('GET', '/api/v1/info')).body.gpus[0];
        return g.job === undefined ? g : null;
      }, 5000, 'GPU 0 free again');
      assert.equal(free.id, 0);
    }
  });
  test('one job per GPU: a second cuda job waits until the first gives GPU 0 back', async () => {
    const one = { resources: { cpu_slots: 1 } };
    const a = await server.api('POST', '/api/v1/jobs', { ...model(dsId, { backend: 'cuda' }), ...one });
    const b = await server.api('POST', '/api/v1/jobs', { ...model(dsId, { backend: 'cuda', gpus: [0] }), ...one });
    assert.equal(a.status, 202, JSON.stringify(a.body));
    assert.equal(b.status, 202, JSON.stringify(b.body));
    const A = a.body.job.id, B = b.body.job.id;
    await waitState(server, A, 'running', 15000);
    const held = (await server.api('GET', '/api/v1/info')).body.gpus[0];
    assert.equal(held.job, A);
    assert.equal((await server.api('GET', `/api/v1/jobs/${B}`)).body.job.state, 'queued');
    const doneA = await waitState(server, A, ['done', 'error'], 30000);
    const doneB = await waitState(server, B, ['done', 'error'], 30000);
    assert.equal(doneA.state, 'error');
    assert.equal(doneB.state, 'error');
    assert.ok(doneB.started_at >= doneA.finished_at, `B started ${doneB.started_at}, A ended ${doneA.finished_at}`);
  });
});
