// kill_campaign.test.mjs — a short run of the kill campaign (tests/campaign/kill.mjs):
// SIGKILL the server, a worker or the inference service at a seeded moment of a
// dataset build, a training, an evaluation or a classification, and after each the
// store is whole, every job's state is the truth, a resumed training ends with the
// weights of an undisturbed one, and what was cut short can be cloned to done.
// `make kill-campaign` runs many more iterations (KILL_ITERATIONS, KILL_SEED).
import { test } from 'node:test';
import { runCampaign } from '../campaign/kill.mjs';
import { killTrackedPids } from './helpers.mjs';

test('kill campaign, 8 iterations (seed 5): nothing lost', async (t) => {
  try {
    const r = await runCampaign({ iterations: 8, seed: 5, log: (l) => t.diagnostic(l) });
    t.diagnostic(`kills: ${JSON.stringify(r.kills)}`);
  } finally {
    killTrackedPids();
  }
});
