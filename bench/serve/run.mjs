#!/usr/bin/env node
// bench/serve/run.mjs — how fast the server answers, and how well it fans events out.
//
//   1. HTTP: seed a fresh store with 1,000 finished "test" jobs, then wrk
//      (-t2 -c32 -d10s --latency) against GET /api/v1/jobs (the default page of 50)
//      and against a static UI file (GET /index.html); 3 runs each, medians.
//   2. WebSocket fan-out: 100 clients subscribe {"subscribe":"all"}, one test job
//      bursts ~10,000 log events; every client checks seq contiguity and measures
//      delivery latency (receive time - event.t); 3 runs, medians.
//   3. A 3-second probe of how many WebSocket clients the server serves at its
//      default --threads (each WebSocket holds one HTTP worker thread).
//   4. A 7-second probe: does one WebSocket client that stops reading block the
//      server (job creation) while a job bursts events?
//
// The server under test is build/deepdesk-test, started by tests/lib/server.mjs with
// --log-level warn.  Results go to bench/results/serve-latest.json (rows for the
// table bench/run.sh prints, plus every run's raw figures).
//
// Knobs (environment): BENCH_RUNS (3), BENCH_WRK_DURATION (10s), BENCH_JOBS (1000),
// BENCH_WS_CLIENTS (100), BENCH_WS_LOG_LINES (10000), BENCH_WS_THREADS (--threads for
// the fan-out server; default clients + 28), BENCH_ONLY (a comma list of http,
// ws_fanout, ws_default_threads, ws_stalled_client).  BENCH_QUICK=1: 1 run, 3 s wrk.
// DEEPDESK_BIN (read by tests/lib/server.mjs): another binary to measure.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, waitFor, waitState, sleep, ROOT, BIN } from '../../tests/lib/server.mjs';
import { RESULTS, quick, envNumber as int, median, round } from '../lib/stats.mjs';

const WebSocket = createRequire(join(ROOT, 'tests', 'package.json'))('ws');
const here = dirname(fileURLToPath(import.meta.url));

const CFG = {
  runs: int('BENCH_RUNS', quick ? 1 : 3),
  wrk_duration: process.env.BENCH_WRK_DURATION || (quick ? '3s' : '10s'),
  wrk_threads: 2,
  wrk_connections: 32,
  jobs: int('BENCH_JOBS', 1000),
  seed_concurrency: 8,
  ws_clients: int('BENCH_WS_CLIENTS', 100),
  ws_log_lines: int('BENCH_WS_LOG_LINES', 10000),
};
CFG.ws_threads = int('BENCH_WS_THREADS', CFG.ws_clients + 28);

const log = (...a) => console.log('  [serve]', ...a);
const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : null);
// CPU seconds a process has used (its own threads, and its waited-for children:
// the job workers), from /proc; null where there is no /proc.
function cpuOf(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const hz = 100; // USER_HZ on Linux
    return { self: (Number(f[11]) + Number(f[12])) / hz, children: (Number(f[13]) + Number(f[14])) / hz };
  } catch { return null; }
}

const serverArgs = (extra = []) => ['--log-level', 'warn', ...extra];

// The bench's own control requests (create a job, read its state) each go on a new
// connection.  CivetWeb closes an idle keep-alive connection after 500 ms (its default
// keep_alive_timeout_ms); on a loaded machine fetch's pool then sends the next request
// on a socket the server has just closed ("other side closed"), and a POST cannot
// safely be sent again.  wrk and the WebSocket clients are not affected by this.
function request(server, method, path, body) {
  return new Promise((res, rej) => {
    const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const req = http.request(server.url + path, {
      method, agent: false,
      headers: data ? { 'content-type': 'application/json', 'content-length': data.length } : {},
    }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { json = text; }
        res({ status: r.statusCode, body: json, headers: r.headers, bytes: Buffer.concat(chunks).length });
      });
      r.on('error', rej);
    });
    req.setTimeout(30000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on('error', rej);
    req.end(data);
  });
}

