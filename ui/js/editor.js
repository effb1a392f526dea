// editor.js — the prototxt editor: CodeMirror 5 from Debian's libjs-codemirror (served at
// /vendor/codemirror/), loaded once with a <script> tag because it is not an ES module.
// Where the package is missing the editor is the plain <textarea> it was built on, so
// the form still works; errors then show under it instead of in a gutter.
import { h } from './dom.js';

let loading = null;

/** Resolves to window.CodeMirror, or rejects when the package is not installed. */
export function loadCodeMirror() {
  if (window.CodeMirror) return Promise.resolve(window.CodeMirror);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      if (!document.querySelector('link[data-cm]')) {
        document.head.append(h('link', { rel: 'stylesheet', href: '/vendor/codemirror/lib/codemirror.css', dataset: { cm: '' } }));
      }
      const s = h('script', { src: '/vendor/codemirror/lib/codemirror.js', dataset: { cm: '' } });
      s.addEventListener('load', () => {
        if (!window.CodeMirror) { reject(new Error('CodeMirror did not load')); return; }
        defineProtoMode(window.CodeMirror);
        resolve(window.CodeMirror);
      });
      s.addEventListener('error', () => { s.remove(); reject(new Error('libjs-codemirror is not installed on the server')); });
      document.head.append(s);
    });
    loading.catch(() => { loading = null; });
  }
  return loading;
}

/** Caffe's protobuf text format: comments, strings, numbers, field names, enum words. */
function defineProtoMode(CM) {
  CM.defineMode('prototxt', () => ({
    token(stream) {
      if (stream.eatSpace()) return null;
      if (stream.peek() === '#') { stream.skipToEnd(); return 'comment'; }
      if (stream.match(/^"(?:[^"\\]|\\.)*"?/) || stream.match(/^'(?:[^'\\]|\\.)*'?/)) return 'string';
      if (stream.match(/^[A-Za-z_]\w*(?=\s*[:{])/)) return 'property';
      if (stream.match(/^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/)) return 'number';
      if (stream.match(/^(?:true|false)\b/)) return 'atom';
      if (stream.match(/^[A-Z][A-Z0-9_]*\b/)) return 'atom';
      if (stream.match(/^[{}]/)) return 'bracket';
      stream.next();
      return null;
    },
    lineComment: '#',
  }));
}

/**
 * A prototxt editor in place of textarea ta.  Returns {el, ready, getValue, setValue,
 * onChange(fn), showError({line, col, message}|null), focus, refresh}.  Until CodeMirror
 * loads (or if it cannot), the textarea itself is the editor.
 */
export function protoEditor(ta) {
  let cm = null;
  let mark = null, markerLine = null;
  const listeners = [];
  const el = h('div', { class: 'editor' }, ta);
  ta.addEventListener('input', () => listeners.forEach((f) => f()));
  const ready = loadCodeMirror().then((CM) => {
    cm = CM.fromTextArea(ta, {
      mode: 'prototxt', lineNumbers: true, indentUnit: 2, tabSize: 2, indentWithTabs: false,
      gutters: ['dd-err-gutter', 'CodeMirror-linenumbers'], viewportMargin: 40,
      extraKeys: { Tab: (c) => c.replaceSelection('  ') },
    });
    cm.getWrapperElement().dataset.editor = 'codemirror';
    cm.on('change', () => { ta.value = cm.getValue(); listeners.forEach((f) => f()); });
    return cm;
  }, () => null);

  function clear() {
    if (mark) { mark.clear(); mark = null; }
    if (cm && markerLine !== null) { cm.clearGutter('dd-err-gutter'); markerLine = null; }
    if (cm) cm.getWrapperElement().classList.remove('has-error');
  }
  return {
    el,
    ready,
    get cm() { return cm; },
    getValue: () => (cm ? cm.getValue() : ta.value),
    setValue(v) {
      if (cm) { cm.setValue(v); cm.clearHistory(); } else ta.value = v;
      ta.value = v;
    },
    onChange(fn) { listeners.push(fn); },
    showError(err) {
      clear();
      if (!err || !cm || !err.line) return;
      const line = Math.max(0, Math.min(cm.lineCount() - 1, err.line - 1));
      const text = cm.getLine(line) || '';
      const col = Math.max(0, Math.min(text.length, (err.col || 1) - 1));
      // Underline from the column to the end of the word there (at least one character).
      let end = col;
      while (end < text.length && /[\w."-]/.test(text[end])) end++;
      if (end === col) end = Math.min(text.length, col + 1);
      if (end > col) mark = cm.markText({ line, ch: col }, { line, ch: end }, { className: 'cm-dd-error', title: err.message });
      const dot = h('span', { class: 'cm-err-marker', title: `${err.line}:${err.col || 1} ${err.message}`, 'aria-label': 'Error' }, '●');
      cm.setGutterMarker(line, 'dd-err-gutter', dot);
      markerLine = line;
      cm.getWrapperElement().classList.add('has-error');
    },
    focus() { if (cm) cm.focus(); else ta.focus(); },
    refresh() { if (cm) cm.refresh(); },
    goTo(line, col) {
      if (!cm) return;
      cm.focus();
      cm.setCursor({ line: Math.max(0, line - 1), ch: Math.max(0, (col || 1) - 1) });
      cm.scrollIntoView(null, 80);
    },
  };
}
