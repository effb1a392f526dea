// memory.test.mjs — the per-job memory limit (issue 16, finding 8): a network whose
// training would take more than --job-memory-max is refused by the network check's
// verdict, by POST /models and by POST /jobs (kind model), and on clone and resume
// once the limit is lower, each naming the estimate and the limit; a normal network
// passes with its estimate shown; a worker that runs out of memory under its limit
// (a runaway test job; a training that passes the check but whose worker, under a
// hard RLIMIT_DATA below it, cannot get its memory), or is killed as the kernel's OOM
// killer kills, ends "out of memory (N MiB …)" and the server goes on.  A user's
// memory quota (quota.memory_bytes) lowers the limit for that user's jobs: a training
// over it is refused by every route naming the quota, and the job's worker gets it
// (job.json's guard.memory_max, the local executor's RLIMIT_DATA).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, assertError, killTrackedPids, trackPid, writeColourFolders, TINY_NET,
  folderDataset, getJob, BIN, wideNet,
} from './helpers.mjs';
import { makeAccounts, userClient } from '../lib/auth.mjs';

const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };

// 1048576 outputs, then 2000: 2.3 billion parameters, some 42 GiB to train
const HUGE = wideNet(1048576, `layer { name: "ip3" type: "InnerProduct" bottom: "ip1" top: "ip3"
  inner_product_param { num_output: 2000 } }`);
// 100000 outputs on 8x8x3 images: 19.5 million parameters, about 400 MiB to train
const MEDIUM = wideNet(100000);

const MIB = 1024 * 1024;

