// model_view.js — what a model job adds to its page (/models/ID): live charts of loss,
// accuracy and learning rate, progress with images/s and ETA, a hardware panel, the
// snapshots with the metrics at each (delete one, keep the last N or the best), curves
// of other models to compare, and the Resume / Extend action.
//
// The job page (job.js) owns the event stream: it pages /jobs/ID/events from the start and
// then follows the WebSocket, and hands every event to event() here, so the charts survive
// a reload mid-training.  Every point is kept; only what is drawn is thinned.
import { h, setText, setAttr, setChildren, icon } from './dom.js';
import { get, post, del, ApiError } from './api.js';
import { live } from './live.js';
import { bytes, duration, num } from './format.js';
import { toast, showError, confirmDialog, ACTIVE } from './ui.js';
import { loadChart, cssVar, onSchemeChange } from './charts.js';
import { fmtLr } from './model_new.js';
import { classifyPanel } from './classify.js';
import { evalButton } from './eval_view.js';

const MAX_DRAWN = 600;   // points per series on screen; the rest is averaged away
const PALETTE = ['#cf222e', '#8250df', '#1a7f37', '#bc4c00', '#0a7f8f', '#bf3989'];

/** The metric fields of a model's events, in CSV order. */
const FIELDS = ['kind', 'iteration', 'epoch', 't', 'lr', 'loss', 'accuracy', 'accuracy_top5', 'images_per_s', 'eta_s'];

/** Events → {train: [], val: []} of metric points (epoch, t, …). */
function emptySeries() { return { train: [], val: [] }; }

