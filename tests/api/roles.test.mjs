// roles.test.mjs — the route-by-role walk.  Every operation of the OpenAPI
// description is called as anonymous, learner A (ann), learner B (ben), an
// instructor and an admin, with real ids of A's jobs in the path and a body made
// from the schema's required fields.  What must hold: anonymous gets 401
// everywhere but the public routes; B gets 404 on A's jobs; admin-only routes
// are 403 for everyone else; no list or WebSocket shows B anything of A's; and
// no answer (any error body) names the server's data folder.  Every answer
// carries the security headers.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { startServer, waitFor, killTrackedPids, loadOpenApi, assertSchema, WebSocket } from './helpers.mjs';
import { PASSWORD, makeAccounts, login, asUser } from '../lib/auth.mjs';

const DOC = loadOpenApi();
const PUBLIC = new Set(['POST /api/v1/login', 'GET /api/v1/openapi.json']);
// not walked: they end the caller's session or stand in for a login
const SKIP = new Set(['POST /api/v1/logout', 'POST /api/v1/login']);
const ADMIN_ONLY = /^\/api\/v1\/(audit|users)/;
const JOB_PATH = /^\/api\/v1\/(jobs|datasets|models)\/\{id\}/;

function resolve(schema) {
  let s = schema;
  while (s && s.$ref) s = s.$ref.split('/').slice(1).reduce((o, k) => o[k], DOC);
  return s;
}

/** A body with the schema's required fields, each a plain value of its type. */
function bodyFor(op) {
  const content = op.requestBody?.content;
  if (!content) return undefined;
  const schema = resolve(content['application/json']?.schema);
  if (!schema) return {};
  const out = {};
  for (const k of schema.required || []) {
    const p = resolve(schema.properties?.[k]) || {};
    out[k] = p.enum ? p.enum[0] : { string: 'x', integer: 1, number: 1, boolean: false, array: [], object: {} }[p.type] ?? 'x';
  }
  return out;
}

