// jobs.test.mjs — the /api/v1/jobs routes on the happy path: create, list (order,
// filters, paging), get, patch, clone, events paging, the job folder and history.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, createJob, getJob, allEvents, assertContiguous, assertError,
  killTrackedPids, trackPid, endServer,
} from './helpers.mjs';

const LIST_KEYS = ['id', 'kind', 'name', 'owner', 'state', 'progress', 'eta_s', 'created_at', 'started_at',
  'finished_at', 'error', 'parents', 'events'].sort();
const DETAIL_KEYS = [...LIST_KEYS, 'notes', 'params', 'resources', 'pid', 'exit', 'abort_requested', 'history',
  'children', 'log_tail'].sort();

describe('jobs', () => {
  let server;
  // --cpu-slots 2: a "blocker" job that takes both slots keeps every later job queued
  before(async () => { server = await startServer({ args: ['--cpu-slots', '2'] }); });
  after(() => endServer(server));

  async function withBlocker(fn) {
    const blocker = await createJob(server, { steps: 1000, step_ms: 20 }, { name: 'blocker', resources: { cpu_slots: 2 } });
    const running = await waitState(server, blocker.id, 'running');
    trackPid(running.pid);
    try {
      return await fn(blocker);
    } finally {
      await server.api('POST', `/api/v1/jobs/${blocker.id}/abort`);
      await waitState(server, blocker.id, 'aborted');
    }
  }

  test('create answers 202 with the detail form of a queued job', async () => {
    await withBlocker(async () => {
      const before = Date.now();
      const r = await server.api('POST', '/api/v1/jobs',
        { kind: 'test', name: 'first', params: { steps: 2, step_ms: 5 } });
      assert.equal(r.status, 202);
      assert.match(r.headers.get('content-type'), /^application\/json/);
      assert.deepEqual(Object.keys(r.body), ['job']);
      const j = r.body.job;
      assert.deepEqual(Object.keys(j).sort(), DETAIL_KEYS);
      assert.ok(Number.isInteger(j.id) && j.id >= 1);
      assert.equal(j.kind, 'test');
      assert.equal(j.name, 'first');
      assert.equal(j.owner, 'local');
      assert.equal(j.state, 'queued');
      assert.equal(j.progress, 0);
      assert.equal(j.eta_s, null);
      assert.ok(j.created_at >= before - 1000 && j.created_at <= Date.now() + 1000, `created_at ${j.created_at}`);
      assert.equal(j.started_at, null);
      assert.equal(j.finished_at, null);
      assert.equal(j.error, null);
      assert.deepEqual(j.parents, []);
      assert.equal(j.events, 0);
      assert.equal(j.notes, '');
      assert.deepEqual(j.params, { steps: 2, step_ms: 5 });
      assert.deepEqual(j.resources, { cpu_slots: 1, gpus: [] });
      assert.equal(j.pid, null);
      assert.equal(j.exit, null);
      assert.equal(j.abort_requested, false);
      assert.deepEqual(j.history, [{ state: 'queued', at: j.created_at }]);
      assert.deepEqual(j.children, []);
      assert.deepEqual(j.log_tail, []);
    });
  });

  test('a job without a name is called "KIND job", without params gets {}', async () => {
    const j = await createJob(server, undefined, { params: undefined });
    assert.equal(j.name, 'test job');
    assert.deepEqual(j.params, {});
    const empty = await createJob(server, { steps: 1, step_ms: 1 }, { name: '' });
    assert.equal(empty.name, 'test job');
    await waitState(server, j.id, 'done');
    await waitState(server, empty.id, 'done');
  });

  test('a job runs to done: folder, events, history, exit', async () => {
    const created = await createJob(server, { steps: 10, step_ms: 5 }, { name: 'runner' });
    const j = await waitState(server, created.id, 'done');
    assert.equal(j.progress, 1);
    assert.equal(j.error, null);
    assert.deepEqual(j.exit, { code: 0, signal: null });
    assert.ok(j.pid > 0);
    assert.equal(j.abort_requested, false);
    // history: one entry per state change, in order, matching the *_at fields
    assert.deepEqual(j.history.map((h) => h.state), ['queued', 'running', 'done']);
    assert.equal(j.history[0].at, j.created_at);
    assert.equal(j.history[1].at, j.started_at);
    assert.equal(j.history[2].at, j.finished_at);
    assert.ok(j.created_at <= j.started_at && j.started_at <= j.finished_at);
    for (const h of j.history) assert.ok(!('message' in h), `no message on ${h.state}`);
    assert.deepEqual(j.log_tail, Array.from({ length: 10 }, (_, i) => `step ${i + 1} of 10`));

    // the folder: job.json says what it is, events.jsonl what happened
    const dir = join(server.dataDir, 'jobs', String(j.id));
    const spec = JSON.parse(readFileSync(join(dir, 'job.json'), 'utf8'));
    assert.equal(spec.id, j.id);
    assert.equal(spec.kind, 'test');
    assert.equal(spec.name, 'runner');
    assert.deepEqual(spec.params, { steps: 10, step_ms: 5 });
    assert.deepEqual(spec.parents, []);
    for (const k of ['state', 'progress', 'history', 'pid']) assert.ok(!(k in spec), `job.json has no ${k}`);
    const lines = readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    // running + 10 × (log, metric, progress) + done
    assert.equal(lines.length, 32);
    assert.equal(j.events, 32);
    const events = await allEvents(server, j.id);
    assertContiguous(events);
    assert.deepEqual(events.map(({ seq, ...e }) => e), lines);
    assert.deepEqual([events[0].type, events[0].state], ['status', 'running']);
    assert.deepEqual([events.at(-1).type, events.at(-1).state], ['status', 'done']);
    const progress = events.filter((e) => e.type === 'progress').map((e) => e.progress);
    assert.deepEqual(progress, Array.from({ length: 10 }, (_, i) => (i + 1) / 10));
    const metrics = events.filter((e) => e.type === 'metric');
    assert.equal(metrics.length, 10);
    assert.deepEqual(metrics[4], { ...metrics[4], name: 'loss', value: 1 / 5, step: 5 });
    for (const e of events) assert.equal(typeof e.t, 'number');
  });

  test('events page with after/limit/last/more', async () => {
    const j = await createJob(server, { steps: 10, step_ms: 1 });
    await waitState(server, j.id, 'done');
    const seen = [];
    let after = 0;
    let pages = 0;
    for (;;) {
      const r = await server.api('GET', `/api/v1/jobs/${j.id}/events?after=${after}&limit=5`);
      assert.equal(r.status, 200);
      assert.deepEqual(Object.keys(r.body).sort(), ['events', 'last', 'more']);
      assert.ok(r.body.events.length <= 5);
      if (r.body.events.length) assert.equal(r.body.last, r.body.events.at(-1).seq);
      seen.push(...r.body.events);
      pages++;
      after = r.body.last;
      if (!r.body.more) break;
      assert.equal(r.body.events.length, 5, 'a page before the end is full');
    }
    assert.equal(pages, 7); // 32 events in pages of 5
    assert.equal(seen.length, 32);
    assertContiguous(seen);
    // a page from the middle
    const mid = await server.api('GET', `/api/v1/jobs/${j.id}/events?after=30&limit=5`);
    assert.deepEqual(mid.body.events.map((e) => e.seq), [31, 32]);
    assert.equal(mid.body.last, 32);
    assert.equal(mid.body.more, false);
    const exact = await server.api('GET', `/api/v1/jobs/${j.id}/events?after=29&limit=3`);
    assert.deepEqual(exact.body.events.map((e) => e.seq), [30, 31, 32]);
    assert.equal(exact.body.more, false);
    const notLast = await server.api('GET', `/api/v1/jobs/${j.id}/events?after=28&limit=3`);
    assert.equal(notLast.body.more, true);
    // past the end: nothing, and last stays where the client is
    const end = await server.api('GET', `/api/v1/jobs/${j.id}/events?after=32`);
    assert.deepEqual(end.body, { events: [], last: 32, more: false });
    // the default page holds them all
    const def = await server.api('GET', `/api/v1/jobs/${j.id}/events`);
    assert.equal(def.body.events.length, 32);
    assert.equal(def.body.more, false);
    // a queued job that never ran has no events
    await withBlocker(async () => {
      const q = await createJob(server, { steps: 1 });
      const r = await server.api('GET', `/api/v1/jobs/${q.id}/events`);
      assert.deepEqual(r.body, { events: [], last: 0, more: false });
      assert.equal((await server.api('POST', `/api/v1/jobs/${q.id}/abort`)).status, 202);
    });
    // bad paging parameters
    for (const q of ['after=-1', 'after=x', 'limit=0', 'limit=5001', 'limit=1.5']) {
      assertError(await server.api('GET', `/api/v1/jobs/${j.id}/events?${q}`), 400, 'invalid', new RegExp(q.split('=')[0]));
    }
  });

  test('GET one job; a trailing slash is tolerated', async () => {
    const j = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'getme' });
    const r = await server.api('GET', `/api/v1/jobs/${j.id}`);
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.body), ['job']);
    assert.equal(r.body.job.id, j.id);
    assert.equal(r.body.job.name, 'getme');
    const slash = await server.api('GET', `/api/v1/jobs/${j.id}/`);
    assert.equal(slash.status, 200);
    assert.equal(slash.body.job.id, j.id);
    await waitState(server, j.id, 'done');
  });

  test('list: newest first, list form, filters, limit/offset/total', async () => {
    const fresh = await startServer({ args: ['--cpu-slots', '2'] });
    try {
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push((await createJob(fresh, { steps: 1, step_ms: 1 }, { name: `j${i}` })).id);
      const failed = await createJob(fresh, { steps: 3, step_ms: 1, fail_at: 0 }, { name: 'bad' });
      ids.push(failed.id);
      for (const id of ids.slice(0, 5)) await waitState(fresh, id, 'done');
      await waitState(fresh, failed.id, 'error');

      const all = await fresh.api('GET', '/api/v1/jobs');
      assert.equal(all.status, 200);
      assert.deepEqual(Object.keys(all.body).sort(), ['jobs', 'total']);
      assert.equal(all.body.total, 6);
      assert.deepEqual(all.body.jobs.map((j) => j.id), [...ids].reverse());
      for (const j of all.body.jobs) assert.deepEqual(Object.keys(j).sort(), LIST_KEYS);

      const page = await fresh.api('GET', '/api/v1/jobs?limit=2&offset=1');
      assert.equal(page.body.total, 6);
      assert.deepEqual(page.body.jobs.map((j) => j.id), [ids[4], ids[3]]);
      const last = await fresh.api('GET', '/api/v1/jobs?limit=4&offset=4');
      assert.deepEqual(last.body.jobs.map((j) => j.id), [ids[1], ids[0]]);
      const beyond = await fresh.api('GET', '/api/v1/jobs?offset=100');
      assert.deepEqual(beyond.body, { jobs: [], total: 6 });
      const max = await fresh.api('GET', '/api/v1/jobs?limit=1000');
      assert.equal(max.body.jobs.length, 6);

      const done = await fresh.api('GET', '/api/v1/jobs?state=done');
      assert.equal(done.body.total, 5);
      assert.ok(done.body.jobs.every((j) => j.state === 'done'));
      const err = await fresh.api('GET', '/api/v1/jobs?state=error');
      assert.deepEqual(err.body.jobs.map((j) => j.id), [failed.id]);
      assert.equal(err.body.total, 1);
      const doneLimited = await fresh.api('GET', '/api/v1/jobs?state=done&limit=2');
      assert.equal(doneLimited.body.total, 5);
      assert.equal(doneLimited.body.jobs.length, 2);
      const byKind = await fresh.api('GET', '/api/v1/jobs?kind=test');
      assert.equal(byKind.body.total, 6);
      const otherKind = await fresh.api('GET', '/api/v1/jobs?kind=dataset');
      assert.deepEqual(otherKind.body, { jobs: [], total: 0 });
      const both = await fresh.api('GET', '/api/v1/jobs?kind=test&state=queued');
      assert.deepEqual(both.body, { jobs: [], total: 0 });

      for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'offset=-1', 'state=finished']) {
        assertError(await fresh.api('GET', `/api/v1/jobs?${q}`), 400, 'invalid', new RegExp(q.split('=')[0]));
      }
    } finally {
      await fresh.stop();
      fresh.cleanup();
    }
  });

  test('patch name and notes', async () => {
    const j = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'before' });
    await waitState(server, j.id, 'done');
    const r = await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: 'after', notes: 'lr 0.01 was too high' });
    assert.equal(r.status, 200);
    assert.equal(r.body.job.name, 'after');
    assert.equal(r.body.job.notes, 'lr 0.01 was too high');
    assert.equal(r.body.job.state, 'done');
    const n = await server.api('PATCH', `/api/v1/jobs/${j.id}`, { notes: '' });
    assert.equal(n.body.job.notes, '');
    assert.equal(n.body.job.name, 'after');
    const nothing = await server.api('PATCH', `/api/v1/jobs/${j.id}`, {});
    assert.equal(nothing.status, 200);
    assert.equal(nothing.body.job.name, 'after');
    const unicode = await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: 'modèle ✓ "quoted"' });
    assert.equal(unicode.body.job.name, 'modèle ✓ "quoted"');
    const got = await getJob(server, j.id);
    assert.equal(got.name, 'modèle ✓ "quoted"');
    const listed = await server.api('GET', '/api/v1/jobs?limit=1000');
    assert.equal(listed.body.jobs.find((x) => x.id === j.id).name, 'modèle ✓ "quoted"');
    // limits: name 200, notes 20000
    assert.equal((await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: 'n'.repeat(200), notes: 'x'.repeat(20000) })).status, 200);
    assertError(await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: 'n'.repeat(201) }), 400, 'invalid', /name/);
    assertError(await server.api('PATCH', `/api/v1/jobs/${j.id}`, { notes: 'x'.repeat(20001) }), 400, 'invalid', /notes/);
    assertError(await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: '' }), 400, 'invalid', /name/);
    assertError(await server.api('PATCH', `/api/v1/jobs/${j.id}`, { state: 'done' }), 400, 'invalid', /state/);
    assertError(await server.api('PATCH', `/api/v1/jobs/${j.id}`, { notes: 5 }), 400, 'invalid', /notes/);
    assertError(await server.api('PATCH', '/api/v1/jobs/999999', { name: 'x' }), 404, 'not_found', /999999/);
    const still = await getJob(server, j.id);
    assert.equal(still.name, 'n'.repeat(200));
    assert.equal(still.notes.length, 20000);
  });

  test('clone: same kind, params, parents, resources; new id; "(clone)"; queued', async () => {
    const parent = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'base' });
    await waitState(server, parent.id, 'done');
    const orig = await createJob(server, { steps: 3, step_ms: 2, log_lines: 2 },
      { name: 'orig', parents: [parent.id], resources: { cpu_slots: 2 } });
    await waitState(server, orig.id, 'done');
    await server.api('PATCH', `/api/v1/jobs/${orig.id}`, { notes: 'not copied' });
    await withBlocker(async () => {
      const r = await server.api('POST', `/api/v1/jobs/${orig.id}/clone`);
      assert.equal(r.status, 202);
      const c = r.body.job;
      assert.notEqual(c.id, orig.id);
      assert.ok(c.id > orig.id);
      assert.equal(c.kind, 'test');
      assert.equal(c.name, 'orig (clone)');
      assert.equal(c.state, 'queued');
      assert.deepEqual(c.params, { steps: 3, step_ms: 2, log_lines: 2 });
      assert.deepEqual(c.parents, [parent.id]);
      assert.deepEqual(c.resources, { cpu_slots: 2, gpus: [] });
      assert.equal(c.events, 0);
      assert.equal(c.progress, 0);
      assert.deepEqual(c.history.map((h) => h.state), ['queued']);
      assert.deepEqual((await getJob(server, parent.id)).children, [orig.id, c.id]);
      // a clone of a clone
      const cc = await server.api('POST', `/api/v1/jobs/${c.id}/clone`);
      assert.equal(cc.body.job.name, 'orig (clone) (clone)');
      for (const id of [c.id, cc.body.job.id]) assert.equal((await server.api('POST', `/api/v1/jobs/${id}/abort`)).status, 202);
    });
    // the original is untouched
    const o = await getJob(server, orig.id);
    assert.equal(o.name, 'orig');
    assert.equal(o.state, 'done');
    assertError(await server.api('POST', '/api/v1/jobs/999999/clone'), 404, 'not_found', /999999/);
  });

  test('parents and children', async () => {
    const a = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'a' });
    const b = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'b' });
    const c = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'c', parents: [b.id, a.id] });
    assert.deepEqual([...c.parents].sort((x, y) => x - y), [a.id, b.id]);
    assert.deepEqual((await getJob(server, a.id)).children, [c.id]);
    assert.deepEqual((await getJob(server, b.id)).children, [c.id]);
    const listed = (await server.api('GET', '/api/v1/jobs?limit=1000')).body.jobs.find((j) => j.id === c.id);
    assert.deepEqual([...listed.parents].sort((x, y) => x - y), [a.id, b.id]);
    for (const j of [a, b, c]) await waitState(server, j.id, 'done');
  });

  test('log_tail keeps the last 20 log lines', async () => {
    const j = await createJob(server, { steps: 30, step_ms: 0 });
    const done = await waitState(server, j.id, 'done');
    assert.equal(done.log_tail.length, 20);
    assert.equal(done.log_tail[0], 'step 11 of 30');
    assert.equal(done.log_tail.at(-1), 'step 30 of 30');
    const listed = (await server.api('GET', '/api/v1/jobs?limit=1')).body.jobs[0];
    assert.ok(!('log_tail' in listed));
  });

  test('progress and eta are reported while running', async () => {
    const j = await createJob(server, { steps: 20, step_ms: 50 });
    const mid = await waitFor(async () => {
      const x = await getJob(server, j.id);
      trackPid(x.pid);
      return x.state === 'running' && x.progress > 0 && x.progress < 1 ? x : null;
    }, 10000, 'progress between 0 and 1');
    assert.equal(typeof mid.eta_s, 'number');
    assert.ok(mid.eta_s > 0 && mid.eta_s < 1, `eta ${mid.eta_s}`);
    assert.ok(mid.started_at > 0);
    assert.equal(mid.finished_at, null);
    assert.ok(mid.pid > 0);
    assert.equal(mid.exit, null);
    assert.ok(mid.events > 1);
    const end = await waitState(server, j.id, 'done');
    assert.equal(end.progress, 1);
  });
});
