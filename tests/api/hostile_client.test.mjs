// hostile_client.test.mjs — one client tries to use up the server's connections
// (issue 16, finding 6) while another asks GET /api/v1/info every 100 ms on a
// fresh connection: every answer must come within a second.  The hostile client
// speaks from other loopback addresses (127.0.0.2 …; Linux routes all of 127/8 to
// lo), as a second machine would, so the per-address limits are what is tested;
// the first test also floods from the polling client's own address.
//
// The server runs with 64 threads (so "more connections than threads" is a few
// hundred), --request-timeout 3 (so its drops are seen within the test) and the
// default per-address limits: 32 plain connections, 16 WebSockets; a request body
// must average 1 KiB a second after its first 10 s.  The figures
// (connections held, the other client's latency) are printed as diagnostics.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http from 'node:http';
import { Worker } from 'node:worker_threads';
import { rmSync } from 'node:fs';
import { startServer, sleep, WebSocket } from './helpers.mjs';
import { makeAccounts, login } from '../lib/auth.mjs';

const THREADS = 64;
const TIMEOUT_S = 3;
const PER_ADDR = 32;
const WS_PER_ADDR = 16;

/* A worker thread's code: n half-open requests from addr, each renewed when the
 * server cuts it, for ms; then how many the server leaves, and when those go. */
const HALF_OPEN_FLOOD = `
const net = require('node:net');
const { parentPort, workerData: { port, addr, n, ms, per, waitMs } } = require('node:worker_threads');
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const text = 'GET / HTTP/1.1\\r\\nHost: x\\r\\n'; // never finished
function open() {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: addr });
  s.gone = false;
  s.on('connect', () => s.write(text));
  s.on('data', () => {}); // read, or its end is never seen
  s.on('error', () => {});
  s.on('close', () => { s.gone = true; });
  return s;
}
(async () => {
  const held = Array.from({ length: n }, open);
  let opened = n, maxOpen = 0;
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await sleep(250);
    for (let i = 0; i < held.length; i++) if (held[i].gone) { held[i] = open(); opened++; }
    maxOpen = Math.max(maxOpen, held.filter((s) => !s.gone && s.readyState === 'open').length);
  }
  const t0 = Date.now();
  let left = held.filter((s) => !s.gone);
  while (left.length > per && Date.now() - t0 < 3000) { await sleep(50); left = held.filter((s) => !s.gone); }
  const leftAfterMs = Date.now() - t0;
  while (left.some((s) => !s.gone) && Date.now() - t0 < waitMs) await sleep(50);
  const stillOpen = left.filter((s) => !s.gone).length;
  const lastGoneMs = Date.now() - t0;
  held.forEach((s) => s.destroy());
  parentPort.postMessage({ opened, maxOpen, left: left.length, leftAfterMs, stillOpen, lastGoneMs });
})();
`;

/** A WebSocket to url (options for ws, a 5 s handshake unless said): {ws} once open,
 *  {status, body} where the server refused the upgrade, {error} where it failed. */
const wsTry = (url, options) => new Promise((resolve) => {
  const ws = new WebSocket(url, { handshakeTimeout: 5000, ...options });
  ws.on('open', () => resolve({ ws }));
  ws.on('unexpected-response', (req, res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', () => resolve({ status: res.statusCode, body }));
    res.on('close', () => resolve({ status: res.statusCode, body }));
  });
  ws.on('error', (e) => resolve({ error: e.message }));
});

