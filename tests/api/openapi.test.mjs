// openapi.test.mjs — app/api/openapi.json describes exactly the routes of the server's
// one route table (API_ROUTES in app/api/api.h, printed by `deepdesk routes
// --permissions`), with the security each route's permission means, is served as
// built, is a well-formed OpenAPI 3.0 document, and its schemas are true to what
// the server answers.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import {
  BIN, SHIPPED_BIN, OPENAPI_FILE, loadOpenApi, startServer, waitState, createJob,
  allEvents, assertSchema, schemaErrors, wsConnect, killTrackedPids, trackPid, getJob,
} from './helpers.mjs';
import { need } from '../lib/need.mjs';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// 'METHOD PATH' → the permission the route table gives it ('public', 'user', …)
function routeTable(bin) {
  const out = execFileSync(bin, ['routes', '--permissions'], { encoding: 'utf8' });
  return new Map(out.split('\n').filter(Boolean).map((l) => {
    const [method, path, perm] = l.trim().split(/\s+/);
    return [`${method.toUpperCase()} ${path}`, perm];
  }));
}

function registeredRoutes(bin) {
  return [...routeTable(bin).keys()];
}

function documentedRoutes(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const m of METHODS) if (item[m]) out.push(`${m.toUpperCase()} ${path}`);
  }
  return out;
}

