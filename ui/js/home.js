// home.js — the home page: tabs of job lists that update live, and the system panel.
import { h, setText, setAttr, setChildren, icon } from './dom.js';
import { store } from './store.js';
import { live } from './live.js';
import { get } from './api.js';
import { relTime, dateTime, duration, elapsedOf, etaOf, percent, bytes } from './format.js';
import { badge, setBadge, progressBar, setProgress, etaText, ACTIVE, announce, sparkline } from './ui.js';
import { int, shapeText } from './dataset_view.js';

// Finished datasets' summaries (GET /api/v1/datasets), for the headline under their name.
const summaries = new Map(); // id → summary

// Models' curves for their row (from their event logs): id → {last, events, loss: [], lastAcc,
// bestAcc, lastLoss, at, loading}.  Fetched once, then only the new events.
const modelStats = new Map();
const SPARK_MAX = 60;

export const TABS = [
  { id: 'running', path: '/', label: 'Running', title: 'Running',
    match: (j) => ACTIVE.has(j.state), queries: ['state=running', 'state=queued'],
    empty: 'Nothing is running or queued right now.' },
  { id: 'datasets', path: '/datasets', label: 'Datasets', title: 'Datasets',
    match: (j) => j.kind === 'dataset', queries: ['kind=dataset'], hideKind: true,
    empty: 'No datasets yet. A dataset turns a folder of labelled images into LMDB for training.' },
  { id: 'models', path: '/models', label: 'Models', title: 'Models',
    match: (j) => j.kind === 'model', queries: ['kind=model'], hideKind: true,
    empty: 'No models yet. A model job trains a network on a dataset.' },
  { id: 'all', path: '/jobs', label: 'All jobs', title: 'All jobs',
    match: () => true, queries: [], empty: 'No jobs yet.' },
];

export function tabForPath(path) {
  if (path === '/' || path === '/running') return 'running';
  const t = TABS.find((x) => x.path === path);
  return t ? t.id : null;
}

