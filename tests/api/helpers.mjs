// helpers.mjs — what the API tests share: the server helper re-exported, a
// starter for a chosen binary (the shipped build), a small OpenAPI schema
// checker, a WebSocket client with a message queue, and worker-pid bookkeeping.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import {
  ROOT, BIN, startServer as libStartServer, waitFor, waitState as libWaitState, sleep, fileEvents, holdWorker,
  keepSanitizerReports,
} from '../lib/server.mjs';

export { ROOT, BIN, waitFor, sleep, WebSocket, fileEvents, holdWorker };

/** Where the tests' data folders go: DEEPDESK_TEST_TMP (say /dev/shm, for speed),
 *  else the system temp folder. */
export const TEST_TMP = process.env.DEEPDESK_TEST_TMP || tmpdir();

/** tests/lib/server.mjs's startServer with the data folder under TEST_TMP;
 *  restart() gives a server of the same kind. */
export async function startServer(opts = {}) {
  const dataDir = opts.dataDir || mkdtempSync(join(TEST_TMP, 'deepdesk-test-'));
  const server = await libStartServer({ ...opts, dataDir });
  server.restart = async (extra = {}) => {
    await server.stop();
    return startServer({ ...opts, ...extra, dataDir });
  };
  // a worker may still be writing in the folder: retry (ENOTEMPTY) rather than fail
  server.cleanup = () => { keepSanitizerReports(dataDir); if (!opts.keepData) rmSync(dataDir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 }); };
  return server;
}

/** waitState from tests/lib/server.mjs, but a timeout says where the job and the
 *  others are, so a failure can be read without a rerun. */
export async function waitState(server, id, states, timeout = 60000) {
  try {
    return await libWaitState(server, id, states, timeout);
  } catch (e) {
    let where = '';
    try {
      const j = await server.api('GET', `/api/v1/jobs/${id}`);
      const l = await server.api('GET', '/api/v1/jobs?limit=20');
      const i = await server.api('GET', '/api/v1/info');
      where = `\njob: ${JSON.stringify(j.body)}\njobs: ${JSON.stringify(l.body?.jobs?.map((x) => [x.id, x.state, x.progress]))}` +
        `\nslots: ${JSON.stringify(i.body?.jobs)}\nserver stderr: ${server.stderr}`;
    } catch (e2) { where = `\n(and the server does not answer: ${e2.message})`; }
    e.message += where;
    throw e;
  }
}

export const SHIPPED_BIN = process.env.DEEPDESK_SHIPPED_BIN || join(ROOT, 'build', 'deepdesk');
export const OPENAPI_FILE = join(ROOT, 'app', 'api', 'openapi.json');
export const loadOpenApi = () => JSON.parse(readFileSync(OPENAPI_FILE, 'utf8'));

/** Start `bin serve` (a binary other than BIN, such as the shipped build). */
export function startServerBin(bin, opts = {}) {
  return startServer({ ...opts, bin });
}

/* ---- worker pids: kill whatever a test leaves behind ---- */

