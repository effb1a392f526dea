// errors.test.mjs — every way a request can be wrong gets a clear JSON error with the
// right status, and changes nothing.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readdirSync, mkdirSync, createReadStream } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, createJob, getJob, assertError, killTrackedPids, trackPid, sleep,
} from './helpers.mjs';

const CAP = 1 << 20;

/** One raw HTTP/1.1 exchange on a fresh connection; resolves {status, headers, body, text}. */
function rawRequest(port, request, { timeout = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const done = () => {
      sock.destroy();
      const text = buf.toString('utf8');
      const head = text.split('\r\n\r\n')[0];
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      const headers = {};
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      const body = text.slice(head.length + 4);
      let json = null;
      try { json = JSON.parse(body); } catch { /* not JSON */ }
      resolve({ status: m ? Number(m[1]) : 0, headers, body: json, text });
    };
    const timer = setTimeout(done, timeout);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const text = buf.toString('utf8');
      const at = text.indexOf('\r\n\r\n');
      const len = /content-length:\s*(\d+)/i.exec(text.slice(0, at));
      if (at >= 0 && len && Buffer.byteLength(text.slice(at + 4)) >= Number(len[1])) {
        clearTimeout(timer);
        done();
      }
    });
    sock.on('error', (e) => { clearTimeout(timer); if (buf.length) done(); else reject(e); });
    sock.on('end', () => { clearTimeout(timer); done(); });
    sock.write(request);
  });
}

