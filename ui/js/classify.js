// classify.js — the model page's "Classify an image" card: drop or pick an image,
// choose a snapshot (the latest, the best by validation, or any epoch), and see the
// top 5 classes as a bar chart, the image as the network saw it, and the time taken;
// "Show inside the network" adds every layer's activations as tiles, a convolution's
// weights, and each blob's statistics and histogram (POST
// /api/v1/models/{id}/classify?insides=1).  Everything the server sends is set as
// text or as an image's src (a data:image/png URL), never as markup.
import { h, setChildren, setText, icon } from './dom.js';
import { get, ApiError } from './api.js';
import { loadChart, cssVar } from './charts.js';

const MAX_BYTES = 64 * 1024 * 1024; // the server's upload cap

/** The card for model id: {el, destroy()}. */
export function classifyPanel(id) {
  let chart = null, busy = false, lastFile = null, alive = true;

  const fileIn = h('input', { type: 'file', accept: 'image/*', id: `cl${id}-file`, class: 'cl-file' });
  const drop = h('label', { class: 'cl-drop', for: fileIn.id, tabindex: 0, dataset: { drop: '' } },
    icon('image'), h('span', null, 'Drop an image here, or ', h('u', null, 'choose a file')),
    h('span', { class: 'muted' }, 'PNG, JPEG, BMP or PPM, up to 64 MiB'));
  const snapSel = h('select', { class: 'input select', id: `cl${id}-snap` }, h('option', { value: '' }, 'Latest snapshot'));
  const insidesBox = h('input', { type: 'checkbox', class: 'check', id: `cl${id}-insides` });
  const status = h('p', { class: 'cl-status muted', role: 'status' });
  const error = h('p', { class: 'cl-error', role: 'alert', hidden: true });
  const results = h('div', { class: 'cl-results', hidden: true });
  const insides = h('div', { class: 'cl-insides', hidden: true });

  const el = h('section', { class: 'card classify-card', 'aria-labelledby': `cl${id}-title` },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: `cl${id}-title` }, 'Classify an image')),
    h('div', { class: 'cl-body' },
      h('div', { class: 'cl-controls' },
        drop, fileIn,
        h('div', { class: 'cl-options' },
          h('label', { class: 'field-label', for: snapSel.id }, 'Snapshot'), snapSel,
          h('label', { class: 'tool', for: insidesBox.id }, insidesBox, 'Show inside the network'))),
      status, error, results, insides));

  /* ---------- snapshots: latest, best, each epoch ---------- */
  async function loadSnapshots() {
    try {
      const [m, best] = await Promise.all([get(`/models/${id}`), bestEpoch()]);
      if (!alive) return;
      const snaps = (m.model && m.model.snapshots) || [];
      const keep = snapSel.value;
      const opts = [h('option', { value: '' }, snaps.length ? `Latest (epoch ${snaps[snaps.length - 1].label})` : 'Latest snapshot')];
      const b = best === null ? null : snaps.find((s) => Math.abs(s.epoch - best) < 1e-6);
      if (b) opts.push(h('option', { value: b.label, dataset: { best: '' } }, `Best by validation (epoch ${b.label})`));
      for (const s of [...snaps].reverse()) opts.push(h('option', { value: s.label }, `Epoch ${s.label}`));
      setChildren(snapSel, opts);
      if ([...snapSel.options].some((o) => o.value === keep)) snapSel.value = keep;
    } catch { /* the select keeps "latest", which the server resolves */ }
  }
  /** The epoch of the best validation report (accuracy, else loss) at a snapshot's epoch, or null. */
  async function bestEpoch() {
    const val = [];
    for (let after = 0, page = 0; page < 20; page++) {
      const r = await get(`/jobs/${id}/events?after=${after}&limit=5000`);
      for (const ev of r.events || []) if (ev.type === 'metric' && ev.kind === 'val') val.push(ev);
      if (!r.more) break;
      after = r.last;
    }
    const acc = val.filter((v) => typeof v.accuracy === 'number');
    if (acc.length) return acc.reduce((a, b) => (b.accuracy > a.accuracy ? b : a)).epoch;
    const loss = val.filter((v) => typeof v.loss === 'number');
    return loss.length ? loss.reduce((a, b) => (b.loss < a.loss ? b : a)).epoch : null;
  }
  snapSel.addEventListener('focus', loadSnapshots);
  loadSnapshots();

  /* ---------- the image in ---------- */
  fileIn.addEventListener('change', () => { if (fileIn.files[0]) classify(fileIn.files[0]); });
  drop.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); fileIn.click(); } });
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    const f = e.dataTransfer && e.dataTransfer.files[0];
    if (f) classify(f);
  });
  insidesBox.addEventListener('change', () => { if (lastFile && !busy) classify(lastFile); });
  snapSel.addEventListener('change', () => { if (lastFile && !busy) classify(lastFile); });

  function fail(msg) {
    setText(error, msg);
    error.hidden = false;
    results.hidden = true;
    insides.hidden = true;
  }

  async function classify(file) {
    lastFile = file;
    error.hidden = true;
    if (file.size > MAX_BYTES) return fail(`${file.name} is ${(file.size / 1048576).toFixed(1)} MiB; an image may have at most 64 MiB.`);
    if (!file.size) return fail(`${file.name} is empty.`);
    busy = true;
    setText(status, `Classifying ${file.name}…`);
    const q = new URLSearchParams({ top: '5', input: '1' });
    if (snapSel.value) q.set('snapshot', snapSel.value);
    if (insidesBox.checked) q.set('insides', '1');
    const t0 = performance.now();
    try {
      const form = new FormData();
      form.append('image', file, file.name); // a form, so that the server's errors name the file
      const res = await fetch(`/api/v1/models/${id}/classify?${q}`, { method: 'POST', body: form });
      const body = await res.json().catch(() => null);
      if (!res.ok) throw new ApiError(res.status, body?.error?.code || 'http', body?.error?.message || `HTTP ${res.status}`);
      if (!alive) return;
      await show(file, body, performance.now() - t0);
      setText(status, '');
    } catch (e) {
      setText(status, '');
      fail(e instanceof ApiError ? e.message : `Cannot reach the deepdesk server: ${e.message}`);
    } finally {
      busy = false;
    }
  }

  /* ---------- the answer ---------- */
  async function show(file, r, roundTrip) {
    const canvas = h('canvas', { role: 'img', 'aria-label': 'Top classes and their probabilities' });
    const table = h('table', { class: 'cl-top' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Class'), h('th', { scope: 'col', class: 'r' }, 'Probability'))),
      h('tbody', null, r.predictions.map((p) => h('tr', { dataset: { index: p.index } },
        h('td', { class: 'cl-label', text: p.label }),
        h('td', { class: 'r num cl-prob', dataset: { p: p.probability } }, `${(p.probability * 100).toFixed(2)}%`)))));
    const original = h('img', { class: 'cl-img', alt: `${file.name} as uploaded`, src: URL.createObjectURL(file) });
    original.addEventListener('load', () => URL.revokeObjectURL(original.src), { once: true });
    const seen = r.input ? h('img', { class: 'cl-img pixelated', alt: 'The image as the network saw it', src: r.input.png }) : null;
    setChildren(results,
      h('div', { class: 'cl-images' },
        h('figure', null, original, h('figcaption', { class: 'muted' }, `${file.name} · ${r.image.width}×${r.image.height}`)),
        seen && h('figure', null, seen, h('figcaption', { class: 'muted' }, `As the network saw it · ${r.input.shape.join('×')}`))),
      h('div', { class: 'cl-chart' }, h('div', { class: 'chart-inner cl-chart-inner' }, canvas), table,
        h('p', { class: 'muted cl-time num' }, `Snapshot ${r.snapshot} · ${r.time_ms.toFixed(1)} ms in the server, ${roundTrip.toFixed(0)} ms in all`)));
    results.hidden = false;
    drawChart(canvas, r.predictions);
    if (r.layers) {
      setChildren(insides, h('h3', { class: 'cl-h3' }, 'Inside the network'), r.layers.map(layerCard));
      insides.hidden = false;
    } else insides.hidden = true;
  }

  async function drawChart(canvas, preds) {
    let Chart;
    try { Chart = await loadChart(); } catch { return; } // the table says it all without Chart.js
    if (!alive) return;
    if (chart) chart.destroy();
    const text = cssVar('--muted') || '#59636e', grid = cssVar('--border-muted') || '#e4e8ec';
    chart = new Chart(canvas, {
      type: 'bar',
      data: {
        labels: preds.map((p) => p.label),
        datasets: [{ label: 'Probability (%)', data: preds.map((p) => p.probability * 100), backgroundColor: cssVar('--accent') || '#0969da' }],
      },
      options: {
        indexAxis: 'y', animation: false, responsive: true, maintainAspectRatio: false,
        plugins: { legend: { display: false }, tooltip: { callbacks: { label: (c) => `${c.parsed.x.toFixed(2)}%` } } },
        scales: {
          x: { min: 0, max: 100, ticks: { color: text, callback: (v) => `${v}%` }, grid: { color: grid } },
          y: { ticks: { color: text }, grid: { display: false } },
        },
      },
    });
  }

  return {
    el,
    destroy() { alive = false; if (chart) chart.destroy(); },
  };
}

