// hostile_json.test.mjs — input built to crash the server does not (issue 16).
// Deeply nested JSON in a request body (before and after logging in) and in a
// WebSocket frame is refused at the 65th level with a sentence naming the byte;
// text that is not UTF-8 is refused; long networks are drawn by a Graphviz child
// process or refused clearly.  After each, GET /api/v1/info still answers and the
// server process is still the one we started.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { startServer, assertError, killTrackedPids, WebSocket } from './helpers.mjs';
import { makeAccounts, login, asUser } from '../lib/auth.mjs';

const nest = (n, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);

/** A ReLU chain of n layers between an Input and a Softmax, for the deploy stage. */
function chain(n) {
  const lines = ['name: "chain"',
    'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }'];
  for (let i = 1; i <= n; i++) lines.push(`layer { name: "r${i}" type: "ReLU" bottom: "${i === 1 ? 'data' : `r${i - 1}`}" top: "r${i}" }`);
  lines.push(`layer { name: "prob" type: "Softmax" bottom: "r${n}" top: "prob" }`);
  return lines.join('\n') + '\n';
}

describe('hostile JSON', () => {
  let server, acc, ann, sess;
  /** POST raw bytes (a Buffer or string) as JSON; {status, body}. */
  async function raw(path, bytes, headers = {}, method = 'POST') {
    const res = await fetch(server.url + path, { method, body: bytes, headers: { 'content-type': 'application/json', ...headers } });
    const text = await res.text();
    let body = null;
    try { body = JSON.parse(text); } catch { body = text; }
    return { status: res.status, body, headers: res.headers };
  }
  const authed = () => ({ cookie: sess.cookie, 'x-csrf-token': sess.csrf });
  async function stillUp() {
    assert.equal(server.proc.exitCode, null, `the server exited: ${server.stderr}`);
    const r = await server.api('GET', '/api/v1/info', undefined, { cookie: sess.cookie });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  function wsOpen() {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(server.url.replace(/^http/, 'ws') + '/api/v1/ws', { headers: { cookie: sess.cookie } });
      const msgs = [];
      const waiters = [];
      ws.on('message', (d) => { msgs.push(d); waiters.splice(0).forEach((f) => f()); });
      ws.once('open', () => resolve({
        ws,
        async next(timeout = 5000) {
          const end = Date.now() + timeout;
          while (!msgs.length) {
            if (Date.now() > end || ws.readyState === WebSocket.CLOSED) throw new Error('websocket: no message');
            await new Promise((r) => { const t = setTimeout(r, 50); waiters.push(() => { clearTimeout(t); r(); }); });
          }
          return msgs.shift();
        },
      }));
      ws.once('error', reject);
    });
  }

  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--cpu-slots', '1'] });
    sess = await login(server, 'ann');
    assert.equal(sess.status, 200, JSON.stringify(sess.body));
    ann = asUser(server, sess);
  });
  after(async () => {
    await server?.stop();
    killTrackedPids();
    if (acc) rmSync(acc.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  });

  for (const depth of [800, 100000]) {
    test(`${depth} nested [ to /login, without logging in: 400 at the 65th level, server up`, async () => {
      const r = await raw('/api/v1/login', nest(depth));
      assertError(r, 400, 'invalid', /^body: nested deeper than 64 levels at byte 64$/);
      await stillUp();
    });

    test(`${depth} nested [ inside an object to an authenticated route: 400, server up`, async () => {
      const r = await raw('/api/v1/jobs', `{"kind":"test","params":${nest(depth)}}`, authed());
      assertError(r, 400, 'invalid', /^body: nested deeper than 64 levels at byte 87$/);
      const v = await raw('/api/v1/networks/visualize', `{"standard":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`, authed());
      assertError(v, 400, 'invalid', /nested deeper than 64 levels/);
      await stillUp();
    });

    test(`${depth} nested [ in a WebSocket text frame: ${depth === 800 ? 'an error reply, the socket' : 'closed with 1009, the server'} goes on`, async () => {
      const c = await wsOpen();
      if (depth > 800) {
        // 200000 bytes are over the 64 KiB a frame may have before it is scanned
        const closed = new Promise((r) => c.ws.once('close', (code, reason) => r([code, String(reason)])));
        c.ws.send(nest(depth));
        const [code, reason] = await closed;
        assert.equal(code, 1009);
        assert.equal(reason, 'message of 200000 bytes is over the 65536-byte limit');
        await stillUp();
        return;
      }
      c.ws.send(nest(depth));
      const m = JSON.parse(String(await c.next()));
      assert.equal(m.type, 'error');
      assert.match(m.message, /^frame: nested deeper than 64 levels at byte 64$/);
      // the same socket still subscribes
      c.ws.send(JSON.stringify({ subscribe: 'all' }));
      assert.deepEqual(JSON.parse(String(await c.next())), { type: 'subscribed', topic: 'all' });
      c.ws.close();
      await stillUp();
    });
  }

  test('64 levels are accepted, 65 refused', async () => {
    // 63 levels of [ inside the body object: 64 in all; the job is then refused for its params, not its depth
    const ok = await raw('/api/v1/jobs', `{"kind":"test","params":{"x":${nest(62)}}}`, authed());
    assert.doesNotMatch(JSON.stringify(ok.body), /nested deeper/);
    const bad = await raw('/api/v1/jobs', `{"kind":"test","params":{"x":${nest(63)}}}`, authed());
    assertError(bad, 400, 'invalid', /nested deeper than 64 levels at byte 91/);
    // a string full of brackets is not nesting
    const s = await raw('/api/v1/login', JSON.stringify({ name: nest(5000), password: 'x' }));
    assert.doesNotMatch(JSON.stringify(s.body), /nested deeper/);
    const c = await wsOpen();
    c.ws.send(nest(64));
    assert.match(JSON.parse(String(await c.next())).message, /expected \{"subscribe"/);
    c.ws.send(nest(65));
    assert.match(JSON.parse(String(await c.next())).message, /nested deeper than 64 levels at byte 64/);
    c.ws.close();
    await stillUp();
  });

  test('text that is not UTF-8 is refused, named by its byte', async () => {
    const cases = [
      [Buffer.from([...Buffer.from('{"name":"'), 0xc0, 0xaf, ...Buffer.from('","password":"x"}')]), /overlong encoding\) at byte 9/],
      [Buffer.from([...Buffer.from('{"name":"'), 0xed, 0xa0, 0x80, ...Buffer.from('","password":"x"}')]), /surrogate/],
      [Buffer.from([...Buffer.from('{"name":"'), 0xf4, 0x90, 0x80, 0x80, ...Buffer.from('","password":"x"}')]), /above U\+10FFFF/],
      [Buffer.from([...Buffer.from('{"name":"'), 0xe4, 0xb8, ...Buffer.from('","password":"x"}')]), /incomplete sequence/],
      ['{"name":"a\\u0000b","password":"x"}', /\\u0000/],
      ['{"name":"\\udc80","password":"x"}', /lone low surrogate/],
    ];
    for (const [body, re] of cases) assertError(await raw('/api/v1/login', body), 400, 'invalid', re);
    // over a WebSocket too
    const c = await wsOpen();
    c.ws.send(Buffer.from([...Buffer.from('{"subscribe":"'), 0xc3, ...Buffer.from('"}')]), { binary: false });
    const m = await c.next().then((d) => JSON.parse(String(d))).catch(() => null);
    // a browser-grade peer closes on a text frame that is not UTF-8; CivetWeb passes it on and we refuse it
    if (m) assert.match(m.message, /invalid UTF-8/);
    c.ws.terminate();
    await stillUp();
  });

  test('a job cannot be named or renamed with bytes that are not UTF-8', async () => {
    const made = await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'plain', params: { steps: 1, step_ms: 1 } });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    const id = made.body.job.id;
    const bad = Buffer.from([...Buffer.from('{"name":"caf'), 0xe9, ...Buffer.from('"}')]); // Latin-1 é
    assertError(await raw(`/api/v1/jobs/${id}`, bad, authed(), 'PATCH'), 400, 'invalid', /invalid UTF-8 .* at byte 12/);
    assertError(await raw(`/api/v1/jobs/${id}`, '{"name":"\\ud800x"}', authed(), 'PATCH'), 400, 'invalid', /high surrogate/);
    const create = Buffer.from([...Buffer.from('{"kind":"test","name":"x'), 0xff, ...Buffer.from('","params":{}}')]);
    assertError(await raw('/api/v1/jobs', create, authed()), 400, 'invalid', /never UTF-8\) at byte 24/);
    const after = await ann('GET', `/api/v1/jobs/${id}`);
    assert.equal(after.body.job.name, 'plain');
    // a dataset form's name is held to the same rule
    const fd = new FormData();
    fd.append('name', new Blob([Buffer.from([0x61, 0xff])]));
    fd.append('options', '{}');
    const f = await fetch(server.url + '/api/v1/datasets', { method: 'POST', body: fd, headers: authed() });
    const fb = await f.json();
    assert.equal(f.status, 400, JSON.stringify(fb));
    assert.match(fb.error.message, /^name: not valid UTF-8/);
    await stillUp();
  });

  test('a name already stored with bytes that are not UTF-8 goes out as U+FFFD, over HTTP and the WebSocket', async () => {
    const made = await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'old-row', params: { steps: 1, step_ms: 1 } });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    const id = made.body.job.id;
    // as a row from before these checks, or a name from an archive, might hold it
    execFileSync('python3', ['-c', `
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
db.execute("UPDATE jobs SET name = CAST(X'636166e9ff' AS TEXT) WHERE id = ?", (int(sys.argv[2]),))
db.commit()
`, join(server.dataDir, 'deepdesk.db'), String(id)]);
    const res = await fetch(`${server.url}/api/v1/jobs/${id}`, { headers: { cookie: sess.cookie } });
    const bytes = new Uint8Array(await res.arrayBuffer());
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); // throws on bad UTF-8
    assert.equal(JSON.parse(text).job.name, 'caf\ufffd\ufffd');
    // the ws client closes the socket (1007) on a text frame that is not UTF-8
    const c = await wsOpen();
    c.ws.send(JSON.stringify({ subscribe: id }));
    assert.equal(JSON.parse(String(await c.next())).type, 'subscribed');
    let closed = null;
    c.ws.on('close', (code) => { closed = code; });
    assert.equal((await ann('PATCH', `/api/v1/jobs/${id}`, { notes: 'poke' })).status, 200);
    let m;
    do m = JSON.parse(String(await c.next())); while (m.type !== 'job');
    assert.equal(m.job.name, 'caf\ufffd\ufffd');
    assert.equal(closed, null);
    c.ws.close();
    await stillUp();
  });

  // 500 ReLUs crashed the server inside libgvc; 998 ReLUs make the stage 1000 layers, the cap
  for (const n of [250, 500, 998]) {
    test(`visualizing a ${n}-ReLU chain: drawn (or a clear error) by a child, the server up`, { timeout: 90000 }, async () => {
      const t0 = Date.now();
      const res = await fetch(server.url + '/api/v1/networks/visualize', {
        method: 'POST', headers: { 'content-type': 'application/json', ...authed() },
        body: JSON.stringify({ prototxt: chain(n), stage: 'deploy' }),
      });
      const text = await res.text();
      if (res.status === 200) {
        assert.equal(res.headers.get('content-type'), 'image/svg+xml');
        assert.match(text, /<\/svg>\s*$/);
        assert.equal((text.match(/class="node"/g) || []).length, n + 2);
      } else {
        const e = JSON.parse(text).error;
        assert.ok([400, 500, 503].includes(res.status), `${res.status} ${text}`);
        assert.match(e.message, /too large to draw|Graphviz crashed|drawing/, e.message);
      }
      console.log(`# ${n} layers: ${res.status} in ${Date.now() - t0} ms`);
      await stillUp();
    });
  }

  test('past the cap of 1000 layers: 400 before Graphviz runs', async () => {
    const r = await ann('POST', '/api/v1/networks/visualize', { prototxt: chain(999), stage: 'deploy' });
    assertError(r, 400, 'invalid', /1001 layers: too many to draw \(at most 1000\)/);
    await stillUp();
  });
});

