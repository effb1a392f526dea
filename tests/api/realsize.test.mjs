// realsize.test.mjs — real photos through every path.  The images come from
// tests/lib/photos.mjs (seeded, made once and cached): JPEG photos up to 4000×3000
// and a few MB, a 4000×3000 PNG, a phone's portrait photo stored landscape with EXIF
// Orientation 6, Orientations 3 and 8, progressive, CMYK and gray JPEGs, 16-bit gray
// and RGB, palette (with and without tRNS), gray+alpha and RGBA PNGs, in six colour
// classes, with three broken files among them.  Until these, no test sent an image
// over 100 bytes, and a form upload over 8 KB failed as "truncated PNG".
//
//   1. decoders: every kind, at its own size through `deepdesk dataset create
//      --encoding none`, sample for sample as Pillow reads it (EXIF applied, alpha
//      on white), colour and gray;
//   2. an uploaded archive of the photos (.tar for colour, .zip for gray) in every
//      resize mode: every good photo a record of the asked size whose pixels are
//      DIGITS' resize_image() of Pillow's reading, the broken ones skipped with
//      reasons naming them;
//   3. a tiny network trained on them; each photo classified as a raw body, a form,
//      DIGITS' classify_one.json and classify_many.json, `deepdesk classify` on the
//      job folder and on the downloaded bundle, and an evaluation of an uploaded
//      archive: the same top 5 everywhere, the reported size the shown one;
//   4. the upload cap: an image of exactly IMAGE_UPLOAD_CAP bytes is classified
//      through the body, the form and classify_many, one byte more is a 413 naming
//      the limit (classify_one's too).
//
//   node --test --test-concurrency=1 tests/api/realsize.test.mjs
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, mkdirSync, copyFileSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join, basename } from 'node:path';
import {
  startServer, waitState, assertError, killTrackedPids, BIN, TEST_TMP, TINY_NET, endServer, postBody as post, formOf as form,
} from './helpers.mjs';
import { photos, paddedJpeg, PY } from '../lib/photos.mjs';

const run = promisify(execFile);
const CHECK = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..', 'lib', 'photos_check.py');
const CAP = 64 << 20; // IMAGE_UPLOAD_CAP in app/api/api_infer.c
const MODES = ['squash', 'crop', 'fill', 'half_crop'];
const JPEG_KINDS = /jpeg|progressive|exif|cmyk/;

/** The most a sample may differ from Pillow: libjpeg-turbo on both sides decodes
 *  JPEGs identically (2 allows another build's IDCT); Pillow takes the top byte of
 *  16-bit RGB where we round; everything else is exact. */
const tolerance = (kind) => (JPEG_KINDS.test(kind) ? 2 : kind === 'rgb16' ? 1 : 0);



const mime = (file) => (file.endsWith('.png') ? 'image/png' : 'image/jpeg');

/** Top-5 answers the same: labels in the same order, probabilities within 1e-5
 *  (DIGITS' routes give percentages to 2 decimals: within 0.005 points). */
function sameTop(got, want, what) {
  assert.deepEqual(got.map((p) => p.label), want.map((p) => p.label), `${what}: labels`);
  got.forEach((p, i) => {
    const tol = p.percent ? 0.00005 + 1e-9 : 1e-5;
    assert.ok(Math.abs(p.probability - want[i].probability) <= tol,
      `${what}: ${p.label} ${p.probability} vs ${want[i].probability}`);
  });
}
const fromPairs = (pairs) => pairs.map(([label, pct]) => ({ label, probability: pct / 100, percent: true }));

