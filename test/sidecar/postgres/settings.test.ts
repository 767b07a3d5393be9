/**
 * The database settings (`SIDECAR_DATABASE_*`, sidecar/config/index.ts): the URL
 * selects PostgreSQL and is checked once with messages that name the variable
 * and never the password; a shared database needs SIDECAR_MASTER_KEY; the
 * companions are refused without a URL. No server is needed.
 */
import t from 'tap';
import type { Test } from 'tap';
import { ConfigError, DEFAULTS, loadConfig } from '../../../sidecar/config/index.js';

const KEY = Buffer.alloc(32, 7).toString('base64');
const URL_OK = 'postgres://authz:s3cret-pw@db.example:5432/authz';

function refused(t: Test, env: Record<string, string>, re: RegExp, what: string): void {
  let err: unknown;
  try { loadConfig(env); } catch (e) { err = e; }
  t.ok(err instanceof ConfigError, `${what}: a ConfigError`);
  t.match((err as Error)?.message, re, what);
  t.notMatch((err as Error)?.message ?? '', /s3cret-pw/, `${what}: the password is not in the message`);
}

t.test('without a URL: SQLite, and the companions are refused', async (t) => {
  t.equal(loadConfig({}).database, null);
  refused(t, { SIDECAR_DATABASE_POOL_MAX: '5' }, /^SIDECAR_DATABASE_POOL_MAX: only used with SIDECAR_DATABASE_URL/, 'pool size alone');
  refused(t, { SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: '500' }, /^SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: only used/, 'timeout alone');
});

t.test('a URL selects PostgreSQL, with defaults and bounds', async (t) => {
  const c = loadConfig({ SIDECAR_DATABASE_URL: URL_OK, SIDECAR_MASTER_KEY: KEY });
  t.same(c.database, { url: URL_OK, poolMax: DEFAULTS.databasePoolMax, statementTimeoutMs: DEFAULTS.databaseStatementTimeoutMs, connectTimeoutMs: DEFAULTS.databaseConnectTimeoutMs });
  const d = loadConfig({ SIDECAR_DATABASE_URL: `${URL_OK}?sslmode=require`, SIDECAR_MASTER_KEY: KEY, SIDECAR_DATABASE_POOL_MAX: '25', SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: '1500', SIDECAR_DATABASE_CONNECT_TIMEOUT_MS: '800' });
  t.same([d.database?.poolMax, d.database?.statementTimeoutMs, d.database?.connectTimeoutMs], [25, 1500, 800]);
  t.equal(loadConfig({ SIDECAR_DATABASE_URL: 'postgresql://u:p@h/db?sslmode=verify-full', SIDECAR_MASTER_KEY: KEY }).database?.url, 'postgresql://u:p@h/db?sslmode=verify-full');
  refused(t, { SIDECAR_DATABASE_URL: URL_OK, SIDECAR_MASTER_KEY: KEY, SIDECAR_DATABASE_POOL_MAX: '0' }, /^SIDECAR_DATABASE_POOL_MAX: must be between 1 and 500/, 'pool of 0');
  refused(t, { SIDECAR_DATABASE_URL: URL_OK, SIDECAR_MASTER_KEY: KEY, SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: 'x' }, /^SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: expected an integer/, 'timeout not a number');
});

t.test('every replica needs the same master key: no key file with a shared database', async (t) => {
  refused(t, { SIDECAR_DATABASE_URL: URL_OK }, /^SIDECAR_MASTER_KEY: required when SIDECAR_DATABASE_URL is set/, 'no master key');
});

t.test('bad URLs are refused naming the variable', async (t) => {
  const env = (url: string) => ({ SIDECAR_DATABASE_URL: url, SIDECAR_MASTER_KEY: KEY });
  refused(t, env('not a url'), /^SIDECAR_DATABASE_URL: not a URL/, 'not a URL');
  refused(t, env('mysql://authz:s3cret-pw@h/db'), /^SIDECAR_DATABASE_URL: scheme must be postgres: or postgresql:, got mysql:/, 'another scheme');
  refused(t, env('postgres://authz:s3cret-pw@h:5432/'), /^SIDECAR_DATABASE_URL: missing database name/, 'no database');
  refused(t, env(`${URL_OK}?sslmode=prefer`), /^SIDECAR_DATABASE_URL: sslmode must be one of disable, require, verify-ca, verify-full, got "prefer"/, 'sslmode=prefer');
  refused(t, env(`${URL_OK}?sslmode=allow`), /sslmode must be one of/, 'sslmode=allow');
  refused(t, env(`${URL_OK}?sslmode=verify-ca`), /^SIDECAR_DATABASE_URL: sslmode=verify-ca needs sslrootcert/, 'verify-ca without a CA');
  refused(t, env(`${URL_OK}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem`), /^SIDECAR_DATABASE_URL: sslrootcert file not found: \/nonexistent\/ca.pem/, 'a missing CA file');
});
