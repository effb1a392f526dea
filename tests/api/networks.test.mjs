// networks.test.mjs — what the new-model page asks while a learner edits: the
// standard networks; a network checked as training sees it (shapes and parameter
// counts, or the first error with its line, column and layer), alone or against a
// dataset it may not fit (gray images, a crop too large, no loss, no Softmax); the
// network drawn by Graphviz as SVG (one node per layer); the learning-rate curve of
// every policy against hand-computed values; the CPU and memory of a running
// worker; and every malformed request refused with a 400 that names the field.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, assertError, assertSchema, loadOpenApi, createJob, killTrackedPids, trackPid, writeColourFolders, folderDataset, endServer,
} from './helpers.mjs';


const COLOURS = { dark: [30, 30, 30], mid: [128, 128, 128], light: [230, 230, 230] };

/* One InnerProduct on the pixels, with a Softmax for deploy: valid on any images. */
const TINY = `name: "tiny"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" include { stage: "deploy" } }
`;

/** The titles of the SVG's nodes and its edge count, read by a real XML parser. */
function svgNodes(svg) {
  const out = execFileSync('python3', ['-c', `
import sys, json, xml.etree.ElementTree as E
root = E.fromstring(sys.stdin.buffer.read())
ns = '{http://www.w3.org/2000/svg}'
assert root.tag == ns + 'svg', root.tag
gs = list(root.iter(ns + 'g'))
title = lambda g: g.find(ns + 'title').text
print(json.dumps({'nodes': [title(g) for g in gs if g.get('class') == 'node'],
                  'edges': [title(g) for g in gs if g.get('class') == 'edge']}))
`], { input: svg });
  return JSON.parse(out);
}

const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

