// restart_real.test.mjs — restarts and crashes with real job kinds, not the `test`
// kind: a LeNet training and an evaluation on a small dataset this file makes.
//  - the server stops (SIGTERM) or dies (SIGKILL) while a training or an evaluation
//    runs: the next server adopts the same worker, which finishes; the job is done
//    with one unbroken event log (seq 1..n, one running and one done status, train
//    iterations 1..N each once) and, for the training, the very weights of a run
//    that was never disturbed;
//  - the server dies and so does its worker: the next server says interrupted, and
//    a resume continues from the last snapshot to the same weights (an evaluation,
//    which has no resume, keeps its last running figures and is cloned);
//  - the worker alone is killed (SIGKILL) while the server runs: the job is an error
//    naming the signal, the server goes on, and a resume finishes it.
// A worker is held still with SIGSTOP at the moment a test is about (after a
// snapshot, after a running report) and let go with SIGCONT, so that "mid-run" is a
// fact the test checked, not a hope about how fast a loaded machine trains.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, getJob, allEvents, assertContiguous, wsConnect, folderDataset,
  writeColourFolders, killTrackedPids, trackPid, alive, TEST_TMP, fileEvents, holdWorker,
} from './helpers.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };
const EPOCHS = 20;
// a model that takes a few seconds: LeNet, 28×28 gray, 60 images a class (45 train),
// batch 16 (9 iterations an epoch), a snapshot every 5 epochs
const MODEL = {
  network: { standard: 'lenet' }, epochs: EPOCHS, batch_size: 16, snapshot_interval: 5,
  solver: { base_lr: 0.01, lr_policy: { policy: 'fixed' } }, seed: 7,
};
const LONG = 300000; // ms: how long any of these waits may take on a loaded machine (a hang, not a pace)

const jobDir = (server, id) => join(server.dataDir, 'jobs', String(id));

const snapshotLogs = (events) => events.filter((e) => e.type === 'log' && /^snapshot .* \(iteration \d+\)$/.test(e.msg));
const snapshotIteration = (e) => Number(/\(iteration (\d+)\)$/.exec(e.msg)[1]);

/** The train metrics of each run of the job (a run starts with a "running" status). */
function runs(events) {
  const out = [];
  for (const e of events) {
    if (e.type === 'status' && e.state === 'running') out.push([]);
    else if (e.type === 'metric' && e.kind === 'train') out.at(-1).push(e.iteration);
  }
  return out;
}

/** The job's log through the API is the file, seq 1..n, ending in one final status. */
async function assertWholeLog(server, id, finalState) {
  const events = await allEvents(server, id);
  assertContiguous(events);
  assert.deepEqual(events.map(({ seq, ...e }) => e), fileEvents(jobDir(server, id)), 'the API serves the file');
  assert.equal((await getJob(server, id)).events, events.length);
  const fins = events.filter((e) => e.type === 'status' && e.state !== 'running');
  assert.deepEqual(fins.map((e) => e.state), [finalState], 'one final status');
  assert.equal(events.at(-1), fins[0], 'the final status is the last event');
  return events;
}

const sha = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');
const finalWeights = (server, id) => join(jobDir(server, id), `snapshot_epoch_${EPOCHS}.safetensors`);

