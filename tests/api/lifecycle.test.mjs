// lifecycle.test.mjs — how jobs end: done, error (reported, crash, exit status),
// aborted (queued, running, SIGKILL after the grace period), and what abort and
// delete refuse.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, createJob, getJob, allEvents, assertContiguous, assertError,
  killTrackedPids, trackPid, alive, fashionMnistSkip,
} from './helpers.mjs';

const LONG = 60000; // ms: what any wait here may take on a loaded machine
const lastStatusOf = (events) => events.filter((e) => e.type === 'status').at(-1);

/** Run a short job to its end on server: on one slot, first come first served, so
 *  once it has run every job queued before it has had its chance to start. */
async function probe(server) {
  const p = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'probe' });
  return waitState(server, p.id, 'done', LONG);
}

describe('lifecycle', () => {
  let server;
  // one slot: jobs run one at a time, so a long first job keeps the next one queued;
  // a grace period no loaded machine reaches, so a job that handles SIGTERM always
  // ends by itself (the SIGKILL after the grace has a server of its own, below)
  before(async () => { server = await startServer({ args: ['--cpu-slots', '1', '--abort-grace', '120'] }); });
  after(async () => {
    await server?.stop();
    killTrackedPids();
    server?.cleanup();
  });

  const lastStatus = (events) => events.filter((e) => e.type === 'status').at(-1);

  test('done: exit code 0, final status event, no error', async () => {
    const j = await createJob(server, { steps: 3, step_ms: 5 });
    const done = await waitState(server, j.id, 'done');
    assert.deepEqual(done.exit, { code: 0, signal: null });
    assert.equal(done.error, null);
    assert.equal(done.progress, 1);
    const events = await allEvents(server, j.id);
    assertContiguous(events);
    assert.equal(lastStatus(events).state, 'done');
    assert.equal(events.at(-1).type, 'status');
  });

  test('fail_at: error with the worker\'s own message', async () => {
    const j = await createJob(server, { steps: 10, step_ms: 5, fail_at: 2 });
    const end = await waitState(server, j.id, 'error');
    assert.equal(end.error, 'test job failed at step 2 as asked');
    assert.deepEqual(end.exit, { code: 1, signal: null });
    assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'error']);
    assert.equal(end.history[2].message, end.error);
    assert.ok(end.progress > 0 && end.progress < 1, `progress ${end.progress}`);
    assert.ok(end.finished_at >= end.started_at);
    const events = await allEvents(server, j.id);
    assertContiguous(events);
    assert.deepEqual([lastStatus(events).state, lastStatus(events).message], ['error', end.error]);
    // steps 0 and 1 ran, step 2 did not
    assert.equal(events.filter((e) => e.type === 'metric').length, 2);
  });

  test('crash_at: error naming the signal (SIGSEGV, 11)', async () => {
    const j = await createJob(server, { steps: 10, step_ms: 5, crash_at: 3 });
    const end = await waitState(server, j.id, 'error');
    assert.deepEqual(end.exit, { code: null, signal: 11 });
    assert.match(end.error, /signal 11/);
    assert.match(end.error, /Segmentation fault|SIGSEGV/);
    assert.equal(end.history.at(-1).message, end.error);
    const events = await allEvents(server, j.id);
    assertContiguous(events);
    assert.equal(lastStatus(events).state, 'running', 'the worker wrote no final status');
    assert.equal(events.filter((e) => e.type === 'metric').length, 3);
  });

  test('exit_at + exit_code: error naming the exit status', async () => {
    const j = await createJob(server, { steps: 10, step_ms: 5, exit_at: 1, exit_code: 7 });
    const end = await waitState(server, j.id, 'error');
    assert.deepEqual(end.exit, { code: 7, signal: null });
    assert.match(end.error, /status 7/);
    const zero = await createJob(server, { steps: 10, step_ms: 5, exit_at: 1, exit_code: 0 });
    const z = await waitState(server, zero.id, ['error', 'done']);
    assert.equal(z.state, 'error', 'exit 0 without a final status is not done');
    assert.match(z.error, /status 0/);
  });

  test('jobs run one at a time on one slot, first come first served', async () => {
    const a = await createJob(server, { steps: 4, step_ms: 20 }, { name: 'first' });
    const b = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'second' });
    const c = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'third' });
    const [ea, eb, ec] = [await waitState(server, a.id, 'done'), await waitState(server, b.id, 'done'),
      await waitState(server, c.id, 'done')];
    assert.ok(eb.started_at >= ea.finished_at, 'second started after first ended');
    assert.ok(ec.started_at >= eb.finished_at, 'third started after second ended');
  });

  test('abort a queued job: aborted at once, never started', async () => {
    const long = await createJob(server, { steps: 200, step_ms: 20 }, { name: 'long' });
    trackPid((await waitState(server, long.id, 'running')).pid);
    const q = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'waiting' });
    assert.equal((await getJob(server, q.id)).state, 'queued');
    const r = await server.api('POST', `/api/v1/jobs/${q.id}/abort`);
    assert.equal(r.status, 202);
    assert.equal(r.body.job.state, 'aborted');
    assert.equal(r.body.job.started_at, null);
    assert.equal(r.body.job.pid, null);
    assert.ok(r.body.job.finished_at > 0);
    assert.match(r.body.job.error, /before it started/);
    assert.deepEqual(r.body.job.history.map((h) => h.state), ['queued', 'aborted']);
    // a second abort: already aborted
    assertError(await server.api('POST', `/api/v1/jobs/${q.id}/abort`), 409, 'conflict', /already aborted/);
    // it never starts, even when the slot frees
    assert.equal((await server.api('POST', `/api/v1/jobs/${long.id}/abort`)).status, 202);
    await waitState(server, long.id, 'aborted');
    // a job queued after it starts and ends: the scheduler has passed it by
    const p = await probe(server);
    const still = await getJob(server, q.id);
    assert.equal(still.state, 'aborted');
    assert.equal(still.started_at, null);
    assert.deepEqual((await server.api('GET', `/api/v1/jobs/${q.id}/events`)).body.events, []);
    assert.ok(p.started_at >= (await getJob(server, long.id)).finished_at, 'the probe ran after the slot freed');
  });

  test('abort a running job: SIGTERM, it stops at the next step and ends aborted', async () => {
    const j = await createJob(server, { steps: 400, step_ms: 25 });
    const running = await waitFor(async () => {
      const x = await getJob(server, j.id);
      return x.state === 'running' && x.events >= 4 ? x : null;
    }, LONG, 'the job to report');
    trackPid(running.pid);
    const r = await server.api('POST', `/api/v1/jobs/${j.id}/abort`);
    assert.equal(r.status, 202);
    assert.equal(r.body.job.abort_requested, true);
    assert.ok(['running', 'aborted'].includes(r.body.job.state));
    const end = await waitState(server, j.id, 'aborted', LONG);
    // exit status 2 is the worker's own: it stopped on SIGTERM, long before the grace's SIGKILL
    assert.deepEqual(end.exit, { code: 2, signal: null }, 'its own exit, not SIGKILL');
    assert.equal(end.abort_requested, true);
    assert.ok(end.progress < 1);
    assert.equal(typeof end.error, 'string');
    assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'aborted']);
    const events = await allEvents(server, j.id);
    assertContiguous(events);
    assert.equal(lastStatus(events).state, 'aborted');
    assert.ok(events.some((e) => e.type === 'log' && /stopping at step/.test(e.msg)));
    await waitFor(() => !alive(running.pid), { timeout: LONG, what: 'the worker to be gone' });
  });

  test('abort of a finished job: 409 for done, error and aborted', async () => {
    const done = await createJob(server, { steps: 1, step_ms: 1 });
    const failed = await createJob(server, { steps: 3, step_ms: 1, fail_at: 0 });
    await waitState(server, done.id, 'done');
    await waitState(server, failed.id, 'error');
    for (const [id, state] of [[done.id, 'done'], [failed.id, 'error']]) {
      assertError(await server.api('POST', `/api/v1/jobs/${id}/abort`), 409, 'conflict', new RegExp(`already ${state}`));
      const after = await getJob(server, id);
      assert.equal(after.state, state);
      assert.equal(after.abort_requested, false);
    }
  });

  test('delete a running job: 409; delete with dependants: 409 naming them', async () => {
    const a = await createJob(server, { steps: 200, step_ms: 20 }, { name: 'A' });
    trackPid((await waitState(server, a.id, 'running')).pid);
    assertError(await server.api('DELETE', `/api/v1/jobs/${a.id}`), 409, 'conflict', /running/);
    const b = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'B', parents: [a.id] });
    assert.equal((await server.api('POST', `/api/v1/jobs/${a.id}/abort`)).status, 202);
    await waitState(server, a.id, 'aborted');
    await waitState(server, b.id, 'done'); // a child of an aborted job still runs: it was asked for
    const refused = await server.api('DELETE', `/api/v1/jobs/${a.id}`);
    assertError(refused, 409, 'conflict');
    assert.match(refused.body.error.message, new RegExp(`\\b${b.id}\\b`), 'the message names the dependant');
    const dirA = join(server.dataDir, 'jobs', String(a.id));
    const dirB = join(server.dataDir, 'jobs', String(b.id));
    assert.ok(existsSync(dirA));
    // B first, then A
    const delB = await server.api('DELETE', `/api/v1/jobs/${b.id}`);
    assert.equal(delB.status, 204);
    assert.equal(delB.body, null);
    assert.ok(!existsSync(dirB));
    assert.deepEqual((await getJob(server, a.id)).children, []);
    const delA = await server.api('DELETE', `/api/v1/jobs/${a.id}`);
    assert.equal(delA.status, 204);
    assert.ok(!existsSync(dirA), 'the folder is gone');
    assertError(await server.api('GET', `/api/v1/jobs/${a.id}`), 404, 'not_found');
    assertError(await server.api('GET', `/api/v1/jobs/${a.id}/events`), 404, 'not_found');
    assertError(await server.api('DELETE', `/api/v1/jobs/${a.id}`), 404, 'not_found');
    const list = await server.api('GET', '/api/v1/jobs?limit=1000');
    assert.ok(!list.body.jobs.some((j) => j.id === a.id || j.id === b.id));
    // ids are not reused
    const next = await createJob(server, { steps: 1, step_ms: 1 });
    assert.ok(next.id > b.id);
    await waitState(server, next.id, 'done');
  });

  test('delete a queued job: 204, and it never runs', async () => {
    const long = await createJob(server, { steps: 200, step_ms: 20 });
    trackPid((await waitState(server, long.id, 'running')).pid);
    const q = await createJob(server, { steps: 1, step_ms: 1 });
    assert.equal((await server.api('DELETE', `/api/v1/jobs/${q.id}`)).status, 204);
    assert.equal((await server.api('POST', `/api/v1/jobs/${long.id}/abort`)).status, 202);
    await waitState(server, long.id, 'aborted');
    await probe(server); // queued after it, and done: q had its chance to start
    assertError(await server.api('GET', `/api/v1/jobs/${q.id}`), 404, 'not_found');
    assert.ok(!existsSync(join(server.dataDir, 'jobs', String(q.id))));
    assert.equal((await server.api('GET', '/api/v1/info')).body.jobs.cpu_slots_used, 0);
  });
});