async function start(args) {
  const server = await startServer({ args });
  server.api = (method, path, body) => request(server, method, path, body);
  return server;
}

// ---------------------------------------------------------------------------------
// 1. HTTP with wrk

async function seed(server, n) {
  const t0 = Date.now();
  let next = 0, bad = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const r = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 0 } });
      if (r.status !== 202) { bad++; if (bad <= 3) log(`POST /api/v1/jobs: ${r.status} ${JSON.stringify(r.body)}`); }
    }
  };
  await Promise.all(Array.from({ length: CFG.seed_concurrency }, worker));
  const posted_s = (Date.now() - t0) / 1000;
  if (bad) throw new Error(`${bad} of ${n} job creations failed`);
  // every job finishes at once (steps 0): wait until none is queued or running
  await waitFor(async () => {
    const q = await server.api('GET', '/api/v1/jobs?state=queued&limit=1');
    const r = await server.api('GET', '/api/v1/jobs?state=running&limit=1');
    return q.body.total === 0 && r.body.total === 0;
  }, 180000, `${n} seeded jobs to finish`);
  const done = (await server.api('GET', '/api/v1/jobs?state=done&limit=1')).body.total;
  const total = (await server.api('GET', '/api/v1/jobs?limit=1')).body.total;
  const finished_s = (Date.now() - t0) / 1000;
  log(`seeded ${total} jobs (${done} done) in ${finished_s.toFixed(1)} s (posted in ${posted_s.toFixed(1)} s)`);
  if (done !== n) log(`WARNING: ${n - done} of ${n} seeded jobs did not end "done"`);
  return { jobs: total, done, posted_s: round(posted_s), finished_s: round(finished_s), jobs_per_s: round(n / finished_s, 1) };
}

function runWrk(url) {
  const args = [`-t${CFG.wrk_threads}`, `-c${CFG.wrk_connections}`, `-d${CFG.wrk_duration}`, '--latency',
    '-s', join(here, 'report.lua'), url];
  return new Promise((res, rej) => {
    const p = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', rej);
    p.on('exit', (code) => {
      if (code !== 0) return rej(new Error(`wrk exited ${code}: ${err || out}`));
      const line = out.split('\n').find((l) => l.startsWith('WRK_JSON '));
      if (line) return res(JSON.parse(line.slice(9)));
      // no Lua report: read wrk's own text
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
      const p99 = /^\s+99%\s+([\d.]+)(us|ms|s)\b/m.exec(out);
      const scale = { us: 0.001, ms: 1, s: 1000 };
      if (!rps || !p99) return rej(new Error(`cannot read wrk's output:\n${out}`));
      res({ rps: Number(rps[1]), lat_p99_ms: Number(p99[1]) * scale[p99[2]], err_status: 0 });
    });
  });
}

async function httpBench() {
  const server = await start(serverArgs());
  try {
    log(`HTTP server ${server.url} (pid ${server.proc.pid}), seeding ${CFG.jobs} jobs…`);
    const seeded = await seed(server, CFG.jobs);
    const targets = [
      { key: 'jobs_list', path: '/api/v1/jobs', what: 'GET /api/v1/jobs (page of 50)' },
      { key: 'static', path: '/index.html', what: 'GET /index.html' },
    ];
    const out = { seed: seeded };
    for (const t of targets) {
      const probe = await request(server, 'GET', t.path);
      let note = `${probe.status}, ${probe.bytes} bytes`;
      if (t.key === 'jobs_list') note += `, ${probe.body.jobs.length} jobs`;
      log(`${t.what}: ${note}`);
      if (probe.status !== 200) throw new Error(`${t.what} answered ${probe.status}`);
      const runs = [];
      for (let i = 0; i < CFG.runs; i++) {
        const r = await runWrk(server.url + t.path);
        const errs = r.err_connect + r.err_read + r.err_write + r.err_status + r.err_timeout;
        log(`  wrk run ${i + 1}/${CFG.runs}: ${r.rps.toFixed(0)} req/s, p50 ${r.lat_p50_ms?.toFixed(2)} ms, p99 ${r.lat_p99_ms.toFixed(2)} ms${errs ? `, ${errs} errors` : ''}`);
        runs.push(r);
      }
      out[t.key] = {
        what: t.what, response_bytes: probe.bytes, runs,
        rps: round(median(runs.map((r) => r.rps)), 1),
        p50_ms: round(median(runs.map((r) => r.lat_p50_ms)), 3),
        p99_ms: round(median(runs.map((r) => r.lat_p99_ms)), 3),
        errors: runs.reduce((s, r) => s + (r.err_connect + r.err_read + r.err_write + r.err_status + r.err_timeout || 0), 0),
      };
    }
    out.server_warnings = server.stderr.split('\n').filter(Boolean).length;
    return out;
  } finally {
    await server.stop();
    server.cleanup();
  }
}