describe('networks', () => {
  let server, work, doc, gray, testJob;
  const check = (body) => server.api('POST', '/api/v1/networks/check', body);

  before(async () => {
    doc = loadOpenApi();
    work = mkdtempSync(join(tmpdir(), 'deepdesk-networks-'));
    writeColourFolders(join(work, 'shades'), COLOURS, 8);
    server = await startServer({ args: ['--data-root', work] });
    gray = await folderDataset(server, join(work, 'shades'), { name: 'shades', options: { channels: 1 } });
    testJob = await createJob(server, { steps: 1, step_ms: 1 });
    await waitState(server, testJob.id, 'done');
  });
  after(() => endServer(server, work));

  test('GET /networks lists the standard networks with their text, each of which checks valid', async () => {
    const r = await server.api('GET', '/api/v1/networks');
    assert.equal(r.status, 200);
    assertSchema(doc, 'NetworkList', r.body);
    assert.deepEqual(r.body.standard.map((s) => s.name), ['lenet', 'alexnet', 'googlenet', 'resnet_small']);
    const lenet = r.body.standard[0];
    assert.equal(lenet.title, 'LeNet');
    assert.match(lenet.description, /28x28/);
    assert.deepEqual(lenet.input, { c: 1, h: 28, w: 28 });
    for (const s of r.body.standard) {
      assert.match(s.text, /layer \{/);
      const c = await check({ prototxt: s.text, input: `${s.input.c}x${s.input.h}x${s.input.w}`, classes: s.classes });
      assert.equal(c.status, 200);
      assert.equal(c.body.valid, true, `${s.name}: ${JSON.stringify(c.body.error)}`);
    }
  });

  test('a standard network checks valid: every layer with its output shapes and parameters', async () => {
    const r = await check({ standard: 'lenet' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(doc, 'NetworkCheck', r.body);
    const b = r.body;
    assert.equal(b.valid, true);
    assert.equal(b.stage, 'train');
    assert.deepEqual(b.input, { n: 64, c: 1, h: 28, w: 28, classes: 10, crop: null });
    assert.equal(b.layers.length, 10);
    const byName = Object.fromEntries(b.layers.map((l) => [l.name, l]));
    assert.deepEqual(byName.conv1.tops, [{ name: 'conv1', shape: [64, 20, 24, 24] }]);
    assert.equal(byName.conv1.type, 'Convolution');
    assert.equal(byName.conv1.params, 520);
    assert.deepEqual(byName.ip2.tops[0].shape, [64, 10]);
    assert.deepEqual(byName.loss.tops[0].shape, []);
    assert.deepEqual(b.layers[0].tops.map((t) => t.name), ['data', 'label']);
    assert.equal(b.params, 431080);
    assert.equal(b.layers.reduce((s, l) => s + l.params, 0), b.params);
    // the other stages, a batch, another input and class count
    const d = await check({ standard: 'lenet', stage: 'deploy' });
    assert.equal(d.body.stage, 'deploy');
    assert.equal(d.body.input.n, 1);
    assert.ok(d.body.layers.some((l) => l.type === 'Softmax'));
    const v = await check({ standard: 'lenet', stage: 'val', batch_size: 5, input: '1x32x32', classes: 3 });
    assert.equal(v.body.valid, true);
    assert.deepEqual(v.body.input, { n: 5, c: 1, h: 32, w: 32, classes: 3, crop: null });
    assert.deepEqual(v.body.layers.find((l) => l.name === 'ip2').tops[0].shape, [5, 3]);
    assert.ok(v.body.layers.some((l) => l.type === 'Accuracy'));
    // AlexNet's crop: 227 of the 256x256 images it is meant for, or the one asked
    const a = await check({ standard: 'alexnet', crop_size: 200, batch_size: 2 });
    assert.equal(a.body.input.crop, 200);
    assert.deepEqual(a.body.layers[0].tops[0].shape, [2, 3, 200, 200]);
  });

  test('a custom network without an input shape is checked on 3x224x224 (or its own Input shape) with 10 classes', async () => {
    const r = await check({ prototxt: TINY });
    assert.equal(r.body.valid, true, JSON.stringify(r.body));
    assert.deepEqual(r.body.input, { n: 4, c: 3, h: 224, w: 224, classes: 10, crop: null });
    assert.deepEqual(r.body.layers.find((l) => l.name === 'ip').tops[0].shape, [4, 10]);
    // an in-place layer shows the blob it rewrites
    assert.deepEqual(r.body.layers.find((l) => l.name === 'relu').tops, [{ name: 'ip', shape: [4, 10] }]);
    assert.equal(r.body.layers.find((l) => l.name === 'ip').line, 6);
    const own = `layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 12 dim: 12 } } }\n${TINY}`;
    const o = await check({ prototxt: own });
    assert.deepEqual([o.body.input.c, o.body.input.h, o.body.input.w], [1, 12, 12]);
  });

  test('a network that does not parse: the parser\'s line, column and layer', async () => {
    const text = TINY.replace('layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }',
      'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"\n  inner_product_param { num_outputs: 3 } }');
    const r = await check({ prototxt: text });
    assert.equal(r.status, 200);
    assertSchema(doc, 'NetworkCheck', r.body);
    assert.equal(r.body.valid, false);
    const e = r.body.error;
    assert.equal(e.line, 7);
    assert.equal(e.col, text.split('\n')[6].indexOf('num_outputs') + 1);
    assert.equal(e.layer, 'ip');
    assert.match(e.message, /^7:\d+: layer 'ip': unknown field 'num_outputs'/);
    // a syntax error: a place, no layer
    const s = await check({ prototxt: 'layer {' });
    assert.deepEqual(s.body, { valid: false, error: { message: "1:8: unexpected end of input: the '{' at 1:7 is not closed", line: 1, col: 8 } });
  });

  test('a network that parses but cannot be built: the layer, its line, the stage and a fix', async () => {
    const conv = TINY.replace('layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }',
      'layer { name: "conv" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 kernel_size: 9 } }\n' +
      'layer { name: "ip" type: "InnerProduct" bottom: "c" top: "ip" }');
    const r = await check({ prototxt: conv, input: '1x8x8' });
    assert.equal(r.body.valid, false);
    assert.deepEqual({ ...r.body.error, message: undefined },
      { message: undefined, line: 6, col: 1, layer: 'conv', stage: 'train' });
    assert.match(r.body.error.message, /^6:1: layer 'conv': kernel 9x9 is larger than its input 8x8 \(padded by 0, 0\): use a smaller kernel_size or more pad/);
    // no Softmax in deploy: refused whatever stage is asked for, naming where to add it
    const noSoftmax = TINY.replace(/layer \{ name: "prob".*\n/, '');
    const d = await check({ prototxt: noSoftmax });
    assert.equal(d.body.valid, false);
    assert.equal(d.body.error.stage, 'deploy');
    assert.equal(d.body.error.message, 'the deploy stage has no Softmax layer, which DIGITS requires to turn scores into ' +
      'probabilities: add one after layer \'relu\' (bottom: "ip") with include { stage: "deploy" }');
    // no loss in train
    const noLoss = TINY.replace(/layer \{ name: "loss".*\n/, '');
    const l = await check({ prototxt: noLoss, stage: 'deploy' });
    assert.equal(l.body.valid, false);
    assert.equal(l.body.error.stage, 'train');
    assert.match(l.body.error.message, /no loss layer.*add a SoftmaxWithLoss layer after layer 'relu' \(bottom: "ip" bottom: "label"\)/);
  });

  test('a network that does not fit the dataset is refused with the layer and the fix', async () => {
    // fits: the gray 8x8 images, 3 classes
    const ok = await check({ prototxt: TINY, dataset: gray });
    assert.equal(ok.status, 200);
    assertSchema(doc, 'NetworkCheck', ok.body);
    assert.equal(ok.body.valid, true, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.input, { n: 4, c: 1, h: 8, w: 8, classes: 3, crop: null });
    assert.deepEqual(ok.body.layers.find((l) => l.name === 'ip').tops[0].shape, [4, 3]);
    // a colour network's three mean values on gray images
    const colour = TINY.replaceAll('transform_param { scale: 0.0039 }', 'transform_param { mean_value: 104 mean_value: 117 mean_value: 123 }');
    const mv = await check({ prototxt: colour, dataset: gray });
    assert.equal(mv.body.valid, false);
    assert.equal(mv.body.error.layer, 'train-data');
    assert.equal(mv.body.error.line, 2);
    assert.equal(mv.body.error.col, 1);
    assert.match(mv.body.error.message, /3 mean_value entries but the images have 1 channel: give one mean_value for all channels, or exactly 1$/);
    // LeNet's second convolution on 8x8 images
    const le = await check({ standard: 'lenet', dataset: gray });
    assert.equal(le.body.valid, false);
    assert.equal(le.body.error.layer, 'conv2');
    assert.match(le.body.error.message, /kernel 5x5 is larger than its input 2x2.*dataset of larger images/);
    // a crop larger than the images
    const cr = await check({ prototxt: TINY, dataset: gray, crop_size: 16 });
    assert.equal(cr.body.valid, false);
    assert.equal(cr.body.error.message, 'crop size 16 does not fit the 8x8 images: choose a crop size of at most 8, or build the dataset with larger images');
    // no Softmax for deploy, with the dataset too
    const ns = await check({ prototxt: TINY.replace(/layer \{ name: "prob".*\n/, ''), dataset: gray });
    assert.equal(ns.body.valid, false);
    assert.equal(ns.body.error.stage, 'deploy');
  });

  test('a model\'s network: checked on the model\'s own input, or against a dataset', async () => {
    const m = await server.api('POST', '/api/v1/models', { name: 'tiny', dataset: gray, network: { prototxt: TINY }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const end = await waitState(server, m.body.job.id, ['done', 'error'], 60000);
    assert.equal(end.state, 'done', end.error);
    const r = await check({ model: m.body.job.id });
    assert.equal(r.body.valid, true, JSON.stringify(r.body));
    assert.deepEqual(r.body.input, { n: 4, c: 1, h: 8, w: 8, classes: 3, crop: null });
    const d = await check({ model: m.body.job.id, dataset: gray, stage: 'deploy' });
    assert.equal(d.body.valid, true);
    assert.deepEqual(d.body.layers[0].tops[0].shape, [1, 1, 8, 8]);
    const v = await server.api('POST', '/api/v1/networks/visualize', { model: m.body.job.id });
    assert.equal(v.status, 200);
    assertError(await check({ model: gray }), 400, 'invalid', /model: job \d+ is a dataset job, not a model/);
  });

  test('visualize: an SVG drawn by Graphviz with one node per layer', async () => {
    const res = await fetch(server.url + '/api/v1/networks/visualize', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ standard: 'lenet' }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'image/svg+xml');
    const svg = await res.text();
    assert.match(svg, /Generated by graphviz/);
    const { nodes, edges } = svgNodes(svg);
    const layers = (await check({ standard: 'lenet' })).body.layers.map((l) => l.name);
    assert.deepEqual(nodes.sort(), [...layers].sort());
    assert.equal(edges.length, 10, 'one edge per bottom of each layer');
    assert.match(svg, /64x20x24x24/, 'output shapes in the boxes');
    // in-place layers stack: ip -> relu -> loss, not ip -> loss
    const t = await fetch(server.url + '/api/v1/networks/visualize', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prototxt: TINY, dataset: gray }),
    });
    const tiny = svgNodes(await t.text());
    assert.deepEqual(tiny.nodes.sort(), ['ip', 'loss', 'relu', 'train-data']);
    assert.ok(tiny.edges.includes('relu&#45;&gt;loss') || tiny.edges.includes('relu->loss'), JSON.stringify(tiny.edges));
    assert.ok(!tiny.edges.some((e) => /^ip(&#45;&gt;|->)loss$/.test(e)), JSON.stringify(tiny.edges));
    // the deploy stage of GoogLeNet, and hostile names escaped
    const g = await server.api('POST', '/api/v1/networks/visualize', { standard: 'googlenet', stage: 'deploy' });
    assert.equal(g.status, 200);
    const hostile = TINY.replace('name: "ip"', String.raw`name: "<script>alert(1)</script>&'\""`);
    const h = await fetch(server.url + '/api/v1/networks/visualize', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prototxt: hostile }),
    });
    assert.equal(h.status, 200);
    const hs = await h.text();
    assert.ok(!hs.includes('<script'), 'no raw markup from a name');
    assert.ok(svgNodes(hs).nodes.includes('<script>alert(1)</script>&\'"'));
    // several at once: the drawing is serialised, each answer whole
    const many = await Promise.all(Array.from({ length: 6 }, (_, i) =>
      server.api('POST', '/api/v1/networks/visualize', { standard: i % 2 ? 'lenet' : 'resnet_small' })));
    for (const m of many) {
      assert.equal(m.status, 200);
      assert.match(m.body, /<\/svg>\s*$/);
    }
  });

  test('visualize: a network that does not parse or build is a 400 with its line:col', async () => {
    assertError(await server.api('POST', '/api/v1/networks/visualize', { prototxt: 'layer {' }), 400, 'invalid', /^1:8: unexpected end of input/);
    assertError(await server.api('POST', '/api/v1/networks/visualize', { standard: 'lenet', dataset: gray }), 400, 'invalid',
      /^\d+:1: layer 'conv2': kernel 5x5 is larger/);
    assertError(await server.api('POST', '/api/v1/networks/visualize', { prototxt: TINY.replace(/layer \{ name: "prob".*\n/, ''), stage: 'deploy' }),
      400, 'invalid', /no Softmax layer.*\(deploy stage\)$/);
    // but a train stage draws without a deploy Softmax
    const ok = await server.api('POST', '/api/v1/networks/visualize', { prototxt: TINY.replace(/layer \{ name: "prob".*\n/, '') });
    assert.equal(ok.status, 200);
  });

  test('LR preview: each policy against hand-computed values, with the exact step positions', async () => {
    const lr = async (solver, epochs, ipe) => {
      const r = await server.api('POST', '/api/v1/lr-preview', { solver, epochs, ...(ipe ? { iterations_per_epoch: ipe } : {}) });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assertSchema(doc, 'LrPreview', r.body);
      const at = (it) => {
        const p = r.body.points.find((q) => q.iteration === it);
        assert.ok(p, `a point at iteration ${it}`);
        close(p.epoch, it / r.body.iterations_per_epoch, `epoch at ${it}`);
        return p.lr;
      };
      const its = r.body.points.map((p) => p.iteration);
      assert.deepEqual(its, [...new Set(its)].sort((a, b) => a - b), 'increasing, no repeats');
      assert.equal(its[0], 0);
      assert.equal(its.at(-1), r.body.iterations - 1);
      return { ...r.body, at };
    };
    // step (DIGITS' default): 3 epochs of 100 = 300 iterations, stepsize 33% = 99
    let p = await lr({}, 3);
    assert.equal(p.policy, 'step');
    assert.equal(p.iterations, 300);
    assert.ok(p.points.length >= 200 && p.points.length <= 206, `${p.points.length} points`);
    close(p.at(98), 0.01, 'step 98'); close(p.at(99), 0.001, 'step 99');
    close(p.at(197), 0.001, 'step 197'); close(p.at(198), 0.0001, 'step 198'); close(p.at(297), 1e-5, 'step 297');
    // many iterations: about 200 evenly spaced, plus both sides of each step
    p = await lr({ base_lr: 0.1, lr_policy: { policy: 'step', step_pct: 25, gamma: 0.5 } }, 10, 1000);
    assert.equal(p.iterations, 10000);
    assert.ok(p.points.length <= 206 && p.points.length >= 200, `${p.points.length} points`);
    close(p.at(2499), 0.1, 'step 2499'); close(p.at(2500), 0.05, 'step 2500');
    close(p.at(4999), 0.05, 'step 4999'); close(p.at(5000), 0.025, 'step 5000'); close(p.at(7500), 0.0125, 'step 7500');
    // multistep: at 50% and 85% (defaults), gamma 0.5
    p = await lr({ lr_policy: 'multistep' }, 2, 50);
    assert.equal(p.policy, 'multistep');
    close(p.at(49), 0.01, 'ms 49'); close(p.at(50), 0.005, 'ms 50'); close(p.at(84), 0.005, 'ms 84'); close(p.at(85), 0.0025, 'ms 85');
    p = await lr({ base_lr: 0.2, lr_policy: { policy: 'multistep', multistep_pct: [10, 30], gamma: 0.1 } }, 100, 1000);
    close(p.at(9999), 0.2, 'ms 9999'); close(p.at(10000), 0.02, 'ms 10000'); close(p.at(29999), 0.02, 'ms 29999'); close(p.at(30000), 0.002, 'ms 30000');
    // fixed
    p = await lr({ base_lr: 0.05, lr_policy: 'fixed' }, 4);
    assert.ok(p.points.every((q) => q.lr === 0.05));
    // exp: base * gamma^iter (default gamma 0.95)
    p = await lr({ lr_policy: 'exp' }, 1, 100);
    close(p.at(0), 0.01, 'exp 0'); close(p.at(10), 0.01 * 0.95 ** 10, 'exp 10'); close(p.at(99), 0.01 * 0.95 ** 99, 'exp 99');
    // inv: base * (1 + gamma iter)^-power (defaults 0.1, 0.5)
    p = await lr({ lr_policy: 'inv' }, 2, 100);
    close(p.at(30), 0.01 * (1 + 0.1 * 30) ** -0.5, 'inv 30'); close(p.at(199), 0.01 * (1 + 0.1 * 199) ** -0.5, 'inv 199');
    // poly: base * (1 - iter/max_iter)^power, max_iter = all iterations (default power 3)
    p = await lr({ lr_policy: { policy: 'poly', power: 2 } }, 2, 100);
    close(p.at(50), 0.01 * (1 - 50 / 200) ** 2, 'poly 50'); close(p.at(199), 0.01 * (1 - 199 / 200) ** 2, 'poly 199');
    // sigmoid: base / (1 + exp(-gamma (iter - stepsize))), stepsize = 50% (defaults gamma 0.1)
    p = await lr({ lr_policy: 'sigmoid' }, 2, 100);
    close(p.at(100), 0.005, 'sigmoid centre'); close(p.at(90), 0.01 / (1 + Math.exp(-0.1 * (90 - 100))), 'sigmoid 90');
    p = await lr({ lr_policy: { policy: 'sigmoid', step_pct: 25, gamma: 0.05 } }, 4, 50);
    close(p.at(50), 0.005, 'sigmoid centre 25%'); close(p.at(150), 0.01 / (1 + Math.exp(-0.05 * 100)), 'sigmoid 150');
    // the defaults: 30 epochs of 100 iterations
    p = await lr(undefined);
    assert.equal(p.iterations, 3000);
  });

  test('resources of a running job, 409 once it has ended, 404 for none', async () => {
    const job = await createJob(server, { steps: 1000, step_ms: 20 });
    const running = await waitState(server, job.id, 'running');
    trackPid(running.pid);
    const r = await server.api('GET', `/api/v1/jobs/${job.id}/resources`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(doc, 'JobResources', r.body);
    assert.equal(r.body.state, 'running');
    assert.ok(r.body.rss_bytes > 1 << 20, `rss ${r.body.rss_bytes}`);
    assert.ok(r.body.threads >= 1);
    assert.ok(r.body.cpu_pct >= 0 && r.body.cpu_pct < 200, `cpu ${r.body.cpu_pct}`);
    assert.ok(r.body.interval_ms >= 150, 'a first call samples for 200 ms');
    assert.deepEqual(r.body.gpus, []);
    await new Promise((res) => setTimeout(res, 150));
    const again = await server.api('GET', `/api/v1/jobs/${job.id}/resources`);
    assert.equal(again.status, 200);
    assert.ok(again.body.interval_ms >= 100, 'the next measures since the last');
    assert.equal((await server.api('POST', `/api/v1/jobs/${job.id}/abort`)).status, 202);
    await waitState(server, job.id, 'aborted');
    assertError(await server.api('GET', `/api/v1/jobs/${job.id}/resources`), 409, 'conflict', /is aborted/);
    assertError(await server.api('GET', `/api/v1/jobs/${testJob.id}/resources`), 409, 'conflict', /is done/);
    assertError(await server.api('GET', '/api/v1/jobs/999999/resources'), 404, 'not_found');
  });

  test('malformed requests: 400 naming what is wrong', async () => {
    const bad = [
      ['/api/v1/networks/check', '{', /malformed JSON/],
      ['/api/v1/networks/check', {}, /exactly one of "prototxt"/],
      ['/api/v1/networks/check', { standard: 'lenet', prototxt: TINY }, /exactly one of/],
      ['/api/v1/networks/check', { standard: 'lenet', colour: 1 }, /^colour: unknown field/],
      ['/api/v1/networks/check', { standard: 'vgg' }, /standard: must be one of lenet, alexnet, googlenet, resnet_small/],
      ['/api/v1/networks/check', { prototxt: '' }, /prototxt: must be/],
      ['/api/v1/networks/check', { prototxt: 12 }, /prototxt: must be/],
      ['/api/v1/networks/check', { standard: 'lenet', input: '3x224' }, /input: must be the image shape as "CxHxW"/],
      ['/api/v1/networks/check', { standard: 'lenet', input: '0x2x2' }, /input:/],
      ['/api/v1/networks/check', { standard: 'lenet', classes: 0 }, /classes: must be an integer/],
      ['/api/v1/networks/check', { standard: 'lenet', stage: 'test' }, /stage: must be train, val or deploy/],
      ['/api/v1/networks/check', { standard: 'lenet', batch_size: 1.5 }, /batch_size: must be an integer/],
      ['/api/v1/networks/check', { standard: 'lenet', crop_size: -1 }, /crop_size:/],
      ['/api/v1/networks/check', { standard: 'lenet', dataset: 999999 }, /dataset: there is no job 999999/],
      ['/api/v1/networks/check', { standard: 'lenet', dataset: 'one' }, /dataset: must be a dataset job's id/],
      ['/api/v1/networks/check', { standard: 'lenet', dataset: () => testJob.id }, /dataset: job \d+ is a test job, not a dataset/],
      ['/api/v1/networks/check', { standard: 'lenet', dataset: () => gray, input: '1x8x8' }, /input: not with "dataset"/],
      ['/api/v1/networks/check', { model: 999999 }, /model: there is no job 999999/],
      ['/api/v1/networks/visualize', { standard: 'lenet', extra: true }, /extra: unknown field/],
      ['/api/v1/networks/visualize', '[1]', /must be a JSON object/],
      ['/api/v1/lr-preview', { epochs: 0 }, /epochs: must be an integer from 1 to 10000/],
      ['/api/v1/lr-preview', { iterations_per_epoch: 0 }, /iterations_per_epoch:/],
      ['/api/v1/lr-preview', { epochs: 10000, iterations_per_epoch: 1000000 }, /too many/],
      ['/api/v1/lr-preview', { solver: 'sgd' }, /solver: must be an object/],
      ['/api/v1/lr-preview', { solver: { type: 'lbfgs' } }, /solver.type: must be one of/],
      ['/api/v1/lr-preview', { solver: { lr_policy: 'cosine' } }, /solver.lr_policy.policy: must be one of/],
      ['/api/v1/lr-preview', { solver: { lr_policy: { policy: 'fixed', gamma: 0.1 } } }, /the fixed policy does not use it/],
      ['/api/v1/lr-preview', { solver: { base_lr: 0 } }, /solver.base_lr/],
      ['/api/v1/lr-preview', { epochs: 3, steps: 1 }, /steps: unknown field/],
    ];
    for (const [path, body0, re] of bad) {
      const body = typeof body0 === 'object' ? Object.fromEntries(Object.entries(body0).map(([k, v]) => [k, typeof v === 'function' ? v() : v])) : body0;
      const r = await server.api('POST', path, body);
      assertError(r, 400, 'invalid', re);
      assertSchema(doc, 'Error', r.body);
    }
    assertError(await server.api('GET', '/api/v1/networks/check'), 405, 'method_not_allowed');
    assertError(await server.api('POST', '/api/v1/networks'), 405, 'method_not_allowed');
    assertError(await server.api('GET', '/api/v1/lr-preview'), 405, 'method_not_allowed');
  });
});
