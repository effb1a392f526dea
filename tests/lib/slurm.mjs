// slurm.mjs — a real single-node Slurm for a test, in a temporary folder.
//
// startSlurm() starts munged with a freshly generated key and its own socket,
// then slurmctld and slurmd with a generated slurm.conf (free ports, SlurmUser=root,
// state and spool in the folder, this machine's CPUs, no accounting database: the
// end of a job comes from squeue, which keeps finished jobs for MinJobAge, and from
// the job's own event log).  Nothing is read from or written to /etc/slurm or
// /etc/munge.  It returns {dir, conf, env, cpus, run(cmd, args), stop()}; stop()
// cancels every job and ends the daemons by their pids.
//
// slurmMissing() says why Slurm cannot run here (not root, a binary missing), which
// a test hands to need() (tests/lib/need.mjs): a skip, or a failure in CI.  Slurm that
// is there but does not start is always a failure: startSlurm() throws, with the tail
// of munged's, slurmctld's and slurmd's logs.  It waits up to SLURM_START_MS (120 s,
// a loaded 2-core machine) for the node to become idle.
import { spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync, mkdirSync, chmodSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { cpus as osCpus, tmpdir } from 'node:os';
import { join } from 'node:path';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const SLURM_START_MS = 120000;

/** How a spawnSync of a daemon went wrong, with what it printed. */
function failed(name, r) {
  const how = r.error ? `did not start or finish (${r.error.message})` : r.status !== null ? `exited ${r.status}` : `was killed (${r.signal})`;
  const said = String(r.stderr || r.stdout || '').trim();
  return `${name} ${how}${said ? `: ${said}` : ''}`;
}

/** The last lines of a daemon's log, for an error that says why it did not start. */
function logTail(file, lines = 15) {
  let text;
  try { text = readFileSync(file, 'utf8'); } catch (e) { return `\n--- ${file}: ${e.code || e.message}`; }
  const tail = text.trimEnd().split('\n').slice(-lines).join('\n');
  return `\n--- the last lines of ${file}:\n${tail || '(empty)'}`;
}

const SBIN = ['/usr/sbin', '/usr/bin', '/sbin', '/bin'];
function which(name) {
  for (const d of (process.env.PATH || '').split(':').concat(SBIN)) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function pidOf(file) {
  try { return Number(readFileSync(file, 'utf8').trim()) || 0; } catch { return 0; }
}

function alive(pid) {
  if (!pid) return false;
  try { process.kill(pid, 0); return true; } catch { return false; }
}

async function stopPid(pid, what) {
  if (!alive(pid)) return;
  try { process.kill(pid, 'SIGTERM'); } catch { return; }
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(50);
  if (alive(pid)) {
    process.stderr.write(`slurm.mjs: ${what} (pid ${pid}) ignored SIGTERM; SIGKILL\n`);
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
}

/** Why Slurm cannot run here, or null when it can. */
export function slurmMissing() {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return 'not root: a test Slurm runs slurmd and slurmctld as SlurmUser=root';
  }
  for (const b of ['munged', 'slurmctld', 'slurmd', 'sbatch', 'squeue', 'scancel', 'scontrol']) {
    if (!which(b)) return `${b} is not installed (Debian packages munge, slurmctld, slurmd, slurm-client)`;
  }
  return null;
}

/** Start a test Slurm (see the top of this file); throws, saying why, when it does not. */
export async function startSlurm() {
  const why = slurmMissing();
  if (why) throw new Error(`Slurm cannot run here: ${why}`);
  const dir = mkdtempSync(join(process.env.DEEPDESK_TEST_TMP || tmpdir(), 'deepdesk-slurm-'));
  chmodSync(dir, 0o755); // munged wants every folder above its socket searchable
  const mungeDir = join(dir, 'munge');
  mkdirSync(mungeDir, { mode: 0o755 });
  mkdirSync(join(dir, 'state'));
  mkdirSync(join(dir, 'spool'));
  const key = join(mungeDir, 'munge.key');
  writeFileSync(key, randomBytes(1024), { mode: 0o400 });
  const sock = join(mungeDir, 'munge.sock');
  const pids = {};
  const cluster = {
    dir, conf: join(dir, 'slurm.conf'), env: {},
    async stop() {
      if (existsSync(cluster.conf)) {
        // every job first (their slurmstepd would outlive slurmd), then the daemons
        spawnSync(which('scancel'), ['--full', '--signal=KILL', '--user=root'], { env: { ...process.env, ...cluster.env }, timeout: 10000 });
        spawnSync(which('scancel'), ['--user=root'], { env: { ...process.env, ...cluster.env }, timeout: 10000 });
        for (let i = 0; i < 100; i++) {
          const q = spawnSync(which('squeue'), ['-h', '-t', 'RUNNING,COMPLETING,CONFIGURING'], { env: { ...process.env, ...cluster.env }, timeout: 10000 });
          if (q.status !== 0 || !String(q.stdout).trim()) break;
          await sleep(100);
        }
      }
      pids.slurmd ||= pidOf(join(dir, 'slurmd.pid'));
      pids.slurmctld ||= pidOf(join(dir, 'slurmctld.pid'));
      pids.munged ||= pidOf(join(mungeDir, 'munged.pid'));
      await stopPid(pids.slurmd, 'slurmd');
      await stopPid(pids.slurmctld, 'slurmctld');
      await stopPid(pids.munged, 'munged');
      if (!process.env.DEEPDESK_KEEP_SLURM) rmSync(dir, { recursive: true, force: true });
    },
    run(cmd, args) {
      return execFileSync(which(cmd), args, { env: { ...process.env, ...cluster.env }, encoding: 'utf8', timeout: 20000 });
    },
  };
  const logs = () => logTail(join(mungeDir, 'munged.log'), 5) + logTail(join(dir, 'slurmctld.log')) +
    logTail(join(dir, 'slurmd.log'));
  try {
    const m = spawnSync(which('munged'), [`--key-file=${key}`, `--socket=${sock}`,
      `--pid-file=${join(mungeDir, 'munged.pid')}`, `--log-file=${join(mungeDir, 'munged.log')}`,
      `--seed-file=${join(mungeDir, 'munged.seed')}`, '--force'], { encoding: 'utf8', timeout: 20000 });
    if (m.status !== 0) throw new Error(failed('munged', m) + logs());
    pids.munged = pidOf(join(mungeDir, 'munged.pid'));
    const [ctldPort, dPort] = [await freePort(), await freePort()];
    const cpus = osCpus().length;
    const memMiB = Math.max(512, Math.floor(Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024) - 1024);
    cluster.cpus = cpus;
    writeFileSync(cluster.conf, [
      'ClusterName=deepdesktest',
      'SlurmctldHost=localhost',
      `SlurmctldPort=${ctldPort}`,
      `SlurmdPort=${dPort}`,
      'SlurmUser=root',
      'SlurmdUser=root',
      'AuthType=auth/munge',
      'CredType=cred/munge',
      // its own munged; a requeued job may start again 5 s later (default 120)
      `AuthInfo=socket=${sock},cred_expire=5`,
      `StateSaveLocation=${join(dir, 'state')}`,
      `SlurmdSpoolDir=${join(dir, 'spool')}`,
      `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
      `SlurmdPidFile=${join(dir, 'slurmd.pid')}`,
      `SlurmctldLogFile=${join(dir, 'slurmctld.log')}`,
      `SlurmdLogFile=${join(dir, 'slurmd.log')}`,
      'ProctrackType=proctrack/linuxproc',
      'TaskPlugin=task/none',
      'JobAcctGatherType=jobacct_gather/none',
      'AccountingStorageType=accounting_storage/none',
      'JobCompType=jobcomp/none',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_Core',
      'SchedulerType=sched/backfill',
      'MpiDefault=none',
      'ReturnToService=2',
      'MinJobAge=600',
      'KillWait=5',
      'InactiveLimit=0',
      'PlugStackConfig=/dev/null',
      `NodeName=localhost CPUs=${cpus} RealMemory=${memMiB} State=UNKNOWN`,
      'PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP',
      '',
    ].join('\n'));
    cluster.env = { SLURM_CONF: cluster.conf };
    const env = { ...process.env, ...cluster.env };
    const c = spawnSync(which('slurmctld'), ['-f', cluster.conf, '-i'], { env, encoding: 'utf8', timeout: 60000 });
    if (c.status !== 0) throw new Error(failed('slurmctld', c) + logs());
    const d = spawnSync(which('slurmd'), ['-f', cluster.conf, '-N', 'localhost'], { env, encoding: 'utf8', timeout: 60000 });
    if (d.status !== 0) throw new Error(failed('slurmd', d) + logs());
    // ready when the node is idle
    const t0 = Date.now();
    let state = '';
    while (Date.now() - t0 < SLURM_START_MS) {
      const s = spawnSync(which('sinfo'), ['-h', '-N', '-o', '%T'], { env, encoding: 'utf8', timeout: 10000 });
      state = `${String(s.stdout).trim()}${s.status === 0 ? '' : ` (sinfo exited ${s.status ?? s.signal}: ${String(s.stderr).trim()})`}`;
      if (s.status === 0 && /^idle/.test(state)) break;
      await sleep(200);
    }
    if (!/^idle/.test(state)) {
      throw new Error(`the test node did not become idle in ${SLURM_START_MS / 1000} s (sinfo: "${state}")${logs()}`);
    }
    pids.slurmctld = pidOf(join(dir, 'slurmctld.pid'));
    pids.slurmd = pidOf(join(dir, 'slurmd.pid'));
    return cluster;
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}
