// eval_view.js — the page of an evaluation job (kind "evaluation", mounted by job.js):
// live progress and running accuracy while it runs; then top-1/top-5, a per-class
// precision/recall/F1 table, the confusion matrix as a heat map (sticky headers,
// scrollable; a canvas above 200 classes) with its CSV, the misclassified images
// most confident first, and the top-N images of a class.  Also evalButton(), the
// "Evaluate" button and dialog that model_view.js puts on a model's page.
// Every text from the server goes in as text (dom.js h()).
import { h, setText, setChildren, icon } from './dom.js';
import { get, post, ApiError } from './api.js';
import { toast, showError } from './ui.js';

const pct = (v) => (v === null || v === undefined ? '—' : `${(v * 100).toFixed(2)}%`);
const fix = (v) => (v === null || v === undefined ? '—' : v.toFixed(3));

export function evalView(id, { navigate } = {}) {
  let alive = true;
  let job = null;
  let loaded = false;

  const tile = (label) => {
    const value = h('span', { class: 'tile-value num' }, '—');
    return { el: h('div', { class: 'tile' }, h('span', { class: 'tile-label' }, label), value), value };
  };
  const tCount = tile('Images'), tSpeed = tile('Images/s'), tTop1 = tile('Top-1 accuracy'), tTop5 = tile('Top-5 accuracy'),
    tErr = tile('Unreadable');
  const progressCard = h('section', { class: 'card eval-summary', 'aria-label': 'Evaluation' },
    h('div', { class: 'tiles' }, tCount.el, tSpeed.el, tTop1.el, tTop5.el, tErr.el));
  const downloads = h('p', { class: 'eval-downloads' },
    h('a', { class: 'btn', href: `/api/v1/evaluations/${id}/results.csv`, download: '' }, icon('download'), 'results.csv'),
    h('a', { class: 'btn', href: `/api/v1/evaluations/${id}/results.json`, download: '' }, icon('download'), 'results.json'));
  progressCard.append(downloads);

  // a card: a head with the title (and extras), a body the renderers fill
  const card = (cls, title, ...extra) => {
    const body = h('div', { class: 'eval-body' });
    const el = h('section', { class: ['card', cls], hidden: true, 'aria-label': title },
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, title), extra), body);
    return { el, body };
  };
  const latestCard = card('eval-latest', 'Latest results');
  const classCard = card('eval-classes', 'Per class');
  const confCard = card('eval-confusion', 'Confusion matrix',
    h('a', { class: 'btn eval-head-btn', href: `/api/v1/evaluations/${id}/confusion?format=csv`, download: '' }, icon('download'), 'CSV'));
  const misCard = card('eval-mis', 'Misclassified, most confident first');
  const topSel = h('select', { class: 'input select eval-head-btn', 'aria-label': 'Class' });
  const topCard = card('eval-top', 'Top images of a class', topSel);
  topSel.addEventListener('change', () => loadTop(topSel.value));

  const main = h('div', { class: 'eval-view' }, progressCard, latestCard.el, classCard.el, confCard.el, misCard.el, topCard.el);
  const side = h('div', { class: 'eval-side' });

  function partial(ev) {
    if (typeof ev.count === 'number') setText(tCount.value, ev.total ? `${ev.count + (ev.errors || 0)} / ${ev.total}` : String(ev.count));
    if (typeof ev.images_per_s === 'number') setText(tSpeed.value, ev.images_per_s.toFixed(0));
    if (typeof ev.accuracy === 'number') setText(tTop1.value, pct(ev.accuracy));
    if (typeof ev.accuracy_top5 === 'number') setText(tTop5.value, pct(ev.accuracy_top5));
    if (typeof ev.errors === 'number') setText(tErr.value, String(ev.errors));
  }

  function event(ev) {
    if (ev.type === 'metric' && (ev.kind === 'partial' || ev.kind === 'evaluation')) {
      partial(ev);
      if (!bulk) loadLatest();
    }
  }

  /* the last rows written, as they come: a bounded read of results.json's tail */
  let bulk = false, latestBusy = false;
  async function loadLatest() {
    if (latestBusy) return;
    latestBusy = true;
    try {
      const res = await fetch(`/api/v1/evaluations/${id}/results.json?tail=12`);
      if (!res.ok || !alive) return;
      const rows = await res.json();
      if (!alive || !rows.length) return;
      setChildren(latestCard.body, h('div', { class: 'eval-scroll' }, h('table', { class: 'table eval-table' },
        h('thead', {}, h('tr', {}, h('th', {}, '#'), h('th', {}, 'Image'), h('th', {}, 'True'), h('th', {}, 'Predicted'), h('th', {}, 'Probability'))),
        h('tbody', {}, rows.reverse().map((r) => h('tr', { class: r.error ? 'eval-row-error' : (r.true !== null && r.top && r.top[0].label !== r.true ? 'eval-row-wrong' : null) },
          h('td', { class: 'num' }, String(r.n)), h('td', { class: 'eval-name', title: r.name }, r.name), h('td', {}, r.true ?? '—'),
          r.error ? h('td', { colspan: 2 }, r.error) : [h('td', {}, r.top[0].label), h('td', { class: 'num' }, pct(r.top[0].probability))]))))));
      latestCard.el.hidden = false;
    } catch { /* the next report tries again */ } finally { latestBusy = false; }
  }

  function thumb(it) {
    return h('figure', { class: 'eval-thumb' },
      h('img', { src: it.image, alt: it.name, loading: 'lazy', width: 64, height: 64 }),
      h('figcaption', {},
        h('span', { class: 'eval-name', title: it.name }, it.name),
        it.true !== null && it.true !== it.predicted
          ? h('span', { class: 'eval-wrong' }, 'true ', h('b', {}, it.true), ' → ', h('b', {}, it.predicted))
          : h('span', {}, h('b', {}, it.predicted)),
        h('span', { class: 'num' }, pct(it.probability))));
  }

  function renderClasses(m) {
    const rows = m.classes.map((c) => h('tr', {},
      h('th', { scope: 'row' }, c.label), h('td', { class: 'num' }, fix(c.precision)), h('td', { class: 'num' }, fix(c.recall)),
      h('td', { class: 'num' }, fix(c.f1)), h('td', { class: 'num' }, String(c.support))));
    const table = h('table', { class: 'table eval-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Class'), h('th', {}, 'Precision'), h('th', {}, 'Recall'), h('th', {}, 'F1'), h('th', {}, 'Support'))),
      h('tbody', {}, rows),
      h('tfoot', {}, h('tr', {}, h('th', { scope: 'row' }, 'Macro average'), h('td', { class: 'num' }, fix(m.macro.precision)),
        h('td', { class: 'num' }, fix(m.macro.recall)), h('td', { class: 'num' }, fix(m.macro.f1)), h('td', { class: 'num' }, String(m.labelled)))));
    setChildren(classCard.body, h('div', { class: 'eval-scroll' }, table));
    classCard.el.hidden = false;
  }

  function renderConfusion(c) {
    const n = c.labels.length;
    let box;
    const heat = (v, sum) => ({ background: `rgba(9, 105, 218, ${(0.85 * v / sum).toFixed(3)})`, color: v / sum > 0.5 ? '#fff' : '' });
    if (n <= 60) {
      const head = h('tr', {}, h('th', { class: 'eval-corner' }, 'true \\ predicted'), c.labels.map((l) => h('th', { scope: 'col', title: l }, l)));
      const body = c.matrix.map((row, i) => {
        const sum = row.reduce((a, b) => a + b, 0) || 1;
        return h('tr', {}, h('th', { scope: 'row', title: c.labels[i] }, c.labels[i]), row.map((v, k) => h('td', {
          class: ['num', i === k && 'eval-diag'],
          // the share of the row: the deeper, the more of the true class went there
          style: heat(v, sum),
          title: `${c.labels[i]} as ${c.labels[k]}: ${v}`,
        }, v ? String(v) : '')));
      });
      box = h('div', { class: 'eval-scroll eval-matrix' }, h('table', { class: 'eval-heat' }, h('thead', {}, head), h('tbody', {}, body)));
    } else {
      box = virtualMatrix(c, heat);
    }
    setChildren(confCard.body, h('p', { class: 'muted' }, 'Rows: the true class; columns: the predicted class; a cell\'s colour is its share of the row.'), box);
    confCard.el.hidden = false;
  }

  async function loadTop(cls) {
    try {
      const r = await get(`/evaluations/${id}/top?class=${encodeURIComponent(cls)}`);
      if (!alive) return;
      setChildren(topCard.body, r.items.length ? h('div', { class: 'eval-grid' }, r.items.map(thumb)) : h('p', { class: 'muted' }, 'No images.'));
    } catch (e) { if (alive) showError(e, 'Top images'); }
  }

  async function loadDone() {
    if (loaded) return;
    loaded = true;
    try {
      const r = await get(`/evaluations/${id}`);
      if (!alive) return;
      const m = r.evaluation.metrics;
      if (!m) return;
      setText(tCount.value, String(m.count + m.errors));
      setText(tTop1.value, pct(m.accuracy));
      setText(tTop5.value, pct(m.accuracy_top5));
      setText(tErr.value, String(m.errors));
      setText(tSpeed.value, m.images_per_s ? m.images_per_s.toFixed(0) : '—');
      if (m.labelled > 0) {
        renderClasses(m);
        renderConfusion(await get(`/evaluations/${id}/confusion`));
        const mis = await get(`/evaluations/${id}/misclassified?limit=60`);
        setChildren(misCard.body,
          mis.items.length ? h('div', { class: 'eval-grid' }, mis.items.map(thumb)) : h('p', { class: 'muted' }, 'None: every labelled image was classified right.'),
          mis.total > mis.items.length ? h('p', { class: 'muted' }, `The ${mis.items.length} most confident of ${mis.total} kept.`) : null);
        misCard.el.hidden = false;
      }
      if (m.top_n > 0) {
        setChildren(topSel, m.labels.map((l, i) => h('option', { value: String(i) }, l)));
        topCard.el.hidden = false;
        loadTop('0');
      }
    } catch (e) {
      loaded = false;
      if (alive) showError(e, 'Evaluation');
    }
  }

  function update(j) {
    job = j;
    if (j.state === 'done' || j.state === 'aborted') loadDone();
  }

  return {
    main, side, actions: [],
    update, event, setBulk(on) { bulk = on; if (!on) loadLatest(); }, deleteNote: async () => null,
    destroy() { alive = false; },
  };
}

