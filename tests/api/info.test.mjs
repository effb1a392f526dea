// info.test.mjs — GET /api/v1/info on the test build and on the shipped build, and
// that the shipped build has no "test" job kind.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { realpathSync, existsSync } from 'node:fs';
import {
  SHIPPED_BIN, startServer, startServerBin, waitFor, waitState, createJob, killTrackedPids, trackPid, assertError, endServer,
} from './helpers.mjs';

describe('info', () => {
  let server;
  before(async () => { server = await startServer({ args: ['--cpu-slots', '3'] }); });
  after(() => endServer(server));

  test('fields are present and sane', async () => {
    const r = await server.api('GET', '/api/v1/info');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^application\/json/);
    const i = r.body;
    assert.match(i.version, /^\d+\.\d+\.\d+/);
    assert.equal(typeof i.build.commit, 'string');
    assert.ok(i.build.commit.length > 0);
    assert.match(i.build.date, /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(typeof i.build.compiler, 'string');
    assert.equal(typeof i.build.cuda, 'boolean');
    assert.equal(typeof i.cpu.model, 'string');
    assert.ok(Number.isInteger(i.cpu.cores) && i.cpu.cores >= 1, `cores ${i.cpu.cores}`);
    assert.ok(Array.isArray(i.gpus));
    assert.equal(i.data.path, realpathSync(server.dataDir));
    assert.ok(i.data.free_bytes > 0, `free ${i.data.free_bytes}`);
    assert.ok(i.data.total_bytes >= i.data.free_bytes);
    assert.ok(i.data.used_bytes >= 0);
    assert.equal(i.jobs.total, 0);
    assert.equal(i.jobs.cpu_slots, 3);
    assert.equal(i.jobs.cpu_slots_used, 0);
    assert.ok(Array.isArray(i.kinds));
    const test = i.kinds.find((k) => k.name === 'test');
    assert.ok(test, `kinds: ${JSON.stringify(i.kinds)}`);
    assert.equal(typeof test.title, 'string');
    for (const k of i.kinds) assert.deepEqual(Object.keys(k).sort(), ['name', 'title']);
    assert.deepEqual(i.data_roots, []);
  });

  test('job counts and CPU slots in use follow the jobs', async () => {
    const job = await createJob(server, { steps: 100, step_ms: 50 }, { resources: { cpu_slots: 2 } });
    const running = await waitState(server, job.id, 'running');
    trackPid(running.pid);
    // (the state is stored a moment before the slots are counted: poll)
    const i = await waitFor(async () => {
      const b = (await server.api('GET', '/api/v1/info')).body;
      return b.jobs.cpu_slots_used === 2 ? b : null;
    }, 5000, 'two slots in use');
    assert.equal(i.jobs.total, 1);
    assert.equal((await server.api('POST', `/api/v1/jobs/${job.id}/abort`)).status, 202);
    await waitState(server, job.id, 'aborted');
    const after = await waitFor(async () => {
      const b = (await server.api('GET', '/api/v1/info')).body;
      return b.jobs.cpu_slots_used === 0 ? b : null;
    }, 5000, 'slots freed');
    assert.equal(after.jobs.total, 1);
  });

  test('info refuses other methods with 405 and Allow', async () => {
    const r = await server.api('POST', '/api/v1/info', {});
    assertError(r, 405, 'method_not_allowed');
    assert.equal(r.headers.get('allow'), 'GET');
  });
});

describe('the shipped build', () => {
  let server;
  before(async () => {
    assert.ok(existsSync(SHIPPED_BIN), `${SHIPPED_BIN} is built`);
    server = await startServerBin(SHIPPED_BIN);
  });
  after(async () => {
    await server?.stop();
    server?.cleanup();
  });

  test('has no "test" kind in info', async () => {
    const r = await server.api('GET', '/api/v1/info');
    assert.equal(r.status, 200);
    assert.ok(!r.body.kinds.some((k) => k.name === 'test'), JSON.stringify(r.body.kinds));
  });

  test('refuses kind "test" with 400 and creates nothing', async () => {
    const r = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1 } });
    assertError(r, 400, 'invalid', /kind/);
    assert.match(r.body.error.message, /test/);
    const list = await server.api('GET', '/api/v1/jobs');
    assert.equal(list.status, 200);
    assert.equal(list.body.total, 0);
    assert.deepEqual(list.body.jobs, []);
  });

  test('a SIGTERM stops it with exit code 0', async () => {
    const { code, signal } = await server.stop();
    assert.equal(signal, null);
    assert.equal(code, 0);
  });
});
