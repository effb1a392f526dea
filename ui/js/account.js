// account.js — /account: the logged-in user's own account.
//   Who I am     name, role, and my quota and today's usage where the server tells them
//                (GET /me; an admin's own row of GET /users)
//   Password     POST /me/password {current, new}; the server's errors are shown under the
//                field they name ("current: …", "new: …"); every other session ends, this
//                one stays and API tokens keep working
//   API tokens   GET /me/tokens, POST /me/tokens {name} (the secret is shown once, here,
//                with a copy button), DELETE /me/tokens/ID after a confirm
// Without accounts (GET /me answers accounts: false) the page says so and how to turn
// them on.  Every name from the server is set as text (dom.js h()), never as HTML.
//
// formField() and showFieldErrors() are shared with users.js: a server message that
// starts with a field name ("name: …", "quota.jobs: …") goes under that field, any
// other under the form.
import { h, setChildren, setText } from './dom.js';
import { get, post, del } from './api.js';
import { relTime, dateTime } from './format.js';
import { icon, toast, confirmDialog, announce } from './ui.js';

/**
 * A labelled input with its own error line.  Returns {el, input, error, set(msg)}:
 * set(msg) shows msg under the input and marks it invalid; set('') clears both.
 */
export function formField({ id, label, hint, input }) {
  const error = h('p', { class: 'field-error', id: `${id}-error`, role: 'alert', hidden: true });
  input.id = id;
  const el = h('div', { class: 'field' }, h('label', { class: 'field-label', for: id, text: label }), input,
    hint ? h('p', { class: 'field-hint', text: hint }) : null, error);
  const set = (msg) => {
    setText(error, msg || '');
    error.hidden = !msg;
    if (msg) { input.setAttribute('aria-invalid', 'true'); input.setAttribute('aria-describedby', error.id); } else { input.removeAttribute('aria-invalid'); input.removeAttribute('aria-describedby'); }
  };
  return { el, input, error, set };
}

/**
 * Show an ApiError's message under the field it names.  fields: {key: formField};
 * other: the form's own error line (a <p class="field-error">).  Clears the others.
 * byCode: {error code: field key} for messages that name no field ("exists": "name").
 * The field that got the error takes the focus.
 */
export function showFieldErrors(e, fields, other, byCode = {}) {
  for (const f of Object.values(fields)) f.set('');
  const msg = (e && e.message) || String(e);
  const m = /^([a-z_]+(?:\.[a-z_]+)?): /.exec(msg);
  const f = (m && (fields[m[1]] || fields[m[1].split('.')[0]])) || fields[byCode[e && e.code]];
  if (f) { f.set(msg); f.input.focus(); }
  if (other) { setText(other, f ? '' : msg); other.hidden = !!f; }
}

/** "deepdesk serve --accounts on": how to turn accounts on, for the accounts-off notes. */
export function accountsOffNote(what) {
  return h('div', { class: 'alert alert-info accounts-off', role: 'note' },
    h('p', null, h('strong', null, 'Accounts are off on this server.'), ' It listens on loopback only, so everything belongs to the local user and no login is needed', what ? `: ${what}` : '.'),
    h('p', null, 'To turn them on, make the first admin in the server\'s data folder, then start the server with accounts (they are on by themselves when it listens beyond loopback):'),
    h('pre', { class: 'log accounts-off-cmd' }, h('code', { text: 'deepdesk user add alice --role admin --data DIR\ndeepdesk serve --accounts on --data DIR' })));
}

const ROLE_TEXT = {
  learner: 'Learner: runs their own datasets and models, sees only their own jobs, and trains on what their classes share.',
  instructor: 'Instructor: everything a learner does, plus classes with rosters, shared datasets, lab presets and the class dashboard.',
  admin: 'Admin: sees and manages every job, every user and the audit log.',
};

