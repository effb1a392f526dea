// tls.test.mjs — `serve --tls-cert/--tls-key` on a real server with accounts on:
// HTTPS checked against the test's own CA (no verification switched off), a
// Secure session cookie, a WebSocket over wss, many connections one after another
// and at once (Debian's CivetWeb 1.15 with OpenSSL 3 used to crash on the first),
// plain HTTP to the HTTPS port refused without harm, the OpenSSL helpers loaded
// only when TLS is asked for, a bad certificate or key pair refused at start by
// the file's name (an encrypted key too), a certificate chain served whole, and
// a clear refusal where the helpers are missing.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import https from 'node:https';
import http from 'node:http';
import { BIN, TEST_TMP, WebSocket, startServer, waitFor } from './helpers.mjs';

const PASSWORD = 'correct-horse-1';

/** A self-signed certificate for 127.0.0.1 and localhost, and its key, in dir. */
function makeCert(dir, name) {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
  return { cert, key, pem: readFileSync(cert) };
}

/** `deepdesk serve` that is expected to refuse: its exit code and stderr. */
function refusedStart(bin, args) {
  return new Promise((resolve) => {
    const p = spawn(bin, ['serve', '--listen', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 60000); // a refusal exits at once; this only ends a hang
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stderr: err }); });
  });
}

/** One HTTPS request on a connection of its own, verified against ca:
 *  {status, headers, body (parsed JSON where it is JSON)}. */
function request(port, ca, method, path, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: '127.0.0.1', port, path, method, ca, agent: false,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let json = text;
        try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, body: json, socket: res.socket });
      });
    });
    req.on('error', reject);
    req.end(body !== undefined ? JSON.stringify(body) : undefined);
  });
}

/** The files the server process has mapped (its shared objects among them). */
const mapsOf = (pid) => readFileSync(`/proc/${pid}/maps`, 'utf8');

