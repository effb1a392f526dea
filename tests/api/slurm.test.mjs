// slurm.test.mjs — the Slurm executor against a real single-node Slurm
// (tests/lib/slurm.mjs: munged, slurmctld and slurmd from Debian, started in a
// temporary folder and stopped by pid).  A dataset job and a short training run
// as Slurm batch jobs and end as they do locally; a job that waits shows Slurm's
// pending reason and its place in the queue; an abort ends `aborted` with a
// snapshot; `scancel --signal=KILL` ends `error` saying Slurm cancelled it; a
// restarted server finds its Slurm job again; `scontrol requeue` of a training
// starts the worker again, which resumes from its snapshot with its curves going
// on.  Where Slurm cannot run (not root, not installed), every test says SKIP and
// why, or fails where CI is set (need()); a Slurm that is there but does not start
// fails them all, with its daemons' logs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, allEvents, assertSchema, assertError, loadOpenApi, writeColourFolders, TINY_NET, BIN,
} from './helpers.mjs';
import { startSlurm, slurmMissing } from '../lib/slurm.mjs';
import { need } from '../lib/need.mjs';

const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };
const SLOW = 90000; // a loaded 2-core machine; squeue is polled every few seconds
const dataset = (s, dir) => s.api('POST', '/api/v1/datasets', {
  name: 'colours', source: { type: 'folder', train: dir },
  options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
});
const model = (ds, extra = {}) => ({ name: 'tiny', dataset: ds, network: { prototxt: TINY_NET }, epochs: 2, seed: 7, ...extra });