// ---------------------------------------------------------------------------------
// 2. WebSocket fan-out

// Each client keeps the raw "events" frames with their arrival time and parses them
// only after the burst: with 100 clients in one node process, parsing as they come
// (~100 MB of JSON) would stall the event loop and the arrival times would measure
// this process, not the server.  While the burst runs, a client reads only the last
// seq of each frame (the frame's tail) to know when it has everything.
const EVENTS_PREFIX = Buffer.from('{"type":"events","job":');
const TAIL_SEQ = /"seq":(\d+)\}\]\}\s*$/;

function openClients(server, n, timeoutMs) {
  const wsUrl = server.url.replace(/^http/, 'ws') + '/api/v1/ws';
  const clients = [];
  let subscribed = 0;
  const all = new Promise((resolveAll) => {
    for (let i = 0; i < n; i++) {
      const c = { i, ws: null, subscribed: false, frames: [], lastSeq: new Map(), parsed: [], errors: [], bytes: 0, busy: 0 };
      const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
      c.ws = ws;
      ws.on('open', () => ws.send(JSON.stringify({ subscribe: 'all' })));
      ws.on('error', (e) => c.errors.push(e.message));
      ws.on('message', (data) => {
        const now = Date.now() / 1000;
        c.bytes += data.length;
        if (data.length > 64 && data.subarray(0, EVENTS_PREFIX.length).equals(EVENTS_PREFIX)) {
          const job = parseInt(data.toString('latin1', EVENTS_PREFIX.length, EVENTS_PREFIX.length + 24), 10);
          const tail = TAIL_SEQ.exec(data.toString('latin1', Math.max(0, data.length - 64)));
          if (tail) {
            c.frames.push({ now, job, data });
            c.lastSeq.set(job, Math.max(c.lastSeq.get(job) || 0, Number(tail[1])));
            c.busy += Date.now() / 1000 - now;
            return;
          }
        }
        const m = JSON.parse(data);
        if (m.type === 'subscribed' && !c.subscribed) {
          c.subscribed = true;
          if (++subscribed === n) resolveAll();
        } else if (m.type === 'events') { // a frame of an unexpected shape: keep it parsed
          c.parsed.push({ now, m });
          const last = m.events.at(-1)?.seq || 0;
          c.lastSeq.set(m.job, Math.max(c.lastSeq.get(m.job) || 0, last));
        }
        c.busy += Date.now() / 1000 - now;
      });
      clients.push(c);
    }
  });
  const timeout = sleep(timeoutMs).then(() => 'timeout');
  return Promise.race([all, timeout]).then((r) => ({ clients, subscribed, timedOut: r === 'timeout' }));
}

/* After the burst: what client c got of job id, in arrival order. */
function tally(c, id) {
  const st = { last: 0, count: 0, dups: 0, missing: 0, first: null, lastAt: null, lat: [], tmin: Infinity, tmax: -Infinity };
  const frames = c.frames.map((f) => ({ now: f.now, m: JSON.parse(f.data) })).concat(c.parsed)
    .filter((f) => f.m.job === id).sort((a, b) => a.now - b.now);
  for (const { now, m } of frames) {
    if (st.first === null) st.first = now;
    st.lastAt = now;
    for (const ev of m.events) {
      if (ev.seq <= st.last) { st.dups++; continue; }
      if (ev.seq !== st.last + 1) st.missing += ev.seq - st.last - 1;
      st.last = ev.seq;
      st.count++;
      st.lat.push(now - ev.t);
      if (ev.t < st.tmin) st.tmin = ev.t;
      if (ev.t > st.tmax) st.tmax = ev.t;
    }
  }
  st.frames = frames.length;
  return st;
}

