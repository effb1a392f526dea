// bench/infer — classify-one latency over HTTP: LeNet (the standard network) trained
// one epoch on a small generated 28×28 gray dataset (10 classes; the figure does not
// depend on what it learnt), then POST /api/v1/models/{id}/classify with a 28×28 PNG,
// one client at a time (BENCH_INFER_N requests, 200) and 16 at once, after a warm-up
// that loads the model.  Reported: p50 and p99 in ms, end to end (the client's
// clock: request sent to answer parsed), and the server's own time_ms; the same
// with ?insides=1 (every blob's statistics and tiles as PNG); and how long the
// first answer takes after the inference service is killed (SIGKILL) and restarted.
// The server passes each image to its inference service over a Unix socket
// (app/infer/service.c), so every figure includes that hop.
// Issue 6's goal: p50 under 5 ms with one client.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lenetOnBars, endBench } from '../lib/lenet.mjs';
import { barsPng as png } from '../../tests/lib/png.mjs';

const N = Number(process.env.BENCH_INFER_N || 200);

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'deepdesk-bench-infer-'));
  let server;
  const out = { bench: 'infer', ok: false, rows: [] };
  try {
    let id;
    ({ server, modelId: id } = await lenetOnBars(work).catch((e) => { server = e.server; throw e; }));
    const img = png(3, 999);
    const url = `${server.url}/api/v1/models/${id}/classify`;
    const once = async (query = '') => {
      const t0 = process.hrtime.bigint();
      const res = await fetch(url + query, { method: 'POST', body: img, headers: { 'Content-Type': 'image/png' } });
      const body = await res.json();
      if (res.status !== 200) throw new Error(JSON.stringify(body));
      return [Number(process.hrtime.bigint() - t0) / 1e6, body.time_ms];
    };
    for (let i = 0; i < 20; i++) await once(); // load the model, warm the connection
    const one = [], server1 = [];
    for (let i = 0; i < N; i++) { const [t, s] = await once(); one.push(t); server1.push(s); }
    const many = [];
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i = 0; i < Math.ceil(N / 16); i++) many.push((await once())[0]);
    }));
    const insides = [];
    for (let i = 0; i < Math.ceil(N / 4); i++) insides.push((await once('?insides=1'))[0]);
    const info = (await server.api('GET', '/api/v1/info')).body.inference;
    process.kill(info.pid, 'SIGKILL');
    const k0 = process.hrtime.bigint();
    await once(); // waits in the socket's backlog for the new service, which loads the model again
    const restart = Number(process.hrtime.bigint() - k0) / 1e6;
    out.rows.push(
      { metric: 'LeNet classify-one p50, 1 client', value: +pct(one, 0.5).toFixed(3), unit: 'ms', note: `${N} requests, 28x28 PNG, end to end (goal < 5 ms)` },
      { metric: 'LeNet classify-one p99, 1 client', value: +pct(one, 0.99).toFixed(3), unit: 'ms' },
      { metric: 'LeNet classify-one server time p50', value: +pct(server1, 0.5).toFixed(3), unit: 'ms', note: 'time_ms: read, decode, forward' },
      { metric: 'LeNet classify-one p50, 16 clients', value: +pct(many, 0.5).toFixed(3), unit: 'ms' },
      { metric: 'LeNet classify-one p99, 16 clients', value: +pct(many, 0.99).toFixed(3), unit: 'ms' },
      { metric: 'LeNet classify-one with insides=1 p50, 1 client', value: +pct(insides, 0.5).toFixed(3), unit: 'ms', note: `${insides.length} requests: every blob's stats, histogram and tiles` },
      { metric: 'first answer after the inference service is killed', value: +restart.toFixed(1), unit: 'ms', note: 'restart, model load, forward pass' },
      { metric: 'inference service memory for LeNet', value: info.bytes, unit: 'bytes', note: `${info.models} model(s) loaded, pid ${info.pid}` },
    );
    out.raw = { one, server: server1, many, insides };
    out.ok = true;
  } finally {
    await endBench(server, work, 'infer-latest', out);
  }
  if (!out.ok) process.exit(1);
}

main().catch((e) => { console.error(e); process.exit(1); });