/* ---------- a confusion matrix too big for a table ---------- */

/** The matrix of c ({labels, matrix}) as a scrolling grid that builds only the
 *  cells in view (a 1,000-class matrix is a million cells), with the class names
 *  held at the top and the left as it scrolls. */
function virtualMatrix(c, heat) {
  const n = c.labels.length, CW = 36, CH = 22, HW = 150, HH = 96;
  const sums = c.matrix.map((row) => row.reduce((a, b) => a + b, 0) || 1);
  const bodyIn = h('div', { class: 'eval-vm-in', style: { width: `${n * CW}px`, height: `${n * CH}px` } });
  const body = h('div', { class: 'eval-vm-body', tabindex: 0, 'aria-label': `Confusion matrix of ${n} classes; scroll to see it all` }, bodyIn);
  const topIn = h('div', { class: 'eval-vm-in', style: { width: `${n * CW}px`, height: `${HH}px` } });
  const leftIn = h('div', { class: 'eval-vm-in', style: { width: `${HW}px`, height: `${n * CH}px` } });
  const top = h('div', { class: 'eval-vm-top' }, topIn), left = h('div', { class: 'eval-vm-left' }, leftIn);
  const grid = h('div', { class: 'eval-vm', style: { gridTemplateColumns: `${HW}px 1fr`, gridTemplateRows: `${HH}px 480px` } },
    h('div', { class: 'eval-vm-corner muted' }, 'true \\ predicted'), top, left, body);
  let queued = false;
  const cell = (cls, x, y, w, hgt, text, title, style) => h('div', {
    class: cls, title, style: { left: `${x}px`, top: `${y}px`, width: `${w}px`, height: `${hgt}px`, ...(style || {}) },
  }, text);
  function draw() {
    queued = false;
    const r0 = Math.max(0, Math.floor(body.scrollTop / CH) - 2), r1 = Math.min(n, Math.ceil((body.scrollTop + body.clientHeight) / CH) + 2);
    const c0 = Math.max(0, Math.floor(body.scrollLeft / CW) - 2), c1 = Math.min(n, Math.ceil((body.scrollLeft + body.clientWidth) / CW) + 2);
    const cells = [];
    for (let i = r0; i < r1; i++) {
      for (let k = c0; k < c1; k++) {
        const v = c.matrix[i][k];
        cells.push(cell(['eval-vm-cell', i === k && 'eval-diag'], k * CW, i * CH, CW, CH, v ? String(v) : '',
          `${c.labels[i]} as ${c.labels[k]}: ${v}`, heat(v, sums[i])));
      }
    }
    setChildren(bodyIn, cells);
    const heads = [];
    for (let k = c0; k < c1; k++) heads.push(cell('eval-vm-head', k * CW, 0, CW, HH, c.labels[k], c.labels[k]));
    setChildren(topIn, heads);
    const rows = [];
    for (let i = r0; i < r1; i++) rows.push(cell('eval-vm-head eval-vm-row', 0, i * CH, HW, CH, c.labels[i], c.labels[i]));
    setChildren(leftIn, rows);
    top.scrollLeft = body.scrollLeft;
    left.scrollTop = body.scrollTop;
  }
  body.addEventListener('scroll', () => { if (!queued) { queued = true; requestAnimationFrame(draw); } });
  requestAnimationFrame(draw);
  return grid;
}

