#!/usr/bin/env node
// bench/dataset/run.mjs — `deepdesk dataset create` against DIGITS' Python pipeline.
//
// Two image sets, each built into a Caffe LMDB dataset (PNG-encoded Datums, squash,
// 25 % val as DIGITS' default) by both pipelines, alternately, 3 times each:
//   fashion  Fashion-MNIST, 70,000 28x28 gray PNGs (`deepdesk example fashion-mnist`,
//            train/ + test/ folders: 45,000 train, 15,000 val, 10,000 test records)
//            -> --size 28x28 --channels 1
//   photos   1,000 photo-like colour JPEGs of 320x240 ... 640x480 in 10 class folders
//            (make_photos.py) -> --size 256x256 --channels 3.  The Python side makes
//            about 60 of these a second on 2 cores (Pillow's PNG encoder at level 6 is
//            ~25 ms of the ~30 ms an image costs), so 2,000 would cost 100 s of the
//            bench's time in Python alone; BENCH_DATASET_PHOTOS=2000 for more.
// The peer is digits_create_db.py (DIGITS' parse_folder + create_db, a multiprocessing
// Pool of as many workers as deepdesk gets --threads, 2).  Every run's output is read
// back by check_db.py (record counts per split, Datums, PNGs, mean); the two sides must
// hold the same numbers of records.  Once per set, check_db.py --parity compares
// deepdesk's records with DIGITS' Python resize of their source files, pixel by pixel.
// Then deepdesk runs on a half-size and a double-size copy of each set (hard links;
// the double one holds every file under two names) to see how its peak memory
// depends on the dataset's size.
//
// Measured per run: wall time (spawn to exit), images/s (records written, all splits,
// / wall), CPU time per image (user + sys from /usr/bin/time -v, which counts the
// waited-for Pool workers too: a figure that other jobs on the machine disturb less
// than the wall time), and memory: /usr/bin/time's
// "Maximum resident set size" (ru_maxrss: the LARGEST single process of the tree,
// not their sum), and the process tree's total RSS and PSS sampled from /proc every
// 50 ms (PSS counts the pages a forked Pool worker shares with its parent once).
// deepdesk is one process, so for it time -v's figure is exact.
//
// Data is generated once into BENCH_DATA_DIR (/tmp/deepdesk-bench-data) and reused;
// every file of a set is read once before its runs, so none pays for a cold cache.
// Results: bench/results/dataset-latest.json.
//
// Knobs (environment): BENCH_RUNS (3; BENCH_QUICK=1: 1), BENCH_ONLY (fashion,photos),
// BENCH_DATASET_PHOTOS (1000), BENCH_DATASET_THREADS (2), BENCH_DATASET_SCALED_RUNS (1),
// BENCH_DATA_DIR,
// DEEPDESK_BIN (build/deepdesk), BENCH_PYTHON (/usr/bin/python3: needs PIL, numpy,
// lmdb and google.protobuf).
import { spawn } from 'node:child_process';
import { existsSync, linkSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync,
  rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  RESULTS, quick, envNumber as int, benchOnly, BENCH_BIN, BENCH_PYTHON, median, round, mib, load1,
} from '../lib/stats.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const CFG = {
  runs: int('BENCH_RUNS', quick ? 1 : 3),
  scaled_runs: int('BENCH_DATASET_SCALED_RUNS', 1),
  photos: int('BENCH_DATASET_PHOTOS', 1000),
  threads: int('BENCH_DATASET_THREADS', 2),
  only: benchOnly('fashion,photos'),
  data: process.env.BENCH_DATA_DIR || '/tmp/deepdesk-bench-data',
  bin: BENCH_BIN,
  python: BENCH_PYTHON,
  sample_ms: 50,
};
const PY_ENV = { ...process.env, PYTHONDONTWRITEBYTECODE: '1' };

const log = (...a) => console.log('  [dataset]', ...a);

// ---------------------------------------------------------------------------------
// running a command: wall time, /usr/bin/time -v, and the tree's memory from /proc

function childrenOf(pid) {
  const out = [];
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const s = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim();
      if (s) out.push(...s.split(/\s+/).map(Number));
    }
  } catch { /* gone */ }
  return out;
}

