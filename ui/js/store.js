// store.js — the jobs this page knows about (list form), kept current by the
// WebSocket.  Views listen for "change" and redraw what changed.
import { get } from './api.js';
import { live } from './live.js';

class JobStore extends EventTarget {
  constructor() {
    super();
    this.jobs = new Map();   // id → job (list form, plus _rx: when it arrived)
    this.totals = {};        // query key → total the server reported
    this.loaded = new Set(); // query keys fetched at least once
    this.started = false;
  }

  start() {
    if (this.started) return;
    this.started = true;
    live.subscribe('jobs');
    live.on('message', (m) => {
      if (m.type === 'job' && m.job) this.put(m.job, 'live');
      else if (m.type === 'deleted') this.remove(m.id);
    });
    // What we hold may have missed changes while the socket was down: fetch lists again
    // the next time a page needs them (a page on screen reloads at once).
    live.on('open', ({ reconnected }) => { if (reconnected) this.loaded.clear(); });
  }

  emit(ids, how) {
    this.dispatchEvent(new CustomEvent('change', { detail: { ids, how } }));
  }

  put(job, how = 'live') {
    const old = this.jobs.get(job.id);
    const rec = { ...(old || {}), ...job, _rx: Date.now() };
    this.jobs.set(job.id, rec);
    this.emit([job.id], old ? (old.state !== rec.state ? 'state' : 'update') : 'new');
    if (old && old.state !== rec.state)
      this.dispatchEvent(new CustomEvent('state', { detail: { job: rec, from: old.state } }));
  }

  remove(id) {
    if (this.jobs.delete(id)) this.emit([id], 'deleted');
  }

  /**
   * Fetch a list (query like "kind=model") and merge it.  A record that arrived over the
   * WebSocket while the request was in flight is newer than the response, so it wins;
   * a job the response should contain but does not was deleted meanwhile.
   */
  async load(query = '') {
    const started = Date.now();
    const limit = 200;
    const q = `limit=${limit}${query ? `&${query}` : ''}`;
    const res = await get(`/jobs?${q}`);
    const seen = new Set();
    let minId = Infinity;
    for (const j of res.jobs) {
      seen.add(j.id);
      minId = Math.min(minId, j.id);
      const cur = this.jobs.get(j.id);
      if (!cur || cur._rx < started) this.jobs.set(j.id, { ...(cur || {}), ...j, _rx: started });
    }
    const complete = res.jobs.length < limit;
    const params = new URLSearchParams(query);
    for (const [id, j] of this.jobs) {
      if (seen.has(id) || j._rx >= started) continue;
      if (!complete && id < minId) continue;
      if (params.get('kind') && j.kind !== params.get('kind')) continue;
      if (params.get('state') && j.state !== params.get('state')) continue;
      this.jobs.delete(id);
    }
    this.totals[query] = res.total;
    this.loaded.add(query);
    this.emit(null, 'load');
    return res;
  }
}

export const store = new JobStore();
