// api.js — the REST client.  Every failure becomes an ApiError whose message is the
// server's own ({"error":{"code","message"}}), so the UI can show it as is.
//
// With accounts on, a change made with the session cookie must carry the session's
// CSRF token as X-CSRF-Token (the server refuses it otherwise).  api() adds it, and
// so that a page calling fetch() or XMLHttpRequest itself (uploads, drawings) is
// covered too, both are wrapped here once: any non-GET request to our own /api/
// gets the header.  The token comes from /api/v1/me or the login answer
// (setCsrfToken); it is never stored outside this page's memory.

let csrf = null;

/** Remember the session's CSRF token (null: none, accounts off). */
export function setCsrfToken(t) { csrf = t || null; }

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

function needsCsrf(method, url) {
  if (!csrf || SAFE.has(String(method || 'GET').toUpperCase())) return false;
  try {
    const u = new URL(url, location.href);
    return u.origin === location.origin && u.pathname.startsWith('/api/');
  } catch { return false; }
}

if (typeof window !== 'undefined' && !window.__ddCsrfWrapped) {
  window.__ddCsrfWrapped = true;
  const plainFetch = window.fetch.bind(window);
  window.fetch = (input, init = {}) => {
    const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
    const method = init.method || (typeof input === 'object' && input.method) || 'GET';
    if (needsCsrf(method, url)) {
      const headers = new Headers(init.headers || (typeof input === 'object' ? input.headers : undefined));
      headers.set('X-CSRF-Token', csrf);
      init = { ...init, headers };
    }
    return plainFetch(input, init);
  };
  const open = XMLHttpRequest.prototype.open;
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    this.__ddCsrf = needsCsrf(method, url);
    return open.call(this, method, url, ...rest);
  };
  XMLHttpRequest.prototype.send = function (...args) {
    if (this.__ddCsrf && csrf) this.setRequestHeader('X-CSRF-Token', csrf);
    return send.apply(this, args);
  };
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** Called with the ApiError of any 401: the session ended (set by app.js). */
let onUnauthenticated = null;
export function whenUnauthenticated(fn) { onUnauthenticated = fn; }

export async function api(method, path, body) {
  const init = { method, headers: { accept: 'application/json' } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(`/api/v1${path}`, init);
  } catch (e) {
    throw new ApiError(0, 'network', 'Cannot reach the deepdesk server. Is it running?');
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const err = json && json.error;
    const e = new ApiError(res.status, (err && err.code) || 'http',
      (err && err.message) || `${method} ${path} failed: HTTP ${res.status}`);
    if (res.status === 401 && onUnauthenticated && path !== '/login') onUnauthenticated(e);
    throw e;
  }
  return json;
}

export const get = (p) => api('GET', p);
export const post = (p, b) => api('POST', p, b);
export const patch = (p, b) => api('PATCH', p, b);
export const del = (p) => api('DELETE', p);
