// form.js — what the new-dataset and new-model forms are both built from: fields with a
// label, a hint and an error line, registered by key so that a server message such as
// "options.width: …" lands next to its field; the numbered cards the fields sit in; and
// the page around a form (breadcrumbs back to the list, the title).
import { h, setText, setAttr } from './dom.js';

/**
 * A form's fields.  idOf(key) is what a key becomes in element ids (err-…, hint-…);
 * anyError: a field's wrap stays marked has-error while any error line inside it shows,
 * not only the field's own (the dataset form's shared rows); sectionData: a card carries
 * data-section with its id prefix.
 */
export function formFields({ idOf = (key) => key, anyError = false, sectionData = false } = {}) {
  const fields = new Map(); // key → {wrap, inputs: [], err}

  function errorEl(key) {
    return h('p', { class: 'field-error', id: `err-${idOf(key)}`, hidden: true, 'aria-live': 'polite' });
  }
  /** Make err the error line of key's inputs; editing one clears it. */
  function register(key, wrap, inputs, err) {
    fields.set(key, { wrap, inputs, err });
    for (const i of inputs) {
      i.setAttribute('aria-describedby', [i.getAttribute('aria-describedby'), err.id].filter(Boolean).join(' '));
      i.addEventListener('input', () => setError(key, null));
      i.addEventListener('change', () => setError(key, null));
    }
  }
  /** A labelled control with a hint and an error line; opts.input: the input inside control. */
  function field(key, label, control, hint, { cls = '', req = false, input = control } = {}) {
    const hintEl = hint ? h('p', { class: 'field-hint', id: `hint-${idOf(key)}` }, hint) : null;
    if (hintEl) input.setAttribute('aria-describedby', hintEl.id);
    const err = errorEl(key);
    const wrap = h('div', { class: ['field', cls], dataset: { field: key } },
      h('label', { class: 'field-label', for: input.id }, label, req ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null),
      control, hintEl, err);
    register(key, wrap, [input], err);
    return wrap;
  }
  /** Show msg under key's field (null clears it); false when no field has that key. */
  function setError(key, msg) {
    const f = fields.get(key);
    if (!f) return false;
    setText(f.err, msg || '');
    f.err.hidden = !msg;
    for (const i of f.inputs) setAttr(i, 'aria-invalid', msg ? 'true' : null);
    f.wrap.classList.toggle('has-error',
      !!msg || (anyError && [...f.wrap.querySelectorAll('.field-error')].some((e) => !e.hidden)));
    return true;
  }
  /** Card n of the form, titled, with its fields in body. */
  function section(idp, n, title, sub, ...body) {
    return h('section', { class: 'card form-card', 'aria-labelledby': `${idp}-title`, dataset: sectionData ? { section: idp } : null },
      h('div', { class: 'card-head' }, h('span', { class: 'step', 'aria-hidden': 'true' }, n),
        h('div', null, h('h2', { class: 'card-title', id: `${idp}-title` }, title), h('p', { class: 'card-sub muted' }, sub))),
      h('div', { class: 'form-body' }, ...body));
  }
  return { fields, errorEl, register, field, setError, section };
}

/** The page of a new-thing form: breadcrumbs back to the list at href (named list), the
 * title with its line sub, then body. */
export function formPage({ cls, href, list, title, sub }, ...body) {
  return h('div', { class: ['page newds-page', cls] },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href }, list), h('span', { 'aria-hidden': 'true', class: 'crumb-sep' }, '/'),
      h('span', { 'aria-current': 'page' }, 'New')),
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', { class: 'page-title' }, title),
      h('p', { class: 'page-sub' }, sub))),
    ...body);
}

/** The card under a form's side column: its submit button, a note, and Cancel back to href. */
export function submitCard(button, note, href) {
  return h('div', { class: 'card submit-card' }, button, note, h('a', { class: 'btn btn-quiet', href }, 'Cancel'));
}