export function modelView(id, { navigate } = {}) {
  let alive = true;
  let job = null;
  let model = null;          // GET /models/ID
  const pts = emptySeries(); // every metric point of this model
  let t0 = null;             // the first metric's wall time
  let bulk = 0;
  const cleanups = [];
  const view = { x: 'epoch', log: false, smooth: 0, zoom: null };
  const compare = new Map(); // id → {name, colour, pts, t0, unsubscribe}

  /* ---------- progress tiles ---------- */
  const tEpoch = tile('epoch', 'Epoch'), tSpeed = tile('speed', 'Images/s'), tEta = tile('eta', 'Time left'),
    tLoss = tile('train', 'Train loss'), tVal = tile('val', 'Val accuracy');
  const progressCard = h('section', { class: 'card model-progress', 'aria-label': 'Training progress', hidden: true },
    h('div', { class: 'tiles model-tiles' }, tEpoch.el, tSpeed.el, tEta.el, tLoss.el, tVal.el));
  function tile(key, label) {
    const value = h('span', { class: 'tile-value num' }, '—'), sub = h('span', { class: 'tile-sub muted' }, '\u00a0');
    return { el: h('div', { class: 'tile', dataset: { tile: key } }, h('span', { class: 'tile-label' }, label), value, sub), value, sub };
  }

  /* ---------- charts ---------- */
  const lossCanvas = h('canvas', { role: 'img', 'aria-label': 'Loss and validation accuracy against epoch' });
  const lrCanvas = h('canvas', { role: 'img', 'aria-label': 'Learning rate against epoch' });
  const lossInner = h('div', { class: 'chart-inner curve-chart', dataset: { chart: 'loss' } }, lossCanvas);
  const lrInner = h('div', { class: 'chart-inner curve-chart lr-curve', dataset: { chart: 'lr' } }, lrCanvas);
  const chartMsg = h('p', { class: 'muted chart-msg' }, 'The curves appear with the first training report.');
  const xBtns = [['epoch', 'Epoch'], ['time', 'Wall time']].map(([v, label]) => {
    const b = h('button', { type: 'button', class: 'seg-btn', dataset: { x: v }, 'aria-pressed': String(v === view.x) }, label);
    b.addEventListener('click', () => { view.x = v; view.zoom = null; for (const o of xBtns) setAttr(o, 'aria-pressed', String(o === b)); redraw(true); });
    return b;
  });
  const logBox = h('input', { type: 'checkbox', id: `m${id}-log`, class: 'check' });
  logBox.addEventListener('change', () => { view.log = logBox.checked; redraw(true); });
  const smoothIn = h('input', { type: 'range', id: `m${id}-smooth`, min: 0, max: 0.99, step: 0.01, value: 0, class: 'smooth-range' });
  const smoothOut = h('output', { for: smoothIn.id, class: 'num smooth-val' }, '0');
  smoothIn.addEventListener('input', () => { view.smooth = Number(smoothIn.value); setText(smoothOut, view.smooth.toFixed(2)); redraw(); });
  const resetBtn = h('button', { type: 'button', class: 'btn btn-small', disabled: true, dataset: { action: 'reset-zoom' } }, 'Reset zoom');
  resetBtn.addEventListener('click', () => { view.zoom = null; redraw(true); });
  const csvBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'csv' } }, icon('download'), 'CSV');
  const jsonBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'json' } }, icon('download'), 'JSON');
  csvBtn.addEventListener('click', () => download('csv'));
  jsonBtn.addEventListener('click', () => download('json'));
  const cmpSel = h('select', { class: 'input select cmp-select', 'aria-label': 'Compare with another model' }, h('option', { value: '' }, 'Compare with…'));
  const cmpChips = h('div', { class: 'chips cmp-chips' });
  cmpSel.addEventListener('focus', loadModelList, { once: true });
  cmpSel.addEventListener('change', () => {
    const v = cmpSel.value;
    cmpSel.value = '';
    if (v === 'group') addGroup();
    else if (/^\d+$/.test(v)) addCompare(Number(v));
  });
  const pointCount = h('span', { class: 'card-count muted num' });
  const chartsCard = h('section', { class: 'card curves-card', 'aria-labelledby': `m${id}-curves` },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: `m${id}-curves` }, 'Training curves'), pointCount,
      h('span', { class: 'spacer' }), csvBtn, jsonBtn),
    h('div', { class: 'curve-toolbar' },
      h('div', { class: 'seg', role: 'group', 'aria-label': 'Horizontal axis' }, xBtns),
      h('label', { class: 'tool', for: logBox.id }, logBox, 'Log scale'),
      h('label', { class: 'tool', for: smoothIn.id }, 'Smoothing', smoothIn, smoothOut),
      resetBtn, h('span', { class: 'spacer' }), cmpSel),
    cmpChips,
    h('div', { class: 'ds-body' }, chartMsg, lossInner, lrInner,
      h('p', { class: 'muted chart-help' }, 'Drag across a chart to zoom, double-click to reset; click a legend entry to hide its series.')));

  /* ---------- hardware ---------- */
  const hwBody = h('dl', { class: 'kv hw-kv' });
  const hwCard = h('section', { class: 'card side-card hw-card', 'aria-labelledby': `m${id}-hw`, hidden: true },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: `m${id}-hw` }, 'Hardware')), hwBody);

  /* ---------- snapshots ---------- */
  const snapBody = h('tbody');
  const snapCount = h('span', { class: 'card-count muted' });
  // Pruning: keep the last N, or the best (and always the latest); asked once the job has
  // ended, with the server's dry run saying what goes and what it frees.
  const keepIn = h('input', { type: 'number', class: 'input num-input keep-n', id: `m${id}-keep`, min: 1, max: 10000, step: 1, value: 1, style: { width: '4.5em' } });
  const keepLastBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'keep-last' } }, 'Keep last');
  const keepBestBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'keep-best' } }, 'Keep best');
  const pruneTools = h('div', { class: 'prune-tools', role: 'group', 'aria-label': 'Delete snapshots', hidden: true },
    h('label', { class: 'sr-only', for: keepIn.id }, 'How many of the latest snapshots to keep'), keepLastBtn, keepIn, keepBestBtn);
  keepLastBtn.addEventListener('click', () => {
    const n = Number(keepIn.value);
    if (!Number.isInteger(n) || n < 1) { toast('Keep last: a whole number, 1 or more.', 'error'); keepIn.focus(); return; }
    prune({ keep_last: n }, `Keep the last ${n} snapshot${n === 1 ? '' : 's'}`);
  });
  keepBestBtn.addEventListener('click', () => prune({ keep: 'best' }, 'Keep the best snapshot'));
  const snapCard = h('section', { class: 'card snaps-card', 'aria-labelledby': `m${id}-snaps` },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: `m${id}-snaps` }, 'Snapshots'), snapCount,
      h('span', { class: 'spacer' }), pruneTools),
    h('div', { class: 'table-scroll' }, h('table', { class: 'data-table snaps-table' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Epoch'), h('th', { scope: 'col', class: 'r' }, 'Size'),
        h('th', { scope: 'col', class: 'r' }, 'Train loss'), h('th', { scope: 'col', class: 'r' }, 'Val loss'),
        h('th', { scope: 'col', class: 'r' }, 'Val accuracy'), h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Download')))),
      snapBody)));

  /* ---------- resume ---------- */
  const resumeBtn = h('button', { type: 'button', class: 'btn', hidden: true, dataset: { action: 'resume' } }, icon('next'), 'Resume');
  resumeBtn.addEventListener('click', resumeDialog);

  const main = h('div', { class: 'model-main' }, progressCard, chartsCard, snapCard, classifyPanel(id).el);
  const side = h('div', { class: 'model-side' }, hwCard);

  /* ---------- the data ---------- */
  function event(ev) {
    if (ev.type === 'metric' && (ev.kind === 'train' || ev.kind === 'val')) {
      const p = {};
      for (const k of FIELDS) if (ev[k] !== undefined) p[k] = ev[k];
      if (t0 === null && typeof ev.t === 'number') t0 = ev.t;
      pts[ev.kind].push(p);
      redraw(); // the tiles are drawn with the charts, at most a few times a second
    } else if (ev.type === 'result' || (ev.type === 'log' && /^snapshot /.test(ev.msg || ''))) {
      refreshModelSoon();
    }
  }
  function setBulk(on) { bulk += on ? 1 : -1; if (!bulk) redraw(true); }

  function best() {
    const v = effective(pts.val);
    if (!v.length) return null;
    const acc = v.filter((p) => typeof p.accuracy === 'number');
    if (acc.length) return acc.reduce((a, b) => (b.accuracy > a.accuracy ? b : a));
    return v.filter((p) => typeof p.loss === 'number').reduce((a, b) => (b.loss < a.loss ? b : a), v[0]);
  }

  function renderTiles() {
    const tr = pts.train[pts.train.length - 1];
    if (!tr) return;
    // Hidden until the first timed report: before it there is no speed and no ETA to show.
    const timed = pts.train.some((p) => typeof p.images_per_s === 'number'); // stops at the first
    progressCard.hidden = !timed;
    const total = job && job.params ? job.params.epochs : null;
    setText(tEpoch.value, (tr.epoch ?? 0).toFixed(2));
    setText(tEpoch.sub, total ? `of ${total} · iteration ${tr.iteration}` : `iteration ${tr.iteration}`);
    const lastSpeed = pts.train.findLast((p) => typeof p.images_per_s === 'number');
    setText(tSpeed.value, lastSpeed ? Math.round(lastSpeed.images_per_s).toLocaleString() : '—');
    setText(tSpeed.sub, lastSpeed ? `batch ${model && model.settings ? model.settings.batch_size : '?'}` : '\u00a0');
    renderEta();
    setText(tLoss.value, num(tr.loss));
    setText(tLoss.sub, `lr ${fmtLr(tr.lr)}`);
    const b = best(), lv = pts.val[pts.val.length - 1];
    setText(tVal.value, lv && typeof lv.accuracy === 'number' ? pct(lv.accuracy) : lv ? num(lv.loss) : '—');
    setText(tVal.sub, b ? (typeof b.accuracy === 'number' ? `best ${pct(b.accuracy)} at epoch ${+b.epoch.toFixed(2)}` : `best loss at epoch ${+b.epoch.toFixed(2)}`) : 'no validation yet');
  }
  function renderEta() {
    const running = job && job.state === 'running';
    const eta = running && typeof job.eta_s === 'number' ? Math.max(0, job.eta_s - (Date.now() - job._rx) / 1000) : null;
    setText(tEta.value, running ? (eta === null ? '—' : duration(eta)) : job ? job.state : '—');
    setText(tEta.sub, running ? 'estimated' : '\u00a0');
  }
  const etaTimer = setInterval(() => { if (job && !progressCard.hidden) renderEta(); }, 1000);
  cleanups.push(() => clearInterval(etaTimer));

  /* ---------- drawing ---------- */
  let charts = null;   // {loss, lr}
  let chartLoad = null;
  let drawQueued = false, lastDraw = 0, drawTimer = null;
  function redraw(now = false) {
    if (!alive || drawQueued) return;
    const wait = now ? 0 : Math.max(0, (bulk ? 500 : 150) - (performance.now() - lastDraw));
    drawQueued = true;
    clearTimeout(drawTimer);
    drawTimer = setTimeout(() => requestAnimationFrame(() => { drawQueued = false; draw(); }), wait);
  }

  const xOf = (p, base) => (view.x === 'epoch' ? p.epoch : (p.t - base));
  /** Averages buckets of points down to at most max; keeps the first and the last. */
  function thin(arr, max) {
    if (arr.length <= max) return arr;
    const out = [arr[0]];
    const k = Math.ceil((arr.length - 2) / (max - 2));
    for (let i = 1; i < arr.length - 1; i += k) {
      const end = Math.min(arr.length - 1, i + k);
      let sx = 0, sy = 0, n = 0;
      for (let j = i; j < end; j++) { sx += arr[j].x; sy += arr[j].y; n++; }
      out.push({ x: sx / n, y: sy / n });
    }
    out.push(arr[arr.length - 1]);
    return out;
  }
  /**
   * The curve the weights went through: a resumed run starts again from a snapshot, so the
   * points of the earlier run past that iteration are dropped from the drawing (they stay
   * in the data, and in the downloads).
   */
  function effective(list) {
    const out = [];
    for (const p of list) {
      while (out.length && out[out.length - 1].iteration >= p.iteration) out.pop();
      out.push(p);
    }
    return out;
  }
  /** TensorBoard's smoothing: a debiased exponential moving average. */
  function smooth(arr, w) {
    if (!w) return arr;
    let last = 0, n = 0;
    return arr.map((p) => { last = last * w + (1 - w) * p.y; n++; return { x: p.x, y: last / (1 - w ** n) }; });
  }
  function series(list, key, base, { scale = 1, sm = true } = {}) {
    let arr = [];
    for (const p of effective(list)) if (typeof p[key] === 'number' && typeof (view.x === 'epoch' ? p.epoch : p.t) === 'number') arr.push({ x: xOf(p, base), y: p[key] * scale });
    if (sm) arr = smooth(arr, view.smooth);
    if (view.zoom) {
      const [a, b] = view.zoom, pad = (b - a) * 0.05;
      // Keep one point beyond each edge, so that lines run to the border of the plot.
      let i0 = arr.findIndex((p) => p.x >= a - pad), i1 = arr.findLastIndex((p) => p.x <= b + pad);
      if (i0 < 0) i0 = arr.length;
      arr = arr.slice(Math.max(0, i0 - 1), i1 + 2);
    }
    if (view.log) arr = arr.filter((p) => p.y > 0);
    return thin(arr, MAX_DRAWN);
  }

  async function draw() {
    lastDraw = performance.now();
    renderTiles();
    const n = pts.train.length + pts.val.length;
    setText(pointCount, n ? `${n.toLocaleString()} points` : '');
    chartMsg.hidden = n > 0 || compare.size > 0;
    if (!n && !compare.size) return;
    if (!charts) {
      if (!chartLoad) chartLoad = loadChart().then(makeCharts, (e) => { setText(chartMsg, `No charts: ${e.message} (libjs-chart.js)`); chartMsg.hidden = false; });
      await chartLoad;
      if (!charts) return;
    }
    const c = colours();
    const ds = [];
    const base = t0 ?? 0;
    const hasAcc = pts.val.some((p) => typeof p.accuracy === 'number');
    ds.push(line('train loss', series(pts.train, 'loss', base), c.train, 'y', { key: 'train-loss' }));
    ds.push(line('val loss', series(pts.val, 'loss', base), c.val, 'y', { key: 'val-loss', points: true }));
    if (hasAcc) ds.push(line('val accuracy (top-1)', series(pts.val, 'accuracy', base, { scale: 100, sm: false }), c.acc, 'y2', { key: 'val-acc', points: true }));
    if (pts.val.some((p) => typeof p.accuracy_top5 === 'number'))
      ds.push(line('val accuracy (top-5)', series(pts.val, 'accuracy_top5', base, { scale: 100, sm: false }), c.acc5, 'y2', { key: 'val-acc5', points: true, dash: [4, 3] }));
    for (const [cid, m] of compare) {
      const cb = m.t0 ?? 0;
      ds.push(line(`#${cid} train loss`, series(m.pts.train, 'loss', cb), m.colour, 'y', { key: `c${cid}-train`, dash: [6, 4], width: 1.5 }));
      ds.push(line(`#${cid} val loss`, series(m.pts.val, 'loss', cb), m.colour, 'y', { key: `c${cid}-val`, points: true, width: 1.5 }));
      if (m.pts.val.some((p) => typeof p.accuracy === 'number'))
        ds.push(line(`#${cid} val accuracy`, series(m.pts.val, 'accuracy', cb, { scale: 100, sm: false }), m.colour, 'y2', { key: `c${cid}-acc`, points: true, dash: [2, 2], width: 1.5 }));
    }
    const lrDs = [line('learning rate', series(pts.train, 'lr', base, { sm: false }), c.lr, 'y', { key: 'lr', stepped: true })];
    for (const [cid, m] of compare) lrDs.push(line(`#${cid} learning rate`, series(m.pts.train, 'lr', m.t0 ?? 0, { sm: false }), m.colour, 'y', { key: `c${cid}-lr`, dash: [6, 4], width: 1.5, stepped: true }));

    const b = best();
    const marker = b && (view.x === 'epoch' || typeof b.t === 'number')
      ? { x: xOf(b, base), label: typeof b.accuracy === 'number' ? `best ${pct(b.accuracy)}` : 'best val loss' } : null;
    const xTitle = view.x === 'epoch' ? 'epoch' : 'wall time';
    for (const [ch, sets] of [[charts.loss, ds], [charts.lr, lrDs]]) {
      mergeDatasets(ch, sets);
      const x = ch.options.scales.x;
      x.min = view.zoom ? view.zoom[0] : (view.x === 'epoch' ? 0 : undefined);
      x.max = view.zoom ? view.zoom[1] : undefined;
      x.title.text = xTitle;
      x.ticks.callback = view.x === 'epoch' ? (v) => +Number(v).toFixed(2) : (v) => duration(v);
      ch.options.scales.y.type = view.log ? 'logarithmic' : 'linear';
      ch.options.plugins.ddMarker = marker;
    }
    charts.loss.options.scales.y2.display = ds.some((d) => d.yAxisID === 'y2');
    charts.loss.update('none');
    charts.lr.update('none');
    resetBtn.disabled = !view.zoom;
    lossCanvas.dataset.points = String(ds.reduce((a, d) => a + d.data.length, 0));
    lossCanvas.dataset.trainPoints = String(pts.train.length);
    lossCanvas.dataset.lastIteration = String(pts.train.length ? pts.train[pts.train.length - 1].iteration : 0);
  }

  /** Replace the datasets, keeping each one's hidden state (the legend's on/off) by key. */
  function mergeDatasets(ch, sets) {
    const hidden = new Map(ch.data.datasets.map((d, i) => [d.key, !ch.isDatasetVisible(i)]));
    ch.data.datasets = sets;
    sets.forEach((d, i) => { if (hidden.get(d.key)) ch.setDatasetVisibility(i, false); });
  }
  function line(label, data, colour, axis, { key, points = false, dash = null, width = 2, stepped = false }) {
    return { key, label, data, yAxisID: axis, borderColor: colour, backgroundColor: colour, borderWidth: width,
      borderDash: dash || [], pointRadius: points && data.length < 80 ? 2.5 : 0, pointHoverRadius: 4, tension: 0, stepped,
      spanGaps: true, parsing: false, normalized: true };
  }
  function colours() {
    return {
      train: cssVar('--split-train') || '#0969da', val: cssVar('--split-val') || '#d4a72c',
      acc: cssVar('--done-fg') || '#1a7f37', acc5: cssVar('--interrupted-fg') || '#8250df', lr: cssVar('--accent') || '#0969da',
      text: cssVar('--muted') || '#59636e', grid: cssVar('--border-muted') || '#e4e8ec', marker: cssVar('--danger') || '#cf222e',
    };
  }

  function makeCharts(Chart) {
    if (!alive) return;
    const c = colours();
    const markerPlugin = {
      id: 'ddMarker',
      afterDatasetsDraw(chart) {
        const m = chart.options.plugins.ddMarker;
        const xs = chart.scales.x;
        if (!m || typeof m.x !== 'number' || m.x < xs.min || m.x > xs.max) return;
        const x = xs.getPixelForValue(m.x), { top, bottom } = chart.chartArea, ctx = chart.ctx;
        ctx.save();
        ctx.strokeStyle = c.marker; ctx.fillStyle = c.marker; ctx.setLineDash([3, 3]); ctx.lineWidth = 1;
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
        ctx.setLineDash([]); ctx.font = `600 11px ${cssVar('--font') || 'sans-serif'}`;
        const tw = ctx.measureText(m.label).width;
        ctx.fillText(m.label, Math.min(x + 4, chart.chartArea.right - tw - 2), top + 11);
        ctx.restore();
      },
    };
    const base = (yTitle, yTicks) => ({
      responsive: true, maintainAspectRatio: false, animation: false, parsing: false, normalized: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      plugins: {
        ddMarker: null,
        legend: { position: 'top', align: 'end', labels: { color: c.text, boxWidth: 12, boxHeight: 2, usePointStyle: false } },
        tooltip: {
          callbacks: {
            title: (items) => (items.length ? (view.x === 'epoch' ? `epoch ${(+items[0].parsed.x).toFixed(2)}` : duration(items[0].parsed.x)) : ''),
            label: (it) => `${it.dataset.label}: ${it.dataset.yAxisID === 'y2' ? `${it.parsed.y.toFixed(2)}%` : yTicks(it.parsed.y)}`,
          },
        },
      },
      scales: {
        x: { type: 'linear', title: { display: true, text: 'epoch', color: c.text }, ticks: { color: c.text, maxTicksLimit: 12 }, grid: { color: c.grid } },
        y: { type: 'linear', title: { display: true, text: yTitle, color: c.text }, ticks: { color: c.text, callback: (v) => yTicks(v) }, grid: { color: c.grid } },
      },
    });
    const lossOpts = base('loss', (v) => num(+Number(v).toPrecision(4)));
    lossOpts.scales.y2 = { type: 'linear', position: 'right', min: 0, max: 100, title: { display: true, text: 'accuracy %', color: c.text },
      ticks: { color: c.text }, grid: { drawOnChartArea: false } };
    const lrOpts = base('learning rate', (v) => fmtLr(Number(v)));
    charts = {
      loss: new Chart(lossCanvas, { type: 'line', data: { datasets: [] }, options: lossOpts, plugins: [markerPlugin] }),
      lr: new Chart(lrCanvas, { type: 'line', data: { datasets: [] }, options: lrOpts, plugins: [markerPlugin] }),
    };
    for (const [inner, ch] of [[lossInner, charts.loss], [lrInner, charts.lr]]) dragZoom(inner, ch);
    lossCanvas.dataset.ready = '1';
  }
  cleanups.push(onSchemeChange(() => { if (charts) { charts.loss.destroy(); charts.lr.destroy(); charts = null; chartLoad = null; redraw(true); } }));

  /** Drag across the plot to zoom both charts to that x range; double-click resets. */
  function dragZoom(inner, ch) {
    const band = h('div', { class: 'zoom-band', hidden: true });
    inner.append(band);
    let start = null;
    const xAt = (e) => e.clientX - inner.getBoundingClientRect().left;
    inner.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      const x = xAt(e), a = ch.chartArea;
      if (!a || x < a.left || x > a.right) return;
      start = x;
      inner.setPointerCapture(e.pointerId);
      Object.assign(band.style, { left: `${x}px`, width: '0px', top: `${a.top}px`, height: `${a.bottom - a.top}px` });
      band.hidden = false;
    });
    inner.addEventListener('pointermove', (e) => {
      if (start === null) return;
      const a = ch.chartArea, x = Math.max(a.left, Math.min(a.right, xAt(e)));
      band.style.left = `${Math.min(start, x)}px`;
      band.style.width = `${Math.abs(x - start)}px`;
    });
    const end = (e) => {
      if (start === null) return;
      const a = ch.chartArea, x = Math.max(a.left, Math.min(a.right, xAt(e)));
      band.hidden = true;
      const s = start;
      start = null;
      if (Math.abs(x - s) < 6) return;
      const v0 = ch.scales.x.getValueForPixel(Math.min(s, x)), v1 = ch.scales.x.getValueForPixel(Math.max(s, x));
      if (v1 > v0) { view.zoom = [v0, v1]; redraw(true); }
    };
    inner.addEventListener('pointerup', end);
    inner.addEventListener('pointercancel', () => { start = null; band.hidden = true; });
    inner.addEventListener('dblclick', () => { if (view.zoom) { view.zoom = null; redraw(true); } });
  }

  /* ---------- downloads ---------- */
  function download(kind) {
    const rows = [...pts.train, ...pts.val].sort((a, b) => (a.iteration - b.iteration) || (a.kind === 'train' ? -1 : 1));
    let blob, name;
    if (kind === 'csv') {
      const cell = (v) => (v === undefined || v === null ? '' : typeof v === 'number' ? String(v) : `"${String(v).replace(/"/g, '""')}"`);
      const text = [FIELDS.join(','), ...rows.map((r) => FIELDS.map((k) => cell(r[k])).join(','))].join('\n') + '\n';
      blob = new Blob([text], { type: 'text/csv' });
      name = `model-${id}-metrics.csv`;
    } else {
      blob = new Blob([JSON.stringify({ model: id, name: job ? job.name : null, metrics: rows }, null, 1)], { type: 'application/json' });
      name = `model-${id}-metrics.json`;
    }
    const url = URL.createObjectURL(blob);
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  /* ---------- compare ---------- */
  let modelList = null;
  async function loadModelList() {
    try {
      const r = await get('/models?limit=200');
      modelList = r.models.filter((m) => m.id !== id);
    } catch { modelList = []; }
    if (!alive) return;
    const group = job && job.params ? job.params.group : null;
    setChildren(cmpSel, h('option', { value: '' }, modelList.length ? 'Compare with…' : 'No other model to compare'),
      group ? h('option', { value: 'group', text: `Every model in group “${group}”` }) : null,
      modelList.map((m) => h('option', { value: m.id, text: `#${m.id} ${m.name || 'Model'}` })));
  }
  async function addGroup() {
    const group = job && job.params ? job.params.group : null;
    if (!group || !modelList) return;
    const ids = [];
    for (const m of modelList) {
      try {
        const j = (await get(`/jobs/${m.id}`)).job;
        if (j.params && j.params.group === group) ids.push(m.id);
      } catch { /* gone */ }
    }
    if (!ids.length) toast(`No other model is in group “${group}”.`);
    for (const cid of ids) addCompare(cid);
  }
  async function addCompare(cid) {
    if (compare.has(cid) || cid === id) return;
    const used = new Set([...compare.values()].map((m) => m.colour));
    const colour = PALETTE.find((c) => !used.has(c)) || PALETTE[compare.size % PALETTE.length];
    const m = { name: (modelList || []).find((x) => x.id === cid)?.name || `Model ${cid}`, colour, pts: emptySeries(), t0: null, last: 0 };
    compare.set(cid, m);
    renderChips();
    const take = (ev) => {
      if (ev.seq <= m.last) return;
      m.last = ev.seq;
      if (ev.type === 'metric' && (ev.kind === 'train' || ev.kind === 'val')) {
        if (m.t0 === null) m.t0 = ev.t;
        m.pts[ev.kind].push(ev);
      }
    };
    m.unsubscribe = live.subscribe(cid);
    m.off = live.on('message', (msg) => {
      if (msg.type === 'events' && msg.job === cid && compare.get(cid) === m) { msg.events.forEach(take); redraw(); }
    });
    try {
      for (let guard = 0; guard < 1000; guard++) {
        const r = await get(`/jobs/${cid}/events?after=${m.last}&limit=2000`);
        if (compare.get(cid) !== m) return;
        r.events.forEach(take);
        if (!r.more || !r.events.length) break;
      }
    } catch (e) {
      showError(e, `Cannot compare with #${cid}`);
      removeCompare(cid);
      return;
    }
    redraw(true);
  }
  function removeCompare(cid) {
    const m = compare.get(cid);
    if (!m) return;
    m.unsubscribe && m.unsubscribe();
    m.off && m.off();
    compare.delete(cid);
    renderChips();
    redraw(true);
  }
  function renderChips() {
    setChildren(cmpChips, [...compare].map(([cid, m]) => h('span', { class: 'chip cmp-chip', dataset: { compare: cid } },
      h('span', { class: 'cmp-swatch', style: { background: m.colour }, 'aria-hidden': 'true' }),
      h('a', { href: `/models/${cid}`, text: `#${cid} ${m.name}` }),
      h('button', { type: 'button', class: 'chip-x', 'aria-label': `Stop comparing with #${cid}`, onclick: () => removeCompare(cid) }, '×'))));
    cmpChips.hidden = compare.size === 0;
  }
  cleanups.push(() => { for (const cid of [...compare.keys()]) removeCompare(cid); });

  /* ---------- the model record: snapshots, settings ---------- */
  let modelTimer = null;
  function refreshModelSoon() { clearTimeout(modelTimer); modelTimer = setTimeout(refreshModel, 300); }
  cleanups.push(() => clearTimeout(modelTimer));
  async function refreshModel() {
    try {
      const r = await get(`/models/${id}`);
      if (!alive) return;
      model = r.model;
      renderSnapshots();
      renderTiles();
      renderResume();
    } catch (e) {
      if (alive && !(e instanceof ApiError && e.status === 404)) showError(e, 'Model');
    }
  }
  /** The last point of a kind at an epoch (within half a report). */
  function at(list, epoch) {
    let hit = null;
    for (const p of list) if (Math.abs(p.epoch - epoch) < 1e-6) hit = p;
    return hit;
  }
  function renderSnapshots() {
    const snaps = (model && model.snapshots) || [];
    const total = snaps.reduce((a, s) => a + (s.bytes || 0), 0);
    setText(snapCount, snaps.length ? `${snaps.length} · ${bytes(total)}` : '');
    if (!snaps.length) {
      setChildren(snapBody, h('tr', null, h('td', { colspan: 6, class: 'muted' }, 'No snapshot yet: one is written every snapshot interval, and when the job is aborted.')));
      return;
    }
    const b = best();
    setChildren(snapBody, [...snaps].reverse().map((s) => {
      const tr = at(pts.train, s.epoch), v = at(pts.val, s.epoch);
      const isBest = b && v && b === v;
      return h('tr', { dataset: { epoch: s.epoch } },
        h('th', { scope: 'row', class: 'num' }, String(s.epoch), isBest ? h('span', { class: 'best-tag' }, 'best') : null),
        h('td', { class: 'r num', text: bytes(s.bytes) }),
        h('td', { class: 'r num', text: tr ? num(tr.loss) : '—' }),
        h('td', { class: 'r num', text: v ? num(v.loss) : '—' }),
        h('td', { class: 'r num', text: v && typeof v.accuracy === 'number' ? pct(v.accuracy) : '—' }),
        h('td', null, h('a', { href: s.url, download: `model-${id}-epoch-${s.epoch}.safetensors`, class: 'icon-btn', title: 'Download the weights', 'aria-label': `Download the weights of epoch ${s.epoch}` }, icon('download')),
          s === snaps[snaps.length - 1] || !ended() ? null
            : h('button', { type: 'button', class: 'icon-btn', title: 'Delete this snapshot', 'aria-label': `Delete the snapshot of epoch ${s.epoch}`,
              dataset: { action: 'delete-snapshot' }, onclick: () => deleteSnapshot(s) }, icon('trash'))));
    }));
    renderPrune();
  }
  const ended = () => !!job && !ACTIVE.has(job.state);
  function renderPrune() {
    const snaps = (model && model.snapshots) || [];
    pruneTools.hidden = !ended() || snaps.length < 2;
  }
  function freedText(r) {
    const eps = r.deleted.map((d) => d.label);
    return `${eps.length} snapshot${eps.length === 1 ? '' : 's'} (epoch${eps.length === 1 ? '' : 's'} ${eps.join(', ')}), ${bytes(r.freed_bytes)}`;
  }
  /** Ask the server what body would delete, confirm with what it frees, then delete. */
  async function prune(body, title) {
    let dry;
    try {
      dry = await post(`/models/${id}/snapshots/prune`, { ...body, dry_run: true });
    } catch (e) { if (alive) showError(e, 'Snapshots'); return; }
    if (!alive) return;
    if (!dry.deleted.length) { toast(`Nothing to delete: every snapshot is kept (${dry.kept.join(', ')}).`); return; }
    const why = dry.best ? h('p', { class: 'muted' }, `The best validation ${dry.best.by === 'accuracy' ? `accuracy, ${pct(dry.best.value)}` : `loss, ${num(dry.best.value)}`}, was at epoch ${dry.best.epoch}.`) : null;
    const ok = await confirmDialog({
      title, confirm: `Delete and free ${bytes(dry.freed_bytes)}`, danger: true,
      body: [h('p', { dataset: { frees: dry.freed_bytes } }, `This deletes ${freedText(dry)} of weights and solver states, and keeps epoch${dry.kept.length === 1 ? '' : 's'} ${dry.kept.join(', ')}.`), why,
        h('p', { class: 'muted' }, 'The latest snapshot is always kept, so the model can still be resumed.')],
    });
    if (!ok || !alive) return;
    try {
      const r = await post(`/models/${id}/snapshots/prune`, body);
      if (!alive) return;
      toast(`Deleted ${freedText(r)}.`, 'success');
      refreshModel();
    } catch (e) { if (alive) showError(e, 'Snapshots'); }
  }
  async function deleteSnapshot(s) {
    const ok = await confirmDialog({
      title: `Delete the snapshot of epoch ${s.epoch}?`, confirm: 'Delete', danger: true,
      body: h('p', { dataset: { frees: s.bytes } }, `It frees ${bytes(s.bytes)} of weights, and its solver state. The model can no longer be resumed or classify from epoch ${s.epoch}.`),
    });
    if (!ok || !alive) return;
    try {
      const r = await del(`/models/${id}/snapshots/${encodeURIComponent(s.label)}`);
      if (!alive) return;
      toast(`Deleted ${freedText(r)}.`, 'success');
      refreshModel();
    } catch (e) { if (alive) showError(e, 'Snapshots'); }
  }

  /* ---------- hardware ---------- */
  let hwTimer = null, hwMissing = false;
  async function pollHardware() {
    clearTimeout(hwTimer);
    if (!alive || !job || job.state !== 'running' || hwMissing) { hwCard.hidden = hwMissing || !job || job.state !== 'running'; return; }
    try {
      const r = await get(`/jobs/${id}/resources`);
      if (!alive) return;
      // the GPUs it holds, with NVML's readings where the server has them
      const gpus = Array.isArray(r.gpus) ? r.gpus : [];
      hwCard.hidden = false;
      setChildren(hwBody,
        h('dt', null, 'CPU'), h('dd', { class: 'num', dataset: { hw: 'cpu' } }, typeof r.cpu_pct === 'number' ? `${Math.round(r.cpu_pct)}%` : '—'),
        h('dt', null, 'Memory'), h('dd', { class: 'num', dataset: { hw: 'rss' } }, bytes(r.rss_bytes)),
        h('dt', null, 'Threads'), h('dd', { class: 'num' }, r.threads ?? '—'),
        h('dt', null, gpus.length > 1 ? `GPUs (${gpus.length})` : 'GPUs'), h('dd', { dataset: { hw: 'gpus' } }, gpus.length ? gpus.map((g) => h('div', { text: [
          `GPU ${g.id}${g.name ? ` · ${g.name}` : ''}`,
          typeof g.utilization === 'number' ? `${Math.round(g.utilization)}% busy` : null,
          typeof g.memory_used === 'number' ? `${bytes(g.memory_used)}${typeof g.memory_total === 'number' ? ` of ${bytes(g.memory_total)}` : ''}` : null,
        ].filter(Boolean).join(' · ') })) : h('span', { class: 'muted' }, 'none')));
    } catch (e) {
      // 404/405: this server has no resources route: stop asking.  409: not running (yet).
      if (e instanceof ApiError && (e.status === 404 || e.status === 405)) hwMissing = true;
      if (e instanceof ApiError && e.status !== 0) hwCard.hidden = true;
    }
    if (alive && job && job.state === 'running' && !hwMissing) hwTimer = setTimeout(pollHardware, 2000);
  }
  cleanups.push(() => clearTimeout(hwTimer));

  /* ---------- resume / extend ---------- */
  function renderResume() {
    const snaps = (model && model.snapshots) || [];
    resumeBtn.hidden = !job || ACTIVE.has(job.state) || !snaps.length;
    const latest = snaps.length ? snaps[snaps.length - 1].epoch : 0;
    const total = job && job.params ? job.params.epochs : 0;
    setText(resumeBtn.lastChild, latest < total ? 'Resume' : 'Extend');
    setAttr(resumeBtn, 'title', latest < total ? `Go on from epoch ${latest} to ${total}` : 'Train more epochs from a snapshot');
  }
  function resumeDialog() {
    const snaps = (model && model.snapshots) || [];
    if (!snaps.length) return;
    const latest = snaps[snaps.length - 1].epoch;
    const total = job.params.epochs;
    const extra = h('input', { type: 'number', class: 'input num-input', id: `m${id}-extend`, min: 0, max: 10000, step: 1,
      value: latest < total ? 0 : Math.max(1, Math.round(total / 3)) });
    const snapSel = h('select', { class: 'input select', id: `m${id}-from` },
      [...snaps].reverse().map((s) => h('option', { value: s.epoch }, `Epoch ${s.epoch}${s.epoch === latest ? ' (latest)' : ''}`)));
    const sum = h('p', { class: 'muted resume-sum', 'aria-live': 'polite' });
    const err = h('p', { class: 'field-error', hidden: true });
    const update = () => {
      const n = Number(extra.value) || 0, from = Number(snapSel.value);
      setText(sum, `Trains from epoch ${from} to epoch ${total + n} (${total + n - from} epoch${total + n - from === 1 ? '' : 's'}); the curves go on from there.`);
    };
    extra.addEventListener('input', update);
    snapSel.addEventListener('change', update);
    update();
    const ok = h('button', { type: 'submit', class: 'btn btn-primary', value: 'ok', dataset: { action: 'resume-confirm' } }, 'Resume');
    const cancel = h('button', { type: 'button', class: 'btn' }, 'Cancel');
    const form = h('form', { method: 'dialog' },
      h('h2', { class: 'dialog-title' }, `Resume model #${id}`),
      h('div', { class: 'dialog-body' },
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: extra.id }, 'Extend by (epochs)'), extra,
          h('p', { class: 'field-hint' }, `It was set to ${total} epochs; 0 finishes those.`)),
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: snapSel.id }, 'From the snapshot at'), snapSel),
        sum, err),
      h('div', { class: 'dialog-actions' }, cancel, ok));
    const dlg = h('dialog', { class: 'dialog', 'aria-label': 'Resume' }, form);
    cancel.addEventListener('click', () => dlg.close());
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const n = Number(extra.value);
      if (!Number.isInteger(n) || n < 0) { setText(err, 'A whole number of epochs, 0 or more.'); err.hidden = false; extra.focus(); return; }
      ok.disabled = true;
      try {
        await post(`/models/${id}/resume`, { epochs: total + n, snapshot: Number(snapSel.value) });
        dlg.close();
        toast(`Model #${id} is queued again.`, 'success');
      } catch (ex) {
        setText(err, ex.message);
        err.hidden = false;
        ok.disabled = false;
      }
    });
    dlg.addEventListener('close', () => { dlg.remove(); resumeBtn.focus(); });
    document.body.append(dlg);
    dlg.showModal();
    extra.focus();
    extra.select();
  }

  /** A line for the delete dialog: what deleting frees. */
  async function deleteNote() {
    if (!model) await refreshModel();
    const snaps = (model && model.snapshots) || [];
    const total = snaps.reduce((a, s) => a + (s.bytes || 0), 0);
    return snaps.length ? h('p', { dataset: { frees: total } }, `It frees at least ${bytes(total)}: ${snaps.length} snapshot${snaps.length === 1 ? '' : 's'} of weights, with their solver states.`) : null;
  }

  let lastState = null;
  function update(j) {
    const first = !job;
    job = j;
    if (first || j.state !== lastState || (j.events !== undefined && j.state === 'running' && first)) refreshModelSoon();
    if (j.state !== lastState) {
      lastState = j.state;
      if (j.state === 'running') pollHardware();
      else hwCard.hidden = true;
    }
    renderResume();
    renderPrune();
    renderEta();
  }

  return {
    main, side, actions: [resumeBtn, evalButton(id, () => model, { navigate })],
    update, event, setBulk, deleteNote,
    destroy() {
      alive = false;
      clearTimeout(drawTimer);
      cleanups.forEach((f) => f());
      if (charts) { charts.loss.destroy(); charts.lr.destroy(); }
    },
  };
}

function pct(v) { return `${(v * 100).toFixed(1)}%`; }