describe('abort grace', () => {
  const GRACE = 4000; // ms, --abort-grace 4
  let server;
  before(async () => { server = await startServer({ args: ['--abort-grace', String(GRACE / 1000)] }); });
  after(async () => {
    await server?.stop();
    killTrackedPids();
    server?.cleanup();
  });

  // Times here are bounds a slow machine can only widen: the worker stamps each
  // event with the clock this process reads, the abort reaches the server after
  // t1a and was handled before t1, and a second abort is handled after t2.
  test('abort a job that ignores SIGTERM: it runs on through --abort-grace, then SIGKILL; asking again does not restart the grace', async () => {
    const j = await createJob(server, { steps: 40000, step_ms: 25, ignore_term: true });
    const running = await waitFor(async () => {
      const x = await getJob(server, j.id);
      return x.state === 'running' && x.events >= 2 ? x : null;
    }, { timeout: LONG, what: 'the job to report' });
    trackPid(running.pid);
    const t1a = Date.now();
    const first = await server.api('POST', `/api/v1/jobs/${j.id}/abort`);
    const t1 = Date.now();
    assert.equal(first.status, 202);
    assert.equal(first.body.job.state, 'running', 'SIGTERM sent, the job runs on');
    assert.equal(first.body.job.abort_requested, true);
    // the worker goes on writing at least half the grace after SIGTERM
    const lastT = async () => (await allEvents(server, j.id)).at(-1).t * 1000;
    await waitFor(async () => (await lastT()) >= t1 + GRACE / 2, { timeout: LONG, what: `an event ${GRACE / 2} ms after the abort` });
    // asking again while it stops is fine, and does not restart the grace period
    const t2 = Date.now();
    const again = await server.api('POST', `/api/v1/jobs/${j.id}/abort`);
    assert.equal(again.status, 202);
    assert.equal(again.body.job.abort_requested, true);
    const end = await waitState(server, j.id, 'aborted', LONG);
    assert.deepEqual(end.exit, { code: null, signal: 9 }, 'SIGKILL ended it');
    assert.match(end.error, /abort/);
    assert.ok(end.finished_at >= t1a + GRACE, `killed ${end.finished_at - t1a} ms after the abort, not before the ${GRACE} ms grace`);
    // killed at the first abort's grace (at most t2 + GRACE/2), not the second's (t2 + GRACE at least)
    const last = await lastT();
    assert.ok(last < t2 + GRACE * 0.85, `its last event ${last - t2} ms after the second abort: the grace restarted`);
    await waitFor(() => !alive(running.pid), { timeout: LONG, what: 'the worker to be gone' });
  });
});

