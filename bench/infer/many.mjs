// bench/infer/many.mjs — classify-many images/s: `deepdesk classify --model BUNDLE
// --out x.csv FOLDER` against docs/bundle_torch.py (PyTorch CPU) on the same bundle
// and the same images.  LeNet (the standard network) is trained one epoch on
// generated 28×28 gray bars (10 classes), its bundle downloaded; then
// BENCH_MANY_N (2,000) held-out 28×28 PNGs are classified, 3 runs of each
// (BENCH_MANY_RUNS), medians reported:
//   - end to end: the whole command's wall time (start, unpack or load, every image);
//   - steady: the classifying alone, as each tool reports it on stderr.
// Both run batch 1 (one image per forward pass) with the same threads
// (BENCH_THREADS, default all cores: OMP_NUM_THREADS for deepdesk, --threads for
// torch); the ratio is deepdesk / torch (above 1: deepdesk is faster).  The top-1
// class of every image is compared between the two, as a check that both ran the
// same model.  Run by bench/run.sh after the infer suite, or alone:
//   node bench/infer/many.mjs
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../tests/lib/server.mjs';
import { lenetOnBars, endBench } from '../lib/lenet.mjs';
import { barsPng as bars } from '../../tests/lib/png.mjs';

const run = promisify(execFile);
const N = Number(process.env.BENCH_MANY_N || 2000);
const RUNS = Number(process.env.BENCH_MANY_RUNS || 3);
const THREADS = Number(process.env.BENCH_THREADS || cpus().length);
const BIN = process.env.DEEPDESK_SHIPPED_BIN || join(ROOT, 'build', 'deepdesk');
const PY = '/usr/bin/python3';

const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

async function timed(cmd, args, env, re) {
  const t0 = process.hrtime.bigint();
  const r = await run(cmd, args, { env: { ...process.env, ...env }, maxBuffer: 1 << 28 });
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const m = r.stderr.match(re);
  if (!m) throw new Error(`${cmd}: no images/s on stderr: ${r.stderr}`);
  return { wall, steady: Number(m[1]), stdout: r.stdout };
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'deepdesk-bench-many-'));
  let server;
  const out = { bench: 'infer-many', ok: false, rows: [], n: N, threads: THREADS };
  try {
    let modelId;
    ({ server, modelId } = await lenetOnBars(work).catch((e) => { server = e.server; throw e; }));
    const res = await fetch(`${server.url}/api/v1/models/${modelId}/bundle`);
    if (res.status !== 200) throw new Error(`bundle: ${res.status}`);
    const tgz = join(work, 'lenet.tar.gz');
    writeFileSync(tgz, Buffer.from(await res.arrayBuffer()));
    await server.stop();
    server.cleanup();
    server = null;
    const unpacked = join(work, 'lenet');
    mkdirSync(unpacked);
    await run('tar', ['xzf', tgz, '-C', unpacked]);

    const imgs = join(work, 'images');
    mkdirSync(imgs);
    const files = [];
    for (let i = 0; i < N; i++) {
      const p = join(imgs, `${String(i).padStart(6, '0')}.png`);
      writeFileSync(p, bars(i % 10, 100000 + i));
      files.push(p);
    }

    const dd = [], tc = [];
    let ddCsv = '', tcJson = null;
    for (let r = 0; r < RUNS; r++) {
      const csv = join(work, 'out.csv');
      dd.push(await timed(BIN, ['classify', '--model', tgz, '--out', csv, imgs], { OMP_NUM_THREADS: String(THREADS) },
        /([\d.]+) images\/s/));
      ddCsv = readFileSync(csv, 'utf8');
      const t = await timed(PY, [join(ROOT, 'docs', 'bundle_torch.py'), unpacked, '--json', '--time', '--top', '1',
        '--threads', String(THREADS), ...files], { OMP_NUM_THREADS: String(THREADS) }, /([\d.]+) images\/s/);
      tc.push(t);
      tcJson = JSON.parse(t.stdout);
    }
    // the same model: top-1 per image
    const ddTop = new Map(ddCsv.trim().split('\n').slice(1).map((l) => { const c = l.split(','); return [c[0], c[3]]; }));
    const agree = tcJson.results.filter((r) => ddTop.get(r.image) === r.predictions[0].label).length;
    const e2e = (runs) => N / median(runs.map((x) => x.wall));
    const steady = (runs) => median(runs.map((x) => x.steady));
    const ddE = e2e(dd), tcE = e2e(tc), ddS = steady(dd), tcS = steady(tc);
    out.rows.push(
      { metric: 'LeNet classify-many deepdesk, end to end', value: +ddE.toFixed(1), unit: 'images/s', note: `${N} 28x28 PNGs, batch 1, ${THREADS} threads, median of ${RUNS}` },
      { metric: 'LeNet classify-many PyTorch, end to end', value: +tcE.toFixed(1), unit: 'images/s', note: 'docs/bundle_torch.py, same bundle and images (includes importing torch)' },
      { metric: 'LeNet classify-many deepdesk/PyTorch, end to end', value: +(ddE / tcE).toFixed(2), unit: 'x' },
      { metric: 'LeNet classify-many deepdesk, steady', value: +ddS.toFixed(1), unit: 'images/s', note: 'the classifying alone, as reported on stderr' },
      { metric: 'LeNet classify-many PyTorch, steady', value: +tcS.toFixed(1), unit: 'images/s' },
      { metric: 'LeNet classify-many deepdesk/PyTorch, steady', value: +(ddS / tcS).toFixed(2), unit: 'x' },
      { metric: 'LeNet classify-many top-1 agreement', value: agree, unit: `of ${N}` },
    );
    out.raw = { deepdesk: dd.map(({ wall, steady: s }) => ({ wall, steady: s })), torch: tc.map(({ wall, steady: s }) => ({ wall, steady: s })) };
    out.ok = agree === N;
    if (!out.ok) console.error(`top-1 differs on ${N - agree} of ${N} images`);
  } finally {
    await endBench(server, work, 'infer-many-latest', out);
  }
  if (!out.ok) process.exit(1);
}

main().catch((e) => { console.error(e); process.exit(1); });
