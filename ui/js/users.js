// users.js — /users: the admin's accounts page.
//   Add a user     POST /users {name, role, password}; errors under the field they name
//   The users      GET /users: name, role, quota and today's usage, created, last login
//                  (the newest "login" row of GET /audit, which keeps the last 1000)
//   Per user       role (PATCH {role}), quota (PATCH {quota: {jobs, cpu_minutes,
//                  gpu_minutes, disk_bytes, memory_bytes}}, a field left empty goes back to the role's
//                  default: null), disable/enable (PATCH {disabled}), reset password
//                  (PATCH {password}: a generated one, shown to the admin once; the
//                  user's sessions end), remove (DELETE after a confirm).  An error shows in the user's row; the server
//                  refuses an admin demoting, disabling or removing themselves and its
//                  message is shown as is.
//   Recent activity  the last account rows of GET /audit
// Others get an "Admins only" page (the server answers them 403 anyway).  With accounts
// off the page still works (accounts made now are used once they are on) and says so.
// Every name from the server is set as text (dom.js h()), never as HTML.
import { h, setChildren, setText } from './dom.js';
import { get, post, patch, del } from './api.js';
import { relTime, dateTime } from './format.js';
import { icon, toast, confirmDialog } from './ui.js';
import { formField, showFieldErrors, accountsOffNote, quotaRows } from './account.js';

const ROLES = ['learner', 'instructor', 'admin'];
const GIB = 2 ** 30;
const QUOTA_KEYS = [
  ['jobs', 'Running jobs', 'at once'],
  ['cpu_minutes', 'CPU minutes', 'a day'],
  ['gpu_minutes', 'GPU minutes', 'a day'],
  ['disk_bytes', 'Disk', 'GiB'],
  ['memory_bytes', 'Memory of one job', 'GiB'],
];
const IN_GIB = new Set(['disk_bytes', 'memory_bytes']);
const ACCOUNT_ACTIONS = new Set(['login', 'login_failed', 'logout', 'password_change', 'password_reset', 'token_create', 'token_revoke',
  'user_add', 'user_remove', 'role_change', 'user_disable', 'user_enable', 'user_quota']);

/** A random password of 16 letters and digits (crypto.getRandomValues). */
function randomPassword() {
  const abc = 'abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789';
  const v = crypto.getRandomValues(new Uint32Array(16));
  return Array.from(v, (x) => abc[x % abc.length]).join('');
}

function adminsOnly(page) {
  setChildren(page, h('div', { class: 'empty card admins-only' }, icon('alert', 'empty-icon'),
    h('h1', { class: 'empty-title' }, 'Admins only'),
    h('p', { class: 'empty-text' }, 'Users are managed by an admin: ask one to add, change or remove an account. Your own password and API tokens are on ',
      h('a', { href: '/account' }, 'your account page'), '.')));
}