function memOf(pid) {
  // smaps_rollup: Rss and Pss in kB (one read per process)
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const rss = /^Rss:\s+(\d+)/m.exec(t), pss = /^Pss:\s+(\d+)/m.exec(t);
    return { rss: rss ? Number(rss[1]) : 0, pss: pss ? Number(pss[1]) : 0 };
  } catch { return null; }
}

function timeV(text) {
  const num = (re) => { const m = re.exec(text); return m ? Number(m[1]) : null; };
  return {
    user_s: num(/User time \(seconds\): ([\d.]+)/),
    sys_s: num(/System time \(seconds\): ([\d.]+)/),
    cpu_pct: num(/Percent of CPU this job got: (\d+)%/),
    maxrss_kb: num(/Maximum resident set size \(kbytes\): (\d+)/),
    vol_cs: num(/Voluntary context switches: (\d+)/),
    invol_cs: num(/Involuntary context switches: (\d+)/),
  };
}

// Runs argv under /usr/bin/time -v; resolves with stdout and the figures.
function measure(argv, env = process.env) {
  return new Promise((res, rej) => {
    const tfile = join(tmpdir(), `deepdesk-bench-time-${process.pid}-${Date.now()}.txt`);
    const load = load1();
    const t0 = process.hrtime.bigint();
    const p = spawn('/usr/bin/time', ['-v', '-o', tfile, ...argv], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    let peak = { rss_kb: 0, pss_kb: 0, procs: 0 };
    const sample = () => {
      // the tree below /usr/bin/time (time itself is not counted)
      let rss = 0, pss = 0, n = 0;
      const stack = childrenOf(p.pid);
      while (stack.length) {
        const pid = stack.pop();
        const m = memOf(pid);
        if (m) { rss += m.rss; pss += m.pss; n++; }
        stack.push(...childrenOf(pid));
      }
      if (rss > peak.rss_kb) peak.rss_kb = rss;
      if (pss > peak.pss_kb) peak.pss_kb = pss;
      if (n > peak.procs) peak.procs = n;
    };
    const timer = setInterval(sample, CFG.sample_ms);
    p.on('error', (e) => { clearInterval(timer); rej(e); });
    p.on('exit', (code) => {
      clearInterval(timer);
      const wall = Number(process.hrtime.bigint() - t0) / 1e9;
      let tv = {};
      try { tv = timeV(readFileSync(tfile, 'utf8')); rmSync(tfile, { force: true }); } catch { /* none */ }
      if (code !== 0) return rej(new Error(`${argv.join(' ')} exited ${code}: ${err.slice(-2000)}`));
      res({ out, wall_s: wall, load1: load, ...tv, tree_rss_kb: peak.rss_kb, tree_pss_kb: peak.pss_kb,
        procs: peak.procs });
    });
  });
}

function run(argv, env = process.env) {
  return new Promise((res, rej) => {
    const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', rej);
    p.on('exit', (code) => (code === 0 ? res(out) : rej(new Error(`${argv.join(' ')} exited ${code}: ${(err || out).slice(-2000)}`))));
  });
}

// ---------------------------------------------------------------------------------
// data, generated once

// factor 0.5: every second file (sorted) of every folder; 2: every file twice (as
// NAME and as 2NAME); hard-linked (copied across devices)
function scaledCopy(src, dst, factor) {
  const tmp = `${dst}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  let n = 0;
  const walk = (s, d) => {
    mkdirSync(d, { recursive: true });
    const names = readdirSync(s).sort();
    let k = 0;
    for (const name of names) {
      const sp = join(s, name), dp = join(d, name);
      if (statSync(sp).isDirectory()) { walk(sp, dp); continue; }
      if (factor < 1 && k++ % 2) continue;
      for (const target of factor > 1 ? [dp, join(d, `2${name}`)] : [dp]) {
        try { linkSync(sp, target); } catch { copyFileSync(sp, target); }
        n++;
      }
    }
  };
  walk(src, tmp);
  renameSync(tmp, dst);
  return n;
}

function warm(dir) {
  let bytes = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) bytes += warm(p);
    else if (e.isFile()) bytes += readFileSync(p).length;
  }
  return bytes;
}

async function ensureData(set) {
  mkdirSync(CFG.data, { recursive: true });
  const dir = join(CFG.data, set.folder);
  if (!existsSync(dir)) {
    const t0 = Date.now();
    const tmp = `${dir}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    if (set.name === 'fashion') {
      await run([CFG.bin, 'example', 'fashion-mnist', tmp]);
      renameSync(tmp, dir);
    } else {
      await run([CFG.python, join(here, 'make_photos.py'), dir, String(CFG.photos)], PY_ENV);
    }
    log(`generated ${dir} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  const half = `${dir}-half`, double = `${dir}-double`;
  if (!existsSync(half)) log(`half-size copy: ${scaledCopy(dir, half, 0.5)} files in ${half}`);
  if (!existsSync(double)) log(`double-size copy: ${scaledCopy(dir, double, 2)} files in ${double}`);
  // read every file once, so that no run pays for a cold page cache
  const t0 = Date.now();
  const bytes = warm(dir);
  log(`${set.folder}: read ${(bytes / 1048576).toFixed(0)} MiB to warm the page cache in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { dir, half, double };
}

// ---------------------------------------------------------------------------------
// one set

const SETS = {
  fashion: { name: 'fashion', folder: 'fashion-mnist', title: 'fashion-mnist 28x28 gray PNG', w: 28, h: 28, c: 1 },
  photos: { name: 'photos', folder: `photos-v1-${CFG.photos}`, title: `photos ${CFG.photos} JPEG -> 256x256 colour PNG`,
    w: 256, h: 256, c: 3 },
};

async function check(set, out, parity = 0) {
  const argv = [CFG.python, join(here, 'check_db.py'), out, String(set.w), String(set.h), String(set.c)];
  if (parity) argv.push('--parity', String(parity));
  return JSON.parse(await run(argv, PY_ENV));
}

async function oneRun(side, set, src, work, tag) {
  const out = join(work, `${set.name}-${side}-${tag}`);
  rmSync(out, { recursive: true, force: true });
  const size = `${set.w}x${set.h}`;
  const argv = side === 'deepdesk'
    ? [CFG.bin, 'dataset', 'create', src, out, '--size', size, '--channels', String(set.c), '--encoding', 'png',
      '--threads', String(CFG.threads), '--json']
    : [CFG.python, join(here, 'digits_create_db.py'), src, out, '--size', size, '--channels', String(set.c),
      '--threads', String(CFG.threads), '--json'];
  const m = await measure(argv, side === 'python' ? PY_ENV : process.env);
  const summary = JSON.parse(m.out);
  delete m.out;
  const chk = await check(set, out);
  const records = chk.records;
  const r = { ...m, records, per_split: Object.fromEntries(Object.entries(chk.splits).map(([k, v]) => [k, v.records])),
    problems: chk.problems, images_per_s: records / m.wall_s, tool_seconds: summary.seconds,
    cpu_us_per_image: m.user_s != null ? ((m.user_s + m.sys_s) / records) * 1e6 : null };
  log(`${set.name} ${side.padEnd(8)} ${tag}: ${m.wall_s.toFixed(2)} s, ${Math.round(r.images_per_s)} img/s, ` +
    `${records} records, maxrss ${mib(m.maxrss_kb)} MiB, tree RSS ${mib(m.tree_rss_kb)} / PSS ${mib(m.tree_pss_kb)} MiB ` +
    `(${m.procs} procs), cpu ${m.cpu_pct}%, load ${m.load1}`);
  if (chk.problems.length) log(`  problems: ${chk.problems.slice(0, 3).join('; ')}`);
  return { r, out };
}

async function benchSet(set, work) {
  const { dir, half, double } = await ensureData(set);
  const runs = { deepdesk: [], python: [], deepdesk_half: [], deepdesk_double: [] };
  const errors = [];
  let lastDeepdeskOut = null;
  for (let i = 0; i < CFG.runs; i++) {
    // alternate which side goes first, so a drift in the machine's load hits both
    for (const side of i % 2 ? ['python', 'deepdesk'] : ['deepdesk', 'python']) {
      const { r, out } = await oneRun(side, set, dir, work, `run${i + 1}`);
      runs[side].push(r);
      if (side === 'deepdesk') {
        if (lastDeepdeskOut) rmSync(lastDeepdeskOut, { recursive: true, force: true });
        lastDeepdeskOut = out;
      } else {
        rmSync(out, { recursive: true, force: true });
      }
    }
  }
  for (let i = 0; i < CFG.scaled_runs; i++) {
    for (const [kind, src] of [['half', half], ['double', double]]) {
      const { r, out } = await oneRun('deepdesk', set, src, work, `${kind}${i + 1}`);
      runs[`deepdesk_${kind}`].push(r);
      rmSync(out, { recursive: true, force: true });
    }
  }
  // the same record counts on both sides, every run
  const counts = new Set([...runs.deepdesk, ...runs.python].map((r) => JSON.stringify(r.per_split)));
  if (counts.size !== 1) errors.push(`${set.name}: record counts differ between runs/sides: ${[...counts].join(' vs ')}`);
  for (const r of Object.values(runs).flat()) errors.push(...r.problems.map((p) => `${set.name}: ${p}`));
  // pixel parity of deepdesk's records with DIGITS' Python load + resize
  const parity = await check(set, lastDeepdeskOut, set.name === 'fashion' ? 300 : 60);
  rmSync(lastDeepdeskOut, { recursive: true, force: true });
  const pc = Object.values(parity.splits).reduce((a, s) => a + s.parity_checked, 0);
  const pd = Object.values(parity.splits).reduce((a, s) => a + s.parity_differing_pixels, 0);
  log(`${set.name} parity: ${pc} records compared with DIGITS' Python resize, ${pd} pixels differ`);
  if (pd) errors.push(`${set.name}: ${pd} pixels in ${pc} records differ from DIGITS' Python resize`);
  errors.push(...parity.problems.map((p) => `${set.name} parity: ${p}`));

  const med = (side, key) => median(runs[side].map((r) => r[key]));
  const summary = {
    records: runs.deepdesk[0]?.records,
    per_split: runs.deepdesk[0]?.per_split,
    half_records: runs.deepdesk_half[0]?.records,
    double_records: runs.deepdesk_double[0]?.records,
    deepdesk: { images_per_s: med('deepdesk', 'images_per_s'), wall_s: med('deepdesk', 'wall_s'),
      maxrss_kb: med('deepdesk', 'maxrss_kb'), cpu_pct: med('deepdesk', 'cpu_pct'),
      cpu_us_per_image: med('deepdesk', 'cpu_us_per_image') },
    python: { images_per_s: med('python', 'images_per_s'), wall_s: med('python', 'wall_s'),
      maxrss_kb: med('python', 'maxrss_kb'), tree_rss_kb: med('python', 'tree_rss_kb'),
      tree_pss_kb: med('python', 'tree_pss_kb'), cpu_pct: med('python', 'cpu_pct'),
      cpu_us_per_image: med('python', 'cpu_us_per_image') },
    deepdesk_half: { images_per_s: med('deepdesk_half', 'images_per_s'), maxrss_kb: med('deepdesk_half', 'maxrss_kb') },
    deepdesk_double: { images_per_s: med('deepdesk_double', 'images_per_s'), maxrss_kb: med('deepdesk_double', 'maxrss_kb') },
    ratio_per_round: runs.deepdesk.map((r, i) => round(r.images_per_s / runs.python[i].images_per_s, 2)),
    parity: { records: pc, differing_pixels: pd },
  };
  summary.ratio = summary.deepdesk.images_per_s / summary.python.images_per_s;
  summary.cpu_ratio = summary.python.cpu_us_per_image / summary.deepdesk.cpu_us_per_image;
  return { set, runs, summary, errors };
}

// how much deepdesk's peak RSS grows per image from the full to the double set
const slope = (s) => (s.records && s.double_records && s.deepdesk.maxrss_kb != null && s.deepdesk_double.maxrss_kb != null
  ? Math.round(((s.deepdesk_double.maxrss_kb - s.deepdesk.maxrss_kb) * 1024) / (s.double_records - s.records)) : '?');

function rowsFor({ set, summary: s }) {
  const n = (x) => (x == null ? '?' : Math.round(x).toLocaleString('en-US'));
  const t = set.name === 'fashion' ? 'fashion-mnist' : 'photos';
  return [
    { metric: `${t}: deepdesk dataset create`, value: round(s.deepdesk.images_per_s, 0), unit: 'images/s',
      note: `${set.title}; ${n(s.records)} records in ${round(s.deepdesk.wall_s, 2)} s, --threads ${CFG.threads}, cpu ${s.deepdesk.cpu_pct}%` },
    { metric: `${t}: python (DIGITS create_db)`, value: round(s.python.images_per_s, 0), unit: 'images/s',
      note: `same records in ${round(s.python.wall_s, 2)} s, Pool of ${CFG.threads}, cpu ${s.python.cpu_pct}%` },
    { metric: `${t}: deepdesk / python`, value: round(s.ratio, 2), unit: 'x',
      note: `target >= 5; per round: ${s.ratio_per_round.join(', ')}` },
    { metric: `${t}: CPU per image, python / deepdesk`, value: round(s.cpu_ratio, 2), unit: 'x',
      note: `user+sys of all processes: deepdesk ${round(s.deepdesk.cpu_us_per_image, 0)} us, python ${round(s.python.cpu_us_per_image, 0)} us (less load-sensitive than wall)` },
    { metric: `${t}: deepdesk peak RSS`, value: mib(s.deepdesk.maxrss_kb), unit: 'MiB',
      note: `half the set (${n(s.half_records)} records): ${mib(s.deepdesk_half.maxrss_kb)} MiB; ` +
        `double (${n(s.double_records)}): ${mib(s.deepdesk_double.maxrss_kb)} MiB, ${slope(s)} bytes per extra image` },
    { metric: `${t}: python peak memory (PSS, 1 + ${CFG.threads} procs)`, value: mib(s.python.tree_pss_kb), unit: 'MiB',
      note: `RSS summed ${mib(s.python.tree_rss_kb)} MiB; largest process (time -v) ${mib(s.python.maxrss_kb)} MiB` },
  ];
}

async function main() {
  const t0 = Date.now();
  const result = { bench: 'dataset', ok: true, rows: [], errors: [],
    config: { ...CFG, cpus: cpus().length, load_at_start: loadavg().map((x) => round(x, 2)) }, sets: {} };
  if (!existsSync(CFG.bin)) {
    result.ok = false;
    result.errors.push(`${CFG.bin} not found (make all)`);
  }
  try { result.config.deepdesk_version = (await run([CFG.bin, 'version'])).trim(); } catch { /* reported below */ }
  const work = mkdtempSync(join(tmpdir(), 'deepdesk-bench-dataset-'));
  try {
    for (const name of CFG.only) {
      if (!result.ok) break;
      const set = SETS[name];
      if (!set) { result.errors.push(`BENCH_ONLY: no set ${name} (fashion, photos)`); result.ok = false; continue; }
      try {
        const b = await benchSet(set, work);
        result.sets[name] = { summary: b.summary, runs: b.runs };
        result.rows.push(...rowsFor(b));
        if (b.errors.length) { result.ok = false; result.errors.push(...b.errors); }
        log(`${name}: deepdesk ${Math.round(b.summary.deepdesk.images_per_s)} img/s, python ${Math.round(b.summary.python.images_per_s)} img/s, ` +
          `ratio ${b.summary.ratio.toFixed(2)}`);
      } catch (e) {
        result.ok = false;
        result.errors.push(`${name}: ${e.message}`);
        log(`${name} FAILED: ${e.message}`);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  result.config.load_at_end = loadavg().map((x) => round(x, 2));
  result.seconds = round((Date.now() - t0) / 1000, 1);
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, 'dataset-latest.json'), JSON.stringify(result, null, 2) + '\n');
  for (const e of result.errors) log(`ERROR ${e}`);
  process.exit(result.ok ? 0 : 1);
}

main();