describe('real-size photos', () => {
  let P, server, work, modelId, grayFillId, good;
  const byMode = {};

  before(async () => {
    P = photos(1);
    good = P.manifest;
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-realsize-'));
    // the class folders (good and broken photos), as a learner would zip them
    const classes = [...new Set(good.map((e) => e.class))];
    await run('tar', ['cf', join(work, 'photos.tar'), '-C', P.dir, ...classes]);
    await run('zip', ['-q', '-1', '-r', join(work, 'photos.zip'), ...classes], { cwd: P.dir });
    server = await startServer({ args: ['--data-root', P.dir, '--data-root', work] });
  });
  after(() => endServer(server, work));

  test('decoders: every kind sample for sample as Pillow reads it, EXIF applied, colour and gray', async () => {
    // one class folder per kind, one folder per shown size, each image at its own size
    const groups = {};
    for (const e of P.parity) (groups[e.shown.join('x')] ??= []).push(e);
    assert.deepEqual(Object.keys(groups).sort(), ['64x96', '96x64', '96x96'], 'orientations 6 and 8 swap the sides');
    let checked = 0;
    for (const [size, list] of Object.entries(groups)) {
      list.sort((a, b) => (a.kind < b.kind ? -1 : 1));
      const src = join(work, `parity-${size}`);
      const files = list.map((e) => {
        mkdirSync(join(src, e.kind), { recursive: true });
        const to = join(src, e.kind, basename(e.file));
        copyFileSync(P.path(e.file), to);
        return to;
      });
      for (const ch of [3, 1]) {
        const out = join(work, `parity-${size}-${ch}`);
        await run(BIN, ['dataset', 'create', src, out, '--size', size, '--channels', String(ch), '--encoding', 'none',
          '--min-per-class', '1', '--val-pct', '0']);
        const res = JSON.parse((await run(PY, [CHECK, join(out, 'train_db'), String(ch), ...files])).stdout);
        list.forEach((e, i) => {
          const r = res[files[i]];
          const what = `${e.kind} ${e.stored.join('x')} (orientation ${e.orientation}), ${ch} channel(s)`;
          assert.deepEqual(r.shape, r.want, `${what}: stored ${JSON.stringify(r.shape)}, Pillow ${JSON.stringify(r.want)}`);
          assert.ok(r.max <= tolerance(e.kind), `${what}: a sample ${r.max} off Pillow's (mean ${r.mean})`);
          if (JPEG_KINDS.test(e.kind)) assert.ok(r.mean < 0.25, `${what}: mean difference ${r.mean}`); // no systematic shift
          checked++;
        });
      }
    }
    assert.equal(checked, P.parity.length * 2);
  });

  test('an uploaded archive in every resize mode, colour and gray: sizes, pixels, the broken skipped by name', async () => {
    // colour from a .tar, gray from a .zip (deflated, as a desktop's "compress" makes it)
    const archive = { 3: readFileSync(join(work, 'photos.tar')), 1: readFileSync(join(work, 'photos.zip')) };
    const jobs = [];
    for (const mode of MODES) {
      for (const channels of [3, 1]) {
        const name = channels === 3 ? 'photos.tar' : 'photos.zip';
        const up = await post(server, `/api/v1/uploads?name=${name}`, archive[channels]);
        assert.equal(up.status, 201, up.text);
        // colour as PNG records (half_crop as JPEG, lossy: sizes only), gray as raw
        const encoding = channels === 1 ? 'none' : mode === 'half_crop' ? 'jpg' : 'png';
        const r = await server.api('POST', '/api/v1/datasets', {
          name: `photos ${mode} ${channels}`, source: { type: 'upload', upload: up.body.upload.id, name },
          options: { width: 48, height: 32, channels, resize_mode: mode, encoding, val_pct: 25, seed: 3 },
        });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        jobs.push({ id: r.body.job.id, mode, channels, encoding });
        byMode[`${mode}${channels}`] = r.body.job.id; // the model trains on one, whatever the checks find
      }
    }
    const perClass = {};
    for (const e of good) perClass[e.class] = (perClass[e.class] || 0) + 1;
    for (const j of jobs) {
      const what = `${j.mode}, ${j.channels} channel(s), ${j.encoding}`;
      const st = await waitState(server, j.id, ['done', 'error'], 120000);
      assert.equal(st.state, 'done', `${what}: ${st.error}`);
      const s = (await server.api('GET', `/api/v1/datasets/${j.id}`)).body.dataset.summary;
      // every good photo is a record; the three broken ones are skipped, each named with its fault
      const total = s.labels.map((_, i) => s.splits.train.per_class[i] + s.splits.val.per_class[i]);
      assert.deepEqual(Object.fromEntries(s.labels.map((l, i) => [l, total[i]])), perClass, what);
      assert.deepEqual(s.skipped.map((x) => x.path).sort(), P.bad.map((b) => b.file).sort(), `${what}: ${JSON.stringify(s.skipped)}`);
      for (const b of P.bad) {
        const reason = s.skipped.find((x) => x.path === b.file).reason;
        assert.match(reason, b.file.endsWith('.png') ? /truncated PNG/ : /JPEG/, `${b.file}: ${reason}`);
      }
      // each stored record: the asked size, and DIGITS' resize of Pillow's reading
      const recs = JSON.parse((await run(PY, [CHECK, 'records', join(server.dataDir, 'jobs', String(j.id)), P.dir],
        { maxBuffer: 1 << 24 })).stdout);
      assert.equal(recs.length, s.splits.train.images);
      for (const r of recs) {
        const e = good.find((x) => basename(x.file) === r.file);
        assert.ok(e, `${what}: record of ${r.file}, not one of the photos`);
        assert.deepEqual(r.shape, [j.channels, 32, 48], `${what}: ${r.file}`);
        if (j.encoding === 'jpg') continue;
        assert.ok(r.compared > 0, `${what}: ${r.file} compared`);
        assert.ok(r.max <= tolerance(e.kind), `${what}: ${r.file} is ${r.max} off DIGITS' resize of Pillow's reading`);
      }
    }
  });

  test('tiny networks trained on the photos: colour squashed, and gray filled with noise', async () => {
    const train = async (dsId, name) => {
      assert.ok(dsId, `the dataset for ${name}`);
      assert.equal((await waitState(server, dsId, ['done', 'error'], 120000)).state, 'done');
      const m = await server.api('POST', '/api/v1/models', {
        name, dataset: dsId, network: { prototxt: TINY_NET }, epochs: 2, solver: { base_lr: 0.01 },
      });
      assert.equal(m.status, 202, JSON.stringify(m.body));
      const done = await waitState(server, m.body.job.id, ['done', 'error'], 120000);
      assert.equal(done.state, 'done', done.error);
      return m.body.job.id;
    };
    modelId = await train(byMode.squash3, 'photos');
    grayFillId = await train(byMode.fill1, 'photos gray fill');
  });

  /** Every photo of list through the body, a form, classify_one, classify_many, the CLI
   *  on the job folder and on the bundle, with model modelId: the same top 5. */
  async function everyPath(modelId, list) {
    assert.ok(modelId, 'a model');
    const url = `/api/v1/models/${modelId}/classify?top=5`;
    const ref = {};
    for (const e of list) {
      const bytes = readFileSync(P.path(e.file));
      const what = `${e.file} (${(bytes.length / 1048576).toFixed(1)} MiB)`;
      const r = await post(server, url, bytes, mime(e.file));
      assert.equal(r.status, 200, `${what}: ${r.text}`);
      assert.deepEqual(r.body.image, { width: e.shown[0], height: e.shown[1] }, `${what}: the size as shown (orientation ${e.orientation})`);
      assert.equal(r.body.predictions.length, 5);
      ref[e.file] = r.body.predictions;

      const f = await post(server, url, form({ image: { bytes, name: basename(e.file), type: mime(e.file) } }));
      assert.equal(f.status, 200, `${what} as a form: ${f.text}`);
      sameTop(f.body.predictions, ref[e.file], `${what} as a form`);
      assert.deepEqual(f.body.image, r.body.image);

      const one = await post(server, '/models/images/classification/classify_one.json',
        form({ job_id: modelId, image_file: { bytes, name: basename(e.file), type: mime(e.file) } }));
      assert.equal(one.status, 200, `${what} through classify_one.json: ${one.text}`);
      sameTop(fromPairs(one.body.predictions), ref[e.file], `${what} through classify_one.json`);
    }

    // a broken photo: a 400 whose message starts with its name and says what is wrong
    for (const b of P.bad) {
      const name = basename(b.file);
      const r = await post(server, url, form({ image: { bytes: readFileSync(P.path(b.file)), name, type: mime(name) } }));
      assertError(r, 400, 'invalid', new RegExp(`^${name.replace('.', '\\.')}: (truncated|corrupt|truncated or corrupt) (JPEG|PNG)`));
    }

    // classify_many: server paths below --data-root, all in one list
    const paths0 = list.map((e) => P.path(e.file)).join('\n') + '\n';
    const many = await post(server, '/models/images/classification/classify_many.json',
      form({ job_id: modelId, image_list: { bytes: Buffer.from(paths0), name: 'list.txt', type: 'text/plain' } }));
    assert.equal(many.status, 200, many.text);
    assert.equal(Object.keys(many.body.classifications).length, list.length);
    for (const e of list) sameTop(fromPairs(many.body.classifications[P.path(e.file)]), ref[e.file], `${e.file} through classify_many.json`);

    // the CLI, on the job folder and on the bundle as downloaded
    const paths = list.map((e) => P.path(e.file));
    const dir = join(server.dataDir, 'jobs', String(modelId));
    const res = await fetch(`${server.url}/api/v1/models/${modelId}/bundle`);
    assert.equal(res.status, 200);
    const tgz = join(work, `photos-bundle-${modelId}.tar.gz`);
    writeFileSync(tgz, Buffer.from(await res.arrayBuffer()));
    for (const [model, what] of [[dir, 'the job folder'], [tgz, 'the bundle']]) {
      const out = JSON.parse((await run(BIN, ['classify', '--model', model, '--json', ...paths], { maxBuffer: 1 << 24 })).stdout);
      assert.equal(out.results.length, list.length);
      out.results.forEach((r, i) => {
        const e = list[i];
        assert.equal(r.image, paths[i]);
        assert.equal(r.error, undefined, `${e.file} by the CLI on ${what}: ${r.error}`);
        assert.deepEqual([r.width, r.height], e.shown, `${e.file} by the CLI on ${what}: the size as shown`);
        sameTop(r.predictions, ref[e.file], `${e.file} by the CLI on ${what}`);
      });
    }
  }

  test('every photo: body, form, classify_one, classify_many, the CLI and the bundle give the same top 5', async () => {
    await everyPath(modelId, good);
  });

  test('a gray model on fill-mode records: the same top 5 on every path (the fill noise is seeded alike)', async () => {
    assert.ok(grayFillId, 'a gray fill model');
    await everyPath(grayFillId, good.filter((e, i) => i < 8 || e.kind === 'png_exif6'));
  });

  test('an evaluation of the uploaded photos answers as classify does; the broken ones are error rows', async () => {
    const up = await post(server, '/api/v1/uploads?name=photos.tar', readFileSync(join(work, 'photos.tar')));
    assert.equal(up.status, 201, up.text);
    const c = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { upload: up.body.upload.id } });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    const st = await waitState(server, c.body.job.id, ['done', 'error'], 120000);
    assert.equal(st.state, 'done', st.error);
    const rj = await server.api('GET', `/api/v1/evaluations/${c.body.job.id}/results.json`);
    const rows = rj.body;
    assert.equal(rows.length, good.length + P.bad.length);
    const secure = (h, what) => {
      assert.match(h.get('content-security-policy') || '', /default-src/, `${what}: a Content-Security-Policy`);
      assert.equal(h.get('x-frame-options'), 'DENY', what);
      assert.equal(h.get('x-content-type-options'), 'nosniff', what);
    };
    secure(rj.headers, 'results.json');
    secure((await fetch(`${server.url}/api/v1/evaluations/${c.body.job.id}/confusion?format=csv`)).headers, 'confusion.csv');
    const url = `/api/v1/models/${modelId}/classify?top=5`;
    for (const e of good) {
      const row = rows.find((r) => r.name === e.file || r.name.endsWith(`/${e.file}`));
      assert.ok(row, `a row for ${e.file}: ${JSON.stringify(rows.map((r) => r.name))}`);
      assert.equal(row.error, undefined, `${e.file}: ${row.error}`);
      assert.equal(row.true, e.class);
      const one = await post(server, url, readFileSync(P.path(e.file)));
      sameTop(row.top.slice(0, 5), one.body.predictions, `${e.file} in the evaluation`);
      if (e.stored[0] >= 4000) {
        // the page shows the uploaded photo itself, byte for byte, for the browser to turn
        const img = await fetch(`${server.url}/api/v1/evaluations/${c.body.job.id}/images/${row.n}`);
        assert.equal(img.status, 200, e.file);
        assert.equal(img.headers.get('content-type'), mime(e.file));
        secure(img.headers, `${e.file} as the evaluation serves it`);
        assert.ok(Buffer.from(await img.arrayBuffer()).equals(readFileSync(P.path(e.file))), `${e.file} served whole`);
      }
    }
    for (const b of P.bad) {
      const row = rows.find((r) => r.name === b.file || r.name.endsWith(`/${b.file}`));
      assert.ok(row && row.error, `${b.file}: ${JSON.stringify(row)}`);
      assert.ok(row.error.includes(basename(b.file)), `${b.file}'s error names it: ${row.error}`);
      assert.doesNotMatch(row.error, /: image: /, 'named once, not also as "image"');
    }
  });

  test('the upload cap: exactly IMAGE_UPLOAD_CAP bytes are classified, one more is a 413 naming the limit', async () => {
    const e = good.find((x) => x.kind === 'jpeg' && x.stored[0] === 4000);
    const at = paddedJpeg(readFileSync(P.path(e.file)), CAP);
    const over = paddedJpeg(readFileSync(P.path(e.file)), CAP + 1);
    const url = `/api/v1/models/${modelId}/classify?top=5`;
    const ok = await post(server, url, at, 'image/jpeg');
    assert.equal(ok.status, 200, `${CAP} bytes as the body: ${ok.text}`);
    assert.deepEqual(ok.body.image, { width: 4000, height: 3000 });
    const okf = await post(server, url, form({ image: { bytes: at, name: 'at-cap.jpg', type: 'image/jpeg' } }));
    assert.equal(okf.status, 200, `${CAP} bytes as a form: ${okf.text}`);
    sameTop(okf.body.predictions, ok.body.predictions, 'at the cap, as a form');

    const limit = new RegExp(`${CAP}|64 MiB`);
    assertError(await post(server, url, over, 'image/jpeg'), 413, 'too_large', limit);
    assertError(await post(server, url, form({ image: { bytes: over, name: 'over.jpg', type: 'image/jpeg' } })), 413, 'too_large', limit);
    assertError(await post(server, '/models/images/classification/classify_one.json',
      form({ job_id: modelId, image_file: { bytes: over, name: 'over.jpg', type: 'image/jpeg' } })), 413, 'too_large', limit);

    // classify_many reads server files under the same cap
    writeFileSync(join(work, 'at-cap.jpg'), at);
    writeFileSync(join(work, 'over-cap.jpg'), over);
    const many = (path) => post(server, '/models/images/classification/classify_many.json',
      form({ job_id: modelId, image_list: { bytes: Buffer.from(`${path}\n`), name: 'list.txt', type: 'text/plain' } }));
    const m = await many(join(work, 'at-cap.jpg'));
    assert.equal(m.status, 200, m.text);
    sameTop(fromPairs(m.body.classifications[join(work, 'at-cap.jpg')]), ok.body.predictions, 'at the cap, through classify_many');
    assertError(await many(join(work, 'over-cap.jpg')), 413, 'too_large', limit);
    rmSync(join(work, 'at-cap.jpg'));
    rmSync(join(work, 'over-cap.jpg'));
  });
});
