// bench/infer/eval.mjs — classify-many throughput of an evaluation job
// (POST /api/v1/evaluations) of LeNet over a dataset's val split of generated 28×28
// gray bars (BENCH_EVAL_N images in all, 10,000; 90% of them held out for val),
// at batch 64 and at batch 1.  Reported: images/s as the worker measures it (the
// forward passes, reading the LMDB and writing the CSV/JSONL rows), the job's
// wall time, and the worker's peak memory.  LeNet trains one epoch on the other
// 10% first (what it learnt does not change the speed).
//
//   make all && node bench/infer/eval.mjs
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitState } from '../../tests/lib/server.mjs';
import { lenetOnBars, endBench } from '../lib/lenet.mjs';

const N = Number(process.env.BENCH_EVAL_N || 10000);

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'deepdesk-bench-many-'));
  let server;
  const out = { bench: 'infer-many', ok: false, rows: [], raw: {} };
  try {
    let datasetId, modelId;
    ({ server, datasetId, modelId } = await lenetOnBars(work, { perClass: N / 10, valPct: 90, timeout: 600000 })
      .catch((e) => { server = e.server; throw e; }));
    for (const batch of [64, 1]) {
      const t0 = Date.now();
      const e = await server.api('POST', '/api/v1/evaluations', {
        model: modelId, source: { dataset: datasetId, split: 'val' }, batch_size: batch,
      });
      if (e.status !== 202) throw new Error(JSON.stringify(e.body));
      const st = await waitState(server, e.body.job.id, ['done', 'error'], 600000);
      if (st.state !== 'done') throw new Error(st.error);
      const wall = (Date.now() - t0) / 1000;
      const mt = (await server.api('GET', `/api/v1/evaluations/${e.body.job.id}`)).body.evaluation.metrics;
      out.raw[`batch${batch}`] = { count: mt.count, images_per_s: mt.images_per_s, seconds: mt.seconds, wall, memory_kb: mt.memory_kb, accuracy: mt.accuracy };
      out.rows.push(
        { metric: `LeNet classify-many, batch ${batch}`, value: Math.round(mt.images_per_s), unit: 'images/s', note: `${mt.count} images of a dataset's val split, in the worker` },
        { metric: `LeNet classify-many job, batch ${batch}`, value: +wall.toFixed(2), unit: 's', note: 'POST to done, as the API sees it' },
      );
      if (batch === 64) out.rows.push({ metric: 'LeNet classify-many peak memory', value: Math.round(mt.memory_kb.peak / 1024), unit: 'MiB', note: `VmHWM; heap ${Math.round(mt.memory_kb.anon / 1024)} MiB at the end, the rest the LMDB's mapped pages` });
    }
    out.ok = true;
  } finally {
    await endBench(server, work, 'infer-eval-latest', out);
  }
  if (!out.ok) process.exit(1);
}

main().catch((e) => { console.error(e); process.exit(1); });