export function mountUsers(root) {
  document.title = 'Users · deepdesk';
  let alive = true;
  let me = null;
  let lastLogin = new Map(); // name → ms
  const page = h('div', { class: 'page users-page' }, h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…'));
  setChildren(root, page);

  const groups = h('table', { class: 'data-table users-table' },
    h('thead', null, h('tr', null, ['Name', 'Role', 'Running jobs', 'CPU min today', 'GPU min today', 'Disk', 'Created', 'Last login', '']
      .map((t, i) => h('th', { scope: 'col', class: i >= 2 && i <= 5 ? 'r' : null, text: t })))));
  const count = h('span', { class: 'card-count muted' });
  const listErr = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const activity = h('tbody');

  /* ---------- add a user ---------- */
  function addCard() {
    const roleSel = h('select', { class: 'input select' }, ROLES.map((r) => h('option', { value: r, text: r })));
    const pwIn = h('input', { class: 'input', type: 'password', autocomplete: 'new-password', maxlength: 1024 });
    const fields = {
      name: formField({ id: 'user-new-name', label: 'Name', hint: '1 to 32 letters, digits, ".", "_" and "-".',
        input: h('input', { class: 'input', maxlength: 64, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. ann' }) }),
      role: formField({ id: 'user-new-role', label: 'Role', input: roleSel }),
      password: formField({ id: 'user-new-password', label: 'Initial password', hint: '8 characters or more; they can change it on their account page.', input: pwIn }),
    };
    const gen = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'generate-password' } }, 'Generate');
    gen.addEventListener('click', () => { pwIn.type = 'text'; pwIn.value = randomPassword(); pwIn.focus(); });
    fields.password.input.after(gen);
    const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const done = h('div', { class: 'user-created', 'aria-live': 'polite' });
    const btn = h('button', { type: 'submit', class: 'btn btn-primary', dataset: { action: 'add-user' } }, icon('plus'), 'Add user');
    const form = h('form', { class: 'card users-add', 'aria-labelledby': 'users-add-title', novalidate: true },
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'users-add-title' }, 'Add a user')),
      h('div', { class: 'card-body' }, h('div', { class: 'users-add-fields' }, fields.name.el, fields.role.el, fields.password.el),
        err, h('div', { class: 'form-actions' }, btn), done));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      err.hidden = true;
      setChildren(done);
      for (const f of Object.values(fields)) f.set('');
      const body = { name: fields.name.input.value.trim(), role: roleSel.value, password: pwIn.value };
      if (!body.name) { showFieldErrors({ message: 'name: required' }, fields, err); return; }
      if (!body.password) { showFieldErrors({ message: 'password: required, 8 characters or more (or press Generate)' }, fields, err); return; }
      btn.disabled = true;
      try {
        const r = await post('/users', body);
        const shown = pwIn.type === 'text';
        form.reset();
        pwIn.type = 'password';
        for (const f of Object.values(fields)) f.set('');
        setChildren(done, h('div', { class: 'alert alert-info', role: 'status' },
          h('strong', { text: `Account ${r.user.name} made as ${r.user.role}. ` }),
          shown ? ['Their password (shown this once): ', h('code', { class: 'user-created-password', text: body.password })] : 'Give them the password you typed.'));
        toast(`User ${r.user.name} added`, 'success');
        await load();
      } catch (ex) {
        showFieldErrors(ex, fields, err, { exists: 'name' });
      } finally { btn.disabled = false; }
    });
    return form;
  }

  /* ---------- one user: a <tbody> of its row and its open panel ---------- */
  function userGroup(u) {
    const self = me && me.accounts && me.user.id === u.id;
    const rowErr = h('p', { class: 'field-error row-error-msg', role: 'alert', hidden: true });
    const panel = h('div', { class: 'user-panel' });
    const panelRow = h('tr', { class: 'user-panel-row', hidden: true }, h('td', { colspan: 9 }, rowErr, panel));
    const fail = (e) => { setText(rowErr, e.message); rowErr.hidden = false; panelRow.hidden = false; };
    const clearErr = () => { rowErr.hidden = true; if (!panel.firstChild) panelRow.hidden = true; };
    const replace = (nu) => { const g = userGroup(nu); group.replaceWith(g); return g; };

    const roleSel = h('select', { class: 'input select role-select', 'aria-label': `Role of ${u.name}` },
      ROLES.map((r) => h('option', { value: r, selected: r === u.role, text: r })));
    roleSel.addEventListener('change', async () => {
      clearErr();
      if (roleSel.value === 'admin' && !(await confirmDialog({
        title: `Make ${u.name} an admin?`,
        body: h('p', null, 'An admin sees and manages every job, every account and the audit log.'),
        confirm: 'Make admin',
      }))) { roleSel.value = u.role; roleSel.focus(); return; }
      roleSel.disabled = true;
      try {
        const r = await patch(`/users/${u.id}`, { role: roleSel.value });
        toast(`${u.name} is now ${r.user.role === 'admin' ? 'an' : 'a'} ${r.user.role}`, 'success');
        replace(r.user);
      } catch (e) { roleSel.value = u.role; roleSel.disabled = false; fail(e); }
    });

    const rows = quotaRows(u.quota, u.usage);
    const usageCell = ([, used, limit, over]) => h('td', { class: ['r', 'usage-cell', over ? 'quota-over' : null], title: over ? 'at or over the limit' : null },
      h('span', { text: used.replace(/ running.*$/, '') }), h('span', { class: 'muted', text: ` / ${limit}` }));

    const quotaBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'edit-quota' }, 'aria-expanded': 'false', 'aria-label': `Quota of ${u.name}` }, 'Quota');
    const pwBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'reset-password' }, 'aria-expanded': 'false', 'aria-label': `Password of ${u.name}` }, 'Password');
    const disBtn = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: u.disabled ? 'enable' : 'disable' }, 'aria-label': `${u.disabled ? 'Enable' : 'Disable'} ${u.name}` }, u.disabled ? 'Enable' : 'Disable');
    const rmBtn = h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', dataset: { action: 'remove-user' }, 'aria-label': `Remove ${u.name}` }, icon('trash'), 'Remove');

    function openPanel(btn, build) {
      const open = btn.getAttribute('aria-expanded') === 'true';
      for (const b of [quotaBtn, pwBtn]) b.setAttribute('aria-expanded', 'false');
      rowErr.hidden = true;
      if (open) { setChildren(panel); panelRow.hidden = true; btn.focus(); return; }
      btn.setAttribute('aria-expanded', 'true');
      setChildren(panel, build(() => { setChildren(panel); panelRow.hidden = true; btn.setAttribute('aria-expanded', 'false'); btn.focus(); }));
      panelRow.hidden = false;
      panel.querySelector('input')?.focus();
    }
    quotaBtn.addEventListener('click', () => openPanel(quotaBtn, (close) => quotaForm(u, close, replace)));
    panel.addEventListener('keydown', (e) => {
      const open = [quotaBtn, pwBtn].find((b) => b.getAttribute('aria-expanded') === 'true');
      if (e.key === 'Escape' && open) { e.preventDefault(); openPanel(open); }
    });
    pwBtn.addEventListener('click', () => openPanel(pwBtn, (close) => passwordForm(u, close)));

    disBtn.addEventListener('click', async () => {
      clearErr();
      const disable = !u.disabled;
      if (disable && !(await confirmDialog({
        title: `Disable ${u.name}?`,
        body: h('p', null, h('strong', { text: u.name }), ' can no longer log in: their sessions end and their API tokens stop working. Their jobs stay. Enable them again at any time.'),
        confirm: 'Disable', danger: true,
      }))) { disBtn.focus(); return; }
      disBtn.disabled = true;
      try {
        const r = await patch(`/users/${u.id}`, { disabled: disable });
        toast(`${u.name} ${disable ? 'disabled' : 'enabled'}`, 'success');
        replace(r.user).querySelector(`[data-action="${disable ? 'enable' : 'disable'}"]`)?.focus();
      } catch (e) { disBtn.disabled = false; fail(e); }
    });

    rmBtn.addEventListener('click', async () => {
      clearErr();
      const ok = await confirmDialog({
        title: `Remove ${u.name}?`,
        body: [h('p', null, 'This removes the account ', h('strong', { text: u.name }), ', its sessions and its API tokens. Its jobs stay, owned by nobody. This cannot be undone.'),
          self ? h('p', { class: 'muted' }, 'This is your own account.') : null],
        confirm: 'Remove user', danger: true,
      });
      if (!ok) { rmBtn.focus(); return; }
      rmBtn.disabled = true;
      try {
        await del(`/users/${u.id}`);
        toast(`User ${u.name} removed`, 'success');
        group.remove();
        await load();
      } catch (e) { rmBtn.disabled = false; fail(e); }
    });

    const last = lastLogin.get(u.name);
    const group = h('tbody', { class: ['user-group', u.disabled ? 'user-disabled' : null], dataset: { user: u.name, id: u.id } },
      h('tr', { class: 'user-row' },
        h('th', { scope: 'row', class: 'user-name-cell' }, h('span', { class: 'user-login', text: u.name }),
          self ? h('span', { class: 'badge-lite', title: 'the account you are logged in with' }, 'you') : null,
          u.disabled ? h('span', { class: 'badge-lite user-disabled-tag' }, 'disabled') : null),
        h('td', null, roleSel),
        usageCell(rows[0]), usageCell(rows[1]), usageCell(rows[2]), usageCell(rows[3]),
        h('td', { title: dateTime(u.created_at), text: relTime(u.created_at) }),
        h('td', { title: last ? dateTime(last) : 'no login in the last 1000 audit rows', text: last ? relTime(last) : '—' }),
        h('td', { class: 'user-actions' }, h('div', { class: 'actions' }, quotaBtn, pwBtn, disBtn, rmBtn))),
      panelRow);
    return group;
  }

  /* ---------- the quota of one user ---------- */
  function quotaForm(u, close, replace) {
    const q = u.quota || {};
    const shown = (k, v) => (typeof v !== 'number' ? '' : IN_GIB.has(k) ? String(Math.round((v / GIB) * 1000) / 1000) : String(v));
    const fields = {};
    for (const [k, label, unit] of QUOTA_KEYS) {
      fields[`quota.${k}`] = formField({ id: `quota-${u.id}-${k}`, label: `${label} (${unit})`,
        input: h('input', { class: 'input num-input', inputmode: IN_GIB.has(k) ? 'decimal' : 'numeric', value: shown(k, q[k]), dataset: { quota: k } }) });
    }
    const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const save = h('button', { type: 'submit', class: 'btn btn-primary btn-small', dataset: { action: 'save-quota' } }, 'Save quota');
    const reset = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'default-quota' } }, 'Role defaults');
    const cancel = h('button', { type: 'button', class: 'btn btn-small btn-quiet' }, 'Cancel');
    cancel.addEventListener('click', close);
    const send = async (quota) => {
      save.disabled = reset.disabled = true;
      try {
        const r = await patch(`/users/${u.id}`, { quota });
        toast(`Quota of ${u.name} saved`, 'success');
        replace(r.user);
      } catch (e) { showFieldErrors(e, fields, err); save.disabled = reset.disabled = false; }
    };
    reset.addEventListener('click', () => send(Object.fromEntries(QUOTA_KEYS.map(([k]) => [k, null]))));
    const form = h('form', { class: 'quota-form', novalidate: true, 'aria-label': `Quota of ${u.name}` },
      h('div', { class: 'quota-fields' }, Object.values(fields).map((f) => f.el)),
      h('p', { class: 'field-hint' }, '0 is no limit; an empty field goes back to the role\'s default. Minutes count per UTC day.'),
      err, h('div', { class: 'actions' }, save, reset, cancel));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      err.hidden = true;
      const quota = {};
      for (const [k] of QUOTA_KEYS) {
        const f = fields[`quota.${k}`];
        f.set('');
        const s = f.input.value.trim();
        if (s === shown(k, q[k])) continue; // unchanged
        if (s === '') { quota[k] = null; continue; }
        const n = Number(s);
        const v = IN_GIB.has(k) ? Math.round(n * GIB) : n;
        if (!Number.isFinite(n) || n < 0 || !Number.isInteger(v)) {
          f.set(`quota.${k}: ${IN_GIB.has(k) ? 'a number of GiB' : 'a whole number'} from 0 (0: no limit), or empty for the role's default`);
          f.input.focus();
          return;
        }
        quota[k] = v;
      }
      if (!Object.keys(quota).length) { close(); return; }
      send(quota);
    });
    return form;
  }

  /* ---------- a new password for one user ---------- */
  function passwordForm(u, close) {
    const cancel = h('button', { type: 'button', class: 'btn btn-small btn-quiet' }, 'Close');
    cancel.addEventListener('click', close);
    if (me && me.accounts && me.user.id === u.id) {
      return h('div', { class: 'password-reset' },
        h('p', null, 'Change your own password on ', h('a', { href: '/account' }, 'your account page'), ': it asks for the current one.'), cancel);
    }
    const pwIn = h('input', { class: 'input', type: 'text', autocomplete: 'new-password', maxlength: 1024, spellcheck: 'false', value: randomPassword() });
    const fields = { password: formField({ id: `reset-${u.id}`, label: `New password for ${u.name}`, hint: 'Generated; change it if you like. Their sessions end.', input: pwIn }) };
    const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const out = h('div', { 'aria-live': 'polite' });
    const save = h('button', { type: 'submit', class: 'btn btn-primary btn-small', dataset: { action: 'save-password' } }, 'Set password');
    const form = h('form', { class: 'password-reset', novalidate: true }, fields.password.el, err, out, h('div', { class: 'actions' }, save, cancel));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      err.hidden = true;
      fields.password.set('');
      setChildren(out);
      save.disabled = true;
      try {
        await patch(`/users/${u.id}`, { password: pwIn.value });
        setChildren(out, h('div', { class: 'alert alert-info', role: 'status' }, 'Password set. Give it to ', h('strong', { text: u.name }), ' now: ', h('code', { text: pwIn.value })));
      } catch (ex) { showFieldErrors(ex, fields, err); } finally { save.disabled = false; }
    });
    return form;
  }

  /* ---------- loading ---------- */
  async function loadAudit() {
    try {
      const a = await get('/audit?limit=1000');
      lastLogin = new Map();
      for (const row of a.audit || []) if (row.action === 'login' && row.user && !lastLogin.has(row.user)) lastLogin.set(row.user, row.at);
      const recent = (a.audit || []).filter((row) => ACCOUNT_ACTIONS.has(row.action)).slice(0, 15);
      setChildren(activity, recent.map((row) => h('tr', null,
        h('td', { title: dateTime(row.at), text: relTime(row.at) }), h('td', { text: row.user ?? '—' }),
        h('td', null, h('code', { text: row.action })), h('td', { text: row.target ?? '' }), h('td', { class: 'muted', text: row.address ?? '' }))));
    } catch { /* last logins stay unknown */ }
  }

  async function load() {
    const [r] = await Promise.all([get('/users'), loadAudit()]);
    if (!alive) return;
    const users = r.users || [];
    setText(count, `${users.length} account${users.length === 1 ? '' : 's'}`);
    for (const g of groups.querySelectorAll('tbody')) g.remove();
    groups.append(...users.map(userGroup));
    if (!users.length) groups.append(h('tbody', { class: 'users-empty' }, h('tr', null, h('td', { colspan: 9, class: 'muted', text: 'No account yet: add the first one above.' }))));
  }

  (async () => {
    try {
      me = await get('/me');
      if (!alive) return;
      if (me.accounts && me.user.role !== 'admin') { adminsOnly(page); return; }
      await load();
      if (!alive) return;
      setChildren(page,
        h('div', { class: 'page-head' }, h('div', null, h('h1', { class: 'page-title' }, 'Users'),
          h('p', { class: 'page-sub' }, 'Accounts, roles and quotas. Every change is recorded in the audit log.'))),
        me.accounts ? null : accountsOffNote('accounts made here are used once they are on.'),
        addCard(),
        h('section', { class: 'card users-list', 'aria-labelledby': 'users-title' },
          h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'users-title' }, 'Users'), count),
          h('div', { class: 'table-wrap' }, groups), listErr),
        h('details', { class: 'card users-activity' },
          h('summary', { class: 'card-head' }, h('h2', { class: 'card-title' }, 'Recent account activity')),
          h('div', { class: 'table-wrap' }, h('table', { class: 'data-table' },
            h('thead', null, h('tr', null, ['When', 'Who', 'Action', 'Target', 'From'].map((t) => h('th', { scope: 'col', text: t })))), activity))));
    } catch (e) {
      if (!alive) return;
      if (e.status === 403) { adminsOnly(page); return; }
      setChildren(page, h('div', { class: 'alert alert-error', role: 'alert', text: `Users: ${e.message}` }));
    }
  })();
  return { destroy() { alive = false; } };
}