describe('restarts with real jobs', () => {
  let server, work, dsId, reference; // reference: sha256 of an undisturbed run's final weights
  const stale = [];

  /** Stop the server (how: 'stop', SIGTERM) or kill it ('kill', SIGKILL). */
  async function down(how) {
    if (how === 'kill') assert.equal((await server.kill()).signal, 'SIGKILL');
    else {
      const { code, signal } = await server.stop();
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, 'a clean stop exits 0');
    }
    stale.push(server);
  }
  /** A new server on the same data folder. */
  async function up() {
    server = await startServer({ dataDir: stale.at(-1).dataDir, args: ['--data-root', work] });
    return server;
  }

  async function newModel(name) {
    const r = await server.api('POST', '/api/v1/models', { name, dataset: dsId, ...MODEL });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const running = await waitState(server, r.body.job.id, 'running', LONG);
    trackPid(running.pid);
    return running;
  }

  /** A finished model: one of the trainings above, else (this test run alone) a short one. */
  async function finishedModel() {
    const done = (await server.api('GET', '/api/v1/models?limit=1000')).body.models.find((x) => x.state === 'done');
    if (done) return done;
    const r = await server.api('POST', '/api/v1/models', { name: 'for evaluations', dataset: dsId, ...MODEL, epochs: 2, snapshot_interval: 1 });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const end = await waitState(server, r.body.job.id, ['done', 'error', 'aborted', 'interrupted'], LONG);
    assert.equal(end.state, 'done', end.error);
    return end;
  }

  const partials = (ev) => ev.filter((e) => e.type === 'metric' && e.kind === 'partial');

  /** An evaluation of a finished model over the train split, one image a batch, its
   *  worker held (SIGSTOP) once it has reported a partial count: {id, job, dir, held}
   *  (held: the events up to then). */
  async function heldEvaluation() {
    const model = await finishedModel();
    const c = await server.api('POST', '/api/v1/evaluations',
      { model: model.id, source: { dataset: dsId, split: 'train' }, batch_size: 1 });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    const id = c.body.job.id;
    const job = await waitState(server, id, 'running', LONG);
    trackPid(job.pid);
    const dir = jobDir(server, id);
    const held = await holdWorker(job.pid, dir, (ev) => partials(ev).length >= 1, 'a running report');
    return { id, job, dir, held };
  }

  before(async () => {
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-restart-real-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 60, 28);
    // evaluation workers (of every server this file starts) pause after each batch,
    // so an evaluation of 135 images lasts seconds
    process.env.DEEPDESK_EVAL_DELAY_MS = '30';
    server = await startServer({ args: ['--data-root', work] });
    dsId = await folderDataset(server, join(work, 'colours'), { options: { width: 28, height: 28, channels: 1 }, timeout: LONG });
  });
  after(async () => {
    delete process.env.DEEPDESK_EVAL_DELAY_MS;
    killTrackedPids();
    for (const s of [...stale, server]) await s?.kill();
    server?.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  for (const how of ['kill', 'stop']) {
    test(`training: the server ${how === 'kill' ? 'is killed (SIGKILL)' : 'stops (SIGTERM)'} mid-run; the next adopts the worker, which finishes with every event and the weights of an undisturbed run`, async () => {
      const job = await newModel(`adopted-${how}`);
      const dir = jobDir(server, job.id);
      const held = await holdWorker(job.pid, dir, (ev) => snapshotLogs(ev).length >= 1, 'the first snapshot');
      await down(how);
      assert.ok(alive(job.pid), 'the worker outlived its server');
      // it goes on with no server at all: let it write, then hold it again
      process.kill(job.pid, 'SIGCONT');
      await holdWorker(job.pid, dir, (ev) => ev.length > held.length + 5, 'the worker to write with no server');
      await up();
      const ws = await wsConnect(server.url);
      try {
        await ws.subscribe(job.id);
        const adopted = await getJob(server, job.id);
        assert.equal(adopted.state, 'running', 'adopted, not settled');
        assert.equal(adopted.pid, job.pid);
        assert.equal(adopted.started_at, job.started_at);
        process.kill(job.pid, 'SIGCONT');
        const end = await waitState(server, job.id, ['done', 'error', 'aborted', 'interrupted'], LONG);
        assert.equal(end.state, 'done', end.error);
        assert.equal(end.error, null);
        assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'done']);
        const events = await assertWholeLog(server, job.id, 'done');
        const r = runs(events);
        assert.equal(r.length, 1, 'one run: the worker was never started again');
        const total = events.findLast((e) => e.type === 'result').iterations;
        assert.deepEqual(r[0], Array.from({ length: total }, (_, i) => i + 1), 'train iterations 1..N, each once');
        assert.equal(events.findLast((e) => e.type === 'result').epochs, EPOCHS);
        // what the new server pushed continues the log without a gap
        await ws.next((m) => m.type === 'job' && m.job.id === job.id && m.job.state === 'done', LONG, 'the done update on the WebSocket');
        const pushed = ws.all.filter((m) => m.type === 'events' && m.job === job.id).flatMap((m) => m.events);
        assert.ok(pushed.length > 0, 'the new server pushed the events it read');
        assertContiguous(pushed, pushed[0].seq, 'pushed after the restart');
        assert.deepEqual(pushed, events.slice(pushed[0].seq - 1));
      } finally {
        await ws.close();
      }
      await waitFor(() => !alive(job.pid), { timeout: LONG, what: 'the worker to exit' });
      const weights = sha(finalWeights(server, job.id));
      if (reference) assert.equal(weights, reference, 'the same weights as the other undisturbed run');
      reference = weights;
    });
  }

  test('training: server and worker both SIGKILLed after a snapshot; the next server says interrupted, and a resume goes on from that snapshot to the same weights', async () => {
    const job = await newModel('interrupted');
    const dir = jobDir(server, job.id);
    const held = await holdWorker(job.pid, dir, (ev) => snapshotLogs(ev).length >= 1, 'the first snapshot');
    const snapIt = snapshotIteration(snapshotLogs(held).at(-1));
    await down('kill');
    process.kill(job.pid, 'SIGKILL');
    await waitFor(() => !alive(job.pid), { timeout: LONG, what: 'the worker to die' });
    await up();
    const j = await getJob(server, job.id);
    assert.equal(j.state, 'interrupted');
    assert.match(j.error, /worker was gone when the server restarted/);
    assert.deepEqual(j.history.map((h) => h.state), ['queued', 'running', 'interrupted']);
    const m = (await server.api('GET', `/api/v1/models/${job.id}`)).body.model;
    assert.ok(m.snapshots.some((s) => s.iteration === snapIt && s.resumable), `snapshot at iteration ${snapIt}: ${JSON.stringify(m.snapshots)}`);
    await resumeAndFinish(server, job.id, snapIt, 'interrupted');
  });

  test('training: the worker alone is SIGKILLed; the job is an error naming the signal, the server goes on, and a resume finishes it', async () => {
    const job = await newModel('worker-killed');
    const dir = jobDir(server, job.id);
    const held = await holdWorker(job.pid, dir, (ev) => snapshotLogs(ev).length >= 1, 'the first snapshot');
    const snapIt = snapshotIteration(snapshotLogs(held).at(-1));
    process.kill(job.pid, 'SIGKILL');
    const j = await waitState(server, job.id, ['error', 'interrupted', 'done', 'aborted'], LONG);
    assert.equal(j.state, 'error');
    assert.match(j.error, /the worker was killed by signal 9 \(Killed\)/);
    assert.deepEqual(j.exit, { code: null, signal: 9 });
    assert.deepEqual(j.history.map((h) => h.state), ['queued', 'running', 'error']);
    assert.equal((await server.api('GET', '/api/v1/info')).status, 200, 'the server is up');
    assert.equal((await server.api('GET', '/api/v1/info')).body.jobs.cpu_slots_used, 0, 'its slot is free');
    await resumeAndFinish(server, job.id, snapIt, 'error');
  });

  /** Resume the stopped model id; it goes on from the snapshot at iteration snapIt to
   *  the end, its log one whole with a second run that starts right after snapIt. */
  async function resumeAndFinish(s, id, snapIt, from) {
    const r = await s.api('POST', `/api/v1/models/${id}/resume`);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const end = await waitState(s, id, ['done', 'error', 'aborted', 'interrupted'], LONG);
    assert.equal(end.state, 'done', end.error);
    assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', from, 'queued', 'running', 'done']);
    // the first run has no final status of its own (it was killed): the log ends in one
    const events = await assertWholeLog(s, id, 'done');
    const [first, second, ...more] = runs(events);
    assert.equal(more.length, 0, 'two runs');
    assert.ok(first.length >= snapIt, `the first run got to its snapshot: ${first.length} < ${snapIt}`);
    assert.deepEqual(first, Array.from({ length: first.length }, (_, i) => i + 1), 'the first run: 1, 2, 3, ...');
    const total = events.findLast((e) => e.type === 'result').iterations;
    assert.deepEqual(second, Array.from({ length: total - snapIt }, (_, i) => snapIt + 1 + i),
      `the resumed run trains iterations ${snapIt + 1}..${total}, each once`);
    assert.ok(events.some((e) => e.type === 'log' && /^resuming from the snapshot at epoch /.test(e.msg)));
    await waitFor(() => existsSync(finalWeights(s, id)), { timeout: LONG, what: 'the final snapshot' });
    if (reference) assert.equal(sha(finalWeights(s, id)), reference, 'resumed, the weights of an undisturbed run');
  }

  for (const how of ['kill', 'stop']) {
    test(`evaluation: the server ${how === 'kill' ? 'is killed (SIGKILL)' : 'stops (SIGTERM)'} mid-run; the next adopts the worker, which finishes every image`, async () => {
      const { id, job, dir, held } = await heldEvaluation();
      const count = partials(held).at(-1).count;
      await down(how);
      await up();
      const adopted = await getJob(server, id);
      assert.equal(adopted.state, 'running', 'adopted, not settled');
      assert.equal(adopted.pid, job.pid);
      process.kill(job.pid, 'SIGCONT');
      const end = await waitState(server, id, ['done', 'error', 'aborted', 'interrupted'], LONG);
      assert.equal(end.state, 'done', end.error);
      assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'done']);
      const events = await assertWholeLog(server, id, 'done');
      assert.equal(events.filter((e) => e.type === 'status' && e.state === 'running').length, 1, 'one run');
      const counts = events.filter((e) => e.type === 'metric').map((e) => e.count);
      assert.ok(counts.every((n, i) => i === 0 || n >= counts[i - 1]), `counts only grow: ${counts}`);
      const e = (await server.api('GET', `/api/v1/evaluations/${id}`)).body.evaluation;
      assert.equal(e.metrics.complete, true);
      assert.ok(count < e.metrics.total, `held midway: ${count} of ${e.metrics.total}`);
      assert.equal(e.metrics.count, e.metrics.total);
      assert.equal(e.metrics.errors, 0);
      const rows = readFileSync(join(dir, 'results.csv'), 'utf8').trim().split('\n').slice(1);
      assert.deepEqual(rows.map((l) => Number(l.split(',')[0])).sort((a, b) => a - b),
        Array.from({ length: e.metrics.total }, (_, i) => i), 'every image once in results.csv');
    });
  }

  test('evaluation: server and worker both SIGKILLed mid-run; the next server says interrupted, keeps what it counted, and a clone runs it all', async () => {
    const { id, job, held } = await heldEvaluation();
    await down('kill');
    process.kill(job.pid, 'SIGKILL');
    await waitFor(() => !alive(job.pid), { timeout: LONG, what: 'the worker to die' });
    await up();
    const e = (await server.api('GET', `/api/v1/evaluations/${id}`)).body.evaluation;
    assert.equal(e.state, 'interrupted');
    assert.match(e.error, /worker was gone when the server restarted/);
    assert.deepEqual(e.history.map((h) => h.state), ['queued', 'running', 'interrupted']);
    assert.equal(e.metrics, null, 'no metrics: it never ended');
    const h = partials(held).at(-1);
    assert.ok(e.partial && e.partial.count > 0, `running figures: ${JSON.stringify(e.partial)}`);
    for (const k of ['kind', 'count', 'total', 'errors', 'labelled']) assert.equal(e.partial[k], h[k], `the last running figures are kept: ${k}`);
    const conf = await server.api('GET', `/api/v1/evaluations/${id}/confusion`);
    assert.equal(conf.status, 409, JSON.stringify(conf.body));
    assert.equal((await server.api('GET', '/api/v1/info')).body.jobs.cpu_slots_used, 0, 'its slot is free');
    const clone = await server.api('POST', `/api/v1/jobs/${id}/clone`);
    assert.equal(clone.status, 202, JSON.stringify(clone.body));
    const end = await waitState(server, clone.body.job.id, ['done', 'error', 'aborted', 'interrupted'], LONG);
    assert.equal(end.state, 'done', end.error);
    const m = (await server.api('GET', `/api/v1/evaluations/${clone.body.job.id}`)).body.evaluation.metrics;
    assert.equal(m.complete, true);
    assert.equal(m.count, m.total);
  });
});
