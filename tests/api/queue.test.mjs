// queue.test.mjs — the fair queue and quotas on a real server with accounts:
// several learners queue at once on one CPU slot and their jobs start
// round-robin (not first come, first served); each queued job says where it
// stands and why it waits, to its owner only; an instructor moves a job to the
// front, a learner may not; a learner at their limit of running jobs waits
// though a slot is free; a create over the disk quota is refused naming the
// limit and the usage, and leaves nothing behind.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { BIN, startServer, waitFor, killTrackedPids, loadOpenApi, assertSchema, schedulerTicks } from './helpers.mjs';
import { makeAccounts, login, asUser } from '../lib/auth.mjs';

const DOC = loadOpenApi();
const SHORT = { steps: 3, step_ms: 30 };
const LONG = { steps: 100000, step_ms: 20 };

/** Wait until job id (seen by the client as) is in one of states. */
async function waitState(as, id, states, timeout = 60000) {
  let last;
  await waitFor(async () => {
    const r = await as('GET', `/api/v1/jobs/${id}`);
    last = r.body?.job?.state ?? JSON.stringify(r.body);
    return states.includes(last);
  }, timeout, `job ${id} to be ${states} (is ${last})`);
}

async function create(as, params, name) {
  const r = await as('POST', '/api/v1/jobs', { kind: 'test', name, params });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.job.id;
}

/** A job of owner's that runs until it is aborted, once admin sees it running: its id. */
async function createRunning(owner, admin, name) {
  const id = await create(owner, LONG, name);
  await waitState(admin, id, ['running']);
  return id;
}

