// app.js — deepdesk's single-page UI: routing, the connection indicator, page mounting.
//
// Routes (real paths, so a reload or a shared link opens the same page; the server
// answers index.html for any path without a dot):
//   /            running and queued jobs        /datasets   dataset jobs
//   /models      model jobs                     /jobs       every job
//   /jobs/ID     one job                        /datasets/ID  one dataset (the job page, plus
//   /datasets/new  the new-dataset form                       the dataset's summary and images)
//   /models/new    the new-model form (?from=ID clones)   /models/ID  one model (the job page, plus
//                                                                     its curves, snapshots, resume)
//   /classes       one's classes (classes.js)             /classes/ID one class: the instructor's live
//                                                                     dashboard, roster, presets (dashboard.js)
//   /account       one's own account: password, API tokens (account.js)
//   /users         the admin's accounts page (users.js)
//
// With accounts on, nothing starts until /api/v1/me says who is logged in: a 401
// shows the login page instead (login.js), and a 401 later on (the session ended)
// brings it back.  The header then shows the user's name and a logout button.
import { live } from './js/live.js';
import { store } from './js/store.js';
import { mountHome, tabForPath } from './js/home.js';
import { mountJob } from './js/job.js';
import { mountNewDataset } from './js/dataset_new.js';
import { mountNewModel } from './js/model_new.js';
import { h, setChildren, setText, icon } from './js/dom.js';
import { get, post, setCsrfToken, whenUnauthenticated } from './js/api.js';
import { mountLogin } from './js/login.js';
import { mountClasses } from './js/classes.js';
import { mountClassPage } from './js/dashboard.js';
import { mountAccount } from './js/account.js';
import { mountUsers } from './js/users.js';

const main = document.getElementById('main');
let current = null; // {kind: 'home'|'job'|'missing'|'login', page, key}
let started = false; // the pages run (after /api/v1/me said who is logged in)

function route(path) {
  const tab = tabForPath(path);
  if (tab) return { kind: 'home', tab };
  const m = /^\/jobs\/(\d+)\/?$/.exec(path);
  if (m) return { kind: 'job', id: Number(m[1]) };
  if (/^\/datasets\/new\/?$/.test(path)) return { kind: 'new-dataset' };
  const d = /^\/datasets\/(\d+)\/?$/.exec(path);
  if (d) return { kind: 'job', id: Number(d[1]), dataset: true };
  if (/^\/models\/new\/?$/.test(path)) return { kind: 'new-model' };
  const mo = /^\/models\/(\d+)\/?$/.exec(path);
  if (mo) return { kind: 'job', id: Number(mo[1]), model: true };
  if (/^\/classes\/?$/.test(path)) return { kind: 'classes' };
  const cl = /^\/classes\/(\d+)\/?$/.exec(path);
  if (cl) return { kind: 'class', id: Number(cl[1]) };
  if (/^\/account\/?$/.test(path)) return { kind: 'account' };
  if (/^\/users\/?$/.test(path)) return { kind: 'users' };
  return { kind: 'missing' };
}

function render({ focus = false } = {}) {
  if (!started) return; // the login page is showing
  const r = route(location.pathname);
  if (current && current.kind === 'home' && r.kind === 'home') {
    current.page.setTab(r.tab);
    return;
  }
  if (current && current.page) current.page.destroy();
  current = null;
  if (r.kind === 'home') current = { kind: 'home', page: mountHome(main, { tab: r.tab, navigate }) };
  else if (r.kind === 'job') current = { kind: 'job', page: mountJob(main, { id: r.id, dataset: r.dataset, model: r.model, navigate }) };
  else if (r.kind === 'new-dataset') current = { kind: 'new-dataset', page: mountNewDataset(main, { navigate }) };
  else if (r.kind === 'new-model') current = { kind: 'new-model', page: mountNewModel(main, { navigate }) };
  else if (r.kind === 'classes') current = { kind: 'classes', page: mountClasses(main, { navigate }) };
  else if (r.kind === 'class') current = { kind: 'class', page: mountClassPage(main, { id: r.id, navigate }) };
  else if (r.kind === 'account') current = { kind: 'account', page: mountAccount(main, { navigate }) };
  else if (r.kind === 'users') current = { kind: 'users', page: mountUsers(main, { navigate }) };
  else {
    document.title = 'Page not found · deepdesk';
    setChildren(main, h('div', { class: 'page' }, h('div', { class: 'empty card' }, icon('empty', 'empty-icon'),
      h('h1', { class: 'empty-title' }, 'Page not found'),
      h('p', { class: 'empty-text' }, 'There is nothing at ', h('code', { text: location.pathname }), '.'),
      h('a', { class: 'btn', href: '/' }, 'Go to the job list'))));
    current = { kind: 'missing', page: null };
  }
  markNav();
  if (focus) main.focus({ preventScroll: true });
}

