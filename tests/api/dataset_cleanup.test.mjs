// dataset_cleanup.test.mjs — a dataset job's unpacked images (JOB/source) are gone
// once the job has ended, whichever way it ended: done, failed, or its worker
// killed with SIGKILL in the middle of the build (the server cleans up after it;
// a partial copy would only count against its owner's disk quota).  The kept
// archive stays, so the job can still be cloned.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, waitState, waitFor, writeColourFolders, killTrackedPids, trackPid, alive, TEST_TMP, endServer } from './helpers.mjs';

describe('a dataset job leaves no unpacked copy', () => {
  let server, work;
  before(async () => {
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-dscleanup-'));
    writeColourFolders(join(work, 'one', 'only'), { red: [200, 0, 0] }, 6);
    execFileSync('tar', ['czf', join(work, 'one.tar.gz'), '-C', join(work, 'one'), 'only']);
    // big enough to be mid-build when killed: 3 classes of 400 images, resized to 128×128
    writeColourFolders(join(work, 'big', 'colours'), { red: [200, 0, 0], green: [0, 200, 0], blue: [0, 0, 200] }, 400, 64);
    execFileSync('tar', ['czf', join(work, 'big.tar.gz'), '-C', join(work, 'big'), 'colours']);
    server = await startServer();
  });
  after(() => endServer(server, work));

  async function fromArchive(file, options = {}) {
    const res = await fetch(`${server.url}/api/v1/uploads?name=${file}`, {
      method: 'POST', body: readFileSync(join(work, file)), headers: { 'content-type': 'application/gzip' } });
    const up = await res.json();
    assert.equal(res.status, 201, JSON.stringify(up));
    const r = await server.api('POST', '/api/v1/datasets', { name: file, source: { type: 'upload', upload: up.upload.id }, options });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body.job.id;
  }
  const jobDir = (id) => join(server.dataDir, 'jobs', String(id));

  test('a build that fails (one class) leaves its archive and no source/', async () => {
    const id = await fromArchive('one.tar.gz', { width: 8, height: 8 });
    const job = await waitState(server, id, ['done', 'error'], 60000);
    assert.equal(job.state, 'error');
    assert.match(job.error, /class/);
    await waitFor(() => !existsSync(join(jobDir(id), 'source')), 10000, 'source/ to be removed');
    assert.ok(readdirSync(jobDir(id)).some((f) => /^upload|archive|\.tar\.gz$/.test(f)), `the archive is kept: ${readdirSync(jobDir(id))}`);
  });

  test('a worker killed with SIGKILL in the middle of the build: the server removes source/', async () => {
    const id = await fromArchive('big.tar.gz', { width: 128, height: 128, encoding: 'png' });
    const running = await waitState(server, id, ['running'], 60000);
    trackPid(running.pid);
    // wait until it has unpacked and is writing the databases
    await waitFor(() => existsSync(join(jobDir(id), 'source')) && existsSync(join(jobDir(id), 'train_db')), 60000,
      'the build to be under way');
    process.kill(running.pid, 'SIGKILL');
    await waitFor(() => !alive(running.pid), 10000, 'the worker to die');
    const job = await waitState(server, id, ['error', 'interrupted', 'done'], 30000);
    assert.notEqual(job.state, 'done', 'killed before it finished');
    assert.match(job.error || '', /signal 9|killed/i);
    await waitFor(() => !existsSync(join(jobDir(id), 'source')), 10000, 'source/ to be removed after the kill');
  });
});
