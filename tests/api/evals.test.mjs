// evals.test.mjs — classify many as a job (POST /api/v1/evaluations): a tiny network
// trained on 8×8 colour squares, then its dataset's val split evaluated: the count,
// each row equal to classifying that image alone with POST /models/{id}/classify,
// the accuracy those answers give, the confusion matrix (JSON and CSV) summing to
// the count, results.csv and results.json, misclassified and top-N; an uploaded
// archive with a corrupt image (that row an error naming the file, the rest go on)
// and an unlabelled folder; bad params each named; a deleted snapshot and a model
// with none.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readdirSync, unlinkSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { headerPng } from '../lib/png.mjs';
import {
  startServer, waitState, assertError, assertSchema, loadOpenApi, killTrackedPids, writeColourFolders, TINY_NET,
  noisyPpm,
  trainColourModel, serverWithColourModel, endServer,
} from './helpers.mjs';

const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };

/** A ustar archive of {path: Buffer}. */
function tar(files) {
  const blocks = [];
  for (const [name, data] of Object.entries(files)) {
    const h = Buffer.alloc(512);
    h.write(name, 0, 100);
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write('0', 156);
    h.write('ustar\0' + '00', 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

async function raw(server, method, path, body, type = 'application/octet-stream') {
  const init = { method };
  if (body) { init.body = body; init.headers = { 'Content-Type': type }; }
  const res = await fetch(server.url + path, init);
  const buf = Buffer.from(await res.arrayBuffer());
  let json = null;
  try { json = JSON.parse(buf.toString()); } catch { /* not JSON */ }
  return { status: res.status, body: json, headers: res.headers, buf, text: buf.toString() };
}

/** Parse CSV text (quoted cells allowed) into rows of cells. */
function parseCsv(text) {
  const rows = [];
  let row = [], cell = '', q = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (q) {
      if (ch === '"' && text[i + 1] === '"') { cell += '"'; i++; } else if (ch === '"') q = false; else cell += ch;
    } else if (ch === '"') q = true;
    else if (ch === ',') { row.push(cell); cell = ''; } else if (ch === '\n') { row.push(cell); rows.push(row); row = []; cell = ''; } else cell += ch;
  }
  return rows;
}

describe('evaluations', () => {
  let server, work, doc, dsId, modelId;

  before(async () => {
    doc = loadOpenApi();
    ({ server, work, dsId, modelId } = await serverWithColourModel('deepdesk-evals-', COLOURS));
  });
  after(() => endServer(server, work));

  test('a dataset\'s val split: every image as classify-one answers, accuracy, confusion, CSV, lists', async () => {
    const c = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { dataset: dsId, split: 'val' }, top_n: 3 });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    assertSchema(doc, 'JobResponse', c.body);
    assert.equal(c.body.job.kind, 'evaluation');
    assert.equal(c.body.job.params.snapshot, '2', 'the latest snapshot by default');
    const id = c.body.job.id;
    const st = await waitState(server, id, ['done', 'error'], 60000);
    assert.equal(st.state, 'done', st.error);

    const g = await server.api('GET', `/api/v1/evaluations/${id}`);
    assert.equal(g.status, 200, JSON.stringify(g.body));
    assertSchema(doc, 'EvaluationResponse', g.body);
    const m = g.body.evaluation.metrics;
    const list = await server.api('GET', `/api/v1/datasets/${dsId}/images?split=val&size=200`);
    const images = list.body.images;
    assert.equal(m.count, images.length);
    assert.equal(m.count, 12, '25% of 48 images');
    assert.equal(m.labelled, m.count);
    assert.equal(m.errors, 0);
    assert.equal(m.complete, true);
    assert.ok(g.body.evaluation.partial && g.body.evaluation.partial.count === m.count);

    // each row as classifying the dataset's image alone gives
    const rows = (await raw(server, 'GET', `/api/v1/evaluations/${id}/results.json`)).body;
    assert.equal(rows.length, m.count);
    // the last rows alone (what the page shows of a running evaluation)
    assert.deepEqual((await raw(server, 'GET', `/api/v1/evaluations/${id}/results.json?tail=2`)).body, rows.slice(-2));
    assert.deepEqual((await raw(server, 'GET', `/api/v1/evaluations/${id}/results.json?tail=500`)).body, rows);
    assertError(await server.api('GET', `/api/v1/evaluations/${id}/results.json?tail=-1`), 400, 'invalid', /tail/);
    const labels = ['blue', 'green', 'red']; // the class folders, sorted, as the dataset numbers them
    assert.deepEqual(m.labels, labels);
    let correct = 0;
    for (const im of images) {
      const png = await raw(server, 'GET', im.url);
      assert.equal(png.status, 200);
      const one = await raw(server, 'POST', `/api/v1/models/${modelId}/classify?top=3`, png.buf, 'image/png');
      assert.equal(one.status, 200, one.text);
      const row = rows.find((x) => x.n === im.index);
      assert.ok(row, `a row for image ${im.index}`);
      assert.equal(row.true, labels[im.label]);
      assert.equal(row.top[0].label, one.body.predictions[0].label, `image ${im.index}`);
      for (let k = 0; k < 3; k++) {
        assert.equal(row.top[k].label, one.body.predictions[k].label);
        assert.ok(Math.abs(row.top[k].probability - one.body.predictions[k].probability) < 1e-5,
          `image ${im.index} class ${k}: ${row.top[k].probability} vs ${one.body.predictions[k].probability}`);
      }
      if (one.body.predictions[0].label === labels[im.label]) correct++;
    }
    assert.ok(Math.abs(m.accuracy - correct / images.length) < 1e-9, `accuracy ${m.accuracy} vs ${correct}/${images.length}`);
    assert.equal(m.accuracy_top5, 1, '3 classes: the truth is always in the top 5');

    // the confusion matrix, both ways, sums to the count; its diagonal to the correct ones
    const cj = await server.api('GET', `/api/v1/evaluations/${id}/confusion`);
    assert.equal(cj.status, 200);
    assertSchema(doc, 'Confusion', cj.body);
    assert.deepEqual(cj.body.labels, ['blue', 'green', 'red']);
    const flat = cj.body.matrix.flat();
    assert.equal(flat.reduce((a, b) => a + b, 0), m.count);
    assert.equal(cj.body.matrix.reduce((a, r, i) => a + r[i], 0), correct);
    const cc = await raw(server, 'GET', `/api/v1/evaluations/${id}/confusion?format=csv`);
    assert.equal(cc.status, 200);
    assert.match(cc.headers.get('content-type'), /^text\/csv/);
    const ccRows = parseCsv(cc.text);
    assert.deepEqual(ccRows[0].slice(1), ['blue', 'green', 'red']);
    assert.deepEqual(ccRows.slice(1).map((r) => r.slice(1).map(Number)), cj.body.matrix);
    assertError(await server.api('GET', `/api/v1/evaluations/${id}/confusion?format=xml`), 400, 'invalid', /format/);

    // results.csv: a header and a row an image, agreeing with results.json
    const csv = await raw(server, 'GET', `/api/v1/evaluations/${id}/results.csv`);
    assert.equal(csv.status, 200);
    const crow = parseCsv(csv.text);
    assert.equal(crow.length, m.count + 1);
    assert.deepEqual(crow[0].slice(0, 5), ['n', 'name', 'true_label', 'top1_label', 'top1_probability']);
    for (const r of crow.slice(1)) {
      const j = rows.find((x) => x.n === Number(r[0]));
      assert.equal(r[2], j.true);
      assert.equal(r[3], j.top[0].label);
      assert.match(r[1], /^\d{8}_\d+$/, 'a dataset row names its db key');
    }

    // misclassified, sorted by confidence; top-N per class with image URLs
    const mis = await server.api('GET', `/api/v1/evaluations/${id}/misclassified?limit=100`);
    assert.equal(mis.status, 200);
    assertSchema(doc, 'Misclassified', mis.body);
    assert.equal(mis.body.total, m.count - correct);
    for (let i = 1; i < mis.body.items.length; i++) assert.ok(mis.body.items[i - 1].probability >= mis.body.items[i].probability);
    for (const it of mis.body.items) assert.notEqual(it.true, it.predicted);
    const top = await server.api('GET', `/api/v1/evaluations/${id}/top?class=red`);
    assert.equal(top.status, 200, JSON.stringify(top.body));
    assertSchema(doc, 'TopImages', top.body);
    assert.equal(top.body.index, 2);
    assert.equal(top.body.items.length, 3);
    const best = rows.map((r) => ({ n: r.n, p: r.top.find((t) => t.label === 'red').probability }))
      .sort((a, b) => b.p - a.p || a.n - b.n).slice(0, 3).map((x) => x.n);
    assert.deepEqual(top.body.items.map((x) => x.n), best);
    assert.match(top.body.items[0].image, new RegExp(`^/api/v1/datasets/${dsId}/images/val/\\d+$`));
    assert.equal((await raw(server, 'GET', top.body.items[0].image)).status, 200);
    assert.equal((await server.api('GET', `/api/v1/evaluations/${id}/top?class=0`)).body.label, 'blue');
    assertError(await server.api('GET', `/api/v1/evaluations/${id}/top?class=purple`), 404, 'not_found', /purple/);
    assertError(await server.api('GET', `/api/v1/evaluations/${id}/top`), 400, 'invalid', /class/);
    assertError(await server.api('GET', `/api/v1/evaluations/${modelId}`), 404, 'not_found', /not an evaluation/);
  });

  test('an upload: a corrupt image is one error row naming it, the rest go on; unlabelled folders', async () => {
    const files = {
      'set/red/r1.ppm': noisyPpm(8, 8, COLOURS.red, 101),
      'set/red/broken.png': Buffer.from('\x89PNG\r\n\x1a\nthis is not a png at all'),
      'set/green/huge.png': headerPng(60000, 60000),
      'set/green/g1.ppm': noisyPpm(8, 8, COLOURS.green, 102),
      'set/blue/b1.ppm': noisyPpm(12, 10, COLOURS.blue, 103),
      'set/unsorted/u1.ppm': noisyPpm(8, 8, COLOURS.red, 104),
      'set/notes.txt': Buffer.from('not an image, skipped'),
    };
    const up = await raw(server, 'POST', '/api/v1/uploads?name=set.tar', tar(files));
    assert.equal(up.status, 201, up.text);
    const c = await server.api('POST', '/api/v1/evaluations', { name: 'upload', model: modelId, snapshot: 1, source: { upload: up.body.upload.id } });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    assert.equal(c.body.job.params.snapshot, '1');
    const id = c.body.job.id;
    const st = await waitState(server, id, ['done', 'error'], 60000);
    assert.equal(st.state, 'done', st.error);
    const m = (await server.api('GET', `/api/v1/evaluations/${id}`)).body.evaluation.metrics;
    assert.equal(m.count, 4);
    assert.equal(m.errors, 2);
    assert.equal(m.labelled, 3, 'unsorted/ is no label of the model');
    const rows = (await raw(server, 'GET', `/api/v1/evaluations/${id}/results.json`)).body;
    assert.equal(rows.length, 6);
    const bad = rows.find((r) => r.name.endsWith('broken.png'));
    assert.ok(bad && bad.error, JSON.stringify(rows));
    assert.match(bad.error, /broken\.png/);
    assert.equal(bad.top, undefined);
    const huge = rows.find((r) => r.name.endsWith('huge.png'));
    assert.match(huge.error || '', /huge\.png.*60000/, JSON.stringify(huge));
    const u = rows.find((r) => r.name === 'set/unsorted/u1.ppm');
    assert.equal(u.true, null);
    assert.equal(rows.find((r) => r.name === 'set/blue/b1.ppm').true, 'blue');
    const csv = parseCsv((await raw(server, 'GET', `/api/v1/evaluations/${id}/results.csv`)).text);
    assert.equal(csv.length, 7);
    assert.match(csv.find((r) => r[1].endsWith('broken.png')).at(-1), /broken\.png/);
    // the uploaded images are served (PPM as PNG), by n
    const img = await raw(server, 'GET', `/api/v1/evaluations/${id}/images/${u.n}`);
    assert.equal(img.status, 200);
    assert.equal(img.headers.get('content-type'), 'image/png');
    assert.deepEqual([...img.buf.subarray(1, 4)].map((b) => String.fromCharCode(b)).join(''), 'PNG');
    assertError(await server.api('GET', `/api/v1/evaluations/${id}/images/99`), 404, 'not_found');
    // a clone classifies the same images again (from the archive the job kept)
    const cl = await server.api('POST', `/api/v1/jobs/${id}/clone`);
    assert.equal(cl.status, 202, JSON.stringify(cl.body));
    assert.equal((await waitState(server, cl.body.job.id, ['done', 'error'], 60000)).state, 'done');
    const m2 = (await server.api('GET', `/api/v1/evaluations/${cl.body.job.id}`)).body.evaluation.metrics;
    assert.deepEqual([m2.count, m2.errors, m2.labelled, m2.accuracy], [m.count, m.errors, m.labelled, m.accuracy]);
    // the upload was used
    assertError(await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { upload: up.body.upload.id } }),
      400, 'invalid', /source\.upload/);
  });

  test('an archive with an entry that climbs out: the job fails naming it, nothing is written outside', async () => {
    const up = await raw(server, 'POST', '/api/v1/uploads?name=evil.tar',
      tar({ 'ok/red/a.ppm': noisyPpm(8, 8, COLOURS.red, 1), '../../evil.ppm': noisyPpm(8, 8, COLOURS.red, 2) }));
    assert.equal(up.status, 201, up.text);
    const c = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { upload: up.body.upload.id, name: 'evil.tar' } });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    const st = await waitState(server, c.body.job.id, ['done', 'error'], 60000);
    assert.equal(st.state, 'error');
    assert.match(st.error, /evil\.tar: refused: entry "\.\.\/\.\.\/evil\.ppm" is a path that climbs out/, st.error);
    const jobs = join(server.dataDir, 'jobs');
    assert.ok(!existsSync(join(jobs, 'evil.ppm')) && !existsSync(join(jobs, String(c.body.job.id), 'evil.ppm')));
    assertError(await server.api('GET', `/api/v1/evaluations/${c.body.job.id}/confusion`), 409, 'conflict', /no metrics/);
  });

  test('stopped midway: the metrics of what was classified, marked incomplete', async () => {
    // tiny images classify faster than the first running report comes: a server
    // whose workers pause 2 ms after each batch, on the same data
    process.env.DEEPDESK_EVAL_DELAY_MS = '2';
    try { server = await server.restart(); } finally { delete process.env.DEEPDESK_EVAL_DELAY_MS; }
    const files = {};
    // enough that the first running report (after about a second) comes long before the end
    for (let i = 0; i < 20000; i++) files[`many/${['red', 'green', 'blue'][i % 3]}/${i}.ppm`] = noisyPpm(8, 8, COLOURS[['red', 'green', 'blue'][i % 3]], i + 1);
    const up = await raw(server, 'POST', '/api/v1/uploads?name=many.tar', tar(files));
    assert.equal(up.status, 201, up.text);
    const c = await server.api('POST', '/api/v1/evaluations', { model: modelId, source: { upload: up.body.upload.id }, batch_size: 1 });
    assert.equal(c.status, 202, JSON.stringify(c.body));
    const id = c.body.job.id;
    // the first running report, then stop
    for (let i = 0; ; i++) {
      const g = (await server.api('GET', `/api/v1/evaluations/${id}`)).body.evaluation;
      if (g.partial && g.partial.kind === 'partial') break;
      assert.ok(i < 600 && g.state !== 'done' && g.state !== 'error', `no running report: ${JSON.stringify(g.state)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ab = await server.api('POST', `/api/v1/jobs/${id}/abort`);
    assert.equal(ab.status, 202, JSON.stringify(ab.body));
    const st = await waitState(server, id, ['aborted', 'done', 'error'], 60000);
    assert.equal(st.state, 'aborted', st.error);
    const m = (await server.api('GET', `/api/v1/evaluations/${id}`)).body.evaluation.metrics;
    assert.equal(m.complete, false);
    assert.equal(m.total, 20000);
    assert.ok(m.count > 0 && m.count < 20000, `count ${m.count}`);
    const cj = (await server.api('GET', `/api/v1/evaluations/${id}/confusion`)).body;
    assert.equal(cj.matrix.flat().reduce((a, b) => a + b, 0), m.labelled);
    const rows = (await raw(server, 'GET', `/api/v1/evaluations/${id}/results.json`)).body;
    assert.equal(rows.length, m.count + m.errors);
  });

  test('bad params: each named, nothing created', async () => {
    const before = (await server.api('GET', '/api/v1/jobs?limit=1')).body.total;
    const src = { dataset: dsId, split: 'val' };
    const cases = [
      [{ source: src }, 400, /^model/],
      [{ model: 'x', source: src }, 400, /^model/],
      [{ model: dsId, source: src }, 400, /model/],
      [{ model: modelId }, 400, /^source/],
      [{ model: modelId, source: {} }, 400, /^source/],
      [{ model: modelId, source: { dataset: dsId, split: 'holdout' } }, 400, /source\.split/],
      [{ model: modelId, source: { dataset: modelId, split: 'val' } }, 400, /source\.dataset/],
      [{ model: modelId, source: { dataset: dsId, split: 'test' } }, 400, /source\.split.*no test split/],
      [{ model: modelId, source: { upload: 'abc' } }, 400, /source\.upload/],
      [{ model: modelId, source: { file: '/etc/passwd' } }, 400, /source\.file/],
      [{ model: modelId, source: src, top_n: -1 }, 400, /top_n/],
      [{ model: modelId, source: src, batch_size: 0 }, 400, /batch_size/],
      [{ model: modelId, source: src, batch_size: 2.5 }, 400, /batch_size/],
      [{ model: modelId, source: src, bogus: 1 }, 400, /bogus/],
      [{ model: modelId, source: src, snapshot: 'abc' }, 400, /snapshot/],
      [{ model: modelId, source: src, snapshot: 7 }, 404, /epoch 7/],
      [{ model: 999999, source: src }, 400, /model/],
    ];
    for (const [body, status, re] of cases) {
      const r = await server.api('POST', '/api/v1/evaluations', body);
      assertError(r, status, undefined, re);
    }
    assertError(await raw(server, 'POST', '/api/v1/evaluations', 'not json', 'application/json'), 400, 'invalid');
    assert.equal((await server.api('GET', '/api/v1/jobs?limit=1')).body.total, before, 'nothing was created');
  });

  test('a deleted snapshot is 404; a model with no snapshot is 409', async () => {
    const m = await server.api('POST', '/api/v1/models', {
      name: 'short', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1, solver: { base_lr: 0.05 },
    });
    assert.equal(m.status, 202);
    const id = m.body.job.id;
    assert.equal((await waitState(server, id, ['done', 'error'], 60000)).state, 'done');
    const dir = join(server.dataDir, 'jobs', String(id));
    unlinkSync(join(dir, 'snapshot_epoch_1.safetensors'));
    assertError(await server.api('POST', '/api/v1/evaluations', { model: id, snapshot: '1', source: { dataset: dsId } }),
      404, 'not_found', /epoch 1/);
    for (const f of readdirSync(dir)) if (f.startsWith('snapshot_epoch_')) unlinkSync(join(dir, f));
    assertError(await server.api('POST', '/api/v1/evaluations', { model: id, source: { dataset: dsId } }),
      409, 'conflict', /no snapshot yet/);
  });

  test('results before the end and routes of other kinds', async () => {
    assertError(await server.api('GET', '/api/v1/evaluations/999999'), 404, 'not_found');
    assertError(await server.api('GET', `/api/v1/evaluations/${dsId}/results.csv`), 404, 'not_found');
    assertError(await server.api('GET', '/api/v1/evaluations'), 405, 'method_not_allowed');
  });
});
