// gpu.test.mjs — GPUs on the server side (issue 7): /api/v1/info lists them in the
// documented shape; a job that asks for the cuda backend is refused at creation on
// a server with no GPU, and its "gpus" field is checked (a count 1..16, or up to 16
// distinct ids); and, on a server told to pretend it has two (DEEPDESK_FAKE_GPUS=2),
// a cuda training job is given GPU 0 — its job.json names the device for the
// worker — holds it while it runs, so a second one that wants GPU 0 waits in the
// queue, and gives it back when it ends; a GPU job holds its share of the CPU
// slots, not all of them.  A job that asks for both GPUs holds both, its worker
// trains data parallel on them (it says so in its log), and a one-GPU job waits
// for it; `deepdesk train --gpus` checks its list and gets as far as the plugin.
// The workers there load a stand-in plugin built here with cc
// (DEEPDESK_CUDA_PLUGIN) that takes a moment and then answers "no GPU", as a real
// one would on this machine, both for one GPU and for a group of them.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { standInPlugin, startFakeGpuServer } from '../lib/gpu.mjs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, assertError, assertSchema, loadOpenApi, killTrackedPids, writeColourFolders, TINY_NET,
  BIN,
  folderDataset, allEvents, endServer,
} from './helpers.mjs';

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
    const post = (gpus) => server.api('POST', '/api/v1/jobs', model(1, { backend: 'cuda', gpus }));
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { gpus: 1 })), 400, 'invalid',
      /^gpus: only with "backend": "cuda"/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'cpu', gpus: [0, 1] })), 400, 'invalid',
      /^gpus: only with "backend": "cuda"/);
    for (const [n, re] of [[0, /^gpus: 0 is not a count of GPUs from 1 to 16$/], [17, /^gpus: 17 is not a count of GPUs from 1 to 16$/],
      [1.5, /^gpus: 1\.5 is not a count of GPUs from 1 to 16$/], [-2, /^gpus: -2 is not a count/]]) {
      assertError(await post(n), 400, 'invalid', re);
    }
    assertError(await post('all'), 400, 'invalid', /^gpus: must be a count from 1 to 16, a list of GPU ids, or "any"$/);
    assertError(await post({ n: 2 }), 400, 'invalid', /^gpus: must be a count from 1 to 16, a list of GPU ids, or "any"$/);
    assertError(await post(true), 400, 'invalid', /^gpus: must be a count/);
    assertError(await post([]), 400, 'invalid', /^gpus: a list of 1 to 16 GPU ids, not 0$/);
    assertError(await post([...Array(17).keys()]), 400, 'invalid', /^gpus: a list of 1 to 16 GPU ids, not 17$/);
    assertError(await post([0, 0]), 400, 'invalid', /^gpus: GPU 0 is listed twice$/);
    assertError(await post([1, 3, 1]), 400, 'invalid', /^gpus: GPU 1 is listed twice$/);
    assertError(await post([0, -1]), 400, 'invalid', /^gpus\[1\]: a GPU id is a whole number from 0$/);
    assertError(await post([0.5]), 400, 'invalid', /^gpus\[0\]: a GPU id is a whole number from 0$/);
    assertError(await post(['0']), 400, 'invalid', /^gpus\[0\]: a GPU id is a whole number from 0$/);
    assertError(await server.api('POST', '/api/v1/jobs', model(1, { backend: 'tpu' })), 400, 'invalid',
      /^backend: must be one of cpu, ref, cuda/);
    // well-formed requests for several GPUs pass the field's check and meet the server's:
    // this one has none (on one with GPUs, they are checked against them)
    for (const gpus of [2, 16, [0, 1], [...Array(16).keys()]]) {
      const r = await post(gpus);
      if (hasGpu) assert.notEqual(r.status, 500, JSON.stringify(r.body));
      else assertError(r, 400, 'invalid', /^backend: no GPU on this server/);
    }
    if (!hasGpu) assert.equal((await server.api('GET', '/api/v1/jobs')).body.jobs.length, 0, 'nothing was queued');
  });
});

