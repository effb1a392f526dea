// dom.js — a tiny element builder.  No innerHTML anywhere: text from the server is
// always set as text, so a job named "<img onerror=…>" stays a name.

/**
 * h('a', {href: '/jobs/1', class: 'x', onclick: fn}, 'text', child, [more])
 * attrs: class, text, dataset {}, style {}, on* handlers, boolean attributes (true/false),
 * anything else becomes an attribute (null/undefined/false are skipped).
 */
export function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
      else if (k === 'text') el.textContent = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replace all children of el. */
export function setChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Set textContent only when it changed (keeps selection and avoids layout work). */
export function setText(el, text) {
  const s = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== s) el.textContent = s;
}

/** Set or remove an attribute only when it changed. */
export function setAttr(el, name, value) {
  if (value === null || value === undefined || value === false) {
    if (el.hasAttribute(name)) el.removeAttribute(name);
  } else {
    const s = value === true ? '' : String(value);
    if (el.getAttribute(name) !== s) el.setAttribute(name, s);
  }
}

/** Inline SVG icons (16×16, stroke = currentColor). */
const ICONS = {
  pencil: 'M11.5 2.5l2 2L6 12l-3 1 1-3 7.5-7.5z',
  copy: 'M5.5 5.5h7v8h-7zM3.5 10.5v-8h7',
  trash: 'M3 4.5h10M6.5 4.5v-2h3v2M4.5 4.5l.7 9h5.6l.7-9M7 7v4M9 7v4',
  stop: 'M4.5 4.5h7v7h-7z',
  back: 'M9.5 3.5L5 8l4.5 4.5',
  cpu: 'M5 5h6v6H5zM3 6.5h2M3 9.5h2M11 6.5h2M11 9.5h2M6.5 3v2M9.5 3v2M6.5 11v2M9.5 11v2',
  gpu: 'M2.5 4.5h11v7h-11zM5 13.5v-2M11 13.5v-2M6.5 8a1.5 1.5 0 1 0 3 0a1.5 1.5 0 1 0-3 0',
  disk: 'M2.5 9.5l2-6h7l2 6v3h-11zM2.5 9.5h11M10.5 11h.01',
  tag: 'M2.5 2.5h5l6 6-5 5-6-6zM5.5 5.5h.01',
  slots: 'M2.5 3.5h11v3h-11zM2.5 9.5h11v3h-11zM5 5h.01M5 11h.01',
  folder: 'M2 4.5v8h12V6H8L6.5 4.5z',
  empty: 'M2.5 9.5l2-6h7l2 6v3h-11zM2.5 9.5h3l1 1.5h3l1-1.5h3',
  down: 'M8 3v10M4 9l4 4 4-4',
  upload: 'M8 10.5V2.5M4.5 6L8 2.5 11.5 6M2.5 10v3.5h11V10',
  download: 'M8 2.5v8M4.5 7L8 10.5 11.5 7M2.5 10v3.5h11V10',
  archive: 'M2.5 3h11v3h-11zM3.5 6v7.5h9V6M6.5 8.5h3',
  server: 'M2.5 2.5h11v4.5h-11zM2.5 9h11v4.5h-11zM5 4.75h.01M5 11.25h.01M8 4.75h3.5M8 11.25h3.5',
  sparkle: 'M8 1.5l1.6 4.9 4.9 1.6-4.9 1.6L8 14.5l-1.6-4.9L1.5 8l4.9-1.6z',
  image: 'M2.5 3h11v10h-11zM2.5 11l3.5-3.5 3 3 1.5-1.5 3 3M10.5 6h.01',
  file: 'M4 1.5h5l3.5 3.5v9.5H4zM9 1.5V5h3.5',
  check: 'M3 8.5l3 3 7-7',
  x: 'M4 4l8 8M12 4l-8 8',
  alert: 'M8 1.5l6.5 12h-13zM8 6v3.5M8 11.5h.01',
  first: 'M4 3.5v9M12 3.5L7.5 8l4.5 4.5',
  prev: 'M10 3.5L5.5 8l4.5 4.5',
  next: 'M6 3.5L10.5 8 6 12.5',
  last: 'M12 3.5v9M4 3.5L8.5 8 4 12.5',
  plus: 'M8 3v10M3 8h10',
  grid: 'M2.5 2.5h4.5v4.5h-4.5zM9 2.5h4.5v4.5H9zM2.5 9h4.5v4.5h-4.5zM9 9h4.5v4.5H9z',
  chart: 'M2.5 13.5h11M4 13.5V8h2v5.5M7 13.5V4h2v9.5M10 13.5V6.5h2v7',
};
export function icon(name, cls = '') {
  const svg = h('svg:svg', { class: `icon ${cls}`.trim(), viewBox: '0 0 16 16', width: 16, height: 16,
    'aria-hidden': 'true', focusable: 'false' });
  svg.append(h('svg:path', { d: ICONS[name] || '', fill: 'none', stroke: 'currentColor',
    'stroke-width': '1.4', 'stroke-linecap': 'round', 'stroke-linejoin': 'round' }));
  return svg;
}
