// testhooks.test.mjs — the test hooks (common/testhooks.h) steer only the test
// build: with DEEPDESK_FAKE_GPUS, DEEPDESK_INFER_DELAY_MS, DEEPDESK_EVAL_DELAY_MS,
// DEEPDESK_DRAW_FAULT and DEEPDESK_TEST_KIND set, build/deepdesk-test lists
// simulated GPUs, holds a classification, pauses an evaluation, has its drawing
// child crash and lets anyone run test jobs, while the shipped build/deepdesk, on
// the same data, does none of it.
// Each hook is checked on both programs, so a hook that stopped working in the test
// build cannot make the shipped side pass by accident.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  BIN, SHIPPED_BIN, TEST_TMP, startServer, waitState, killTrackedPids, trainColourModel,
} from './helpers.mjs';
import { keepSanitizerReports } from '../lib/server.mjs';
import { png } from './infer_fixtures.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };

/** A server of bin on data (kept), started with the variables in env set. */
async function serverWith(bin, data, work, env) {
  for (const [k, v] of Object.entries(env)) process.env[k] = v;
  try {
    return await startServer({ bin, dataDir: data, keepData: true, args: ['--data-root', work, '--cpu-slots', '1'] });
  } finally {
    for (const k of Object.keys(env)) delete process.env[k];
  }
}

describe('test hooks', () => {
  let work, data, modelId, dsId;
  const kinds = [['test build', BIN, true], ['shipped build', SHIPPED_BIN, false]];

  before(async () => {
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-hooks-'));
    data = join(work, 'data');
    const s = await startServer({ dataDir: data, keepData: true, args: ['--data-root', work, '--cpu-slots', '1'] });
    try {
      ({ modelId, dsId } = await trainColourModel(s, work, COLOURS, { n: 8 }));
    } finally {
      await s.stop();
    }
  });
  after(() => { killTrackedPids(); keepSanitizerReports(data); rmSync(work, { recursive: true, force: true }); });

  /** fn(s, what, hooked) on a server of each build started with env, each stopped after. */
  async function eachBuild(env, fn) {
    for (const [what, bin, hooked] of kinds) {
      const s = await serverWith(bin, data, work, env);
      try {
        await fn(s, what, hooked);
      } finally {
        await s.stop();
      }
    }
  }

  test('DEEPDESK_FAKE_GPUS: simulated GPUs in the test build only', async () => {
    await eachBuild({ DEEPDESK_FAKE_GPUS: '3' }, async (s, what, hooked) => {
      const gpus = (await s.api('GET', '/api/v1/info')).body.gpus;
      const simulated = gpus.filter((g) => /simulated/.test(g.name)).length;
      assert.equal(simulated, hooked ? 3 : 0, `${what}: ${JSON.stringify(gpus)}`);
    });
  });

  test('DEEPDESK_DRAW_FAULT and DEEPDESK_TEST_KIND: a crashing drawing child and an open test kind in the test build only', async () => {
    await eachBuild({ DEEPDESK_DRAW_FAULT: 'segv', DEEPDESK_TEST_KIND: 'anyone' }, async (s, what, hooked) => {
      const r = await s.api('POST', '/api/v1/networks/visualize', { standard: 'lenet' });
      if (hooked) assert.match(JSON.stringify(r.body), /Graphviz crashed/, `${what}: ${r.status}`);
      else assert.equal(r.status, 200, `${what}: ${JSON.stringify(r.body)}`);
      // the shipped build has no test kind at all; the hook opens it in the test build
      const t = await s.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 1 } });
      assert.equal(t.status, hooked ? 202 : 400, `${what}: ${JSON.stringify(t.body)}`);
    });
  });

  test('DEEPDESK_INFER_DELAY_MS: a held classification in the test build only', async () => {
    const delay = 3000;
    await eachBuild({ DEEPDESK_INFER_DELAY_MS: String(delay) }, async (s, what, hooked) => {
      const t0 = Date.now();
      const res = await fetch(`${s.url}/api/v1/models/${modelId}/classify`, {
        method: 'POST', headers: { 'Content-Type': 'image/png' }, body: png(8, 8, COLOURS.red),
      });
      const took = Date.now() - t0;
      assert.equal(res.status, 200, `${what}: ${await res.text()}`);
      // the service starts and loads the model on this first request: well under the delay
      if (hooked) assert.ok(took >= delay, `${what}: answered in ${took} ms, not held ${delay}`);
      else assert.ok(took < delay, `${what}: took ${took} ms: it honoured the hook`);
    });
  });

  test('DEEPDESK_EVAL_DELAY_MS: a paused evaluation in the test build only', async () => {
    // the val split (25% of 3×8 images), one image a batch, a pause of 500 ms after each
    const delay = 500;
    await eachBuild({ DEEPDESK_EVAL_DELAY_MS: String(delay) }, async (s, what, hooked) => {
      const t0 = Date.now();
      const c = await s.api('POST', '/api/v1/evaluations', { model: modelId, source: { dataset: dsId, split: 'val' }, batch_size: 1 });
      assert.equal(c.status, 202, JSON.stringify(c.body));
      const st = await waitState(s, c.body.job.id, ['done', 'error', 'aborted'], 60000);
      const took = Date.now() - t0;
      assert.equal(st.state, 'done', `${what}: ${st.error}`);
      const ev = (await s.api('GET', `/api/v1/evaluations/${c.body.job.id}`)).body.evaluation;
      const images = ev.metrics.total;
      assert.ok(images >= 4, JSON.stringify(ev.metrics));
      if (hooked) assert.ok(took >= delay * images, `${what}: done in ${took} ms, not paused`);
      else assert.ok(took < delay * images, `${what}: took ${took} ms: it honoured the hook`);
    });
  });
});
