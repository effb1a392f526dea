// charts.js — Chart.js from Debian's libjs-chart.js (served at /vendor/), loaded on first
// use as its ES module build, with colours taken from the stylesheet's variables.

let loading = null;

/** Resolves to the Chart class, or rejects when the package is not installed. */
export function loadChart() {
  if (!loading) {
    loading = import('/vendor/chart.js/chart.mjs').then((m) => {
      m.Chart.register(...m.registerables);
      return m.Chart;
    });
    loading.catch(() => { loading = null; }); // try again next time
  }
  return loading;
}

/** A CSS custom property of :root, e.g. cssVar('--accent'). */
export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** Colours for the three splits, in the current colour scheme. */
export function splitColours() {
  return {
    train: cssVar('--split-train') || '#0969da',
    val: cssVar('--split-val') || '#bf8700',
    test: cssVar('--split-test') || '#8250df',
    text: cssVar('--muted') || '#59636e',
    grid: cssVar('--border-muted') || '#e4e8ec',
    font: cssVar('--font') || 'system-ui, sans-serif',
  };
}

/** Call fn when the colour scheme changes; returns the function that stops. */
export function onSchemeChange(fn) {
  const mq = window.matchMedia('(prefers-color-scheme: dark)');
  mq.addEventListener('change', fn);
  return () => mq.removeEventListener('change', fn);
}