export function mountHome(root, { tab, navigate }) {
  let current = TABS.find((t) => t.id === tab) || TABS[0];
  const cleanups = [];
  const rows = new Map(); // id → {tr, refs}
  let firstLoadDone = false;
  let loadError = null;
  let alive = true;

  /* ---- layout ---- */
  const tabButtons = TABS.map((t) => {
    const count = h('span', { class: 'tab-count', 'aria-hidden': 'true' });
    const b = h('button', { type: 'button', role: 'tab', class: 'tab', id: `tab-${t.id}`,
      'aria-controls': 'jobs-panel', dataset: { tab: t.id } }, h('span', { text: t.label }), count);
    b.addEventListener('click', () => selectTab(t.id, true));
    return b;
  });
  const tablist = h('div', { role: 'tablist', class: 'tabs', 'aria-label': 'Job lists' }, tabButtons);
  tablist.addEventListener('keydown', onTabKey);

  const tbody = h('tbody');
  const table = h('table', { class: 'jobs-table' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col', class: 'col-name' }, 'Name'),
      h('th', { scope: 'col', class: 'col-state' }, 'State'),
      h('th', { scope: 'col', class: 'col-progress' }, 'Progress'),
      h('th', { scope: 'col', class: 'col-kind' }, 'Kind'),
      h('th', { scope: 'col', class: 'col-owner' }, 'Owner'),
      h('th', { scope: 'col', class: 'col-created' }, 'Created'),
      h('th', { scope: 'col', class: 'col-elapsed' }, 'Elapsed'))),
    tbody);
  const emptyBox = h('div', { class: 'empty', hidden: true });
  const moreNote = h('p', { class: 'list-note', hidden: true });
  const tableWrap = h('div', { class: 'table-wrap' }, table);
  const panel = h('div', { role: 'tabpanel', id: 'jobs-panel', class: 'card jobs-panel', tabindex: '0' },
    tableWrap, emptyBox);

  const info = infoPanel();
  cleanups.push(info.destroy);

  const page = h('div', { class: 'page home' },
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', { class: 'page-title' }, 'Jobs'),
        h('p', { class: 'page-sub' }, 'Datasets being built and models being trained on this server, live.')),
      h('div', { class: 'page-actions' },
        h('a', { class: 'btn', href: '/datasets/new', dataset: { action: 'new-dataset' } }, icon('plus'), 'New dataset'),
        h('a', { class: 'btn btn-primary', href: '/models/new', dataset: { action: 'new-model' } }, icon('plus'), 'New model'))),
    h('div', { class: 'home-grid' },
      h('section', { class: 'home-main', 'aria-label': 'Job lists' }, tablist, panel, moreNote),
      info.el));
  setChildren(root, page);

  /* ---- tabs ---- */
  function selectTab(id, push) {
    const t = TABS.find((x) => x.id === id);
    if (!t) return;
    current = t;
    for (const b of tabButtons) {
      const on = b.dataset.tab === id;
      setAttr(b, 'aria-selected', on ? 'true' : 'false');
      b.tabIndex = on ? 0 : -1;
    }
    panel.setAttribute('aria-labelledby', `tab-${id}`);
    table.classList.toggle('hide-kind', !!t.hideKind);
    document.title = `${t.title} · deepdesk`;
    if (push && location.pathname !== t.path) navigate(t.path, { tabOnly: true });
    loadTab(t);
    if (t.id === 'datasets' || t.id === 'all') loadSummaries();
    render(null);
  }

  let sumTimer = null, sumLoading = false, sumAgain = false;
  async function loadSummaries() {
    if (sumLoading) { sumAgain = true; return; }
    sumLoading = true;
    try {
      const r = await get('/datasets?limit=200');
      for (const d of r.datasets) if (d.summary) summaries.set(d.id, d.summary);
      if (alive) render(null);
    } catch { /* the headline is optional */ }
    sumLoading = false;
    if (sumAgain && alive) { sumAgain = false; loadSummaries(); }
  }
  const loadSummariesSoon = () => { clearTimeout(sumTimer); sumTimer = setTimeout(loadSummaries, 200); };
  cleanups.push(() => clearTimeout(sumTimer));

  function onTabKey(e) {
    const i = tabButtons.indexOf(document.activeElement);
    if (i < 0) return;
    let j = null;
    if (e.key === 'ArrowRight') j = (i + 1) % tabButtons.length;
    else if (e.key === 'ArrowLeft') j = (i - 1 + tabButtons.length) % tabButtons.length;
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = tabButtons.length - 1;
    if (j === null) return;
    e.preventDefault();
    tabButtons[j].focus();
    selectTab(tabButtons[j].dataset.tab, true);
  }

  const inflight = new Map(); // query → promise, so a query is never fetched twice at once

  async function loadTab(t, force = false) {
    const qs = ['', ...t.queries].filter((q) => force || !store.loaded.has(q));
    if (!qs.length) { firstLoadDone = true; return; }
    try {
      await Promise.all(qs.map((q) => {
        if (!inflight.has(q)) inflight.set(q, store.load(q).finally(() => inflight.delete(q)));
        return inflight.get(q);
      }));
      loadError = null;
    } catch (e) {
      loadError = e;
    }
    firstLoadDone = true;
    render(null);
  }

  /* ---- rows ---- */
  function makeRow(job) {
    const link = h('a', { class: 'job-link', href: job.kind === 'dataset' ? `/datasets/${job.id}` : job.kind === 'model' ? `/models/${job.id}` : `/jobs/${job.id}` });
    const idEl = h('span', { class: 'job-id' });
    const headline = h('span', { class: 'ds-headline', hidden: true });
    const mText = h('span', { class: 'model-acc num' });
    const mSpark = h('span', { class: 'model-spark', title: 'Training loss' });
    const mstats = h('span', { class: 'model-stats', hidden: true }, mText, mSpark);
    const b = badge(job.state);
    const bar = progressBar(`Progress of job ${job.id}`);
    const pct = h('span', { class: 'pct' });
    const eta = h('span', { class: 'eta' });
    const errEl = h('span', { class: 'row-error' });
    const progWrap = h('div', { class: 'row-progress' }, bar, h('span', { class: 'row-progress-text' }, pct, eta));
    const kind = h('span', { class: 'kind' });
    const owner = h('span');
    const created = h('time');
    const elapsed = h('span', { class: 'num' });
    const tr = h('tr', { dataset: { id: job.id } },
      h('td', { class: 'col-name' }, h('div', { class: 'name-cell' }, link, idEl, headline, mstats)),
      h('td', { class: 'col-state' }, b),
      h('td', { class: 'col-progress' }, progWrap, errEl),
      h('td', { class: 'col-kind' }, kind),
      h('td', { class: 'col-owner' }, owner),
      h('td', { class: 'col-created' }, created),
      h('td', { class: 'col-elapsed' }, elapsed));
    const r = { tr, link, idEl, headline, mstats, mText, mSpark, b, bar, pct, eta, errEl, progWrap, kind, owner, created, elapsed };
    updateRow(r, job);
    return r;
  }

  function updateRow(r, job) {
    setText(r.link, job.name || `Job ${job.id}`);
    setText(r.idEl, `#${job.id}`);
    const sum = job.kind === 'dataset' && job.state === 'done' ? summaries.get(job.id) : null;
    r.headline.hidden = !sum;
    if (sum) {
      const sp = sum.splits || {};
      const n = (k) => (sp[k] ? sp[k].images : 0);
      const parts = [`${int((sum.labels || []).length)} classes`,
        ['train', 'val', 'test'].filter((k) => n(k) > 0).map((k) => `${int(n(k))} ${k}`).join(' / '),
        shapeText(sum.options), bytes(sum.disk_bytes)];
      setText(r.headline, parts.filter(Boolean).join(' · '));
    }
    if (job.kind === 'model') {
      const st = modelStats.get(job.id);
      if (!st || (st.events !== job.events && !st.loading)) loadModelStats(job);
      r.mstats.hidden = !st || (!st.loss.length && st.lastAcc === null);
      if (st) {
        const acc = st.lastAcc !== null ? `val ${(st.lastAcc * 100).toFixed(1)}%` : st.lastLoss !== null ? `val loss ${st.lastLoss.toPrecision(3)}` : '';
        const bestTxt = st.bestAcc !== null && st.bestAcc !== st.lastAcc ? ` · best ${(st.bestAcc * 100).toFixed(1)}%` : '';
        setText(r.mText, acc + bestTxt);
        setAttr(r.mText, 'title', st.bestAcc !== null ? `Last validation accuracy ${(st.lastAcc * 100).toFixed(2)}%, best ${(st.bestAcc * 100).toFixed(2)}%` : null);
        const key = st.loss.join(',');
        if (r.mSpark.dataset.key !== key) {
          r.mSpark.dataset.key = key;
          setChildren(r.mSpark, st.loss.length > 1 ? sparkline(st.loss, 72, 18) : null);
        }
      }
    }
    setBadge(r.b, job.state);
    r.tr.dataset.state = job.state;
    const showBar = job.state === 'running' || job.state === 'queued';
    r.progWrap.hidden = !showBar;
    if (showBar) {
      setProgress(r.bar, job.progress, job.state);
      setText(r.pct, job.state === 'queued' ? 'waiting' : percent(job.progress));
    }
    r.errEl.hidden = !(job.state === 'error' && job.error);
    if (job.error) { setText(r.errEl, job.error); setAttr(r.errEl, 'title', job.error); }
    setText(r.kind, job.kind);
    setText(r.owner, job.owner || '—');
    setAttr(r.created, 'datetime', job.created_at ? new Date(job.created_at).toISOString() : null);
    setAttr(r.created, 'title', dateTime(job.created_at));
    tick(r, job);
  }

  /** Fetch a model's metric events (only those after what we have) for its row. */
  async function loadModelStats(job) {
    let st = modelStats.get(job.id);
    if (!st) modelStats.set(job.id, (st = { last: 0, events: null, train: [], lastAcc: null, bestAcc: null, lastLoss: null, loss: [], loading: false, at: 0 }));
    if (st.loading) return;
    // A running model's row is fetched at most every 3 s.
    const wait = 3000 - (Date.now() - st.at);
    if (wait > 0 && st.events !== null) {
      if (!st.timer) st.timer = setTimeout(() => { st.timer = null; if (alive) render([job.id]); }, wait);
      return;
    }
    st.loading = true;
    const want = job.events;
    try {
      for (let guard = 0; guard < 50; guard++) {
        const r = await get(`/jobs/${job.id}/events?after=${st.last}&limit=2000`);
        for (const ev of r.events) {
          st.last = Math.max(st.last, ev.seq);
          if (ev.type !== 'metric') continue;
          if (ev.kind === 'train' && typeof ev.loss === 'number') st.train.push(ev.loss);
          if (ev.kind === 'val') {
            if (typeof ev.accuracy === 'number') { st.lastAcc = ev.accuracy; st.bestAcc = Math.max(st.bestAcc ?? 0, ev.accuracy); }
            if (typeof ev.loss === 'number') st.lastLoss = ev.loss;
          }
        }
        if (!r.more || !r.events.length) break;
      }
      st.events = want;
      // The sparkline: the training loss averaged down to SPARK_MAX points.
      const k = Math.max(1, Math.ceil(st.train.length / SPARK_MAX));
      st.loss = [];
      for (let i = 0; i < st.train.length; i += k) {
        const part = st.train.slice(i, i + k);
        st.loss.push(part.reduce((a, b) => a + b, 0) / part.length);
      }
    } catch { st.events = want; /* the row just shows no curve */ }
    st.loading = false;
    st.at = Date.now();
    if (alive) render([job.id]);
  }

  function tick(r, job, now = Date.now()) {
    setText(r.created, relTime(job.created_at, now));
    setText(r.elapsed, duration(elapsedOf(job, now)));
    if (job.state === 'running') setText(r.eta, etaText(etaOf(job, now)));
    else setText(r.eta, '');
  }

  function render(ids) {
    const list = [...store.jobs.values()].filter(current.match).sort((a, b) => b.id - a.id);
    const want = new Set(list.map((j) => j.id));
    for (const [id, r] of rows) if (!want.has(id)) { r.tr.remove(); rows.delete(id); }
    for (const job of list) {
      let r = rows.get(job.id);
      if (!r) {
        r = makeRow(job);
        rows.set(job.id, r);
        if (firstLoadDone && ids && ids.includes(job.id)) {
          r.tr.classList.add('row-new');
          setTimeout(() => r.tr.classList.remove('row-new'), 1600);
        }
      } else if (!ids || ids.includes(job.id)) updateRow(r, job);
    }
    // Put rows in order, moving as few nodes as possible.
    list.forEach((job, i) => {
      const tr = rows.get(job.id).tr;
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });

    const empty = list.length === 0;
    tableWrap.hidden = empty;
    emptyBox.hidden = !empty;
    if (empty) {
      if (loadError) {
        setChildren(emptyBox, icon('empty', 'empty-icon'),
          h('p', { class: 'empty-title' }, 'Could not load jobs'),
          h('p', { class: 'empty-text', text: loadError.message }),
          h('button', { type: 'button', class: 'btn', onclick: () => loadTab(current, true) }, 'Try again'));
      } else if (!firstLoadDone) {
        setChildren(emptyBox, h('p', { class: 'empty-text' }, 'Loading jobs…'));
      } else if (current.id === 'datasets') {
        setChildren(emptyBox, icon('image', 'empty-icon'),
          h('p', { class: 'empty-title', text: current.empty }),
          h('p', { class: 'empty-text' }, 'Upload an archive of class folders, point at folders on the server, or start with the Fashion-MNIST example.'),
          h('a', { class: 'btn btn-primary', href: '/datasets/new' }, icon('plus'), 'New dataset'));
      } else if (current.id === 'models') {
        setChildren(emptyBox, icon('chart', 'empty-icon'),
          h('p', { class: 'empty-title', text: current.empty }),
          h('p', { class: 'empty-text' }, 'Pick a finished dataset and a network (LeNet is a good first one) and watch it learn.'),
          h('a', { class: 'btn btn-primary', href: '/models/new' }, icon('plus'), 'New model'));
      } else {
        setChildren(emptyBox, icon('empty', 'empty-icon'),
          h('p', { class: 'empty-title', text: current.empty }),
          h('p', { class: 'empty-text' }, 'Jobs are created through the API, for example ',
            h('code', null, `curl -XPOST ${location.origin}/api/v1/jobs -d '{"kind":"dataset",…}'`)));
      }
    }

    // Counts on the tabs.
    for (const b of tabButtons) {
      const t = TABS.find((x) => x.id === b.dataset.tab);
      let n = 0;
      for (const j of store.jobs.values()) if (t.match(j)) n++;
      setText(b.querySelector('.tab-count'), n);
      setAttr(b, 'aria-label', `${t.label} (${n})`);
    }
    const total = store.totals[''];
    const shown = list.length;
    moreNote.hidden = !(current.id === 'all' && total > shown);
    if (!moreNote.hidden) setText(moreNote, `Showing the newest ${shown} of ${total} jobs.`);
  }

  /* ---- live ---- */
  store.start();
  const onChange = (e) => render(e.detail.ids);
  store.addEventListener('change', onChange);
  cleanups.push(() => store.removeEventListener('change', onChange));
  const onState = (e) => {
    const { job } = e.detail;
    announce(`Job ${job.name || job.id} is now ${job.state}.`);
    info.refreshSoon();
    if (job.kind === 'dataset' && job.state === 'done') loadSummariesSoon();
  };
  store.addEventListener('state', onState);
  cleanups.push(() => store.removeEventListener('state', onState));
  cleanups.push(live.on('message', (m) => { if (m.type === 'deleted' || (m.type === 'job' && m.job.state === 'queued')) info.refreshSoon(); }));
  // After a reconnect, whatever happened while we were away is fetched again.
  cleanups.push(live.on('open', ({ reconnected }) => {
    if (!reconnected) return;
    loadTab(current, true);
    if (current.id === 'datasets' || current.id === 'all') loadSummaries();
    info.refresh();
  }));
  const timer = setInterval(() => {
    const now = Date.now();
    for (const [id, r] of rows) {
      const j = store.jobs.get(id);
      if (j) tick(r, j, now);
    }
  }, 1000);
  cleanups.push(() => clearInterval(timer));

  selectTab(current.id, false);

  return {
    setTab(id) { selectTab(id, false); },
    destroy() { alive = false; cleanups.forEach((f) => f()); },
  };
}

