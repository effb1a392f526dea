// classes.js — classes for instructors and learners (issue 8):
//   /classes            the classes one instructs or is in; an instructor makes one here
//   mountPresetPicker   the "Start from a lab preset" block of the new-model form: a
//                       learner picks a preset of their class, sees its settings with the
//                       locked fields disabled and the hidden ones absent, names the model
//                       and creates it with one click (POST /models {preset, name, …} with
//                       only the unlocked fields they changed).
// The class page itself (/classes/ID: dashboard, roster, shares, presets) is dashboard.js.
// Every name from the server is set as text (dom.js h()), never as HTML.
import { h, setChildren } from './dom.js';
import { get, post } from './api.js';
import { icon, showError, toast } from './ui.js';

/** The current user ({id,name,role}) or null with accounts off. */
export async function whoAmI() {
  try { const me = await get('/me'); return me.accounts ? me.user : null; } catch { return null; }
}

export function mountClasses(root, { navigate }) {
  document.title = 'Classes · deepdesk';
  let alive = true;
  const list = h('div', { class: 'classes-list', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading classes…'));
  const nameIn = h('input', { class: 'input', id: 'class-name', name: 'name', maxlength: 100, placeholder: 'e.g. Vision 101, spring', required: true });
  const err = h('p', { class: 'field-error', hidden: true, role: 'alert' });
  const createForm = h('form', { class: 'card form-card class-create', 'aria-label': 'New class', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, 'New class')),
    h('div', { class: 'class-create-body' },
      h('label', { for: 'class-name', class: 'field-label' }, 'Class name'), nameIn, err,
      h('button', { type: 'submit', class: 'btn btn-primary', dataset: { action: 'create-class' } }, icon('plus'), 'Create class')));
  createForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.hidden = true;
    try {
      const r = await post('/classes', { name: nameIn.value.trim() });
      navigate(`/classes/${r.class.id}`);
    } catch (ex) { err.textContent = ex.message; err.hidden = false; }
  });
  setChildren(root, h('div', { class: 'page classes-page' },
    h('div', { class: 'page-head' }, h('div', null, h('h1', { class: 'page-title' }, 'Classes'),
      h('p', { class: 'page-sub' }, 'Learners, rosters, shared datasets, lab presets and each class\'s live dashboard.'))),
    createForm, h('section', { class: 'card' }, list)));

  (async () => {
    const me = await whoAmI();
    if (!alive) return;
    createForm.hidden = !!me && me.role === 'learner';
    try {
      const r = await get('/classes');
      if (!alive) return;
      if (!r.classes.length) { setChildren(list, h('p', { class: 'empty-text muted' }, 'No class yet.')); return; }
      setChildren(list, h('table', { class: 'jobs-table classes-table' },
        h('thead', null, h('tr', null, h('th', null, 'Class'), h('th', null, 'Instructor'), h('th', null, 'Members'))),
        h('tbody', null, r.classes.map((c) => h('tr', { dataset: { class: c.id } },
          h('td', null, h('a', { href: `/classes/${c.id}`, text: c.name })),
          h('td', { text: c.instructor ? c.instructor.name : '—' }),
          h('td', { text: String(c.member_count) }))))));
    } catch (ex) { if (alive) setChildren(list, h('p', { class: 'field-error', text: ex.message })); }
  })();
  return { destroy() { alive = false; } };
}

/* ---------- the new-model form's lab preset block ---------- */

// The preset fields the block shows, in order: [key, label, kind].  Others a preset may
// set (network, mean, …) are shown read-only in its summary.
const PRESET_INPUTS = [
  ['epochs', 'Training epochs', 'int'],
  ['batch_size', 'Batch size', 'int'],
  ['solver.base_lr', 'Base learning rate', 'num'],
  ['seed', 'Random seed', 'int'],
];

function valueAt(settings, key) {
  if (key.startsWith('solver.')) return settings.solver ? settings.solver[key.slice(7)] : undefined;
  return settings[key];
}

function networkText(n) {
  if (!n) return '—';
  if (n.standard) return n.standard;
  if (n.prototxt) return 'custom (prototxt)';
  if (n.previous) return `model ${n.previous}'s network`;
  return '—';
}

/**
 * The "Start from a lab preset" block: hidden unless the user has presets.  form: the
 * full form, hidden while a preset is chosen.  Returns {el, destroy}.
 */
