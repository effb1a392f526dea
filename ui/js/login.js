// login.js — the login page, shown when /api/v1/me answers 401 (accounts on and no
// live session).  One form: name and password.  The server's own message is shown
// as is: it never says which of the two was wrong, and after too many failures it
// says how long to wait (429).  On success onLoggedIn gets the login answer
// ({user, csrf_token, expires_at}); the cookie itself is HttpOnly, set by the server.
import { post, ApiError } from './api.js';
import { h, setChildren, setText } from './dom.js';

/** Show the login form in main.  Returns {destroy}. */
export function mountLogin(main, { onLoggedIn }) {
  document.title = 'Log in · deepdesk';
  const name = h('input', { class: 'input', id: 'login-name', name: 'username', autocomplete: 'username', required: true,
    autocapitalize: 'none', spellcheck: 'false', maxlength: 64 });
  const password = h('input', { class: 'input', id: 'login-password', name: 'password', type: 'password',
    autocomplete: 'current-password', required: true });
  const error = h('p', { class: 'field-error', id: 'login-error', role: 'alert', hidden: true });
  const submit = h('button', { class: 'btn btn-primary', type: 'submit' }, 'Log in');
  let busy = false;

  async function onSubmit(e) {
    e.preventDefault();
    if (busy) return;
    error.hidden = true;
    if (!name.value.trim() || !password.value) {
      setText(error, 'Enter your name and your password.');
      error.hidden = false;
      (name.value.trim() ? password : name).focus();
      return;
    }
    busy = true;
    submit.disabled = true;
    setText(submit, 'Logging in…');
    try {
      const res = await post('/login', { name: name.value.trim(), password: password.value });
      password.value = '';
      onLoggedIn(res);
    } catch (err) {
      setText(error, err instanceof ApiError ? err.message : String(err));
      error.hidden = false;
      password.select();
      password.focus();
    } finally {
      busy = false;
      submit.disabled = false;
      setText(submit, 'Log in');
    }
  }

  const form = h('form', { class: 'card form-card login-card', novalidate: true, onsubmit: onSubmit,
    style: { maxWidth: '420px', margin: '48px auto 0' } },
  h('div', { class: 'card-head' }, h('h1', { class: 'card-title' }, 'Log in to deepdesk')),
  h('div', { class: 'form-body' },
    h('div', { class: 'field' }, h('label', { class: 'field-label', for: name.id }, 'Name'), name),
    h('div', { class: 'field' }, h('label', { class: 'field-label', for: password.id }, 'Password'), password),
    error,
    h('div', { class: 'form-actions' },
      h('p', { class: 'hint muted' }, 'Ask your instructor or admin if you have no account.'), submit)));
  setChildren(main, h('div', { class: 'page' }, form));
  name.focus();
  return { destroy() { main.replaceChildren(); } };
}
