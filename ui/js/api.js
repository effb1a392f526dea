// api.js — the REST client.  Every failure becomes an ApiError whose message is the
// server's own ({"error":{"code","message"}}), so the UI can show it as is.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

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
    throw new ApiError(res.status, (err && err.code) || 'http',
      (err && err.message) || `${method} ${path} failed: HTTP ${res.status}`);
  }
  return json;
}

export const get = (p) => api('GET', p);
export const post = (p, b) => api('POST', p, b);
export const patch = (p, b) => api('PATCH', p, b);
export const del = (p) => api('DELETE', p);