// The drawing child misbehaving, as DEEPDESK_DRAW_FAULT makes it: each is that
// request's clear error, and the server answers the next request.
describe('a drawing child that crashes, hangs or floods', () => {
  for (const [fault, status, re] of [
    ['segv', 500, /^Graphviz crashed drawing the train stage \(\d+ layers\): Segmentation fault$/],
    ['hang', 400, /^the network is too large to draw \(\d+ layers in the train stage; Graphviz did not finish in 1\.5 s\)$/],
    ['flood', 400, /^the network is too large to draw \(\d+ layers in the train stage; the drawing passed 32 MiB\)$/],
  ]) {
    test(fault, { timeout: 60000 }, async () => {
      process.env.DEEPDESK_DRAW_FAULT = fault;
      process.env.DEEPDESK_DRAW_TIMEOUT_MS = '1500';
      let server;
      try {
        server = await startServer();
      } finally {
        delete process.env.DEEPDESK_DRAW_FAULT;
        delete process.env.DEEPDESK_DRAW_TIMEOUT_MS;
      }
      try {
        const t0 = Date.now();
        const r = await server.api('POST', '/api/v1/networks/visualize', { standard: 'lenet' });
        assertError(r, status, status === 500 ? 'internal' : 'invalid', re);
        assert.ok(Date.now() - t0 < 10000, 'the deadline held');
        assert.equal((await server.api('GET', '/api/v1/info')).status, 200);
        assert.equal(server.proc.exitCode, null);
        // no child left behind
        const kids = spawnSync('ps', ['-o', 'pid=,args=', '--ppid', String(server.proc.pid)]).stdout.toString();
        assert.doesNotMatch(kids, /draw-network/);
      } finally {
        await server.stop();
        server.cleanup();
      }
    });
  }
});