/** "1.5 GiB" (binary units, as quotas are set). */
export function gib(n) {
  if (typeof n !== 'number' || !isFinite(n)) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : Number(n.toFixed(n < 10 ? 2 : 1))} ${u[i]}`;
}

/** The rows of a quota and its usage: [label, used text, limit text, over?]. */
export function quotaRows(quota, usage) {
  const q = quota || {}, u = usage || {};
  const lim = (v, f = String) => (typeof v !== 'number' ? '—' : v === 0 ? 'no limit' : f(v));
  const over = (used, v) => typeof v === 'number' && v > 0 && typeof used === 'number' && used >= v;
  const min = (v) => (typeof v === 'number' ? String(Math.round(v * 10) / 10) : '—');
  return [
    ['Running jobs', `${u.running ?? '—'} running${u.queued ? `, ${u.queued} queued` : ''}`, lim(q.jobs), over(u.running, q.jobs)],
    ['CPU minutes today', min(u.cpu_minutes), lim(q.cpu_minutes), over(u.cpu_minutes, q.cpu_minutes)],
    ['GPU minutes today', min(u.gpu_minutes), lim(q.gpu_minutes), over(u.gpu_minutes, q.gpu_minutes)],
    ['Disk', gib(u.disk_bytes), lim(q.disk_bytes, gib), over(u.disk_bytes, q.disk_bytes)],
    ['Memory of one job', '—', lim(q.memory_bytes, gib), false],
  ];
}

export function mountAccount(root) {
  document.title = 'Your account · deepdesk';
  let alive = true;
  const page = h('div', { class: 'page account-page' },
    h('div', { class: 'page-head' }, h('div', null, h('h1', { class: 'page-title' }, 'Your account'),
      h('p', { class: 'page-sub' }, 'Who you are, your password and your API tokens.'))),
    h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…'));
  setChildren(root, page);

  (async () => {
    let me;
    try { me = await get('/me?usage=1'); } catch (e) {
      if (alive) setChildren(page, page.firstChild, h('div', { class: 'alert alert-error', role: 'alert', text: e.message }));
      return;
    }
    if (!alive) return;
    if (!me.accounts) {
      setChildren(page, page.firstChild, accountsOffNote('no password or API token is needed either.'));
      return;
    }
    const profile = profileCard(me.user);
    setChildren(page, page.firstChild,
      h('div', { class: 'account-grid' }, profile.el, passwordCard()),
      tokensCard(() => alive));
    profile.load(me);
  })();
  return { destroy() { alive = false; } };
}

/* ---------- who I am ---------- */

function profileCard(user) {
  const quota = h('div', { class: 'account-quota', 'aria-live': 'polite' });
  const el = h('section', { class: 'card account-profile', 'aria-labelledby': 'profile-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'profile-title' }, 'Who you are')),
    h('div', { class: 'card-body' },
      h('dl', { class: 'kv account-kv' },
        h('dt', null, 'Name'), h('dd', { id: 'account-name', text: user.name }),
        h('dt', null, 'Role'), h('dd', { id: 'account-role', text: user.role }),
        h('dt', null, 'Account'), h('dd', { text: user.id === null ? '—' : `#${user.id}` })),
      h('p', { class: 'muted account-role-text', text: ROLE_TEXT[user.role] || '' }),
      quota));

  function showQuota(q, u) {
    setChildren(quota, h('h3', { class: 'card-subtitle' }, 'Quota and today\'s usage'),
      h('table', { class: 'data-table quota-table' },
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Limit'), h('th', { scope: 'col', class: 'r' }, 'Used'), h('th', { scope: 'col', class: 'r' }, 'Allowed'))),
        h('tbody', null, quotaRows(q, u).map(([label, used, limit, over]) => h('tr', { class: over ? 'quota-over' : null },
          h('th', { scope: 'row', text: label }), h('td', { class: 'r', text: used }), h('td', { class: 'r', text: limit }))))),
      h('p', { class: 'field-hint' }, 'Minutes count per UTC day. Over a limit, new jobs are refused with the limit named; a running job is never stopped.'));
  }

  async function load(me) {
    if (me.quota) { showQuota(me.quota, me.usage); return; } // a server whose /me tells them
    if (me.user.role !== 'admin') {
      setChildren(quota, h('p', { class: 'field-hint' },
        'Your quota (running jobs, CPU and GPU minutes a day, disk) is set by an admin; a job over it is refused with the limit and your usage named.'));
      return;
    }
    try {
      const r = await get('/users');
      const self = (r.users || []).find((x) => x.id === me.user.id);
      if (self) showQuota(self.quota, self.usage);
    } catch { /* the profile stands without it */ }
  }
  return { el, load };
}