describe('errors', () => {
  let server, done1, queuedBlocker;
  // what the data looks like before each bad request; compared after it
  async function snapshot() {
    const list = await server.api('GET', '/api/v1/jobs?limit=1000');
    const jobs = list.body.jobs.map(({ id, name, state, parents }) => ({ id, name, state, parents }));
    return { total: list.body.total, jobs, dirs: readdirSync(join(server.dataDir, 'jobs')).sort() };
  }
  async function unchanged(fn) {
    const before = await snapshot();
    const out = await fn();
    assert.deepEqual(await snapshot(), before, 'nothing changed');
    return out;
  }
  const post = (body, path = '/api/v1/jobs') => server.api('POST', path, body);

  before(async () => {
    server = await startServer({ args: ['--cpu-slots', '2'] });
    done1 = await createJob(server, { steps: 1, step_ms: 1 }, { name: 'one' });
    await waitState(server, done1.id, 'done');
    // a job that holds both slots for the whole file, so that nothing starts or ends
    // under the "nothing changed" snapshots
    queuedBlocker = await createJob(server, { steps: 100000, step_ms: 20 }, { name: 'holder', resources: { cpu_slots: 2 } });
    trackPid((await waitState(server, queuedBlocker.id, 'running')).pid);
  });
  after(async () => {
    await server?.api('POST', `/api/v1/jobs/${queuedBlocker?.id}/abort`).catch(() => {});
    await server?.stop();
    killTrackedPids();
    server?.cleanup();
  });

  describe('request bodies', () => {
    test('malformed JSON: 400 naming the line and column', async () => {
      await unchanged(async () => {
        const r = await post('{\n  "kind": "test",\n  "name": }');
        assertError(r, 400, 'invalid', /malformed JSON at line 3, column \d+/);
        assertError(await post('{"kind":'), 400, 'invalid', /line 1, column \d+/);
        assertError(await post('{"kind":"test",}'), 400, 'invalid', /malformed JSON/);
        assertError(await post("{'kind':'test'}"), 400, 'invalid', /malformed JSON/);
        assertError(await post('   '), 400, 'invalid', /malformed JSON|empty/);
        assertError(await post('{"kind":"test"} trailing'), 400, 'invalid', /malformed JSON at line 1, column \d+: text after the value/);
        assertError(await post('{"kind":"test"}{"kind":"test"}'), 400, 'invalid', /malformed JSON at line 1, column \d+: text after the value/);
        assertError(await post(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]).toString('latin1')), 400, 'invalid', /malformed JSON/);
      });
    });

    test('a body that is not an object, or empty: 400', async () => {
      await unchanged(async () => {
        for (const b of ['[1]', '"kind"', '5', 'null', 'true', '[]']) {
          assertError(await post(b), 400, 'invalid', /must be a JSON object/);
        }
        const empty = await server.api('POST', '/api/v1/jobs');
        assertError(empty, 400, 'invalid', /empty/);
        assertError(await post(''), 400, 'invalid', /empty/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`), 400, 'invalid', /empty/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, '[]'), 400, 'invalid', /JSON object/);
      });
    });

    test('unknown fields: 400 naming the field', async () => {
      await unchanged(async () => {
        assertError(await post({ kind: 'test', colour: 'red' }), 400, 'invalid', /^colour: unknown field/);
        assertError(await post({ kind: 'test', resources: { gpus: [0] } }), 400, 'invalid', /resources\.gpus: unknown field/);
        assertError(await post({ kind: 'test', params: { stepz: 1 } }), 400, 'invalid', /params\.stepz: unknown field/);
        assertError(await post({ kind: 'test', state: 'done' }), 400, 'invalid', /state: unknown field/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { name: 'x', kind: 'y' }), 400, 'invalid', /kind: unknown field/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { params: {} }), 400, 'invalid', /params: unknown field/);
      });
      assert.equal((await getJob(server, done1.id)).name, 'one');
    });

    test('wrong types and values: 400 naming the field', async () => {
      const cases = [
        [{}, /^kind: required/],
        [{ kind: 5 }, /^kind: required, a string/],
        [{ kind: null }, /^kind/],
        [{ kind: 'nope' }, /^kind: unknown job kind "nope"/],
        [{ kind: 'test', name: 5 }, /^name: must be a string/],
        [{ kind: 'test', name: null }, /^name: must be a string/],
        [{ kind: 'test', name: 'n'.repeat(201) }, /^name: longer than 200/],
        [{ kind: 'test', params: [] }, /^params: must be an object/],
        [{ kind: 'test', params: 'steps=1' }, /^params: must be an object/],
        [{ kind: 'test', params: null }, /^params: must be an object/],
        [{ kind: 'test', params: { steps: '5' } }, /^params\.steps: must be a number/],
        [{ kind: 'test', params: { steps: -1 } }, /^params\.steps/],
        [{ kind: 'test', parents: 1 }, /^parents: must be an array/],
        [{ kind: 'test', parents: { 0: 1 } }, /^parents: must be an array/],
        [{ kind: 'test', parents: [1.5] }, /^parents\[0\]: must be a job id/],
        [{ kind: 'test', parents: ['1'] }, /^parents\[0\]: must be a job id/],
        [{ kind: 'test', parents: [0] }, /^parents\[0\]: must be a job id/],
        [{ kind: 'test', parents: [-3] }, /^parents\[0\]: must be a job id/],
        [{ kind: 'test', parents: [1, null] }, /^parents\[1\]: must be a job id/],
        [{ kind: 'test', parents: [1, 1] }, /^parents: job 1 is listed twice/],
        [{ kind: 'test', parents: [999999] }, /job 999999 does not exist/],
        [{ kind: 'test', parents: Array.from({ length: 65 }, (_, i) => i + 1) }, /^parents: must be an array of at most 64/],
        [{ kind: 'test', resources: [] }, /^resources: must be an object/],
        [{ kind: 'test', resources: 2 }, /^resources: must be an object/],
        [{ kind: 'test', resources: { cpu_slots: 0 } }, /^resources\.cpu_slots/],
        [{ kind: 'test', resources: { cpu_slots: -1 } }, /^resources\.cpu_slots/],
        [{ kind: 'test', resources: { cpu_slots: 1.5 } }, /^resources\.cpu_slots/],
        [{ kind: 'test', resources: { cpu_slots: '1' } }, /^resources\.cpu_slots/],
        [{ kind: 'test', resources: { cpu_slots: 3 } }, /^resources\.cpu_slots: asks for 3 CPU slots, this server has 2/],
        [{ kind: 'test', resources: { cpu_slots: 5000 } }, /^resources\.cpu_slots/],
      ];
      await unchanged(async () => {
        for (const [body, re] of cases) assertError(await post(body), 400, 'invalid', re);
      });
    });

    test('patch: wrong types and values', async () => {
      await unchanged(async () => {
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { name: 5 }), 400, 'invalid', /^name: must be a string/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { name: '' }), 400, 'invalid', /^name: must not be empty/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { notes: [] }), 400, 'invalid', /^notes: must be a string/);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { name: 'x'.repeat(201) }), 400, 'invalid', /^name: longer/);
        // a valid field next to a bad one changes nothing either
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, { name: 'fine', notes: 7 }), 400, 'invalid', /^notes/);
      });
      assert.equal((await getJob(server, done1.id)).name, 'one');
    });

    test('duplicate keys in a body are refused', async () => {
      const r = await post('{"kind":"test","name":"a","name":5}');
      if (r.status === 202) await server.api('POST', `/api/v1/jobs/${r.body.job.id}/abort`); // (queued: aborted at once)
      assertError(r, 400, 'invalid', /name/);
    });

    test('a body over 1 MiB: 413 by Content-Length, before it is read', async () => {
      await unchanged(async () => {
        const big = JSON.stringify({ kind: 'test', name: 'x'.repeat(CAP) });
        assertError(await post(big), 413, 'too_large', /1048576/);
        // only the header: the server answers without waiting for the body
        const r = await rawRequest(server.port,
          `POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${CAP + 1}\r\n\r\n{"kind":"test"`);
        assertError({ status: r.status, body: r.body, headers: new Headers({ 'content-type': r.headers['content-type'] }) },
          413, 'too_large', new RegExp(`${CAP + 1} bytes`));
        const huge = await rawRequest(server.port,
          `POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n`);
        assert.equal(huge.status, 413);
        assertError(await server.api('PATCH', `/api/v1/jobs/${done1.id}`, JSON.stringify({ notes: 'x'.repeat(CAP) })), 413, 'too_large');
      });
    });

    test('a chunked body over 1 MiB: 413 as it is read', async () => {
      await unchanged(async () => {
        const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
        let sent = 0;
        const stream = new ReadableStream({
          pull(c) {
            if (sent === 0) c.enqueue(new TextEncoder().encode('{"kind":"test","name":"'));
            if (sent > 20) { c.enqueue(new TextEncoder().encode('"}')); c.close(); return; }
            c.enqueue(chunk);
            sent++;
          },
        });
        const res = await fetch(server.url + '/api/v1/jobs', {
          method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json' },
        });
        const body = await res.json();
        assertError({ status: res.status, body, headers: res.headers }, 413, 'too_large', /over the 1048576-byte limit/);
      });
    });

    test('a body of exactly 1 MiB is taken; one byte more is not', async () => {
      const head = '{"kind":"test","name":"at the cap","params":{"steps":1,"step_ms":1}';
      const exact = head + ' '.repeat(CAP - head.length - 1) + '}';
      assert.equal(Buffer.byteLength(exact), CAP);
      const r = await post(exact);
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal(r.body.job.name, 'at the cap');
      assert.equal(r.body.job.state, 'queued');
      assert.equal((await server.api('POST', `/api/v1/jobs/${r.body.job.id}/abort`)).status, 202);
      await unchanged(async () => {
        assertError(await post(exact + ' '), 413, 'too_large');
      });
    });

    test('a chunked body under the cap is read whole', async () => {
      const parts = ['{"kind":"test",', '"name":"chunked",', '"params":{"steps":1}}'];
      const stream = new ReadableStream({
        pull(c) { if (parts.length) c.enqueue(new TextEncoder().encode(parts.shift())); else c.close(); },
      });
      const res = await fetch(server.url + '/api/v1/jobs', { method: 'POST', body: stream, duplex: 'half',
        headers: { 'content-type': 'application/json' } });
      const body = await res.json();
      assert.equal(res.status, 202, JSON.stringify(body));
      assert.equal(body.job.name, 'chunked');
      assert.equal((await server.api('POST', `/api/v1/jobs/${body.job.id}/abort`)).status, 202);
    });
  });

  describe('ids and routes', () => {
    test('an id that does not exist: 404 on every job route', async () => {
      await unchanged(async () => {
        const id = 987654;
        for (const [m, p, b] of [['GET', ''], ['PATCH', '', { name: 'x' }], ['DELETE', ''], ['POST', '/abort'],
          ['POST', '/clone'], ['GET', '/events']]) {
          assertError(await server.api(m, `/api/v1/jobs/${id}${p}`, b), 404, 'not_found', /job 987654 does not exist/);
        }
      });
    });

    test('an id that is not a positive integer: 404', async () => {
      await unchanged(async () => {
        for (const bad of ['abc', '0', '-1', '1.5', '1e3', '0x10', '99999999999999999999999', '%20']) {
          for (const [m, p, b] of [['GET', ''], ['PATCH', '', { name: 'x' }], ['DELETE', ''], ['POST', '/abort'],
            ['POST', '/clone'], ['GET', '/events']]) {
            const r = await server.api(m, `/api/v1/jobs/${bad}${p}`, b);
            assertError(r, 404, 'not_found');
            assert.match(r.body.error.message, /id/, `${m} /jobs/${bad}${p}: ${r.body.error.message}`);
          }
        }
      });
    });

    test('an unknown route: 404 in JSON', async () => {
      await unchanged(async () => {
        for (const [m, p] of [['GET', '/api/v1/nope'], ['GET', '/api/v1'], ['GET', '/api/v1/'], ['POST', '/api/v1/jobs/1/restart'],
          ['GET', '/api/v1/jobs/1/events/2'], ['DELETE', '/api/v1/everything']]) {
          const r = await server.api(m, p);
          assertError(r, 404, 'not_found');
          assert.match(r.body.error.message, /no such API route/, `${m} ${p}`);
        }
      });
    });

    test('a known route with the wrong method: 405 with Allow', async () => {
      const id = done1.id;
      await unchanged(async () => {
        for (const [m, p, allow] of [
          ['PUT', '/api/v1/jobs', 'GET, POST'],
          ['DELETE', '/api/v1/jobs', 'GET, POST'],
          ['POST', `/api/v1/jobs/${id}`, 'GET, PATCH, DELETE'],
          ['PUT', `/api/v1/jobs/${id}`, 'GET, PATCH, DELETE'],
          ['GET', `/api/v1/jobs/${id}/abort`, 'POST'],
          ['DELETE', `/api/v1/jobs/${id}/clone`, 'POST'],
          ['POST', `/api/v1/jobs/${id}/events`, 'GET'],
          ['POST', '/api/v1/info', 'GET'],
          ['DELETE', '/api/v1/openapi.json', 'GET'],
        ]) {
          const r = await server.api(m, p, m === 'GET' || m === 'DELETE' ? undefined : {});
          assertError(r, 405, 'method_not_allowed');
          assert.equal(r.headers.get('allow'), allow, `${m} ${p}`);
          assert.match(r.body.error.message, new RegExp(`${m} is not allowed`));
        }
      });
    });

    test('bad query parameters: 400 naming them', async () => {
      for (const q of ['limit=0', 'limit=1001', 'limit=', 'limit=ten', 'offset=-5', 'offset=1.5', 'state=Done']) {
        assertError(await server.api('GET', `/api/v1/jobs?${q}`), 400, 'invalid', new RegExp(`^${q.split('=')[0]}:`));
      }
      for (const q of ['after=-1', 'after=one', 'limit=0', 'limit=5001']) {
        assertError(await server.api('GET', `/api/v1/jobs/${done1.id}/events?${q}`), 400, 'invalid', new RegExp(`^${q.split('=')[0]}:`));
      }
    });

    test('GET /api/v1/ws without a WebSocket upgrade: a clear 400', async () => {
      const r = await server.api('GET', '/api/v1/ws');
      assertError(r, 400, 'invalid', /WebSocket/i);
      const p = await server.api('POST', '/api/v1/ws', {});
      assertError(p, 405, 'method_not_allowed');
      assert.equal(p.headers.get('allow'), 'GET');
    });
  });

  describe('state conflicts', () => {
    test('abort of a finished job: 409, and nothing changes', async () => {
      await unchanged(async () => {
        assertError(await server.api('POST', `/api/v1/jobs/${done1.id}/abort`), 409, 'conflict', /already done/);
      });
      const j = await getJob(server, done1.id);
      assert.equal(j.state, 'done');
      assert.equal(j.abort_requested, false);
    });

    test('delete of a running job: 409, and it runs on', async () => {
      await unchanged(async () => {
        assertError(await server.api('DELETE', `/api/v1/jobs/${queuedBlocker.id}`), 409, 'conflict', /running/);
      });
      assert.equal((await getJob(server, queuedBlocker.id)).state, 'running');
    });
  });

  test('every error above left the server answering', async () => {
    const r = await server.api('GET', '/api/v1/info');
    assert.equal(r.status, 200);
    assert.equal(r.body.jobs.cpu_slots_used, 2);
  });
});

describe('server races', () => {
  let server;
  before(async () => { server = await startServer({ args: ['--cpu-slots', '4'] }); });
  after(async () => {
    await server?.kill(); // (a request thread may be stuck on the FIFO below if a test failed half-way)
    killTrackedPids();
    server?.cleanup();
  });

  test('a job never starts before its job.json is written', async () => {
    // (sched_submit commits the queued row, then writes job.json: a scheduler tick in
    // between once started workers that found no job.json and ended "error")
    // Hold the write of job 1's job.json open: its temporary file is a FIFO, so the
    // server's open() waits for a reader.  Meanwhile the job must not start.
    const dir = join(server.dataDir, 'jobs', '1');
    mkdirSync(dir, { recursive: true });
    const fifo = join(dir, `job.json.tmp.${server.proc.pid}`);
    execFileSync('mkfifo', [fifo]);
    const creating = server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 0 } });
    let seen;
    try {
      await sleep(400); // 20 scheduler ticks
      const r = await server.api('GET', '/api/v1/jobs/1');
      seen = r.status === 404 ? 'absent' : r.body.job.state;
      if (r.body?.job?.pid) trackPid(r.body.job.pid);
    } finally {
      // let the server go on: read the FIFO to its end (its fsync then fails: the
      // creation is refused and taken back, which is fine here)
      await new Promise((resolve) => {
        const rs = createReadStream(fifo);
        rs.on('data', () => {});
        rs.on('close', resolve);
        rs.on('error', resolve);
      });
      await creating;
    }
    assert.ok(['absent', 'queued'].includes(seen), `job 1 was "${seen}" before its job.json existed`);
  });

  test('an idle keep-alive connection outlives node fetch\'s 4 s reuse window', async () => {
    // (a server that closed idle connections sooner, without a Keep-Alive header, made
    // clients send requests on sockets it had just closed: "other side closed")
    const sock = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    let data = '';
    let closed = false;
    sock.on('data', (d) => { data += d; });
    sock.on('end', () => { closed = true; });
    sock.write('GET /api/v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await waitFor(() => data.includes('"kinds"'), 3000, 'first answer');
    const keepAlive = /keep-alive:\s*timeout=(\d+)/i.exec(data);
    await sleep(4200);
    const closedEarly = closed;
    if (!closed) {
      data = '';
      sock.write('GET /api/v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      await waitFor(() => data.includes('"kinds"'), 3000, 'second answer on the same connection');
    }
    sock.destroy();
    assert.ok(!closedEarly || (keepAlive && Number(keepAlive[1]) < 4),
      'the server closed an idle connection within 4.2 s without announcing a shorter keep-alive timeout');
  });
});