const pids = new Set();
export function trackPid(pid) { if (pid > 0) pids.add(pid); }
export function alive(pid) {
  try { process.kill(pid, 0); } catch { return false; }
  // a zombie still answers kill(pid, 0); count it as dead
  try { return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { return false; }
}
export function killTrackedPids() {
  for (const pid of pids) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
  pids.clear();
}

/** Wait until the scheduler has ticked at least n times, counted by a running job
 *  that reports all the time (a test job with a small step_ms): eventsOf() reads its
 *  event count through the API, which grows only when a tick has read its log, and
 *  every tick starts what may start.  The positive event that proves a "must not
 *  start" moment has passed, where a sleep would only hope so. */
export async function schedulerTicks(eventsOf, n = 5, what = 'the scheduler to tick') {
  let last = await eventsOf();
  let seen = 0;
  await waitFor(async () => {
    const e = await eventsOf();
    if (e !== last) { seen++; last = e; }
    return seen >= n;
  }, { timeout: 60000, what: `${what} (${n} ticks, counted by a running job's events)` });
}

/* ---- Debian's Fashion-MNIST ---- */

/** The files datasets/example.c's example_fashion_mnist_available() needs (under
 *  FASHION_MNIST_DIR, datasets/example.h). */
export const FASHION_MNIST_FILES = ['train-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz']
  .map((f) => join('/usr/share/datasets/fashion-mnist', f));

/** r: the answer to a POST /api/v1/datasets of the fashion-mnist example.  Returns a
 *  reason to skip only when the server refused it as not installed and the files are
 *  in fact missing; under CI (process.env.CI) that too is a failure, and any other
 *  answer than 202 fails showing its body.  Returns null when the test goes on. */
export function fashionMnistSkip(r) {
  const missing = FASHION_MNIST_FILES.filter((f) => !existsSync(f));
  if (missing.length && r.status === 400 && /Fashion-MNIST is not installed/.test(r.body?.error?.message ?? '')) {
    assert.ok(!process.env.CI, `CI must have dataset-fashion-mnist installed: ${missing.join(', ')} missing`);
    return `Fashion-MNIST is not installed here (${missing.join(', ')} missing)`;
  }
  assert.equal(r.status, 202, `POST /api/v1/datasets of Fashion-MNIST (${missing.length ? 'missing' : 'installed'}): ${JSON.stringify(r.body)}`);
  return null;
}

/* ---- small API conveniences ---- */

/** POST a test job; returns the detail object (asserts 202). */
export async function createJob(server, params = {}, extra = {}) {
  const r = await server.api('POST', '/api/v1/jobs', { kind: 'test', params, ...extra });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.job;
}

export async function getJob(server, id) {
  const r = await server.api('GET', `/api/v1/jobs/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.job;
}

/** Every event of a job, paging through /events. */
export async function allEvents(server, id, pageSize = 5000) {
  const out = [];
  let after = 0;
  for (;;) {
    const r = await server.api('GET', `/api/v1/jobs/${id}/events?after=${after}&limit=${pageSize}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    out.push(...r.body.events);
    after = r.body.last;
    if (!r.body.more) return out;
  }
}

/** Assert seq numbers run 1..n with no gap or repeat. */
export function assertContiguous(events, from = 1, what = 'events') {
  events.forEach((e, i) => assert.equal(e.seq, from + i, `${what}: seq ${e.seq} at index ${i}, expected ${from + i}`));
}

export async function jobCount(server) {
  const r = await server.api('GET', '/api/v1/jobs?limit=1');
  assert.equal(r.status, 200);
  return r.body.total;
}

/** Assert an error answer: status, JSON content type, {"error":{"code","message"}} and nothing more. */
export function assertError(r, status, code, messageRe) {
  assert.equal(r.status, status, `status; body ${JSON.stringify(r.body)}`);
  assert.match(r.headers.get('content-type') || '', /^application\/json/);
  assert.ok(r.body && typeof r.body === 'object', `body is JSON: ${JSON.stringify(r.body)}`);
  assert.deepEqual(Object.keys(r.body), ['error']);
  assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message']);
  assert.equal(typeof r.body.error.code, 'string');
  assert.equal(typeof r.body.error.message, 'string');
  assert.ok(r.body.error.message.length > 0);
  if (code) assert.equal(r.body.error.code, code);
  if (messageRe) assert.match(r.body.error.message, messageRe);
}

/* ---- OpenAPI 3.0 schema checking (the subset app/api/openapi.json uses) ----
 * Strict: an object schema that lists properties is closed unless it says
 * additionalProperties: true, so an undocumented field is an error too. */

function resolve(doc, s) {
  while (s && s.$ref) {
    const parts = s.$ref.replace(/^#\//, '').split('/');
    s = parts.reduce((o, k) => o?.[k], doc);
    if (!s) throw new Error(`unresolved $ref`);
  }
  return s;
}

function typeOk(type, v) {
  switch (type) {
    case 'object': return v !== null && typeof v === 'object' && !Array.isArray(v);
    case 'array': return Array.isArray(v);
    case 'string': return typeof v === 'string';
    case 'boolean': return typeof v === 'boolean';
    case 'integer': return Number.isInteger(v);
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    default: return true;
  }
}

export function schemaErrors(doc, schema, value, path = '$') {
  const s = resolve(doc, schema);
  const errs = [];
  if (value === null) {
    if (s.nullable) return errs;
    if (s.allOf || s.oneOf) { /* fall through to the parts */ } else if (s.type) return [`${path}: null where ${s.type} expected`];
  }
  if (s.allOf) {
    // each part on its own (open), then unknown keys against the union of all parts
    for (const part of s.allOf) errs.push(...schemaErrors(doc, { ...resolve(doc, part), additionalProperties: true }, value, path));
    const merged = { props: {}, open: s.additionalProperties === true };
    (function collect(list) {
      for (const part of list) {
        const p = resolve(doc, part);
        if (p.allOf) collect(p.allOf);
        Object.assign(merged.props, p.properties || {});
        if (p.additionalProperties === true) merged.open = true;
      }
    })(s.allOf);
    if (!merged.open && typeOk('object', value)) {
      for (const k of Object.keys(value)) if (!(k in merged.props)) errs.push(`${path}.${k}: not in the schema`);
    }
    return errs;
  }
  if (s.oneOf) {
    const ok = s.oneOf.filter((o) => schemaErrors(doc, o, value, path).length === 0).length;
    if (ok !== 1) errs.push(`${path}: matches ${ok} of the oneOf schemas (want 1): ${JSON.stringify(value).slice(0, 200)}`);
    return errs;
  }
  if (s.type && !typeOk(s.type, value)) return [`${path}: ${JSON.stringify(value)?.slice(0, 80)} is not ${s.type}`];
  if (s.enum && !s.enum.includes(value)) errs.push(`${path}: ${JSON.stringify(value)} not in ${JSON.stringify(s.enum)}`);
  if (typeof value === 'number') {
    if (s.minimum !== undefined && value < s.minimum) errs.push(`${path}: ${value} < ${s.minimum}`);
    if (s.maximum !== undefined && value > s.maximum) errs.push(`${path}: ${value} > ${s.maximum}`);
  }
  if (typeof value === 'string') {
    if (s.maxLength !== undefined && value.length > s.maxLength) errs.push(`${path}: longer than ${s.maxLength}`);
    if (s.minLength !== undefined && value.length < s.minLength) errs.push(`${path}: shorter than ${s.minLength}`);
  }
  if (Array.isArray(value)) {
    if (s.maxItems !== undefined && value.length > s.maxItems) errs.push(`${path}: more than ${s.maxItems} items`);
    if (s.items) value.forEach((v, i) => errs.push(...schemaErrors(doc, s.items, v, `${path}[${i}]`)));
  }
  if (typeOk('object', value) && (s.type === 'object' || s.properties)) {
    for (const k of s.required || []) if (!(k in value)) errs.push(`${path}.${k}: required but absent`);
    const props = s.properties || {};
    for (const [k, v] of Object.entries(value)) {
      if (props[k]) errs.push(...schemaErrors(doc, props[k], v, `${path}.${k}`));
      else if (typeof s.additionalProperties === 'object') errs.push(...schemaErrors(doc, s.additionalProperties, v, `${path}.${k}`));
      else if (s.additionalProperties !== true && s.properties) errs.push(`${path}.${k}: not in the schema`);
    }
  }
  return errs;
}

/** Assert value matches components/schemas/NAME of doc. */
export function assertSchema(doc, name, value) {
  const errs = schemaErrors(doc, { $ref: `#/components/schemas/${name}` }, value);
  assert.deepEqual(errs, [], `${name}: ${JSON.stringify(value).slice(0, 400)}`);
}

/* ---- WebSocket client with a queue ---- */

export async function wsConnect(url) {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/api/v1/ws');
  const queue = [];
  let waiters = [];
  const all = [];
  ws.on('message', (data) => {
    let msg;
    try { msg = JSON.parse(String(data)); } catch { msg = { unparsable: String(data) }; }
    all.push(msg);
    queue.push(msg);
    const w = waiters;
    waiters = [];
    w.forEach((f) => f());
  });
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  const client = {
    ws,
    all, // every message ever received
    send(obj) { ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj)); },
    /** The next queued message matching pred (messages before it are dropped). */
    async next(pred = () => true, timeout = 60000, what = 'a message') {
      const end = Date.now() + timeout;
      for (;;) {
        while (queue.length) {
          const m = queue.shift();
          if (pred(m)) return m;
        }
        const left = end - Date.now();
        if (left <= 0) throw new Error(`websocket: timed out waiting for ${what}`);
        await new Promise((r) => { const t = setTimeout(r, left); waiters.push(() => { clearTimeout(t); r(); }); });
      }
    },
    async subscribe(topic) {
      client.send({ subscribe: topic });
      return client.next((m) => m.type === 'subscribed' && m.topic === topic, 60000, `subscribed ${topic}`);
    },
    drain() { queue.length = 0; },
    close() {
      return new Promise((r) => {
        if (ws.readyState === WebSocket.CLOSED) return r();
        ws.once('close', r);
        ws.close();
        setTimeout(() => { ws.terminate(); r(); }, 1000).unref();
      });
    },
  };
  return client;
}