/** Go to an app path without reloading.  opts.replace: replace the history entry. */
export function navigate(path, opts = {}) {
  if (path === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  if (opts.tabOnly) { markNav(); return; } // the home page already shows the tab
  window.scrollTo(0, 0);
  render({ focus: true });
}

function markNav() {
  const p = location.pathname;
  for (const a of document.querySelectorAll('.topnav a')) {
    const href = a.getAttribute('href');
    const here = (href === '/jobs' && p.startsWith('/jobs')) || (href === '/datasets' && p.startsWith('/datasets'))
      || (href === '/models' && p.startsWith('/models')) || (href === '/users' && p.startsWith('/users'));
    if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
}

// Same-origin links to app pages are handled here, not by a page load.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download') || a.hasAttribute('data-external')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/vendor/')) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', () => render());

/* ---- the connection indicator ---- */
const conn = document.getElementById('conn');
const connText = conn.querySelector('.conn-text');
const connRetry = h('span', { class: 'conn-retry', 'aria-hidden': 'true' });
conn.append(connRetry);
let countdown = null;
live.on('status', ({ state, retryAt }) => {
  conn.dataset.state = state;
  clearInterval(countdown);
  if (state === 'open') setText(connText, 'Live');
  else if (state === 'connecting') setText(connText, live.everOpened ? 'Reconnecting…' : 'Connecting…');
  else if (state === 'waiting') setText(connText, 'Offline');
  // The countdown is for eyes only: a screen reader hears "Offline" once.
  const show = () => setText(connRetry, state === 'waiting'
    ? ` · retrying in ${Math.max(1, Math.ceil((retryAt - Date.now()) / 1000))}s` : '');
  show();
  if (state === 'waiting') countdown = setInterval(show, 1000);
  conn.title = state === 'open' ? 'Receiving live updates over a WebSocket' : 'Live updates are paused; the page reconnects by itself';
});

/* ---- who is logged in ---- */
const topbar = document.querySelector('.topbar-inner');
const nav = document.querySelector('.topnav');

/** The header's "Classes" link, for instructors and admins (classes.js, dashboard.js). */
function showClassesLink(user) {
  document.getElementById('nav-classes')?.remove();
  if (!user || (user.role !== 'instructor' && user.role !== 'admin')) return;
  nav.insertBefore(h('a', { href: '/classes', id: 'nav-classes' }, 'Classes'), nav.querySelector('[data-external]'));
}

/** The header's "Users" link, for admins (users.js). */
function showUsersLink(user) {
  document.getElementById('nav-users')?.remove();
  if (!user || user.role !== 'admin') return;
  nav.insertBefore(h('a', { href: '/users', id: 'nav-users' }, 'Users'), nav.querySelector('[data-external]'));
}

function showUser(me) {
  document.getElementById('user-box')?.remove();
  showClassesLink(me.accounts ? me.user : null);
  showUsersLink(me.accounts ? me.user : null);
  if (!me.accounts) return; // the local user of a loopback server: nothing to show
  const logout = h('button', { class: 'btn', type: 'button', id: 'logout' }, 'Log out');
  logout.addEventListener('click', async () => {
    logout.disabled = true;
    try { await post('/logout'); } catch { /* ended already */ }
    location.assign('/');
  });
  topbar.append(h('div', { class: 'user-box', id: 'user-box', style: { display: 'flex', alignItems: 'center', gap: '8px', marginLeft: '12px' } },
    h('a', { class: 'user-name', href: '/account', title: `Logged in as ${me.user.name} (${me.user.role}): your account`, text: me.user.name }),
    logout));
}

function start() {
  if (started) return;
  started = true;
  nav.hidden = false;
  conn.hidden = false;
  store.start();
  live.start();
  render();
}

function showLogin() {
  nav.hidden = true;
  conn.hidden = true;
  document.getElementById('user-box')?.remove();
  if (current && current.page) current.page.destroy();
  current = { kind: 'login', page: mountLogin(main, {
    onLoggedIn(res) {
      setCsrfToken(res.csrf_token);
      current = null;
      showUser({ accounts: true, user: res.user });
      if (started) location.reload(); // pages of the old session hold stale state
      else start();
    },
  }) };
}

// A 401 once the app runs: the session ended (expiry, logout elsewhere, password change).
whenUnauthenticated(() => { if (started) location.reload(); });

async function boot() {
  try {
    const me = await get('/me');
    setCsrfToken(me.csrf_token);
    showUser(me);
  } catch (e) {
    if (e.status === 401) { showLogin(); return; }
    // an older server without /me, or none at all: start; the indicator says "Offline"
  }
  start();
}
boot();