/* ---------- password ---------- */

function passwordCard() {
  const pw = (autocomplete) => h('input', { class: 'input', type: 'password', autocomplete, required: true, maxlength: 1024 });
  const fields = {
    current: formField({ id: 'pw-current', label: 'Current password', input: pw('current-password') }),
    new: formField({ id: 'pw-new', label: 'New password', hint: '8 characters or more.', input: pw('new-password') }),
    repeat: formField({ id: 'pw-repeat', label: 'New password again', input: pw('new-password') }),
  };
  const revoke = h('input', { type: 'checkbox', class: 'check', id: 'pw-revoke-tokens' });
  const revokeRow = h('label', { class: 'pw-revoke', for: 'pw-revoke-tokens' }, revoke,
    ' Also revoke all my API tokens (do this if the old password may be known)');
  const err = h('p', { class: 'field-error', id: 'pw-error', role: 'alert', hidden: true });
  const ok = h('div', { class: 'alert alert-info pw-ok', id: 'pw-ok', role: 'status', hidden: true });
  const btn = h('button', { type: 'submit', class: 'btn btn-primary', dataset: { action: 'change-password' } }, 'Change password');
  const form = h('form', { class: 'card account-password', 'aria-labelledby': 'pw-title', novalidate: true },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'pw-title' }, 'Change your password')),
    h('div', { class: 'card-body' }, fields.current.el, fields.new.el, fields.repeat.el, revokeRow, err, ok,
      h('div', { class: 'form-actions' }, btn)));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    ok.hidden = true;
    err.hidden = true;
    for (const f of Object.values(fields)) f.set('');
    const cur = fields.current.input.value, pw1 = fields.new.input.value, pw2 = fields.repeat.input.value;
    if (!cur) { fields.current.set('current: type your current password'); fields.current.input.focus(); return; }
    if (!pw1) { fields.new.set('new: type the new password'); fields.new.input.focus(); return; }
    if (pw1 !== pw2) { fields.repeat.set('The two new passwords differ: type the same one twice.'); fields.repeat.input.focus(); return; }
    btn.disabled = true;
    try {
      const revoked = revoke.checked;
      await post('/me/password', { current: cur, new: pw1, revoke_tokens: revoked });
      form.reset();
      setChildren(ok, h('strong', null, 'Password changed. '),
        revoked ? 'Your other sessions have ended and all your API tokens are revoked; this one stays logged in.'
          : 'Your other sessions have ended; this one stays logged in. Your API tokens keep working: revoke them below if they may be known.');
      if (revoked) window.dispatchEvent(new Event('dd-tokens-changed'));
      ok.hidden = false;
      announce('Password changed');
    } catch (ex) {
      showFieldErrors(ex, fields, err);
    } finally { btn.disabled = false; }
  });
  return form;
}

/* ---------- API tokens ---------- */

