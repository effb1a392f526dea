// infer_service.test.mjs — the inference service as a process of its own
// (app/infer/service.c): its pid, models and bytes in GET /api/v1/info; killed
// with SIGKILL, it is restarted and the next request works; a request in flight
// while it dies gets a 503 that names the image, not a hang; hostile images (not
// an image, a 60000×60000 header, a truncated PNG) are clear errors and the service
// goes on (same pid); the socket refuses frames over its caps and paths outside
// the data folder; a model that has not written a snapshot yet is a 409; a
// server that stops, or is killed outright, leaves no service running.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readdirSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, assertError, alive, createJob, trainColourModel, TINY_NET,
} from './helpers.mjs';
import { png } from './infer_fixtures.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };

function form(name, bytes) {
  const f = new FormData();
  f.append('image', new Blob([bytes], { type: 'image/png' }), name);
  return f;
}

async function classify(server, id, body, query = '') {
  const init = { method: 'POST', body };
  if (!(body instanceof FormData)) init.headers = { 'Content-Type': 'image/png' };
  const res = await fetch(`${server.url}/api/v1/models/${id}/classify${query}`, init);
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text, headers: res.headers };
}

async function inference(server) {
  const r = await server.api('GET', '/api/v1/info');
  assert.equal(r.status, 200);
  return r.body.inference;
}

/** How many of process pid's threads sleep in nanosleep: the service's
 *  DEEPDESK_INFER_DELAY_MS pause (its threads otherwise wait on sockets and locks). */