describe('openapi', () => {
  let server, doc;
  before(async () => {
    doc = loadOpenApi();
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
    server?.cleanup();
    killTrackedPids();
  });

  test('every registered route is documented, with its method', () => {
    const routes = registeredRoutes(BIN);
    assert.ok(routes.length >= 11, `routes: ${routes}`);
    const documented = new Set(documentedRoutes(doc));
    const missing = routes.filter((r) => !documented.has(r));
    assert.deepEqual(missing, [], 'routes missing from app/api/openapi.json');
  });

  test('every documented path and method is a registered route', () => {
    const routes = new Set(registeredRoutes(BIN));
    const extra = documentedRoutes(doc).filter((r) => !routes.has(r));
    assert.deepEqual(extra, [], 'documented but not registered');
  });

  test('the shipped build registers the same routes', () => {
    assert.deepEqual(registeredRoutes(SHIPPED_BIN).sort(), registeredRoutes(BIN).sort());
    assert.deepEqual([...routeTable(SHIPPED_BIN)].sort(), [...routeTable(BIN)].sort(), 'with the same permissions');
  });

  test('the security of each operation is its route\'s permission, both ways', () => {
    const table = routeTable(BIN);
    const known = ['public', 'user', 'admin', 'job_read', 'job_write', 'instructor', 'class_read', 'class_write'];
    for (const [route, perm] of table) assert.ok(known.includes(perm), `${route}: permission ${perm}`);
    assert.ok(Array.isArray(doc.security) && doc.security.length > 0, 'the document asks for a login by default');
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const m of METHODS) {
        if (!item[m]) continue;
        const route = `${m.toUpperCase()} ${path}`;
        const security = item[m].security ?? doc.security;
        // OpenAPI: an empty list, or an empty requirement in it, is "no login needed"
        const open = security.length === 0 || security.some((req) => Object.keys(req).length === 0);
        assert.equal(open, table.get(route) === 'public',
          `${route}: openapi.json says ${open ? 'no login' : 'a login'}, the route table "${table.get(route)}"`);
      }
    }
    const publicRoutes = [...table].filter(([, p]) => p === 'public').map(([r]) => r);
    assert.ok(publicRoutes.length > 0 && publicRoutes.length < table.size / 4, `public: ${publicRoutes}`);
  });

  test('GET /api/v1/openapi.json is the file, byte for byte', async () => {
    const res = await fetch(server.url + '/api/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^application\/json/);
    const text = await res.text();
    assert.equal(text, readFileSync(OPENAPI_FILE, 'utf8'));
    assert.deepEqual(JSON.parse(text), doc);
    const info = await server.api('GET', '/api/v1/info');
    assert.equal(doc.info.version, info.body.version, 'the document\'s version is the server\'s');
  });

  test('it is a well-formed OpenAPI 3.0 document', () => {
    assert.match(doc.openapi, /^3\.0\.\d+$/);
    assert.equal(typeof doc.info?.title, 'string');
    assert.equal(typeof doc.info?.version, 'string');
    assert.equal(typeof doc.paths, 'object');
    // every $ref resolves
    const refs = [];
    (function walk(o) {
      if (Array.isArray(o)) return o.forEach(walk);
      if (o && typeof o === 'object') {
        if (typeof o.$ref === 'string') refs.push(o.$ref);
        Object.values(o).forEach(walk);
      }
    })(doc);
    assert.ok(refs.length > 10);
    for (const ref of refs) {
      assert.match(ref, /^#\/components\/(schemas|parameters|responses)\/[A-Za-z0-9_]+$/, ref);
      const target = ref.slice(2).split('/').reduce((o, k) => o?.[k], doc);
      assert.ok(target, `${ref} resolves`);
    }
    const opIds = new Set();
    for (const [path, item] of Object.entries(doc.paths)) {
      assert.match(path, /^\/api\/v1\//);
      for (const m of METHODS) {
        const op = item[m];
        if (!op) continue;
        const where = `${m.toUpperCase()} ${path}`;
        assert.equal(typeof op.operationId, 'string', `${where}: operationId`);
        assert.ok(!opIds.has(op.operationId), `${where}: operationId ${op.operationId} is unique`);
        opIds.add(op.operationId);
        assert.equal(typeof op.summary, 'string', `${where}: summary`);
        const statuses = Object.keys(op.responses || {});
        assert.ok(statuses.some((s) => /^(1|2)\d\d$/.test(s)), `${where}: a success response`);
        for (const s of statuses) {
          assert.match(s, /^[1-5]\d\d$/, `${where}: status ${s}`);
          const r = op.responses[s].$ref
            ? op.responses[s].$ref.slice(2).split('/').reduce((o, k) => o?.[k], doc) : op.responses[s];
          assert.equal(typeof r.description, 'string', `${where} ${s}: description`);
          if (s >= '400') {
            assert.deepEqual(r.content?.['application/json']?.schema, { $ref: '#/components/schemas/Error' },
              `${where} ${s}: the Error schema`);
          }
        }
        // path parameters: every {name} in the template is declared, in the path item or the operation
        const params = [...(item.parameters || []), ...(op.parameters || [])].map((p) =>
          (p.$ref ? p.$ref.slice(2).split('/').reduce((o, k) => o?.[k], doc) : p));
        for (const [, name] of path.matchAll(/\{(\w+)\}/g)) {
          assert.ok(params.some((p) => p.in === 'path' && p.name === name && p.required === true),
            `${where}: path parameter ${name}`);
        }
        for (const p of params) {
          assert.ok(['path', 'query', 'header', 'cookie'].includes(p.in), `${where}: parameter ${p.name} in`);
          assert.ok(p.schema, `${where}: parameter ${p.name} schema`);
        }
        if (['post', 'patch', 'put'].includes(m) && op.requestBody) {
          for (const [type, c] of Object.entries(op.requestBody.content)) assert.ok(c.schema, `${where}: ${type} body schema`);
        }
      }
    }
    // routes under /api/v1 all answer 405 and 503; documented on each REST operation
    for (const [path, item] of Object.entries(doc.paths)) {
      if (path === '/api/v1/ws') continue;
      for (const m of METHODS) {
        if (item[m]) {
          for (const s of ['405', '500', '503']) assert.ok(item[m].responses[s], `${m} ${path}: ${s}`);
        }
      }
    }
    // the error codes of api.md
    assert.deepEqual(doc.components.schemas.Error.properties.error.properties.code.enum.sort(),
      ['conflict', 'disk_full', 'forbidden', 'internal', 'invalid', 'method_not_allowed', 'not_found', 'rate_limited', 'timeout', 'too_large', 'unauthenticated', 'unavailable']);
    // the WebSocket protocol is written down
    const ws = doc.paths['/api/v1/ws'].get.description;
    for (const word of ['subscribe', 'unsubscribe', 'subscribed', '"type":"job"', '"type":"events"', '"type":"deleted"', '"type":"error"', 'seq']) {
      assert.ok(ws.includes(word), `ws description mentions ${word}`);
    }
  });

  test('the schemas are true to what the server answers', async () => {
    const info = await server.api('GET', '/api/v1/info');
    assertSchema(doc, 'Info', info.body);

    const parent = await createJob(server, { steps: 3, step_ms: 10 }, { name: 'parent' });
    const created = await server.api('POST', '/api/v1/jobs',
      { kind: 'test', name: 'child', params: { steps: 4, step_ms: 10 }, parents: [parent.id], resources: { cpu_slots: 1 } });
    assert.equal(created.status, 202);
    assertSchema(doc, 'JobResponse', created.body);
    await waitState(server, created.body.job.id, 'done');
    const failing = await createJob(server, { steps: 3, step_ms: 10, crash_at: 1 });
    await waitState(server, failing.id, 'error');

    for (const id of [parent.id, created.body.job.id, failing.id]) {
      const r = await server.api('GET', `/api/v1/jobs/${id}`);
      assertSchema(doc, 'JobResponse', r.body);
      const ev = await server.api('GET', `/api/v1/jobs/${id}/events?limit=2`);
      assertSchema(doc, 'EventsPage', ev.body);
      for (const e of await allEvents(server, id)) assertSchema(doc, 'Event', e);
    }
    const list = await server.api('GET', '/api/v1/jobs');
    assertSchema(doc, 'JobList', list.body);
    const patched = await server.api('PATCH', `/api/v1/jobs/${parent.id}`, { notes: 'n' });
    assertSchema(doc, 'JobResponse', patched.body);

    // (a test job holding every CPU slot keeps what follows queued)
    const blocker = await createJob(server, { steps: 1000, step_ms: 20 }, { resources: { cpu_slots: info.body.jobs.cpu_slots } });
    trackPid((await waitState(server, blocker.id, 'running')).pid);
    const running = await server.api('GET', `/api/v1/jobs/${blocker.id}`);
    assertSchema(doc, 'JobResponse', running.body);
    const cloned = await server.api('POST', `/api/v1/jobs/${parent.id}/clone`);
    assertSchema(doc, 'JobResponse', cloned.body);
    const aborted = await server.api('POST', `/api/v1/jobs/${cloned.body.job.id}/abort`);
    assert.equal(aborted.status, 202);
    assertSchema(doc, 'JobResponse', aborted.body);

    // dataset routes: the list and the preview (a dataset before it is built: the next test)
    const dl = await server.api('GET', '/api/v1/datasets');
    assert.equal(dl.status, 200);
    assertSchema(doc, 'DatasetList', dl.body);
    assert.equal((await server.api('POST', `/api/v1/jobs/${blocker.id}/abort`)).status, 202);
    await waitState(server, blocker.id, 'aborted');
    const pv = await fetch(server.url + '/api/v1/datasets/preview?width=16&height=16&encoding=none');
    assert.equal(pv.status, 200);
    assert.equal(pv.headers.get('content-type'), 'image/png');
    assert.equal(Number(pv.headers.get('x-encoded-bytes')), 16 * 16 * 3);
    await pv.arrayBuffer();

    // an undocumented field is caught by the checker itself
    assert.notDeepEqual(schemaErrors(doc, { $ref: '#/components/schemas/Job' }, { ...list.body.jobs[0], extra: 1 }), []);
  });

  test('a dataset before it is built (queued: checked, not built) matches the schemas', async (t) => {
    const info = await server.api('GET', '/api/v1/info');
    // a test job holding every CPU slot keeps the dataset queued
    const blocker = await createJob(server, { steps: 1000, step_ms: 20 }, { resources: { cpu_slots: info.body.jobs.cpu_slots } });
    trackPid((await waitState(server, blocker.id, 'running')).pid);
    try {
      const ds = await server.api('POST', '/api/v1/datasets',
        { name: 'schema check', source: { type: 'example', name: 'fashion-mnist' }, options: { width: 28, height: 28, channels: 1 } });
      if (ds.status !== 202) {
        // the one refusal that is this machine's, not the server's: Debian's
        // dataset-fashion-mnist (which `make test` installs) is not here
        assertSchema(doc, 'Error', ds.body);
        assert.match(ds.body.error.message, /Fashion-MNIST is not installed/, JSON.stringify(ds.body));
        if (need(t, `the example dataset: ${ds.body.error.message}`)) return;
      }
      assertSchema(doc, 'JobResponse', ds.body);
      assert.equal(ds.body.job.state, 'queued');
      const one = await server.api('GET', `/api/v1/datasets/${ds.body.job.id}`);
      assert.equal(one.status, 200);
      assertSchema(doc, 'DatasetResponse', one.body);
      assert.equal(one.body.dataset.summary, null);
      const listed = await server.api('GET', '/api/v1/datasets');
      assertSchema(doc, 'DatasetList', listed.body);
      assert.equal((await server.api('POST', `/api/v1/jobs/${ds.body.job.id}/abort`)).status, 202);
      assert.equal((await getJob(server, ds.body.job.id)).state, 'aborted');
    } finally {
      await server.api('POST', `/api/v1/jobs/${blocker.id}/abort`);
      await waitState(server, blocker.id, 'aborted');
    }
  });

  test('every status seen is documented for its operation', async () => {
    const job = await createJob(server, { steps: 1, step_ms: 1 });
    await waitState(server, job.id, 'done');
    const cases = [
      ['GET', '/api/v1/jobs', '/api/v1/jobs?limit=0'],
      ['GET', '/api/v1/jobs', '/api/v1/jobs?state=nope'],
      ['POST', '/api/v1/jobs', '/api/v1/jobs', '{'],
      ['POST', '/api/v1/jobs', '/api/v1/jobs', { kind: 'test', what: 1 }],
      ['GET', '/api/v1/jobs/{id}', '/api/v1/jobs/999999'],
      ['GET', '/api/v1/jobs/{id}', '/api/v1/jobs/abc'],
      ['PATCH', '/api/v1/jobs/{id}', '/api/v1/jobs/999999', { name: 'x' }],
      ['PATCH', '/api/v1/jobs/{id}', `/api/v1/jobs/${job.id}`, { name: '' }],
      ['DELETE', '/api/v1/jobs/{id}', '/api/v1/jobs/999999'],
      ['POST', '/api/v1/jobs/{id}/abort', `/api/v1/jobs/${job.id}/abort`],
      ['POST', '/api/v1/jobs/{id}/abort', '/api/v1/jobs/999999/abort'],
      ['POST', '/api/v1/jobs/{id}/clone', '/api/v1/jobs/999999/clone'],
      ['GET', '/api/v1/jobs/{id}/events', `/api/v1/jobs/${job.id}/events?after=-1`],
      ['GET', '/api/v1/jobs/{id}/events', '/api/v1/jobs/999999/events'],
      ['PUT', '/api/v1/jobs', '/api/v1/jobs'],
      ['POST', '/api/v1/info', '/api/v1/info'],
      ['DELETE', '/api/v1/jobs/{id}/events', `/api/v1/jobs/${job.id}/events`],
      ['GET', '/api/v1/models', '/api/v1/models?limit=0'],
      ['POST', '/api/v1/models', '/api/v1/models', '{'],
      ['POST', '/api/v1/models', '/api/v1/models', { name: 'm', dataset: 999999, network: { standard: 'lenet' } }],
      ['POST', '/api/v1/models', '/api/v1/models', { name: 'm', dataset: job.id, network: { standard: 'lenet' } }],
      ['GET', '/api/v1/models/{id}', `/api/v1/models/${job.id}`],
      ['GET', '/api/v1/models/{id}', '/api/v1/models/999999'],
      ['POST', '/api/v1/models/{id}/resume', '/api/v1/models/999999/resume'],
      ['POST', '/api/v1/models/{id}/resume', `/api/v1/models/${job.id}/resume`, { epochs: 3 }],
      ['GET', '/api/v1/models/{id}/snapshots/{name}', '/api/v1/models/999999/snapshots/1'],
      ['GET', '/api/v1/models/{id}/snapshots/{name}', `/api/v1/models/${job.id}/snapshots/1.5`],
      ['DELETE', '/api/v1/models', '/api/v1/models'],
      ['GET', '/api/v1/jobs/{id}/resources', `/api/v1/jobs/${job.id}/resources`],
      ['GET', '/api/v1/jobs/{id}/resources', '/api/v1/jobs/999999/resources'],
      ['POST', '/api/v1/networks', '/api/v1/networks'],
      ['POST', '/api/v1/networks/check', '/api/v1/networks/check', { standard: 'nope' }],
      ['POST', '/api/v1/networks/check', '/api/v1/networks/check', { standard: 'lenet', dataset: job.id }],
      ['GET', '/api/v1/networks/check', '/api/v1/networks/check'],
      ['POST', '/api/v1/networks/visualize', '/api/v1/networks/visualize', { prototxt: 'layer {' }],
      ['POST', '/api/v1/lr-preview', '/api/v1/lr-preview', { epochs: -1 }],
      ['POST', '/api/v1/models/{id}/classify', '/api/v1/models/999999/classify'],
      ['POST', '/api/v1/models/{id}/classify', `/api/v1/models/${job.id}/classify?top=0`],
      ['GET', '/api/v1/models/{id}/bundle', '/api/v1/models/999999/bundle'],
      ['GET', '/api/v1/models/{id}/bundle', `/api/v1/models/${job.id}/bundle?snapshot=x`],
    ];
    for (const [method, template, path, body] of cases) {
      const r = await server.api(method, path, body);
      const item = doc.paths[template];
      const op = item[method.toLowerCase()] || Object.values(item).find((o) => o && o.responses);
      assert.ok(op.responses[String(r.status)], `${method} ${path} answered ${r.status}, not documented for ${template}`);
      assert.ok(r.status >= 400, `${method} ${path}: ${r.status}`);
      assertSchema(doc, 'Error', r.body);
    }
  });

  test('WebSocket frames match WsServerMessage', async () => {
    const ws = await wsConnect(server.url);
    try {
      await ws.subscribe('all');
      await ws.subscribe('jobs');
      const job = await createJob(server, { steps: 3, step_ms: 10 });
      await ws.subscribe(job.id);
      ws.send('not json');
      await ws.next((m) => m.type === 'error');
      await waitState(server, job.id, 'done');
      await ws.next((m) => m.type === 'job' && m.job.id === job.id && m.job.state === 'done');
      await server.api('DELETE', `/api/v1/jobs/${job.id}`);
      await ws.next((m) => m.type === 'deleted' && m.id === job.id);
      ws.send({ unsubscribe: 'all' });
      await ws.next((m) => m.type === 'unsubscribed');
      const types = new Set(ws.all.map((m) => m.type));
      for (const t of ['subscribed', 'unsubscribed', 'job', 'events', 'deleted', 'error']) assert.ok(types.has(t), `saw ${t}`);
      for (const m of ws.all) assertSchema(doc, 'WsServerMessage', m);
      for (const f of [{ subscribe: 'all' }, { unsubscribe: 12 }]) assertSchema(doc, 'WsClientMessage', f);
    } finally {
      await ws.close();
    }
  });
});