describe('a hostile client', () => {
  let server;
  const sockets = new Set(); // every raw socket a test opened, destroyed in after()
  const lat = []; // the other client's latencies, ms
  const answers = []; // [phase, ms] of each of them
  // failures, and answers over 3 s: [phase, ms or error].  The bar is an answer
  // within a second; the poller shares this 2-core machine with the flood it is
  // measured against, so a rare answer between 1 and 3 s is allowed (at most one in
  // twenty of a phase, overSecond below) and only failures and waits past 3 s are not.
  const slow = [];
  let phase = 'start';
  let polling = true;
  let poller;
  const slowIn = (p) => {
    const mine = answers.filter(([q]) => q === p), over = mine.filter(([, ms]) => ms > 1000);
    const bad = slow.filter(([q]) => q === p);
    if (over.length > Math.max(1, Math.floor(mine.length / 20)))
      bad.push([p, `${over.length} of ${mine.length} answers over a second: ${over.map(([, ms]) => Math.round(ms)).join(', ')} ms`]);
    return bad;
  };

  /** GET /api/v1/info on a new connection from 127.0.0.1; resolves the ms it
   *  took, or what went wrong (a string) — always within 6 s. */
  function info() {
    return new Promise((resolve) => {
      const t0 = performance.now();
      let done = false;
      const settle = (v) => { if (!done) { done = true; clearTimeout(timer); resolve(v); } };
      const timer = setTimeout(() => { req.destroy(); settle('no answer in 6 s'); }, 6000);
      const req = http.get({ host: '127.0.0.1', port: server.port, path: '/api/v1/info', agent: false }, (res) => {
        res.resume();
        res.on('end', () => settle(res.statusCode === 200 ? performance.now() - t0 : `status ${res.statusCode}`));
        res.on('error', (e) => settle(`the answer broke off: ${e.message}`));
        res.on('close', () => settle('the answer broke off'));
      });
      req.on('error', (e) => settle(e.message));
    });
  }

  async function poll() {
    while (polling) {
      const r = await info();
      if (typeof r === 'number') { lat.push(r); answers.push([phase, r]); }
      if (typeof r === 'number' && r > 1000) console.log('# slow', phase, r);
      if (typeof r !== 'number' || r > 3000) slow.push([phase, typeof r === 'number' ? Math.round(r) : r]);
      await sleep(100);
    }
  }

  /** A raw connection from addr that sends text and stays open. */
  function halfOpen(addr, text) {
    const s = net.connect({ host: '127.0.0.1', port: server.port, localAddress: addr });
    sockets.add(s);
    s.gone = false;
    s.got = '';
    s.on('connect', () => s.write(text));
    s.on('data', (d) => { s.got += d; });
    s.on('error', () => {});
    s.on('close', () => { s.gone = true; sockets.delete(s); });
    return s;
  }

  before(async () => {
    server = await startServer({ args: ['--threads', String(THREADS), '--request-timeout', String(TIMEOUT_S)] });
    poller = poll();
  });
  after(async () => {
    polling = false;
    await poller;
    for (const s of sockets) s.destroy();
    const sorted = [...lat].sort((a, b) => a - b);
    console.log(`# the other client: ${sorted.length} answers of GET /api/v1/info, median ${sorted[sorted.length >> 1]?.toFixed(1)} ms, ` +
      `max ${sorted[sorted.length - 1]?.toFixed(1)} ms`);
    await server?.stop();
    server?.cleanup();
  });

  test('half-open requests: hundreds, more than the threads, renewed as they are cut; the others are answered', async () => {
    phase = 'half-open';
    // another address, then the poller's own; the flood runs on a thread of its
    // own, so that its work does not delay the poller's event loop
    for (const addr of ['127.0.0.2', '127.0.0.1']) {
      const r = await new Promise((resolve, reject) => {
        const w = new Worker(HALF_OPEN_FLOOD, { eval: true, workerData: { port: server.port, addr, n: 300, ms: 4000, per: PER_ADDR, waitMs: (TIMEOUT_S + 3) * 1000 } });
        w.once('message', resolve);
        w.once('error', reject);
        w.once('exit', (code) => reject(new Error(`the flood's thread ended (${code}) without its figures`)));
      });
      console.log(`# half-open from ${addr}: 300 held for 4 s on ${THREADS} threads, renewed as they were cut ` +
        `(${r.opened} opened in all, at most ${r.maxOpen} open at once as the client saw it), ` +
        `${r.left} left open ${r.leftAfterMs} ms after the last renewal, the last of them dropped ${r.lastGoneMs} ms after it`);
      // the guard leaves an address its share and cuts the rest...
      assert.ok(r.left <= PER_ADDR, `${r.left} half-open connections left from ${addr}`);
      // ...and those it leaves are dropped by --request-timeout
      assert.equal(r.stillOpen, 0, `half-open requests still open ${TIMEOUT_S + 3} s after the last was renewed`);
    }
    assert.deepEqual(slowIn(phase), []);
  });

  test('slow bodies: a byte a second on as many POSTs as it likes; past 32 at once it gets 429; after 10 s each is cut 408', async () => {
    phase = 'slow bodies';
    const head = 'POST /api/v1/uploads?name=slow.tar HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      'Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n';
    const t0 = Date.now();
    const posts = Array.from({ length: PER_ADDR + 8 }, () => halfOpen('127.0.0.3', head));
    // the same trickle into a JSON body and into a multipart form (CivetWeb's own reader)
    const json = halfOpen('127.0.0.8', 'POST /api/v1/networks/check HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"prototxt":"');
    // and into a body no handler reads (login is a 409 with accounts off): answered
    // at once, then closed when the rest trickles
    const unread = halfOpen('127.0.0.10', 'POST /api/v1/login HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"name":"');
    const form = halfOpen('127.0.0.9', 'POST /api/v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      'Content-Type: multipart/form-data; boundary=----formdata-deepdesk-0123456789\r\nContent-Length: 100000\r\n\r\n' +
      '------formdata-deepdesk-0123456789\r\nContent-Disposition: form-data; name="name"\r\n\r\nslow\r\n' +
      '------formdata-deepdesk-0123456789\r\nContent-Disposition: form-data; name="archive"; filename="a.tar"\r\n' +
      'Content-Type: application/x-tar\r\n\r\n');
    const trickles = [...posts, json, form, unread];
    after(() => trickles.forEach((s) => s.destroy()));
    const drip = setInterval(() => { for (const s of trickles) if (!s.gone) s.write('x'); }, 1000);
    // one that stops sending: dropped after --request-timeout without a byte (twice
    // that here: the read that got "abc" waits its timeout, then the next one)
    const stall = halfOpen('127.0.0.4', head + 'abc');
    await sleep(2 * TIMEOUT_S * 1000 + 2000);
    const refused = posts.filter((s) => /^HTTP\/1\.1 429/.test(s.got));
    const going = posts.filter((s) => !s.gone && s.got === '');
    console.log(`# slow bodies from 127.0.0.3: ${going.length} under way at a byte a second, ${refused.length} refused 429`);
    assert.equal(refused.length, 8, posts.map((s) => s.got.slice(0, 40)).join(' | '));
    assert.match(refused[0].got, /Retry-After: 1/);
    assert.match(refused[0].got, /"code":"rate_limited".*127\.0\.0\.3 has 32 requests under way/);
    assert.equal(going.length, PER_ADDR);
    assert.match(stall.got, /^HTTP\/1\.1 408 /, stall.got);
    assert.match(stall.got, /"code":"timeout".*stopped after 3 of its 100000 bytes/);
    // a byte a second is under the 1 KiB a second a body must average after its
    // first 10 s (body_deadline.h): each is answered 408 and closed by 10.5 s or so
    const cut = [...going, json, form];
    while (cut.some((s) => !s.gone) && Date.now() - t0 < 14000) await sleep(100);
    while (!unread.gone && Date.now() - t0 < 14000) await sleep(100);
    const took = Date.now() - t0;
    clearInterval(drip);
    assert.ok(unread.gone, `the unread body still trickles in ${took} ms on`);
    assert.match(unread.got, /^HTTP\/1\.1 409 /);
    console.log(`# slow bodies: ${cut.filter((s) => s.gone).length} of ${cut.length} trickles (upload, JSON, form) cut ` +
      `by ${took} ms after they began`);
    for (const s of cut) {
      assert.ok(s.gone, `still open ${took} ms on: ${s.got.slice(0, 80)}`);
      assert.match(s.got, /^HTTP\/1\.1 408 /, s.got.slice(0, 300));
      assert.match(s.got, /Connection: close/);
      assert.match(s.got, /"code":"timeout","message":"the request body came too slowly \(\d+ bytes of its \d+ in 1\d s\): a body must average 1024 bytes a second after its first 10 s/);
    }
    assert.ok(took < 13000, `the last trickle went ${took} ms after they began`);
    for (const s of posts) s.destroy();
    assert.deepEqual(slowIn(phase), []);
  });

  test('a WebSocket flood from one address: 16 open, the rest refused 429 with the reason', async () => {
    phase = 'websocket flood';
    const open = (addr) => wsTry(`ws://127.0.0.1:${server.port}/api/v1/ws`, { localAddress: addr });
    const tries = await Promise.all(Array.from({ length: 40 }, () => open('127.0.0.5')));
    const ok = tries.filter((t) => t.ws);
    const refused = tries.filter((t) => t.status === 429);
    console.log(`# WebSockets from 127.0.0.5: 40 asked, ${ok.length} open, ${refused.length} refused 429`);
    assert.equal(ok.length, WS_PER_ADDR, JSON.stringify(tries.filter((t) => !t.ws)));
    assert.equal(refused.length, 40 - WS_PER_ADDR);
    assert.match(JSON.parse(refused[0].body).error.message, /127\.0\.0\.5 has 16 WebSockets open already/);
    // another address still gets one
    const other = await open('127.0.0.6');
    assert.ok(other.ws, JSON.stringify(other));
    // a closed one frees its place
    await new Promise((r) => { ok[0].ws.once('close', r); ok[0].ws.close(); });
    await sleep(100);
    const again = await open('127.0.0.5');
    assert.ok(again.ws, JSON.stringify(again));

    // a message flood on one socket: 20,000 frames as fast as they go
    const ws = again.ws;
    let replies = 0;
    ws.on('message', () => { replies++; });
    for (let i = 0; i < 20000; i++) ws.send(JSON.stringify({ subscribe: (i % 50) + 1 }));
    const t0 = performance.now();
    while (replies < 20000 && ws.readyState === WebSocket.OPEN && performance.now() - t0 < 15000) await sleep(100);
    console.log(`# message flood: 20000 frames sent on one WebSocket, ${replies} replies in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s`);
    assert.ok(replies === 20000 || ws.readyState !== WebSocket.OPEN, `${replies} replies and the socket still open`);
    for (const t of [...ok.slice(1), other, again]) t.ws.terminate();
    assert.deepEqual(slowIn(phase), []);
  });

  /** A WebSocket from addr that sends what send(ws) sends; resolves the close
   *  code and reason, and the messages that came first (within 10 s). */
  const closedBy = (addr, send) => new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/api/v1/ws`, { localAddress: addr, handshakeTimeout: 5000 });
    const msgs = [];
    const timer = setTimeout(() => { ws.terminate(); resolve({ code: 'still open after 10 s', msgs }); }, 10000);
    ws.on('message', (d) => msgs.push(String(d)));
    ws.once('close', (code, reason) => { clearTimeout(timer); resolve({ code, reason: String(reason), msgs }); });
    ws.once('error', (e) => { if (ws.readyState === WebSocket.CONNECTING) { clearTimeout(timer); reject(e); } });
    ws.once('open', () => send(ws));
  });

  test('an oversized WebSocket frame (32 MiB) is closed with 1009, and the server goes on', async () => {
    phase = 'oversized frame';
    const t0 = performance.now();
    const r = await closedBy('127.0.0.7', (ws) => ws.send('{"subscribe":"' + 'x'.repeat(32 << 20) + '"}'));
    console.log(`# a 32 MiB frame: closed with ${r.code} (${r.reason}) in ${Math.round(performance.now() - t0)} ms`);
    assert.equal(r.code, 1009, JSON.stringify(r).slice(0, 300));
    assert.match(r.reason, /message of 33554448 bytes is over the 65536-byte limit/);
    assert.deepEqual(r.msgs, []);
    // a message sent in fragments is counted whole: three of 30 KiB
    const f = await closedBy('127.0.0.7', (ws) => {
      const part = 'x'.repeat(30 << 10);
      ws.send(part, { fin: false });
      ws.send(part, { fin: false });
      ws.send(part, { fin: true });
    });
    assert.equal(f.code, 1009, JSON.stringify(f).slice(0, 300));
    assert.match(f.reason, /message of 92160 bytes is over the 65536-byte limit/);
    // one frame at the limit is read (and answered: it is no subscription)
    const ok = await new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/api/v1/ws`, { localAddress: '127.0.0.7', handshakeTimeout: 5000 });
      ws.once('open', () => ws.send(' '.repeat((64 << 10) - 2) + '{}'));
      ws.once('message', (d) => { ws.terminate(); resolve(JSON.parse(String(d))); });
      ws.once('error', reject);
    });
    assert.equal(ok.type, 'error');
    assert.match(ok.message, /expected \{"subscribe"/);
    const after = await info();
    assert.ok(typeof after === "number" && after < 3000, `after the flood: ${after}`);
    assert.deepEqual(slowIn(phase), []);
  });
});

describe('a hostile user, with accounts on', () => {
  let server, acc;
  const open = [];
  before(async () => {
    acc = makeAccounts({ ann: 'learner', ben: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--threads', String(THREADS)] });
  });
  after(async () => {
    open.forEach((ws) => ws.terminate());
    await server?.stop();
    rmSync(acc.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  });

  /** A WebSocket as session s from addr: {ws} or {status, body}. */
  const wsAs = async (s, addr) => {
    const r = await wsTry(`ws://127.0.0.1:${server.port}/api/v1/ws`, { localAddress: addr, headers: { cookie: s.cookie } });
    if (r.ws) open.push(r.ws);
    return r;
  };

  test('one user gets 8 WebSockets, from whatever addresses; the next is refused 429, another user is not', async () => {
    const ann = await login(server, 'ann');
    const ben = await login(server, 'ben');
    // each from an address of its own, so that only the per-user limit counts
    const tries = await Promise.all(Array.from({ length: 12 }, (_, i) => wsAs(ann, `127.0.1.${i + 1}`)));
    const ok = tries.filter((t) => t.ws);
    const refused = tries.filter((t) => t.status === 429);
    console.log(`# WebSockets of one user from 12 addresses: ${ok.length} open, ${refused.length} refused 429`);
    assert.equal(ok.length, 8, JSON.stringify(tries.filter((t) => !t.ws)));
    assert.equal(refused.length, 4);
    assert.match(JSON.parse(refused[0].body).error.message, /you have 8 live-update connections \(WebSockets\) open already/);
    assert.ok((await wsAs(ben, '127.0.1.1')).ws, 'another user, from an address ann uses too');
    // and nobody logged in is told so
    const anon = await wsAs({ cookie: '' }, '127.0.1.20');
    assert.equal(anon.status, 401, JSON.stringify(anon));
    assert.equal(JSON.parse(anon.body).error.code, 'unauthenticated');
  });
});
