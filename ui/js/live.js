// live.js — one WebSocket to /api/v1/ws for the whole page.
//
// Pages subscribe to topics ("jobs", a job id) and listen for messages.  When the
// socket drops it reconnects with exponential backoff (0.5 s doubling to 15 s, with
// jitter), subscribes again to every topic still wanted, and fires "open" with
// {reconnected: true} so that pages fetch what they may have missed.

const MIN_DELAY = 500, MAX_DELAY = 15000;

class Live extends EventTarget {
  constructor() {
    super();
    this.ws = null;
    this.state = 'idle';          // idle | connecting | open | waiting
    this.topics = new Map();      // JSON key → {topic, count}
    this.attempt = 0;
    this.everOpened = false;
    this.timer = null;
    this.retryAt = 0;
  }

  start() {
    if (this.state !== 'idle') return;
    this.connect();
    // A laptop waking up or the tab coming back: retry now rather than after the backoff.
    window.addEventListener('online', () => this.retryNow());
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') this.retryNow();
    });
  }

  retryNow() {
    if (this.state === 'waiting') {
      clearTimeout(this.timer);
      this.connect();
    }
  }

  setState(state) {
    this.state = state;
    this.dispatchEvent(new CustomEvent('status', { detail: { state, retryAt: this.retryAt } }));
  }

  connect() {
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/v1/ws`;
    this.setState('connecting');
    let ws;
    try {
      ws = new WebSocket(url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      for (const { topic } of this.topics.values()) this.send({ subscribe: topic });
      const reconnected = this.everOpened;
      this.everOpened = true;
      this.setState('open');
      this.dispatchEvent(new CustomEvent('open', { detail: { reconnected } }));
    };
    ws.onmessage = (e) => {
      let msg;
      try { msg = JSON.parse(e.data); } catch { return; }
      this.dispatchEvent(new CustomEvent('message', { detail: msg }));
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.scheduleReconnect();
    };
    ws.onerror = () => { /* onclose follows */ };
  }

  scheduleReconnect() {
    const base = Math.min(MAX_DELAY, MIN_DELAY * 2 ** this.attempt);
    const delay = base / 2 + Math.random() * base / 2;
    this.attempt++;
    this.retryAt = Date.now() + delay;
    this.setState('waiting');
    this.timer = setTimeout(() => this.connect(), delay);
  }

  send(obj) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj));
  }

  /** Subscribe to a topic; returns the function that unsubscribes. */
  subscribe(topic) {
    const key = JSON.stringify(topic);
    const t = this.topics.get(key);
    if (t) t.count++;
    else {
      this.topics.set(key, { topic, count: 1 });
      this.send({ subscribe: topic });
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const cur = this.topics.get(key);
      if (!cur) return;
      if (--cur.count === 0) {
        this.topics.delete(key);
        this.send({ unsubscribe: topic });
      }
    };
  }

  /** Listen to an event type; returns the function that stops listening. */
  on(type, fn) {
    const h = (e) => fn(e.detail);
    this.addEventListener(type, h);
    return () => this.removeEventListener(type, h);
  }
}

export const live = new Live();