/** A w×h P6 PPM of one colour with a little seeded noise, so classes of colours are
 *  learnable but no two images are the same. */
export function noisyPpm(w, h, [r, g, b], seed) {
  const head = Buffer.from(`P6\n${w} ${h}\n255\n`);
  const px = Buffer.alloc(w * h * 3);
  let x = seed * 2654435761 >>> 0;
  const noise = () => { x = (x * 1103515245 + 12345) >>> 0; return (x >>> 16) % 21 - 10; };
  const clamp = (v) => Math.max(0, Math.min(255, v));
  for (let i = 0; i < w * h; i++) px.set([clamp(r + noise()), clamp(g + noise()), clamp(b + noise())], i * 3);
  return Buffer.concat([head, px]);
}

/** dir/<class>/<i>.ppm: n noisy side×side images of each colour of colours ({class: [r,g,b]}). */
export function writeColourFolders(dir, colours, n, side = 8) {
  for (const [cls, rgb] of Object.entries(colours)) {
    mkdirSync(join(dir, cls), { recursive: true });
    for (let i = 0; i < n; i++) writeFileSync(join(dir, cls, `${i}.ppm`), noisyPpm(side, side, rgb, i + 1));
  }
}

/** The tests' networks on colour datasets: `name`, the two Data layers (batch 4,
 *  pixels scaled to [0, 1]), then layers (prototxt whose last top is `top`), then the
 *  val accuracy, the loss and the Softmax a deploy stage needs, all on top. */
