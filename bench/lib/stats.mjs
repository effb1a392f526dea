// stats.mjs — what the bench scripts share: where the repository and the results
// are, BENCH_QUICK, the knobs from the environment, and the few figures every
// bench reports (medians, rounding, KiB to MiB, the load average).
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RESULTS = join(ROOT, 'bench', 'results');
export const quick = process.env.BENCH_QUICK === '1';

/** The knobs every bench reads: BENCH_ONLY (a comma-separated list, else dflt's),
 *  DEEPDESK_BIN (build/deepdesk) and BENCH_PYTHON (/usr/bin/python3). */
export const benchOnly = (dflt) => (process.env.BENCH_ONLY || dflt).split(',').map((s) => s.trim()).filter(Boolean);
export const BENCH_BIN = process.env.DEEPDESK_BIN || join(ROOT, 'build', 'deepdesk');
export const BENCH_PYTHON = process.env.BENCH_PYTHON || '/usr/bin/python3';

/** The environment variable name as a number, or dflt where it is unset or empty. */
export const envNumber = (name, dflt) => (process.env[name] ? Number(process.env[name]) : dflt);

/** The median of the finite numbers of xs; null where there are none. */
export function median(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** x to d decimals; null for null, undefined and what is not finite (JSON's null either way). */
export const round = (x, d = 2) => (x == null || !Number.isFinite(x) ? null : Math.round(x * 10 ** d) / 10 ** d);
export const mib = (kb) => (kb == null ? null : round(kb / 1024, 1));
export const load1 = () => round(loadavg()[0], 2);
