#!/usr/bin/env node
// table.mjs RESULT.json... — print the "rows" of each bench's result file as one table.
// A result file is {"bench":name,"ok":bool,"rows":[{"metric","value","unit","note"?}]}.
import { readFileSync } from 'node:fs';

const lines = [];
for (const file of process.argv.slice(2)) {
  let r;
  try { r = JSON.parse(readFileSync(file, 'utf8')); } catch (e) {
    lines.push([file, 'unreadable', '', e.message]);
    continue;
  }
  for (const x of r.rows || []) {
    const v = x.value == null ? '—' : typeof x.value === 'number' ? fmt(x.value) : String(x.value);
    lines.push([`${r.bench}: ${x.metric}`, v, x.unit || '', x.note || '']);
  }
  if (!(r.rows || []).length) lines.push([r.bench || file, r.ok === false ? 'FAILED' : '—', '', (r.errors || []).join('; ')]);
}

function fmt(n) {
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  const a = Math.abs(n);
  return n.toLocaleString('en-US', { maximumFractionDigits: a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3 });
}

const head = ['metric', 'value (median of runs)', 'unit', 'note'];
const w = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
const pad = (l) => `${l[0].padEnd(w[0])}  ${l[1].padStart(w[1])}  ${l[2].padEnd(w[2])}  ${l[3]}`.trimEnd();
console.log(pad(head));
console.log(pad(w.map((n) => '-'.repeat(n))));
for (const l of lines) console.log(pad(l));