export const colourNet = (name, layers, top) => `name: "${name}"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
${layers}
layer { name: "accuracy" type: "Accuracy" bottom: "${top}" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "${top}" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "${top}" top: "prob" include { stage: "deploy" } }
`;

/** A network that trains in milliseconds on tiny images: one InnerProduct on the
 *  pixels, val accuracy, and the Softmax a deploy stage needs. */
export const TINY_NET = colourNet('tiny', `layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { weight_filler { type: "xavier" } } }`, 'ip');

/** A wide one: an InnerProduct of n outputs on the pixels, then (extra: layers on
 *  ip1 whose top is ip3) one for the classes, ip2. */
export const wideNet = (n, extra = '') => colourNet('wide', `layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: ${n} weight_filler { type: "xavier" } } }
${extra}
layer { name: "ip2" type: "InnerProduct" bottom: "${extra ? 'ip3' : 'ip1'}" top: "ip2"
  inner_product_param { weight_filler { type: "xavier" } } }`, 'ip2');

/** In server (started with a --data-root above dir): a dataset job made from the
 *  class folders in dir (options: 8×8 RGB with 25% for val by default), finished; its id. */
export async function folderDataset(server, dir, { name = 'colours', options = {}, timeout = 30000 } = {}) {
  const r = await server.api('POST', '/api/v1/datasets', {
    name, source: { type: 'folder', train: dir },
    options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1, ...options },
  });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  const job = await waitState(server, r.body.job.id, ['done', 'error'], timeout);
  assert.equal(job.state, 'done', job.error);
  return r.body.job.id;
}

