// kill.mjs — the kill campaign: SIGKILL the server, a worker or the inference service
// at a random moment of a dataset build, a training, an evaluation or a stream of
// classifications, many times (seeded, bounded), and check after each that nothing
// was lost:
//  - the store passes `PRAGMA integrity_check`;
//  - every job's state is the truth: one that says running has a live worker, one
//    that is done has its results (a dataset's dataset.json, a model's last snapshot,
//    an evaluation's metrics), none is left running or queued for ever;
//  - a training that was interrupted is resumed and ends with the very weights of a
//    training that was never disturbed; a dataset or an evaluation that was cut
//    short is cloned and the clone ends done; the inference service comes back and
//    classifies again.
//
//   node tests/campaign/kill.mjs [ITERATIONS] [SEED]     (make kill-campaign)
// tests/api/kill_campaign.test.mjs runs a few iterations of it in `make test`.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, waitFor } from '../lib/server.mjs';
import { alive, writeColourFolders } from '../api/helpers.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };
const EPOCHS = 24;
const MODEL = {
  network: { standard: 'lenet' }, epochs: EPOCHS, batch_size: 16, snapshot_interval: 4,
  solver: { base_lr: 0.01, lr_policy: { policy: 'fixed' } }, seed: 7,
};
const LONG = 300000; // ms: a hang, not a pace
const FINAL = ['done', 'error', 'aborted', 'interrupted'];

/** xorshift32 from seed: next() in [0, 1). */
function rng(seed) {
  let x = (seed >>> 0) || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}

function integrity(dataDir) {
  const out = execFileSync('/usr/bin/python3', ['-c',
    'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])',
    join(dataDir, 'deepdesk.db')], { encoding: 'utf8' });
  assert.equal(out.trim(), 'ok', 'PRAGMA integrity_check');
}

