// format.js — times, durations and sizes for people.

const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

/** "3 minutes ago", "just now" from a ms timestamp. */
export function relTime(ms, now = Date.now()) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.round((ms - now) / 1000);
  const a = Math.abs(s);
  if (a < 10) return 'just now';
  if (a < 60) return rtf.format(s, 'second');
  if (a < 3600) return rtf.format(Math.round(s / 60), 'minute');
  if (a < 86400) return rtf.format(Math.round(s / 3600), 'hour');
  if (a < 86400 * 30) return rtf.format(Math.round(s / 86400), 'day');
  return dateTime(ms);
}

const dtf = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const tf = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

/** "2 Dec 2026, 16:59:57" */
export function dateTime(ms) {
  return ms === null || ms === undefined ? '—' : dtf.format(new Date(ms));
}

/** "16:59:57.209" from epoch seconds (event "t"). */
export function clock(tSeconds) {
  if (typeof tSeconds !== 'number') return '';
  const d = new Date(tSeconds * 1000);
  return `${tf.format(d)}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** "1h 02m", "3m 07s", "12.4s", "850ms" */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return '—';
  if (seconds < 0) seconds = 0;
  if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)}s`;
  const t = Math.round(seconds);
  const d = Math.floor(t / 86400), hr = Math.floor((t % 86400) / 3600);
  const m = Math.floor((t % 3600) / 60), s = t % 60;
  const p = (n) => String(n).padStart(2, '0');
  if (d) return `${d}d ${p(hr)}h`;
  if (hr) return `${hr}h ${p(m)}m`;
  return `${m}m ${p(s)}s`;
}

/** "12.3 GB" (SI units, like df -H and most file managers). */
export function bytes(n) {
  if (n === null || n === undefined || !isFinite(n)) return '—';
  const u = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return `${i === 0 ? n : n < 10 ? n.toFixed(1) : Math.round(n)} ${u[i]}`;
}

/** A metric value: 4 significant digits, exponent when tiny or huge. */
export function num(v) {
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return String(Number(v.toPrecision(4)));
}

export function percent(p) {
  return `${Math.floor(Math.max(0, Math.min(1, p || 0)) * 100)}%`;
}

/** Elapsed seconds of a job: running → until now, finished → start to finish. */
export function elapsedOf(job, now = Date.now()) {
  if (!job.started_at) return null;
  const end = job.finished_at || (job.state === 'running' ? now : null);
  return end ? (end - job.started_at) / 1000 : null;
}

/** Seconds left, counted down from when the record arrived (job._rx). */
export function etaOf(job, now = Date.now()) {
  if (job.state !== 'running' || typeof job.eta_s !== 'number') return null;
  const since = job._rx ? (now - job._rx) / 1000 : 0;
  return Math.max(0, job.eta_s - since);
}
