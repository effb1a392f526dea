// disk_full.test.mjs — issue 16, "nothing is lost": a server whose data folder is a
// small tmpfs, filled with a ballast file until only a few MiB are left, then:
//   - an upload larger than the space left is refused (507 disk_full, the space named),
//     at once or, chunked, at the write that fills the disk, with no partial file left
//     in DATA/uploads, and the server still answers;
//   - a dataset build that runs out of space while writing its databases ends `error`
//     with the no-space message, and leaves no dataset that looks done (no dataset.json,
//     no half-written *_db); so does an uploaded archive too big once unpacked;
//   - a disk someone else fills while a job runs: the job's event log stays whole and
//     its last line is the error status saying why;
//   - a training whose second snapshot cannot be written (half the pair fits, the
//     other half does not) ends `error` saying so, the first snapshot stays the latest,
//     unchanged and usable (classified with), and no snapshot is ever half a pair;
//   - with the ballast gone, the training resumes from that snapshot and finishes.
// After each, the store passes `PRAGMA integrity_check` (through Python's sqlite3),
// and at the end no job is left queued or running.  Needs root (mount -t tmpfs);
// where mounting is refused the whole file is skipped with the reason.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync, writeSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, sleep, folderDataset, writeColourFolders, assertError, TEST_TMP, wideNet,
  getJob, trackPid, killTrackedPids,
} from './helpers.mjs';

const MiB = 1 << 20;
const NO_SPACE = /no space left on the data folder's file system \(\d+(\.\d+)? MiB free\)/;

/* One hidden layer of 4096 on 8x8x3 pixels: the weights are 3.2 MB and the SGD
 * solverstate (its momentum) as much again, so where the space for one snapshot
 * and a half is left, the second snapshot's first file fits and its second does
 * not (the .solverstate is written first, the .safetensors last). */
const HIDDEN = 4096;
const BIG_NET = wideNet(HIDDEN);
const WEIGHT_BYTES = (8 * 8 * 3 * HIDDEN + HIDDEN + HIDDEN * 2 + 2) * 4;

