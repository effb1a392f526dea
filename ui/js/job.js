// job.js — one job's page: header with actions, progress, live log, metrics, details,
// state history, relations, notes and parameters.
import { h, setText, setAttr, setChildren, icon } from './dom.js';
import { get, post, patch, del, ApiError } from './api.js';
import { live } from './live.js';
import { store } from './store.js';
import { relTime, dateTime, clock, duration, elapsedOf, etaOf, percent, num } from './format.js';
import { badge, setBadge, progressBar, setProgress, etaText, ACTIVE, toast, showError, announce, confirmDialog, sparkline } from './ui.js';
import { datasetView } from './dataset_view.js';
import { modelView } from './model_view.js';
import { evalView } from './eval_view.js';

const MAX_LINES = 5000;     // log lines kept in the page; older ones are dropped
const SPARK_POINTS = 120;   // points kept per metric for the sparkline

export function mountJob(root, { id, navigate, dataset = false, model = false }) {
  const cleanups = [];
  let job = null;          // detail form
  let alive = true;
  let deleted = false;
  let ds = null;           // the dataset view, for a job of kind "dataset"
  let mv = null;           // the model view, for a job of kind "model"
  const KIND_PATH = { dataset: ['/datasets', 'Datasets'], model: ['/models', 'Models'] };
  const kindList = () => KIND_PATH[job ? job.kind : dataset ? 'dataset' : model ? 'model' : ''] || ['/jobs', 'Jobs'];
  const jobPath = () => (KIND_PATH[job && job.kind] ? `${KIND_PATH[job.kind][0]}/${id}` : `/jobs/${id}`);
  const listPath = () => kindList()[0];

  setChildren(root, h('div', { class: 'page job' }, h('p', { class: 'page-msg muted' }, 'Loading job…')));
  document.title = `Job #${id} · deepdesk`;

  /* ---------- header ---------- */
  const nameText = h('span', { class: 'job-name-text' });
  const renameBtn = h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Rename job', title: 'Rename' }, icon('pencil'));
  const titleView = h('div', { class: 'title-view' }, h('h1', { class: 'job-name' }, nameText), renameBtn);
  const nameInput = h('input', { type: 'text', class: 'input name-input', 'aria-label': 'Job name', maxlength: 200, autocomplete: 'off' });
  const titleEdit = h('form', { class: 'title-edit', hidden: true },
    nameInput,
    h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save'),
    h('button', { type: 'button', class: 'btn', onclick: () => endRename() }, 'Cancel'));

  const abortBtn = h('button', { type: 'button', class: 'btn' }, icon('stop'), h('span', { class: 'btn-label' }, 'Abort'));
  const cloneBtn = h('button', { type: 'button', class: 'btn' }, icon('copy'), 'Clone');
  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger-outline' }, icon('trash'), 'Delete');
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Job actions' }, abortBtn, cloneBtn, deleteBtn);

  const stateBadge = badge('queued');
  const metaKind = h('span', { class: 'kind' });
  const metaOwner = h('span');
  const metaCreated = h('time');
  const metaElapsed = h('span', { class: 'num' });
  const meta = h('div', { class: 'job-meta' },
    h('span', { class: 'job-state', 'aria-live': 'polite', 'aria-atomic': 'true' }, h('span', { class: 'sr-only' }, 'State: '), stateBadge),
    h('span', { class: 'meta-item' }, metaKind),
    h('span', { class: 'meta-item' }, 'by ', metaOwner),
    h('span', { class: 'meta-item' }, 'created ', metaCreated),
    h('span', { class: 'meta-item' }, 'elapsed ', metaElapsed));

  const bar = progressBar('Job progress');
  const barPct = h('span', { class: 'progress-pct num' });
  const barEta = h('span', { class: 'progress-eta muted' });
  const progressBox = h('div', { class: 'job-progress' }, bar, h('div', { class: 'progress-text' }, barPct, barEta));

  const errorBox = h('div', { class: 'alert alert-error', role: 'alert', hidden: true });
  // Where a cluster runs it: Slurm's job id, state, and while it waits why and its place.
  const clusterBox = h('div', { class: 'alert alert-info job-executor', role: 'status', hidden: true });
  const deletedBox = h('div', { class: 'alert alert-warn', role: 'status', hidden: true },
    'This job was deleted. ', h('a', { href: kindList()[0] }, `Back to ${kindList()[1].toLowerCase()}`));

  const crumbList = h('a', { href: kindList()[0] }, kindList()[1]);
  const head = h('header', { class: 'job-head' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      crumbList, h('span', { 'aria-hidden': 'true', class: 'crumb-sep' }, '/'),
      h('span', { 'aria-current': 'page', text: `#${id}` })),
    h('div', { class: 'title-row' }, h('div', { class: 'title-block' }, titleView, titleEdit), actions),
    meta, progressBox);

  /* ---------- log ---------- */
  const logTrunc = h('div', { class: 'log-trunc muted', hidden: true });
  const logLines = h('div', { class: 'log-lines' });
  const logBox = h('div', { class: 'log', role: 'log', 'aria-live': 'off', 'aria-label': 'Job log', tabindex: '0' }, logTrunc, logLines);
  const logEmpty = h('p', { class: 'log-empty muted' }, 'No log lines yet.');
  const logCount = h('span', { class: 'card-count muted' });
  const jumpBtn = h('button', { type: 'button', class: 'btn btn-small jump', hidden: true }, icon('down'), 'Latest');
  const logCard = h('section', { class: 'card log-card', 'aria-labelledby': 'log-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'log-title' }, 'Log'), logCount,
      h('span', { class: 'spacer' }), jumpBtn),
    h('div', { class: 'log-wrap' }, logBox, logEmpty));

  /* ---------- metrics ---------- */
  const metricsBody = h('tbody');
  const metricsCard = h('section', { class: 'card metrics-card', 'aria-labelledby': 'metrics-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'metrics-title' }, 'Metrics'),
      h('span', { class: 'card-count muted' }, 'latest values')),
    h('table', { class: 'metrics-table' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Metric'), h('th', { scope: 'col', class: 'r' }, 'Value'),
        h('th', { scope: 'col', class: 'r' }, 'Step'), h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Trend')))),
      metricsBody));

  /* ---------- side cards ---------- */
  const detailsDl = h('dl', { class: 'kv' });
  const historyList = h('ol', { class: 'timeline' });
  const relBox = h('div', { class: 'relations' });
  const notesView = h('div', { class: 'notes-view' });
  const notesText = h('p', { class: 'notes-text' });
  const notesEditBtn = h('button', { type: 'button', class: 'btn btn-small' }, icon('pencil'), 'Edit');
  const notesArea = h('textarea', { class: 'input notes-input', rows: 5, 'aria-label': 'Notes' });
  const notesForm = h('form', { class: 'notes-edit', hidden: true }, notesArea,
    h('div', { class: 'form-actions' },
      h('span', { class: 'muted hint' }, 'Ctrl+Enter to save'),
      h('button', { type: 'button', class: 'btn', onclick: () => endNotes() }, 'Cancel'),
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save notes')));
  notesView.append(notesText);
  const paramsPre = h('pre', { class: 'json', tabindex: '0', 'aria-label': 'Parameters' });

  const card = (title, idp, ...body) => h('section', { class: 'card side-card', 'aria-labelledby': idp },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: idp }, title)), ...body);

  const notesCard = h('section', { class: 'card side-card', 'aria-labelledby': 'notes-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'notes-title' }, 'Notes'), h('span', { class: 'spacer' }), notesEditBtn),
    notesView, notesForm);

  const jobMain = h('div', { class: 'job-main' }, metricsCard, logCard);
  const page = h('div', { class: 'page job' }, head, errorBox, clusterBox, deletedBox,
    h('div', { class: 'job-grid' },
      jobMain,
      h('div', { class: 'job-side' },
        notesCard,
        card('State history', 'history-title', historyList),
        card('Details', 'details-title', detailsDl),
        card('Related jobs', 'rel-title', relBox),
        card('Parameters', 'params-title', paramsPre))));

  /* ---------- rendering the record ---------- */
  function renderJob() {
    const j = job;
    document.title = `${j.name || `Job ${j.id}`} · #${j.id} · deepdesk`;
    if (titleEdit.hidden) setText(nameText, j.name || `Job ${j.id}`);
    setBadge(stateBadge, j.state);
    setText(metaKind, j.kind);
    setText(metaOwner, j.owner || '—');
    setAttr(metaCreated, 'datetime', j.created_at ? new Date(j.created_at).toISOString() : null);
    setAttr(metaCreated, 'title', dateTime(j.created_at));
    renderProgress();
    tick();

    const active = ACTIVE.has(j.state);
    abortBtn.hidden = !active || deleted;
    abortBtn.disabled = !!j.abort_requested;
    setText(abortBtn.querySelector('.btn-label'), j.abort_requested ? 'Aborting…' : 'Abort');
    cloneBtn.disabled = deleted;
    setAttr(cloneBtn, 'title', j.kind === 'dataset' ? 'A new dataset with these settings' : 'A new job with these settings');
    deleteBtn.disabled = deleted;
    renameBtn.disabled = deleted;
    notesEditBtn.disabled = deleted;

    // An error is red; why an aborted or interrupted job stopped is a note.
    errorBox.hidden = !j.error;
    if (j.error) {
      const failed = j.state === 'error';
      errorBox.className = `alert ${failed ? 'alert-error' : 'alert-warn'}`;
      setAttr(errorBox, 'role', failed ? 'alert' : 'status');
      const label = { error: 'Failed: ', aborted: 'Aborted: ', interrupted: 'Interrupted: ' }[j.state] || 'Note: ';
      setChildren(errorBox, h('strong', null, label), h('span', { text: j.error }));
    }

    const ex = j.executor;
    clusterBox.hidden = !ex || !ACTIVE.has(j.state);
    if (ex) {
      const waits = ex.state === 'PENDING';
      setChildren(clusterBox, h('strong', null, `Slurm job ${ex.job_id}: `),
        h('span', { text: waits ? `waiting in the queue${ex.position ? ` (${ex.position} in line)` : ''}${ex.reason ? `, reason: ${ex.reason}` : ''}` : ex.state.toLowerCase() }),
        ex.restarts ? h('span', { class: 'muted', text: ` · requeued ${ex.restarts}× (resumed from its snapshot)` }) : null);
    }

    if (notesForm.hidden) {
      setText(notesText, j.notes || 'No notes yet.');
      notesText.classList.toggle('muted', !j.notes);
      setText(notesEditBtn.lastChild, j.notes ? 'Edit' : 'Add');
    }

    renderDetails();
    renderHistory();
    renderRelations();
    if (ds) ds.update(j);
    if (mv) mv.update(j);
    const ptxt = JSON.stringify(j.params ?? {}, null, 2);
    if (paramsPre.dataset.src !== ptxt) {
      paramsPre.dataset.src = ptxt;
      setChildren(paramsPre, jsonNodes(j.params ?? {}, 0));
    }
  }

  function renderProgress() {
    const j = job;
    const p = j.state === 'done' ? 1 : j.progress;
    setProgress(bar, p, j.state);
    setText(barPct, j.state === 'queued' ? 'Queued' : percent(p));
  }

  let queueTicks = 0;
  const queueText = (q) => (q ? `number ${q.position} in the queue: ${q.reason}` : 'waiting for a free slot');
  function tick() {
    if (!job) return;
    const now = Date.now();
    setText(metaCreated, relTime(job.created_at, now));
    setText(metaElapsed, duration(elapsedOf(job, now)));
    setText(barEta, job.state === 'running' ? etaText(etaOf(job, now)) : job.state === 'queued' ? queueText(job.queue) : '');
    // a queued job's place moves as others start: read it again every 5 s
    if (job.state === 'queued' && !refreshing && ++queueTicks % 5 === 0) refreshDetail();
  }

  function renderDetails() {
    const j = job;
    const rows = [
      ['ID', `#${j.id}`],
      ['Kind', j.kind],
      ['Owner', j.owner || '—'],
      ['Created', dateTime(j.created_at)],
      ['Started', dateTime(j.started_at)],
      ['Finished', dateTime(j.finished_at)],
      ['Duration', duration(elapsedOf(j))],
      ['Process', j.pid ? `pid ${j.pid}` : '—'],
      ['Exit', j.exit ? (j.exit.signal ? `signal ${j.exit.signal}` : `code ${j.exit.code}`) : '—'],
      ['CPU slots', j.resources ? String(j.resources.cpu_slots ?? '—') : '—'],
      ['GPUs', j.resources && j.resources.gpus && j.resources.gpus.length ? j.resources.gpus.join(', ') : 'none'],
      ['Events', String(j.events ?? 0)],
    ];
    const key = JSON.stringify(rows);
    if (detailsDl.dataset.key === key) return;
    detailsDl.dataset.key = key;
    setChildren(detailsDl, rows.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })]));
  }

  function renderHistory() {
    const hist = job.history || [];
    const key = JSON.stringify(hist);
    if (historyList.dataset.key === key) return;
    historyList.dataset.key = key;
    setChildren(historyList, hist.map((e, i) => {
      const prev = i > 0 ? hist[i - 1].at : null;
      return h('li', { class: 'tl-item', dataset: { state: e.state } },
        h('span', { class: 'tl-dot', 'aria-hidden': 'true' }),
        h('div', { class: 'tl-body' },
          h('div', { class: 'tl-line' }, badge(e.state),
            h('time', { class: 'tl-time', datetime: new Date(e.at).toISOString(), text: dateTime(e.at) })),
          prev !== null ? h('span', { class: 'tl-delta muted', text: `+${duration((e.at - prev) / 1000)}` }) : null,
          e.message ? h('p', { class: 'tl-msg', text: e.message }) : null));
    }));
  }

  const names = new Map(); // id → name, for related jobs
  function renderRelations() {
    const parents = job.parents || [], children = job.children || [];
    const link = (rid) => {
      const known = store.jobs.get(rid);
      const nm = names.get(rid) ?? (known && known.name);
      return h('li', null, h('a', { href: `/jobs/${rid}` }, h('span', { class: 'job-id' }, `#${rid}`), nm ? ` ${nm}` : ''));
    };
    const key = JSON.stringify([parents, children, [...names]]);
    if (relBox.dataset.key === key) return;
    relBox.dataset.key = key;
    setChildren(relBox,
      h('h3', { class: 'rel-h' }, 'Uses'),
      parents.length ? h('ul', { class: 'rel-list', dataset: { rel: 'parents' } }, parents.map(link)) : h('p', { class: 'muted' }, 'No parent jobs.'),
      h('h3', { class: 'rel-h' }, 'Used by'),
      children.length ? h('ul', { class: 'rel-list', dataset: { rel: 'children' } }, children.map(link)) : h('p', { class: 'muted' }, 'No job uses this one.'));
    // Fetch names we do not know yet (a handful at most).
    for (const rid of [...parents, ...children].slice(0, 20)) {
      if (names.has(rid) || (store.jobs.get(rid) && store.jobs.get(rid).name)) continue;
      names.set(rid, null);
      get(`/jobs/${rid}`).then((r) => { names.set(rid, r.job.name); if (alive && job) renderRelations(); }, () => {});
    }
  }

  /* ---------- loading the record ---------- */
  let refreshing = null, refreshAgain = false;
  async function refreshDetail() {
    if (refreshing) { refreshAgain = true; return refreshing; }
    refreshing = (async () => {
      do {
        refreshAgain = false;
        try {
          const r = await get(`/jobs/${id}`);
          if (!alive) return;
          const firstTime = !job;
          job = { ...r.job, _rx: Date.now() };
          if (firstTime) {
            if (job.kind === 'dataset') mountDataset();
            if (job.kind === 'model') mountModel();
            if (job.kind === 'evaluation') mountEval();
            // /jobs/ID and /datasets/ID both open this page; the address says which it is.
            if (location.pathname !== jobPath()) history.replaceState(history.state, '', jobPath() + location.search + location.hash);
            setAttr(crumbList, 'href', listPath());
            setText(crumbList, kindList()[1]);
            setChildren(root, page);
          }
          renderJob();
        } catch (e) {
          if (!alive) return;
          if (e instanceof ApiError && e.status === 404) {
            if (job) markDeleted();
            else showMissing(e.message);
          } else if (!job) {
            setChildren(root, h('div', { class: 'page job' }, h('div', { class: 'alert alert-error', role: 'alert' },
              h('strong', null, 'Could not load this job: '), h('span', { text: e.message })),
            h('button', { type: 'button', class: 'btn', onclick: () => refreshDetail() }, 'Try again')));
          } else showError(e);
        }
      } while (refreshAgain && alive);
    })();
    try { await refreshing; } finally { refreshing = null; }
  }

  function mountDataset() {
    ds = datasetView(id);
    jobMain.prepend(ds.main);
    page.querySelector('.job-side').prepend(ds.side);
    cleanups.push(() => ds.destroy());
  }

  function mountModel() {
    mv = modelView(id, { navigate });
    jobMain.prepend(mv.main);
    page.querySelector('.job-side').prepend(mv.side);
    actions.prepend(...mv.actions);
    metricsCard.classList.add('model-metrics');
    cleanups.push(() => mv.destroy());
  }

  function mountEval() {
    mv = evalView(id, { navigate }); // the same hooks as a model's view: update, event, actions
    jobMain.prepend(mv.main);
    page.querySelector('.job-side').prepend(mv.side);
    cleanups.push(() => mv.destroy());
  }

  function showMissing(message) {
    document.title = `Job #${id} not found · deepdesk`;
    setChildren(root, h('div', { class: 'page job' },
      h('div', { class: 'empty card' }, icon('empty', 'empty-icon'),
        h('h1', { class: 'empty-title', text: 'Job not found' }),
        h('p', { class: 'empty-text', text: message }),
        h('a', { class: 'btn', href: '/jobs' }, 'All jobs'))));
  }

  function markDeleted() {
    if (deleted) return;
    deleted = true;
    deletedBox.hidden = false;
    if (job) renderJob();
    announce('This job was deleted.');
  }

  /* ---------- events: log, metrics, progress ---------- */
  let last = 0;            // last seq applied
  let lineNo = 0;
  let dropped = 0;
  let pending = [];        // log lines waiting for the next frame
  let flushQueued = false;
  let bulk = 0;            // > 0 while pages of old events are being fetched
  let lastFlush = 0;
  let stick = true;        // the view follows the end of the log
  const metrics = new Map();
  let metricsDirty = false;
  let chain = Promise.resolve();
  const enqueue = (fn) => (chain = chain.then(fn).catch((e) => { if (alive) showError(e, 'Log'); }));

  async function fetchAfter() {
    bulk++;
    if (mv) mv.setBulk(true);
    try {
      for (let guard = 0; guard < 100000 && alive; guard++) {
        const r = await get(`/jobs/${id}/events?after=${last}&limit=2000`);
        if (!alive) return;
        for (const ev of r.events) if (ev.seq > last) apply(ev);
        if (!r.more || r.events.length === 0) break;
      }
    } finally {
      bulk--;
      if (mv) mv.setBulk(false);
      schedule();
    }
  }

  async function onLiveEvents(evs) {
    for (const ev of evs) {
      if (typeof ev.seq !== 'number' || ev.seq <= last) continue;
      if (ev.seq > last + 1) {
        await fetchAfter(); // a gap: fetch what we missed, in order
        if (ev.seq <= last) continue;
      }
      apply(ev);
    }
  }

  function apply(ev) {
    last = ev.seq;
    if (mv) mv.event(ev);
    switch (ev.type) {
      case 'log':
        addLine(ev.t, ev.msg ?? '', ev.level || 'info');
        break;
      case 'status': {
        const what = { running: 'Job started', done: 'Job finished', error: 'Job failed', aborted: 'Job aborted',
          interrupted: 'Job interrupted', queued: 'Job queued' }[ev.state] || `State ${ev.state}`;
        const extra = [ev.pid ? `pid ${ev.pid}` : null, ev.message].filter(Boolean).join(' · ');
        addLine(ev.t, extra ? `${what} (${extra})` : what, 'status', ev.state);
        break;
      }
      case 'metric': {
        // {name, value, step}, or a model's {kind: train|val, loss, accuracy, lr, epoch, …}
        const pairs = ev.name ? [[ev.name, ev.value, ev.step]]
          : ev.kind ? ['loss', 'accuracy', 'accuracy_top5', 'lr']
            .filter((k) => typeof ev[k] === 'number' && !(k === 'lr' && ev.kind !== 'train'))
            .map((k) => [`${ev.kind} ${k}`, ev[k], typeof ev.epoch === 'number' ? +ev.epoch.toFixed(2) : undefined])
            : [];
        for (const [name, value, step] of pairs) {
          let m = metrics.get(name);
          if (!m) metrics.set(name, (m = { series: [] }));
          m.value = value;
          m.step = step;
          if (typeof value === 'number') {
            m.series.push(value);
            if (m.series.length > SPARK_POINTS) m.series.shift();
          }
        }
        if (!pairs.length) break;
        metricsDirty = true;
        schedule();
        break;
      }
      case 'progress':
        if (job && typeof ev.progress === 'number') {
          job.progress = ev.progress;
          if (typeof ev.eta_s === 'number') { job.eta_s = ev.eta_s; job._rx = Date.now(); }
          renderProgress();
          tick();
        }
        break;
      default: {
        const { t, seq, ...rest } = ev;
        addLine(t, JSON.stringify(rest), 'debug');
      }
    }
  }

  function addLine(t, msg, level, state) {
    pending.push({ t, msg: String(msg), level, state, n: ++lineNo });
    if (pending.length > 2 * MAX_LINES) {
      const cut = pending.length - MAX_LINES;
      dropped += cut;
      pending = pending.slice(cut);
    }
    schedule();
  }

  // Draw at most once a frame, and while a long log is being fetched page by page,
  // at most twice a second: laying out thousands of lines is what costs.
  function schedule() {
    if (flushQueued) return;
    if (bulk && performance.now() - lastFlush < 500) return;
    flushQueued = true;
    requestAnimationFrame(flush);
  }

  function flush() {
    flushQueued = false;
    if (!alive) return;
    lastFlush = performance.now();
    if (pending.length) {
      let list = pending;
      pending = [];
      if (list.length > MAX_LINES) {
        dropped += list.length - MAX_LINES;
        list = list.slice(-MAX_LINES);
      }
      // Drop the oldest lines on screen so that at most MAX_LINES remain.
      const have = logLines.childElementCount;
      const extra = Math.min(have, have + list.length - MAX_LINES);
      if (extra > 0) {
        const range = document.createRange();
        range.setStartBefore(logLines.firstElementChild);
        range.setEndAfter(logLines.children[extra - 1]);
        range.deleteContents();
        dropped += extra;
      }
      const frag = document.createDocumentFragment();
      for (const l of list) {
        frag.append(h('div', { class: 'log-line', dataset: { level: l.level, state: l.state } },
          h('span', { class: 'log-n', 'aria-hidden': 'true', text: l.n }),
          h('time', { class: 'log-time', text: clock(l.t) }),
          h('span', { class: 'log-msg', text: l.msg })));
      }
      logLines.append(frag);
      logTrunc.hidden = dropped === 0;
      if (dropped) setText(logTrunc, `${dropped} earlier lines are not shown here; the whole log is at /api/v1/jobs/${id}/events.`);
      logEmpty.hidden = true;
      setText(logCount, `${lineNo} line${lineNo === 1 ? '' : 's'}`);
      if (stick) logBox.scrollTop = logBox.scrollHeight;
      else jumpBtn.hidden = false;
    }
    if (metricsDirty) renderMetrics();
  }

  function renderMetrics() {
    metricsDirty = false;
    metricsCard.hidden = metrics.size === 0 || !!mv; // a model's curves are in its charts
    const names = [...metrics.keys()].sort();
    setChildren(metricsBody, names.map((name) => {
      const m = metrics.get(name);
      return h('tr', { dataset: { metric: name } },
        h('th', { scope: 'row', text: name }),
        h('td', { class: 'r num', text: num(m.value) }),
        h('td', { class: 'r num muted', text: m.step ?? '—' }),
        h('td', { class: 'spark-cell' }, sparkline(m.series)));
    }));
  }

  logBox.addEventListener('scroll', () => {
    stick = logBox.scrollHeight - logBox.scrollTop - logBox.clientHeight < 40;
    if (stick) jumpBtn.hidden = true;
  });
  jumpBtn.addEventListener('click', () => { logBox.scrollTop = logBox.scrollHeight; jumpBtn.hidden = true; logBox.focus(); });

  /* ---------- actions ---------- */
  abortBtn.addEventListener('click', async () => {
    abortBtn.disabled = true;
    setText(abortBtn.querySelector('.btn-label'), 'Aborting…');
    try {
      const r = await post(`/jobs/${id}/abort`);
      job = { ...job, ...r.job, _rx: Date.now() };
      renderJob();
      toast(`Abort requested for job #${id}.`);
    } catch (e) {
      showError(e, 'Abort failed');
      refreshDetail();
    }
  });

  cloneBtn.addEventListener('click', async () => {
    // A dataset is cloned through its form, filled in with its settings: an uploaded
    // archive is used once and must be chosen again, and any option can be changed.
    if (job && job.kind === 'dataset') { navigate(`/datasets/new?from=${id}`); return; }
    if (job && job.kind === 'model') { navigate(`/models/new?from=${id}`); return; }
    cloneBtn.disabled = true;
    try {
      const r = await post(`/jobs/${id}/clone`);
      toast(`Cloned as job #${r.job.id}.`, 'success');
      navigate(KIND_PATH[r.job.kind] ? `${KIND_PATH[r.job.kind][0]}/${r.job.id}` : `/jobs/${r.job.id}`);
    } catch (e) {
      showError(e, 'Clone failed');
    } finally {
      cloneBtn.disabled = deleted;
    }
  });

  deleteBtn.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Delete job #${id}?`,
      body: [h('p', null, 'This removes ', h('strong', { text: job.name || `job ${id}` }),
        ', its log and everything it produced. This cannot be undone.'), mv ? await mv.deleteNote() : null],
      confirm: 'Delete job', danger: true,
    });
    if (!ok) { deleteBtn.focus(); return; }
    try {
      await del(`/jobs/${id}`);
      toast(`Deleted job #${id}.`, 'success');
      navigate(listPath());
    } catch (e) {
      showError(e, 'Cannot delete');
      deleteBtn.focus();
    }
  });

  /* ---------- rename ---------- */
  renameBtn.addEventListener('click', () => {
    nameInput.value = job.name || '';
    titleView.hidden = true;
    titleEdit.hidden = false;
    nameInput.focus();
    nameInput.select();
  });
  function endRename() {
    titleEdit.hidden = true;
    titleView.hidden = false;
    renderJob();
    renameBtn.focus();
  }
  nameInput.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); endRename(); } });
  titleEdit.addEventListener('submit', async (e) => {
    e.preventDefault();
    const name = nameInput.value.trim();
    if (name === job.name) { endRename(); return; }
    try {
      const r = await patch(`/jobs/${id}`, { name });
      job = { ...job, ...r.job };
      endRename();
      toast('Name saved.', 'success');
    } catch (err) {
      showError(err, 'Rename failed');
      nameInput.focus();
    }
  });

  /* ---------- notes ---------- */
  notesEditBtn.addEventListener('click', () => {
    notesArea.value = job.notes || '';
    notesView.hidden = true;
    notesForm.hidden = false;
    notesEditBtn.hidden = true;
    notesArea.focus();
  });
  function endNotes() {
    notesForm.hidden = true;
    notesView.hidden = false;
    notesEditBtn.hidden = false;
    renderJob();
    notesEditBtn.focus();
  }
  notesArea.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { e.preventDefault(); endNotes(); }
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); notesForm.requestSubmit(); }
  });
  notesForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const r = await patch(`/jobs/${id}`, { notes: notesArea.value });
      job = { ...job, ...r.job };
      endNotes();
      toast('Notes saved.', 'success');
    } catch (err) {
      showError(err, 'Saving notes failed');
      notesArea.focus();
    }
  });

  /* ---------- live ---------- */
  cleanups.push(live.subscribe(id));
  cleanups.push(live.on('message', (m) => {
    if (m.type === 'events' && m.job === id && Array.isArray(m.events)) {
      const evs = m.events;
      enqueue(() => onLiveEvents(evs));
    } else if (m.type === 'job' && m.job && m.job.id === id) {
      // A detail fetch in flight may answer with an older record: fetch again after it.
      if (!job || refreshing) { refreshDetail(); return; }
      const stateChanged = m.job.state !== job.state;
      job = { ...job, ...m.job, _rx: Date.now() };
      renderJob();
      if (stateChanged) refreshDetail(); // history, exit code, pid come with the detail form
    } else if (m.type === 'deleted' && m.id === id) {
      markDeleted();
    }
  }));
  cleanups.push(live.on('open', ({ reconnected }) => {
    if (!reconnected) return;
    refreshDetail();
    enqueue(fetchAfter);
  }));
  const timer = setInterval(tick, 1000);
  cleanups.push(() => clearInterval(timer));

  refreshDetail().then(() => { if (job) enqueue(fetchAfter); });

  return {
    destroy() { alive = false; cleanups.forEach((f) => f()); },
  };
}

/* ---------- helpers ---------- */

/** Pretty JSON as spans (keys, strings, numbers, literals) — built as nodes, never HTML. */
function jsonNodes(v, depth) {
  const pad = '  '.repeat(depth), pad1 = '  '.repeat(depth + 1);
  if (v === null) return h('span', { class: 'j-lit' }, 'null');
  if (typeof v === 'boolean') return h('span', { class: 'j-lit' }, String(v));
  if (typeof v === 'number') return h('span', { class: 'j-num' }, String(v));
  if (typeof v === 'string') return h('span', { class: 'j-str' }, JSON.stringify(v));
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    const out = ['[\n'];
    v.forEach((x, i) => out.push(pad1, jsonNodes(x, depth + 1), i < v.length - 1 ? ',\n' : '\n'));
    out.push(pad, ']');
    return out;
  }
  const keys = Object.keys(v);
  if (!keys.length) return '{}';
  const out = ['{\n'];
  keys.forEach((k, i) => out.push(pad1, h('span', { class: 'j-key' }, JSON.stringify(k)), ': ',
    jsonNodes(v[k], depth + 1), i < keys.length - 1 ? ',\n' : '\n'));
  out.push(pad, '}');
  return out;
}
