// ws.test.mjs — the WebSocket at /api/v1/ws: subscriptions, job updates, event
// batches without gaps, unsubscribe, bad frames, and many clients at once.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, waitState, waitFor, createJob, allEvents, assertContiguous, wsConnect, killTrackedPids, trackPid,
} from './helpers.mjs';

const LIST_KEYS = ['id', 'kind', 'name', 'owner', 'state', 'progress', 'eta_s', 'created_at', 'started_at',
  'finished_at', 'error', 'parents', 'events'].sort();

/** The events of job id a client got, in arrival order. */
const eventsOf = (client, id) => client.all.filter((m) => m.type === 'events' && m.job === id).flatMap((m) => m.events);
const jobMsgs = (client, id) => client.all.filter((m) => m.type === 'job' && m.job.id === id);
const LONG = 60000; // ms: what any wait here may take on a loaded machine

describe('websocket', () => {
  let server;
  const clients = [];
  async function connect() {
    const c = await wsConnect(server.url);
    clients.push(c);
    return c;
  }
  /** Hold the only CPU slot so the next jobs stay queued until release(). */
  async function hold() {
    const h = await createJob(server, { steps: 10000, step_ms: 20 }, { name: 'holder' });
    trackPid((await waitState(server, h.id, 'running')).pid);
    return async () => {
      await server.api('POST', `/api/v1/jobs/${h.id}/abort`);
      await waitState(server, h.id, 'aborted');
    };
  }

  /** A fence: a short job made now, subscribed by its id, until client c has its
   *  "done".  The scheduler pushes in order and one socket keeps it, so whatever the
   *  server was going to send c before (an event twice, a job after unsubscribing)
   *  has come by then: the positive event after which "nothing more" can be said. */
  async function fence(c) {
    const f = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'fence' });
    await c.subscribe(f.id);
    await c.next((m) => m.type === 'job' && m.job.id === f.id && m.job.state === 'done', LONG, 'the fence job\'s done update');
    return f.id;
  }

  // 20 clients at once and more, all from 127.0.0.1: past the 16 WebSockets one
  // address may hold by default (hostile_client.test.mjs tests that limit)
  before(async () => { server = await startServer({ args: ['--cpu-slots', '1', '--ws-per-addr', '64'] }); });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server?.stop();
    killTrackedPids();
    server?.cleanup();
  });

  test('subscribe answers "subscribed" with the topic', async () => {
    const c = await connect();
    assert.deepEqual(await c.subscribe('all'), { type: 'subscribed', topic: 'all' });
    assert.deepEqual(await c.subscribe('jobs'), { type: 'subscribed', topic: 'jobs' });
    assert.deepEqual(await c.subscribe(42), { type: 'subscribed', topic: 42 });
    // subscribing twice is fine
    assert.deepEqual(await c.subscribe(42), { type: 'subscribed', topic: 42 });
    c.send({ unsubscribe: 42 });
    assert.deepEqual(await c.next((m) => m.type === 'unsubscribed'), { type: 'unsubscribed', topic: 42 });
    c.send({ unsubscribe: 'all' });
    assert.deepEqual(await c.next((m) => m.type === 'unsubscribed'), { type: 'unsubscribed', topic: 'all' });
  });

  test('"all": job updates in list form and every event, seq without gaps, equal to GET /events', async () => {
    const release = await hold(); // so that the creation is seen while the job is queued
    const c = await connect();
    await c.subscribe('all');
    const j = await createJob(server, { steps: 20, step_ms: 10, log_lines: 2 });
    await release();
    await waitState(server, j.id, 'done', LONG);
    await c.next((m) => m.type === 'job' && m.job.id === j.id && m.job.state === 'done', LONG, 'the done update');
    const rest = await allEvents(server, j.id);
    await waitFor(() => eventsOf(c, j.id).length >= rest.length, LONG, 'every event over the socket');
    await fence(c); // and no event twice
    const got = eventsOf(c, j.id);
    assertContiguous(got, 1, 'websocket events');
    assert.deepEqual(got, rest);
    assert.equal(got.length, 1 + 20 * 4 + 1);
    for (const m of c.all.filter((x) => x.type === 'events' && x.job === j.id)) {
      assert.deepEqual(Object.keys(m).sort(), ['events', 'job', 'type']);
      assert.ok(m.events.length >= 1);
    }
    const updates = jobMsgs(c, j.id);
    for (const u of updates) assert.deepEqual(Object.keys(u.job).sort(), LIST_KEYS);
    const states = updates.map((u) => u.job.state);
    assert.equal(states[0], 'queued', 'the creation is pushed');
    assert.ok(states.includes('running'));
    assert.equal(states.at(-1), 'done');
    // progress only grows
    const progress = updates.map((u) => u.job.progress);
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i] >= progress[i - 1], `progress ${progress}`);
    assert.ok(updates.some((u) => u.job.progress > 0 && u.job.progress < 1), 'progress while running');
    assert.equal(updates.at(-1).job.events, got.length);
  });

  test('"jobs": job updates and deletions, no events', async () => {
    const c = await connect();
    await c.subscribe('jobs');
    const j = await createJob(server, { steps: 5, step_ms: 5 });
    await waitState(server, j.id, 'done', LONG);
    await c.next((m) => m.type === 'job' && m.job.id === j.id && m.job.state === 'done', LONG, 'the done update');
    assert.deepEqual(eventsOf(c, j.id), []);
    assert.ok(!c.all.some((m) => m.type === 'events'));
    // a rename is pushed
    await server.api('PATCH', `/api/v1/jobs/${j.id}`, { name: 'renamed' });
    const renamed = await c.next((m) => m.type === 'job' && m.job.id === j.id);
    assert.equal(renamed.job.name, 'renamed');
    // and a deletion
    assert.equal((await server.api('DELETE', `/api/v1/jobs/${j.id}`)).status, 204);
    assert.deepEqual(await c.next((m) => m.type === 'deleted'), { type: 'deleted', id: j.id });
  });

  test('a job id: that job\'s updates and events only', async () => {
    const release = await hold();
    const c = await connect();
    const mine = await createJob(server, { steps: 8, step_ms: 5 });
    const other = await createJob(server, { steps: 8, step_ms: 5 });
    await c.subscribe(mine.id);
    await release();
    await waitState(server, mine.id, 'done');
    await waitState(server, other.id, 'done');
    await c.next((m) => m.type === 'job' && m.job.id === mine.id && m.job.state === 'done', LONG, 'the done update');
    const rest = await allEvents(server, mine.id);
    await waitFor(() => eventsOf(c, mine.id).length >= rest.length, LONG, 'every event');
    await fence(c); // and nothing more of either job
    assert.deepEqual(eventsOf(c, mine.id), rest);
    assert.deepEqual(eventsOf(c, other.id), []);
    assert.deepEqual(jobMsgs(c, other.id), []);
    assert.ok(jobMsgs(c, mine.id).some((m) => m.job.state === 'running'));
  });

  test('unsubscribe stops the messages', async () => {
    const c = await connect();
    await c.subscribe('all');
    const first = await createJob(server, { steps: 3, step_ms: 5 });
    await waitState(server, first.id, 'done');
    await c.next((m) => m.type === 'job' && m.job.id === first.id && m.job.state === 'done');
    c.send({ unsubscribe: 'all' });
    await c.next((m) => m.type === 'unsubscribed');
    const n = c.all.length;
    const second = await createJob(server, { steps: 3, step_ms: 5 });
    await waitState(server, second.id, 'done');
    const f1 = await fence(c);
    assert.deepEqual(c.all.slice(n).filter((x) => x.job !== f1 && x.job?.id !== f1 && x.topic !== f1), [], 'nothing after unsubscribe');
    // a job-id subscription stops too
    const release = await hold();
    const third = await createJob(server, { steps: 3, step_ms: 5 });
    await c.subscribe(third.id);
    c.send({ unsubscribe: third.id });
    await c.next((m) => m.type === 'unsubscribed' && m.topic === third.id);
    const m = c.all.length;
    await release();
    await waitState(server, third.id, 'done');
    await fence(c);
    assert.deepEqual(c.all.slice(m).filter((x) => x.job === third.id || x.job?.id === third.id), []);
  });

  test('a bad frame gets {"type":"error"} and the connection goes on', async () => {
    const c = await connect();
    const bad = ['not json', '[]', '{}', '"all"', '{"subscribe":"nope"}', '{"subscribe":0}', '{"subscribe":-3}',
      '{"subscribe":1.5}', '{"subscribe":true}', '{"subscribe":null}', '{"subscribe":{"id":1}}', '{"unsubscribe":"everything"}',
      '{"subscribe":"all"', '{"hello":"all"}'];
    for (const frame of bad) {
      c.send(frame);
      const m = await c.next(() => true, LONG, `an answer to ${frame}`);
      assert.equal(m.type, 'error', `${frame} → ${JSON.stringify(m)}`);
      assert.equal(typeof m.message, 'string');
      assert.ok(m.message.length > 0);
    }
    // a binary frame is ignored
    c.ws.send(Buffer.from([1, 2, 3]));
    // frames are answered in order: an error for it would come before this answer
    assert.deepEqual(await c.subscribe('jobs'), { type: 'subscribed', topic: 'jobs' });
    assert.equal(c.all.filter((m) => m.type === 'error').length, bad.length);
  });

  test('at most 64 job subscriptions on one connection', async () => {
    const c = await connect();
    for (let id = 1; id <= 64; id++) await c.subscribe(id);
    c.send({ subscribe: 65 });
    const m = await c.next();
    assert.equal(m.type, 'error');
    assert.match(m.message, /64/);
    c.send({ unsubscribe: 1 });
    await c.next((x) => x.type === 'unsubscribed');
    assert.deepEqual(await c.subscribe(65), { type: 'subscribed', topic: 65 });
  });

  test('20 clients at once all receive every event of a job', async () => {
    const release = await hold();
    const j = await createJob(server, { steps: 40, step_ms: 5, log_lines: 3 });
    const many = await Promise.all(Array.from({ length: 20 }, () => connect()));
    await Promise.all(many.map((c, i) => (i % 2 ? c.subscribe(j.id) : c.subscribe('all'))));
    await release();
    await waitState(server, j.id, 'done', LONG);
    const rest = await allEvents(server, j.id);
    assert.equal(rest.length, 1 + 40 * 5 + 1);
    await waitFor(() => many.every((c) => eventsOf(c, j.id).length >= rest.length), LONG, 'every client to have every event');
    await Promise.all(many.map((c) => fence(c))); // and none has one twice
    many.forEach((c, i) => {
      const got = eventsOf(c, j.id);
      assertContiguous(got, 1, `client ${i}`);
      assert.deepEqual(got, rest, `client ${i}`);
      assert.equal(jobMsgs(c, j.id).at(-1).job.state, 'done', `client ${i}`);
    });
    await Promise.all(many.map((c) => c.close()));
    const info = await server.api('GET', '/api/v1/info');
    assert.equal(info.status, 200);
  });

  test('a client that goes away does not disturb the others', async () => {
    const stay = await connect();
    const leave = await connect();
    await stay.subscribe('all');
    await leave.subscribe('all');
    leave.ws.terminate(); // no close handshake
    const j = await createJob(server, { steps: 10, step_ms: 5 });
    await waitState(server, j.id, 'done', LONG);
    const rest = await allEvents(server, j.id);
    await waitFor(() => eventsOf(stay, j.id).length >= rest.length, LONG, 'every event');
    assert.deepEqual(eventsOf(stay, j.id), rest);
  });
});
