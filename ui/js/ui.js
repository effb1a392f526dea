// ui.js — shared pieces: state badges, progress bars, toasts, the confirm dialog,
// and the screen-reader announcer.
import { h, setText, setAttr, icon } from './dom.js';
import { percent, duration } from './format.js';

export const STATES = ['queued', 'running', 'done', 'error', 'aborted', 'interrupted'];
export const ACTIVE = new Set(['queued', 'running']);

const STATE_LABEL = {
  queued: 'Queued', running: 'Running', done: 'Done', error: 'Error',
  aborted: 'Aborted', interrupted: 'Interrupted',
};

/** A coloured badge; update it later with setBadge. */
export function badge(state) {
  const el = h('span', { class: 'badge' }, h('span', { class: 'badge-dot', 'aria-hidden': 'true' }),
    h('span', { class: 'badge-text' }));
  setBadge(el, state);
  return el;
}

export function setBadge(el, state) {
  setAttr(el, 'data-state', state);
  setText(el.querySelector('.badge-text'), STATE_LABEL[state] ? state : String(state));
  setAttr(el, 'title', STATE_LABEL[state] || state);
}

/** A progress bar: role=progressbar with aria-valuenow 0..100. */
export function progressBar(label = 'Progress') {
  const fill = h('span', { class: 'bar-fill' });
  const el = h('span', { class: 'bar', role: 'progressbar', 'aria-label': label,
    'aria-valuemin': 0, 'aria-valuemax': 100 }, fill);
  return el;
}

export function setProgress(el, p, state) {
  const v = Math.max(0, Math.min(1, typeof p === 'number' ? p : 0));
  const pct = Math.round(v * 1000) / 10;
  setAttr(el, 'aria-valuenow', pct);
  setAttr(el, 'aria-valuetext', percent(v));
  setAttr(el, 'data-state', state || null);
  const fill = el.firstChild;
  const w = `${pct}%`;
  if (fill.style.width !== w) fill.style.width = w;
}

export function etaText(eta) {
  return eta === null ? '' : eta < 0.5 ? 'finishing…' : `${duration(eta)} left`;
}

/* ---- toasts ---- */

/** Show a message at the bottom of the page; kind: info | error | success. */
export function toast(message, kind = 'info', ms = kind === 'error' ? 8000 : 4000) {
  const box = document.getElementById('toasts');
  const close = h('button', { class: 'toast-close', type: 'button', 'aria-label': 'Dismiss' }, '×');
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('span', { class: 'toast-msg', text: message }), close);
  const remove = () => { el.classList.add('toast-out'); setTimeout(() => el.remove(), 200); };
  close.addEventListener('click', remove);
  box.append(el);
  let timer = setTimeout(remove, ms);
  el.addEventListener('mouseenter', () => clearTimeout(timer));
  el.addEventListener('mouseleave', () => { timer = setTimeout(remove, ms); });
  el.addEventListener('focusin', () => clearTimeout(timer));
  return el;
}

export function showError(e, prefix) {
  const msg = (e && e.message) || String(e);
  return toast(prefix ? `${prefix}: ${msg}` : msg, 'error');
}

/* ---- announcer ---- */
let announceTimer = null;
export function announce(text) {
  const el = document.getElementById('announcer');
  if (!el) return;
  // Clear first so the same text twice is still read.
  el.textContent = '';
  clearTimeout(announceTimer);
  announceTimer = setTimeout(() => { el.textContent = text; }, 50);
}

/* ---- confirm dialog ---- */

/**
 * Ask a yes/no question in a modal <dialog>.  Resolves true when confirmed.
 * opts: {title, body, confirm: 'Delete', danger: true}
 */
export function confirmDialog({ title, body, confirm = 'OK', danger = false }) {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'submit', value: 'ok', class: ['btn', danger ? 'btn-danger' : 'btn-primary'] }, confirm);
    const cancel = h('button', { type: 'submit', value: 'cancel', class: 'btn', formnovalidate: true }, 'Cancel');
    const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
    const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': titleId },
      h('form', { method: 'dialog' },
        h('h2', { id: titleId, class: 'dialog-title', text: title }),
        h('div', { class: 'dialog-body' }, body),
        h('div', { class: 'dialog-actions' }, cancel, ok)));
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      dlg.remove();
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus(); // the safe choice has focus
  });
}

/** A small inline SVG line of a series of numbers (no axes); w×hgt pixels. */
export function sparkline(series, w = 96, hgt = 24) {
  const svg = h('svg:svg', { class: 'spark', viewBox: `0 0 ${w} ${hgt}`, width: w, height: hgt, 'aria-hidden': 'true' });
  if (series.length < 2) return svg;
  let lo = Math.min(...series), hi = Math.max(...series);
  if (hi === lo) { hi += 1; lo -= 1; }
  const pts = series.map((v, i) => `${((i / (series.length - 1)) * (w - 2) + 1).toFixed(1)},${(hgt - 2 - ((v - lo) / (hi - lo)) * (hgt - 4)).toFixed(1)}`);
  svg.append(h('svg:polyline', { points: pts.join(' '), fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5,
    'stroke-linejoin': 'round', 'stroke-linecap': 'round' }));
  return svg;
}

export { icon };
