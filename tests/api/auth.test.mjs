// auth.test.mjs — accounts on a real server: accounts made with `deepdesk user`
// (passwords from a file), login and logout, the cookie's flags, a non-revealing
// error, expiry (idle and absolute), a new session at each login, CSRF, API
// tokens, the login rate limit, learners kept apart (HTTP and WebSocket) while
// their class's instructor and admins see them, the audit log, and the start-up
// refusals.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  BIN, TEST_TMP, WebSocket, startServer, waitState, waitFor, sleep, killTrackedPids, trackPid, loadOpenApi, assertSchema,
} from './helpers.mjs';
import { PASSWORD, makeAccounts, cookieOf, login, asUser } from '../lib/auth.mjs';

const DOC = loadOpenApi();

/** `deepdesk serve` that is expected to refuse: its exit code and stderr. */
function refusedStart(args) {
  return new Promise((resolve) => {
    const p = spawn(BIN, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 60000); // a refusal exits at once; this only ends a hang
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stderr: err }); });
  });
}

function wsOpen(url, headers) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/v1/ws`, { headers });
  const all = [];
  ws.on('message', (d) => all.push(JSON.parse(String(d))));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({
      ws, all,
      async subscribe(topic) {
        ws.send(JSON.stringify({ subscribe: topic }));
        await waitFor(() => all.some((m) => m.type === 'subscribed' && m.topic === topic), 60000, `subscribed ${topic}`);
      },
      close() { ws.terminate(); },
    }));
    ws.once('error', reject);
    ws.once('unexpected-response', (req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
  });
}

describe('start-up', () => {
  test('listening beyond loopback with accounts off is refused, saying how to add the first admin', async () => {
    const dir = mkdtempSync(join(TEST_TMP, 'deepdesk-auth-'));
    try {
      const r = await refusedStart(['--listen', '0.0.0.0:0', '--accounts', 'off', '--data', dir]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /accounts off/);
      assert.match(r.stderr, /deepdesk user add NAME --role admin --data /);
      // beyond loopback, accounts are on by themselves: with no account yet, refused too
      const r2 = await refusedStart(['--listen', '0.0.0.0:0', '--data', dir]);
      assert.equal(r2.code, 1);
      assert.match(r2.stderr, /no account yet/);
      assert.match(r2.stderr, /deepdesk user add NAME --role admin/);
      const r3 = await refusedStart(['--listen', '127.0.0.1:0', '--accounts', 'maybe', '--data', dir]);
      assert.equal(r3.code, 2);
      assert.match(r3.stderr, /--accounts: expected on or off/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--tls-cert/--tls-key: HTTPS with a Secure cookie', async () => {
    const acc = makeAccounts({ root: 'admin' });
    try {
      const cert = join(acc.dir, 'cert.pem');
      const key = join(acc.dir, 'key.pem');
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
        '-subj', '/CN=localhost'], { stdio: 'ignore' });
      const half = await refusedStart(['--listen', '127.0.0.1:0', '--data', acc.data, '--tls-cert', cert]);
      assert.equal(half.code, 1);
      assert.match(half.stderr, /--tls-cert and --tls-key go together/);
      const notPem = await refusedStart(['--listen', '127.0.0.1:0', '--data', acc.data, '--tls-cert', acc.pwFile, '--tls-key', key]);
      assert.equal(notPem.code, 1);
      assert.match(notPem.stderr, /not a PEM certificate/);
      // Debian 12's CivetWeb 1.15 with OpenSSL 3 serves through build/tls/ (app/http/tls_shim.c)
      const server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--tls-cert', cert, '--tls-key', key] });
      try {
        const https = await import('node:https');
        const res = await new Promise((resolve, reject) => {
          const req = https.request({ host: '127.0.0.1', port: server.port, path: '/api/v1/login', method: 'POST',
            rejectUnauthorized: false, headers: { 'content-type': 'application/json' } }, resolve);
          req.on('error', reject);
          req.end(JSON.stringify({ name: 'root', password: PASSWORD }));
        });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['set-cookie'][0], /; Secure/);
      } finally {
        await server.stop();
      }
    } finally {
      rmSync(acc.dir, { recursive: true, force: true });
    }
  });

  test('the CLI never takes a password from the command line and checks what it is given', () => {
    const dir = mkdtempSync(join(TEST_TMP, 'deepdesk-auth-'));
    try {
      const short = join(dir, 'short');
      writeFileSync(short, 'abc\n');
      assert.throws(() => execFileSync(BIN, ['user', 'add', 'x', '--password-file', short, '--data', dir], { stdio: 'pipe' }),
        (e) => e.status === 1 && /at least 8/.test(String(e.stderr)));
      assert.throws(() => execFileSync(BIN, ['user', 'add', 'bad name', '--password-file', short, '--data', dir], { stdio: 'pipe' }),
        (e) => e.status === 2 && /name: only letters/.test(String(e.stderr)));
      assert.throws(() => execFileSync(BIN, ['user', 'add', 'x', 'secret-pass', '--data', dir], { stdio: 'pipe' }),
        (e) => e.status === 2 && /expected 1 argument/.test(String(e.stderr)));
      const ok = join(dir, 'ok');
      writeFileSync(ok, 'good-password\n');
      // the first account is an admin unless told otherwise; later ones are learners
      execFileSync(BIN, ['user', 'add', 'first', '--password-file', ok, '--data', dir]);
      execFileSync(BIN, ['user', 'add', 'second', '--password-file', ok, '--data', dir]);
      execFileSync(BIN, ['user', 'role', 'second', 'instructor', '--data', dir]);
      const list = execFileSync(BIN, ['user', 'list', '--data', dir], { encoding: 'utf8' });
      assert.match(list, /^first\s+admin/m);
      assert.match(list, /^second\s+instructor/m);
      assert.throws(() => execFileSync(BIN, ['user', 'add', 'FIRST', '--password-file', ok, '--data', dir], { stdio: 'pipe' }),
        (e) => e.status === 1 && /already exists/.test(String(e.stderr)));
      execFileSync(BIN, ['user', 'remove', 'second', '--data', dir]);
      assert.doesNotMatch(execFileSync(BIN, ['user', 'list', '--data', dir], { encoding: 'utf8' }), /second/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('accounts on', () => {
  let server, acc;
  const sockets = [];
  before(async () => {
    acc = makeAccounts({ root: 'admin', ivy: 'instructor', ann: 'learner', ben: 'learner', rita: 'learner', pat: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '2'] });
  });
  after(async () => {
    sockets.forEach((s) => s.close());
    await server?.stop();
    killTrackedPids();
    rmSync(acc.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  });

  test('nothing but login and the API description without logging in', async () => {
    for (const [m, p] of [['GET', '/api/v1/jobs'], ['GET', '/api/v1/info'], ['GET', '/api/v1/me'],
      ['POST', '/api/v1/jobs'], ['DELETE', '/api/v1/jobs/1'], ['GET', '/api/v1/no-such-route']]) {
      const r = await server.api(m, p);
      assert.equal(r.status, 401, `${m} ${p}`);
      assert.equal(r.body.error.code, 'unauthenticated');
    }
    assert.equal((await server.api('GET', '/api/v1/openapi.json')).status, 200);
    // a made-up cookie or token is nobody
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: `dd_session=${'A'.repeat(43)}` })).status, 401);
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { authorization: `Bearer ddt_${'A'.repeat(43)}` })).status, 401);
    await assert.rejects(wsOpen(server.url, {}), /401|Unexpected|socket hang up|closed/i);
  });

  test('login sets an HttpOnly, SameSite=Strict cookie and answers the user and a CSRF token', async () => {
    const s = await login(server, 'ann');
    assert.equal(s.status, 200, JSON.stringify(s.body));
    const sc = s.headers.get('set-cookie');
    assert.match(sc, /^dd_session=[A-Za-z0-9_-]{43};/);
    assert.match(sc, /; HttpOnly/);
    assert.match(sc, /; SameSite=Strict/);
    assert.match(sc, /; Path=\//);
    assert.doesNotMatch(sc, /Secure/, 'plain HTTP: no Secure flag');
    assertSchema(DOC, 'LoginResponse', s.body);
    assert.equal(s.body.user.name, 'ann');
    assert.equal(s.body.user.role, 'learner');
    assert.match(s.csrf, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(s.csrf, s.token);
    const me = await server.api('GET', '/api/v1/me', undefined, { cookie: s.cookie });
    assert.equal(me.status, 200);
    assert.deepEqual(me.body, { user: s.body.user, accounts: true, csrf_token: s.csrf });
    assertSchema(DOC, 'Me', me.body);
    // ?usage=1: one's own limits and today's use, for the account page
    const mine = await server.api('GET', '/api/v1/me?usage=1', undefined, { cookie: s.cookie });
    assert.equal(mine.status, 200);
    assertSchema(DOC, 'Me', mine.body);
    assert.deepEqual(mine.body.user, s.body.user);
    assert.deepEqual(Object.keys(mine.body.quota).sort(), ['cpu_minutes', 'disk_bytes', 'gpu_minutes', 'jobs', 'memory_bytes']);
    assert.equal(mine.body.usage.running, 0);
  });

  test('a wrong password and an unknown name get the same answer', async () => {
    const wrong = await login(server, 'pat', 'not-the-password');
    const nobody = await login(server, 'nobody-here', 'not-the-password');
    assert.equal(wrong.status, 401);
    assert.equal(nobody.status, 401);
    assert.deepEqual(wrong.body, nobody.body);
    assert.deepEqual(wrong.body, { error: { code: 'unauthenticated', message: 'wrong name or password' } });
    assertSchema(DOC, 'Error', wrong.body);
    assert.equal(wrong.token, undefined, 'no cookie for a failed login');
    const bad = await server.api('POST', '/api/v1/login', { name: 'pat' });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /^password: required/);
  });

  test('each login is a new session; one planted before login never becomes logged in', async () => {
    const planted = 'P'.repeat(43);
    const a = await login(server, 'ann', PASSWORD, { cookie: `dd_session=${planted}` });
    assert.equal(a.status, 200);
    assert.notEqual(a.token, planted);
    const b = await login(server, 'ann', PASSWORD, { cookie: a.cookie });
    assert.equal(b.status, 200);
    assert.notEqual(b.token, a.token);
    assert.notEqual(b.csrf, a.csrf);
    // the session the second login came with has ended
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: a.cookie })).status, 401);
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: b.cookie })).status, 200);
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: `dd_session=${planted}` })).status, 401);
  });

  test('a change made with the cookie needs the session\'s X-CSRF-Token; reads and bearer tokens do not', async () => {
    const s = await login(server, 'ann');
    const body = { kind: 'test', params: { steps: 1, step_ms: 1 } };
    const none = await server.api('POST', '/api/v1/jobs', body, { cookie: s.cookie });
    assert.equal(none.status, 403);
    assert.equal(none.body.error.code, 'forbidden');
    assert.match(none.body.error.message, /X-CSRF-Token/);
    const other = await login(server, 'ben');
    const wrong = await server.api('POST', '/api/v1/jobs', body, { cookie: s.cookie, 'x-csrf-token': other.csrf });
    assert.equal(wrong.status, 403, 'another session\'s token does not do');
    assert.equal((await server.api('GET', '/api/v1/jobs', undefined, { cookie: s.cookie })).status, 200);
    const ok = await server.api('POST', '/api/v1/jobs', body, { cookie: s.cookie, 'x-csrf-token': s.csrf });
    assert.equal(ok.status, 202, JSON.stringify(ok.body));
    assert.equal(ok.body.job.owner, 'ann');
    // nothing was created by the refused requests
    const list = await server.api('GET', '/api/v1/jobs', undefined, { cookie: s.cookie });
    assert.equal(list.body.jobs.filter((j) => j.name === ok.body.job.name).length, 1);
  });

  test('logout ends the session and clears the cookie', async () => {
    const s = await login(server, 'ann');
    const out = await server.api('POST', '/api/v1/logout', undefined, { cookie: s.cookie, 'x-csrf-token': s.csrf });
    assert.equal(out.status, 204);
    assert.match(out.headers.get('set-cookie'), /^dd_session=; .*Max-Age=0/);
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: s.cookie })).status, 401);
  });

  test('API tokens: made once with the secret shown, used as Bearer without CSRF, listed without it, revoked', async () => {
    const s = await login(server, 'ben');
    const as = asUser(server, s);
    const made = await as('POST', '/api/v1/me/tokens', { name: 'my script' });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assertSchema(DOC, 'TokenCreated', made.body);
    const { id, secret } = made.body.token;
    assert.match(secret, /^ddt_[A-Za-z0-9_-]{43}$/);
    const bearer = { authorization: `Bearer ${secret}` };
    const me = await server.api('GET', '/api/v1/me', undefined, bearer);
    assert.equal(me.status, 200);
    assert.equal(me.body.user.name, 'ben');
    assert.equal(me.body.csrf_token, undefined);
    const job = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 1 } }, bearer);
    assert.equal(job.status, 202, 'no CSRF header needed with a token');
    assert.equal(job.body.job.owner, 'ben');
    const list = await as('GET', '/api/v1/me/tokens');
    assert.equal(list.status, 200);
    assertSchema(DOC, 'TokenList', list.body);
    const t = list.body.tokens.find((x) => x.id === id);
    assert.equal(t.name, 'my script');
    assert.equal(t.revoked, false);
    assert.ok(!JSON.stringify(list.body).includes(secret.slice(4)), 'the secret is never shown again');
    // another user cannot revoke it
    const ann = await login(server, 'ann');
    assert.equal((await asUser(server, ann)('DELETE', `/api/v1/me/tokens/${id}`)).status, 404);
    assert.equal((await as('DELETE', `/api/v1/me/tokens/${id}`)).status, 204);
    assert.equal((await server.api('GET', '/api/v1/me', undefined, bearer)).status, 401);
    assert.equal((await as('GET', '/api/v1/me/tokens')).body.tokens.find((x) => x.id === id).revoked, true);
  });

  test('five failed logins for a name make the next wait (429, Retry-After), whatever the password; others are not held up', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await login(server, 'rita', `wrong-${i}-pass`)).status, 401);
    const held = await login(server, 'rita');
    assert.equal(held.status, 429);
    assert.equal(held.body.error.code, 'rate_limited');
    assertSchema(DOC, 'Error', held.body);
    const after = Number(held.headers.get('retry-after'));
    assert.ok(after >= 1 && after <= 2, `Retry-After ${after}`);
    assert.equal(held.token, undefined);
    assert.equal((await login(server, 'pat')).status, 200, 'another account is not held up');
    await sleep(after * 1000 + 100);
    // one more failure doubles the wait
    assert.equal((await login(server, 'rita', 'still-wrong')).status, 401);
    const held2 = await login(server, 'rita');
    assert.equal(held2.status, 429);
    assert.ok(Number(held2.headers.get('retry-after')) >= 2);
    await sleep(Number(held2.headers.get('retry-after')) * 1000 + 100);
    assert.equal((await login(server, 'rita')).status, 200, 'the right password after the wait');
  });

  test('a learner cannot see, change, abort or delete another learner\'s job: 404 as for no job; their class\'s instructor and admins see both', async () => {
    const ann = asUser(server, await login(server, 'ann'));
    const ben = asUser(server, await login(server, 'ben'));
    const ivy = asUser(server, await login(server, 'ivy'));
    const root = asUser(server, await login(server, 'root'));
    // an instructor sees the learners of their classes (tests/api/classes.test.mjs)
    const cls = (await ivy('POST', '/api/v1/classes', { name: 'auth' })).body.class.id;
    assert.equal((await ivy('POST', `/api/v1/classes/${cls}/roster`, { csv: 'ann\nben\n' })).status, 201);
    const aj = (await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-secret', params: { steps: 2000, step_ms: 20 } })).body.job;
    const bj = (await ben('POST', '/api/v1/jobs', { kind: 'test', name: 'ben-own', params: { steps: 1, step_ms: 1 } })).body.job;
    trackPid((await waitState({ api: (m, p) => ann(m, p) }, aj.id, 'running')).pid);
    const missing = await ben('GET', '/api/v1/jobs/999999');
    assert.equal(missing.status, 404);
    for (const [m, p, body] of [['GET', `/api/v1/jobs/${aj.id}`], ['PATCH', `/api/v1/jobs/${aj.id}`, { name: 'mine' }],
      ['POST', `/api/v1/jobs/${aj.id}/abort`], ['DELETE', `/api/v1/jobs/${aj.id}`], ['GET', `/api/v1/jobs/${aj.id}/events`],
      ['POST', `/api/v1/jobs/${aj.id}/clone`], ['GET', `/api/v1/jobs/${aj.id}/resources`]]) {
      const r = await ben(m, p, body);
      assert.equal(r.status, 404, `${m} ${p}`);
      assert.deepEqual(r.body, { error: { code: 'not_found', message: `job ${aj.id} does not exist` } });
    }
    assert.equal((await ben('GET', '/api/v1/jobs/999999')).body.error.message, 'job 999999 does not exist');
    // nor name it as a parent
    const par = await ben('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1 }, parents: [aj.id] });
    assert.equal(par.status, 400);
    assert.equal(par.body.error.message, `parent job ${aj.id} does not exist`);
    // nor train on it: a job named in a body is as missing as in a path
    const asDataset = await ben('POST', '/api/v1/models', { name: 'm', dataset: aj.id, network: { standard: 'lenet' } });
    assert.equal(asDataset.status, 400);
    assert.match(asDataset.body.error.message, new RegExp(`^dataset: there is no job ${aj.id}$`));
    const own = await ann('POST', '/api/v1/models', { name: 'm', dataset: aj.id, network: { standard: 'lenet' } });
    assert.equal(own.status, 400);
    assert.match(own.body.error.message, /is a test job, not a dataset/, 'its owner is told what it is');
    // lists: only one's own
    const benList = (await ben('GET', '/api/v1/jobs?limit=1000')).body;
    assert.ok(benList.jobs.every((j) => j.owner === 'ben'), JSON.stringify(benList.jobs.map((j) => j.owner)));
    assert.ok(benList.jobs.some((j) => j.id === bj.id));
    assert.equal(benList.total, benList.jobs.length);
    for (const p of ['/api/v1/datasets', '/api/v1/models']) assert.equal((await ben('GET', p)).status, 200);
    // the job is unchanged and still running
    assert.equal((await ann('GET', `/api/v1/jobs/${aj.id}`)).body.job.state, 'running');
    assert.equal((await ann('GET', `/api/v1/jobs/${aj.id}`)).body.job.name, 'ann-secret');
    for (const who of [ivy, root]) {
      const all = (await who('GET', '/api/v1/jobs?limit=1000')).body.jobs.map((j) => j.id);
      assert.ok(all.includes(aj.id) && all.includes(bj.id));
      assert.equal((await who('GET', `/api/v1/jobs/${aj.id}`)).status, 200);
    }
    // an instructor may abort a learner's job; the admin may delete it, and that is in the audit log
    assert.equal((await ivy('POST', `/api/v1/jobs/${aj.id}/abort`)).status, 202);
    await waitState({ api: (m, p) => root(m, p) }, aj.id, 'aborted');
    assert.equal((await root('DELETE', `/api/v1/jobs/${aj.id}`)).status, 204);
    const audit = (await root('GET', '/api/v1/audit?limit=1000')).body.audit;
    assert.ok(audit.some((a) => a.action === 'job_delete' && a.target === `job ${aj.id}` && a.user === 'root'));
  });

  test('on the WebSocket a learner gets only their own jobs, whatever they subscribe to', async () => {
    const annS = await login(server, 'ann');
    const ann = asUser(server, annS);
    const benS = await login(server, 'ben');
    const ben = asUser(server, benS);
    const rootS = await login(server, 'root');
    const benWs = await wsOpen(server.url, { cookie: benS.cookie });
    const rootWs = await wsOpen(server.url, { cookie: rootS.cookie });
    sockets.push(benWs, rootWs);
    await benWs.subscribe('all');
    await benWs.subscribe('jobs');
    await rootWs.subscribe('all');
    const aj = (await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-ws', params: { steps: 5, step_ms: 5, log_lines: 1 } })).body.job;
    await benWs.subscribe(aj.id); // even by its id
    const bj = (await ben('POST', '/api/v1/jobs', { kind: 'test', name: 'ben-ws', params: { steps: 5, step_ms: 5 } })).body.job;
    await waitState({ api: (m, p) => ann(m, p) }, aj.id, 'done');
    await waitState({ api: (m, p) => ben(m, p) }, bj.id, 'done');
    await waitFor(() => benWs.all.some((m) => m.type === 'job' && m.job.id === bj.id && m.job.state === 'done'), 60000, 'ben\'s own job');
    await waitFor(() => rootWs.all.some((m) => m.type === 'job' && m.job.id === aj.id && m.job.state === 'done'), 60000, 'the admin sees ann\'s');
    assert.equal((await ann('DELETE', `/api/v1/jobs/${aj.id}`)).status, 204);
    await waitFor(() => rootWs.all.some((m) => m.type === 'deleted' && m.id === aj.id), 60000, 'the admin sees the deletion');
    // a job of ben's made after all that: once his socket has it, whatever of ann's
    // the server would have sent him has come (one socket's messages keep their order)
    const marker = (await ben('POST', '/api/v1/jobs', { kind: 'test', name: 'ben-marker', params: { steps: 1, step_ms: 1 } })).body.job;
    await waitFor(() => benWs.all.some((m) => m.type === 'job' && m.job.id === marker.id), 60000, 'ben\'s marker job on his socket');
    const leaked = benWs.all.filter((m) => m.job?.id === aj.id || m.job === aj.id || m.id === aj.id);
    assert.deepEqual(leaked, [], 'nothing of ann\'s job reached ben');
    assert.ok(rootWs.all.some((m) => m.type === 'events' && m.job === aj.id));
  });

  test('a WebSocket whose session ends (logout) is told so and closed; the others go on', async () => {
    const annS = await login(server, 'ann');
    const ann = asUser(server, annS);
    const rootS = await login(server, 'root');
    const root = asUser(server, rootS);
    const annWs = await wsOpen(server.url, { cookie: annS.cookie });
    const rootWs = await wsOpen(server.url, { cookie: rootS.cookie });
    sockets.push(annWs, rootWs);
    await annWs.subscribe('jobs');
    await rootWs.subscribe('jobs');
    let closed = false;
    annWs.ws.once('close', () => { closed = true; });
    assert.equal((await ann('POST', '/api/v1/logout')).status, 204);
    // the session is asked about again when something is published (every 2 s at most)
    await waitFor(async () => {
      await root('POST', '/api/v1/jobs', { kind: 'test', name: 'after-logout', params: { steps: 1, step_ms: 1 } });
      await sleep(300);
      return annWs.all.some((m) => m.type === 'signed_out');
    }, 60000, 'signed_out on ann\'s socket');
    await waitFor(() => closed, 60000, 'ann\'s socket closed');
    const after = annWs.all.slice(annWs.all.findIndex((m) => m.type === 'signed_out') + 1);
    assert.deepEqual(after, [], 'nothing after signed_out');
    assert.ok(rootWs.all.some((m) => m.type === 'job' && m.job.name === 'after-logout'), 'the admin\'s socket goes on');
  });

  test('a WebSocket opened with an API token is told signed_out and closed once the token is revoked', async () => {
    const s = await login(server, 'ann');
    const ann = asUser(server, s);
    const { id, secret } = (await ann('POST', '/api/v1/me/tokens', { name: 'socket' })).body.token;
    const ws = await wsOpen(server.url, { authorization: `Bearer ${secret}` });
    sockets.push(ws);
    await ws.subscribe('jobs');
    let closed = false;
    ws.ws.once('close', () => { closed = true; });
    // live while the token is
    await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'before-revoke', params: { steps: 1, step_ms: 1 } });
    await waitFor(() => ws.all.some((m) => m.type === 'job' && m.job.name === 'before-revoke'), 60000, 'a job message');
    assert.equal((await ann('DELETE', `/api/v1/me/tokens/${id}`)).status, 204);
    await waitFor(async () => {
      await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'after-revoke', params: { steps: 1, step_ms: 1 } });
      await sleep(300);
      return ws.all.some((m) => m.type === 'signed_out');
    }, 60000, 'signed_out on the token\'s socket');
    assert.match(ws.all.find((m) => m.type === 'signed_out').message, /revoked API token/);
    await waitFor(() => closed, 60000, 'the socket closed');
    const after = ws.all.slice(ws.all.findIndex((m) => m.type === 'signed_out') + 1);
    assert.deepEqual(after, [], 'nothing after signed_out');
  });

  test('a password change needs the current one and ends the other sessions', async () => {
    const s1 = await login(server, 'pat');
    const s2 = await login(server, 'pat');
    const pat = asUser(server, s1);
    const wrong = await pat('POST', '/api/v1/me/password', { current: 'nope-nope', new: 'another-pass-2' });
    assert.equal(wrong.status, 403);
    assert.match(wrong.body.error.message, /^current:/);
    const short = await pat('POST', '/api/v1/me/password', { current: PASSWORD, new: 'short' });
    assert.equal(short.status, 400);
    assert.match(short.body.error.message, /^new: at least 8/);
    assert.equal((await pat('POST', '/api/v1/me/password', { current: PASSWORD, new: 'another-pass-2' })).status, 204);
    assert.equal((await pat('GET', '/api/v1/me')).status, 200, 'this session goes on');
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: s2.cookie })).status, 401, 'the other one ended');
    assert.equal((await login(server, 'pat')).status, 401);
    assert.equal((await login(server, 'pat', 'another-pass-2')).status, 200);
  });

  test('admin-only routes: 403 for others; the audit log records logins, failures, logouts and password changes', async () => {
    const ann = asUser(server, await login(server, 'ann'));
    const r = await ann('GET', '/api/v1/audit');
    assert.equal(r.status, 403);
    assert.equal(r.body.error.code, 'forbidden');
    const root = asUser(server, await login(server, 'root'));
    const auditBody = (await root('GET', '/api/v1/audit?limit=1000')).body;
    assertSchema(DOC, 'AuditList', auditBody);
    const audit = auditBody.audit;
    const actions = new Set(audit.map((a) => a.action));
    for (const a of ['login', 'login_failed', 'logout', 'password_change', 'token_create', 'token_revoke', 'user_add']) {
      assert.ok(actions.has(a), `audit has ${a}`);
    }
    const failed = audit.find((a) => a.action === 'login_failed' && a.target === 'nobody-here');
    assert.ok(failed, 'a failed login names the name tried');
    assert.equal(failed.user, null);
    assert.equal(failed.address, '127.0.0.1');
    assert.ok(audit.every((a) => !JSON.stringify(a).includes(PASSWORD)), 'no password in the log');
  });
});

describe('login limit per address', () => {
  let server, acc;
  before(async () => {
    acc = makeAccounts({ root: 'admin' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
  });
  after(async () => {
    await server?.stop();
    rmSync(acc.dir, { recursive: true, force: true });
  });

  test('twenty failures from one address, each for a different name, hold that address', async () => {
    for (let i = 0; i < 20; i++) assert.equal((await login(server, `guess${i}`, 'wrong-password')).status, 401);
    const held = await login(server, 'root');
    assert.equal(held.status, 429, 'a new name from the same address waits');
    assert.ok(Number(held.headers.get('retry-after')) >= 1);
  });
});

describe('session lifetimes', () => {
  // Each server has one short lifetime and the other a day, so a session that ends
  // can only have ended for the reason the test is about.  Times are bounds a slow
  // machine can only widen: a request is handled after it was sent and before its
  // answer came, by the clock this process reads.
  const servers = [];
  let acc;
  async function serve(idle, max) {
    const s = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--session-idle', String(idle), '--session-max', String(max)] });
    servers.push(s);
    return s;
  }
  /** GET /api/v1/me with session s: {status, sent, answered} */
  async function me(server, s) {
    const sent = Date.now();
    const { status } = await server.api('GET', '/api/v1/me', undefined, { cookie: s.cookie });
    return { status, sent, answered: Date.now() };
  }
  before(() => { acc = makeAccounts({ root: 'admin' }); });
  after(async () => {
    for (const s of servers) await s.stop();
    rmSync(acc.dir, { recursive: true, force: true });
  });

  test('a session unused for --session-idle ends', async () => {
    const server = await serve(2, 86400);
    const s = await login(server, 'root');
    const used = await me(server, s);
    assert.equal(used.status, 200, 'alive when just used');
    // no request may touch it while it idles (a poll would keep it alive): wait out
    // its idle time, then ask once; waiting longer only makes the answer surer
    await new Promise((r) => setTimeout(r, 2000 + 300));
    const late = await me(server, s);
    assert.ok(late.sent - used.answered >= 2000, 'unused for the whole idle time');
    assert.equal(late.status, 401, 'ended after 2 s unused, long before its 1 day maximum');
  });

  test('a session in use lives past --session-idle', async () => {
    const server = await serve(2, 86400);
    // used every 250 ms for 5 s (2.5 idle times): it stays.  The server records a use
    // at most every quarter of the idle time (auth.c), so only a gap of 1.5 s between
    // one request's sending and the next one's answer could have let it idle out; a
    // run with such a gap (a stalled machine) proves nothing and is tried again.
    for (let attempt = 1; ; attempt++) {
      const s = await login(server, 'root');
      let prev = await me(server, s);
      assert.equal(prev.status, 200);
      const start = prev.sent;
      let stalled = false;
      while (prev.answered - start < 5000 && !stalled) {
        await new Promise((r) => setTimeout(r, 250));
        const cur = await me(server, s);
        stalled = cur.answered - prev.sent >= 1500;
        if (!stalled) assert.equal(cur.status, 200, `ended while in use, ${cur.answered - start} ms after its first use`);
        prev = cur;
      }
      if (!stalled) return;
      assert.ok(attempt < 5, 'the machine stalled 1.5 s between two requests in each of 5 tries');
    }
  });

  test('a session in use still ends at --session-max', async () => {
    const server = await serve(86400, 3);
    const sent = Date.now();
    const s = await login(server, 'root');
    const end = await waitFor(async () => {
      const r = await me(server, s);
      return r.status === 200 ? null : r;
    }, { timeout: 60000, what: 'the session to end at its 3 s maximum', every: 200 });
    assert.equal(end.status, 401);
    assert.ok(end.answered - sent >= 3000, `it lived its 3 s maximum (ended after ${end.answered - sent} ms)`);
  });
});

describe('accounts off (loopback)', () => {
  let server;
  before(async () => { server = await startServer(); });
  after(async () => { await server?.stop(); server?.cleanup(); });

  test('everything is the local user\'s: /me says so, and login is not needed', async () => {
    const me = await server.api('GET', '/api/v1/me');
    assert.equal(me.status, 200);
    assert.deepEqual(me.body, { user: { id: null, name: 'local', role: 'admin' }, accounts: false });
    const r = await server.api('POST', '/api/v1/login', { name: 'x', password: 'y' });
    assert.equal(r.status, 409);
    assert.match(r.body.error.message, /accounts are off/);
    assert.equal((await server.api('GET', '/api/v1/audit')).status, 200);
  });
});