describe('memory', () => {
  let oomFile;
  let server, work, dsId;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-memory-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 16);
    // the test build adds the number in this file to the kernel's count of OOM kills:
    // raising it stands in for the kernel's out-of-memory killer having killed
    oomFile = join(work, 'oom_kills');
    writeFileSync(oomFile, '0');
    process.env.DEEPDESK_OOM_KILLS = oomFile;
    server = await startServer({ args: ['--data-root', work] }); // and every restart of it
    dsId = await folderDataset(server, join(work, 'colours'));
  });
  after(async () => { delete process.env.DEEPDESK_OOM_KILLS;
    for (const j of (await server?.api('GET', '/api/v1/jobs?limit=100'))?.body?.jobs || [])
      if (j.state === 'running' || j.state === 'queued') await server.api('POST', `/api/v1/jobs/${j.id}/abort`, {});
    killTrackedPids(); await server?.stop(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  test('a normal network passes the check with its estimate', async () => {
    const r = await server.api('POST', '/api/v1/networks/check', { standard: 'lenet', batch_size: 64 });
    assert.equal(r.status, 200);
    assert.equal(r.body.valid, true, JSON.stringify(r.body.error));
    const m = r.body.memory;
    assert.equal(m.batch, 64);
    assert.ok(m.total > 50 * MIB && m.total < 200 * MIB, `LeNet at batch 64: ${m.total}`);
    assert.equal(m.breakdown.params, 2 * 4 * 431080);
    assert.equal(m.breakdown.history, 4 * 431080);
    assert.ok(m.limit > m.total);
    // Adam keeps two histories
    const a = await server.api('POST', '/api/v1/networks/check', { standard: 'lenet', batch_size: 64, solver: { type: 'adam' } });
    assert.equal(a.body.memory.breakdown.history, 2 * 4 * 431080);
    // against a dataset, at its batch size
    const d = await server.api('POST', '/api/v1/networks/check', { prototxt: TINY_NET, dataset: dsId, batch_size: 8 });
    assert.equal(d.body.valid, true);
    assert.equal(d.body.memory.batch, 8);
    assertError(await server.api('POST', '/api/v1/networks/check', { standard: 'lenet', solver: 'sgdd' }), 400, 'invalid', /solver/);
  });

  test('a huge network is refused by the check, POST /models and POST /jobs, naming the figure', async () => {
    const c = await server.api('POST', '/api/v1/networks/check', { prototxt: HUGE, dataset: dsId });
    assert.equal(c.status, 200);
    assert.equal(c.body.valid, false);
    assert.match(c.body.error.message, /^memory: training this network at batch 4 needs about [\d.]+ GiB .*over the per-job memory limit of .*--job-memory-max.*num_output of layer 'ip3'/);
    assert.ok(c.body.memory.total > c.body.memory.limit);
    const m = await server.api('POST', '/api/v1/models', { name: 'huge', dataset: dsId, network: { prototxt: HUGE }, epochs: 1 });
    assertError(m, 400, 'invalid', /^memory: .* needs about [\d.]+ GiB \(\d+ bytes.*limit of .*\(\d+ bytes.*num_output/);
    const j = await server.api('POST', '/api/v1/jobs', {
      kind: 'model', name: 'huge', params: { dataset: dsId, network: { prototxt: HUGE }, epochs: 1 },
    });
    assertError(j, 400, 'invalid', /^memory: .* needs about [\d.]+ GiB/);
    // a sweep refuses every combination when one is over: none is created
    const before = (await server.api('GET', '/api/v1/jobs?limit=100')).body.jobs.length;
    const s = await server.api('POST', '/api/v1/models', {
      name: 'sweep', dataset: dsId, network: { prototxt: HUGE }, epochs: 1, solver: { base_lr: [0.01, 0.02] },
    });
    assertError(s, 400, 'invalid', /^memory: /);
    assert.equal((await server.api('GET', '/api/v1/jobs?limit=100')).body.jobs.length, before);
  });

  test('clone and resume are refused once the limit is below the estimate', async () => {
    const m = await server.api('POST', '/api/v1/models', { name: 'medium', dataset: dsId, network: { prototxt: MEDIUM }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const id = m.body.job.id;
    const done = await waitState(server, id, ['done', 'error'], 120000);
    assert.equal(done.state, 'done', done.error);
    const chk = await server.api('POST', '/api/v1/networks/check', { prototxt: MEDIUM, dataset: dsId });
    const est = chk.body.memory.total;
    assert.ok(est > 300 * MIB && est < 600 * MIB, `MEDIUM: ${est}`);
    // the worker said what it expected, and ran under a limit above it
    const rec = JSON.parse(readFileSync(join(server.dataDir, 'jobs', String(id), 'memory.json'), 'utf8'));
    assert.equal(rec.estimate, est);
    assert.equal(rec.batch, 4);
    assert.ok(rec.limit > est, JSON.stringify(rec));
    server = await server.restart({ args: ['--data-root', work, '--job-memory-max', '200M'] });
    assertError(await server.api('POST', `/api/v1/jobs/${id}/clone`, {}), 400, 'invalid', /^memory: .*limit of 200 MiB \(209715200 bytes/);
    assertError(await server.api('POST', `/api/v1/models/${id}/resume`, { epochs: 2 }), 400, 'invalid', /^memory: .*limit of 200 MiB/);
    const c = await server.api('POST', '/api/v1/networks/check', { prototxt: MEDIUM, dataset: dsId });
    assert.equal(c.body.valid, false);
    assert.equal(c.body.memory.limit, 200 * MIB);
  });

  /** The worker of training id once it runs and has written memory.json: its pid, tracked. */
  async function workerOf(id) {
    const rec = join(server.dataDir, 'jobs', String(id), 'memory.json');
    await waitFor(async () => existsSync(rec) && (await getJob(server, id)).pid > 0, 30000);
    const pid = (await getJob(server, id)).pid;
    trackPid(pid);
    return pid;
  }

  test('a worker that runs out of memory ends "out of memory", and the server goes on', async (t) => {
    // (the server now runs with --job-memory-max 200M)
    // a runaway allocation stops at the worker's RLIMIT_DATA
    const h = await server.api('POST', '/api/v1/jobs', { kind: 'test', name: 'hog', params: { alloc_mb: 4096, steps: 1 } });
    assert.equal(h.status, 202, JSON.stringify(h.body));
    const hog = await waitState(server, h.body.job.id, ['done', 'error'], 60000);
    assert.equal(hog.state, 'error');
    assert.match(hog.error, /^out of memory \((\d+) MiB\)/);
    const got = Number(/^out of memory \((\d+) MiB\)/.exec(hog.error)[1]);
    assert.ok(got >= 100 && got < 1024, `stopped after ${got} MiB`);

    // a training killed by the kernel's OOM killer (a SIGKILL no abort sent, while the
    // machine's count of OOM kills rose); then the same kill with no OOM kill counted
    // is a person's kill -9 and is told as one
    const m = await server.api('POST', '/api/v1/models', {
      name: 'killed', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 10000, snapshot_interval: 10000, val_interval: 10000,
    });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const id = m.body.job.id;
    const pid = await workerOf(id);
    writeFileSync(oomFile, '1');
    process.kill(pid, 'SIGKILL');
    const dead = await waitState(server, id, ['error', 'done', 'aborted'], 30000);
    assert.equal(dead.state, 'error');
    t.diagnostic(dead.error);
    assert.match(dead.error, /^out of memory \(\d+ MiB at batch 4, limit \d+ MiB\): the worker was killed by signal 9 .*lower batch_size/);
    const m2 = await server.api('POST', `/api/v1/jobs/${id}/clone`);
    assert.equal(m2.status, 202, JSON.stringify(m2.body));
    const id2 = m2.body.job.id;
    const pid2 = await workerOf(id2);
    process.kill(pid2, 'SIGKILL');
    const killed = await waitState(server, id2, ['error', 'done', 'aborted'], 30000);
    assert.match(killed.error, /^the worker was killed by signal 9 \(Killed\)/, 'no OOM kill was counted: a person did it');

    // the server goes on: a small training still runs to the end
    const ok = await server.api('POST', '/api/v1/models', { name: 'after', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(ok.status, 202, JSON.stringify(ok.body));
    const fine = await waitState(server, ok.body.job.id, ['done', 'error'], 60000);
    assert.equal(fine.state, 'done', fine.error);
  });

  test('a training under the check whose real use exceeds its worker\'s limit ends "out of memory (N MiB at batch B)"', async (t) => {
    // The server (and so every worker) under a hard RLIMIT_DATA of 640 MiB, below a
    // --job-memory-max of 4G: a network of about 1.3 GiB passes the check and then
    // cannot get its memory in the worker.
    const wrapper = join(work, 'limited.sh');
    writeFileSync(wrapper, `#!/bin/sh\nexec prlimit --data=${640 * MIB} ${BIN} "$@"\n`);
    chmodSync(wrapper, 0o755);
    const tight = await startServer({ bin: wrapper, args: ['--data-root', work, '--job-memory-max', '4G', '--threads', '16'] });
    try {
      const ds = await folderDataset(tight, join(work, 'colours'));
      const big = wideNet(250000);
      const c = await tight.api('POST', '/api/v1/networks/check', { prototxt: big, dataset: ds });
      assert.equal(c.body.valid, true, JSON.stringify(c.body.error));
      assert.ok(c.body.memory.total > 1000 * MIB && c.body.memory.total < 4096 * MIB, `${c.body.memory.total}`);
      const m = await tight.api('POST', '/api/v1/models', { name: 'over', dataset: ds, network: { prototxt: big }, epochs: 1 });
      assert.equal(m.status, 202, JSON.stringify(m.body));
      const end = await waitState(tight, m.body.job.id, ['done', 'error'], 120000);
      assert.equal(end.state, 'error');
      t.diagnostic(end.error);
      const mib = Math.round(c.body.memory.total / MIB);
      assert.match(end.error, new RegExp(`^out of memory \\(${mib} MiB at batch 4, limit 640 MiB\\): .*lower batch_size`));
      // and the server goes on
      const ok = await tight.api('POST', '/api/v1/models', { name: 'small', dataset: ds, network: { prototxt: TINY_NET }, epochs: 1 });
      assert.equal((await waitState(tight, ok.body.job.id, ['done', 'error'], 60000)).state, 'done');
    } finally {
      await tight.stop();
      tight.cleanup();
    }
  });
});

describe('a memory quota per user', () => {
  let server, acc, work, admin, ann, annId, dsId;
  const waitAs = async (as, id, states, ms = 60000) => {
    const end = Date.now() + ms;
    for (;;) {
      const j = (await as('GET', `/api/v1/jobs/${id}`)).body.job;
      if (states.includes(j?.state) || Date.now() > end) return j;
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner' });
    work = mkdtempSync(join(tmpdir(), 'deepdesk-memquota-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 16);
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--data-root', work, '--job-memory-max', '8G'] });
    admin = await userClient(server, 'root');
    ann = await userClient(server, 'ann');
    annId = (await admin('GET', '/api/v1/users')).body.users.find((u) => u.name === 'ann').id;
    const d = await ann('POST', '/api/v1/datasets', {
      name: 'colours', source: { type: 'folder', train: join(work, 'colours') },
      options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
    });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    dsId = d.body.job.id;
    assert.equal((await waitAs(ann, dsId, ['done', 'error'])).state, 'done');
  });
  after(async () => { await server?.stop(); rmSync(acc.dir, { recursive: true, force: true }); rmSync(work, { recursive: true, force: true }); });

  test('shown and set through the user API; a training over it is refused naming the quota; the worker gets it', async () => {
    const u = (await admin('GET', `/api/v1/users`)).body.users.find((x) => x.id === annId);
    assert.equal(u.quota.memory_bytes, 4 * 1024 * MIB, 'a learner\'s default: 4 GiB');
    const p = await admin('PATCH', `/api/v1/users/${annId}`, { quota: { memory_bytes: 200 * MIB } });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.equal(p.body.user.quota.memory_bytes, 200 * MIB);
    assertError(await admin('PATCH', `/api/v1/users/${annId}`, { quota: { memory_bytes: -1 } }), 400, 'invalid', /quota\.memory_bytes/);
    // MEDIUM needs about 400 MiB: under the server's 8 GiB, over ann's 200 MiB, by every route
    const quota = /^memory: training this network at batch 4 needs about [\d.]+ MiB .*over your per-job memory quota of 200 MiB \(209715200 bytes, quota\.memory_bytes, which an admin sets\): lower/;
    assertError(await ann('POST', '/api/v1/models', { name: 'm', dataset: dsId, network: { prototxt: MEDIUM }, epochs: 1 }), 400, 'invalid', quota);
    assertError(await ann('POST', '/api/v1/jobs', { kind: 'model', name: 'm', params: { dataset: dsId, network: { prototxt: MEDIUM }, epochs: 1 } }),
      400, 'invalid', quota);
    // a small one passes; its worker runs under ann's limit
    const t = await ann('POST', '/api/v1/models', { name: 'tiny', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(t.status, 202, JSON.stringify(t.body));
    assert.equal((await waitAs(ann, t.body.job.id, ['done', 'error'])).state, 'done');
    const guard = JSON.parse(readFileSync(join(acc.data, 'jobs', String(t.body.job.id), 'job.json'), 'utf8')).guard;
    assert.equal(guard.memory_max, 200 * MIB);
    // the clone of a job made under a higher quota is checked against today's
    await admin('PATCH', `/api/v1/users/${annId}`, { quota: { memory_bytes: 1024 * MIB } });
    const m = await ann('POST', '/api/v1/models', { name: 'm', dataset: dsId, network: { prototxt: MEDIUM }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    await admin('PATCH', `/api/v1/users/${annId}`, { quota: { memory_bytes: 200 * MIB } });
    await ann('POST', `/api/v1/jobs/${m.body.job.id}/abort`, {});
    assertError(await ann('POST', `/api/v1/jobs/${m.body.job.id}/clone`, {}), 400, 'invalid', quota);
    // the admin has no memory quota: the server's 8 GiB holds
    const a = await admin('POST', '/api/v1/models', { name: 'a', dataset: dsId, network: { prototxt: MEDIUM }, epochs: 1 });
    assert.equal(a.status, 202, JSON.stringify(a.body));
    await admin('POST', `/api/v1/jobs/${a.body.job.id}/abort`, {});
    // null: the role's default again
    assert.equal((await admin('PATCH', `/api/v1/users/${annId}`, { quota: { memory_bytes: null } })).body.user.quota.memory_bytes, 4 * 1024 * MIB);
    await waitAs(admin, a.body.job.id, ['aborted', 'done', 'error']);
    await waitAs(ann, m.body.job.id, ['aborted', 'done', 'error']);
  });
});