/* ---- the system panel (GET /api/v1/info) ---- */
function infoPanel() {
  const body = h('div', { class: 'sys-body' }, h('p', { class: 'muted' }, 'Loading…'));
  const el = h('aside', { class: 'card sysinfo', 'aria-labelledby': 'sys-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'sys-title' }, 'System')), body);
  let timer = null, soon = null, alive = true;

  function row(iconName, label, ...value) {
    return h('div', { class: 'sys-item' }, h('dt', null, icon(iconName), label), h('dd', null, ...value));
  }
  function meter(frac, label, kind = 'disk') {
    const v = Math.max(0, Math.min(1, frac || 0));
    return h('span', { class: 'meter', role: 'meter', 'aria-label': label, 'aria-valuemin': 0,
      'aria-valuemax': 100, 'aria-valuenow': Math.round(v * 100) },
    h('span', { class: 'meter-fill', style: { width: `${v * 100}%` }, dataset: { level: kind === 'slots' ? 'slots' : v > 0.9 ? 'high' : v > 0.7 ? 'mid' : 'low' } }));
  }

  function draw(i) {
    const gpus = Array.isArray(i.gpus) ? i.gpus : [];
    const gpuText = gpus.length === 0 ? h('span', { class: 'muted', dataset: { info: 'gpus' } }, 'no GPU')
      : h('ul', { class: 'gpu-list', dataset: { info: 'gpus' } }, gpus.map((g, n) => {
        if (typeof g !== 'object' || g === null) return h('li', { text: String(g) });
        const name = g.name || g.model || `GPU ${g.id ?? n}`;
        const memKey = Object.keys(g).find((k) => /mem.*(total|bytes)/i.test(k) && typeof g[k] === 'number');
        return h('li', null, h('span', { text: name }), memKey ? h('span', { class: 'muted', text: ` · ${bytes(g[memKey])}` }) : null);
      }));
    const d = i.data || {};
    const fsUsed = d.total_bytes ? (d.total_bytes - d.free_bytes) / d.total_bytes : 0;
    const j = i.jobs || {};
    const slotsFrac = j.cpu_slots ? j.cpu_slots_used / j.cpu_slots : 0;
    const b = i.build || {};
    setChildren(body, h('dl', { class: 'sys-list' },
      row('tag', 'Version',
        h('span', { dataset: { info: 'version' } }, `deepdesk ${i.version}`),
        h('span', { class: 'muted sys-sub' }, `build `, h('code', { text: b.commit || '?' }), b.date ? ` · ${b.date}` : '',
          b.cuda ? ' · CUDA' : '')),
      row('cpu', 'CPU',
        h('span', { class: 'sys-cpu-model', text: (i.cpu && i.cpu.model) || 'unknown' }),
        h('span', { class: 'sys-sub', dataset: { info: 'cores' } }, `${i.cpu ? i.cpu.cores : '?'} cores`)),
      row('slots', 'CPU slots',
        h('span', { dataset: { info: 'slots' } }, `${j.cpu_slots_used ?? '?'} of ${j.cpu_slots ?? '?'} in use`),
        meter(slotsFrac, 'CPU slots in use', 'slots')),
      row('gpu', 'GPUs', gpuText),
      row('disk', 'Data',
        h('span', { class: 'sys-path', text: d.path || '', title: d.path || '' }),
        h('span', { class: 'sys-sub' }, `${bytes(d.used_bytes)} used by deepdesk`),
        d.total_bytes ? meter(fsUsed, 'Disk used') : null,
        d.free_bytes !== undefined ? h('span', { class: 'sys-sub muted', dataset: { info: 'free' } },
          `${bytes(d.free_bytes)} free of ${bytes(d.total_bytes)}`) : null)));
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const i = await get('/info');
      if (alive) draw(i);
    } catch (e) {
      if (alive && !body.querySelector('dl'))
        setChildren(body, h('p', { class: 'muted', text: `Unavailable: ${e.message}` }));
    }
    if (alive) timer = setTimeout(refresh, 15000);
  }
  refresh();
  return {
    el,
    refresh,
    refreshSoon() { clearTimeout(soon); soon = setTimeout(refresh, 300); },
    destroy() { alive = false; clearTimeout(timer); clearTimeout(soon); },
  };
}
