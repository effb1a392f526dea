// model_new.js — the new-model form (/models/new, and /models/new?from=ID to clone): a
// finished dataset, a network (standard, a previous model's, or custom prototxt in a
// CodeMirror editor checked against the dataset as you type), DIGITS' solver options with a
// live preview of the learning-rate curve, and the data transforms.
//
// Comma lists in the learning rate and the batch size are a sweep: the page sends them as
// lists in one request and the server creates one job per combination, all in one group,
// or none when any combination is wrong.  Nothing is queued until every field is valid and
// the network checks out.
import { h, setText, setChildren, icon } from './dom.js';
import { get, post, ApiError } from './api.js';
import { bytes } from './format.js';
import { toast, announce } from './ui.js';
import { int, shapeText } from './dataset_view.js';
import { loadChart, cssVar, onSchemeChange } from './charts.js';
import { protoEditor } from './editor.js';
import { mountPresetPicker } from './classes.js';
import { formFields, formPage, submitCard } from './form.js';

/* DIGITS' defaults, as jobs/kind_train.c fills them in. */
export const SOLVER_TYPES = [
  ['sgd', 'SGD', 'Stochastic gradient descent with momentum'],
  ['nesterov', 'Nesterov', 'Nesterov\'s accelerated gradient'],
  ['adagrad', 'AdaGrad', 'Adaptive gradient'],
  ['rmsprop', 'RMSprop', 'Root mean square propagation'],
  ['adadelta', 'AdaDelta', 'Adaptive delta'],
  ['adam', 'Adam', 'Adaptive moment estimation'],
];
export const POLICIES = {
  fixed: { title: 'Fixed', fields: {} },
  step: { title: 'Step down', fields: { step_pct: 33, gamma: 0.1 } },
  multistep: { title: 'Step down (several steps)', fields: { multistep_pct: '50, 85', gamma: 0.5 } },
  exp: { title: 'Exponential decay', fields: { gamma: 0.95 } },
  inv: { title: 'Inverse decay', fields: { gamma: 0.1, power: 0.5 } },
  poly: { title: 'Polynomial decay', fields: { power: 3 } },
  sigmoid: { title: 'Sigmoid decay', fields: { step_pct: 50, gamma: 0.1 } },
};
const POLICY_FIELD = {
  step_pct: ['Step size', '% of training', 'Where the rate drops (step), or the sigmoid\'s centre.'],
  multistep_pct: ['Steps', '% list', 'Where the rate drops, in % of the training, e.g. 50, 85.'],
  gamma: ['Gamma', '', 'The factor at each step, or the decay rate.'],
  power: ['Power', '', 'The exponent of the decay.'],
};
const FALLBACK_NETS = [
  { name: 'lenet', title: 'LeNet', description: 'The classic for 28×28 digits and clothes: two convolutions, two fully connected layers.' },
  { name: 'alexnet', title: 'AlexNet', description: 'Five convolutions and three fully connected layers, for 224×224 colour images.' },
  { name: 'googlenet', title: 'GoogLeNet', description: 'Inception modules; deep and accurate on 224×224 images.' },
  { name: 'resnet_small', title: 'ResNet (small)', description: 'Residual blocks with batch normalisation: the modern default.' },
];

