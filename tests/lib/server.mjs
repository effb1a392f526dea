// server.mjs — start a real `deepdesk serve` for a test: a free loopback port, a
// fresh temporary data folder, and helpers to stop, kill and restart it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, '..', '..');
export const BIN = process.env.DEEPDESK_BIN || join(ROOT, 'build', 'deepdesk-test');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Start a server.  opts: {dataDir, args: [...extra flags], keepData, bin (default BIN),
 *  testKindAdminOnly}.  The test build's "test" job kind is for admins only; the
 *  suites open it to every account (DEEPDESK_TEST_KIND=anyone) so that learners own
 *  jobs in the permission tests, unless testKindAdminOnly. */
export async function startServer(opts = {}) {
  const dataDir = opts.dataDir || mkdtempSync(join(tmpdir(), 'deepdesk-test-'));
  const portFile = join(dataDir, 'server.port');
  rmSync(portFile, { force: true });
  const args = ['serve', '--listen', '127.0.0.1:0', '--data', dataDir, '--log-level', 'warn',
    ...(opts.args || [])];
  const bin = opts.bin || BIN;
  const env = { ...process.env, DEEPDESK_TEST_KIND: opts.testKindAdminOnly ? '' : 'anyone' };
  const proc = spawn(bin, args, { stdio: ['ignore', 'inherit', 'pipe'], env });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; if (process.env.DEEPDESK_TEST_LOG) process.stderr.write(d); });
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  for (let i = 0; i < 200 && !existsSync(portFile); i++) {
    if (proc.exitCode !== null) break;
    await sleep(25);
  }
  if (!existsSync(portFile)) {
    proc.kill('SIGKILL');
    throw new Error(`${bin} serve did not start: ${stderr}`);
  }
  const port = Number(readFileSync(portFile, 'utf8').trim());
  const url = `http://127.0.0.1:${port}`;
  const server = {
    url, port, dataDir, proc, exited,
    get stderr() { return stderr; },
    /** fetch JSON: returns {status, body, headers} */
    async api(method, path, body, headers = {}) {
      const init = { method, headers: { ...headers } };
      if (body !== undefined) {
        init.body = typeof body === 'string' ? body : JSON.stringify(body);
        init.headers['content-type'] = 'application/json';
      }
      const res = await fetch(url + path, init);
      const text = await res.text();
      let json = null;
      try { json = text ? JSON.parse(text) : null; } catch { json = text; }
      return { status: res.status, body: json, headers: res.headers };
    },
    /** SIGTERM and wait for a clean exit */
    async stop() { if (proc.exitCode === null) proc.kill('SIGTERM'); return exited; },
    /** SIGKILL, as a crash would */
    async kill() { if (proc.exitCode === null) proc.kill('SIGKILL'); return exited; },
    /** start another server on the same data folder */
    async restart(extra = {}) { await server.stop(); return startServer({ ...opts, ...extra, dataDir }); },
    cleanup() { if (!opts.keepData) rmSync(dataDir, { recursive: true, force: true }); },
  };
  return server;
}

/** Poll fn until it returns a truthy value or timeout (ms) passes. */
export async function waitFor(fn, timeout = 10000, what = 'condition') {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(last)}`);
}

/** Wait until job id reaches one of the states (array or string); returns the job. */
export async function waitState(server, id, states, timeout = 15000) {
  const want = Array.isArray(states) ? states : [states];
  return waitFor(async () => {
    const r = await server.api('GET', `/api/v1/jobs/${id}`);
    return r.status === 200 && want.includes(r.body.job.state) ? r.body.job : null;
  }, timeout, `job ${id} to become ${want.join('|')}`);
}

export { sleep };
