// server.mjs — start a real `deepdesk serve` for a test: a free loopback port, a
// fresh temporary data folder, and helpers to stop, kill and restart it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync, readdirSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, '..', '..');
export const BIN = process.env.DEEPDESK_BIN || join(ROOT, 'build', 'deepdesk-test');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Under `make asan` (DEEPDESK_SANITIZER_LOG names a file): before a data folder
 *  goes, copy what the sanitizers printed in it to that file.  ASan writes its
 *  reports to files of its own (tests/asan.sh sets log_path), but GCC's UBSan
 *  writes "runtime error:" to stderr, which for a worker is its job's worker.log
 *  and for the inference service infer-service.log; the server's own stderr comes
 *  through DEEPDESK_TEST_LOG. */
export function keepSanitizerReports(dataDir) {
  const out = process.env.DEEPDESK_SANITIZER_LOG;
  if (!out) return;
  const logs = [join(dataDir, 'infer-service.log')];
  try {
    for (const id of readdirSync(join(dataDir, 'jobs'))) logs.push(join(dataDir, 'jobs', id, 'worker.log'));
  } catch { /* no jobs folder */ }
  for (const f of logs) {
    let text;
    try { text = readFileSync(f, 'utf8'); } catch { continue; }
    if (/runtime error:|Sanitizer/.test(text)) appendFileSync(out, `==== ${f}\n${text}\n`);
  }
}

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
  // a loaded machine may take seconds to start a server: wait for the port file or its exit
  for (const end = Date.now() + 30000; Date.now() < end && !existsSync(portFile);) {
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
    cleanup() { keepSanitizerReports(dataDir); if (!opts.keepData) rmSync(dataDir, { recursive: true, force: true }); },
  };
  return server;
}

/** Poll fn until it returns a truthy value, and return that value.  The second
 *  argument is {timeout (ms, default 30000), what (the condition, in words), every
 *  (ms between polls, 25)} or, as older callers write it, the timeout; then what.
 *  A time-out throws naming what it waited for and fn's last value; an error fn
 *  throws ends the wait at once. */
export async function waitFor(fn, opts = {}, whatArg) {
  const o = typeof opts === 'number' ? { timeout: opts, what: whatArg } : opts;
  const timeout = o.timeout ?? 30000;
  const what = o.what ?? whatArg ?? 'condition';
  const every = o.every ?? 25;
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() >= end) break;
    await sleep(every);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
}

/** Wait until job id reaches one of the states (array or string); returns the job. */
export async function waitState(server, id, states, timeout = 60000) {
  const want = Array.isArray(states) ? states : [states];
  return waitFor(async () => {
    const r = await server.api('GET', `/api/v1/jobs/${id}`);
    return r.status === 200 && want.includes(r.body.job.state) ? r.body.job : null;
  }, timeout, `job ${id} to become ${want.join('|')}`);
}

/* ---- holding a worker at a chosen moment ---- */

/** The complete lines of DIR/events.jsonl (a worker stopped mid-write may leave
 *  half a line at the end; it is left out). */
export function fileEvents(dir) {
  const path = join(dir, 'events.jsonl');
  const lines = existsSync(path) ? readFileSync(path, 'utf8').split('\n') : [''];
  lines.pop(); // after the last newline: empty, or a line not yet finished
  return lines.filter(Boolean).map((l) => JSON.parse(l));
}

/** Hold worker pid still (SIGSTOP) at the first moment its event log in dir satisfies
 *  ready(events), and return those events; the caller lets it go with SIGCONT.  So a
 *  test that is about "mid-run" checks that it is, instead of hoping a loaded machine
 *  is not too fast or too slow.  Fails, naming what it waited for, when the job ends
 *  first (its log has a final status) or the moment has not come within timeout ms. */
export async function holdWorker(pid, dir, ready, what, timeout = 120000) {
  const end = Date.now() + timeout;
  for (;;) {
    process.kill(pid, 'SIGSTOP');
    const events = fileEvents(dir);
    const fin = events.find((e) => e.type === 'status' && e.state !== 'running');
    if (fin) {
      process.kill(pid, 'SIGCONT');
      throw new Error(`the job ended (${fin.state}) before ${what}: make it longer`);
    }
    if (ready(events)) return events;
    process.kill(pid, 'SIGCONT');
    if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(20);
  }
}

export { sleep };