export function mountNewModel(root, { navigate }) {
  document.title = 'New model · deepdesk';
  let alive = true;
  const cleanups = [];
  let datasets = [];         // finished dataset jobs with summary
  let models = [];           // model jobs (list form)
  let nets = null;           // GET /networks standard list
  let netKind = 'standard';
  let check = { state: 'idle' }; // idle | checking | valid | invalid | unavailable | error
  let submitting = false;
  const modelNetText = new Map(); // model id → its prototxt (for Customize)

  /* ---------- field helpers (form.js, as the dataset form's) ---------- */
  const fid = (key) => `f-${key.replace(/\./g, '-')}`;
  // key → {wrap, inputs, err}
  const { fields, errorEl, register, field, setError, section } = formFields({ idOf: fid, sectionData: true });
  const textIn = (key, value, attrs = {}) => h('input', { type: 'text', class: 'input', id: fid(key), name: key,
    value, autocomplete: 'off', spellcheck: 'false', ...attrs });
  const numIn = (key, value, attrs = {}) => textIn(key, value, { inputmode: 'decimal', class: 'input num-input', ...attrs });
  function select(key, items, value) {
    return h('select', { class: 'input select', id: fid(key), name: key },
      items.map(([v, t]) => h('option', { value: v, selected: v === value }, t)));
  }

  /* ---------- 1. dataset ---------- */
  const dsSel = h('select', { class: 'input select', id: 'f-dataset', name: 'dataset' }, h('option', { value: '' }, 'Loading datasets…'));
  const dsSummary = h('div', { class: 'ds-summary', 'aria-live': 'polite' });
  const dsCard = section('ds', '1', 'Dataset', 'A finished image classification dataset to train on.',
    h('div', { class: 'field-row' },
      field('dataset', 'Dataset', dsSel, null, { req: true }),
      dsSummary));
  dsSel.addEventListener('change', () => { renderDsSummary(); scheduleCheck(); });

  /* ---------- 2. network ---------- */
  const NET_KINDS = [
    ['standard', 'Standard network', 'A proven network, ready to train'],
    ['previous', 'Previous model', 'Another model\'s network, or fine-tune its weights'],
    ['custom', 'Custom', 'Your own prototxt, checked as you type'],
  ];
  const netInputs = [];
  const netChoice = h('div', { class: 'segmented net-kind', role: 'radiogroup', 'aria-label': 'Network' },
    NET_KINDS.map(([v, title, text]) => {
      const input = h('input', { type: 'radio', name: 'net_kind', value: v, id: `f-net-${v}`, checked: v === netKind });
      netInputs.push(input);
      input.addEventListener('change', () => { if (input.checked) setNetKind(v); });
      return h('label', { class: 'segmented-item', for: input.id }, input,
        h('span', { class: 'segmented-body' }, h('span', { class: 'segmented-title' }, title), h('span', { class: 'segmented-text' }, text)));
    }));
  const netErr = errorEl('network');
  // standard
  const stdList = h('div', { class: 'choices std-nets', role: 'radiogroup', 'aria-label': 'Standard networks' });
  const stdCustomize = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'customize' } }, icon('pencil'), 'Customize');
  const stdPanel = h('div', { class: 'net-panel', dataset: { panel: 'standard' } }, stdList,
    h('div', { class: 'net-panel-actions' }, stdCustomize, h('span', { class: 'muted hint' }, 'Copy it into the editor to change it.')));
  // previous
  const prevSel = h('select', { class: 'input select', id: 'f-previous', name: 'previous' }, h('option', { value: '' }, 'Loading models…'));
  const snapSel = h('select', { class: 'input select', id: 'f-finetune-snapshot', name: 'finetune_snapshot' },
    h('option', { value: '' }, 'No: train from scratch'));
  const prevCustomize = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'customize-previous' } }, icon('pencil'), 'Customize');
  const prevPanel = h('div', { class: 'net-panel', dataset: { panel: 'previous' }, hidden: true },
    h('div', { class: 'field-row' },
      field('previous', 'Model', prevSel, 'Its network is used as it is.'),
      field('finetune.snapshot', 'Start from its weights', snapSel, 'Fine-tune: begin with one of its snapshots.')),
    h('div', { class: 'net-panel-actions' }, prevCustomize, h('span', { class: 'muted hint' }, 'Copy its network into the editor to change it.')));
  prevSel.addEventListener('change', () => { loadSnapshots(); scheduleCheck(); });
  // custom
  const ta = h('textarea', { class: 'input proto-input', id: 'f-prototxt', name: 'prototxt', rows: 18, spellcheck: 'false',
    'aria-label': 'Network prototxt', placeholder: 'name: "MyNet"\nlayer { … }' });
  const editor = protoEditor(ta);
  const protoErr = errorEl('network.prototxt');
  const customPanel = h('div', { class: 'net-panel', dataset: { panel: 'custom', field: 'network.prototxt' }, hidden: true }, editor.el, protoErr);
  register('network.prototxt', customPanel, [ta], protoErr);
  editor.onChange(() => { setError('network.prototxt', null); scheduleCheck(); });
  // the check result
  const checkStatus = h('div', { class: 'net-check', role: 'status', 'aria-live': 'polite', dataset: { state: 'idle' } });
  const vizBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'visualize' } }, icon('grid'), 'Visualize');
  const layersBody = h('tbody');
  const layersTable = h('div', { class: 'table-scroll layers-scroll', hidden: true },
    h('table', { class: 'data-table layers-table' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Layer'), h('th', { scope: 'col' }, 'Type'),
        h('th', { scope: 'col' }, 'Output'), h('th', { scope: 'col', class: 'r' }, 'Parameters'))),
      layersBody));
  const netCard = section('net', '2', 'Network', 'What to train: checked against the dataset\'s images before anything is queued.',
    netChoice, netErr, stdPanel, prevPanel, customPanel,
    h('div', { class: 'net-check-row' }, checkStatus, h('span', { class: 'spacer' }), vizBtn), layersTable);
  register('network', netCard, [...netInputs], netErr);

  /* ---------- 3. solver ---------- */
  const BATCH_HINT = 'Blank: the network\'s. A comma list (32, 64) is a sweep.';
  const epochsIn = numIn('epochs', '30');
  const snapIn = numIn('snapshot_interval', '1');
  const valIn = numIn('val_interval', '1');
  const batchIn = textIn('batch_size', '', { placeholder: 'the network\'s', inputmode: 'numeric' });
  const iterIn = numIn('solver.iter_size', '1');
  const typeSel = select('solver.type', SOLVER_TYPES.map(([v, t]) => [v, t]), 'sgd');
  const lrIn = textIn('solver.base_lr', '0.01', { inputmode: 'decimal' });
  const momIn = numIn('solver.momentum', '0.9');
  const wdIn = numIn('solver.weight_decay', '0.0005');
  const polSel = select('solver.lr_policy.policy', Object.entries(POLICIES).map(([k, p]) => [k, p.title]), 'step');
  const polInputs = {};
  const polFields = Object.entries(POLICY_FIELD).map(([k, [label, suffix, hint]]) => {
    const key = `solver.lr_policy.${k}`;
    const input = k === 'multistep_pct' ? textIn(key, '50, 85') : numIn(key, String(POLICIES.step.fields[k] ?? ''));
    polInputs[k] = input;
    const control = suffix && suffix !== '% list' ? h('span', { class: 'input-suffix' }, input, h('span', { class: 'suffix', 'aria-hidden': 'true' }, '%')) : input;
    const f = field(key, label, control, hint, { input });
    f.dataset.policyField = k;
    return f;
  });
  const momField = field('solver.momentum', 'Momentum', momIn, 'SGD and Nesterov.');
  const solverCard = section('sol', '3', 'Solver', 'How the weights are learned. The defaults are DIGITS\' own.',
    h('div', { class: 'field-row three' },
      field('epochs', 'Training epochs', epochsIn, 'Passes over the training images.', { req: true }),
      field('snapshot_interval', 'Snapshot every', snapIn, 'Epochs between saved weights.'),
      field('val_interval', 'Validate every', valIn, 'Epochs between validations.')),
    h('div', { class: 'field-row three' },
      field('batch_size', 'Batch size', batchIn, BATCH_HINT),
      field('solver.iter_size', 'Batch accumulation', iterIn, 'Batches summed per step (iter_size).'),
      field('solver.type', 'Solver type', typeSel, null)),
    h('div', { class: 'field-row three' },
      field('solver.base_lr', 'Base learning rate', lrIn, 'A comma list (0.01, 0.001) is a sweep.', { req: true }),
      momField,
      field('solver.weight_decay', 'Weight decay', wdIn, 'L2 penalty on the weights.')),
    h('div', { class: 'field-row three policy-row' },
      field('solver.lr_policy.policy', 'Learning rate policy', polSel, null), ...polFields));
  typeSel.addEventListener('change', () => { updateSolverFields(); scheduleCheck(); });
  polSel.addEventListener('change', () => { applyPolicyDefaults(); updateSolverFields(); schedulePreview(); });

  /* ---------- 4. data and hardware ---------- */
  const meanR = radioGroup('mean', [['image', 'Image', 'subtract the mean image'], ['pixel', 'Pixel', 'subtract the mean colour'], ['none', 'None', 'raw pixels']], 'image');
  const cropIn = numIn('crop_size', '', { placeholder: 'none', inputmode: 'numeric' });
  const seedIn = numIn('seed', '0', { inputmode: 'numeric' });
  const mirrorIn = h('input', { type: 'checkbox', id: 'f-mirror', name: 'mirror', class: 'check' });
  const mirrorField = field('mirror', 'Mirror', h('label', { class: 'check-label', for: 'f-mirror' }, mirrorIn, ' Flip training images at random'),
    'Half of the training images, left to right. Unticked: as the network\'s data layer says.', { input: mirrorIn });
  // Device: CPU and the reference backend always; one choice per GPU that GET /info lists
  // (the CUDA backend's), added once it answers, and "All N GPUs" where there are several.
  // A GPU choice's value is "cuda:" and its ids ("cuda:1", "cuda:0,1"): it sends backend
  // "cuda" and gpus [ids]; several train data parallel, batch_size images on each.
  const backendR = radioGroup('backend', [['cpu', 'CPU', 'oneDNN, fast'], ['ref', 'Reference', 'plain loops, slow; the oracle']], 'cpu');
  const dataCard = section('dat', '4', 'Data and hardware', 'What is done to each image before it is fed, and where the work runs.',
    h('div', { class: 'field-row' }, wrapRadio('mean', 'Mean subtraction', meanR),
      h('div', { class: 'field-row' },
        field('crop_size', 'Crop size', cropIn, 'Random crops in training, centre crops in validation. Blank: the network\'s.'),
        field('seed', 'Random seed', seedIn, 'The same seed, the same curve.'))),
    h('div', { class: 'field-row' }, mirrorField),
    wrapRadio('backend', 'Device', backendR));
  for (const i of [...meanR.inputs]) i.addEventListener('change', scheduleCheck);
  // the GPU radios come later (loadGpus): one listener on the group sees them all
  backendR.el.addEventListener('change', () => { updateBatchHint(); schedulePreview(); updateSubmit(); scheduleCheck(); });
  cropIn.addEventListener('input', scheduleCheck);
  batchIn.addEventListener('input', scheduleCheck);

  /* ---------- 5. name ---------- */
  const nameIn = textIn('name', '', { maxlength: 200, placeholder: 'e.g. LeNet on Fashion-MNIST', required: true, spellcheck: 'true' });
  const groupIn = textIn('group', '', { maxlength: 200, placeholder: 'optional' });
  const nameCard = section('nm', '5', 'Name', 'How the model is listed.',
    h('div', { class: 'field-row' },
      field('name', 'Model name', nameIn, null, { req: true, cls: 'grow' }),
      field('group', 'Group', groupIn, 'A sweep puts its jobs in one group (this name, or the model\'s).')));

  /* ---------- side: LR preview and create ---------- */
  const lrCanvas = h('canvas', { role: 'img', 'aria-label': 'Learning rate against epoch' });
  const lrNote = h('p', { class: 'muted lr-note' }, '\u00a0');
  const lrCard = h('section', { class: 'card lr-card', 'aria-labelledby': 'lr-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'lr-title' }, 'Learning rate'),
      h('span', { class: 'card-count muted' }, 'over the training')),
    h('div', { class: 'lr-body' }, h('div', { class: 'lr-chart' }, lrCanvas), lrNote));
  const topErr = h('div', { class: 'alert alert-error', role: 'alert', hidden: true, tabindex: '-1' });
  const copyNote = h('div', { class: 'alert alert-info', role: 'status', hidden: true });
  const submitBtn = h('button', { type: 'submit', class: 'btn btn-primary btn-big', dataset: { action: 'create-model' } }, icon('plus'),
    h('span', { class: 'btn-label' }, 'Create model'));
  const submitNote = h('p', { class: 'submit-note muted', 'aria-live': 'polite' });
  const side = h('aside', { class: 'newds-side' }, lrCard,
    submitCard(submitBtn, submitNote, '/models'));

  const form = h('form', { class: 'newds newmodel', novalidate: true, 'aria-label': 'New model' },
    h('div', { class: 'newds-main' }, dsCard, netCard, solverCard, dataCard, nameCard), side);
  const page = formPage({ cls: 'newmodel-page', href: '/models', list: 'Models', title: 'New model',
    sub: 'Train a network on a dataset, with DIGITS\' options and defaults.' },
    copyNote, topErr, form);
  setChildren(root, page);
  /* ---------- labs: "Start from a lab preset" for a learner in a class (classes.js) ---------- */
  const presetPicker = mountPresetPicker({ navigate, form });
  page.insertBefore(presetPicker.el, form);

  function radioGroup(name, items, value) {
    const inputs = [];
    const item = ([v, title, text]) => {
      const input = h('input', { type: 'radio', name, value: v, id: `f-${name}-${v.replace(/[^a-z0-9_-]/gi, '-')}`, checked: v === value });
      inputs.push(input);
      return h('label', { class: 'segmented-item', for: input.id }, input,
        h('span', { class: 'segmented-body' }, h('span', { class: 'segmented-title' }, title), h('span', { class: 'segmented-text' }, text)));
    };
    const el = h('div', { class: 'segmented', role: 'radiogroup', 'aria-label': name }, items.map(item));
    return {
      el, inputs,
      value: () => (inputs.find((i) => i.checked) || {}).value,
      set: (v) => { for (const i of inputs) i.checked = i.value === v; },
      add: (it) => { const label = item(it); el.append(label); return label; },
    };
  }
  function wrapRadio(key, label, r) {
    const err = errorEl(key);
    const wrap = h('div', { class: 'field', dataset: { field: key } }, h('span', { class: 'field-label' }, label), r.el, err);
    register(key, wrap, r.inputs, err);
    return wrap;
  }

  /* ---------- errors ---------- */
  function clearErrors() {
    for (const k of fields.keys()) setError(k, null);
    topErr.hidden = true;
  }
  function showTop(msg) {
    setChildren(topErr, h('strong', null, 'Could not create the model: '), h('span', { text: msg }));
    topErr.hidden = false;
    topErr.focus();
  }
  const cap = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);
  function focusField(key) {
    if (key === 'network.prototxt') { editor.el.scrollIntoView({ block: 'center' }); editor.focus(); return; }
    const f = fields.get(key);
    const el = f && (f.inputs.find((i) => i.checked) || f.inputs[0]);
    if (!el) return;
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: 'center' });
  }
  /** The server's "solver.base_lr: must be …" goes next to that field. */
  function placeServerError(e) {
    const msg = (e && e.message) || String(e);
    const m = /^([a-z_]+(?:\.[a-z_]+)*)(?:\[\d+\])?: (.*)$/s.exec(msg);
    if (m) {
      let key = m[1];
      if (key === 'network.previous') key = 'previous';
      else if (key === 'finetune' || key === 'finetune.model') key = netKind === 'previous' ? 'previous' : 'network';
      else if (key === 'network.prototxt' && netKind !== 'custom') key = 'network';
      if (fields.has(key)) {
        setError(key, cap(m[2]));
        announce(`Error: ${msg}`);
        focusField(key);
        return;
      }
    }
    showTop(msg);
  }

  /* ---------- devices ---------- */
  let gpuIds = []; // what GET /info lists
  async function loadGpus() {
    let info;
    try { info = await get('/info'); } catch { return; } // the form still works on the CPU
    if (!alive || !info || !Array.isArray(info.gpus)) return;
    for (const g of info.gpus) {
      if (!g || !Number.isInteger(g.id)) continue;
      gpuIds.push(g.id);
      const mem = typeof g.memory_total === 'number' ? bytes(g.memory_total) : '';
      backendR.add([`cuda:${g.id}`, `GPU ${g.id}`, [g.name, mem].filter(Boolean).join(', ') || 'CUDA']).dataset.gpu = String(g.id);
    }
    if (gpuIds.length >= 2) {
      backendR.add([`cuda:${gpuIds.join(',')}`, `All ${gpuIds.length} GPUs`, 'data parallel: the batch size is per GPU'])
        .dataset.gpus = 'all';
    }
  }
  /** The GPU ids a device choice names: [] for the CPU ones. */
  const devGpus = (dev) => (dev && dev.startsWith('cuda:') ? dev.slice(5).split(',').map(Number) : []);
  /** The choice for a job's params.backend and params.gpus (a list, a count or "any"), adding
   * one for a list of GPUs the radios do not have yet (a clone of a job on GPUs 0 and 2). */
  function deviceChoice(p) {
    if (p.backend !== 'cuda') return p.backend;
    const g = p.gpus;
    let ids = null;
    if (Array.isArray(g) && g.length && g.every((x) => Number.isInteger(x) && x >= 0)) ids = g;
    else if (Number.isInteger(g) && g >= 1 && g <= gpuIds.length) ids = gpuIds.slice(0, g); // N of any: the first N
    else if (gpuIds.length) ids = [gpuIds[0]]; // "any" or absent: one GPU
    if (!ids) return null;
    const v = `cuda:${ids.join(',')}`;
    if (ids.length > 1 && !backendR.inputs.some((i) => i.value === v)) {
      backendR.add([v, `GPUs ${ids.join(', ')}`, 'data parallel: the batch size is per GPU']).dataset.gpus = ids.join(',');
    }
    return v;
  }
  function updateBatchHint() {
    const n = devGpus(backendR.value()).length;
    const hint = fields.get('batch_size').wrap.querySelector('.field-hint');
    setText(hint, n > 1 ? `Per GPU: each step trains ${n} × this many images, one batch on each of the ${n} GPUs. ${BATCH_HINT}` : BATCH_HINT);
  }

  /* ---------- datasets ---------- */
  async function loadDatasets() {
    try {
      const r = await get('/datasets?limit=200');
      if (!alive) return;
      datasets = r.datasets.filter((d) => d.state === 'done' && d.summary);
      const keep = dsSel.value;
      setChildren(dsSel, datasets.length ? null : h('option', { value: '' }, 'No finished dataset yet'),
        datasets.map((d) => h('option', { value: d.id }, `#${d.id} ${d.name || 'Dataset'}`)));
      if (keep && datasets.some((d) => String(d.id) === keep)) dsSel.value = keep;
      renderDsSummary();
    } catch (e) {
      if (alive) setChildren(dsSel, h('option', { value: '' }, `Could not load datasets: ${e.message}`));
    }
  }
  function currentDataset() { return datasets.find((d) => String(d.id) === dsSel.value) || null; }
  function renderDsSummary() {
    const d = currentDataset();
    if (!d) {
      setChildren(dsSummary, datasets.length ? null : h('p', { class: 'muted' }, 'Build one first: ',
        h('a', { href: '/datasets/new' }, 'New dataset'), '.'));
      return;
    }
    const s = d.summary, sp = s.splits || {};
    const n = (k) => (sp[k] ? sp[k].images : 0);
    const o = s.options || {};
    setChildren(dsSummary, h('dl', { class: 'facts ds-facts', dataset: { dataset: d.id } },
      h('dt', null, 'Images'), h('dd', { dataset: { fact: 'shape' } }, `${o.width}×${o.height}, ${o.channels === 1 ? '1 channel (gray)' : `${o.channels} channels (colour)`}`),
      h('dt', null, 'Classes'), h('dd', { dataset: { fact: 'classes' } }, int((s.labels || []).length)),
      h('dt', null, 'Train'), h('dd', { class: 'num' }, int(n('train'))),
      h('dt', null, 'Validation'), h('dd', { class: 'num' }, int(n('val'))),
      n('test') ? [h('dt', null, 'Test'), h('dd', { class: 'num' }, int(n('test')))] : null,
      h('dt', null, 'On disk'), h('dd', null, bytes(s.disk_bytes))));
  }

  /* ---------- networks ---------- */
  async function loadNetworks() {
    try {
      const r = await get('/networks');
      nets = Array.isArray(r.standard) ? r.standard : [];
    } catch {
      nets = FALLBACK_NETS; // the route is not on this server: names only, no text
    }
    if (!alive) return;
    const keep = (stdList.querySelector('input:checked') || {}).value || 'lenet';
    setChildren(stdList, nets.map((n) => {
      const input = h('input', { type: 'radio', name: 'standard', value: n.name, id: `f-std-${n.name}`, checked: n.name === keep });
      input.addEventListener('change', () => { setError('network', null); scheduleCheck(); });
      return h('label', { class: 'choices-item', for: input.id }, input,
        h('span', { class: 'choices-body' }, h('span', { class: 'choices-title', text: n.title || n.name }),
          n.description ? h('span', { class: 'choices-text', text: n.description }) : null));
    }));
    if (!stdList.querySelector('input:checked') && stdList.querySelector('input')) stdList.querySelector('input').checked = true;
    stdCustomize.disabled = !nets.some((n) => typeof n.text === 'string');
    register('standard', stdList, [...stdList.querySelectorAll('input')], netErr);
    scheduleCheck();
  }
  const stdName = () => (stdList.querySelector('input:checked') || {}).value || null;

  async function loadModels() {
    try {
      const r = await get('/models?limit=200');
      if (!alive) return;
      models = r.models;
      const keep = prevSel.value;
      setChildren(prevSel, models.length ? h('option', { value: '' }, 'Choose a model') : h('option', { value: '' }, 'No models yet'),
        models.map((m) => h('option', { value: m.id }, `#${m.id} ${m.name || 'Model'}${m.network ? ` · ${m.network}` : ''}${m.snapshots ? '' : ' (no snapshot)'}`)));
      if (keep) prevSel.value = keep;
      netInputs.find((i) => i.value === 'previous').disabled = models.length === 0;
    } catch (e) {
      if (alive) setChildren(prevSel, h('option', { value: '' }, `Could not load models: ${e.message}`));
    }
  }
  async function loadSnapshots(want) {
    const id = prevSel.value;
    setChildren(snapSel, h('option', { value: '' }, 'No: train from scratch'));
    if (!id) return;
    try {
      const r = await get(`/models/${id}`);
      if (!alive || prevSel.value !== id) return;
      const snaps = r.model.snapshots || [];
      snapSel.append(...snaps.map((s) => h('option', { value: s.epoch }, `Epoch ${s.epoch} (${bytes(s.bytes)})`)));
      if (want !== undefined) snapSel.value = String(want);
    } catch { /* the list stays "from scratch" */ }
  }

  /** The prototxt of model id's network (standard, custom or another previous one). */
  async function networkTextOf(id, depth = 0) {
    if (modelNetText.has(id)) return modelNetText.get(id);
    if (depth > 8) throw new Error('the chain of previous models is too long');
    const job = (await get(`/jobs/${id}`)).job;
    const n = (job.params && job.params.network) || {};
    let text = null;
    if (typeof n.prototxt === 'string') text = n.prototxt;
    else if (n.standard) text = ((nets || []).find((s) => s.name === n.standard) || {}).text || null;
    else if (n.previous) text = await networkTextOf(n.previous, depth + 1);
    if (text === null) throw new Error(`the text of model ${id}'s network is not available here`);
    modelNetText.set(id, text);
    return text;
  }

  async function customize(from) {
    let text = null;
    try {
      if (from === 'standard') {
        const n = (nets || []).find((s) => s.name === stdName());
        text = n && typeof n.text === 'string' ? n.text : null;
        if (text === null) throw new Error('this server does not give the standard networks\' text');
      } else {
        if (!prevSel.value) { setError('previous', 'Choose a model first.'); focusField('previous'); return; }
        text = await networkTextOf(Number(prevSel.value));
      }
    } catch (e) {
      setError('network', `Cannot customize: ${e.message}`);
      return;
    }
    if (editor.getValue().trim() && editor.getValue() !== text) {
      // Nothing typed is lost silently.
      if (!window.confirm('Replace the text in the editor?')) return;
    }
    setNetKind('custom');
    editor.setValue(text);
    await editor.ready;
    editor.refresh();
    editor.focus();
    scheduleCheck(0);
  }
  stdCustomize.addEventListener('click', () => customize('standard'));
  prevCustomize.addEventListener('click', () => customize('previous'));

  function setNetKind(k) {
    netKind = k;
    for (const i of netInputs) i.checked = i.value === k;
    stdPanel.hidden = k !== 'standard';
    prevPanel.hidden = k !== 'previous';
    customPanel.hidden = k !== 'custom';
    setError('network', null);
    if (k === 'custom') editor.ready.then(() => editor.refresh());
    scheduleCheck(0);
  }

  /** The body's "network" part, or null when not chosen. */
  function networkSpec() {
    if (netKind === 'standard') return stdName() ? { standard: stdName() } : null;
    if (netKind === 'previous') return prevSel.value ? { previous: Number(prevSel.value) } : null;
    const t = editor.getValue();
    return t.trim() ? { prototxt: t } : null;
  }

  /* ---------- checking the network as you type ---------- */
  let checkTimer = null, checkSeq = 0, checkPromise = null;
  function scheduleCheck(ms = 400) {
    clearTimeout(checkTimer);
    checkTimer = setTimeout(() => { checkTimer = null; checkPromise = runCheck(); }, ms);
  }
  async function runCheck() {
    const spec = networkSpec();
    const seq = ++checkSeq;
    if (!spec) { setCheck({ state: 'idle' }); return; }
    const body = netKind === 'previous' ? { model: spec.previous } : { ...spec };
    const d = currentDataset();
    if (d) body.dataset = d.id;
    body.stage = 'train';
    const bs = firstNumber(batchIn.value), cs = firstNumber(cropIn.value);
    if (bs) body.batch_size = bs;
    if (cs) body.crop_size = cs;
    // the memory estimate depends on the solver (its history) and where it runs
    body.solver = typeSel.value;
    const be = backendR.value() || 'cpu';
    if (be.startsWith('cuda:')) {
      body.backend = 'cuda';
      const ids = be.slice(5).split(',').filter((x) => /^\d+$/.test(x));
      if (ids.length > 1) body.gpus = ids.length;
    } else body.backend = be;
    setCheck({ ...check, state: 'checking' });
    try {
      const r = await post('/networks/check', body);
      if (!alive || seq !== checkSeq) return;
      const err = { ...(r.error || { message: 'invalid network' }) };
      // The message may open with its own "LINE:COL: "; the place is shown apart from it.
      if (err.line && typeof err.message === 'string') err.message = err.message.replace(/^\d+:\d+:\s*/, '');
      setCheck(r.valid ? { state: 'valid', result: r } : { state: 'invalid', error: err });
    } catch (e) {
      if (!alive || seq !== checkSeq) return;
      if (e instanceof ApiError && (e.status === 404 || e.status === 405)) setCheck({ state: 'unavailable' });
      else if (e instanceof ApiError && e.status === 400) setCheck({ state: 'invalid', error: { message: e.message } });
      else setCheck({ state: 'error', message: e.message });
    }
  }
  /** 1288490189 → "1.2 GiB": the units the server's memory messages use. */
  function binBytes(n) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${i >= 3 ? n.toFixed(1) : Math.round(n)} ${u[i]}`;
  }
  /** The estimate's breakdown, for a tooltip. */
  function memoryTitle(m) {
    const b = m.breakdown || {};
    const parts = [['weights', b.params], ['gradients', b.grads], ['solver state', b.history], ['activations', b.activations],
      ['activation gradients', b.activation_grads], ['layer state', (b.saved || 0) + (b.layer_state || 0)],
      ['workspace', b.workspace], ['data feed', b.feed], ['snapshot read on resume', b.snapshot], ['runtime', b.runtime]];
    return `Memory to train, estimated${m.device ? ' (on the GPU, but for the feed and runtime)' : ''}: ` +
      parts.filter(([, v]) => v).map(([k, v]) => `${k} ${binBytes(v)}`).join(', ') +
      (m.limit ? `; the per-job limit is ${binBytes(m.limit)}` : '');
  }
  function firstNumber(s) {
    const v = String(s).split(',')[0].trim();
    return /^\d+$/.test(v) ? Number(v) : null;
  }
  function setCheck(c) {
    check = c;
    checkStatus.dataset.state = c.state;
    vizBtn.disabled = c.state === 'unavailable' || !networkSpec();
    editor.showError(c.state === 'invalid' && netKind === 'custom' ? c.error : null);
    if (c.state === 'idle') setChildren(checkStatus, h('span', { class: 'muted' }, netKind === 'custom' ? 'Type or paste a network; it is checked as you type.' : 'Choose a network.'));
    else if (c.state === 'checking') setChildren(checkStatus, h('span', { class: 'spinner', 'aria-hidden': 'true' }), h('span', { class: 'muted' }, 'Checking…'));
    else if (c.state === 'unavailable') setChildren(checkStatus, h('span', { class: 'muted' }, 'This server cannot check networks before training; it checks when the model is created.'));
    else if (c.state === 'error') setChildren(checkStatus, icon('alert'), h('span', { text: `Could not check: ${c.message}` }));
    else if (c.state === 'invalid') {
      const e = c.error;
      const where = e.line ? `line ${e.line}${e.col ? `:${e.col}` : ''}` : '';
      setChildren(checkStatus, icon('x', 'check-bad'),
        h('span', { class: 'check-msg' }, where && netKind === 'custom'
          ? h('button', { type: 'button', class: 'link-like', onclick: () => editor.goTo(e.line, e.col) }, where) : where,
        where ? ' ' : '', e.layer ? h('strong', { text: `${e.layer}: ` }) : null, h('span', { text: e.message })));
    } else if (c.state === 'valid') {
      const r = c.result, i = r.input || {};
      setChildren(checkStatus, icon('check', 'check-ok'),
        h('span', { class: 'check-msg' }, 'Valid: ', h('strong', { class: 'num', dataset: { params: r.params } }, int(r.params)), ' parameters',
          i.c ? ` · input ${i.n ?? '?'}×${i.c}×${i.h}×${i.w}` : '', i.classes ? ` · ${i.classes} classes` : '',
          r.memory ? h('span', { class: 'check-memory', title: memoryTitle(r.memory) }, ` · about ${binBytes(r.memory.host)} at batch ${r.memory.batch}`) : null));
    }
    layersTable.hidden = c.state !== 'valid';
    if (c.state === 'valid') {
      setChildren(layersBody, (c.result.layers || []).map((l) => h('tr', { dataset: { layer: l.name } },
        h('th', { scope: 'row', class: 'mono', text: l.name }),
        h('td', { text: l.type }),
        h('td', { class: 'mono' }, (l.tops || []).map((t, k) => [k ? h('br') : null,
          h('span', { class: 'muted', text: `${t.name} ` }), t.shape && t.shape.length ? t.shape.join('×') : 'scalar'])),
        h('td', { class: 'r num', text: l.params ? int(l.params) : '—' }))),
      h('tr', { class: 'total-row' }, h('th', { scope: 'row', colspan: 3 }, 'Total'), h('td', { class: 'r num', text: int(c.result.params) })));
    }
    updateSubmit();
  }

  vizBtn.addEventListener('click', async () => {
    const spec = networkSpec();
    if (!spec) return;
    const body = netKind === 'previous' ? { model: spec.previous } : { ...spec };
    const d = currentDataset();
    if (d) body.dataset = d.id;
    vizBtn.disabled = true;
    try {
      const res = await fetch('/api/v1/networks/visualize', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (!res.ok) {
        let m = `HTTP ${res.status}`;
        try { m = (await res.json()).error.message; } catch { /* not JSON */ }
        throw new Error(m);
      }
      // As an <img>, the SVG draws but runs nothing it might carry.
      const url = URL.createObjectURL(new Blob([await res.text()], { type: 'image/svg+xml' }));
      showGraph(url);
    } catch (e) {
      toast(`Cannot draw the network: ${e.message}`, 'error');
    } finally {
      vizBtn.disabled = false;
    }
  });
  function showGraph(url) {
    const close = h('button', { type: 'submit', class: 'btn', value: 'close' }, 'Close');
    const dlg = h('dialog', { class: 'dialog graph-dialog', 'aria-label': 'Network graph' },
      h('form', { method: 'dialog' },
        h('h2', { class: 'dialog-title' }, 'Network graph'),
        h('div', { class: 'graph-box' }, h('img', { src: url, alt: 'The network drawn as a graph of its layers', class: 'graph-img' })),
        h('div', { class: 'dialog-actions' }, h('a', { class: 'btn', href: url, download: 'network.svg' }, icon('download'), 'SVG'), close)));
    dlg.addEventListener('close', () => { dlg.remove(); URL.revokeObjectURL(url); });
    document.body.append(dlg);
    dlg.showModal();
    close.focus();
  }

  /* ---------- solver fields ---------- */
  function applyPolicyDefaults() {
    const p = POLICIES[polSel.value];
    for (const [k, v] of Object.entries(p.fields)) { polInputs[k].value = String(v); setError(`solver.lr_policy.${k}`, null); }
  }
  function updateSolverFields() {
    const p = POLICIES[polSel.value];
    for (const f of polFields) f.hidden = !(f.dataset.policyField in p.fields);
    momField.hidden = !['sgd', 'nesterov'].includes(typeSel.value);
  }

  /* ---------- the LR preview ---------- */
  let lrChart = null, lrTimer = null, lrSeq = 0, lrLocal = false;
  function schedulePreview() { clearTimeout(lrTimer); lrTimer = setTimeout(drawPreview, 250); }
  for (const i of [epochsIn, lrIn, ...Object.values(polInputs)]) i.addEventListener('input', schedulePreview);
  // an epoch's steps, and so the curve's x axis, follow the dataset, the batch and iter_size
  for (const i of [batchIn, iterIn]) i.addEventListener('input', schedulePreview);
  dsSel.addEventListener('change', schedulePreview);
  async function drawPreview() {
    const { errors, solver, epochs } = readSolver();
    const bad = Object.keys(errors).find((k) => k.startsWith('solver.lr_policy') || k === 'epochs' || k === 'solver.base_lr');
    if (bad || !epochs) { setText(lrNote, 'Fix the fields above to see the curve.'); return; }
    const seq = ++lrSeq;
    const d = currentDataset();
    let pts = null, policy = solver.lr_policy.policy;
    const ipe = iterationsPerEpoch(d);
    if (!lrLocal) {
      try {
        const body = { solver: { ...solver, base_lr: solver.base_lr[0] }, epochs };
        if (ipe) body.iterations_per_epoch = ipe;
        const r = await post('/lr-preview', body);
        pts = r.points;
        policy = r.policy || policy;
      } catch (e) {
        if (e instanceof ApiError && (e.status === 404 || e.status === 405)) lrLocal = true;
        else { if (alive && seq === lrSeq) setText(lrNote, e.message); return; }
      }
    }
    if (!pts) pts = lrCurve({ ...solver, base_lr: solver.base_lr[0] }, epochs, ipe || 100);
    if (!alive || seq !== lrSeq) return;
    setText(lrNote, `${POLICIES[policy] ? POLICIES[policy].title : policy}: from ${fmtLr(pts[0] && pts[0].lr)} to ${fmtLr(pts.length ? pts[pts.length - 1].lr : null)}${solver.base_lr.length > 1 ? ` (the first of ${solver.base_lr.length} rates)` : ''}`);
    let Chart;
    try { Chart = await loadChart(); } catch { setText(lrNote, 'Chart.js (libjs-chart.js) is not installed on the server.'); return; }
    if (!alive) return;
    const data = pts.map((p) => ({ x: p.epoch, y: p.lr }));
    if (lrChart) {
      lrChart.data.datasets[0].data = data;
      lrChart.options.scales.x.max = epochs;
      lrChart.update('none');
    } else {
      const text = cssVar('--muted'), grid = cssVar('--border-muted'), accent = cssVar('--accent');
      lrChart = new Chart(lrCanvas, {
        type: 'line',
        data: { datasets: [{ label: 'learning rate', data, borderColor: accent, backgroundColor: accent, pointRadius: 0, borderWidth: 2, stepped: false, tension: 0 }] },
        options: {
          responsive: true, maintainAspectRatio: false, animation: false, parsing: true,
          interaction: { mode: 'nearest', axis: 'x', intersect: false },
          plugins: { legend: { display: false }, tooltip: { callbacks: { title: (it) => `epoch ${(+it[0].parsed.x).toFixed(2)}`, label: (it) => `lr ${fmtLr(it.parsed.y)}` } } },
          scales: {
            x: { type: 'linear', min: 0, max: epochs, title: { display: true, text: 'epoch', color: text }, ticks: { color: text }, grid: { color: grid } },
            y: { beginAtZero: true, ticks: { color: text, callback: (v) => fmtLr(v) }, grid: { color: grid } },
          },
        },
      });
      lrCanvas.dataset.ready = '1';
    }
  }
  cleanups.push(onSchemeChange(() => { if (lrChart) { lrChart.destroy(); lrChart = null; drawPreview(); } }));
  function iterationsPerEpoch(d) {
    if (!d || !d.summary) return null;
    const n = d.summary.splits && d.summary.splits.train ? d.summary.splits.train.images : 0;
    const bs = firstNumber(batchIn.value) || 64;
    const it = Math.max(1, Number(iterIn.value) || 1);
    const replicas = Math.max(1, devGpus(backendR.value()).length); // a step trains a batch on each GPU
    return n ? Math.max(1, Math.ceil(n / (replicas * bs * it))) : null;
  }

  /* ---------- reading the form ---------- */
  const NUM_RE = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
  function readSolver() {
    const errors = {};
    const real = (key, input, lo, hi, { above = false, optional = false, integer = false } = {}) => {
      const s = input.value.trim();
      if (s === '') { if (!optional) errors[key] = 'Required.'; return null; }
      if (!NUM_RE.test(s)) { errors[key] = integer ? 'A whole number.' : 'A number.'; return null; }
      const v = Number(s);
      if (integer && !Number.isInteger(v)) { errors[key] = 'A whole number.'; return null; }
      if ((above ? v <= lo : v < lo) || v > hi) { errors[key] = `${above ? `Above ${lo}` : `From ${lo}`} ${above ? 'and at most' : 'to'} ${hi}.`; return null; }
      return v;
    };
    const list = (key, input, lo, hi, { integer = false, optional = false } = {}) => {
      const s = input.value.trim();
      if (s === '') { if (!optional) errors[key] = 'Required.'; return []; }
      const parts = s.split(',').map((x) => x.trim());
      const out = [];
      for (const p of parts) {
        if (!NUM_RE.test(p) || (integer && !Number.isInteger(Number(p)))) { errors[key] = `“${p}” is not ${integer ? 'a whole number' : 'a number'}: give a number or a comma list.`; return []; }
        const v = Number(p);
        if (v <= lo || v > hi) { errors[key] = `Each value above ${lo} and at most ${hi}; “${p}” is not.`; return []; }
        if (!out.includes(v)) out.push(v);
      }
      if (out.length > 16) { errors[key] = 'At most 16 values.'; return []; }
      return out;
    };
    const epochs = real('epochs', epochsIn, 1, 10000, { integer: true });
    const type = typeSel.value;
    const solver = { type, base_lr: list('solver.base_lr', lrIn, 0, 1000) };
    const wd = real('solver.weight_decay', wdIn, 0, 1);
    if (wd !== null) solver.weight_decay = wd;
    const it = real('solver.iter_size', iterIn, 1, 1024, { integer: true });
    if (it !== null) solver.iter_size = it;
    if (['sgd', 'nesterov'].includes(type)) {
      const m = real('solver.momentum', momIn, 0, 0.999999);
      if (m !== null) solver.momentum = m;
    }
    const pol = polSel.value;
    const lp = { policy: pol };
    const pf = POLICIES[pol].fields;
    if ('step_pct' in pf) { const v = real('solver.lr_policy.step_pct', polInputs.step_pct, 0, 100, { above: true }); if (v !== null) lp.step_pct = v; }
    if ('gamma' in pf) { const v = real('solver.lr_policy.gamma', polInputs.gamma, 0, 1000, { above: true }); if (v !== null) lp.gamma = v; }
    if ('power' in pf) { const v = real('solver.lr_policy.power', polInputs.power, 0, 1000, { above: true }); if (v !== null) lp.power = v; }
    if ('multistep_pct' in pf) {
      const vs = list('solver.lr_policy.multistep_pct', polInputs.multistep_pct, 0, 100);
      if (vs.some((v, i) => i > 0 && v <= vs[i - 1])) errors['solver.lr_policy.multistep_pct'] = 'Increasing percentages, e.g. 50, 85.';
      else if (vs.length) lp.multistep_pct = vs;
    }
    solver.lr_policy = lp;
    return { errors, solver, epochs, list, real };
  }

  /** {errors, body: the one request (lists for a sweep), count: the jobs it makes, sweep} */
  function collect() {
    const { errors, solver, epochs, list, real } = readSolver();
    const body = { name: nameIn.value.trim() };
    const d = currentDataset();
    if (!d) errors.dataset = datasets.length ? 'Choose a dataset.' : 'There is no finished dataset to train on yet.';
    else body.dataset = d.id;
    const spec = networkSpec();
    if (!spec) {
      if (netKind === 'custom') errors['network.prototxt'] = 'Type or paste a network.';
      else if (netKind === 'previous') errors.previous = 'Choose a model.';
      else errors.network = 'Choose a network.';
    } else body.network = spec;
    if (netKind === 'previous' && snapSel.value) body.finetune = { model: Number(prevSel.value), snapshot: Number(snapSel.value) };
    if (check.state === 'invalid') {
      const e = check.error;
      const msg = `${e.line ? `Line ${e.line}${e.col ? `:${e.col}` : ''}: ` : ''}${e.layer ? `${e.layer}: ` : ''}${e.message}`;
      if (netKind === 'custom') errors['network.prototxt'] = msg;
      else errors.network = msg;
    }
    if (epochs !== null) body.epochs = epochs;
    const si = real('snapshot_interval', snapIn, 0, 10000, { above: true });
    if (si !== null) body.snapshot_interval = si;
    const vi = real('val_interval', valIn, 0, 10000, { above: true });
    if (vi !== null) body.val_interval = vi;
    const batches = list('batch_size', batchIn, 0, 4096, { integer: true, optional: true });
    const crop = real('crop_size', cropIn, 1, 4096, { integer: true, optional: true });
    if (crop !== null) body.crop_size = crop;
    const seed = real('seed', seedIn, 0, Number.MAX_SAFE_INTEGER, { integer: true });
    if (seed !== null) body.seed = seed;
    body.mean = meanR.value();
    if (mirrorIn.checked) body.mirror = true;
    const dev = backendR.value() || 'cpu';
    if (dev.startsWith('cuda:')) { body.backend = 'cuda'; body.gpus = devGpus(dev); }
    else body.backend = dev;
    if (!body.name) errors.name = 'Give the model a name.';
    const group = groupIn.value.trim();
    if (group) body.group = group;

    // a list is sent as a list: the server makes one job per combination
    const lrs = solver.base_lr.length ? solver.base_lr : [0.01];
    const count = lrs.length * Math.max(1, batches.length);
    if (count > 64) errors['solver.base_lr'] = `${count} combinations: a sweep makes at most 64 jobs.`;
    body.solver = { ...solver, base_lr: lrs.length > 1 ? lrs : lrs[0] };
    if (batches.length) body.batch_size = batches.length > 1 ? batches : batches[0];
    return { errors, body, count, sweep: count > 1 };
  }

  function showErrors(errors) {
    const order = ['dataset', 'network', 'previous', 'finetune.snapshot', 'network.prototxt', 'epochs', 'snapshot_interval', 'val_interval',
      'batch_size', 'solver.iter_size', 'solver.type', 'solver.base_lr', 'solver.momentum', 'solver.weight_decay',
      'solver.lr_policy.policy', 'solver.lr_policy.step_pct', 'solver.lr_policy.multistep_pct', 'solver.lr_policy.gamma',
      'solver.lr_policy.power', 'mean', 'crop_size', 'seed', 'mirror', 'backend', 'name', 'group'];
    let first = null;
    for (const k of order) {
      if (!errors[k]) continue;
      setError(k, errors[k]);
      if (!first) first = k;
    }
    const n = Object.keys(errors).length;
    announce(`${n} field${n === 1 ? ' needs' : 's need'} attention.`);
    if (first) focusField(first);
  }

  /* ---------- submit ---------- */
  function updateSubmit() {
    const { count, sweep } = collect();
    submitBtn.disabled = submitting;
    setText(submitBtn.querySelector('.btn-label'), submitting ? 'Creating…' : sweep ? `Create ${count} models` : 'Create model');
    let note = '';
    if (check.state === 'checking') note = 'Checking the network…';
    else if (check.state === 'invalid') note = 'The network has an error: fix it first.';
    else if (sweep) note = `A sweep: ${count} jobs, one per learning rate and batch size, in one group.`;
    else if (devGpus(backendR.value()).length > 1) note = `The job is queued and starts when all ${devGpus(backendR.value()).length} GPUs are free.`;
    else note = 'The job is queued and starts when a CPU slot is free.';
    setText(submitNote, note);
  }
  for (const i of [lrIn, batchIn, nameIn]) i.addEventListener('input', updateSubmit);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (submitting) return;
    clearErrors();
    // A check still waiting to run is run now, one in flight is waited for: nothing is
    // queued on a stale answer.
    if (checkTimer) { clearTimeout(checkTimer); checkTimer = null; checkPromise = runCheck(); }
    if (checkPromise) await checkPromise;
    if (!alive) return;
    const { errors, body } = collect();
    if (Object.keys(errors).length) { showErrors(errors); return; }
    submitting = true;
    updateSubmit();
    try {
      // one request, a sweep or not: the server creates every job or none
      const r = await post('/models', body);
      if (!alive) return;
      if (r.models) {
        toast(`Created ${r.models.length} models in group “${r.group}”.`, 'success');
        navigate('/models');
      } else {
        toast(`Model “${r.job.name}” created as job #${r.job.id}.`, 'success');
        navigate(`/models/${r.job.id}`);
      }
    } catch (err) {
      if (!alive) return;
      placeServerError(err);
    } finally {
      submitting = false;
      if (alive) updateSubmit();
    }
  });

  /* ---------- cloning: ?from=ID ---------- */
  async function copyFrom(fromId) {
    let job;
    try {
      job = (await get(`/jobs/${fromId}`)).job;
    } catch (e) {
      if (alive) showTop(`Cannot copy model #${fromId}: ${e.message}`);
      return;
    }
    if (!alive) return;
    const p = job.params || {}, s = p.solver || {}, lp = s.lr_policy || {};
    const put = (input, v) => { if (v !== undefined && v !== null) input.value = Array.isArray(v) ? v.join(', ') : String(v); };
    if (p.dataset && datasets.some((d) => d.id === p.dataset)) dsSel.value = String(p.dataset);
    renderDsSummary();
    put(epochsIn, p.epochs); put(snapIn, p.snapshot_interval); put(valIn, p.val_interval);
    batchIn.value = p.batch_size ? String(p.batch_size) : '';
    cropIn.value = p.crop_size ? String(p.crop_size) : '';
    put(seedIn, p.seed);
    if (s.type) typeSel.value = s.type;
    put(lrIn, s.base_lr); put(momIn, s.momentum); put(wdIn, s.weight_decay); put(iterIn, s.iter_size);
    if (lp.policy && POLICIES[lp.policy]) { polSel.value = lp.policy; applyPolicyDefaults(); }
    for (const k of Object.keys(POLICY_FIELD)) put(polInputs[k], lp[k]);
    if (p.mean) meanR.set(p.mean);
    mirrorIn.checked = p.mirror === true;
    const dev = p.backend ? deviceChoice(p) : null;
    if (dev) backendR.set(dev);
    updateBatchHint();
    nameIn.value = `${job.name || `Model ${fromId}`} (clone)`;
    groupIn.value = typeof p.group === 'string' ? p.group : '';
    const n = p.network || {};
    if (n.standard) {
      const input = stdList.querySelector(`input[value="${CSS.escape(n.standard)}"]`);
      if (input) input.checked = true;
      setNetKind('standard');
    } else if (n.previous) {
      prevSel.value = String(n.previous);
      setNetKind('previous');
      await loadSnapshots(p.finetune && p.finetune.snapshot);
    } else if (typeof n.prototxt === 'string') {
      setNetKind('custom');
      editor.setValue(n.prototxt);
    }
    if (p.finetune && !n.previous) {
      prevSel.value = String(p.finetune.model);
      setNetKind('previous');
      await loadSnapshots(p.finetune.snapshot);
    }
    updateSolverFields();
    setChildren(copyNote, h('strong', null, 'Cloning '),
      h('a', { href: `/models/${fromId}`, text: `#${fromId} ${job.name || ''}`.trim() }), '. Every setting is copied; change what you like.');
    copyNote.hidden = false;
    document.title = `Clone of ${job.name || `#${fromId}`} · deepdesk`;
    scheduleCheck(0);
    schedulePreview();
    updateSubmit();
  }

  /* ---------- start ---------- */
  updateSolverFields();
  setCheck({ state: 'idle' });
  const from = new URLSearchParams(location.search).get('from');
  Promise.all([loadDatasets(), loadNetworks(), loadModels(), loadGpus()]).then(() => {
    if (!alive) return;
    if (from && /^\d+$/.test(from)) copyFrom(Number(from));
    else {
      const want = new URLSearchParams(location.search).get('dataset');
      if (want && datasets.some((d) => String(d.id) === want)) { dsSel.value = want; renderDsSummary(); }
      scheduleCheck(0);
      schedulePreview();
    }
  });
  updateSubmit();

  return {
    destroy() {
      presetPicker.destroy();
      alive = false;
      clearTimeout(checkTimer);
      clearTimeout(lrTimer);
      if (lrChart) lrChart.destroy();
      cleanups.forEach((f) => f());
    },
  };
}