/* ---------- the "Evaluate" button of a model's page ---------- */

/** A button that opens the dialog: snapshot, and source (the model's dataset's
 *  val or test split, or an uploaded archive or folder). getModel() gives the
 *  GET /models/ID record (snapshots, dataset). */
export function evalButton(modelId, getModel, { navigate } = {}) {
  const btn = h('button', { type: 'button', class: 'btn', dataset: { action: 'evaluate' } }, 'Evaluate');
  btn.addEventListener('click', () => openDialog().catch((e) => showError(e, 'Evaluate')));

  async function openDialog() {
    // the record as it is now: a model still training has more snapshots than the page had
    let model = getModel();
    try { model = (await get(`/models/${modelId}`)).model; } catch (e) { if (!model) throw e; }
    const snaps = model.snapshots || [];
    if (!snaps.length) { toast('This model has no snapshot yet.', 'error'); return; }
    const snapSel = h('select', { class: 'input select', id: `ev${modelId}-snap` },
      [...snaps].reverse().map((s, i) => h('option', { value: String(s.epoch) }, `Epoch ${s.epoch}${i === 0 ? ' (latest)' : ''}`)));
    const srcSel = h('select', { class: 'input select', id: `ev${modelId}-src` },
      model.dataset ? [h('option', { value: 'val' }, `Dataset #${model.dataset}: validation split`),
        h('option', { value: 'test' }, `Dataset #${model.dataset}: test split`)] : null,
      h('option', { value: 'archive' }, 'Upload an archive (.zip, .tar, .tar.gz)'),
      h('option', { value: 'folder' }, 'Upload a folder of images'));
    const file = h('input', { type: 'file', class: 'input', accept: '.zip,.tar,.tgz,.tar.gz', hidden: !!model.dataset });
    const folder = h('input', { type: 'file', class: 'input', webkitdirectory: true, multiple: true, hidden: true });
    const hint = h('p', { class: 'field-hint' }, 'Images in a folder named after a class count as that class; others are classified unlabelled.');
    const err = h('p', { class: 'field-error', hidden: true });
    srcSel.addEventListener('change', () => { file.hidden = srcSel.value !== 'archive'; folder.hidden = srcSel.value !== 'folder'; });
    const ok = h('button', { type: 'submit', class: 'btn btn-primary', dataset: { action: 'evaluate-confirm' } }, 'Evaluate');
    const cancel = h('button', { type: 'button', class: 'btn' }, 'Cancel');
    const form = h('form', { method: 'dialog' },
      h('h2', { class: 'dialog-title' }, `Evaluate model #${modelId}`),
      h('div', { class: 'dialog-body' },
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: snapSel.id }, 'Snapshot'), snapSel),
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: srcSel.id }, 'Images'), srcSel, file, folder, hint),
        err),
      h('div', { class: 'dialog-actions' }, cancel, ok));
    const dlg = h('dialog', { class: 'dialog', 'aria-label': 'Evaluate' }, form);
    cancel.addEventListener('click', () => dlg.close());
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      ok.disabled = true;
      err.hidden = true;
      try {
        let source;
        if (srcSel.value === 'val' || srcSel.value === 'test') source = { dataset: model.dataset, split: srcSel.value };
        else {
          let body, name;
          if (srcSel.value === 'archive') {
            if (!file.files.length) throw new ApiError(400, 'invalid', 'Choose an archive to upload.');
            body = file.files[0]; name = file.files[0].name;
          } else {
            if (!folder.files.length) throw new ApiError(400, 'invalid', 'Choose a folder to upload.');
            body = await tarOf([...folder.files]); name = 'folder.tar';
          }
          const res = await fetch(`/api/v1/uploads?name=${encodeURIComponent(name)}`, { method: 'POST', body });
          const j = await res.json().catch(() => null);
          if (!res.ok) throw new ApiError(res.status, j?.error?.code || 'http', j?.error?.message || `upload failed: HTTP ${res.status}`);
          source = { upload: j.upload.id, name };
        }
        const r = await post('/evaluations', { model: modelId, snapshot: snapSel.value, source });
        dlg.close();
        toast(`Evaluation #${r.job.id} is queued.`, 'success');
        if (navigate) navigate(`/jobs/${r.job.id}`);
      } catch (ex) {
        setText(err, ex.message);
        err.hidden = false;
        ok.disabled = false;
      }
    });
    dlg.addEventListener('close', () => { dlg.remove(); btn.focus(); });
    document.body.append(dlg);
    dlg.showModal();
  }
  return btn;
}

/** A ustar archive (Blob) of the chosen folder's files, by their relative paths. */
async function tarOf(files) {
  const parts = [];
  const enc = new TextEncoder();
  for (const f of files) {
    const name = enc.encode((f.webkitRelativePath || f.name).slice(-99));
    const hdr = new Uint8Array(512);
    const put = (s, at) => hdr.set(enc.encode(s), at);
    hdr.set(name, 0);
    put('0000644\0', 100); put('0000000\0', 108); put('0000000\0', 116);
    put(f.size.toString(8).padStart(11, '0') + '\0', 124);
    put('00000000000\0', 136); put('        ', 148); put('0', 156); put('ustar\x0000', 257);
    const sum = hdr.reduce((a, b) => a + b, 0);
    put(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    parts.push(hdr, f, new Uint8Array((512 - (f.size % 512)) % 512));
  }
  parts.push(new Uint8Array(1024));
  return new Blob(parts);
}