describe('one slot, three learners', () => {
  let acc, server, admin, inst, a, b, c;
  before(async () => {
    acc = makeAccounts({ root: 'admin', teach: 'instructor', ann: 'learner', ben: 'learner', cat: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '1'] });
    const as = async (n) => asUser(server, await login(server, n));
    [admin, inst, a, b, c] = [await as('root'), await as('teach'), await as('ann'), await as('ben'), await as('cat')];
    // an instructor manages the jobs of their classes' members
    const k = await inst('POST', '/api/v1/classes', { name: 'queue lab' });
    assert.equal(k.status, 201, JSON.stringify(k.body));
    for (const name of ['ann', 'ben', 'cat']) {
      assert.equal((await inst('POST', `/api/v1/classes/${k.body.class.id}/members`, { name })).status, 200);
    }
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  test('jobs start round-robin across owners, and each learner sees where theirs stand', async () => {
    const blocker = await createRunning(admin, admin, 'blocker');
    // ann queues a sweep of three first, then ben two, then cat one
    const a1 = await create(a, SHORT, 'a1');
    const a2 = await create(a, SHORT, 'a2');
    const a3 = await create(a, SHORT, 'a3');
    const b1 = await create(b, SHORT, 'b1');
    const b2 = await create(b, SHORT, 'b2');
    const c1 = await create(c, SHORT, 'c1');

    // where they stand: a1 b1 c1 a2 b2 a3, each behind the blocker's slot
    const place = async (as, id) => {
      const r = await as('GET', `/api/v1/jobs/${id}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assertSchema(DOC, 'JobResponse', r.body);
      return r.body.job.queue;
    };
    const q1 = await place(a, a1);
    assert.equal(q1.position, 1);
    assert.equal(q1.reason, 'waiting for 1 CPU slot (0 of 1 free)');
    const qc = await place(c, c1);
    assert.equal(qc.position, 3, JSON.stringify(qc));
    assert.equal(qc.reason, 'waiting for 1 CPU slot; 2 jobs ahead');
    const qa3 = await place(a, a3);
    assert.equal(qa3.position, 6);
    assert.equal(qa3.reason, 'waiting for 1 CPU slot; 5 jobs ahead');
    assert.equal(qa3.running_limit, 2, 'a learner runs 2 jobs at once by default');
    // ben cannot see ann's job, nor its place
    assert.equal((await b('GET', `/api/v1/jobs/${a1}`)).status, 404);

    const abort = await admin('POST', `/api/v1/jobs/${blocker}/abort`);
    assert.equal(abort.status, 202, JSON.stringify(abort.body));
    const ids = [a1, a2, a3, b1, b2, c1];
    for (const id of ids) await waitState(admin, id, ['done'], 60000);
    const jobs = await Promise.all(ids.map(async (id) => (await admin('GET', `/api/v1/jobs/${id}`)).body.job));
    const order = jobs.sort((x, y) => x.started_at - y.started_at || x.id - y.id).map((j) => j.name);
    assert.deepEqual(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
    assert.equal(jobs[0].queue, undefined, 'a job that is not queued has no place in the queue');
  });

  test('an instructor moves a job to the front; a learner may not reorder', async () => {
    const blocker = await createRunning(admin, admin, 'blocker 2');
    const a1 = await create(a, SHORT, 'x1');
    const b1 = await create(b, SHORT, 'y1');
    const c1 = await create(c, SHORT, 'z1');
    const no = await c('POST', `/api/v1/jobs/${c1}/priority`, { front: true });
    assert.equal(no.status, 403, JSON.stringify(no.body));
    assert.equal((await b('POST', `/api/v1/jobs/${a1}/priority`, { front: true })).status, 404, "another's job is not there");
    const r = await inst('POST', `/api/v1/jobs/${c1}/priority`, { front: true });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(DOC, 'QueueResponse', r.body);
    assert.equal(r.body.queue.position, 1);
    // then round-robin: cat was served longest ago, then ben, then ann
    assert.equal((await b('GET', `/api/v1/jobs/${b1}`)).body.job.queue.position, 2);
    assert.equal((await a('GET', `/api/v1/jobs/${a1}`)).body.job.queue.position, 3);
    const bad = await inst('POST', `/api/v1/jobs/${c1}/priority`, { priority: 'high' });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /priority/);
    assert.equal((await admin('POST', `/api/v1/jobs/${blocker}/priority`, { front: true })).status, 409,
      'a running job has no place in the queue');
    await admin('POST', `/api/v1/jobs/${blocker}/abort`);
    for (const id of [a1, b1, c1]) await waitState(admin, id, ['done'], 60000);
    const got = await Promise.all([c1, b1, a1].map(async (id) => (await admin('GET', `/api/v1/jobs/${id}`)).body.job.started_at));
    assert.ok(got[0] <= got[1] && got[1] <= got[2], `z1 first, then y1, x1: ${got}`);
    const audit = await admin('GET', '/api/v1/audit');
    assert.ok(audit.body.audit.some((e) => e.action === 'job_priority' && e.target === `job ${c1}`));
  });

  test('over the disk quota, a create is refused with the limit and the usage, and nothing is made', async () => {
    const users = (await admin('GET', '/api/v1/users')).body.users;
    assertSchema(DOC, 'UserList', { users });
    const ann = users.find((u) => u.name === 'ann');
    assert.ok(ann.usage.disk_bytes > 0, 'ann has job folders');
    const p = await admin('PATCH', `/api/v1/users/${ann.id}`, { quota: { disk_bytes: 1000 } });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.equal(p.body.user.quota.disk_bytes, 1000);
    const before = (await admin('GET', '/api/v1/jobs')).body;
    const r = await a('POST', '/api/v1/jobs', { kind: 'test', name: 'too much', params: SHORT });
    assert.equal(r.status, 403, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'forbidden');
    assert.match(r.body.error.message, /quota: your jobs and uploads use \d+ bytes of disk, your limit is 1000/);
    const afterList = (await admin('GET', '/api/v1/jobs')).body;
    assert.equal(afterList.total, before.total, 'no half-made job');
    // ben is not limited by ann's quota; back to the default, ann may create again
    const other = await b('POST', '/api/v1/jobs', { kind: 'test', name: 'fine', params: SHORT });
    assert.equal(other.status, 202);
    assert.equal((await admin('PATCH', `/api/v1/users/${ann.id}`, { quota: { disk_bytes: null } })).body.user.quota.disk_bytes,
      10 * 2 ** 30);
    const again = await a('POST', '/api/v1/jobs', { kind: 'test', name: 'fine again', params: SHORT });
    assert.equal(again.status, 202, JSON.stringify(again.body));
    await waitState(admin, again.body.job.id, ['done'], 60000);
  });
});

describe('the limit of running jobs', () => {
  let acc, server, admin, a;
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '2'] });
    admin = asUser(server, await login(server, 'root'));
    a = asUser(server, await login(server, 'ann'));
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  test('a learner at their limit waits though a slot is free, and is told so', async () => {
    const users = (await admin('GET', '/api/v1/users')).body.users;
    const ann = users.find((u) => u.name === 'ann');
    const p = await admin('PATCH', `/api/v1/users/${ann.id}`, { quota: { jobs: 1 } });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const first = await createRunning(a, admin, 'first');
    const second = await create(a, SHORT, 'second');
    // scheduler ticks, counted by the first job's reports: it must still wait
    await schedulerTicks(async () => (await a('GET', `/api/v1/jobs/${first}`)).body.job.events, 5, 'ticks with a slot free for the second job');
    const j = (await a('GET', `/api/v1/jobs/${second}`)).body.job;
    assert.equal(j.state, 'queued');
    assert.equal(j.queue.reason, 'your limit of 1 running job is reached');
    assert.equal(j.queue.cpu_slots_free, 1);
    await a('POST', `/api/v1/jobs/${first}/abort`);
    await waitState(admin, second, ['done'], 60000);
  });
});

describe('/metrics', () => {
  let acc, server, admin, a;
  const TOKEN = 'metrics-token-0123456789';
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner' });
    writeFileSync(join(acc.dir, 'metrics-token'), `${TOKEN}\n`);
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '1', '--metrics-token', join(acc.dir, 'metrics-token')] });
    admin = asUser(server, await login(server, 'root'));
    a = asUser(server, await login(server, 'ann'));
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  const scrape = (headers = {}) => fetch(`${server.url}/metrics`, { headers });

  test('needs the bearer token', async () => {
    assert.equal((await scrape()).status, 401);
    assert.equal((await scrape({ authorization: 'Bearer wrong-token-0123456789' })).status, 401);
    const session = await scrape({ cookie: (await login(server, 'root')).cookie });
    assert.equal(session.status, 401, 'a session is not the metrics token');
  });

  test('jobs by state, the queue, request latency and per-user usage, in the text format', async () => {
    const long = await createRunning(a, admin, 'long');
    await create(a, SHORT, 'waiting');
    const r = await scrape({ authorization: `Bearer ${TOKEN}` });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    const text = await r.text();
    const value = (name) => {
      const m = new RegExp(`^${name.replace(/[{}"+.]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
      assert.ok(m, `${name} in\n${text}`);
      return Number(m[1]);
    };
    assert.equal(value('deepdesk_jobs{state="running"}'), 1);
    assert.equal(value('deepdesk_jobs{state="queued"}'), 1);
    assert.equal(value('deepdesk_queue_length'), 1);
    assert.ok(value('deepdesk_queue_oldest_wait_seconds') >= 0);
    assert.equal(value('deepdesk_user_running_jobs{user="ann"}'), 1);
    assert.equal(value('deepdesk_user_queued_jobs{user="ann"}'), 1);
    assert.equal(value('deepdesk_user_running_jobs{user="root"}'), 0);
    const count = value('deepdesk_http_request_duration_seconds_count');
    assert.ok(count >= 4, `${count} requests timed`);
    assert.equal(value('deepdesk_http_request_duration_seconds_bucket{le="+Inf"}'), count);
    // every sample line is NAME{labels} VALUE; every family has HELP and TYPE
    for (const line of text.trim().split('\n')) assert.match(line, /^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? -?[\d.e+]+)$/, line);
    await admin('POST', `/api/v1/jobs/${long}/abort`);
  });

  test('off without --metrics-token', async () => {
    const plain = await startServer();
    try {
      const r = await fetch(`${plain.url}/metrics`);
      assert.equal(r.status, 404);
      assert.match((await r.json()).error.message, /--metrics-token/);
    } finally { await plain.stop(); plain.cleanup(); }
  });
});

describe('deepdesk user quota', () => {
  test('shows and sets a quota; a bad value is named', () => {
    const acc = makeAccounts({ root: 'admin', ann: 'learner' });
    try {
      const run = (...args) => execFileSync(BIN, ['user', 'quota', ...args, '--data', acc.data], { encoding: 'utf8', stdio: 'pipe' });
      assert.match(run('ann'), /ann \(learner\): jobs 2, cpu-minutes 600, gpu-minutes 120, disk 10737418240 bytes/);
      assert.match(run('ann', '--jobs', '3', '--disk', '5G', '--gpu-minutes', '0'),
        /jobs 3, cpu-minutes 600, gpu-minutes 0, disk 5368709120 bytes/);
      assert.match(run('ann', '--disk', 'default'), /jobs 3, .* disk 10737418240 bytes, memory 4294967296 bytes a job/);
      assert.match(run('ann', '--memory', '2G'), /disk 10737418240 bytes, memory 2147483648 bytes a job/);
      assert.throws(() => run('ann', '--memory', 'lots'), (e) => e.status === 2 && /--memory lots/.test(e.stderr));
      assert.throws(() => run('ann', '--disk', '5X'), (e) => e.status === 2 && /--disk 5X/.test(e.stderr));
      assert.throws(() => run('nobody'), (e) => e.status === 1 && /nobody/.test(e.stderr));
    } finally { rmSync(acc.dir, { recursive: true, force: true }); }
  });
});