const sha = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Run the campaign: {iterations, seed, log(line)}.  Returns {iterations, kills: {victim: n}}. */
export async function runCampaign({ iterations = 20, seed = 1, log = console.log } = {}) {
  const rand = rng(seed);
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const work = mkdtempSync(join(process.env.DEEPDESK_TEST_TMP || tmpdir(), 'deepdesk-kill-'));
  const dataDir = join(work, 'data');
  writeColourFolders(join(work, 'colours'), COLOURS, 60, 28);
  writeColourFolders(join(work, 'many'), COLOURS, 200, 64); // what the killed dataset builds read
  // an evaluation pauses after each batch (the test build's hook), so it lasts seconds
  process.env.DEEPDESK_EVAL_DELAY_MS = '150';
  let server = await startServer({ dataDir, keepData: true, args: ['--data-root', work] });
  const kills = {};
  const jobDir = (id) => join(dataDir, 'jobs', String(id));
  const job = async (id) => (await server.api('GET', `/api/v1/jobs/${id}`)).body.job;
  async function settle(id) {
    let j;
    await waitFor(async () => { j = await job(id); return FINAL.includes(j?.state); }, LONG, `job ${id} to end`);
    return j;
  }
  const restart = async () => { server = await startServer({ dataDir, keepData: true, args: ['--data-root', work] }); };
  /** Run job (a POST's answer) undisturbed to done: how long it ran, in ms. */
  async function timed(r) {
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const end = await settle(r.body.job.id);
    assert.equal(end.state, 'done', end.error);
    return { id: r.body.job.id, ms: Math.max(200, end.finished_at - end.started_at) };
  }
  const BIG = { width: 256, height: 256, channels: 3, val_pct: 25, encoding: 'png' }; // the dataset builds that get killed
  try {
    // undisturbed runs of each kind: how long each lasts (a kill lands somewhere in
    // it) and the reference weights a disturbed training must end with
    const ds = await timed(await server.api('POST', '/api/v1/datasets', {
      name: 'colours', source: { type: 'folder', train: join(work, 'colours') },
      options: { width: 28, height: 28, channels: 1, val_pct: 25, seed: 1 } }));
    const dsId = ds.id;
    const dsBig = await timed(await server.api('POST', '/api/v1/datasets', { name: 'big',
      source: { type: 'folder', train: join(work, 'many') }, options: { ...BIG, seed: 1 } }));
    const ref = await timed(await server.api('POST', '/api/v1/models', { name: 'reference', dataset: dsId, ...MODEL }));
    const reference = sha(join(jobDir(ref.id), `snapshot_epoch_${EPOCHS}.safetensors`));
    const modelId = ref.id;
    const ev = await timed(await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { dataset: dsId, split: 'train' } }));
    const lasts = { dataset: dsBig.ms, training: ref.ms, evaluation: ev.ms, classify: 1000 };
    log(`undisturbed: dataset ${dsBig.ms} ms, training ${ref.ms} ms, evaluation ${ev.ms} ms`);

    for (let it = 1; it <= iterations; it++) {
      const what = pick(['dataset', 'training', 'training', 'evaluation', 'classify']);
      const victim = what === 'classify' ? pick(['inference', 'server']) : pick(['server', 'worker', 'both']);
      const delay = Math.floor(rand() * lasts[what]); // a moment in the job's run
      let id = null;
      if (what === 'dataset') {
        const r = await server.api('POST', '/api/v1/datasets', { name: `ds ${it}`, source: { type: 'folder', train: join(work, 'many') },
          options: { ...BIG, seed: it } });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        id = r.body.job.id;
      } else if (what === 'training') {
        const r = await server.api('POST', '/api/v1/models', { name: `m ${it}`, dataset: dsId, ...MODEL });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        id = r.body.job.id;
      } else if (what === 'evaluation') {
        const r = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { dataset: dsId, split: 'train' } });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        id = r.body.job.id;
      }
      let pid = null;
      if (id) {
        // wait until it runs (or has already ended: a kill after the end is a case too)
        let j;
        await waitFor(async () => { j = await job(id); return j?.state !== 'queued'; }, LONG, `job ${id} to start`);
        pid = j.pid;
      }
      await new Promise((r) => setTimeout(r, delay));
      let classified = null;
      if (what === 'classify') {
        // requests in flight while the victim dies
        const png = readFileSync(join(work, 'colours', 'red', '0.ppm'));
        classified = Promise.allSettled(Array.from({ length: 4 }, () => fetch(`${server.url}/api/v1/models/${modelId}/classify`,
          { method: 'POST', body: png, headers: { 'content-type': 'image/x-portable-pixmap' } })));
        await new Promise((r) => setTimeout(r, 50));
      }
      if (victim === 'inference') {
        const inf = (await server.api('GET', '/api/v1/info')).body.inference;
        if (inf?.pid) process.kill(inf.pid, 'SIGKILL');
      }
      if ((victim === 'worker' || victim === 'both') && pid && alive(pid)) process.kill(pid, 'SIGKILL');
      if (victim === 'server' || victim === 'both') {
        await server.kill();
        await restart();
      }
      kills[victim] = (kills[victim] || 0) + 1;
      if (classified) await classified; // each answered or cut off; none may hang

      // the truth after the kill
      integrity(dataDir);
      let outcome = '';
      if (id) {
        const end = await settle(id);
        outcome = end.state;
        if (what === 'dataset' && end.state === 'done') assert.ok(existsSync(join(jobDir(id), 'dataset.json')), 'a done dataset has its summary');
        if (what === 'dataset' && end.state !== 'done') {
          // cut short: its unpacked copy is gone, and a clone of it builds
          const c = await server.api('POST', `/api/v1/jobs/${id}/clone`);
          assert.equal(c.status, 202, JSON.stringify(c.body));
          assert.equal((await settle(c.body.job.id)).state, 'done', 'the clone of a cut-short dataset');
          outcome += ', clone done';
        }
        if (what === 'training') {
          if (end.state !== 'done') {
            const r = await server.api('POST', `/api/v1/models/${id}/resume`, {});
            if (r.status === 202) {
              const again = await settle(id);
              assert.equal(again.state, 'done', `the resumed training: ${again.error}`);
              outcome += ', resumed';
            } else {
              // killed before its first snapshot: nothing to resume from; a clone trains
              assert.match(JSON.stringify(r.body), /snapshot/, `resume refused: ${JSON.stringify(r.body)}`);
              const c = await server.api('POST', `/api/v1/jobs/${id}/clone`);
              assert.equal(c.status, 202, JSON.stringify(c.body));
              assert.equal((await settle(c.body.job.id)).state, 'done');
              id = c.body.job.id;
              outcome += ', cloned';
            }
          }
          assert.equal(sha(join(jobDir(id), `snapshot_epoch_${EPOCHS}.safetensors`)), reference,
            'the weights of an undisturbed training');
        }
        if (what === 'evaluation') {
          const e = await server.api('GET', `/api/v1/evaluations/${id}`);
          if (end.state === 'done') assert.ok(e.body.evaluation.metrics.count > 0, 'a done evaluation has its metrics');
          else {
            const c = await server.api('POST', `/api/v1/jobs/${id}/clone`);
            assert.equal(c.status, 202, JSON.stringify(c.body));
            assert.equal((await settle(c.body.job.id)).state, 'done');
            outcome += ', clone done';
          }
        }
      } else {
        // the service comes back and classifies
        let r;
        await waitFor(async () => {
          r = await fetch(`${server.url}/api/v1/models/${modelId}/classify`, { method: 'POST',
            body: readFileSync(join(work, 'colours', 'red', '0.ppm')), headers: { 'content-type': 'image/x-portable-pixmap' } });
          return r.status === 200;
        }, LONG, 'a classification after the kill');
        outcome = 'classifies again';
      }
      // no job says running without a worker, none waits for ever
      const jobs = (await server.api('GET', '/api/v1/jobs?limit=1000')).body.jobs;
      for (const j of jobs) {
        if (j.state === 'running') assert.ok(j.pid && alive(j.pid), `job ${j.id} says running, its worker ${j.pid} is gone`);
        assert.notEqual(j.state, 'queued', `job ${j.id} left queued`);
      }
      integrity(dataDir);
      log(`kill ${it}/${iterations}: ${what}, ${victim} killed after ${delay} ms: ${outcome}`);
    }
    return { iterations, kills };
  } finally {
    delete process.env.DEEPDESK_EVAL_DELAY_MS;
    await server.kill();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const iterations = Number(process.argv[2] || 20), seed = Number(process.argv[3] || 1);
  const t0 = Date.now();
  runCampaign({ iterations, seed }).then((r) => {
    console.log(`${r.iterations} kill iterations survived (seed ${seed}, ${Object.entries(r.kills).map(([k, n]) => `${k} ${n}`).join(', ')}) in ${Math.round((Date.now() - t0) / 1000)} s`);
    console.log('1 passed, 0 failed');
  }, (e) => {
    console.error(e);
    console.log('0 passed, 1 failed');
    process.exit(1);
  });
}