describe('HTTPS', () => {
  let dir, data, pwFile, good, server, cookie;
  /** GET /api/v1/info as root, on a connection of its own */
  const info = () => request(server.port, good.pem, 'GET', '/api/v1/info', { headers: { cookie } });
  before(async () => {
    dir = mkdtempSync(join(TEST_TMP, 'deepdesk-tls-'));
    pwFile = join(dir, 'pw');
    writeFileSync(pwFile, `${PASSWORD}\n`);
    data = join(dir, 'data');
    execFileSync(BIN, ['user', 'add', 'root', '--role', 'admin', '--password-file', pwFile, '--data', data]);
    good = makeCert(dir, 'good');
    server = await startServer({ dataDir: data, keepData: true,
      args: ['--accounts', 'on', '--tls-cert', good.cert, '--tls-key', good.key] });
    const r = await request(server.port, good.pem, 'POST', '/api/v1/login', { body: { name: 'root', password: PASSWORD } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    cookie = r.headers['set-cookie'][0].split(';')[0];
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  });

  test('GET /api/v1/info over HTTPS, the certificate verified against our CA', async () => {
    const r = await info();
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(typeof r.body.version, 'string');
    assert.equal(r.socket.authorized, true);
    // the other side really is TLS with our certificate
    assert.match(r.socket.getPeerCertificate().subject.CN, /^localhost$/);
    // the shim that gives CivetWeb OpenSSL 1.1's name is what the server loaded
    assert.match(mapsOf(server.proc.pid), /\/tls\/libssl\.so\n/);
  });

  test('an unknown CA is refused by the client: the server does present its certificate', async () => {
    const other = makeCert(dir, 'other');
    await assert.rejects(request(server.port, other.pem, 'GET', '/api/v1/info'), /self[- ]signed|unable to verify/i);
  });

  test('login sets the session cookie with Secure; the cookie then works over HTTPS', async () => {
    const r = await request(server.port, good.pem, 'POST', '/api/v1/login', { body: { name: 'root', password: PASSWORD } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const setCookie = r.headers['set-cookie'][0];
    assert.notEqual(setCookie.split(';')[0], cookie, 'a new session at each login');
    assert.match(setCookie, /^dd_session=[^;]+/);
    assert.match(setCookie, /; Secure/);
    assert.match(setCookie, /HttpOnly/);
    const me = await request(server.port, good.pem, 'GET', '/api/v1/jobs', { headers: { cookie: setCookie.split(';')[0] } });
    assert.equal(me.status, 200, JSON.stringify(me.body));
    const anon = await request(server.port, good.pem, 'GET', '/api/v1/jobs');
    assert.equal(anon.status, 401);
  });

  test('a WebSocket over wss subscribes and receives a job created over HTTPS', async () => {
    const r = await request(server.port, good.pem, 'POST', '/api/v1/login', { body: { name: 'root', password: PASSWORD } });
    const session = r.headers['set-cookie'][0].split(';')[0];
    const csrf = r.body.csrf_token;
    const ws = new WebSocket(`wss://127.0.0.1:${server.port}/api/v1/ws`, { ca: good.pem, headers: { cookie: session } });
    const all = [];
    ws.on('message', (d) => all.push(JSON.parse(String(d))));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
      ws.once('unexpected-response', (req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    try {
      ws.send(JSON.stringify({ subscribe: 'jobs' }));
      await waitFor(() => all.some((m) => m.type === 'subscribed' && m.topic === 'jobs'), 60000, 'subscribed over wss');
      const j = await request(server.port, good.pem, 'POST', '/api/v1/jobs', {
        body: { kind: 'test', name: 'over-wss', params: { steps: 2, step_ms: 1 } },
        headers: { cookie: session, 'x-csrf-token': csrf },
      });
      assert.equal(j.status, 202, JSON.stringify(j.body));
      const id = j.body.job.id;
      await waitFor(() => all.some((m) => m.type === 'job' && m.job.id === id), 60000, `job ${id} over wss`);
    } finally {
      ws.terminate();
    }
  });

  test('50 requests one after another and 20 at once, each on its own TLS connection, all answer', async () => {
    for (let i = 0; i < 50; i++) {
      const r = await info();
      assert.equal(r.status, 200, `request ${i}: ${JSON.stringify(r.body)}`);
    }
    const rs = await Promise.all(Array.from({ length: 20 }, info));
    assert.deepEqual(rs.map((r) => r.status), Array(20).fill(200));
    assert.equal(server.proc.exitCode, null, 'the server is still running');
  });

  test('every answer over HTTPS carries Strict-Transport-Security: JSON, the UI, an error', async () => {
    for (const [method, path] of [['GET', '/api/v1/info'], ['GET', '/'], ['GET', '/app.js'], ['GET', '/api/v1/jobs/999999']]) {
      const r = await request(server.port, good.pem, method, path, { headers: { cookie } });
      assert.equal(r.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains', `${method} ${path} (${r.status})`);
      assert.equal(r.headers['x-content-type-options'], 'nosniff');
    }
  });

  test('TLS 1.2 offers forward-secret AEAD suites only: RSA key exchange and CBC-SHA1 are refused', async () => {
    /** Whether a TLS 1.2 handshake offering only `ciphers` succeeds; the suite agreed on. */
    const hello = (ciphers) => new Promise((resolve) => {
      const req = https.request({ host: '127.0.0.1', port: server.port, path: '/api/v1/info', ca: good.pem, agent: false,
        ciphers, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' }, (res) => {
        const suite = res.socket.getCipher().name;
        res.resume();
        res.on('end', () => resolve({ ok: true, suite }));
      });
      req.on('error', (e) => resolve({ ok: false, why: e.message }));
      req.end();
    });
    for (const suite of ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305']) {
      const r = await hello(suite);
      assert.deepEqual(r, { ok: true, suite }, suite);
    }
    for (const suite of ['AES128-SHA', 'AES256-GCM-SHA384', 'AES128-GCM-SHA256', 'ECDHE-RSA-AES128-SHA', 'ECDHE-RSA-AES256-SHA384']) {
      const r = await hello(suite);
      assert.equal(r.ok, false, `${suite} was accepted (${r.suite})`);
    }
    // TLS 1.3 still works, and a refused hello cost nothing
    const r = await request(server.port, good.pem, 'GET', '/api/v1/info', { headers: { cookie } });
    assert.equal(r.status, 200);
    assert.equal(r.socket.getProtocol(), 'TLSv1.3');
  });

  test('plain HTTP to the HTTPS port gets no answer, and HTTPS goes on working', async () => {
    const outcome = await new Promise((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: server.port, path: '/api/v1/info', agent: false },
        (res) => { res.resume(); resolve(`HTTP ${res.statusCode}`); });
      req.setTimeout(60000, () => req.destroy(new Error('timeout')));
      req.on('error', (e) => resolve(e.code || e.message));
      req.end();
    });
    assert.match(outcome, /ECONNRESET|socket hang up|EPIPE|HPE_/, `plain HTTP got: ${outcome}`);
    const r = await info();
    assert.equal(r.status, 200);
    assert.equal(server.proc.exitCode, null);
  });
});

describe('start-up', () => {
  let dir, data;
  before(() => {
    dir = mkdtempSync(join(TEST_TMP, 'deepdesk-tls-'));
    const pwFile = join(dir, 'pw');
    writeFileSync(pwFile, `${PASSWORD}\n`);
    data = join(dir, 'data');
    execFileSync(BIN, ['user', 'add', 'root', '--role', 'admin', '--password-file', pwFile, '--data', data]);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a key that is not the certificate\'s is refused, naming both files', async () => {
    const a = makeCert(dir, 'a');
    const b = makeCert(dir, 'b');
    const r = await refusedStart(BIN, ['--data', data, '--accounts', 'on', '--tls-cert', a.cert, '--tls-key', b.key]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /--tls-key \S*b\.key: not the private key of the certificate in --tls-cert \S*a\.crt/);
  });

  test('a certificate or key OpenSSL cannot read is refused, naming the file', async () => {
    const a = makeCert(dir, 'c');
    const badCert = join(dir, 'bad.crt');
    writeFileSync(badCert, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
    const r1 = await refusedStart(BIN, ['--data', data, '--accounts', 'on', '--tls-cert', badCert, '--tls-key', a.key]);
    assert.equal(r1.code, 1, r1.stderr);
    assert.match(r1.stderr, /--tls-cert \S*bad\.crt: OpenSSL cannot use this certificate: /);
    const badKey = join(dir, 'bad.key');
    writeFileSync(badKey, '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n');
    const r2 = await refusedStart(BIN, ['--data', data, '--accounts', 'on', '--tls-cert', a.cert, '--tls-key', badKey]);
    assert.equal(r2.code, 1, r2.stderr);
    assert.match(r2.stderr, /--tls-key \S*bad\.key: OpenSSL cannot use this private key: /);
  });

  test('an encrypted key is refused, saying how to decrypt it, without asking for a passphrase', async () => {
    const a = makeCert(dir, 'e');
    const enc = join(dir, 'enc.key');
    execFileSync('openssl', ['pkey', '-in', a.key, '-aes256', '-passout', 'pass:secret', '-out', enc]);
    const r = await refusedStart(BIN, ['--data', data, '--accounts', 'on', '--tls-cert', a.cert, '--tls-key', enc]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /--tls-key \S*enc\.key: the key is encrypted with a passphrase.*openssl pkey -in /);
  });

  test('a certificate chain (leaf, then intermediate) is served whole: a client that knows only the root verifies', async () => {
    const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
    ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'root.key', '-out', 'root.crt', '-days', '2', '-subj', '/CN=Test Root');
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'int.key', '-out', 'int.csr', '-subj', '/CN=Test Intermediate');
    writeFileSync(join(dir, 'int.ext'), 'basicConstraints=critical,CA:true\nkeyUsage=critical,keyCertSign,cRLSign\n');
    ssl('x509', '-req', '-in', 'int.csr', '-CA', 'root.crt', '-CAkey', 'root.key', '-CAcreateserial', '-out', 'int.crt', '-days', '2',
      '-extfile', 'int.ext');
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost');
    writeFileSync(join(dir, 'leaf.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    ssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'int.crt', '-CAkey', 'int.key', '-CAcreateserial', '-out', 'leaf.crt', '-days', '2',
      '-extfile', 'leaf.ext');
    const chain = join(dir, 'chain.crt');
    writeFileSync(chain, Buffer.concat([readFileSync(join(dir, 'leaf.crt')), readFileSync(join(dir, 'int.crt'))]));
    const s = await startServer({ args: ['--accounts', 'off', '--tls-cert', chain, '--tls-key', join(dir, 'leaf.key')] });
    try {
      const r = await request(s.port, readFileSync(join(dir, 'root.crt')), 'GET', '/api/v1/info');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.socket.authorized, true);
      assert.equal(r.socket.getPeerCertificate(true).issuerCertificate.subject.CN, 'Test Intermediate');
    } finally {
      await s.stop();
      s.cleanup();
    }
  });

  test('without TLS the OpenSSL helpers are not loaded', async () => {
    const s = await startServer({ args: ['--accounts', 'off'] });
    try {
      assert.equal((await s.api('GET', '/api/v1/info')).status, 200);
      assert.doesNotMatch(mapsOf(s.proc.pid), /libssl|\/tls\//);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });

  test('a program without its tls/ helpers refuses the flags, saying why, rather than crash later', async () => {
    const alone = join(dir, 'alone');
    mkdirSync(alone);
    const bin = join(alone, 'deepdesk');
    copyFileSync(BIN, bin);
    execFileSync('chmod', ['+x', bin]);
    const a = makeCert(dir, 'd');
    const r = await refusedStart(bin, ['--data', data, '--accounts', 'on', '--tls-cert', a.cert, '--tls-key', a.key]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /cannot serve HTTPS with its OpenSSL .*tls\/libssl\.so beside this program.*TLS proxy/s);
  });
});
