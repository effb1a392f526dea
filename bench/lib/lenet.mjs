// lenet.mjs — what the inference benches share: a real server in work with a
// dataset of generated 28×28 gray bar images (10 classes, perClass images each) and
// LeNet trained on it for one epoch; and writing a bench's result file, and its end.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, waitState } from '../../tests/lib/server.mjs';
import { barsPng } from '../../tests/lib/png.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));

/** Start a server on work, make the bars dataset (val_pct of it held out) and train
 *  LeNet on it; both finished.  {server, datasetId, modelId}; the caller stops the
 *  server (also when this throws: server is then on the error as .server). */
export async function lenetOnBars(work, { perClass = 20, valPct = 20, timeout = 180000 } = {}) {
  for (let k = 0; k < 10; k++) {
    mkdirSync(join(work, 'bars', `c${k}`), { recursive: true });
    for (let i = 0; i < perClass; i++) writeFileSync(join(work, 'bars', `c${k}`, `${i}.png`), barsPng(k, i + 1));
  }
  const server = await startServer({ args: ['--data-root', work] });
  try {
    const ds = await server.api('POST', '/api/v1/datasets', {
      name: 'bars', source: { type: 'folder', train: join(work, 'bars') },
      options: { width: 28, height: 28, channels: 1, val_pct: valPct, seed: 1 },
    });
    if (ds.status !== 202) throw new Error(JSON.stringify(ds.body));
    await waitState(server, ds.body.job.id, ['done'], timeout);
    const m = await server.api('POST', '/api/v1/models', {
      name: 'lenet', dataset: ds.body.job.id, network: { standard: 'lenet' }, epochs: 1,
    });
    if (m.status !== 202) throw new Error(JSON.stringify(m.body));
    await waitState(server, m.body.job.id, ['done'], timeout);
    return { server, datasetId: ds.body.job.id, modelId: m.body.job.id };
  } catch (e) {
    e.server = server;
    throw e;
  }
}

/** bench/results/NAME.json = out, and its rows on stdout. */
export function writeResult(name, out) {
  mkdirSync(join(HERE, '..', 'results'), { recursive: true });
  writeFileSync(join(HERE, '..', 'results', `${name}.json`), JSON.stringify(out, null, 1));
  for (const r of out.rows) console.log(`  ${r.metric}: ${r.value} ${r.unit}${r.note ? `  (${r.note})` : ''}`);
}

/** A bench's finally: server (if it started) stopped and its data removed, work
 *  removed, and out written as bench/results/NAME.json (writeResult). */
export async function endBench(server, work, name, out) {
  await server?.stop();
  server?.cleanup?.();
  rmSync(work, { recursive: true, force: true });
  writeResult(name, out);
}