describe('every route, every role', () => {
  let acc, server, as = {}, sessions = {}, jobA, victim;
  const answers = [];
  before(async () => {
    acc = makeAccounts({ root: 'admin', teach: 'instructor', ann: 'learner', ben: 'learner', victim: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '2'] });
    for (const n of ['root', 'teach', 'ann', 'ben']) {
      sessions[n] = await login(server, n);
      as[n] = asUser(server, sessions[n]);
    }
    as.anon = (method, path, body) => server.api(method, path, body);
    const r = await as.ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-secret', params: { steps: 2, step_ms: 5 } });
    assert.equal(r.status, 202);
    jobA = r.body.job.id;
    await waitFor(async () => (await as.ann('GET', `/api/v1/jobs/${jobA}`)).body.job.state === 'done', 60000, 'ann\'s job');
    victim = (await as.root('GET', '/api/v1/users')).body.users.find((u) => u.name === 'victim').id;
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  async function call(who, method, template, op) {
    let id = template.startsWith('/api/v1/users/') ? victim : jobA;
    if (method === 'DELETE' && JOB_PATH.test(template)) {
      // a job of A's own for each destructive call, so the next caller still finds jobA
      const r = await as.ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-doomed', params: { steps: 0 } });
      id = r.body.job.id;
    }
    const path = template.replace('{id}', id).replace('{name}', 'x').replace('{n}', '0');
    const r = await as[who](method, path, bodyFor(op));
    answers.push({ who, method, path, ...r });
    return r;
  }

  test('the walk', async () => {
    const ops = [];
    for (const [path, item] of Object.entries(DOC.paths)) {
      for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
        if (item[method] && !SKIP.has(`${method.toUpperCase()} ${path}`)) ops.push([method.toUpperCase(), path, item[method]]);
      }
    }
    assert.ok(ops.length > 30, `only ${ops.length} operations`);
    const problems = [];
    const expect = (cond, what) => { if (!cond) problems.push(what); };
    for (const [method, path, op] of ops) {
      const key = `${method} ${path}`;
      const anon = await call('anon', method, path, op);
      if (PUBLIC.has(key)) expect(anon.status !== 401, `${key}: public, anonymous got 401`);
      else expect(anon.status === 401, `${key}: anonymous got ${anon.status}, not 401`);

      const ben = await call('ben', method, path, op);
      const teach = await call('teach', method, path, op);
      const ann = await call('ann', method, path, op);
      const root = await call('root', method, path, op);
      if (ADMIN_ONLY.test(path)) {
        for (const [who, r] of [['ann', ann], ['ben', ben], ['teach', teach]]) expect(r.status === 403, `${key}: admin-only, ${who} got ${r.status}`);
        expect(![401, 403].includes(root.status), `${key}: the admin got ${root.status}`);
      } else if (JOB_PATH.test(path)) {
        expect(ben.status === 404, `${key}: B on A's job got ${ben.status}, not 404`);
        const learnerMayNot = path.endsWith('/priority'); // reordering is for instructors and admins
        // A passes the permission check; a 404 of A's may only be the handler's own (a test
        // job is not a dataset or a model), never the 404 B got for a job it may not see
        const sameAsB = ann.status === 404 && ann.body?.error?.message === ben.body?.error?.message;
        expect(learnerMayNot ? ann.status === 403 : ![401, 403].includes(ann.status) && !sameAsB,
          `${key}: A on A's own job got ${ann.status} ${JSON.stringify(ann.body?.error)}`);
        for (const [who, r] of [['teach', teach], ['root', root]]) expect(![401, 403].includes(r.status), `${key}: ${who} got ${r.status}`);
      } else if (!PUBLIC.has(key)) {
        for (const [who, r] of [['ann', ann], ['ben', ben], ['teach', teach], ['root', root]]) {
          expect(![401].includes(r.status) && !(r.status === 403 && /admins only/.test(r.body?.error?.message || '')),
            `${key}: ${who} got ${r.status} ${JSON.stringify(r.body?.error)}`);
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  test('no list shows B anything of A\'s', async () => {
    for (const path of ['/api/v1/jobs', '/api/v1/datasets', '/api/v1/models', '/api/v1/jobs?state=done']) {
      const r = await as.ben('GET', path);
      assert.equal(r.status, 200, path);
      assert.ok(!JSON.stringify(r.body).includes('ann'), `${path} shows ben something of ann's: ${JSON.stringify(r.body).slice(0, 300)}`);
    }
    // an instructor sees the jobs of their classes' members (made here: the walk
    // above deletes whatever class its ids happen to name)
    const k = await as.teach('POST', '/api/v1/classes', { name: 'roles lab' });
    assert.equal(k.status, 201, JSON.stringify(k.body));
    for (const name of ['ann', 'ben']) {
      assert.equal((await as.teach('POST', `/api/v1/classes/${k.body.class.id}/members`, { name })).status, 200);
    }
    const all = await as.teach('GET', '/api/v1/jobs');
    assert.ok(all.body.jobs.some((j) => j.id === jobA), 'the instructor sees ann\'s job');
  });

  test('POST /api/v1/jobs with real kinds: every reference checked as the dedicated routes check it', async () => {
    // the walk above sends only {kind: 'x'}; here each kind names A's job (a test
    // job: teach instructs ann since the test above) or a server folder, as every role
    const sees = { ann: true, teach: true, root: true, ben: false };
    for (const who of ['ann', 'ben', 'teach', 'root']) {
      const folder = await as[who]('POST', '/api/v1/jobs', { kind: 'dataset', params: { source: { type: 'folder', train: '/' } } });
      expect403(folder, /^source\.train: \/ is not a folder or file below an allowed --data-root$/, who);
      for (const [body, field, kind] of [
        [{ kind: 'model', params: { dataset: jobA, network: { standard: 'lenet' } } }, 'dataset', 'dataset'],
        [{ kind: 'evaluation', params: { model: jobA, source: { dataset: jobA } } }, 'model', 'model'],
        [{ kind: 'model', params: { dataset: jobA, network: { previous: jobA } } }, 'dataset', 'dataset'],
      ]) {
        const r = await as[who]('POST', '/api/v1/jobs', body);
        assert.equal(r.status, 400, `${who} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.error.message, sees[who] ? `${field}: job ${jobA} is a test job, not a ${kind}` : `${field}: there is no job ${jobA}`, who);
      }
      const parent = await as[who]('POST', '/api/v1/jobs', { kind: 'dataset', params: { source: { type: 'upload', upload: '0'.repeat(24) } }, parents: [jobA] });
      assert.equal(parent.status, 400, JSON.stringify(parent.body));
      assert.match(parent.body.error.message, /^source\.upload: no upload has this id/, who);
      const theirs = await as[who]('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 0 }, parents: [jobA] });
      if (sees[who]) assert.equal(theirs.status, 202, `${who}: ${JSON.stringify(theirs.body)}`);
      else assert.deepEqual([theirs.status, theirs.body.error.message], [400, `parent job ${jobA} does not exist`]);
    }
  });

  function expect403(r, re, who) {
    assert.equal(r.status, 403, `${who}: ${JSON.stringify(r.body)}`);
    assert.match(r.body.error.message, re, who);
  }

  test('no WebSocket subscription shows B anything of A\'s', async () => {
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/api/v1/ws`, { headers: { cookie: sessions.ben.cookie } });
    const got = [];
    ws.on('message', (d) => got.push(JSON.parse(String(d))));
    await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
    try {
      for (const topic of ['all', 'jobs', jobA]) ws.send(JSON.stringify({ subscribe: topic }));
      const r = await as.ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-live', params: { steps: 3, step_ms: 5 } });
      await waitFor(async () => (await as.ann('GET', `/api/v1/jobs/${r.body.job.id}`)).body.job.state === 'done', 60000, 'ann-live');
      // a fence: a job of ben's own, made after; once his socket has it, whatever of
      // ann's the server would have sent him has come (one socket keeps the order)
      const f = await as.ben('POST', '/api/v1/jobs', { kind: 'test', name: 'ben-fence', params: { steps: 1, step_ms: 1 } });
      assert.equal(f.status, 202, JSON.stringify(f.body));
      await waitFor(() => got.some((m) => m.type === 'job' && m.job.id === f.body.job.id), 60000, 'ben\'s fence job on his socket');
      const leaked = got.filter((m) => JSON.stringify(m).includes('ann'));
      assert.deepEqual(leaked, []);
    } finally { ws.terminate(); }
  });

  test('no answer names the data folder, and every answer has the security headers', async () => {
    assert.ok(answers.length > 150, `${answers.length} answers`);
    for (const a of answers) {
      const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body ?? '');
      if (a.status >= 400 || a.who !== 'root') { // only an admin's /info says where the data folder is
        assert.ok(!text.includes(server.dataDir) && !text.includes(acc.dir), `${a.who} ${a.method} ${a.path} (${a.status}) names a server path: ${text.slice(0, 300)}`);
      }
      if (a.status >= 400) assert.ok(a.body?.error?.code && a.body?.error?.message, `${a.method} ${a.path}: ${a.status} without the error shape`);
      if (a.method === 'GET' && a.path === '/api/v1/ws') continue; // a WebSocket upgrade answered by CivetWeb
      assert.match(a.headers.get('content-security-policy') || '', /script-src 'self'.*frame-ancestors 'none'/, `${a.method} ${a.path}: CSP`);
      assert.equal(a.headers.get('x-content-type-options'), 'nosniff', `${a.method} ${a.path}`);
    }
    const page = await fetch(`${server.url}/`);
    assert.match(page.headers.get('content-security-policy'), /default-src 'self'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
  });
});

describe('user admin', () => {
  let acc, server, root, rootId;
  before(async () => {
    acc = makeAccounts({ root: 'admin' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
    root = asUser(server, await login(server, 'root'));
    rootId = (await root('GET', '/api/v1/me')).body.user.id;
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  test('add, change role and quota, disable, remove: each audited; bad input named', async () => {
    const made = await root('POST', '/api/v1/users', { name: 'dora', password: PASSWORD, role: 'learner', quota: { jobs: 1 } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assertSchema(DOC, 'UserResponse', made.body);
    const id = made.body.user.id;
    assert.deepEqual(made.body.user.quota, { jobs: 1, cpu_minutes: 600, gpu_minutes: 120, disk_bytes: 10 * 2 ** 30, memory_bytes: 4 * 2 ** 30 });
    assert.equal((await login(server, 'dora')).status, 200, 'the new account logs in');

    const dup = await root('POST', '/api/v1/users', { name: 'DORA', password: PASSWORD });
    assert.equal(dup.status, 409);
    for (const [body, field] of [[{ name: 'e', password: 'short' }, /password/], [{ name: 'bad name', password: PASSWORD }, /name/],
      [{ name: 'eve', password: PASSWORD, role: 'king' }, /role/], [{ name: 'eve', password: PASSWORD, quota: { jobs: -1 } }, /quota\.jobs/],
      [{ name: 'eve', password: PASSWORD, shoe: 1 }, /shoe/]]) {
      const r = await root('POST', '/api/v1/users', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(r.body.error.message, field);
    }

    const up = await root('PATCH', `/api/v1/users/${id}`, { role: 'instructor', quota: { cpu_minutes: 0 } });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.equal(up.body.user.role, 'instructor');
    assert.equal(up.body.user.quota.cpu_minutes, 0);
    assert.equal(up.body.user.quota.jobs, 1, 'a quota of their own stays');

    const dis = await root('PATCH', `/api/v1/users/${id}`, { disabled: true });
    assert.equal(dis.body.user.disabled, true);
    assert.equal((await login(server, 'dora')).status, 401, 'a disabled account cannot log in');
    assert.equal((await root('PATCH', `/api/v1/users/${id}`, { disabled: false })).body.user.disabled, false);

    // a reset: the old password and every session of dora's end; the new one logs in
    const doraS = await login(server, 'dora');
    assert.equal(doraS.status, 200);
    for (const [body, re] of [[{ password: 'short' }, /^password: /], [{ password: 12345678 }, /^password: must be a string/]]) {
      const bad = await root('PATCH', `/api/v1/users/${id}`, body);
      assert.equal(bad.status, 400, JSON.stringify(body));
      assert.match(bad.body.error.message, re);
    }
    const reset = await root('PATCH', `/api/v1/users/${id}`, { password: 'a-new-pass-for-dora' });
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: doraS.cookie })).status, 401, 'her session ended');
    assert.equal((await login(server, 'dora')).status, 401, 'the old password is gone');
    assert.equal((await login(server, 'dora', 'a-new-pass-for-dora')).status, 200);
    const ownReset = await root('PATCH', `/api/v1/users/${rootId}`, { password: 'root-by-patch-1' });
    assert.equal(ownReset.status, 409);
    assert.match(ownReset.body.error.message, /\/api\/v1\/me\/password/);

    const self = await root('PATCH', `/api/v1/users/${rootId}`, { role: 'learner' });
    assert.equal(self.status, 409);
    assert.equal((await root('DELETE', `/api/v1/users/${rootId}`)).status, 409);
    assert.equal((await root('PATCH', '/api/v1/users/99999', { disabled: true })).status, 404);

    assert.equal((await root('DELETE', `/api/v1/users/${id}`)).status, 204);
    assert.equal((await root('DELETE', `/api/v1/users/${id}`)).status, 404);
    const actions = (await root('GET', '/api/v1/audit')).body.audit.map((e) => `${e.action} ${e.target}`);
    for (const want of [/^user_add dora as learner$/, /^user_quota dora: jobs 1/, /^role_change dora: learner -> instructor$/,
      /^user_disable dora$/, /^user_enable dora$/, /^password_reset dora$/, /^user_remove dora$/]) {
      assert.ok(actions.some((a) => want.test(a)), `${want} in ${actions.join('; ')}`);
    }
  });
});