/* ---------- helpers ---------- */

export function fmtLr(v) {
  if (typeof v !== 'number' || !isFinite(v)) return '—';
  if (v === 0) return '0';
  return Math.abs(v) < 1e-3 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

/**
 * The learning rate over the training as networks/solver.c computes it (lr_at), sampled
 * for a chart: [{epoch, lr}].  Used when the server has no /lr-preview.
 */
export function lrCurve(solver, epochs, ipe) {
  const total = Math.max(1, Math.round(epochs * ipe));
  const lp = solver.lr_policy || { policy: 'step' };
  const base = solver.base_lr;
  const stepsize = Math.max(1, Math.round(total * (lp.step_pct || 33) / 100));
  const steps = (lp.multistep_pct || [50, 85]).map((p) => Math.round(total * p / 100));
  const at = (it) => {
    switch (lp.policy) {
      case 'fixed': return base;
      case 'step': return base * lp.gamma ** Math.floor(it / stepsize);
      case 'multistep': { let k = 0; while (k < steps.length && it >= steps[k]) k++; return base * lp.gamma ** k; }
      case 'exp': return base * lp.gamma ** it;
      case 'inv': return base * (1 + lp.gamma * it) ** -lp.power;
      case 'poly': return base * (1 - it / total) ** lp.power;
      case 'sigmoid': return base / (1 + Math.exp(-lp.gamma * (it - stepsize)));
      default: return base;
    }
  };
  const n = Math.min(total, 400);
  const pts = [];
  for (let i = 0; i <= n; i++) {
    const it = Math.min(total, Math.round((i / n) * total));
    pts.push({ epoch: it / ipe, lr: at(Math.min(it, total - 1)) });
  }
  return pts;
}