/** One blob: its name, type and shape, statistics, histogram and tiles. */
function layerCard(l) {
  const s = l.stats;
  return h('article', { class: 'cl-layer', dataset: { blob: l.name } },
    h('header', { class: 'cl-layer-head' },
      h('span', { class: 'cl-layer-name', text: l.name }),
      h('span', { class: 'badge-lite', text: l.type }),
      h('span', { class: 'muted num', text: l.shape.join('×') }),
      l.tiles && l.tiles.shown < l.tiles.of ? h('span', { class: 'muted', text: `${l.tiles.shown} of ${l.tiles.of} channels shown` }) : null),
    h('div', { class: 'cl-layer-body' },
      l.png ? h('img', { class: 'cl-tiles pixelated', src: l.png, alt: `Activations of ${l.name}` }) : null,
      stats(s, 'Activations'),
      l.weights ? h('div', { class: 'cl-weights' },
        h('img', { class: 'cl-tiles pixelated', src: l.weights.png, alt: `Weights of ${l.name}` }),
        stats(l.weights.stats, `Weights ${l.weights.shape.join('×')}`)) : null));
}

function stats(s, title) {
  const max = Math.max(1, ...s.histogram);
  const f = (v) => (Math.abs(v) >= 1000 || (v !== 0 && Math.abs(v) < 0.001) ? v.toExponential(2) : v.toFixed(3));
  return h('div', { class: 'cl-stats' },
    h('div', { class: 'cl-stats-title', text: title }),
    h('dl', { class: 'kv cl-kv' },
      [['mean', s.mean], ['std', s.std], ['min', s.min], ['max', s.max]].map(([k, v]) => [h('dt', null, k), h('dd', { class: 'num', text: f(v) })])),
    h('div', { class: 'cl-hist', role: 'img', 'aria-label': `Histogram from ${f(s.min)} to ${f(s.max)}` },
      s.histogram.map((c) => h('span', { class: 'cl-bar', style: { height: `${(c / max) * 100}%` }, title: String(c) }))));
}