async function closeClients(clients) {
  await Promise.all(clients.map((c) => new Promise((r) => {
    if (c.ws.readyState === WebSocket.CLOSED) return r();
    const t = setTimeout(() => { c.ws.terminate(); r(); }, 2000);
    c.ws.on('close', () => { clearTimeout(t); r(); });
    if (c.ws.readyState === WebSocket.CONNECTING) c.ws.terminate(); else c.ws.close();
  })));
}

async function fanoutRun(server, run) {
  const n = CFG.ws_clients;
  const { clients, subscribed, timedOut } = await openClients(server, n, 15000);
  if (timedOut) {
    await closeClients(clients);
    throw new Error(`only ${subscribed} of ${n} WebSocket clients got {"type":"subscribed"} within 15 s`);
  }
  const t0 = Date.now();
  const cpu0 = cpuOf(server.proc.pid), me0 = process.cpuUsage();
  const created = await server.api('POST', '/api/v1/jobs',
    { kind: 'test', name: `fan-out ${run}`, params: { steps: 1, step_ms: 0, log_lines: CFG.ws_log_lines } });
  if (created.status !== 202) throw new Error(`POST /api/v1/jobs: ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.job.id;
  const job = await waitState(server, id, ['done', 'error', 'aborted', 'interrupted'], 60000);
  let error = null;
  if (job.state !== 'done') {
    const d = (await server.api('GET', `/api/v1/jobs/${id}`)).body.job;
    error = d.error;
    log(`WARNING: fan-out job ${id} ended ${job.state}: error ${JSON.stringify(d.error)}, exit ${JSON.stringify(d.exit)}, ` +
      `history ${JSON.stringify(d.history)}, log tail ${JSON.stringify(d.log_tail.slice(-3))}`);
  }
  const expected = job.events; // the last seq (events are numbered 1..n)
  const check = await server.api('GET', `/api/v1/jobs/${id}/events?after=${expected - 1}&limit=5`);
  const lastSeq = check.body.events.at(-1)?.seq;
  if (lastSeq !== expected) log(`WARNING: job ${id} says events=${expected} but its last event has seq ${lastSeq}`);
  const done_s = (Date.now() - t0) / 1000;
  // wait for every client to hold the last event (or give up after 20 s of silence)
  const have = () => clients.filter((c) => (c.lastSeq.get(id) || 0) >= expected).length;
  let last = -1, still = Date.now();
  while (have() < n) {
    const got = clients.reduce((s, c) => s + c.bytes, 0);
    if (got !== last) { last = got; still = Date.now(); }
    if (Date.now() - still > 20000) break;
    await sleep(20);
  }
  const cpu1 = cpuOf(server.proc.pid), me1 = process.cpuUsage(me0);
  await closeClients(clients);

  const per = clients.map((c) => tally(c, id));
  const delivered = per.reduce((s, p) => s + p.count, 0);
  const dups = per.reduce((s, p) => s + p.dups, 0);
  const gaps = per.reduce((s, p) => s + p.missing, 0);
  const lat = new Float64Array(delivered);
  let k = 0;
  for (const p of per) for (const x of p.lat) lat[k++] = x;
  lat.sort();
  const firsts = per.map((p) => p.first).filter((x) => x != null);
  const lasts = per.map((p) => p.lastAt).filter((x) => x != null);
  const spans = per.filter((p) => p.first != null).map((p) => p.lastAt - p.first);
  const frames = per.reduce((s, p) => s + p.frames, 0);
  const r = {
    job: id, state: job.state, error, expected_per_client: expected,
    events_per_client_median: median(per.map((p) => p.count)),
    events_per_client_min: Math.min(...per.map((p) => p.count)),
    delivered, expected_total: expected * n, lost: expected * n - delivered, gaps, duplicates: dups,
    clients_complete: per.filter((p) => p.last >= expected && p.count === expected).length,
    lat_p50_ms: pct(lat, 50) * 1000, lat_p99_ms: pct(lat, 99) * 1000, lat_max_ms: (lat[lat.length - 1] ?? NaN) * 1000,
    spread_s: firsts.length ? Math.max(...lasts) - Math.min(...firsts) : null,
    client_span_median_s: median(spans),
    job_done_s: done_s,
    // diagnostics: how long the worker took to write the events, and how long this
    // (single-threaded) node process spent handling frames, all clients together
    gen_span_s: Math.max(...per.map((p) => p.tmax)) - Math.min(...per.map((p) => p.tmin)),
    client_busy_s: clients.reduce((s, c) => s + c.busy, 0),
    server_cpu_s: cpu0 && cpu1 ? cpu1.self - cpu0.self : null,
    worker_cpu_s: cpu0 && cpu1 ? cpu1.children - cpu0.children : null,
    client_cpu_s: (me1.user + me1.system) / 1e6,
    frames_per_client: frames / n,
    mb_per_client: clients.reduce((s, c) => s + c.bytes, 0) / n / 1e6,
    client_errors: clients.reduce((s, c) => s + c.errors.length, 0),
  };
  log(`  fan-out run ${run}: job ${id} ${job.state}, ${r.events_per_client_median} events/client (expected ${expected}), ` +
    `delivered ${delivered}/${r.expected_total}, lost ${r.lost}, gaps ${gaps}, dups ${dups}; ` +
    `latency p50 ${r.lat_p50_ms.toFixed(1)} ms, p99 ${r.lat_p99_ms.toFixed(1)} ms, max ${r.lat_max_ms.toFixed(1)} ms; ` +
    `first→last ${r.spread_s?.toFixed(3)} s, ${r.frames_per_client.toFixed(0)} frames/client; ` +
    `worker wrote them in ${r.gen_span_s.toFixed(3)} s; CPU: server ${r.server_cpu_s?.toFixed(2)} s, ` +
    `worker ${r.worker_cpu_s?.toFixed(2)} s, clients ${r.client_cpu_s.toFixed(2)} s (handlers ${r.client_busy_s.toFixed(3)} s)`);
  return r;
}

async function fanoutBench() {
  const server = await start(serverArgs(['--threads', String(CFG.ws_threads)]));
  try {
    log(`fan-out server ${server.url} (--threads ${CFG.ws_threads}), ${CFG.ws_clients} clients, log_lines ${CFG.ws_log_lines}`);
    // A run whose job did not end "done" (see the job.json race in the log) measures
    // nothing: it is kept aside and run again, twice at most.
    const runs = [], failed_jobs = [];
    for (let i = 1; runs.length < CFG.runs && i <= CFG.runs + 2; i++) {
      const r = await fanoutRun(server, i);
      if (r.state === 'done') runs.push(r); else failed_jobs.push({ job: r.job, state: r.state, error: r.error });
    }
    if (!runs.length) throw new Error(`no fan-out job ended "done": ${JSON.stringify(failed_jobs)}`);
    const m = (k) => median(runs.map((r) => r[k]));
    return {
      server_threads: CFG.ws_threads, clients: CFG.ws_clients, runs, failed_jobs,
      events_per_client: m('events_per_client_median'), expected_per_client: m('expected_per_client'),
      delivered: m('delivered'), expected_total: m('expected_total'),
      lost: m('lost'), lost_max: Math.max(...runs.map((r) => r.lost)),
      gaps_total: runs.reduce((s, r) => s + r.gaps, 0), duplicates_total: runs.reduce((s, r) => s + r.duplicates, 0),
      lat_p50_ms: round(m('lat_p50_ms'), 2), lat_p99_ms: round(m('lat_p99_ms'), 2), lat_max_ms: round(m('lat_max_ms'), 2),
      spread_s: round(m('spread_s'), 3), client_span_median_s: round(m('client_span_median_s'), 3),
      frames_per_client: round(m('frames_per_client'), 1),
      client_busy_s: round(m('client_busy_s'), 3), gen_span_s: round(m('gen_span_s'), 3),
      server_warnings: server.stderr.split('\n').filter(Boolean).length,
    };
  } catch (e) {
    await sleep(200);
    const p = server.proc;
    if (p.exitCode !== null || p.signalCode) e.message += `; the server died (exit ${p.exitCode}, signal ${p.signalCode})`;
    const tail = server.stderr.trim().split('\n').slice(-5).join(' | ');
    if (tail) e.message += `; server said: ${tail}`;
    throw e;
  } finally {
    await server.stop();
    server.cleanup();
  }
}

// ---------------------------------------------------------------------------------
// 3. how many WebSocket clients the default configuration serves

async function capacityProbe() {
  const server = await start(serverArgs());
  let clients = [];
  try {
    const o = await openClients(server, CFG.ws_clients, 2500);
    clients = o.clients;
    const t = Date.now();
    const r = await Promise.race([
      request(server, 'GET', '/api/v1/info').then((x) => x.status, () => 'error'),
      sleep(2100).then(() => 'timeout'),
    ]);
    const res = { subscribed: o.subscribed, of: CFG.ws_clients, http_while_open: r, http_ms: Date.now() - t };
    log(`default --threads: ${o.subscribed} of ${CFG.ws_clients} WebSocket clients subscribed; ` +
      `GET /api/v1/info meanwhile: ${r}${r === 'timeout' ? ' (all HTTP threads held by WebSockets)' : ''}`);
    return res;
  } finally {
    for (const c of clients) c.ws.terminate();
    await server.kill(); // a stalled server may not stop in time
    server.cleanup();
  }
}

// ---------------------------------------------------------------------------------
// 4. one WebSocket client that stops reading (a frozen tab, a slow link): does the
//    rest of the server go on?  A job bursts ~14 MB of events, more than the socket
//    buffers hold, then another job is created and must be answered within 5 s.

async function stalledClientProbe() {
  const server = await start(serverArgs());
  let ws = null;
  try {
    const { clients, timedOut } = await openClients(server, 1, 5000);
    ws = clients[0].ws;
    if (timedOut) throw new Error('the client was not subscribed within 5 s');
    ws._socket.pause(); // stop reading; the server's writes to it fill the buffers and block
    const burst = await server.api('POST', '/api/v1/jobs', { kind: 'test', name: 'burst', params: { steps: 1, step_ms: 0, log_lines: 100000 } });
    await sleep(1500);
    const t = Date.now();
    const r = await Promise.race([
      server.api('POST', '/api/v1/jobs', { kind: 'test', name: 'after', params: { steps: 0 } }).then((x) => x.status, (e) => e.message),
      sleep(5000).then(() => 'timeout'),
    ]);
    const post_ms = Date.now() - t;
    const get = await Promise.race([server.api('GET', `/api/v1/jobs/${burst.body.job.id}`).then((x) => x.body.job.state), sleep(3000).then(() => 'timeout')]);
    const res = { post_status: r, post_ms, burst_job_state: get, stalls: r !== 202 };
    log(`one client not reading: POST /api/v1/jobs ${r === 'timeout' ? 'got no answer in 5 s' : `answered ${r} in ${post_ms} ms`}` +
      `; GET of the burst job: ${get}`);
    return res;
  } finally {
    ws?.terminate();
    await server.kill(); // threads blocked in writes may not let it stop cleanly
    await sleep(200);
    server.cleanup();
  }
}

// ---------------------------------------------------------------------------------

const started = Date.now();
const result = {
  bench: 'serve', when: new Date().toISOString(), binary: BIN,
  host: { cpus: cpus().length, cpu_model: cpus()[0]?.model, loadavg_start: loadavg().map((x) => round(x)) },
  config: CFG, ok: true, errors: [],
};
const only = process.env.BENCH_ONLY ? process.env.BENCH_ONLY.split(',') : null;
const step = async (name, fn) => {
  if (only && !only.includes(name)) return;
  try { result[name] = await fn(); } catch (e) { result.ok = false; const msg = e.message + (e.cause ? ` (${e.cause.code || e.cause.message})` : ""); result.errors.push(`${name}: ${msg}`); log(`FAILED ${name}: ${msg}`); if (process.env.BENCH_DEBUG) console.error(e); }
};
await step('http', httpBench);
await step('ws_fanout', fanoutBench);
await step('ws_default_threads', capacityProbe);
await step('ws_stalled_client', stalledClientProbe);
result.elapsed_s = round((Date.now() - started) / 1000, 1);
result.host.loadavg_end = loadavg().map((x) => round(x));

// rows for bench/run.sh's table
const rows = [];
const row = (metric, value, unit, note) => rows.push({ metric, value, unit, ...(note ? { note } : {}) });
const h = result.http;
if (h) {
  row(`seed: ${h.seed.jobs} jobs created and finished`, h.seed.finished_s, 's', `${h.seed.jobs_per_s} jobs/s${h.seed.done !== h.seed.jobs ? `, only ${h.seed.done} done` : ''}`);
  for (const k of ['jobs_list', 'static']) if (h[k]) {
    row(`${h[k].what}: throughput`, h[k].rps, 'req/s', `median of ${h[k].runs.length}${h[k].errors ? `, ${h[k].errors} errors` : ''}`);
    row(`${h[k].what}: p99 latency`, round(h[k].p99_ms, 2), 'ms', `p50 ${round(h[k].p50_ms, 2)} ms; ${h[k].response_bytes} bytes per response`);
  }
}
const w = result.ws_fanout;
if (w) {
  const nr = w.runs.length;
  row(`ws fan-out: events per client`, w.events_per_client, 'events', `expected ${w.expected_per_client}`);
  row(`ws fan-out: delivered / expected`, `${w.delivered}/${w.expected_total}`, 'events', `${w.clients} clients`);
  row(`ws fan-out: lost (gaps / dups, all runs)`, w.lost, 'events', `worst run ${w.lost_max}; gaps ${w.gaps_total}, dups ${w.duplicates_total}`);
  row(`ws fan-out: delivery latency p50`, w.lat_p50_ms, 'ms', `median of ${nr}`);
  row(`ws fan-out: delivery latency p99`, w.lat_p99_ms, 'ms');
  row(`ws fan-out: delivery latency max`, w.lat_max_ms, 'ms');
  row(`ws fan-out: first to last event (all clients)`, w.spread_s, 's', `per client ${w.client_span_median_s} s, ${w.frames_per_client} frames`);
  row(`ws fan-out: CPU server / worker / clients`, `${round(median(w.runs.map((r) => r.server_cpu_s)))}/${round(median(w.runs.map((r) => r.worker_cpu_s)))}/${round(median(w.runs.map((r) => r.client_cpu_s)))}`, 's', 'per run');
  if (w.failed_jobs.length) row('ws fan-out: jobs that did not end "done" (rerun)', w.failed_jobs.length, 'jobs', w.failed_jobs[0].error?.slice(0, 60));
}
const c = result.ws_default_threads;
if (c) row('ws clients served at default --threads', `${c.subscribed}/${c.of}`, 'clients', `HTTP meanwhile: ${c.http_while_open}`);
const st = result.ws_stalled_client;
if (st) row('POST /api/v1/jobs while one ws client stalls', st.post_status === 202 ? st.post_ms : st.post_status, st.post_status === 202 ? 'ms' : '', st.stalls ? 'the server is blocked by one slow client' : 'not blocked');
for (const e of result.errors) row('ERROR', e, '');
result.rows = rows;

mkdirSync(RESULTS, { recursive: true });
writeFileSync(join(RESULTS, 'serve-latest.json'), JSON.stringify(result, null, 2) + '\n');
log(`done in ${result.elapsed_s} s; results in ${join(RESULTS, 'serve-latest.json')}`);
process.exit(result.ok ? 0 : 1);