describe('gpus on a server that pretends to have two', () => {
  let server, work, dsId, plugin;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-gpu-'));
    writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [20, 40, 210] }, 8);
    plugin = standInPlugin(work, 2000);
    // CPU slots for both jobs at once: only the GPU can hold the second back
    server = await startFakeGpuServer({ gpus: 2, plugin, args: ['--data-root', work, '--cpu-slots', '4'] });
    dsId = await folderDataset(server, join(work, 'colours'));
  });
  after(() => endServer(server, work));

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
    await waitState(server, A, 'running', 60000);
    const held = (await server.api('GET', '/api/v1/info')).body.gpus[0];
    assert.equal(held.job, A);
    assert.equal((await server.api('GET', `/api/v1/jobs/${B}`)).body.job.state, 'queued');
    const doneA = await waitState(server, A, ['done', 'error'], 30000);
    const doneB = await waitState(server, B, ['done', 'error'], 30000);
    assert.equal(doneA.state, 'error');
    assert.equal(doneB.state, 'error');
    assert.ok(doneB.started_at >= doneA.finished_at, `B started ${doneB.started_at}, A ended ${doneA.finished_at}`);
  });
  test('a job may not ask for more GPUs than the server has', async () => {
    assertError(await server.api('POST', '/api/v1/jobs', model(dsId, { backend: 'cuda', gpus: 3 })), 400, 'invalid',
      /^gpus: asks for 3 GPUs, this server has 2$/);
    assertError(await server.api('POST', '/api/v1/jobs', model(dsId, { backend: 'cuda', gpus: [0, 1, 2] })), 400, 'invalid',
      /^gpus: GPU 2 is not on this server \(it has 2: 0 to 1\)/);
    const m = await server.api('POST', '/api/v1/models',
      { name: 'm', dataset: dsId, network: { prototxt: TINY_NET }, backend: 'cuda', gpus: 3 });
    assertError(m, 400, 'invalid', /gpus: asks for 3 GPUs, this server has 2/);
  });

  test('a job on both GPUs holds both, trains data parallel on them, and a one-GPU job waits for it', async () => {
    const one = { resources: { cpu_slots: 1 } };
    const cases = [[2, [0, 1]], [[1, 0], [1, 0]]];
    for (const [gpus, want] of cases) {
      const a = await server.api('POST', '/api/v1/jobs', { ...model(dsId, { backend: 'cuda', gpus }), ...one });
      assert.equal(a.status, 202, JSON.stringify(a.body));
      const A = a.body.job.id;
      const b = await server.api('POST', '/api/v1/jobs', { ...model(dsId, { backend: 'cuda', gpus: [want[1]] }), ...one });
      assert.equal(b.status, 202, JSON.stringify(b.body));
      const B = b.body.job.id;
      await waitState(server, A, 'running', 60000);
      const held = (await server.api('GET', '/api/v1/info')).body.gpus;
      assert.deepEqual(held.map((g) => g.job), [A, A], `both GPUs held by job ${A}: ${JSON.stringify(held)}`);
      // the job's own hardware answer lists them (the model page's GPUs row)
      const res = await server.api('GET', `/api/v1/jobs/${A}/resources`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.gpus.map((g) => [g.id, g.name, g.job]), [[0, 'simulated GPU 0', A], [1, 'simulated GPU 1', A]]);
      assert.equal((await server.api('GET', `/api/v1/jobs/${B}`)).body.job.state, 'queued', 'the one-GPU job waits');
      const jj = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(A), 'job.json'), 'utf8'));
      assert.deepEqual(jj.resources.gpus, want);
      assert.equal(jj.params.backend, `cuda:${want[0]}`);
      const doneA = await waitState(server, A, ['done', 'error'], 30000);
      // the plugin's own answer, as the worker's error: not a crash
      assert.equal(doneA.state, 'error');
      assert.match(doneA.error, /cuda: stand-in plugin: no GPU answers/);
      assert.equal(doneA.exit?.signal ?? null, null, `no signal: ${JSON.stringify(doneA.exit)}`);
      const logs = (await allEvents(server, A)).filter((e) => e.type === 'log').map((e) => e.msg);
      assert.ok(logs.includes(`data parallel on 2 GPUs (${want.join(',')}): batch_size images on each, 2 copies of the network`),
        JSON.stringify(logs));
      const shown = (await server.api('GET', `/api/v1/jobs/${A}`)).body.job;
      assert.equal(shown.params.backend, 'cuda');
      assert.deepEqual(shown.params.gpus, gpus, 'the API keeps what was asked for');
      const doneB = await waitState(server, B, ['done', 'error'], 30000);
      assert.equal(doneB.state, 'error');
      assert.ok(doneB.started_at >= doneA.finished_at, `B started ${doneB.started_at}, A ended ${doneA.finished_at}`);
      const jb = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(B), 'job.json'), 'utf8'));
      assert.deepEqual(jb.resources.gpus, [want[1]]);
      const logsB = (await allEvents(server, B)).filter((e) => e.type === 'log').map((e) => e.msg);
      assert.ok(!logsB.some((m) => /data parallel/.test(m)), 'one GPU: no replicas');
      await waitFor(async () => {
        const g = (await server.api('GET', '/api/v1/info')).body.gpus;
        return g.every((x) => x.job === undefined) ? g : null;
      }, 5000, 'both GPUs free again');
    }
  });

  test('deepdesk train --gpus: a checked list of ids, cuda only, as far as the plugin', async () => {
    const ds = join(server.dataDir, 'jobs', String(dsId));
    const net = join(work, 'tiny.prototxt');
    writeFileSync(net, TINY_NET);
    const train = (out, ...args) => spawnSync(BIN, ['train', '--dataset', ds, '--network', net, '--out', join(work, out),
      '--epochs', '1', ...args], { encoding: 'utf8', env: { ...process.env, DEEPDESK_CUDA_PLUGIN: plugin } });
    for (const [args, re] of [
      [['--gpus', '0,1'], /^deepdesk train: --gpus: only with --backend cuda$/m],
      [['--backend', 'cpu', '--gpus', '0,1'], /^deepdesk train: --gpus: only with --backend cuda$/m],
      [['--backend', 'cuda', '--gpus', '0,0'], /^deepdesk train: --gpus: GPU 0 is listed twice$/m],
      [['--backend', 'cuda', '--gpus', '0,x'], /^deepdesk train: --gpus: '0,x' is not a comma list of GPU ids \(like 0,1\)$/m],
      [['--backend', 'cuda', '--gpus', '0,'], /^deepdesk train: --gpus: '0,' is not a comma list/m],
      [['--backend', 'cuda', '--gpus', '-1'], /^deepdesk train: --gpus: '-1' is not a comma list/m],
      [['--backend', 'cuda', '--gpus', '0, 1'], /^deepdesk train: --gpus: '0, 1' is not a comma list/m],
      [['--backend', 'cuda', '--gpus', '1,64'], /^deepdesk train: --gpus: GPU 64: a device id is from 0 to 63$/m],
      [['--backend', 'cuda', '--gpus', [...Array(17).keys()].join(',')], /^deepdesk train: --gpus: at most 16 GPUs$/m],
    ]) {
      const r = spawnSync(BIN, ['train', '--dataset', ds, '--network', net, '--out', join(work, 'bad'), ...args], { encoding: 'utf8' });
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re);
    }
    const r = train('cli2', '--backend', 'cuda', '--gpus', '1,0');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /deepdesk train: cuda: stand-in plugin: no GPU answers/);
    const st = JSON.parse(readFileSync(join(work, 'cli2', 'settings.json'), 'utf8'));
    assert.equal(st.backend, 'cuda:1', 'the first of --gpus is the device');
    assert.deepEqual(st.gpus, [1, 0]);
    const one = train('cli1', '--backend', 'cuda', '--gpus', '1');
    assert.equal(one.status, 1, one.stderr);
    assert.match(one.stderr, /stand-in plugin: no GPU answers/);
    const st1 = JSON.parse(readFileSync(join(work, 'cli1', 'settings.json'), 'utf8'));
    assert.equal(st1.backend, 'cuda:1');
    assert.equal(st1.gpus, undefined, 'one GPU is an ordinary run');
    assert.match(spawnSync(BIN, ['train', '--help'], { encoding: 'utf8' }).stdout, /--gpus ID,ID\[,\.\.\.\]/);
  });
});
