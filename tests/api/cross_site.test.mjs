// cross_site.test.mjs — with accounts off (loopback, the default) every request is
// the local user's, so a page elsewhere must not be able to make one: a form's
// text/plain or urlencoded body is refused on every state-changing route (415), a
// request whose Origin is not this server's own (another site, another local port,
// "null") is refused, HTTP and WebSocket alike, and so is a Host that is not a
// loopback name (DNS rebinding).  Nothing such a request asks for happens.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, createJob, getJob, waitState, killTrackedPids, jobCount, WebSocket } from './helpers.mjs';

/** One raw HTTP/1.1 request: {status, body}. */
function raw(port, text) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let data = '';
    s.on('data', (d) => { data += d; });
    s.on('end', () => {
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(data)?.[1]);
      const body = data.slice(data.indexOf('\r\n\r\n') + 4);
      let json = body;
      try { json = JSON.parse(body); } catch { /* not JSON */ }
      resolve({ status, body: json });
    });
    s.on('error', reject);
    s.write(text.replace(/\r?\n/g, '\r\n'));
  });
}

describe('cross-site requests with accounts off', () => {
  let server, own;
  before(async () => {
    server = await startServer();
    own = `http://127.0.0.1:${server.port}`;
  });
  after(async () => { killTrackedPids(); await server?.stop(); server?.cleanup(); });

  const post = (path, body, headers) => fetch(server.url + path, { method: 'POST', body, headers });

  test('a form\'s text/plain or urlencoded body is refused on a JSON route, and nothing is created', async () => {
    const before = await jobCount(server);
    const job = JSON.stringify({ kind: 'test', name: 'csrf', params: { steps: 1 } });
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const r = await post('/api/v1/jobs', job, { 'content-type': type });
      assert.equal(r.status, 415, type);
      const b = await r.json();
      assert.equal(b.error.code, 'unsupported_media_type');
      assert.match(b.error.message, /application\/json/);
    }
    const none = await post('/api/v1/jobs', job, {}); // a body without a type
    assert.equal(none.status, 415);
    assert.equal(await jobCount(server), before);
    // the same body as JSON is taken
    assert.equal((await post('/api/v1/jobs', job, { 'content-type': 'application/json; charset=utf-8' })).status, 202);
  });

  test('file routes take their files, but not a form\'s text/plain or urlencoded body', async () => {
    const tgz = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      assert.equal((await post('/api/v1/uploads?name=a.tar.gz', tgz, { 'content-type': type })).status, 415, type);
    }
    const ok = await post('/api/v1/uploads?name=a.tar.gz', tgz, { 'content-type': 'application/gzip' });
    assert.equal(ok.status, 201, await ok.text());
  });

  test('another site\'s Origin is refused, on reads and writes; this server\'s own is not', async () => {
    const job = await createJob(server, { steps: 400, step_ms: 50 });
    for (const origin of ['http://evil.example', `http://127.0.0.1:${server.port + 1}`, 'null', `https://127.0.0.1:${server.port}`,
      `http://127.0.0.1:${server.port}.evil.example`]) {
      const abort = await post(`/api/v1/jobs/${job.id}/abort`, undefined, { origin });
      assert.equal(abort.status, 403, origin);
      assert.match((await abort.json()).error.message, /^Origin .*another site/);
      const read = await fetch(`${server.url}/api/v1/jobs`, { headers: { origin } });
      assert.equal(read.status, 403, `GET with ${origin}`);
    }
    assert.ok(['queued', 'running'].includes((await getJob(server, job.id)).state), 'no refused request reached the job');
    const mine = await post(`/api/v1/jobs/${job.id}/abort`, undefined, { origin: own });
    assert.equal(mine.status, 202);
    await waitState(server, job.id, ['aborted'], 30000);
  });

  test('a Host that is not a loopback name is refused (DNS rebinding); localhost, 127.x and [::1] answer', async () => {
    for (const host of ['evil.example', `evil.example:${server.port}`, '10.0.0.1', 'localhost.evil.example', '127.0.0.1.nip.io']) {
      const r = await raw(server.port, `GET /api/v1/info HTTP/1.1\nHost: ${host}\nConnection: close\n\n`);
      assert.equal(r.status, 403, host);
      assert.match(r.body.error.message, /^Host /);
    }
    for (const host of [`127.0.0.1:${server.port}`, `localhost:${server.port}`, `LOCALHOST:${server.port}`, `[::1]:${server.port}`, '127.0.0.2']) {
      const r = await raw(server.port, `GET /api/v1/info HTTP/1.1\nHost: ${host}\nConnection: close\n\n`);
      assert.equal(r.status, 200, host);
    }
  });

  test('a WebSocket from another Origin or Host is refused; one from this server opens', async () => {
    const open = (headers) => new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/api/v1/ws`, { headers });
      ws.once('open', () => { ws.close(); resolve('open'); });
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode));
      ws.once('error', () => resolve('error'));
    });
    assert.equal(await open({ origin: 'http://evil.example' }), 403);
    assert.equal(await open({ origin: 'null' }), 403);
    assert.equal(await open({ host: 'evil.example' }), 403);
    assert.equal(await open({ origin: own }), 'open');
    assert.equal(await open({}), 'open'); // a script, not a browser
  });
});