export function mountPresetPicker({ navigate, form }) {
  let alive = true;
  let presets = [];
  const sel = h('select', { class: 'input select', id: 'f-preset', name: 'preset' });
  const panel = h('div', { class: 'preset-panel' });
  const el = h('section', { class: 'card form-card preset-card', hidden: true, 'aria-labelledby': 'preset-title', dataset: { section: 'preset' } },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'preset-title' }, 'Start from a lab preset')),
    h('div', { class: 'preset-body' },
      h('label', { class: 'field-label', for: 'f-preset' }, 'Lab preset'), sel,
      h('p', { class: 'muted' }, 'Your instructor\'s settings for a lab: locked fields stay as they are set.'),
      panel));

  function show() {
    const p = presets.find((x) => String(x.id) === sel.value);
    if (form) form.hidden = !!p;
    if (!p) { setChildren(panel); return; }
    const locked = new Set([...(p.locked || []), ...(p.hidden || [])]);
    const hidden = new Set(p.hidden || []);
    const lockedTop = (key) => locked.has(key) || (key.startsWith('solver.') && locked.has('solver'));
    const inputs = [];
    const rows = [];
    for (const [key, label, kind] of PRESET_INPUTS) {
      if (hidden.has(key) || (key.startsWith('solver.') && hidden.has('solver'))) continue; // absent
      const v = valueAt(p.settings || {}, key);
      const id = `preset-${key.replace(/\./g, '-')}`;
      const input = h('input', {
        class: 'input', id, name: key, inputmode: kind === 'num' ? 'decimal' : 'numeric',
        value: v === undefined ? '' : String(v), placeholder: v === undefined ? 'default' : null,
        disabled: lockedTop(key), dataset: lockedTop(key) ? { presetField: key, locked: 'true' } : { presetField: key },
      });
      inputs.push([key, kind, input, v]);
      rows.push(h('div', { class: 'field' }, h('label', { class: 'field-label', for: id }, label,
        lockedTop(key) ? h('span', { class: 'muted preset-lock', text: ' (locked)' }) : null), input));
    }
    const nameIn = h('input', { class: 'input', id: 'preset-name', name: 'name', maxlength: 200, required: true, placeholder: 'e.g. my lab 1 run' });
    const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const go = h('button', { type: 'button', class: 'btn btn-primary', dataset: { action: 'create-from-preset' } }, icon('plus'), 'Create model');
    const facts = [['Class', p.class_name]];
    if (!hidden.has('dataset')) facts.push(['Dataset', p.settings.dataset !== undefined ? `job ${p.settings.dataset}` : '—']);
    if (!hidden.has('network')) facts.push(['Network', networkText(p.settings.network)]);
    setChildren(panel,
      h('dl', { class: 'facts preset-facts' }, facts.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })])),
      h('div', { class: 'field-row' }, rows),
      h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'preset-name' }, 'Model name'), nameIn),
      err, go);
    go.addEventListener('click', async () => {
      err.hidden = true;
      const body = { preset: p.id, name: nameIn.value.trim() };
      for (const [key, kind, input, v] of inputs) {
        if (input.disabled || input.value.trim() === '' || input.value.trim() === String(v ?? '')) continue;
        const n = Number(input.value.trim());
        if (!Number.isFinite(n) || (kind === 'int' && !Number.isInteger(n))) {
          err.textContent = `${key}: not a number`;
          err.hidden = false;
          return;
        }
        if (key.startsWith('solver.')) (body.solver ||= {})[key.slice(7)] = n;
        else body[key] = n;
      }
      go.disabled = true;
      try {
        const r = await post('/models', body);
        toast(`Model "${body.name}" queued`, 'success');
        navigate(`/models/${r.job.id}`);
      } catch (ex) {
        err.textContent = ex.message;
        err.hidden = false;
      } finally { go.disabled = false; }
    });
  }
  sel.addEventListener('change', show);

  (async () => {
    try {
      const r = await get('/presets');
      if (!alive) return;
      presets = r.presets || [];
      if (!presets.length) return;
      setChildren(sel, h('option', { value: '' }, 'No preset: the full form'),
        presets.map((p) => h('option', { value: String(p.id), text: `${p.name} (${p.class_name})` })));
      const want = new URLSearchParams(location.search).get('preset');
      if (want && presets.some((p) => String(p.id) === want)) sel.value = want;
      el.hidden = false;
      show();
    } catch (ex) {
      if (alive && ex.status !== 403 && ex.status !== 404) showError(ex, 'Lab presets');
    }
  })();
  return { el, destroy() { alive = false; } };
}
