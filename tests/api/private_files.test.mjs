// private_files.test.mjs — what the server and its workers write is theirs alone:
// the data folder is closed to other users (even one an older version left open),
// and the store, the job folders and the files a worker writes carry no group or
// other bits, so another account on a shared file system reads nothing.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, chmodSync, statSync, readdirSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, waitState, createJob, killTrackedPids, TEST_TMP } from './helpers.mjs';

const mode = (p) => statSync(p).mode & 0o777;
const oct = (m) => '0' + m.toString(8);

/** Every path under dir (dir included) whose mode gives group or others anything. */
function openPaths(dir) {
  const out = [];
  const walk = (p) => {
    const st = statSync(p);
    if (st.mode & 0o077) out.push(`${p} ${oct(st.mode & 0o777)}`);
    if (st.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  walk(dir);
  return out;
}

describe('private files', () => {
  const dirs = [];
  after(() => { killTrackedPids(); for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

  test('a data folder an older version left 0755 with a 0644 store is closed, and new files are 0600', async () => {
    const dataDir = mkdtempSync(join(TEST_TMP, 'deepdesk-private-'));
    dirs.push(dataDir);
    chmodSync(dataDir, 0o755);
    mkdirSync(join(dataDir, 'old'), { mode: 0o755 });
    writeFileSync(join(dataDir, 'old', 'left.txt'), 'x', { mode: 0o644 });
    const server = await startServer({ dataDir, keepData: true });
    try {
      assert.equal(oct(mode(dataDir)), '0700', 'the data folder');
      const job = await createJob(server, { steps: 2, step_ms: 10 });
      const done = await waitState(server, job.id, ['done', 'error'], 60000);
      assert.equal(done.state, 'done', done.error);
      // the store (and its WAL), the job's folder, job.json, events, the worker's log
      const jobDir = join(dataDir, 'jobs', String(job.id));
      assert.ok(readdirSync(jobDir).length >= 2, `the job folder holds ${readdirSync(jobDir)}`);
      const open = openPaths(dataDir).filter((p) => !p.startsWith(join(dataDir, 'old')) && !p.startsWith(`${dataDir} `));
      assert.deepEqual(open, [], 'files the server or the worker made readable by others');
      for (const f of readdirSync(dataDir).filter((f) => f.startsWith('deepdesk.db')))
        assert.equal(mode(join(dataDir, f)) & 0o077, 0, f);
    } finally {
      await server.stop();
    }
  });
});
