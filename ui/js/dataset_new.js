// dataset_new.js — the new-dataset form (/datasets/new): where the images come from (an
// uploaded archive, folders on the server, or the Fashion-MNIST example), DIGITS' options,
// a live preview of one record, and validation that places the server's errors next to
// the field they name.
//
// An archive is uploaded as soon as it is chosen (XMLHttpRequest, for upload progress),
// so it is usually there by the time the form is filled in; "Create" waits for it.
import { h, setText, setAttr, setChildren, icon } from './dom.js';
import { get, post, ApiError } from './api.js';
import { bytes } from './format.js';
import { progressBar, setProgress, toast, announce } from './ui.js';
import { formFields, formPage, submitCard } from './form.js';

const ARCHIVE_RE = /\.(zip|tar|tar\.gz|tgz)$/i;
const ARCHIVE_ACCEPT = '.zip,.tar,.tar.gz,.tgz,application/zip,application/x-tar,application/gzip,application/x-gzip';

export const RESIZE_MODES = [
  ['squash', 'Squash', 'Stretch the whole picture to the size; its proportions change.'],
  ['crop', 'Crop', 'Scale to cover the size, then cut off what sticks out, keeping the centre.'],
  ['fill', 'Fill', 'Scale to fit inside the size, then pad the empty bands with noise.'],
  ['half_crop', 'Half crop', 'Half way between: crop the long side a little, pad the short side a little.'],
];
export const ENCODINGS = [
  ['png', 'PNG', 'lossless, compressed'],
  ['jpg', 'JPEG', 'lossy (quality 90), smallest'],
  ['none', 'None', 'raw pixels: largest, nothing to decode'],
];
const SIZE_PRESETS = [28, 32, 64, 128, 224, 256];

const SOURCES = [
  { id: 'upload', icon: 'upload', title: 'Upload an archive', text: '.zip, .tar, .tar.gz or .tgz from this computer' },
  { id: 'folder', icon: 'server', title: 'Server folder', text: 'Images already on the server' },
  { id: 'example', icon: 'sparkle', title: 'Fashion-MNIST example', text: '70,000 clothing pictures, ready in one click' },
];

