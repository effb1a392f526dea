// dataset_view.js — what a finished dataset job adds to its page: the summary, the
// images per class and split (Chart.js), the mean image, the files to download, the
// files that were skipped and why, and an explorer of the records themselves.
//
// The explorer's state (split, class, page, page size) lives in the URL's query, so a
// reload or a shared link shows the same page of images.
import { h, setText, setAttr, setChildren, icon } from './dom.js';
import { get } from './api.js';
import { bytes, duration } from './format.js';
import { loadChart, splitColours, onSchemeChange } from './charts.js';

export const SPLITS = [['train', 'Train'], ['val', 'Validation'], ['test', 'Test']];
const PAGE_SIZES = [10, 25, 50, 100];
const SKIPPED_SHOWN = 1000;

const fmtInt = new Intl.NumberFormat();
export const int = (n) => (typeof n === 'number' ? fmtInt.format(n) : '—');

/** "28×28 gray" from a summary's options. */
export function shapeText(o) {
  if (!o) return '—';
  return `${o.width}×${o.height} ${o.channels === 1 ? 'gray' : 'colour'}`;
}

/**
 * id: the dataset's job id.  Returns {main, side, update(job), destroy()}: main and side
 * are placed by the job page; update is called with every new job record.
 */
export function datasetView(id) {
  let alive = true;
  let summary = null;
  let loading = false;
  let chart = null;
  let group = '';          // from the job's params
  const cleanups = [];

  const main = h('div', { class: 'ds-main', hidden: true });
  const pendingText = h('p', { class: 'muted' });
  const pending = h('section', { class: 'card ds-card ds-pending', hidden: true, 'aria-label': 'Dataset' },
    h('div', { class: 'ds-pending-body' }, h('span', { class: 'ds-pending-icon' }, icon('grid')),
      h('div', null, h('p', { class: 'ds-pending-title' }, 'The dataset is being built'), pendingText)));
  const side = h('div', { class: 'ds-side', hidden: true });

  /* ---------- summary ---------- */
  const tiles = h('div', { class: 'tiles' });
  const facts = h('dl', { class: 'facts' });
  const dropNote = h('div', { class: 'alert alert-warn ds-dropped', hidden: true });
  const summaryCard = h('section', { class: 'card ds-card', 'aria-labelledby': 'ds-sum-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-sum-title' }, 'Dataset')),
    h('div', { class: 'ds-body' }, tiles, facts, dropNote));

  /* ---------- chart ---------- */
  const canvas = h('canvas', { role: 'img', 'aria-label': 'Images per class in each split' });
  const chartInner = h('div', { class: 'chart-inner' }, canvas);
  const chartBox = h('div', { class: 'chart-box' }, chartInner);
  const chartMsg = h('p', { class: 'muted chart-msg', hidden: true });
  const countTable = h('table', { class: 'data-table counts-table' });
  const chartCard = h('section', { class: 'card ds-card', 'aria-labelledby': 'ds-chart-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-chart-title' }, 'Images per class'),
      h('span', { class: 'card-count muted', dataset: { role: 'class-count' } })),
    h('div', { class: 'ds-body' }, chartBox, chartMsg,
      h('details', { class: 'counts-details' }, h('summary', null, 'Counts as a table'),
        h('div', { class: 'table-scroll' }, countTable))));

  /* ---------- explore ---------- */
  const ex = readQuery();
  const splitBtns = SPLITS.map(([s, label]) => {
    const count = h('span', { class: 'seg-count num' });
    const b = h('button', { type: 'button', class: 'seg-btn', dataset: { split: s }, 'aria-pressed': 'false' }, label, count);
    b.addEventListener('click', () => { if (ex.split !== s) { ex.split = s; ex.page = 0; ex.label = -1; exploreChanged(); } });
    return b;
  });
  const splitGroup = h('div', { class: 'seg', role: 'group', 'aria-label': 'Split' }, splitBtns);
  const classSel = h('select', { class: 'input select', id: 'ex-class', 'aria-label': 'Class' });
  classSel.addEventListener('change', () => { ex.label = Number(classSel.value); ex.page = 0; exploreChanged(); });
  const sizeSel = h('select', { class: 'input select', id: 'ex-size', 'aria-label': 'Images per page' },
    PAGE_SIZES.map((n) => h('option', { value: n }, `${n} per page`)));
  sizeSel.addEventListener('change', () => {
    const first = ex.page * ex.size;
    ex.size = Number(sizeSel.value);
    ex.page = Math.floor(first / ex.size);
    exploreChanged();
  });
  const pgBtn = (name, label, fn) => {
    const b = h('button', { type: 'button', class: 'icon-btn pg-btn', 'aria-label': label, title: label }, icon(name));
    b.addEventListener('click', fn);
    return b;
  };
  const firstBtn = pgBtn('first', 'First page', () => goPage(0));
  const prevBtn = pgBtn('prev', 'Previous page', () => goPage(ex.page - 1));
  const nextBtn = pgBtn('next', 'Next page', () => goPage(ex.page + 1));
  const lastBtn = pgBtn('last', 'Last page', () => goPage(Infinity));
  const pageText = h('span', { class: 'pg-text num', 'aria-live': 'polite' });
  const pager = h('div', { class: 'pager', role: 'group', 'aria-label': 'Pages' }, firstBtn, prevBtn, pageText, nextBtn, lastBtn);
  const rangeText = h('span', { class: 'range-text muted num' });
  const grid = h('ul', { class: 'thumbs', 'aria-label': 'Images' });
  const exMsg = h('p', { class: 'muted ex-msg', hidden: true });
  const exploreCard = h('section', { class: 'card ds-card explore', 'aria-labelledby': 'ds-ex-title', id: 'explore' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-ex-title' }, 'Explore'), rangeText),
    h('div', { class: 'ex-toolbar' }, splitGroup,
      h('label', { class: 'sr-only', for: 'ex-class' }, 'Class'), classSel,
      h('span', { class: 'spacer' }),
      h('label', { class: 'sr-only', for: 'ex-size' }, 'Images per page'), sizeSel, pager),
    h('div', { class: 'ds-body' }, grid, exMsg));

  /* ---------- skipped ---------- */
  const skippedBody = h('tbody');
  const skippedCount = h('span', { class: 'card-count muted' });
  const skippedMore = h('p', { class: 'muted skipped-more', hidden: true });
  const skippedCard = h('section', { class: 'card ds-card', 'aria-labelledby': 'ds-skip-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-skip-title' }, 'Skipped files'), skippedCount),
    h('div', { class: 'table-scroll skipped-scroll', tabindex: '0', 'aria-label': 'Skipped files' },
      h('table', { class: 'data-table skipped-table' },
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'File'), h('th', { scope: 'col' }, 'Reason'))),
        skippedBody)),
    skippedMore);

  main.append(summaryCard, chartCard, exploreCard, skippedCard);
  const mainCards = [summaryCard, chartCard, exploreCard, skippedCard];

  /* ---------- side: mean image and files ---------- */
  const meanImg = h('img', { class: 'mean-img', alt: 'The mean image of the training split', dataset: { role: 'mean' } });
  const meanCaption = h('p', { class: 'mean-caption muted' });
  const meanCard = h('section', { class: 'card side-card', 'aria-labelledby': 'ds-mean-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-mean-title' }, 'Mean image')),
    h('div', { class: 'mean-body' }, h('div', { class: 'mean-frame' }, meanImg), meanCaption));
  const filesList = h('ul', { class: 'files' });
  const filesCard = h('section', { class: 'card side-card', 'aria-labelledby': 'ds-files-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'ds-files-title' }, 'Files')), filesList);
  side.append(meanCard, filesCard);

  /* ---------- loading ---------- */
  async function load() {
    if (loading || summary) return;
    loading = true;
    try {
      const r = await get(`/datasets/${id}`);
      if (!alive) return;
      summary = r.dataset.summary;
      if (summary) render();
    } catch (e) {
      if (!alive) return;
      main.hidden = false;
      setChildren(main, h('div', { class: 'alert alert-error', role: 'alert' },
        h('strong', null, 'Could not load the dataset: '), h('span', { text: e.message })));
    } finally {
      loading = false;
    }
  }

  function render() {
    const s = summary, o = s.options || {};
    main.hidden = false;
    side.hidden = false;
    pending.remove();
    for (const c of mainCards) if (c !== skippedCard) c.hidden = false;
    const sp = s.splits || {};
    const n = (k) => (sp[k] ? sp[k].images : 0);
    const labels = s.labels || [];
    const skipped = s.skipped || [];
    const dropped = s.dropped_classes || [];

    const tile = (label, value, sub, key) => h('div', { class: 'tile', dataset: { tile: key } },
      h('span', { class: 'tile-label' }, label), h('span', { class: 'tile-value num', text: value }),
      sub ? h('span', { class: 'tile-sub muted', text: sub }) : null);
    const total = n('train') + n('val') + n('test');
    const pct = (k) => (total ? `${Math.round((n(k) / total) * 100)}%` : '');
    setChildren(tiles,
      tile('Train', int(n('train')), pct('train'), 'train'),
      tile('Validation', int(n('val')), pct('val'), 'val'),
      tile('Test', int(n('test')), pct('test'), 'test'),
      tile('Classes', int(labels.length), dropped.length ? `${dropped.length} dropped` : null, 'classes'),
      tile('Image', `${o.width}×${o.height}`, o.channels === 1 ? 'grayscale' : 'colour', 'size'),
      tile('On disk', bytes(s.disk_bytes), `built in ${duration(s.seconds)}`, 'disk'));
    const fact = (k, v) => [h('dt', { text: k }), h('dd', { text: v })];
    setChildren(facts,
      fact('Resize', String(o.resize_mode || '—').replace('_', ' ')),
      fact('Encoding', { png: 'PNG', jpg: 'JPEG (q90)', none: 'none (raw)' }[o.encoding] || o.encoding || '—'),
      fact('Split', `${100 - (o.val_pct || 0) - (o.test_pct || 0)} / ${o.val_pct ?? 0} / ${o.test_pct ?? 0}%`),
      fact('Per class', `${o.min_per_class ?? 2} to ${o.max_per_class ? int(o.max_per_class) : 'all'}`),
      fact('Seed', String(o.seed ?? 0)),
      fact('Skipped', `${int(skipped.length)} file${skipped.length === 1 ? '' : 's'}`),
      group ? fact('Group', group) : null);
    dropNote.hidden = dropped.length === 0;
    if (dropped.length) {
      setChildren(dropNote, h('strong', null, `${dropped.length} class${dropped.length === 1 ? ' was' : 'es were'} dropped: `),
        h('ul', { class: 'dropped-list' }, dropped.map((d) => h('li', { dataset: { dropped: d.class } },
          h('code', { text: d.class }), ` — ${d.reason || `${d.images} images`}`))));
    }

    // counts table and chart
    const used = SPLITS.filter(([k]) => n(k) > 0);
    setChildren(countTable,
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Class'),
        used.map(([, l]) => h('th', { scope: 'col', class: 'r' }, l)), h('th', { scope: 'col', class: 'r' }, 'Total'))),
      h('tbody', null, labels.map((name, i) => {
        const per = used.map(([k]) => (sp[k].per_class || [])[i] || 0);
        return h('tr', null, h('th', { scope: 'row', text: name }), per.map((v) => h('td', { class: 'r num', text: int(v) })),
          h('td', { class: 'r num', text: int(per.reduce((a, b) => a + b, 0)) }));
      })));
    setText(chartCard.querySelector('[data-role="class-count"]'), `${labels.length} classes`);
    chartInner.style.minWidth = `${Math.max(0, labels.length * used.length * 9 + labels.length * 14)}px`;
    drawChart();

    // skipped
    skippedCard.hidden = skipped.length === 0;
    setText(skippedCount, `${int(skipped.length)} file${skipped.length === 1 ? '' : 's'}`);
    setChildren(skippedBody, skipped.slice(0, SKIPPED_SHOWN).map((k) =>
      h('tr', null, h('td', { class: 'mono path-cell', text: k.path, title: k.path }), h('td', { text: k.reason }))));
    skippedMore.hidden = skipped.length <= SKIPPED_SHOWN;
    if (!skippedMore.hidden) {
      setChildren(skippedMore, `The first ${int(SKIPPED_SHOWN)} are shown; all ${int(skipped.length)} are in `,
        h('a', { href: `/api/v1/datasets/${id}/files/dataset.json`, download: `dataset-${id}.json` }, 'dataset.json'), '.');
    }

    // mean image: small ones are scaled up with hard pixels
    const mw = o.width || 1, mh = o.height || 1;
    const box = 260;
    let sc = Math.min(box / mw, box / mh);
    if (sc >= 1) sc = Math.max(1, Math.floor(sc));
    meanImg.style.width = `${Math.round(mw * sc)}px`;
    meanImg.style.aspectRatio = `${mw} / ${mh}`;
    meanImg.classList.toggle('pixelated', sc >= 2);
    meanImg.src = `/api/v1/datasets/${id}/files/mean.png`;
    setText(meanCaption, `The average of the ${int(n('train'))} training images, ${mw}×${mh}${sc >= 2 ? `, shown ${sc}× larger` : ''}. Training subtracts it from each input.`);

    const file = (name, what, extra) => h('li', null,
      h('a', { href: `/api/v1/datasets/${id}/files/${name}`, download: name, class: 'file-link', dataset: { file: name } },
        icon('download'), h('span', { class: 'file-name', text: name })),
      h('span', { class: 'file-what muted', text: extra ? `${what} · ${extra}` : what }));
    setChildren(filesList,
      file('labels.txt', 'class names, one a line', `${labels.length}`),
      file('mean.binaryproto', 'the mean, for Caffe'),
      file('dataset.json', 'this summary'),
      used.map(([k, l]) => file(`${k}.txt`, `${l.toLowerCase()} list`, `${int(n(k))} lines`)));

    // explore
    if (!used.some(([k]) => k === ex.split)) ex.split = used.length ? used[0][0] : 'train';
    if (ex.label >= labels.length) ex.label = -1;
    exploreChanged();
  }

  /* ---------- chart ---------- */
  async function drawChart() {
    const s = summary;
    let Chart;
    try {
      Chart = await loadChart();
    } catch {
      if (!alive) return;
      chartBox.hidden = true;
      chartMsg.hidden = false;
      setText(chartMsg, 'The chart needs Chart.js (Debian\'s libjs-chart.js) on the server; the counts are in the table below.');
      chartCard.querySelector('details').open = true;
      return;
    }
    if (!alive) return;
    const c = splitColours();
    const sp = s.splits;
    const used = SPLITS.filter(([k]) => sp[k] && sp[k].images > 0);
    const data = {
      labels: s.labels,
      datasets: used.map(([k, l]) => ({
        label: l, data: sp[k].per_class, backgroundColor: c[k], borderRadius: 3, borderSkipped: 'start',
        maxBarThickness: 36, categoryPercentage: 0.75, barPercentage: 0.9,
      })),
    };
    if (chart) chart.destroy();
    Chart.defaults.font.family = c.font;
    chart = new Chart(canvas, {
      type: 'bar',
      data,
      options: {
        responsive: true, maintainAspectRatio: false, animation: { duration: 300 },
        interaction: { mode: 'index', intersect: false },
        plugins: {
          legend: { position: 'top', align: 'end', labels: { color: c.text, boxWidth: 10, boxHeight: 10 } },
          tooltip: { callbacks: { footer: (items) => `Total ${int(items.reduce((a, it) => a + it.raw, 0))}` } },
        },
        scales: {
          // Chart.js 3 (Debian's): the axis line is the grid's border.
          x: { ticks: { color: c.text, autoSkip: false, maxRotation: 60 }, grid: { display: false, borderColor: c.grid } },
          y: { beginAtZero: true, ticks: { color: c.text, precision: 0 }, grid: { color: c.grid, drawBorder: false } },
        },
      },
    });
    canvas.dataset.ready = '1';
  }
  cleanups.push(onSchemeChange(() => { if (summary && chart) drawChart(); }));

  /* ---------- explore ---------- */
  function readQuery() {
    const q = new URLSearchParams(location.search);
    const size = Number(q.get('size'));
    const page = Number(q.get('page'));
    const label = q.get('class');
    return {
      split: SPLITS.some(([k]) => k === q.get('split')) ? q.get('split') : 'train',
      label: label !== null && /^\d+$/.test(label) ? Number(label) : -1,
      page: Number.isInteger(page) && page >= 1 ? page - 1 : 0, // 1-based in the URL
      size: PAGE_SIZES.includes(size) ? size : 25,
    };
  }

  function writeQuery() {
    const q = new URLSearchParams(location.search);
    const set = (k, v, dflt) => { if (v === dflt) q.delete(k); else q.set(k, String(v)); };
    set('split', ex.split, 'train');
    set('class', ex.label, -1);
    set('page', ex.page + 1, 1);
    set('size', ex.size, 25);
    const qs = q.toString();
    const url = `${location.pathname}${qs ? `?${qs}` : ''}${location.hash}`;
    // Replaced, not pushed: the page stays mounted and Back leaves the dataset.
    if (url !== location.pathname + location.search + location.hash) history.replaceState(history.state, '', url);
  }

  function countFor() {
    const sp = summary.splits[ex.split];
    if (!sp) return 0;
    return ex.label < 0 ? sp.images : (sp.per_class || [])[ex.label] || 0;
  }

  function goPage(p) {
    const pages = Math.max(1, Math.ceil(countFor() / ex.size));
    const np = Math.max(0, Math.min(pages - 1, p));
    if (np === ex.page) return;
    ex.page = np;
    exploreChanged();
  }

  let exToken = 0;
  async function exploreChanged() {
    const s = summary;
    const total = countFor();
    const pages = Math.max(1, Math.ceil(total / ex.size));
    if (ex.page >= pages) ex.page = pages - 1;
    writeQuery();

    // toolbar
    for (const b of splitBtns) {
      const k = b.dataset.split;
      const cnt = s.splits[k] ? s.splits[k].images : 0;
      setText(b.querySelector('.seg-count'), int(cnt));
      b.disabled = cnt === 0;
      setAttr(b, 'aria-pressed', k === ex.split ? 'true' : 'false');
    }
    const per = (s.splits[ex.split] && s.splits[ex.split].per_class) || [];
    const optKey = `${ex.split}`;
    if (classSel.dataset.key !== optKey) {
      classSel.dataset.key = optKey;
      setChildren(classSel, h('option', { value: -1 }, `All classes (${int(s.splits[ex.split] ? s.splits[ex.split].images : 0)})`),
        s.labels.map((name, i) => h('option', { value: i, disabled: !per[i] }, `${name} (${int(per[i] || 0)})`)));
    }
    classSel.value = String(ex.label);
    sizeSel.value = String(ex.size);
    setText(pageText, `Page ${int(ex.page + 1)} of ${int(pages)}`);
    firstBtn.disabled = prevBtn.disabled = ex.page === 0;
    nextBtn.disabled = lastBtn.disabled = ex.page >= pages - 1;
    const from = total ? ex.page * ex.size + 1 : 0, to = Math.min(total, (ex.page + 1) * ex.size);
    setText(rangeText, total ? `${int(from)}–${int(to)} of ${int(total)}` : 'no images');

    // the page of images
    const token = ++exToken;
    grid.setAttribute('aria-busy', 'true');
    if (total === 0) {
      setChildren(grid);
      exMsg.hidden = false;
      setText(exMsg, 'No images here.');
      grid.removeAttribute('aria-busy');
      return;
    }
    const q = new URLSearchParams({ split: ex.split, page: ex.page, size: ex.size });
    if (ex.label >= 0) q.set('label', ex.label);
    try {
      const r = await get(`/datasets/${id}/images?${q}`);
      if (!alive || token !== exToken) return;
      exMsg.hidden = true;
      renderThumbs(r.images);
    } catch (e) {
      if (!alive || token !== exToken) return;
      setChildren(grid);
      exMsg.hidden = false;
      setText(exMsg, `Could not load the images: ${e.message}`);
    } finally {
      if (token === exToken) grid.removeAttribute('aria-busy');
    }
  }

  function renderThumbs(images) {
    const o = summary.options || {};
    const iw = o.width || 1, ih = o.height || 1;
    // Tiny records are scaled up by a whole factor with hard pixels; large ones fit the cell.
    const cell = 112;
    let sc = Math.min(cell / iw, cell / ih);
    if (sc >= 1) sc = Math.max(1, Math.floor(sc));
    const dw = Math.max(1, Math.round(iw * sc)), dh = Math.max(1, Math.round(ih * sc));
    grid.style.setProperty('--thumb-w', `${Math.max(dw, 96)}px`);
    grid.style.setProperty('--thumb-h', `${dh}px`);
    const split = SPLITS.find(([k]) => k === ex.split)[1].toLowerCase();
    setChildren(grid, images.map((im) => {
      const name = summary.labels[im.label] ?? `label ${im.label}`;
      const img = h('img', { src: im.url, alt: `${name}, ${split} image ${im.index}`, width: dw, height: dh,
        class: sc >= 2 ? 'pixelated' : null, decoding: 'async' });
      img.addEventListener('load', () => img.parentNode.classList.add('loaded'), { once: true });
      img.addEventListener('error', () => img.parentNode.classList.add('broken'), { once: true });
      return h('li', { class: 'thumb', dataset: { index: im.index, label: im.label } },
        h('a', { class: 'thumb-img', href: im.url, target: '_blank', rel: 'noopener', title: `Open ${split} image #${im.index} at full size` }, img),
        h('span', { class: 'thumb-label', text: name, title: name }),
        h('span', { class: 'thumb-index muted num', text: `#${im.index}` }));
    }));
  }

  return {
    main,
    side,
    /** A newer record of the job: a finished dataset shows itself. */
    update(job) {
      const g = job.params && typeof job.params.group === 'string' ? job.params.group : '';
      if (g !== group) { group = g; if (summary) render(); }
      if (job.state === 'done') { load(); return; }
      if (summary) return;
      // Until it is done, one card says what will appear here.
      const active = job.state === 'queued' || job.state === 'running';
      if (active && !pending.parentNode) main.prepend(pending);
      pending.hidden = !active;
      for (const c of mainCards) c.hidden = true;
      main.hidden = !active;
      setText(pendingText, job.state === 'queued'
        ? 'It is waiting for a free CPU slot. Its summary, class chart and images appear here when it is done.'
        : 'Its summary, images per class, mean image and an explorer of its records appear here when it is done.');
    },
    destroy() {
      alive = false;
      if (chart) chart.destroy();
      cleanups.forEach((f) => f());
    },
  };
}
