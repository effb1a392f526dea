// restart.test.mjs — a server that dies or stops loses nothing: running workers are
// adopted and finish, dead ones become "interrupted", jobs that ended while it was
// down show how they ended, queued jobs run.  (The `test` kind; restart_real.test.mjs
// does the same with a real training and evaluation.)  Where a test is about a worker
// still running across the restart, the worker is held with SIGSTOP (holdWorker)
// until the new server has seen it, so no machine is too slow or too fast for it.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, createJob, getJob, allEvents, assertContiguous, assertError, wsConnect,
  killTrackedPids, trackPid, alive, fileEvents, holdWorker,
} from './helpers.mjs';

const LONG = 60000; // ms: what any wait here may take on a loaded machine

const servers = [];
const dirs = new Set();
async function start(opts = {}) {
  const s = await startServer(opts);
  servers.push(s);
  dirs.add(s.dataDir);
  return s;
}

/** Wait until the job runs and has reported at least n events; returns it. */
async function runningWith(server, id, n) {
  const j = await waitFor(async () => {
    const x = await getJob(server, id);
    return x.state === 'running' && x.events >= n ? x : null;
  }, LONG, `job ${id} to run and report ${n} events`);
  trackPid(j.pid);
  return j;
}

/** The job's events are all there: seq 1..n, the lines of events.jsonl, ending in a status. */
async function assertCompleteLog(server, job, count, finalState) {
  const events = await allEvents(server, job.id);
  assertContiguous(events);
  assert.equal(events.length, count);
  assert.equal(job.events, count);
  const lines = readFileSync(join(server.dataDir, 'jobs', String(job.id), 'events.jsonl'), 'utf8')
    .split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.deepEqual(events.map(({ seq, ...e }) => e), lines);
  assert.deepEqual([events.at(-1).type, events.at(-1).state], ['status', finalState]);
  return events;
}