export function mountNewDataset(root, { navigate }) {
  document.title = 'New dataset · deepdesk';
  let alive = true;
  let source = 'upload';
  let upload = null;        // {file, xhr, state: uploading|done|error, loaded, total, id, error, promise}
  let submitting = false;
  let nameAuto = null;      // the name we filled in ourselves (replaced freely until edited)
  let roots = null;         // /info data_roots once known
  // key → {wrap, inputs: [], err}; the size and split rows hold two error lines each
  const { fields, errorEl, register, field, setError, section } = formFields({ anyError: true });

  /* ---------- small builders ---------- */
  function numInput(key, { min, max, value, placeholder, suffix, label }) {
    const input = h('input', { type: 'number', class: 'input num-input', id: `f-${key}`, name: key, min, max,
      step: 1, inputmode: 'numeric', value: value === '' ? null : value, placeholder, autocomplete: 'off',
      'aria-label': label || null });
    if (!suffix) return input;
    return { input, el: h('span', { class: 'input-suffix' }, input, h('span', { class: 'suffix', 'aria-hidden': 'true' }, suffix)) };
  }
  /** A group of radio buttons drawn as a segmented control or as a list of choices. */
  function radios(name, items, value, { cls = 'segmented', legend }) {
    const inputs = [];
    const el = h('div', { class: cls, role: 'radiogroup', 'aria-label': legend },
      items.map(([v, title, text]) => {
        const input = h('input', { type: 'radio', name, value: v, id: `f-${name}-${v}`, checked: v === value });
        inputs.push(input);
        return h('label', { class: `${cls}-item`, for: input.id }, input,
          h('span', { class: `${cls}-body` }, h('span', { class: `${cls}-title` }, title),
            text ? h('span', { class: `${cls}-text` }, text) : null));
      }));
    return { el, inputs, value: () => (inputs.find((i) => i.checked) || {}).value };
  }

  /* ---------- 1. source ---------- */
  const sourceInputs = [];
  const sourceCards = h('div', { class: 'source-choice', role: 'radiogroup', 'aria-labelledby': 'src-title' },
    SOURCES.map((s) => {
      const input = h('input', { type: 'radio', name: 'source', value: s.id, id: `src-${s.id}`, checked: s.id === source });
      sourceInputs.push(input);
      const note = h('span', { class: 'source-note' });
      return h('label', { class: 'source-card', for: input.id, dataset: { source: s.id } }, input,
        h('span', { class: 'source-icon' }, icon(s.icon)),
        h('span', { class: 'source-body' }, h('span', { class: 'source-title' }, s.title),
          h('span', { class: 'source-text' }, s.text), note));
    }));
  const sourceErr = errorEl('source');

  // upload
  const fileInput = h('input', { type: 'file', id: 'f-file', name: 'archive', accept: ARCHIVE_ACCEPT, class: 'file-input' });
  const dropzone = h('div', { class: 'dropzone', dataset: { drop: '' } },
    h('span', { class: 'dropzone-icon' }, icon('archive')),
    h('p', { class: 'dropzone-title' }, 'Drop an archive here, or ',
      h('label', { for: 'f-file', class: 'link-like' }, 'choose a file'), fileInput),
    h('p', { class: 'dropzone-text muted' }, '.zip, .tar, .tar.gz or .tgz'));
  const fileBox = h('div', { class: 'filebox', hidden: true });
  const fileErr = errorEl('file');
  register('file', dropzone, [fileInput], fileErr);
  const uploadPanel = h('div', { class: 'source-panel', dataset: { panel: 'upload' } },
    dropzone, fileBox, fileErr,
    h('details', { class: 'layout-help' },
      h('summary', null, 'How should the archive be laid out?'),
      h('div', { class: 'layout-body' },
        h('p', null, 'One folder per class, named after it; sub-folders are folded into their class:'),
        h('pre', { class: 'tree' }, 'cats/0001.jpg\ncats/more/0002.png\ndogs/0001.jpg\n…'),
        h('p', null, 'Or ', h('code', null, 'train/'), ', ', h('code', null, 'val/'), ' and ', h('code', null, 'test/'),
          ' folders, each holding class folders; then the percentages below only split what has no folder of its own.'),
        h('p', { class: 'muted' }, 'Images: PNG, JPEG, BMP, PPM and PGM. Anything else is listed as skipped, with the reason.'))));

  // server folder
  const rootsBox = h('div', { class: 'roots' }, h('span', { class: 'muted' }, 'Loading the allowed folders…'));
  const pathInput = (key, ph) => h('input', { type: 'text', class: 'input path-input', id: `f-${key}`, name: key,
    placeholder: ph, autocomplete: 'off', spellcheck: 'false' });
  const trainIn = pathInput('train', '/data/images/train');
  const valIn = pathInput('val', 'optional');
  const testIn = pathInput('test', 'optional');
  const folderFields = h('div', { class: 'folder-fields' },
    field('train', 'Training images', trainIn, 'A folder of class folders.', { req: true }),
    h('div', { class: 'field-row' },
      field('val', 'Validation images', valIn, 'Instead of taking the validation % from the training images.'),
      field('test', 'Test images', testIn, 'Instead of taking the test % from the training images.')));
  const folderPanel = h('div', { class: 'source-panel', dataset: { panel: 'folder' }, hidden: true }, rootsBox, folderFields);

  // example
  const examplePanel = h('div', { class: 'source-panel', dataset: { panel: 'example' }, hidden: true },
    h('div', { class: 'example-box' },
      h('div', { class: 'example-art', 'aria-hidden': 'true' }, Array.from({ length: 9 }, () => h('span'))),
      h('div', null,
        h('p', { class: 'example-title' }, 'Fashion-MNIST'),
        h('p', null, '70,000 grayscale 28×28 pictures of clothing in 10 classes, from Zalando Research: ',
          '60,000 for training and 10,000 for testing. The options below are set to match; ',
          'the validation % is taken from the training pictures.'),
        h('p', { class: 'muted example-note' }, 'It comes from Debian\'s ', h('code', null, 'dataset-fashion-mnist'),
          ' package on the server; if that is not installed, the server says so when you create the dataset.'))));

  const sourceCard = section('src', '1', 'Source', 'Where the labelled images come from.',
    sourceCards, sourceErr, uploadPanel, folderPanel, examplePanel);

  /* ---------- 2. images ---------- */
  const typeR = radios('channels', [['3', 'Colour', 'RGB, 3 channels'], ['1', 'Grayscale', '1 channel']], '3', { legend: 'Image type' });
  const typeErr = errorEl('channels');
  const w = numInput('width', { min: 1, max: 4096, value: 256, label: 'Width in pixels' });
  const hh = numInput('height', { min: 1, max: 4096, value: 256, label: 'Height in pixels' });
  const sizeErrW = errorEl('width'), sizeErrH = errorEl('height');
  const presets = h('div', { class: 'chips', role: 'group', 'aria-label': 'Common sizes' },
    SIZE_PRESETS.map((n) => h('button', { type: 'button', class: 'chip', dataset: { size: n },
      onclick: () => { w.value = n; hh.value = n; setError('width', null); setError('height', null); onOptionsChanged(); } }, `${n}²`)));
  const sizeField = h('div', { class: 'field', dataset: { field: 'size' } },
    h('span', { class: 'field-label', id: 'size-label' }, 'Size ', h('span', { class: 'muted' }, '(pixels)')),
    h('div', { class: 'size-row', role: 'group', 'aria-labelledby': 'size-label' },
      h('label', { class: 'mini-label', for: w.id }, 'W'), w,
      h('span', { class: 'times', 'aria-hidden': 'true' }, '×'),
      h('label', { class: 'mini-label', for: hh.id }, 'H'), hh, presets),
    sizeErrW, sizeErrH);
  register('width', sizeField, [w], sizeErrW);
  register('height', sizeField, [hh], sizeErrH);

  const resizeR = radios('resize_mode', RESIZE_MODES, 'squash', { cls: 'choices', legend: 'Resize mode' });
  const resizeErr = errorEl('resize_mode');
  const encR = radios('encoding', ENCODINGS, 'png', { legend: 'Encoding' });
  const encErr = errorEl('encoding');
  const imagesCard = section('img', '2', 'Images', 'Every image is converted, resized and encoded the same way.',
    h('div', { class: 'field', dataset: { field: 'channels' } }, h('span', { class: 'field-label' }, 'Image type'), typeR.el, typeErr),
    sizeField,
    h('div', { class: 'field', dataset: { field: 'resize_mode' } }, h('span', { class: 'field-label' }, 'Resize mode'), resizeR.el, resizeErr),
    h('div', { class: 'field', dataset: { field: 'encoding' } }, h('span', { class: 'field-label' }, 'Encoding'), encR.el, encErr));
  register('channels', typeR.el.parentNode, typeR.inputs, typeErr);
  register('resize_mode', resizeR.el.parentNode, resizeR.inputs, resizeErr);
  register('encoding', encR.el.parentNode, encR.inputs, encErr);

  /* ---------- 3. splits ---------- */
  const valP = numInput('val_pct', { min: 0, max: 100, value: 25, suffix: '%' });
  const testP = numInput('test_pct', { min: 0, max: 100, value: 0, suffix: '%' });
  const minC = numInput('min_per_class', { min: 1, value: 2 });
  const maxC = numInput('max_per_class', { min: 0, value: '', placeholder: 'no limit' });
  const seedIn = numInput('seed', { min: 0, value: 0 });
  const splitBar = h('div', { class: 'splitbar', 'aria-hidden': 'true' },
    h('span', { class: 'split-seg', dataset: { split: 'train' } }), h('span', { class: 'split-seg', dataset: { split: 'val' } }),
    h('span', { class: 'split-seg', dataset: { split: 'test' } }));
  const splitLegend = h('p', { class: 'split-legend', id: 'split-legend' });
  const splitsErr = errorEl('splits');
  const splitsCard = section('spl', '3', 'Splits', 'How the images of each class are shared out, and which classes are kept.',
    h('div', { class: 'field-row three' },
      fieldOf('val_pct', 'Validation', valP, 'Share of each class held out to validate.'),
      fieldOf('test_pct', 'Test', testP, 'Held out to test after training.'),
      h('div', { class: 'field split-vis' }, h('span', { class: 'field-label' }, 'Each class is split'), splitBar, splitLegend)),
    splitsErr,
    h('div', { class: 'field-row three' },
      field('min_per_class', 'Min images per class', minC, 'Smaller classes are dropped.'),
      field('max_per_class', 'Max images per class', maxC, 'Blank: use them all.'),
      field('seed', 'Shuffle seed', seedIn, 'The same seed, the same split.')));
  register('splits', splitsErr.parentNode, [valP.input, testP.input], splitsErr);
  function fieldOf(key, label, n, hint) {
    return field(key, label, n.el, hint, { input: n.input });
  }

  /* ---------- 4. name ---------- */
  const nameIn = h('input', { type: 'text', class: 'input', id: 'f-name', name: 'name', maxlength: 200, autocomplete: 'off',
    placeholder: 'e.g. cats vs dogs, 64px', required: true, 'aria-required': 'true' });
  const groupIn = h('input', { type: 'text', class: 'input', id: 'f-group', name: 'group', maxlength: 200, autocomplete: 'off',
    placeholder: 'optional' });
  nameIn.addEventListener('input', () => { nameAuto = null; });
  const nameCard = section('nm', '4', 'Name', 'How the dataset is listed.',
    h('div', { class: 'field-row' },
      field('name', 'Dataset name', nameIn, null, { req: true, cls: 'grow' }),
      field('group', 'Group', groupIn, 'Keeps related datasets together.')));

  /* ---------- side: preview and create ---------- */
  // Nothing in the side column changes height as the preview changes, so the button
  // below never moves under a pointer on its way to it.
  const pvImg = h('img', { class: 'preview-img', alt: 'Preview of one record', hidden: true });
  const pvErr = h('p', { class: 'preview-error', hidden: true, role: 'status' });
  const pvBox = h('div', { class: 'preview-box' }, pvImg, h('span', { class: 'preview-wait muted' }, 'Loading preview…'), pvErr);
  const pvCaption = h('p', { class: 'preview-caption' }, '\u00a0');
  const pvBytes = h('p', { class: 'preview-bytes', dataset: { encoded: '' } }, '\u00a0');
  const topErr = h('div', { class: 'alert alert-error', role: 'alert', hidden: true, tabindex: '-1' });
  const copyNote = h('div', { class: 'alert alert-info', role: 'status', hidden: true });
  const submitBtn = h('button', { type: 'submit', class: 'btn btn-primary btn-big' }, icon('plus'), h('span', { class: 'btn-label' }, 'Create dataset'));
  const submitNote = h('p', { class: 'submit-note muted', 'aria-live': 'polite' });
  const side = h('aside', { class: 'newds-side' },
    h('section', { class: 'card preview-card', 'aria-labelledby': 'pv-title' },
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'pv-title' }, 'Preview'),
        h('span', { class: 'card-count muted' }, 'one record')),
      h('div', { class: 'preview-body' }, pvBox, pvCaption, pvBytes,
        h('p', { class: 'preview-help muted' }, 'A sample picture, converted the way each image of the dataset will be.'))),
    submitCard(submitBtn, submitNote, '/datasets'));

  const form = h('form', { class: 'newds', novalidate: true, 'aria-label': 'New dataset' },
    h('div', { class: 'newds-main' }, sourceCard, imagesCard, splitsCard, nameCard), side);

  const page = formPage({ href: '/datasets', list: 'Datasets', title: 'New dataset',
    sub: 'Turn labelled images into Caffe LMDB for training, with DIGITS\' options and defaults.' },
    copyNote, topErr, form);
  setChildren(root, page);

  /* ---------- errors ---------- */
  function clearErrors() {
    for (const k of fields.keys()) setError(k, null);
    setSourceError(null);
    topErr.hidden = true;
  }
  function setSourceError(msg) {
    setText(sourceErr, msg || '');
    sourceErr.hidden = !msg;
  }
  function showTop(msg) {
    setChildren(topErr, h('strong', null, 'Could not create the dataset: '), h('span', { text: msg }));
    topErr.hidden = false;
    topErr.focus();
  }
  const cap = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);

  /** Put the server's message next to the field it names ("options.width: …"). */
  function placeServerError(e) {
    const msg = (e && e.message) || String(e);
    const m = /^([a-z_]+(?:\.[a-z_]+)?)(?: \+ [a-z_.]+)?: (.*)$/s.exec(msg);
    if (m) {
      const head = msg.slice(0, msg.indexOf(':'));
      const rest = cap(m[2]);
      let key = m[1];
      if (head.includes('+')) key = 'splits';
      else if (key.startsWith('options.')) key = key.slice(8);
      else if (key === 'source.upload' || key === 'source.file') key = 'file';
      else if (key.startsWith('source.') && source === 'folder' && fields.has(key.slice(7))) key = key.slice(7);
      if (key === 'file' && upload) {
        // The server no longer has this upload: it must be sent again.
        upload.state = 'error'; upload.error = rest; upload.id = null;
        renderUpload(); updateSubmit();
      }
      if (key === 'source' || key.startsWith('source.')) {
        setSourceError(rest);
        announce(`Error: ${msg}`);
        focusField(sourceInputs.find((i) => i.checked));
        return;
      }
      if (fields.has(key)) {
        setError(key, rest);
        announce(`Error: ${msg}`);
        focusField(fields.get(key).inputs[0]);
        return;
      }
    }
    showTop(msg);
  }
  function focusField(el) {
    if (!el) return;
    if (el === fileInput) { (fileBox.hidden ? dropzone : fileBox).scrollIntoView({ block: 'center' }); fileInput.focus(); return; }
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: 'center' });
  }

  /* ---------- reading and checking the form ---------- */
  function readInt(input) {
    const s = input.value.trim();
    if (input.validity && input.validity.badInput) return { bad: true };
    if (s === '') return { empty: true };
    if (!/^\d+$/.test(s)) return { bad: true };
    return { v: Number(s) };
  }

  /** {errors: {key: message}, body} — the request, or what is wrong with it. */
  function collect() {
    const errors = {};
    const opts = {};
    const int = (key, input, lo, hi, { optional = false } = {}) => {
      const r = readInt(input);
      if (r.empty) { if (!optional) errors[key] = 'Required.'; return null; }
      if (r.bad || r.v < lo || r.v > hi) {
        errors[key] = hi === Number.MAX_SAFE_INTEGER ? `A whole number, at least ${lo}.` : `A whole number from ${lo} to ${hi}.`;
        return null;
      }
      return r.v;
    };
    opts.channels = Number(typeR.value());
    const width = int('width', w, 1, 4096), height = int('height', hh, 1, 4096);
    if (width !== null) opts.width = width;
    if (height !== null) opts.height = height;
    opts.resize_mode = resizeR.value();
    opts.encoding = encR.value();
    // A split that comes from its own folder takes nothing from the training images.
    const vp = valP.input.disabled ? 0 : int('val_pct', valP.input, 0, 100);
    const tp = testP.input.disabled ? 0 : int('test_pct', testP.input, 0, 100);
    if (vp !== null) opts.val_pct = vp;
    if (tp !== null) opts.test_pct = tp;
    if (vp !== null && tp !== null && vp + tp > 100) errors.splits = `Validation and test take ${vp + tp}%: together they must not exceed 100%.`;
    const minv = int('min_per_class', minC, 1, 2147483647);
    if (minv !== null) opts.min_per_class = minv;
    const maxv = int('max_per_class', maxC, 0, 2147483647, { optional: true });
    if (maxv !== null) {
      if (maxv !== 0 && minv !== null && maxv < minv) errors.max_per_class = `At least the minimum (${minv}), or blank for no limit.`;
      else opts.max_per_class = maxv;
    }
    const seed = int('seed', seedIn, 0, Number.MAX_SAFE_INTEGER);
    if (seed !== null) opts.seed = seed;

    const name = nameIn.value.trim();
    if (!name) errors.name = 'Give the dataset a name.';
    else if (name.length > 200) errors.name = 'At most 200 characters.';
    const group = groupIn.value.trim();
    if (group.length > 200) errors.group = 'At most 200 characters.';

    let src = null;
    if (source === 'upload') {
      if (!upload) errors.file = 'Choose an archive to upload.';
      else if (upload.state === 'error') errors.file = upload.error || 'The upload failed; try again.';
      else src = { type: 'upload' };
    } else if (source === 'folder') {
      if (!roots || roots.length === 0) errors.source = 'This server allows no folders: start it with --data-root DIR.';
      const path = (key, input, req) => {
        const v = input.value.trim();
        if (!v) { if (req) errors[key] = 'Required: a folder on the server.'; return null; }
        if (!v.startsWith('/')) { errors[key] = 'A full path, starting with /.'; return null; }
        return v;
      };
      const train = path('train', trainIn, true), val = path('val', valIn, false), test = path('test', testIn, false);
      src = { type: 'folder', train };
      if (val) src.val = val;
      if (test) src.test = test;
    } else {
      src = { type: 'example', name: 'fashion-mnist' };
    }
    const body = { name, source: src, options: opts };
    if (group) body.group = group;
    return { errors, body };
  }

  function showErrors(errors) {
    let first = null;
    const order = ['source', 'file', 'train', 'val', 'test', 'channels', 'width', 'height', 'resize_mode', 'encoding',
      'val_pct', 'test_pct', 'splits', 'min_per_class', 'max_per_class', 'seed', 'name', 'group'];
    for (const key of order) {
      if (!errors[key]) continue;
      if (key === 'source') setSourceError(errors[key]);
      else setError(key, errors[key]);
      if (!first) first = key === 'source' ? sourceInputs.find((i) => i.checked) : fields.get(key).inputs[0];
    }
    const n = Object.keys(errors).length;
    announce(`${n} field${n === 1 ? ' needs' : 's need'} attention.`);
    focusField(first);
  }

  /* ---------- source switching ---------- */
  function setSource(id, { apply = true } = {}) {
    source = id;
    for (const i of sourceInputs) i.checked = i.value === id;
    for (const p of [uploadPanel, folderPanel, examplePanel]) p.hidden = p.dataset.panel !== id;
    for (const c of sourceCards.querySelectorAll('.source-card')) c.classList.toggle('selected', c.dataset.source === id);
    setSourceError(null);
    if (id === 'example' && apply) {
      w.value = 28; hh.value = 28;
      for (const i of typeR.inputs) i.checked = i.value === '1';
      if (!nameIn.value.trim() || nameIn.value === nameAuto) { nameIn.value = 'Fashion-MNIST'; nameAuto = nameIn.value; }
      for (const k of ['width', 'height', 'channels', 'name']) setError(k, null);
      onOptionsChanged();
    }
    if (id === 'upload' && apply && upload && upload.file && (!nameIn.value.trim() || nameIn.value === nameAuto)) suggestName(upload.file.name);
    updateSplits();
    updateSubmit();
  }
  for (const i of sourceInputs) i.addEventListener('change', () => { if (i.checked) setSource(i.value); });

  function suggestName(fileName) {
    if (nameIn.value.trim() && nameIn.value !== nameAuto) return;
    const base = fileName.replace(ARCHIVE_RE, '').replace(/[_]+/g, ' ').trim();
    if (base) { nameIn.value = base; nameAuto = base; setError('name', null); }
  }

  /* ---------- upload ---------- */
  function chooseFile(file) {
    setError('file', null);
    if (!file) return;
    if (!ARCHIVE_RE.test(file.name)) {
      fileInput.value = '';
      setError('file', `“${file.name}” is not an archive: choose a .zip, .tar, .tar.gz or .tgz file.`);
      announce('That file is not an archive.');
      return;
    }
    if (file.size === 0) {
      fileInput.value = '';
      setError('file', `“${file.name}” is empty.`);
      return;
    }
    startUpload(file);
    suggestName(file.name);
  }

  function startUpload(file) {
    cancelUpload(true);
    const xhr = new XMLHttpRequest();
    const u = { file, xhr, state: 'uploading', loaded: 0, total: file.size, t0: performance.now(), id: null, error: null };
    upload = u;
    u.promise = new Promise((resolve, reject) => {
      const fail = (msg) => {
        if (upload !== u) return reject(new ApiError(0, 'aborted', 'replaced'));
        u.state = 'error';
        u.error = msg;
        renderUpload();
        updateSubmit();
        reject(new ApiError(0, 'upload', msg));
      };
      xhr.upload.onprogress = (e) => {
        if (upload !== u) return;
        u.loaded = e.loaded;
        if (e.lengthComputable) u.total = e.total;
        renderUpload();
        updateSubmit();
      };
      xhr.onload = () => {
        let json = null;
        try { json = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
        if (xhr.status === 201 && json && json.upload) {
          if (upload !== u) return;
          u.state = 'done';
          u.id = json.upload.id;
          u.loaded = u.total = json.upload.bytes;
          renderUpload();
          updateSubmit();
          announce(`Uploaded ${file.name}.`);
          resolve(u);
        } else {
          fail((json && json.error && json.error.message) || `The upload failed: HTTP ${xhr.status}.`);
        }
      };
      xhr.onerror = () => fail('The upload failed: the connection to the server was lost (is the file over the server\'s --max-upload limit?).');
      xhr.onabort = () => fail('Upload cancelled.');
    });
    u.promise.catch(() => {}); // shown in the file box; submit reads u.state
    xhr.open('POST', `/api/v1/uploads?name=${encodeURIComponent(file.name)}`);
    xhr.setRequestHeader('content-type', 'application/octet-stream');
    xhr.send(file);
    renderUpload();
    updateSubmit();
  }

  function cancelUpload(forget) {
    if (upload && upload.state === 'uploading') upload.xhr.abort();
    if (forget) upload = null;
  }

  const upBar = progressBar('Upload progress');
  const upName = h('span', { class: 'filebox-name' });
  const upMeta = h('span', { class: 'filebox-meta num' });
  const upState = h('span', { class: 'filebox-state' });
  const upActions = h('span', { class: 'filebox-actions' });
  const upIcon = h('span', { class: 'filebox-icon' }, icon('archive'));
  fileBox.append(upIcon, h('div', { class: 'filebox-main' },
    h('div', { class: 'filebox-line' }, upName, upState), upBar, upMeta), upActions);

  function renderUpload() {
    const u = upload;
    fileBox.hidden = !u;
    dropzone.hidden = !!u;
    if (!u) return;
    fileBox.dataset.state = u.state;
    setText(upName, u.file.name);
    setAttr(upName, 'title', u.file.name);
    const frac = u.total ? u.loaded / u.total : 0;
    setProgress(upBar, u.state === 'done' ? 1 : frac, u.state === 'uploading' ? 'running' : u.state === 'done' ? 'done' : 'error');
    if (u.state === 'uploading') {
      const secs = (performance.now() - u.t0) / 1000;
      const rate = secs > 0.3 ? u.loaded / secs : 0;
      setText(upMeta, `${bytes(u.loaded)} of ${bytes(u.total)} · ${Math.floor(frac * 100)}%${rate ? ` · ${bytes(rate)}/s` : ''}`);
      setChildren(upState, h('span', { class: 'badge', dataset: { state: 'running' } }, h('span', { class: 'badge-dot' }), 'uploading'));
    } else if (u.state === 'done') {
      setText(upMeta, `${bytes(u.total)} uploaded · 100%`);
      setChildren(upState, h('span', { class: 'badge', dataset: { state: 'done' } }, icon('check'), 'uploaded'));
    } else {
      setText(upMeta, u.error || 'The upload failed.');
      setChildren(upState, h('span', { class: 'badge', dataset: { state: 'error' } }, h('span', { class: 'badge-dot' }), 'failed'));
    }
    const key = u.state;
    if (upActions.dataset.key !== key) {
      upActions.dataset.key = key;
      setChildren(upActions,
        u.state === 'error' ? h('button', { type: 'button', class: 'btn btn-small', onclick: () => startUpload(u.file) }, 'Retry') : null,
        u.state === 'uploading'
          ? h('button', { type: 'button', class: 'btn btn-small', onclick: () => { cancelUpload(true); fileInput.value = ''; renderUpload(); updateSubmit(); } }, 'Cancel')
          : h('button', { type: 'button', class: 'btn btn-small', onclick: () => { upload = null; fileInput.value = ''; renderUpload(); updateSubmit(); fileInput.focus(); } }, 'Remove'));
    }
  }

  fileInput.addEventListener('change', () => chooseFile(fileInput.files && fileInput.files[0]));
  let dragDepth = 0;
  const isFileDrag = (e) => e.dataTransfer && [...(e.dataTransfer.types || [])].includes('Files');
  dropzone.addEventListener('dragenter', (e) => { if (!isFileDrag(e)) return; e.preventDefault(); dragDepth++; dropzone.classList.add('drag'); });
  dropzone.addEventListener('dragover', (e) => { if (!isFileDrag(e)) return; e.preventDefault(); e.dataTransfer.dropEffect = 'copy'; });
  dropzone.addEventListener('dragleave', () => { if (--dragDepth <= 0) { dragDepth = 0; dropzone.classList.remove('drag'); } });
  dropzone.addEventListener('drop', (e) => {
    e.preventDefault();
    dragDepth = 0;
    dropzone.classList.remove('drag');
    const files = e.dataTransfer && e.dataTransfer.files;
    if (files && files.length) chooseFile(files[0]);
  });
  // The whole zone opens the file chooser (its label already does, and the input itself).
  dropzone.addEventListener('click', (e) => { if (!e.target.closest('label') && e.target !== fileInput) fileInput.click(); });
  // A file dropped outside the zone would replace the page: ignore it.
  const stopDrop = (e) => { if (isFileDrag(e) && !e.target.closest('.dropzone')) { e.preventDefault(); if (e.dataTransfer) e.dataTransfer.dropEffect = 'none'; } };
  window.addEventListener('dragover', stopDrop);
  window.addEventListener('drop', stopDrop);

  /* ---------- splits ---------- */
  function updateSplits() {
    const r1 = readInt(valP.input), r2 = readInt(testP.input);
    const ownVal = source === 'folder' && valIn.value.trim();
    const ownTest = (source === 'folder' && testIn.value.trim()) || source === 'example';
    valP.input.disabled = !!ownVal;
    testP.input.disabled = !!ownTest;
    const v = ownVal ? 0 : r1.v ?? 0, t = ownTest ? 0 : r2.v ?? 0;
    const train = Math.max(0, 100 - v - t);
    const segs = splitBar.children;
    segs[0].style.width = `${train}%`;
    segs[1].style.width = `${Math.min(100, v)}%`;
    segs[2].style.width = `${Math.max(0, Math.min(100 - v, t))}%`;
    splitBar.classList.toggle('over', v + t > 100);
    const valText = ownVal ? 'validation from its folder' : `${v}% validation`;
    const testText = ownTest ? (source === 'example' ? 'test: Fashion-MNIST\'s own 10,000' : 'test from its folder') : `${t}% test`;
    setText(splitLegend, v + t > 100 ? 'More than 100% is held out.' : `${train}% train · ${valText} · ${testText}`);
  }
  for (const i of [valP.input, testP.input, valIn, testIn]) i.addEventListener('input', updateSplits);

  /* ---------- preview ---------- */
  let pvTimer = null, pvCtl = null, pvUrl = null, pvShape = null;
  function onOptionsChanged() {
    clearTimeout(pvTimer);
    pvTimer = setTimeout(loadPreview, 250);
    updateSubmit();
  }
  async function loadPreview() {
    const rw = readInt(w), rh = readInt(hh);
    const ok = (r) => !r.bad && !r.empty && r.v >= 1 && r.v <= 4096;
    if (!ok(rw) || !ok(rh)) {
      if (pvCtl) pvCtl.abort();
      pvErr.hidden = false;
      pvBox.classList.add('stale');
      setText(pvErr, 'Give a width and height from 1 to 4096 to see a preview.');
      return;
    }
    const q = new URLSearchParams({ width: rw.v, height: rh.v, channels: typeR.value(), resize_mode: resizeR.value(), encoding: encR.value() });
    if (pvCtl) pvCtl.abort();
    const ctl = (pvCtl = new AbortController());
    pvBox.classList.add('loading');
    try {
      const res = await fetch(`/api/v1/datasets/preview?${q}`, { signal: ctl.signal });
      if (!res.ok) {
        let m = `HTTP ${res.status}`;
        try { m = (await res.json()).error.message; } catch { /* not JSON */ }
        throw new Error(m);
      }
      const n = Number(res.headers.get('X-Encoded-Bytes'));
      const blob = await res.blob();
      if (!alive || ctl !== pvCtl) return;
      if (pvUrl) URL.revokeObjectURL(pvUrl);
      pvUrl = URL.createObjectURL(blob);
      pvShape = { w: rw.v, h: rh.v, c: Number(typeR.value()) };
      sizePreview(pvShape.w, pvShape.h);
      pvImg.src = pvUrl;
      pvImg.hidden = false;
      pvErr.hidden = true;
      pvBox.classList.remove('stale');
      const enc = ENCODINGS.find((e) => e[0] === encR.value());
      setText(pvCaption, `${pvShape.w} × ${pvShape.h} · ${pvShape.c === 1 ? 'grayscale' : 'colour'} · ${resizeR.value().replace('_', ' ')}`);
      setChildren(pvBytes, 'encoded record: ', h('strong', { class: 'num' }, Number.isFinite(n) ? bytes(n) : '?'),
        h('span', { class: 'muted' }, ` (${enc ? enc[1] : encR.value()})`));
    } catch (e) {
      if (e.name === 'AbortError' || !alive) return;
      pvErr.hidden = false;
      pvBox.classList.add('stale');
      setText(pvErr, `No preview: ${e.message}`);
    } finally {
      if (ctl === pvCtl) pvBox.classList.remove('loading');
    }
  }
  /** Small records are scaled up by a whole factor with hard pixels; large ones fit the box. */
  function sizePreview(iw, ih) {
    const box = 224;
    let s = Math.min(box / iw, box / ih);
    if (s >= 1) s = Math.max(1, Math.floor(s));
    pvImg.style.width = `${Math.max(1, Math.round(iw * s))}px`;
    pvImg.style.height = `${Math.max(1, Math.round(ih * s))}px`;
    pvImg.classList.toggle('pixelated', s >= 2);
  }
  pvImg.addEventListener('load', () => pvBox.classList.add('has-image'));
  for (const i of [w, hh]) i.addEventListener('input', onOptionsChanged);
  for (const i of [...typeR.inputs, ...resizeR.inputs, ...encR.inputs]) i.addEventListener('change', onOptionsChanged);

  /* ---------- submit ---------- */
  function updateSubmit() {
    const label = submitBtn.querySelector('.btn-label');
    submitBtn.disabled = submitting;
    if (submitting && source === 'upload' && upload && upload.state === 'uploading') {
      setText(label, `Uploading… ${Math.floor((upload.loaded / (upload.total || 1)) * 100)}%`);
    } else setText(label, submitting ? 'Creating…' : 'Create dataset');
    let note = '';
    if (source === 'upload') {
      if (!upload) note = 'Choose an archive first.';
      else if (upload.state === 'uploading') note = `The archive is uploading (${Math.floor((upload.loaded / (upload.total || 1)) * 100)}%); you can create the dataset now, it starts when the upload is done.`;
      else if (upload.state === 'done') note = `${upload.file.name} is on the server.`;
      else note = 'The upload failed: retry or choose another file.';
    } else if (source === 'folder') note = 'The server reads the folders when the job runs.';
    else note = 'The server writes Fashion-MNIST\'s images, then builds the dataset.';
    setText(submitNote, note);
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (submitting) return;
    clearErrors();
    const { errors, body } = collect();
    if (Object.keys(errors).length) { showErrors(errors); return; }
    submitting = true;
    updateSubmit();
    try {
      if (source === 'upload') {
        const u = upload;
        if (u.state === 'uploading') {
          try { await u.promise; } catch { /* below */ }
        }
        if (!alive) return;
        if (upload !== u || u.state !== 'done') {
          if (upload === u) setError('file', u.error || 'The upload failed.');
          else setError('file', 'Choose an archive to upload.');
          focusField(fileInput);
          return;
        }
        body.source = { type: 'upload', upload: u.id, name: u.file.name };
      }
      const r = await post('/datasets', body);
      if (!alive) return;
      toast(`Dataset “${body.name}” created as job #${r.job.id}.`, 'success');
      navigate(`/datasets/${r.job.id}`);
    } catch (err) {
      if (alive) placeServerError(err);
    } finally {
      submitting = false;
      if (alive) updateSubmit();
    }
  });

  /* ---------- start ---------- */
  get('/info').then((i) => {
    if (!alive) return;
    roots = Array.isArray(i.data_roots) ? i.data_roots : [];
    const card = sourceCards.querySelector('[data-source="folder"]');
    const note = card.querySelector('.source-note');
    if (roots.length === 0) {
      card.classList.add('unavailable');
      setText(note, 'Not enabled on this server');
      setChildren(rootsBox, h('div', { class: 'alert alert-warn' }, h('strong', null, 'No server folders are allowed. '),
        'Start the server with ', h('code', null, '--data-root DIR'), ' (repeatable) to read images from folders below DIR.'));
      folderFields.hidden = true;
    } else {
      setText(note, `${roots.length} allowed folder${roots.length === 1 ? '' : 's'}`);
      setChildren(rootsBox, h('p', { class: 'roots-label' }, 'Allowed folders (paths must be below one of these):'),
        h('div', { class: 'chips' }, roots.map((r) => h('button', { type: 'button', class: 'chip chip-path', title: 'Use this folder',
          onclick: () => { trainIn.value = r.endsWith('/') ? r : `${r}/`; trainIn.focus(); setError('train', null); } }, icon('folder'), r))));
    }
  }, () => {
    if (alive) setChildren(rootsBox, h('p', { class: 'muted' }, 'Could not ask the server which folders are allowed.'));
    roots = roots || [];
  });

  setSource('upload', { apply: false });
  updateSplits();
  updateSubmit();
  const from = new URLSearchParams(location.search).get('from');
  if (from && /^\d+$/.test(from)) copyFrom(Number(from));
  else loadPreview();

  /* ---------- cloning: ?from=ID fills the form with dataset ID's settings ---------- */
  async function copyFrom(fromId) {
    let job;
    try {
      job = (await get(`/jobs/${fromId}`)).job;
    } catch (e) {
      if (alive) { showTop(`Cannot copy dataset #${fromId}: ${e.message}`); loadPreview(); }
      return;
    }
    if (!alive) return;
    const p = job.params || {}, o = p.options || {}, src = p.source || {};
    const setNum = (input, v) => { if (typeof v === 'number') input.value = String(v); };
    setNum(w, o.width); setNum(hh, o.height);
    setNum(valP.input, o.val_pct); setNum(testP.input, o.test_pct);
    setNum(minC, o.min_per_class); setNum(seedIn, o.seed);
    maxC.value = o.max_per_class ? String(o.max_per_class) : '';
    const pick = (r, v) => { if (v !== undefined) for (const i of r.inputs) i.checked = i.value === String(v); };
    pick(typeR, o.channels); pick(resizeR, o.resize_mode); pick(encR, o.encoding);
    nameIn.value = `${job.name || `Dataset ${fromId}`} (clone)`;
    nameAuto = null;
    groupIn.value = typeof p.group === 'string' ? p.group : '';
    let note = null;
    if (src.type === 'folder') {
      setSource('folder', { apply: false });
      trainIn.value = src.train || ''; valIn.value = src.val || ''; testIn.value = src.test || '';
    } else if (src.type === 'example') {
      setSource('example', { apply: false });
    } else if (src.type === 'upload') {
      setSource('upload', { apply: false });
      note = [src.name ? ['It was built from ', h('strong', { text: src.name }), '. '] : 'It was built from an uploaded archive. ',
        'An upload is used once: choose the archive again.'];
    } else {
      note = [`It was built from ${src.type || 'another'} source, which this form does not offer; choose a source.`];
    }
    updateSplits();
    setChildren(copyNote, h('strong', null, 'Cloning '),
      h('a', { href: `/datasets/${fromId}`, text: `#${fromId} ${job.name || ''}`.trim() }), '. ', note);
    copyNote.hidden = false;
    document.title = `Clone of ${job.name || `#${fromId}`} · deepdesk`;
    loadPreview();
  }

  return {
    destroy() {
      alive = false;
      clearTimeout(pvTimer);
      if (pvCtl) pvCtl.abort();
      if (pvUrl) URL.revokeObjectURL(pvUrl);
      window.removeEventListener('dragover', stopDrop);
      window.removeEventListener('drop', stopDrop);
      // An upload in flight is abandoned with the page; the server removes unused ones.
      if (upload && upload.state === 'uploading') upload.xhr.abort();
    },
  };
}