/** In server: a model job of prototxt (TINY_NET unless said) trained on dataset dsId
 *  for `epochs` at base_lr 0.05 (extra: more fields of the POST), finished; its id. */
export async function trainModel(server, dsId, { name = 'tiny', prototxt = TINY_NET, epochs = 2, timeout = 60000, ...extra } = {}) {
  const m = await server.api('POST', '/api/v1/models', {
    name, dataset: dsId, network: { prototxt }, epochs, solver: { base_lr: 0.05 }, ...extra,
  });
  assert.equal(m.status, 202, JSON.stringify(m.body));
  const done = await waitState(server, m.body.job.id, ['done', 'error'], timeout);
  assert.equal(done.state, 'done', done.error);
  return m.body.job.id;
}

/** In server (started with `--data-root work`): a dataset of colour folders (work/colours,
 *  n images a class; options go to the dataset) and a TINY_NET model trained on it for
 *  2 epochs.  Both finished: {dsId, modelId}. */
export async function trainColourModel(server, work, colours, { n = 16, options = {} } = {}) {
  writeColourFolders(join(work, 'colours'), colours, n);
  const dsId = await folderDataset(server, join(work, 'colours'), { options });
  return { dsId, modelId: await trainModel(server, dsId) };
}

/** A server (args after `--data-root work`) on a fresh work folder named prefix…, with
 *  trainColourModel's dataset of colours and model (n, options as there), finished:
 *  {server, work, dsId, modelId}; the caller ends them (endServer). */
export async function serverWithColourModel(prefix, colours, { args = [], ...opts } = {}) {
  const work = mkdtempSync(join(tmpdir(), prefix));
  const server = await startServer({ args: ['--data-root', work, ...args] });
  return { server, work, ...(await trainColourModel(server, work, colours, opts)) };
}

/** A suite's after hook: the workers it left killed, server stopped and its data
 *  folder removed, and work (the suite's own folder) removed; either may be unset. */
export async function endServer(server, ...dirs) {
  killTrackedPids();
  await server?.stop();
  server?.cleanup();
  for (const d of dirs) if (d) rmSync(d, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
}

/** server.api, with the network-level cause (ECONNRESET, ...) in the message when a
 *  request fails. */
export async function apiSaying(server, method, path, body) {
  try {
    return await server.api(method, path, body);
  } catch (e) {
    const c = e.cause ? ` (${[e.cause.code, e.cause.message].filter(Boolean).join(': ')})` : '';
    throw new Error(`${method} ${path}: ${e.message}${c}`);
  }
}

/** POST body (a Buffer, sent as type, or a FormData) to server's path: {status,
 *  body (the JSON, or null), headers, text}.  A request that fails says which it
 *  was and what the socket said (a reset, a close), not just "fetch failed". */
export async function postBody(server, path, body, type = 'application/octet-stream') {
  const init = { method: 'POST', body };
  if (!(body instanceof FormData)) init.headers = { 'Content-Type': type };
  let res, text;
  try {
    res = await fetch(server.url + path, init);
    text = await res.text();
  } catch (e) {
    const size = body instanceof FormData ? 'a form' : `${body.length} bytes`;
    throw new Error(`POST ${path} (${size}): ${e.message}: ${e.cause?.code || ''} ${e.cause?.message || ''}`);
  }
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, headers: res.headers, text };
}

/** A FormData of fields: a Buffer is a PNG file img.png, {bytes, name, type} a file
 *  of that name and type (application/octet-stream unless said), anything else text. */
export function formOf(fields) {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (Buffer.isBuffer(v)) f.append(k, new Blob([v], { type: 'image/png' }), 'img.png');
    else if (v && v.bytes) f.append(k, new Blob([v.bytes], { type: v.type || 'application/octet-stream' }), v.name);
    else f.append(k, String(v));
  }
  return f;
}