function sleepingThreads(pid) {
  let n = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try { n += /nanosleep/.test(readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8')) ? 1 : 0; } catch { /* gone */ }
  }
  return n;
}


/** Send raw bytes on the service's socket; resolves to what came back before it closed. */
function raw(sock, bytes) {
  return new Promise((resolve, reject) => {
    const c = createConnection(sock);
    const got = [];
    c.on('data', (d) => got.push(d));
    // a service that hangs up on unread bytes resets the connection: that is a close too
    c.on('error', (e) => (['ECONNRESET', 'EPIPE'].includes(e.code) ? resolve(Buffer.concat(got)) : reject(e)));
    c.on('close', () => resolve(Buffer.concat(got)));
    c.on('connect', () => c.end(bytes));
  });
}
/** A frame as the service reads them: two uint32 lengths, the JSON header, the payload. */
function frame(head, payload = Buffer.alloc(0), lens = null) {
  const h = Buffer.from(typeof head === 'string' ? head : JSON.stringify(head));
  const pre = Buffer.alloc(8);
  pre.writeUInt32LE(lens ? lens[0] : h.length, 0);
  pre.writeUInt32LE(lens ? lens[1] : payload.length, 4);
  return Buffer.concat([pre, h, payload]);
}
const answer = (buf) => JSON.parse(buf.subarray(8, 8 + buf.readUInt32LE(0)).toString());

describe('infer service', () => {
  let server, work, modelId, dsId;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-infer-svc-'));
    server = await startServer({ args: ['--data-root', work, '--cpu-slots', '1'] });
    ({ dsId, modelId } = await trainColourModel(server, work, COLOURS, { n: 12 }));
  });
  after(async () => { await server?.kill(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  test('info reports the service: its pid, and the models and bytes it holds', async () => {
    const before = await inference(server);
    assert.ok(before.pid > 0 && before.pid !== server.proc.pid, JSON.stringify(before));
    assert.ok(alive(before.pid));
    assert.equal(before.restarts, 0);
    const r = await classify(server, modelId, png(8, 8, COLOURS.red));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.predictions[0].label, 'red');
    const now = await inference(server);
    assert.equal(now.pid, before.pid);
    assert.ok(now.models >= 1, JSON.stringify(now));
    assert.ok(now.bytes > 0, JSON.stringify(now));
  });

  test('hostile images are clear errors and the service goes on, same pid', async () => {
    const { pid } = await inference(server);
    const good = png(8, 8, COLOURS.green);
    assertError(await classify(server, modelId, form('notes.png', Buffer.from('not an image at all'))), 400, 'invalid', /notes\.png/);
    assertError(await classify(server, modelId, form('huge.png', png(60000, 60000, [0, 0, 0], { bare: true }))),
      413, 'too_large', /huge\.png.*60000/);
    assertError(await classify(server, modelId, form('cut.png', good.subarray(0, good.length - 30))), 400, 'invalid', /cut\.png/);
    const r = await classify(server, modelId, good);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.predictions[0].label, 'green');
    const now = await inference(server);
    assert.equal(now.pid, pid, 'the service did not restart');
    assert.equal(now.restarts, 0);
  });

  test('the socket: only the server may use it, lengths are capped, paths stay below the data folder', async () => {
    const { pid } = await inference(server);
    const sock = join(server.dataDir, 'infer.sock');
    const { statSync } = await import('node:fs');
    assert.equal(statSync(sock).mode & 0o777, 0o600);
    // lengths over the caps, an empty or malformed header: the connection is closed, nothing read
    assert.equal((await raw(sock, frame('{}', Buffer.alloc(0), [0xffffffff, 0]))).length, 0);
    assert.equal((await raw(sock, frame('{"op":"classify"}', Buffer.alloc(0), [17, 0x7fffffff]))).length, 0);
    assert.equal((await raw(sock, frame('', Buffer.alloc(0), [0, 0]))).length, 0);
    assert.equal((await raw(sock, frame('not json at all'))).length, 0);
    assert.equal((await raw(sock, Buffer.from([1, 0, 0]))).length, 0, 'a cut frame');
    // well-formed requests for what is not a model below the data folder: refused, named
    const model = join(server.dataDir, 'jobs', String(modelId));
    const cases = [
      [{ op: 'classify', dir: '/etc', weights: '/etc/passwd' }, /\/etc is not a model folder/],
      [{ op: 'classify', dir: model, weights: `${model}/../../deepdesk.db` }, /not a weights file/],
      [{ op: 'bundle', dir: `${model}/../..`, weights: `${model}/../../x.safetensors` }, /not a model folder/],
      [{ op: 'classify', dir: model }, /names no model folder/],
      [{ op: 'format-disk' }, /unknown operation/],
    ];
    for (const [req, re] of cases) {
      const a = answer(await raw(sock, frame(req, Buffer.from('x'))));
      assert.ok(a.error && a.error.code < 0, JSON.stringify(a));
      assert.match(a.error.message, re);
    }
    const st = answer(await raw(sock, frame({ op: 'stats' })));
    assert.equal(st.pid, pid);
    const now = await inference(server);
    assert.equal(now.pid, pid, 'the service went on');
    const r = await classify(server, modelId, png(8, 8, COLOURS.red));
    assert.equal(r.status, 200, r.text);
  });

  test('a model still waiting to train has no snapshot yet: 409, said in words', async () => {
    const blocker = await createJob(server, { steps: 2000, step_ms: 50 });
    await waitState(server, blocker.id, ['running'], 60000);
    const m = await server.api('POST', '/api/v1/models', {
      name: 'waiting', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1,
    });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    assertError(await classify(server, m.body.job.id, png(8, 8, COLOURS.red)), 409, 'conflict', /no snapshot yet.*still training/);
    for (const id of [m.body.job.id, blocker.id]) await server.api('POST', `/api/v1/jobs/${id}/abort`);
    await waitState(server, blocker.id, ['aborted', 'done', 'error'], 30000);
  });

  test('kill -9 the service: it is restarted and the next request works', async () => {
    const { pid } = await inference(server);
    // at once: the server's kept connection to the dead service must not cost this request
    process.kill(pid, 'SIGKILL');
    const r = await classify(server, modelId, png(8, 8, COLOURS.blue));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.predictions[0].label, 'blue');
    await waitFor(() => !alive(pid), 60000, 'the service to die');
    const now = await inference(server);
    assert.ok(now.pid > 0 && now.pid !== pid, JSON.stringify(now));
    assert.equal(now.restarts, 1);
    assert.ok(alive(now.pid));
  });

  test('a server that stops stops its service', async () => {
    const { pid } = await inference(server);
    assert.ok(alive(pid));
    const exit = await server.stop();
    assert.equal(exit.code, 0);
    await waitFor(() => !alive(pid), 60000, 'the service to stop with the server');
  });

  test('a request in flight when the service dies gets a 503 naming the image; the next works', async () => {
    // the service holds each classification this long before it classifies, so that
    // one is in flight for far longer than this test takes to kill it
    process.env.DEEPDESK_INFER_DELAY_MS = '8000';
    try {
      server = await server.restart();
    } finally {
      delete process.env.DEEPDESK_INFER_DELAY_MS;
    }
    const pid = await waitFor(async () => (await inference(server)).pid, { timeout: 60000, what: 'the new server\'s inference service' });
    assert.equal(sleepingThreads(pid), 0, 'an idle service has no thread in its delay');
    const inflight = classify(server, modelId, form('victim.png', png(8, 8, COLOURS.red)));
    // the service has it: a thread of it sleeps its delay (not a guess that 500 ms suffice)
    await waitFor(() => sleepingThreads(pid) > 0, { timeout: 60000, what: 'the service to hold the request (a thread in its delay)' });
    process.kill(pid, 'SIGKILL');
    const r = await inflight;
    // this message, not the 120 s "did not answer" one: the death was noticed, not timed out
    assertError(r, 503, 'unavailable', /^the inference worker stopped while classifying victim\.png; it has been restarted$/);
    const next = await classify(server, modelId, png(8, 8, COLOURS.red));
    assert.equal(next.status, 200, next.text);
    assert.equal(next.body.predictions[0].label, 'red');
    // a server killed outright takes its service with it
    const now = await inference(server);
    await server.kill();
    await waitFor(() => !alive(now.pid), 60000, 'the service to die with a killed server');
  });
});