function tokensCard(isAlive) {
  const body = h('tbody');
  const empty = h('p', { class: 'empty-text muted tokens-empty', hidden: true }, 'No API token yet.');
  const listErr = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const count = h('span', { class: 'card-count muted' });
  const table = h('div', { class: 'table-wrap' }, h('table', { class: 'data-table tokens-table' },
    h('thead', null, h('tr', null, ['Name', 'Created', 'Last used', 'Status', ''].map((t) => h('th', { scope: 'col', text: t })))), body));
  const name = formField({ id: 'token-name', label: 'Token name', hint: 'What it is for, e.g. "laptop scripts" or "CI". Up to 64 characters.',
    input: h('input', { class: 'input', maxlength: 64, placeholder: 'e.g. laptop scripts', autocomplete: 'off' }) });
  const err = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const created = h('div', { class: 'token-created', 'aria-live': 'polite' });
  const btn = h('button', { type: 'submit', class: 'btn btn-primary', dataset: { action: 'create-token' } }, icon('plus'), 'Create token');
  const form = h('form', { class: 'token-form', novalidate: true }, name.el, err, h('div', { class: 'form-actions' }, btn));
  const el = h('section', { class: 'card account-tokens', 'aria-labelledby': 'tokens-title' },
    h('div', { class: 'card-head' }, h('h2', { class: 'card-title', id: 'tokens-title' }, 'API tokens'), count),
    h('div', { class: 'card-body' },
      h('p', { class: 'muted' }, 'A token lets a script call the API as you, without a password or CSRF header: ',
        h('code', null, 'curl -H \'Authorization: Bearer ddt_…\' ', location.origin, '/api/v1/jobs'),
        '. Tokens do not expire: revoke one you no longer use.'),
      created, table, empty, listErr, form));

  // a password change that revoked every token (passwordCard) redraws the list
  const onRevokedAll = () => { if (isAlive()) load(); else window.removeEventListener('dd-tokens-changed', onRevokedAll); };
  window.addEventListener('dd-tokens-changed', onRevokedAll);

  async function load() {
    try {
      const r = await get('/me/tokens');
      if (!isAlive()) return;
      listErr.hidden = true;
      const tokens = r.tokens || [];
      const live = tokens.filter((t) => !t.revoked).length;
      setText(count, `${live} active`);
      setChildren(body, tokens.map(row));
      table.hidden = !tokens.length;
      empty.hidden = !!tokens.length;
    } catch (e) { if (isAlive()) { setText(listErr, e.message); listErr.hidden = false; } }
  }

  function row(t) {
    const rowErr = h('span', { class: 'field-error', role: 'alert', hidden: true });
    const revoke = t.revoked ? null : h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', dataset: { action: 'revoke-token' },
      'aria-label': `Revoke token ${t.name}` }, 'Revoke');
    if (revoke) {
      revoke.addEventListener('click', async () => {
        const yes = await confirmDialog({
          title: 'Revoke this token?',
          body: h('p', null, 'Scripts using ', h('strong', { text: t.name }), ' will get 401 from now on. This cannot be undone.'),
          confirm: 'Revoke token', danger: true,
        });
        if (!yes) { revoke.focus(); return; }
        revoke.disabled = true;
        try {
          await del(`/me/tokens/${t.id}`);
          toast(`Token "${t.name}" revoked`, 'success');
          await load();
        } catch (e) { setText(rowErr, e.message); rowErr.hidden = false; revoke.disabled = false; }
      });
    }
    return h('tr', { class: t.revoked ? 'token-revoked' : null, dataset: { token: t.id } },
      h('td', { class: 'token-name', text: t.name }),
      h('td', { title: dateTime(t.created_at), text: relTime(t.created_at) }),
      h('td', { title: t.last_used ? dateTime(t.last_used) : 'never used', text: t.last_used ? relTime(t.last_used) : 'never' }),
      h('td', { text: t.revoked ? 'revoked' : 'active' }),
      h('td', { class: 'r' }, revoke, rowErr));
  }

  // The secret, this once: the server keeps only its hash.
  function showSecret(tok) {
    const secret = h('code', { class: 'token-secret', id: 'token-secret', text: tok.secret });
    const copy = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'copy-token' } }, icon('copy'), 'Copy');
    const done = h('button', { type: 'button', class: 'btn btn-small btn-quiet' }, 'I have saved it');
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(tok.secret);
        setChildren(copy, icon('check'), 'Copied');
      } catch {
        // no clipboard (an insecure origin): select the text for Ctrl+C
        const range = document.createRange();
        range.selectNodeContents(secret);
        const sel = getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        setChildren(copy, 'Selected: press Ctrl+C');
      }
    });
    done.addEventListener('click', () => { setChildren(created); name.input.focus(); });
    setChildren(created, h('div', { class: 'alert alert-warn token-once', role: 'status' },
      h('p', null, h('strong', null, 'Copy this token now: '), 'it is shown this once. deepdesk keeps only a hash of it, so it cannot be shown again.'),
      h('p', { class: 'muted', text: `Token "${tok.name}":` }),
      h('div', { class: 'token-secret-row' }, secret, copy, done)));
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.hidden = true;
    name.set('');
    const n = name.input.value.trim();
    if (!n) { name.set('name: give the token a name'); name.input.focus(); return; }
    btn.disabled = true;
    try {
      const r = await post('/me/tokens', { name: n });
      form.reset();
      showSecret(r.token);
      await load();
    } catch (ex) {
      showFieldErrors(ex, { name }, err);
    } finally { btn.disabled = false; }
  });
  load();
  return el;
}
