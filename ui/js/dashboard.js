// dashboard.js — one class (/classes/ID).  For its instructor (and admins): the live
// dashboard of every member's runs (state, progress, best validation accuracy, time
// used; each model's chart one click away on its page), the members and a roster
// import whose generated passwords are shown once and downloadable as CSV, the datasets
// shared with the class, and its lab presets.  For a member: the class, its shared
// datasets and presets, each preset a link to the new-model form.
//
// Live: store.js holds every job the WebSocket sends this user, and the server sends an
// instructor the jobs of their classes' members (perm.c), so a change to a run here
// updates its row at once; what only the server computes (best accuracy, time used, a
// new run) is fetched again, at most every 1.5 s.
import { h, setChildren, setText } from './dom.js';
import { get, post, del } from './api.js';
import { store } from './store.js';
import { duration, percent } from './format.js';
import { badge, setBadge, progressBar, setProgress, icon, showError, toast, ACTIVE } from './ui.js';

export function mountClassPage(root, { id, navigate }) {
  let alive = true;
  let cls = null;        // GET /classes/ID .class
  let instructs = false; // the dashboard answered
  let runs = new Map();  // job id → {row, cells}
  const cleanups = [];
  const head = h('div', { class: 'page-head' }, h('h1', { class: 'page-title' }, 'Class'));
  const dashCard = h('section', { class: 'card dash-card', hidden: true, 'aria-labelledby': 'dash-title' });
  const membersCard = h('section', { class: 'card class-members', 'aria-labelledby': 'members-title' });
  const dataCard = h('section', { class: 'card class-datasets', 'aria-labelledby': 'datasets-title' });
  const presetCard = h('section', { class: 'card class-presets', 'aria-labelledby': 'presets-title' });
  setChildren(root, h('div', { class: 'page class-page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '/classes' }, 'Classes'),
      h('span', { 'aria-hidden': 'true', class: 'crumb-sep' }, '/'), h('span', { 'aria-current': 'page', text: `Class ${id}` })),
    head, dashCard, h('div', { class: 'class-grid' }, membersCard, dataCard), presetCard));

  const cardHead = (tid, title, extra) => h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: tid, text: title }), extra || null);

  /* ---------- the dashboard ---------- */
  const dashBody = h('tbody');
  const dashEmpty = h('p', { class: 'empty-text muted', hidden: true }, 'No run yet: the members\' models appear here as they are queued.');
  setChildren(dashCard, cardHead('dash-title', 'Dashboard', h('span', { class: 'card-count muted' }, 'live')),
    h('div', { class: 'table-wrap' }, h('table', { class: 'jobs-table dash-table' },
      h('thead', null, h('tr', null, ['Learner', 'Model', 'State', 'Progress', 'Best val accuracy', 'Time used']
        .map((t) => h('th', { scope: 'col', text: t })))), dashBody)), dashEmpty);

  function runRow(r) {
    const state = badge(r.state);
    const bar = progressBar(`Progress of ${r.name}`);
    const pct = h('span', { class: 'muted dash-pct' });
    const acc = h('td', { class: 'dash-acc' });
    const used = h('td', { class: 'dash-time' });
    const row = h('tr', { dataset: { run: r.id, user: r.user.name } },
      h('td', { class: 'dash-user', text: r.user.name }),
      h('td', null, h('a', { href: `/models/${r.id}`, title: 'The model\'s page, with its charts', text: r.name })),
      h('td', null, state), h('td', null, bar, ' ', pct), acc, used);
    const rec = { row, state, bar, pct, acc, used, data: r };
    fill(rec, r);
    return rec;
  }

  function fill(rec, r) {
    rec.data = { ...rec.data, ...r };
    const d = rec.data;
    setBadge(rec.state, d.state);
    setProgress(rec.bar, d.progress, d.state);
    setText(rec.pct, percent(d.progress || 0));
    setText(rec.acc, typeof d.best_val_accuracy === 'number' ? percent(d.best_val_accuracy) : '—');
    setText(rec.used, duration(d.time_used_s));
  }

  async function loadDashboard() {
    try {
      const r = await get(`/classes/${id}/dashboard`);
      if (!alive) return;
      instructs = true;
      dashCard.hidden = false;
      const next = new Map();
      const rows = [];
      for (const run of r.runs) {
        const rec = runs.get(run.id) || runRow(run);
        fill(rec, run);
        next.set(run.id, rec);
        rows.push(rec.row);
      }
      runs = next;
      setChildren(dashBody, rows);
      dashEmpty.hidden = rows.length > 0;
    } catch (e) {
      if (e.status === 403) { instructs = false; dashCard.hidden = true; return; }
      if (alive) showError(e, 'Dashboard');
    }
  }

  let refetchTimer = null, lastFetch = 0;
  function refetchSoon() {
    if (!instructs || refetchTimer) return;
    const wait = Math.max(0, 1500 - (Date.now() - lastFetch));
    refetchTimer = setTimeout(async () => { refetchTimer = null; lastFetch = Date.now(); await loadDashboard(); }, wait);
  }
  const memberNames = () => new Set((cls?.members || []).map((m) => m.name));
  const onChange = (e) => {
    const { ids, how } = e.detail;
    if (!instructs || !ids) { if (how === 'load') return; refetchSoon(); return; }
    for (const jid of ids) {
      const j = store.jobs.get(jid);
      const rec = runs.get(jid);
      if (rec && j) fill(rec, { state: j.state, progress: j.progress });
      if (how === 'deleted' && rec) refetchSoon();
      else if (!rec && j && j.kind === 'model' && memberNames().has(j.owner)) refetchSoon();
      else if (rec && (how === 'state' || (j && ACTIVE.has(j.state)))) refetchSoon();
    }
  };
  store.addEventListener('change', onChange);
  cleanups.push(() => store.removeEventListener('change', onChange));
  const tick = setInterval(() => { // time used grows while a run runs
    for (const rec of runs.values()) if (rec.data.state === 'running') { rec.data.time_used_s += 1; setText(rec.used, duration(rec.data.time_used_s)); }
  }, 1000);
  cleanups.push(() => clearInterval(tick));

  /* ---------- members and the roster ---------- */
  const rosterIn = h('textarea', { class: 'input roster-input', id: 'roster-csv', rows: 5, spellcheck: 'false', placeholder: 'name,role\nann\nben\nta.jo,instructor' });
  const rosterErr = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const rosterOut = h('div', { class: 'roster-out', 'aria-live': 'polite' });
  const rosterBtn = h('button', { type: 'button', class: 'btn btn-primary', dataset: { action: 'import-roster' } }, icon('plus'), 'Import roster');
  rosterBtn.addEventListener('click', async () => {
    rosterErr.hidden = true;
    rosterBtn.disabled = true;
    try {
      const r = await post(`/classes/${id}/roster`, { csv: rosterIn.value });
      rosterIn.value = '';
      showCreated(r);
      await load();
    } catch (e) { rosterErr.textContent = e.message; rosterErr.hidden = false; } finally { rosterBtn.disabled = false; }
  });

  // The generated passwords: shown here once, and as a CSV file made in the page.
  function showCreated(r) {
    const csvCell = (s) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
    const csv = `name,role,password\n${r.created.map((u) => [u.name, u.role, u.password].map(csvCell).join(',')).join('\n')}\n`;
    const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
    cleanups.push(() => URL.revokeObjectURL(url));
    setChildren(rosterOut, h('div', { class: 'alert alert-info' },
      h('p', { text: `${r.created.length} account(s) made, ${r.added.length} existing added. The passwords are shown this once: download them now.` }),
      r.created.length ? h('table', { class: 'data-table roster-created' },
        h('thead', null, h('tr', null, h('th', null, 'Name'), h('th', null, 'Role'), h('th', null, 'Password'))),
        h('tbody', null, r.created.map((u) => h('tr', null, h('td', { text: u.name }), h('td', { text: u.role }), h('td', null, h('code', { text: u.password })))))) : null,
      r.created.length ? h('a', { class: 'btn', href: url, download: `class-${id}-accounts.csv`, dataset: { action: 'download-passwords' } }, 'Download CSV') : null));
  }

  function renderMembers() {
    const members = cls.members || [];
    const list = h('ul', { class: 'class-member-list' }, members.map((m) => h('li', { dataset: { member: m.id } },
      h('span', { text: m.name }), ' ', h('span', { class: 'muted', text: m.role }),
      instructs ? h('button', { type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': `Remove ${m.name}`,
        onclick: async () => { try { await del(`/classes/${id}/members/${m.id}`); await load(); } catch (e) { showError(e); } } }, 'Remove') : null)));
    setChildren(membersCard, cardHead('members-title', `Members (${members.length})`),
      h('div', { class: 'card-body' }, members.length ? list : h('p', { class: 'muted' }, 'No member yet.'),
        instructs ? [h('label', { class: 'field-label', for: 'roster-csv' }, 'Roster (CSV: name[,role])'), rosterIn, rosterErr, rosterBtn, rosterOut] : null));
  }

  /* ---------- shared datasets ---------- */
  const dsSel = h('select', { class: 'input select', id: 'share-dataset' });
  async function renderDatasets() {
    const ds = cls.datasets || [];
    const items = h('ul', { class: 'class-dataset-list' }, ds.map((d) => h('li', { dataset: { dataset: d.id } },
      h('a', { href: `/datasets/${d.id}`, text: d.name }), ' ', badge(d.state),
      instructs ? h('button', { type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': `Stop sharing ${d.name}`,
        onclick: async () => { try { await del(`/classes/${id}/datasets/${d.id}`); await load(); } catch (e) { showError(e); } } }, 'Unshare') : null)));
    const share = h('button', { type: 'button', class: 'btn', dataset: { action: 'share-dataset' } }, 'Share');
    share.addEventListener('click', async () => {
      if (!dsSel.value) return;
      try { await post(`/classes/${id}/datasets`, { dataset: Number(dsSel.value) }); await load(); } catch (e) { showError(e, 'Share'); }
    });
    setChildren(dataCard, cardHead('datasets-title', 'Shared datasets'),
      h('div', { class: 'card-body' }, ds.length ? items : h('p', { class: 'muted' }, 'No dataset shared yet.'),
        h('p', { class: 'muted' }, 'Members read these and train on them; they cannot change or delete them.'),
        instructs ? h('div', { class: 'share-row' }, h('label', { class: 'sr-only', for: 'share-dataset' }, 'Dataset to share'), dsSel, share) : null));
    if (instructs) {
      try {
        const mine = await get('/datasets?limit=200');
        setChildren(dsSel, h('option', { value: '' }, 'A dataset…'),
          (mine.datasets || []).filter((d) => d.state === 'done').map((d) => h('option', { value: String(d.id), text: `${d.name} (job ${d.id})` })));
      } catch { /* the list stays empty */ }
    }
  }

  /* ---------- presets ---------- */
  function presetForm() {
    const nameIn = h('input', { class: 'input', id: 'preset-new-name', maxlength: 200, placeholder: 'e.g. Lab 1: LeNet' });
    const dSel = h('select', { class: 'input select', id: 'preset-new-dataset' },
      (cls.datasets || []).map((d) => h('option', { value: String(d.id), text: d.name })),
      [...dsSel.options].filter((o) => o.value && !(cls.datasets || []).some((d) => String(d.id) === o.value)).map((o) => h('option', { value: o.value, text: o.textContent })));
    const netSel = h('select', { class: 'input select', id: 'preset-new-network' }, ['lenet', 'alexnet', 'googlenet'].map((n) => h('option', { value: n, text: n })));
    const epochsIn = h('input', { class: 'input', id: 'preset-new-epochs', inputmode: 'numeric', value: '10' });
    const lrIn = h('input', { class: 'input', id: 'preset-new-lr', inputmode: 'decimal', value: '0.01' });
    const lock = (f) => h('input', { type: 'checkbox', class: 'check', dataset: { lock: f }, checked: f !== 'solver.base_lr' });
    const locks = { dataset: lock('dataset'), network: lock('network'), epochs: lock('epochs'), 'solver.base_lr': lock('solver.base_lr') };
    const hideLr = h('input', { type: 'checkbox', class: 'check', dataset: { hide: 'solver.base_lr' } });
    const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const btn = h('button', { type: 'button', class: 'btn btn-primary', dataset: { action: 'publish-preset' } }, 'Publish preset');
    const row = (label, input, f) => h('div', { class: 'field' }, h('label', { class: 'field-label', for: input.id, text: label }), input,
      f ? h('label', { class: 'check-label' }, locks[f], ' locked') : null);
    btn.addEventListener('click', async () => {
      err.hidden = true;
      const locked = Object.entries(locks).filter(([, c]) => c.checked).map(([f]) => f);
      const body = {
        name: nameIn.value.trim(),
        settings: { dataset: Number(dSel.value), network: { standard: netSel.value }, epochs: Number(epochsIn.value), solver: { base_lr: Number(lrIn.value) } },
        locked, hidden: hideLr.checked ? ['solver.base_lr'] : [],
      };
      try { await post(`/classes/${id}/presets`, body); toast('Preset published', 'success'); await load(); } catch (e) { err.textContent = e.message; err.hidden = false; }
    });
    return h('div', { class: 'preset-form' }, h('h3', { class: 'card-subtitle' }, 'Publish a preset'),
      h('div', { class: 'field-row' }, row('Name', nameIn), row('Dataset', dSel, 'dataset'), row('Network', netSel, 'network')),
      h('div', { class: 'field-row' }, row('Epochs', epochsIn, 'epochs'), row('Base learning rate', lrIn, 'solver.base_lr'),
        h('label', { class: 'check-label' }, hideLr, ' hide the learning rate from learners')),
      err, btn);
  }

  function renderPresets() {
    const ps = cls.presets || [];
    const list = h('ul', { class: 'class-preset-list' }, ps.map((p) => h('li', { dataset: { preset: p.id } },
      h('strong', { text: p.name }), ' ',
      h('span', { class: 'muted', text: (p.locked || []).length ? `locked: ${p.locked.join(', ')}` : 'nothing locked' }),
      (p.hidden || []).length ? h('span', { class: 'muted', text: ` · hidden: ${p.hidden.join(', ')}` }) : null, ' ',
      instructs
        ? h('button', { type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': `Withdraw ${p.name}`,
          onclick: async () => { try { await del(`/classes/${id}/presets/${p.id}`); await load(); } catch (e) { showError(e); } } }, 'Withdraw')
        : h('a', { class: 'btn btn-small', href: `/models/new?preset=${p.id}` }, 'Start'))));
    setChildren(presetCard, cardHead('presets-title', 'Lab presets'),
      h('div', { class: 'card-body' }, ps.length ? list : h('p', { class: 'muted' }, 'No preset yet.'), instructs ? presetForm() : null));
  }

  async function load() {
    try {
      const r = await get(`/classes/${id}`);
      if (!alive) return;
      cls = r.class;
      document.title = `${cls.name} · Classes · deepdesk`;
      setChildren(head, h('div', null, h('h1', { class: 'page-title', text: cls.name }),
        h('p', { class: 'page-sub', text: cls.instructor ? `Instructor: ${cls.instructor.name}` : 'No instructor' })));
      await loadDashboard();
      renderMembers();
      await renderDatasets();
      renderPresets();
    } catch (e) {
      if (!alive) return;
      setChildren(head, h('div', null, h('h1', { class: 'page-title' }, 'Class not found'), h('p', { class: 'page-sub', text: e.message })));
      for (const c of [dashCard, membersCard, dataCard, presetCard]) c.hidden = true;
    }
  }
  load();
  store.load('kind=model').catch(() => {});
  return {
    destroy() {
      alive = false;
      clearTimeout(refetchTimer);
      cleanups.forEach((f) => f());
    },
  };
}
