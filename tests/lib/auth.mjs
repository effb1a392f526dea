// auth.mjs — what tests of a server with accounts share: accounts made by the
// real CLI (`deepdesk user add`, password from a file), a login that keeps the
// session cookie and CSRF token, and a client that sends both.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from './server.mjs';

export const PASSWORD = 'correct-horse-1';
const TMP = process.env.DEEPDESK_TEST_TMP || tmpdir();

/** A data folder with accounts made by the CLI: {name: role}. */
export function makeAccounts(users) {
  const dir = mkdtempSync(join(TMP, 'deepdesk-auth-'));
  const pwFile = join(dir, 'pw');
  writeFileSync(pwFile, `${PASSWORD}\n`);
  const data = join(dir, 'data');
  for (const [name, role] of Object.entries(users)) {
    execFileSync(BIN, ['user', 'add', name, '--role', role, '--password-file', pwFile, '--data', data]);
  }
  return { dir, data, pwFile };
}

/** The value of the dd_session cookie in a Set-Cookie header. */
export const cookieOf = (setCookie) => /dd_session=([^;]*)/.exec(setCookie || '')?.[1];

export async function login(server, name, password = PASSWORD, headers = {}) {
  const r = await server.api('POST', '/api/v1/login', { name, password }, headers);
  const token = cookieOf(r.headers.get('set-cookie'));
  return { ...r, token, cookie: `dd_session=${token}`, csrf: r.body?.csrf_token };
}

/** A client for one session: every call carries the cookie and the CSRF token. */
export function asUser(server, s) {
  return (method, path, body) => server.api(method, path, body, { cookie: s.cookie, 'x-csrf-token': s.csrf });
}

/** Log in as name and return its client; throws when the login fails. */
export async function userClient(server, name, password = PASSWORD) {
  const s = await login(server, name, password);
  if (s.status !== 200) throw new Error(`login ${name}: ${s.status} ${JSON.stringify(s.body)}`);
  return asUser(server, s);
}