const sha256 = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('a full disk', () => {
  let base, data, work, server, mounted = false, skipWhy = '';

  const freeBytes = () => { const s = statfsSync(data); return s.bavail * s.bsize; };
  const ballast = () => join(data, 'ballast');
  /** Fill the data folder until `leave` bytes are free; 0 fills it to the brim,
   *  however much a running job writes meanwhile. */
  function fill(leave) {
    rmSync(ballast(), { force: true });
    const n = freeBytes() - leave;
    assert.ok(n > 0, `only ${freeBytes()} bytes free, cannot leave ${leave}`);
    if (leave > 0) return writeFileSync(ballast(), Buffer.alloc(n));
    const fd = openSync(ballast(), 'w');
    try {
      for (let size = MiB; size >= 512;) {
        try { writeSync(fd, Buffer.alloc(size)); } catch (e) { if (e.code !== 'ENOSPC') throw e; size >>= 1; }
      }
    } finally { closeSync(fd); }
  }
  const unfill = () => rmSync(ballast(), { force: true });
  function integrity() {
    // Python's sqlite3 (python3 is in the test packages; the sqlite3 shell is not)
    const out = execFileSync('/usr/bin/python3', ['-c',
      'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])',
      join(data, 'deepdesk.db')], { encoding: 'utf8' });
    assert.equal(out.trim(), 'ok');
  }
  async function serverAnswers() {
    const r = await server.api('GET', '/api/v1/info');
    assert.equal(r.status, 200);
  }

  before(async () => {
    base = mkdtempSync(join(TEST_TMP, 'deepdesk-diskfull-'));
    data = join(base, 'data');
    work = join(base, 'work');
    mkdirSync(data);
    mkdirSync(work);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=40m,mode=0700', 'tmpfs', data], { stdio: 'pipe' });
      mounted = true;
    } catch (e) {
      const why = String(e.stderr || e.message).trim().split('\n')[0];
      skipWhy = `cannot mount a small tmpfs for the data folder (needs root): ${why}`;
      return;
    }
    server = await startServer({ dataDir: data, keepData: true, args: ['--data-root', work] });
  });

  after(async () => {
    try {
      if (server) {
        // workers outlive a stopped server: a test that failed mid-job leaves one
        // writing in the mount, which must be gone before the unmount
        try {
          const l = await server.api('GET', '/api/v1/jobs?limit=100');
          for (const j of l.body.jobs.filter((x) => x.state === 'running')) trackPid((await getJob(server, j.id)).pid);
        } catch { /* the server is gone already */ }
        await server.stop();
        killTrackedPids();
      }
    } finally {
      if (mounted) {
        try { execFileSync('umount', [data], { stdio: 'pipe' }); } catch { execFileSync('umount', ['-l', data], { stdio: 'pipe' }); }
      }
      rmSync(base, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
    }
  });

  test('an upload larger than the space left: 507, nothing kept, the server up', async (t) => {
    if (skipWhy) return t.skip(skipWhy);
    try {
      fill(3 * MiB);
      const body = randomBytes(8 * MiB);
      const res = await fetch(`${server.url}/api/v1/uploads?name=big.zip`, { method: 'POST', body });
      const text = await res.text();
      const r = { status: res.status, headers: res.headers, body: JSON.parse(text) };
      assertError(r, 507, 'disk_full', NO_SPACE);
      assert.match(r.body.error.message, /upload/);
      t.diagnostic(r.body.error.message);
      // without a Content-Length (chunked) the size is not known up front: the
      // write that fills the disk is the one refused, and the partial file goes
      let sent = 0;
      const stream = new ReadableStream({
        pull(ctl) {
          if (sent >= 8 * MiB) return ctl.close();
          ctl.enqueue(new Uint8Array(randomBytes(256 * 1024)));
          sent += 256 * 1024;
        },
      });
      let chunked;
      try {
        const res2 = await fetch(`${server.url}/api/v1/uploads?name=streamed.zip`, { method: 'POST', body: stream, duplex: 'half' });
        chunked = { status: res2.status, headers: res2.headers, body: JSON.parse(await res2.text()) };
      } catch (e) {
        assert.fail(`the chunked upload got no answer: ${e.cause?.message || e.message}`);
      }
      assertError(chunked, 507, 'disk_full', NO_SPACE);
      assert.match(chunked.body.error.message, /upload/);
      t.diagnostic(chunked.body.error.message);
      const left = existsSync(join(data, 'uploads')) ? readdirSync(join(data, 'uploads')) : [];
      assert.deepEqual(left, [], 'no partial upload file is left behind');
      await serverAnswers();
      // an upload that fits still works on the same, nearly full, disk
      const small = await fetch(`${server.url}/api/v1/uploads?name=small.zip`, { method: 'POST', body: randomBytes(64 * 1024) });
      assert.equal(small.status, 201, await small.text());
      integrity();
    } finally {
      unfill();
    }
  });

  test('a dataset build that runs out of space: error, and no dataset that looks done', async (t) => {
    if (skipWhy) return t.skip(skipWhy);
    // 400 images, stored raw at 64x64x3 (12 KiB each): about 5 MB of records
    writeColourFolders(join(work, 'big'), { red: [200, 30, 30], blue: [30, 30, 200] }, 200);
    try {
      fill(3 * MiB);
      const r = await server.api('POST', '/api/v1/datasets', {
        name: 'too big', source: { type: 'folder', train: join(work, 'big') },
        options: { width: 64, height: 64, channels: 3, encoding: 'none', val_pct: 25, seed: 1 },
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const id = r.body.job.id;
      const job = await waitState(server, id, ['done', 'error'], 30000);
      assert.equal(job.state, 'error', 'the build cannot have finished');
      t.diagnostic(job.error);
      assert.match(job.error, NO_SPACE);
      assert.match(job.error, /_db/, 'the message names the database that could not be written');
      const dir = join(data, 'jobs', String(id));
      assert.ok(!existsSync(join(dir, 'dataset.json')), 'no dataset.json: the dataset is not marked done');
      for (const db of ['train_db', 'val_db', 'test_db'])
        assert.ok(!existsSync(join(dir, db)), `the partial ${db} is removed`);
      const d = await server.api('GET', `/api/v1/datasets/${id}`);
      assert.equal(d.status, 200);
      assert.equal(d.body.dataset.state, 'error');
      assert.ok(!d.body.dataset.summary, 'an unfinished dataset has no summary');
      const m = await server.api('POST', '/api/v1/models', { name: 'on nothing', dataset: id, network: { prototxt: BIG_NET }, epochs: 1 });
      assert.ok(m.status >= 400 && m.status < 500, `a model cannot be trained on it: ${m.status} ${JSON.stringify(m.body)}`);
      await serverAnswers();
      integrity();
    } finally {
      unfill();
      rmSync(join(work, 'big'), { recursive: true, force: true });
    }
  });

  test('an uploaded archive that does not fit unpacked: error, and the unpacking removed', async (t) => {
    if (skipWhy) return t.skip(skipWhy);
    // 400 images of 64x64 (12 KiB each): a 5 MB tar that unpacks to as much again
    writeColourFolders(join(work, 'arch'), { red: [200, 30, 30], blue: [30, 30, 200] }, 200, 64);
    const tar = join(work, 'arch.tar');
    execFileSync('tar', ['-cf', tar, '-C', join(work, 'arch'), '.']);
    const body = readFileSync(tar);
    try {
      fill(body.length + 2 * MiB);
      const up = await fetch(`${server.url}/api/v1/uploads?name=arch.tar`, { method: 'POST', body });
      const u = JSON.parse(await up.text());
      assert.equal(up.status, 201, JSON.stringify(u));
      const r = await server.api('POST', '/api/v1/datasets', {
        name: 'unpacks too big', source: { type: 'upload', upload: u.upload.id },
        options: { width: 8, height: 8, channels: 3 },
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const id = r.body.job.id;
      const job = await waitState(server, id, ['done', 'error'], 30000);
      assert.equal(job.state, 'error');
      t.diagnostic(job.error);
      assert.match(job.error, NO_SPACE);
      assert.match(job.error, /\.tar: cannot unpack \w+\/\d+\.ppm/);
      const dir = join(data, 'jobs', String(id));
      assert.ok(!existsSync(join(dir, 'source')), 'the partial unpacking is removed');
      assert.ok(!existsSync(join(dir, 'dataset.json')));
      await serverAnswers();
      integrity();
    } finally {
      unfill();
      rmSync(join(work, 'arch'), { recursive: true, force: true });
      rmSync(tar, { force: true });
    }
  });

  test('a disk filled by someone else while a job runs: its log stays whole and says why it ended', async (t) => {
    if (skipWhy) return t.skip(skipWhy);
    const r = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 30, step_ms: 30, log_lines: 20 } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const id = r.body.job.id;
    const dir = join(data, 'jobs', String(id));
    await waitState(server, id, 'running');
    await waitFor(() => existsSync(join(dir, 'events.jsonl')), 5000, 'the event log');
    let waiting = 0;
    try {
      fill(0); // every byte: the job's events, and the store's writes, now fail
      // the worker ends (the store cannot record it yet); its last line says why
      const pid = (await server.api('GET', `/api/v1/jobs/${id}`)).body.job.pid;
      await waitFor(() => !existsSync(`/proc/${pid}`) || /\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')), 20000, 'the worker to end');
      const text = readFileSync(join(dir, 'events.jsonl'), 'utf8');
      assert.ok(text.endsWith('\n'), 'no torn last line');
      const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l)); // every line parses
      const last = lines[lines.length - 1];
      assert.equal(last.type, 'status');
      assert.equal(last.state, 'error');
      assert.match(last.message, NO_SPACE);
      assert.match(last.message, /events\.jsonl/);
      assert.ok(!existsSync(join(dir, 'events.jsonl.reserve')), 'the room set aside is given back');
      // a new job: the store takes it (its WAL has room in pages it holds) or
      // refuses in the same sentence; taken, it waits queued (it cannot be
      // started on a disk with no room) and runs once there is room again
      const another = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 2, step_ms: 10 } });
      if (another.status !== 202) {
        assertError(another, 507, 'disk_full', NO_SPACE);
        assert.match(another.body.error.message, /^store: /);
      } else {
        waiting = another.body.job.id;
        await sleep(300);
        assert.equal((await server.api('GET', `/api/v1/jobs/${waiting}`)).body.job.state, 'queued');
      }
    } finally {
      unfill();
    }
    // with space again, the store catches up: the job's state is the truth
    const job = await waitState(server, id, ['done', 'error'], 10000);
    assert.equal(job.state, 'error');
    assert.match(job.error, NO_SPACE);
    if (waiting) assert.equal((await waitState(server, waiting, ['done', 'error'], 10000)).state, 'done');
    await serverAnswers();
    integrity();
  });

  test('a snapshot that cannot be written: error, the last good one stays latest; resumed with space, it finishes', async (t) => {
    if (skipWhy) return t.skip(skipWhy);
    writeColourFolders(join(work, 'colours'), { red: [200, 30, 30], blue: [30, 30, 200] }, 16);
    const dsId = await folderDataset(server, join(work, 'colours'));
    let id, dir, firstHash;
    try {
      // room for the first snapshot's two files and the second's first, not its second
      fill(Math.round(WEIGHT_BYTES * 3.5));
      const r = await server.api('POST', '/api/v1/models', {
        name: 'wide', dataset: dsId, network: { prototxt: BIG_NET }, epochs: 3,
        snapshot_interval: 1, solver: { base_lr: 0.01, lr_policy: { policy: 'fixed' } },
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      id = r.body.job.id;
      dir = join(data, 'jobs', String(id));
      // a snapshot's .safetensors is renamed into place whole, after its
      // .solverstate: hash epoch 1's as soon as it is there
      await waitFor(() => existsSync(join(dir, 'snapshot_epoch_1.safetensors')), 30000, 'the first snapshot');
      firstHash = sha256(join(dir, 'snapshot_epoch_1.safetensors'));
      const job = await waitState(server, id, ['done', 'error'], 30000);
      assert.equal(job.state, 'error', 'the job cannot finish without its snapshots');
      t.diagnostic(job.error);
      assert.match(job.error, NO_SPACE);
      assert.match(job.error, /snapshot/);
      assert.match(job.error, /epoch 2/);
      // nothing half-written is left, and no snapshot is half a pair
      const files = readdirSync(dir);
      assert.deepEqual(files.filter((f) => /\.tmp/.test(f)), [], 'no temporary file is left');
      const snaps = files.filter((f) => f.startsWith('snapshot_epoch_')).sort();
      assert.deepEqual(snaps, ['snapshot_epoch_1.safetensors', 'snapshot_epoch_1.solverstate']);
      assert.equal(sha256(join(dir, 'snapshot_epoch_1.safetensors')), firstHash);
      const m = await server.api('GET', `/api/v1/models/${id}`);
      assert.equal(m.status, 200);
      assert.deepEqual(m.body.model.snapshots.map((s) => [s.label, s.resumable]), [['1', true]]);
      await serverAnswers();
      integrity();
    } finally {
      unfill();
    }
    // the latest snapshot is whole: it classifies
    const img = readFileSync(join(work, 'colours', 'red', '1.ppm'));
    const c = await fetch(`${server.url}/api/v1/models/${id}/classify`, { method: 'POST', body: img });
    assert.equal(c.status, 200, await c.clone().text());
    assert.ok((await c.json()).predictions.length > 0);
    // with space again, a resume goes on from epoch 1 and finishes
    const res = await server.api('POST', `/api/v1/models/${id}/resume`, {});
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const done = await waitState(server, id, ['done', 'error'], 60000);
    assert.equal(done.state, 'done', done.error);
    const m = await server.api('GET', `/api/v1/models/${id}`);
    assert.deepEqual(m.body.model.snapshots.map((s) => s.label), ['1', '2', '3']);
    assert.equal(sha256(join(dir, 'snapshot_epoch_1.safetensors')), firstHash, 'the resume left epoch 1 alone');
    await serverAnswers();
    integrity();
    // every job's state is where it ended, none left hanging
    const all = await server.api('GET', '/api/v1/jobs?limit=50');
    assert.deepEqual(all.body.jobs.filter((j) => !['done', 'error'].includes(j.state)).map((j) => [j.id, j.state]), []);
  });
});