describe('restart', () => {
  after(async () => {
    for (const s of servers) await s.kill();
    killTrackedPids();
    for (const d of dirs) rmSync(d, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  });

  test('SIGKILL while a job runs: the next server adopts it; it reports on and ends done with every event', async () => {
    const s1 = await start();
    const job = await createJob(s1, { steps: 40, step_ms: 100 });
    const before = await runningWith(s1, job.id, 20);
    const dir = join(s1.dataDir, 'jobs', String(job.id));
    // held at its 20th event or later, well before its end (121 events)
    const held = await holdWorker(before.pid, dir, (ev) => ev.length >= 20, 'the worker at its 20th event');
    const killed = await s1.kill();
    assert.equal(killed.signal, 'SIGKILL');
    assert.ok(alive(before.pid), 'the worker outlives the server');

    const s2 = await start({ dataDir: s1.dataDir });
    const ws = await wsConnect(s2.url);
    try {
      await ws.subscribe(job.id);
      const adopted = await getJob(s2, job.id);
      assert.equal(adopted.state, 'running');
      assert.equal(adopted.pid, before.pid);
      assert.equal(adopted.started_at, before.started_at);
      assert.equal(adopted.events, held.length, 'the new server read what the worker wrote');
      process.kill(before.pid, 'SIGCONT');
      // it keeps reporting through the new server
      const later = await waitFor(async () => {
        const x = await getJob(s2, job.id);
        return x.events > adopted.events + 6 && x.progress > adopted.progress ? x : null;
      }, LONG, 'new events and more progress');
      assert.ok(['running', 'done'].includes(later.state), later.state);
      const end = await waitState(s2, job.id, 'done', LONG);
      assert.equal(end.error, null);
      assert.equal(end.progress, 1);
      assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'done']);
      const events = await assertCompleteLog(s2, end, 1 + 40 * 3 + 1, 'done');
      // what the new server pushed continues the log without a gap
      await ws.next((m) => m.type === 'job' && m.job.state === 'done', LONG, 'the done update');
      const pushed = ws.all.filter((m) => m.type === 'events').flatMap((m) => m.events);
      assert.ok(pushed.length > 0);
      assertContiguous(pushed, pushed[0].seq, 'pushed after the restart');
      assert.deepEqual(pushed, events.slice(pushed[0].seq - 1));
      assert.deepEqual(pushed.at(-1), events.at(-1));
    } finally {
      await ws.close();
    }
    const lines = readFileSync(join(s2.dataDir, 'jobs', String(job.id), 'events.jsonl'), 'utf8').split('\n').filter(Boolean);
    assert.equal(lines.filter((l) => JSON.parse(l).type === 'status').length, 2, 'one running, one done status');
    await waitFor(() => !alive(before.pid), LONG, 'the worker to be gone');
  });

  test('SIGKILL the server, then the worker: after a restart the job is interrupted', async () => {
    const s1 = await start();
    const job = await createJob(s1, { steps: 40, step_ms: 100 });
    const running = await runningWith(s1, job.id, 5);
    // held mid-run: it cannot end before it is killed
    await holdWorker(running.pid, join(s1.dataDir, 'jobs', String(job.id)), (ev) => ev.length >= 5, 'the worker at its 5th event');
    await s1.kill();
    process.kill(running.pid, 'SIGKILL');
    await waitFor(() => !alive(running.pid), LONG, 'the worker to die');

    const s2 = await start({ dataDir: s1.dataDir });
    const j = await getJob(s2, job.id);
    assert.equal(j.state, 'interrupted');
    assert.match(j.error, /worker was gone when the server restarted/);
    assert.ok(j.finished_at >= j.started_at);
    assert.ok(j.progress > 0 && j.progress < 1, `progress ${j.progress}`);
    assert.deepEqual(j.history.map((h) => h.state), ['queued', 'running', 'interrupted']);
    assert.equal(j.history.at(-1).message, j.error);
    const events = await allEvents(s2, job.id);
    assertContiguous(events);
    assert.equal(events.filter((e) => e.type === 'status').at(-1).state, 'running', 'the log has no end');
    assertError(await s2.api('POST', `/api/v1/jobs/${job.id}/abort`), 409, 'conflict', /already interrupted/);
    const info = await s2.api('GET', '/api/v1/info');
    assert.equal(info.body.jobs.cpu_slots_used, 0, 'its slot is free');
    // it can be run again
    const clone = await s2.api('POST', `/api/v1/jobs/${job.id}/clone`);
    assert.equal(clone.status, 202);
    assert.deepEqual(clone.body.job.params, { steps: 40, step_ms: 100 });
    assert.equal((await s2.api('POST', `/api/v1/jobs/${clone.body.job.id}/abort`)).status, 202);
    await waitState(s2, clone.body.job.id, 'aborted');
  });

  /** A test job of params, running, its server SIGKILLed; once the worker has ended on
   *  its own, the next server on the same data: {s2, j} (j: the job as s2 has it). */
  async function endsWhileDown(params) {
    const s1 = await start();
    const job = await createJob(s1, params);
    const running = await runningWith(s1, job.id, 2);
    await s1.kill();
    await waitFor(() => !alive(running.pid), LONG, 'the worker to end on its own');
    const s2 = await start({ dataDir: s1.dataDir });
    return { s2, j: await getJob(s2, job.id) };
  }

  test('a job that finishes while the server is down (SIGKILL) shows done after the restart', async () => {
    const { s2, j } = await endsWhileDown({ steps: 8, step_ms: 60 });
    assert.equal(j.state, 'done');
    assert.equal(j.error, null);
    assert.equal(j.progress, 1);
    assert.deepEqual(j.history.map((h) => h.state), ['queued', 'running', 'done']);
    await assertCompleteLog(s2, j, 1 + 8 * 3 + 1, 'done');
  });

  test('a job that ends while the server is down shows how it ended: error, never aborted', async () => {
    const { j } = await endsWhileDown({ steps: 10, step_ms: 60, fail_at: 5 });
    assert.equal(j.state, 'error');
    assert.equal(j.error, 'test job failed at step 5 as asked');
  });

  test('a job that finishes during a clean stop (SIGTERM) shows done after the restart', async () => {
    const s1 = await start();
    const job = await createJob(s1, { steps: 6, step_ms: 50 });
    const running = await runningWith(s1, job.id, 2);
    // held while the server stops, let go once it has: it surely finishes with no server
    await holdWorker(running.pid, join(s1.dataDir, 'jobs', String(job.id)), (ev) => ev.length >= 2, 'the worker at its 2nd event');
    assert.deepEqual(await s1.stop(), { code: 0, signal: null });
    process.kill(running.pid, 'SIGCONT');
    await waitFor(() => !alive(running.pid), LONG, 'the worker to finish');
    const s2 = await start({ dataDir: s1.dataDir });
    const j = await waitState(s2, job.id, ['done', 'aborted', 'error', 'interrupted'], LONG);
    assert.equal(j.state, 'done');
    assert.equal(j.error, null);
    assert.equal(j.abort_requested, false);
    await assertCompleteLog(s2, j, 1 + 6 * 3 + 1, 'done');
  });

  test('queued jobs survive a crash and run, in order', async () => {
    const s1 = await start({ args: ['--cpu-slots', '1'] });
    const long = await createJob(s1, { steps: 100, step_ms: 50 }, { name: 'long' });
    trackPid((await waitState(s1, long.id, 'running')).pid);
    const q1 = await createJob(s1, { steps: 2, step_ms: 5 }, { name: 'q1' });
    const q2 = await createJob(s1, { steps: 2, step_ms: 5 }, { name: 'q2' });
    await s1.kill();
    const s2 = await start({ dataDir: s1.dataDir, args: ['--cpu-slots', '1'] });
    for (const q of [q1, q2]) {
      const j = await getJob(s2, q.id);
      assert.equal(j.state, 'queued');
      assert.deepEqual(j.params, { steps: 2, step_ms: 5 });
    }
    assert.equal((await getJob(s2, long.id)).state, 'running');
    assert.equal((await s2.api('POST', `/api/v1/jobs/${long.id}/abort`)).status, 202);
    assert.equal((await waitState(s2, long.id, 'aborted')).state, 'aborted');
    const [d1, d2] = [await waitState(s2, q1.id, 'done'), await waitState(s2, q2.id, 'done')];
    assert.ok(d2.started_at >= d1.finished_at, 'q1 before q2');
    await assertCompleteLog(s2, d1, 1 + 2 * 3 + 1, 'done');
  });

  test('SIGTERM: the server exits 0, its worker runs on, and the next server adopts it', async () => {
    const s1 = await start();
    const job = await createJob(s1, { steps: 40, step_ms: 100 });
    const running = await runningWith(s1, job.id, 4);
    const dir = join(s1.dataDir, 'jobs', String(job.id));
    // a stop that hangs fails here, named, rather than hanging the suite
    const exited = await Promise.race([s1.stop(), new Promise((r) => setTimeout(r, LONG, 'hung').unref())]);
    assert.notEqual(exited, 'hung', `the server did not exit within ${LONG} ms of SIGTERM`);
    assert.deepEqual(exited, { code: 0, signal: null }, 'a clean stop exits 0');
    assert.doesNotThrow(() => process.kill(running.pid, 0), 'the worker is alive');
    assert.ok(alive(running.pid), 'and not a zombie');
    const atStop = fileEvents(dir).length;
    // it goes on writing its log with no server; held there until the next server has seen it
    await holdWorker(running.pid, dir, (ev) => ev.length > atStop, 'the worker to write with no server');

    const s2 = await start({ dataDir: s1.dataDir });
    const adopted = await getJob(s2, job.id);
    assert.equal(adopted.state, 'running');
    assert.equal(adopted.pid, running.pid);
    process.kill(running.pid, 'SIGCONT');
    const end = await waitState(s2, job.id, 'done', LONG);
    await assertCompleteLog(s2, end, 1 + 40 * 3 + 1, 'done');
    // and it may be stopped the same way again
    const again = await s2.stop();
    assert.equal(again.code, 0);
  });

  test('an abort asked just before a crash is carried out by the next server', async () => {
    // the first server's grace is longer than any test: it cannot SIGKILL the worker itself
    const s1 = await start({ args: ['--abort-grace', '3600'] });
    const job = await createJob(s1, { steps: 40000, step_ms: 25, ignore_term: true });
    const running = await runningWith(s1, job.id, 2);
    assert.equal((await s1.api('POST', `/api/v1/jobs/${job.id}/abort`)).status, 202);
    await s1.kill(); // long before the grace period's SIGKILL
    assert.ok(alive(running.pid));
    const s2 = await start({ dataDir: s1.dataDir, args: ['--abort-grace', '1'] });
    const end = await waitState(s2, job.id, 'aborted', LONG);
    assert.equal(end.abort_requested, true);
    assert.equal(end.error, 'aborted on request');
    await waitFor(() => !alive(running.pid), LONG, 'the worker to be killed');
  });
});