describe('dataset jobs', () => {
  let server;
  // a grace no loaded machine reaches: the build must stop by itself
  before(async () => { server = await startServer({ args: ['--abort-grace', '120'] }); });
  after(async () => {
    await server?.stop();
    killTrackedPids();
    server?.cleanup();
  });

  test('abort of a running dataset job: it stops by itself, well inside the grace period', async (t) => {
    const r = await server.api('POST', '/api/v1/datasets',
      { name: 'abort me', source: { type: 'example', name: 'fashion-mnist' }, options: { width: 28, height: 28, channels: 1 } });
    // only a machine without Debian's dataset-fashion-mnist may skip, and never CI
    const skip = fashionMnistSkip(r);
    if (skip) return t.skip(skip);
    const id = r.body.job.id;
    const running = await waitState(server, id, 'running', LONG);
    trackPid(running.pid);
    try {
      // it is building: a progress report, not a sleep, says so
      await waitFor(async () => (await allEvents(server, id)).some((e) => e.type === 'progress'),
        { timeout: LONG, what: 'the build\'s first progress report' });
      assert.equal((await server.api('POST', `/api/v1/jobs/${id}/abort`)).status, 202);
      const end = await waitState(server, id, ['aborted', 'error', 'done'], LONG);
      assert.equal(end.state, 'aborted', end.error);
      assert.equal(end.exit?.signal, null, `its own exit, not the grace's SIGKILL: ${JSON.stringify(end.exit)}`);
      assert.equal(lastStatusOf(await allEvents(server, id)).state, 'aborted', 'it wrote its own end');
    } finally {
      try { process.kill(running.pid, 'SIGKILL'); } catch { /* gone */ }
    }
  });
});