// These need no Slurm: they run everywhere.
describe('executor options', () => {
  test('a local server says so in /info; a bad --executor names what is wrong and the server does not start', async () => {
    const doc = loadOpenApi();
    const l = await startServer();
    try {
      const i = (await l.api('GET', '/api/v1/info')).body;
      assertSchema(doc, 'Info', i);
      assert.equal(i.executor.default, 'local');
      assert.equal(i.executor.slurm, undefined);
      assert.ok(Object.keys(i.executor.kinds).includes('model'));
      assert.ok(Object.values(i.executor.kinds).every((v) => v === 'local'));
      // a local job has no "executor" object
      const j = await l.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 5 } });
      assert.equal(j.status, 202, JSON.stringify(j.body));
      const done = await waitState(l, j.body.job.id, ['done', 'error'], 30000);
      assert.equal(done.state, 'done', done.error);
      assert.equal(done.executor, undefined);
    } finally { await l.stop(); l.cleanup(); }
    await assert.rejects(startServer({ args: ['--executor', 'model=pbs'] }), /--executor: "pbs" is not an executor \(local or slurm\)/);
    await assert.rejects(startServer({ args: ['--executor', 'modle=slurm'] }), /--executor: "modle" is not a job kind/);
    await assert.rejects(startServer({ args: ['--executor', '=slurm'] }), /--executor: "=slurm": expected KIND=EXECUTOR/);
    await assert.rejects(startServer({ args: ['--slurm-cpus', '0'] }), /--slurm-cpus/);
    // without the Slurm client, a Slurm server does not start, and says why
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await assert.rejects(startServer({ args: ['--executor', 'model=slurm'] }), /cannot run sbatch \(is the Slurm client installed\?\)/);
    } finally { process.env.PATH = path; }
  });

  test('a worker started again on its own folder (as Slurm does on a requeue) resumes from its latest snapshot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'deepdesk-requeue-'));
    const s = await startServer({ args: ['--data-root', dir, '--cpu-slots', '1'] });
    let worker;
    try {
      writeColourFolders(join(dir, 'colours'), COLOURS, 16);
      const d = (await dataset(s, join(dir, 'colours'))).body.job.id;
      assert.equal((await waitState(s, d, ['done', 'error'], SLOW)).state, 'done');
      const m = (await s.api('POST', '/api/v1/models', model(d, { epochs: 5000, batch_size: 1 }))).body.job.id;
      await waitFor(async () => (await allEvents(s, m)).filter((e) => e.type === 'metric' && e.kind === 'train').length > 2, SLOW, 'train metrics');
      assert.equal((await s.api('POST', `/api/v1/jobs/${m}/abort`)).status, 202);
      assert.equal((await waitState(s, m, ['aborted', 'error', 'done'], SLOW)).state, 'aborted');
      const jobDir = join(s.dataDir, 'jobs', String(m));
      const read = () => readFileSync(join(jobDir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const before = read();
      const snap = before.find((e) => e.type === 'result').snapshot;
      const lastIter = before.filter((e) => e.type === 'metric' && e.kind === 'train').at(-1).iteration;
      // what slurmd does on a requeue: the same command, the same folder, a restart count
      worker = spawn(BIN, ['worker', jobDir], { env: { ...process.env, SLURM_JOB_ID: '77', SLURM_RESTART_COUNT: '1' }, stdio: 'ignore' });
      const added = await waitFor(() => {
        const a = read().slice(before.length);
        return a.some((e) => e.type === 'metric' && e.kind === 'train') ? a : null;
      }, SLOW, 'the restarted worker to train');
      assert.ok(added.some((e) => e.type === 'log' && e.msg === 'started again by Slurm, restart 1: resuming from the latest snapshot'), JSON.stringify(added.slice(0, 4)));
      const label = snap.replace(/^snapshot_epoch_|\.safetensors$/g, '');
      assert.ok(added.some((e) => e.type === 'log' && e.msg.startsWith(`resuming from the snapshot at epoch ${label},`)), JSON.stringify(added.slice(0, 4)));
      const first = added.find((e) => e.type === 'metric' && e.kind === 'train');
      assert.ok(first.iteration > lastIter, `the curve goes on: ${first.iteration} after ${lastIter}`);
      // Slurm's SIGTERM without deepdesk's abort marker: a snapshot and "interrupted", not "aborted"
      worker.kill('SIGTERM');
      const stop = await waitFor(() => read().slice(before.length).findLast((e) => e.type === 'status' && e.state !== 'running'), SLOW, 'the worker to stop');
      assert.equal(stop.state, 'interrupted');
      assert.match(stop.message, /stopped by Slurm/);
    } finally {
      worker?.kill('SIGKILL');
      await s.stop(); s.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('slurm executor', () => {
  let cluster, server, local, work, doc, skip = slurmMissing();
  const job = async (s, id) => (await s.api('GET', `/api/v1/jobs/${id}`)).body.job;
  let dsSlurm, dsLocal, bigId;
  // long enough to be caught running: batch 1 on 900 images is 900 iterations an epoch
  const long = (extra = {}) => model(bigId, { name: 'long', epochs: 10000, batch_size: 1, ...extra });

  before(async () => {
    if (skip) return;
    cluster = await startSlurm(); // throws, failing every test below, with the daemons' logs
    Object.assign(process.env, cluster.env); // the server's sbatch/squeue find this cluster
    doc = loadOpenApi();
    work = mkdtempSync(join(tmpdir(), 'deepdesk-slurm-work-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 16);
    writeColourFolders(join(work, 'big'), COLOURS, 400);
    // every Slurm job asks for the whole node, so a second one has to wait
    server = await startServer({ args: ['--data-root', work, '--cpu-slots', '1', '--abort-grace', '20', '--executor', 'slurm',
      '--slurm-cpus', String(cluster.cpus), '--slurm-time', '30:00'] });
    local = await startServer({ args: ['--data-root', work, '--cpu-slots', '1'] });
  });
  after(async () => {
    await server?.stop(); server?.cleanup();
    await local?.stop(); local?.cleanup();
    await cluster?.stop?.();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('info shows the executor and the Slurm defaults', async (t) => {
    if (need(t, skip)) return;
    const i = await server.api('GET', '/api/v1/info');
    assertSchema(doc, 'Info', i.body);
    assert.equal(i.body.executor.default, 'slurm');
    assert.equal(i.body.executor.kinds.dataset, 'slurm');
    assert.equal(i.body.executor.kinds.model, 'slurm');
    assert.ok(Object.values(i.body.executor.kinds).every((v) => v === 'slurm'));
    assert.deepEqual(i.body.executor.slurm, { partition: null, account: null, cpus: cluster.cpus, mem: null, time: '30:00' });
    // per kind: datasets here, training on the cluster
    const mixed = await startServer({ args: ['--executor', 'slurm,dataset=local', '--slurm-partition', 'debug'] });
    try {
      const m = (await mixed.api('GET', '/api/v1/info')).body.executor;
      assert.equal(m.default, 'slurm');
      assert.equal(m.kinds.dataset, 'local');
      assert.equal(m.kinds.model, 'slurm');
      assert.equal(m.slurm.partition, 'debug');
    } finally { await mixed.stop(); mixed.cleanup(); }
  });

  test('a dataset job runs as a Slurm batch job and makes the dataset a local run makes', async (t) => {
    if (need(t, skip)) return;
    const [rs, rl] = [await dataset(server, join(work, 'colours')), await dataset(local, join(work, 'colours'))];
    assert.equal(rs.status, 202, JSON.stringify(rs.body));
    dsSlurm = rs.body.job.id;
    dsLocal = rl.body.job.id;
    const js = await waitState(server, dsSlurm, ['done', 'error', 'aborted'], SLOW);
    assert.equal(js.state, 'done', js.error);
    assert.equal((await waitState(local, dsLocal, ['done', 'error'], SLOW)).state, 'done');
    // the batch job: named for people reading squeue, asking what it was told
    assert.equal(js.executor.name, 'slurm');
    assert.match(js.executor.job_id, /^\d+$/);
    assertSchema(doc, 'JobResponse', { job: js });
    const dir = join(server.dataDir, 'jobs', String(dsSlurm));
    const script = readFileSync(join(dir, 'slurm.sh'), 'utf8');
    assert.match(script, new RegExp(`^#SBATCH --job-name=deepdesk-${dsSlurm}-dataset$`, 'm'));
    assert.match(script, new RegExp(`^#SBATCH --cpus-per-task=${cluster.cpus}$`, 'm'));
    assert.match(script, /^#SBATCH --time=30:00$/m);
    assert.match(script, /^#SBATCH --requeue$/m);
    assert.match(script, /^exec '.*' worker '.*'$/m);
    // Slurm says how it ended (squeue keeps finished jobs for MinJobAge)
    await waitFor(async () => (await job(server, dsSlurm)).executor.state === 'COMPLETED', SLOW, 'COMPLETED');
    const q = cluster.run('squeue', ['-h', '-t', 'all', '-j', js.executor.job_id, '-o', '%j|%T']).trim();
    assert.equal(q, `deepdesk-${dsSlurm}-dataset|COMPLETED`);
    // the same dataset as a local worker makes
    const ls = join(local.dataDir, 'jobs', String(dsLocal));
    for (const f of ['labels.txt', 'mean.binaryproto']) {
      assert.deepEqual(readFileSync(join(dir, f)), readFileSync(join(ls, f)), f);
    }
    const [a, b] = [JSON.parse(readFileSync(join(dir, 'dataset.json'), 'utf8')), JSON.parse(readFileSync(join(ls, 'dataset.json'), 'utf8'))];
    for (const k of ['options', 'labels', 'splits', 'skipped', 'disk_bytes']) assert.deepEqual(a[k], b[k], k);
  });

  test('a short training on Slurm ends done with the metrics and snapshot of a local one', async (t) => {
    if (need(t, skip)) return;
    assert.ok(dsSlurm, 'the dataset test above made no dataset');
    const rs = await server.api('POST', '/api/v1/models', model(dsSlurm));
    const rl = await local.api('POST', '/api/v1/models', model(dsLocal));
    assert.equal(rs.status, 202, JSON.stringify(rs.body));
    const [js, jl] = [await waitState(server, rs.body.job.id, ['done', 'error', 'aborted'], SLOW),
      await waitState(local, rl.body.job.id, ['done', 'error', 'aborted'], SLOW)];
    assert.equal(js.state, 'done', js.error);
    assert.equal(jl.state, 'done', jl.error);
    // what the training computed, not how fast it went
    const pick = (evs) => evs.filter((e) => e.type === 'metric').map((e) => [e.kind, e.iteration, e.epoch, e.lr, e.loss, e.accuracy]);
    const [ms, ml] = [pick(await allEvents(server, js.id)), pick(await allEvents(local, jl.id))];
    assert.ok(ms.length > 0);
    assert.deepEqual(ms, ml, 'the same curves');
    const snap = 'snapshot_epoch_2.safetensors';
    assert.deepEqual(readFileSync(join(server.dataDir, 'jobs', String(js.id), snap)),
      readFileSync(join(local.dataDir, 'jobs', String(jl.id), snap)), 'the same weights');
    // the big dataset for the long runs below
    const b = await dataset(server, join(work, 'big'));
    bigId = b.body.job.id;
    const bj = await waitState(server, bigId, ['done', 'error'], SLOW);
    assert.equal(bj.state, 'done', bj.error);
  });

  test('a cuda training asks the cluster for its GPUs: --gres=gpu:N, resources.gpu_count; ids are refused', async (t) => {
    if (need(t, skip)) return;
    assert.ok(dsSlurm, 'the dataset test above made no dataset');
    // this server has no GPU, its cluster does (or says why not)
    assertError(await server.api('POST', '/api/v1/models', model(dsSlurm, { backend: 'cuda', gpus: [0, 1] })), 400, 'invalid',
      /^gpus: a job on the cluster asks for a count of GPUs \(1 to 16\) or "any"; Slurm chooses which/);
    const r = await server.api('POST', '/api/v1/models', model(dsSlurm, { backend: 'cuda', gpus: 2 }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const id = r.body.job.id;
    const j = await waitState(server, id, ['done', 'error', 'aborted'], SLOW);
    const dir = join(server.dataDir, 'jobs', String(id));
    const jj = JSON.parse(readFileSync(join(dir, 'job.json'), 'utf8'));
    assert.equal(jj.resources.gpu_count, 2);
    assert.deepEqual(jj.resources.gpus, []);
    assert.equal(jj.params.backend, 'cuda', 'Slurm picks the devices: the worker counts from 0');
    assert.match(readFileSync(join(dir, 'slurm.sh'), 'utf8'), /^#SBATCH --gres=gpu:2$/m);
    // the test cluster has no GPU: Slurm refuses the request, and the job says so
    assert.equal(j.state, 'error');
    assert.match(j.error, /sbatch refused the job: .*gres/i);
  });

  test('a job that waits shows Slurm\'s pending reason and its place; abort while pending, then abort running: aborted with a snapshot', async (t) => {
    if (need(t, skip)) return;
    assert.ok(bigId, 'the training test above made no big dataset');
    const a = (await server.api('POST', '/api/v1/models', long())).body.job.id;
    await waitFor(async () => (await job(server, a)).executor?.state === 'RUNNING', SLOW, 'the first job running');
    await waitFor(async () => (await allEvents(server, a)).some((e) => e.type === 'metric' && e.iteration > 0), SLOW, 'a train metric');
    const b = (await server.api('POST', '/api/v1/models', long({ name: 'waits' }))).body.job.id;
    const pending = await waitFor(async () => {
      const j = await job(server, b);
      return j.executor?.state === 'PENDING' && j.executor.reason && j.executor.reason !== 'submitted' ? j : null;
    }, SLOW, 'the second job pending with a reason');
    assert.equal(pending.state, 'running', 'deepdesk holds it running; Slurm queues it');
    assert.match(pending.executor.reason, /^(Resources|Priority)$/);
    assert.equal(pending.executor.position, 1);
    assertSchema(doc, 'JobResponse', { job: pending });
    // aborting a job that waits cancels it in the queue
    assert.equal((await server.api('POST', `/api/v1/jobs/${b}/abort`)).status, 202);
    const eb = await waitState(server, b, ['aborted', 'error', 'done'], SLOW);
    assert.equal(eb.state, 'aborted', eb.error);
    // aborting a running one: SIGTERM through scancel, a snapshot, aborted
    assert.equal((await server.api('POST', `/api/v1/jobs/${a}/abort`)).status, 202);
    const ea = await waitState(server, a, ['aborted', 'error', 'done'], SLOW);
    assert.equal(ea.state, 'aborted', ea.error);
    const result = (await allEvents(server, a)).find((e) => e.type === 'result');
    assert.ok(result && result.stopped, JSON.stringify(result));
    assert.ok(existsSync(join(server.dataDir, 'jobs', String(a), result.snapshot)), result.snapshot);
  });

  test('scancel --signal=KILL ends the job error, saying Slurm cancelled it', async (t) => {
    if (need(t, skip)) return;
    assert.ok(bigId, 'the training test above made no big dataset');
    const id = (await server.api('POST', '/api/v1/models', long())).body.job.id;
    await waitFor(async () => (await allEvents(server, id)).some((e) => e.type === 'metric' && e.iteration > 0), SLOW, 'a train metric');
    const sid = (await job(server, id)).executor.job_id;
    cluster.run('scancel', ['--signal=KILL', sid]);
    const end = await waitState(server, id, ['aborted', 'error', 'done'], SLOW);
    assert.equal(end.state, 'error');
    assert.match(end.error, new RegExp(`Slurm cancelled the job .*\\(Slurm job ${sid}\\)`));
    assert.equal(end.executor.state, 'CANCELLED');
  });

  test('a restarted server finds its Slurm job again and goes on tailing it', async (t) => {
    if (need(t, skip)) return;
    assert.ok(bigId, 'the training test above made no big dataset');
    const id = (await server.api('POST', '/api/v1/models', long())).body.job.id;
    await waitFor(async () => (await allEvents(server, id)).some((e) => e.type === 'metric' && e.iteration > 0), SLOW, 'a train metric');
    const sid = (await job(server, id)).executor.job_id;
    const seen = (await job(server, id)).events;
    server = await server.restart();
    const j = await job(server, id);
    assert.equal(j.state, 'running', j.error);
    assert.equal(j.executor.job_id, sid);
    await waitFor(async () => (await job(server, id)).events > seen + 2, SLOW, 'new events after the restart');
    assert.equal((await server.api('POST', `/api/v1/jobs/${id}/abort`)).status, 202);
    const end = await waitState(server, id, ['aborted', 'error', 'done'], SLOW);
    assert.equal(end.state, 'aborted', end.error);
  });

  test('scontrol requeue: the worker starts again and resumes from its snapshot, its curve going on', async (t) => {
    if (need(t, skip)) return;
    assert.ok(bigId, 'the training test above made no big dataset');
    const id = (await server.api('POST', '/api/v1/models', long())).body.job.id;
    await waitFor(async () => (await allEvents(server, id)).filter((e) => e.type === 'metric' && e.iteration > 0).length > 2, SLOW, 'train metrics');
    const sid = (await job(server, id)).executor.job_id;
    cluster.run('scontrol', ['requeue', sid]);
    // the first run stops with a snapshot, the second starts from it
    const restarted = await waitFor(async () => {
      const evs = await allEvents(server, id);
      return evs.some((e) => e.type === 'log' && /started again by Slurm, restart 1: resuming from the latest snapshot/.test(e.msg)) &&
        evs.some((e) => e.type === 'metric' && e.iteration > 0 && e.seq > evs.findLast((x) => x.type === 'status' && x.state === 'running').seq) ? evs : null;
    }, SLOW, 'the worker to start again and train');
    const j = await job(server, id);
    assert.equal(j.state, 'running');
    assert.equal(j.executor.restarts, 1);
    const stops = restarted.filter((e) => e.type === 'status').map((e) => e.state);
    assert.deepEqual(stops, ['running', 'interrupted', 'running']);
    const cut = restarted.findIndex((e) => e.type === 'status' && e.state === 'interrupted');
    const result = restarted.slice(0, cut).find((e) => e.type === 'result');
    assert.ok(result && result.stopped, 'the first run wrote a snapshot');
    const resumeLog = restarted.find((e) => e.type === 'log' && /resuming from the snapshot at epoch/.test(e.msg));
    assert.ok(resumeLog, 'it resumed from a snapshot');
    assert.ok(resumeLog.msg.includes(result.snapshot.replace(/^snapshot_epoch_|\.safetensors$/g, '')), resumeLog.msg);
    const before = restarted.slice(0, cut).filter((e) => e.type === 'metric' && e.kind === 'train');
    const afterM = restarted.slice(cut).filter((e) => e.type === 'metric' && e.kind === 'train');
    assert.ok(afterM.length > 0);
    assert.ok(afterM[0].iteration > before.at(-1).iteration, `the curve goes on: ${afterM[0].iteration} after ${before.at(-1).iteration}`);
    assert.equal((await server.api('POST', `/api/v1/jobs/${id}/abort`)).status, 202);
    const end = await waitState(server, id, ['aborted', 'error', 'done'], SLOW);
    assert.equal(end.state, 'aborted', end.error);
  });
});
