/**
 * Configuration: every SIDECAR_* variable is validated once; a bad value is a
 * ConfigError with one line naming the variable; unknown SIDECAR_* variables
 * are refused (removed ones with what replaces them); production needs a master key. Also the real entry point, run
 * as a child process, exits non-zero with that one line.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ConfigError, DEFAULTS, ENV_VARS, MAX_CRYPTO_WORKERS, REMOVED_ENV_VARS, configWith, defaultCryptoWorkers, dollarsToMicros, loadConfig,
} from '../../sidecar/config/index.js';
import { compiledSidecarMain } from '../helpers/compiled-sidecar.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KEY32 = Buffer.alloc(32, 7).toString('base64');

/** Asserts loadConfig(env) throws a one-line ConfigError naming `variable`. */
type Asserts = Pick<typeof t, 'ok' | 'fail' | 'match' | 'notMatch' | 'equal'>;

function refuses(t: Asserts, env: NodeJS.ProcessEnv, variable: string): void {
  try {
    loadConfig(env);
    t.fail(`accepted ${JSON.stringify(env)}`);
  } catch (err) {
    t.ok(err instanceof ConfigError, `${variable}: a ConfigError`);
    const m = (err as Error).message;
    t.ok(m.startsWith(`${variable}:`), `message names ${variable}: ${m}`);
    t.notMatch(m, /\n/, 'one line');
    t.equal((err as Error).name, 'ConfigError');
  }
}

t.test('defaults', async (t) => {
  const c = loadConfig({});
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, DEFAULTS.port);
  t.equal(c.dataDir, path.resolve(DEFAULTS.dataDir));
  t.equal(c.smtpUrl, null);
  t.equal(c.masterKey, null);
  t.equal(c.production, false);
  t.equal(c.insecureCookies, false, 'cookies are Secure by default');
  t.equal(c.webhookAllowInsecure, false);
  t.equal(c.alphaCreditsMicros, 10_000_000);
  t.equal(c.sendCodePerMinute, DEFAULTS.sendCodePerMinute);
  t.equal(c.sendCodeGlobalPerMinute, 600, 'login codes per minute over all addresses');
  t.equal(c.apiKeyGraceSeconds, 0);
  t.same(c.trustProxy, []);
  t.equal(c.metricsListen, null, '/metrics on the main port');
  t.equal(c.cryptoWorkers, Math.min(2, os.availableParallelism()), 'crypto workers: one per core, at most two');
  t.ok(Object.isFrozen(DEFAULTS) || typeof DEFAULTS === 'object');
});

t.test('SIDECAR_METRICS_LISTEN', async (t) => {
  t.same(loadConfig({ SIDECAR_METRICS_LISTEN: '127.0.0.1:9465' }).metricsListen, { host: '127.0.0.1', port: 9465 });
  t.same(loadConfig({ SIDECAR_METRICS_LISTEN: '[::1]:0' }).metricsListen, { host: '::1', port: 0 });
  t.same(loadConfig({ SIDECAR_METRICS_LISTEN: 'localhost:9465' }).metricsListen, { host: 'localhost', port: 9465 });
  t.same(loadConfig({ SIDECAR_METRICS_LISTEN: '' }).metricsListen, null, 'empty means the main port');
  t.same(loadConfig({ SIDECAR_METRICS_LISTEN: '127.0.0.1:8700', SIDECAR_HOST: '0.0.0.0' }).metricsListen, { host: '127.0.0.1', port: 8700 }, 'same port, another address');
  for (const bad of ['9465', '127.0.0.1', '127.0.0.1:', ':9465', '127.0.0.1:65536', '127.0.0.1:-1', '::1:9465', '[::1]9465', 'a b:1', 'http://127.0.0.1:9465', '127.0.0.1:8700']) {
    refuses(t, { SIDECAR_METRICS_LISTEN: bad }, 'SIDECAR_METRICS_LISTEN');
  }
});

t.test('valid values are parsed', async (t) => {
  const c = loadConfig({
    SIDECAR_HOST: '::1', SIDECAR_PORT: '0', SIDECAR_DATA_DIR: '/tmp/x', SIDECAR_SMTP_URL: 'smtps://u:p@mail.example.com:465',
    SIDECAR_MAIL_FROM: 'a <a@example.com>', SIDECAR_MASTER_KEY: KEY32, SIDECAR_INSECURE_COOKIES: 'true',
    SIDECAR_WEBHOOK_ALLOW_INSECURE: '1', SIDECAR_ALPHA_CREDITS: '0.5', SIDECAR_CHALLENGE_TTL_SECONDS: '60',
    SIDECAR_PROOF_FRESHNESS_SECONDS: '30', SIDECAR_API_KEY_GRACE_SECONDS: '600', SIDECAR_SEND_CODE_PER_MINUTE: '3',
    SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE: '1000000', SIDECAR_LOG_LEVEL: 'warn', SIDECAR_BODY_LIMIT_BYTES: '2048', SIDECAR_TRUST_PROXY: '10.0.0.0/8, ::1',
    SIDECAR_AUDIT_RETENTION_DAYS: '30', SIDECAR_CHALLENGE_RETENTION_HOURS: '2', SIDECAR_SHUTDOWN_TIMEOUT_MS: '500',
    UNRELATED_VAR: 'ignored',
  });
  t.equal(c.host, '::1');
  t.equal(c.port, 0);
  t.equal(c.dataDir, '/tmp/x');
  t.equal(c.smtpUrl, 'smtps://u:p@mail.example.com:465');
  t.same(Buffer.from(c.masterKey!), Buffer.alloc(32, 7));
  t.equal(c.insecureCookies, true);
  t.equal(c.webhookAllowInsecure, true);
  t.equal(c.alphaCreditsMicros, 500_000);
  t.equal(c.challengeTtlSeconds, 60);
  t.equal(c.apiKeyGraceSeconds, 600);
  t.equal(c.sendCodePerMinute, 3);
  t.equal(c.sendCodeGlobalPerMinute, 1_000_000);
  t.equal(c.logLevel, 'warn');
  t.equal(c.bodyLimitBytes, 2048);
  t.same(c.trustProxy, ['10.0.0.0/8', '::1']);
  t.equal(c.shutdownTimeoutMs, 500);
  t.equal(loadConfig({ SIDECAR_INSECURE_COOKIES: '0' }).insecureCookies, false);
  t.equal(loadConfig({ SIDECAR_INSECURE_COOKIES: 'false' }).insecureCookies, false);
  t.equal(loadConfig({ SIDECAR_CRYPTO_WORKERS: '0' }).cryptoWorkers, 0, 'no workers: signatures on the main thread');
  t.equal(loadConfig({ SIDECAR_CRYPTO_WORKERS: String(MAX_CRYPTO_WORKERS) }).cryptoWorkers, MAX_CRYPTO_WORKERS);
  t.equal(loadConfig({ SIDECAR_CRYPTO_WORKERS: '' }).cryptoWorkers, defaultCryptoWorkers(), 'empty means the default');
  t.equal(loadConfig({ SIDECAR_PORT: '' }).port, DEFAULTS.port, 'empty means default');
  t.equal(loadConfig({ NODE_ENV: 'production', SIDECAR_MASTER_KEY: KEY32 }).production, true);
});

t.test('a bad value is a one-line ConfigError naming the variable', async (t) => {
  const cases: [NodeJS.ProcessEnv, string][] = [
    [{ SIDECAR_PORT: 'abc' }, 'SIDECAR_PORT'],
    [{ SIDECAR_PORT: '-1' }, 'SIDECAR_PORT'],
    [{ SIDECAR_PORT: '65536' }, 'SIDECAR_PORT'],
    [{ SIDECAR_PORT: '80.5' }, 'SIDECAR_PORT'],
    [{ SIDECAR_PORT: ' 80' }, 'SIDECAR_PORT'],
    [{ SIDECAR_PORT: '1e3' }, 'SIDECAR_PORT'],
    [{ SIDECAR_HOST: 'bad host' }, 'SIDECAR_HOST'],
    [{ SIDECAR_HOST: 'a/b' }, 'SIDECAR_HOST'],
    [{ SIDECAR_SMTP_URL: 'not a url' }, 'SIDECAR_SMTP_URL'],
    [{ SIDECAR_SMTP_URL: 'http://mail.example.com' }, 'SIDECAR_SMTP_URL'],
    [{ SIDECAR_MASTER_KEY: 'short' }, 'SIDECAR_MASTER_KEY'],
    [{ SIDECAR_MASTER_KEY: Buffer.alloc(31).toString('base64') }, 'SIDECAR_MASTER_KEY'],
    [{ SIDECAR_MASTER_KEY: Buffer.alloc(33).toString('base64') }, 'SIDECAR_MASTER_KEY'],
    [{ SIDECAR_MASTER_KEY: KEY32.replace('B', '!') }, 'SIDECAR_MASTER_KEY'],
    [{ SIDECAR_INSECURE_COOKIES: 'yes' }, 'SIDECAR_INSECURE_COOKIES'],
    [{ SIDECAR_INSECURE_COOKIES: '1', SIDECAR_HOST: '0.0.0.0' }, 'SIDECAR_INSECURE_COOKIES'],
    [{ SIDECAR_INSECURE_COOKIES: '1', NODE_ENV: 'production', SIDECAR_MASTER_KEY: KEY32 }, 'SIDECAR_INSECURE_COOKIES'],
    [{ SIDECAR_WEBHOOK_ALLOW_INSECURE: '1', NODE_ENV: 'production', SIDECAR_MASTER_KEY: KEY32 }, 'SIDECAR_WEBHOOK_ALLOW_INSECURE'],
    [{ SIDECAR_WEBHOOK_ALLOW_INSECURE: 'on' }, 'SIDECAR_WEBHOOK_ALLOW_INSECURE'],
    [{ SIDECAR_CRYPTO_WORKERS: String(MAX_CRYPTO_WORKERS + 1) }, 'SIDECAR_CRYPTO_WORKERS'],
    [{ SIDECAR_CRYPTO_WORKERS: 'two' }, 'SIDECAR_CRYPTO_WORKERS'],
    [{ SIDECAR_CRYPTO_WORKERS: '-1' }, 'SIDECAR_CRYPTO_WORKERS'],
    [{ SIDECAR_ALPHA_CREDITS: '-1' }, 'SIDECAR_ALPHA_CREDITS'],
    [{ SIDECAR_ALPHA_CREDITS: '1.1234567' }, 'SIDECAR_ALPHA_CREDITS'],
    [{ SIDECAR_ALPHA_CREDITS: 'ten' }, 'SIDECAR_ALPHA_CREDITS'],
    [{ SIDECAR_CHALLENGE_TTL_SECONDS: '5' }, 'SIDECAR_CHALLENGE_TTL_SECONDS'],
    [{ SIDECAR_PROOF_FRESHNESS_SECONDS: 'x' }, 'SIDECAR_PROOF_FRESHNESS_SECONDS'],
    [{ SIDECAR_API_KEY_GRACE_SECONDS: '86401' }, 'SIDECAR_API_KEY_GRACE_SECONDS'],
    [{ SIDECAR_SEND_CODE_PER_MINUTE: '0' }, 'SIDECAR_SEND_CODE_PER_MINUTE'],
    [{ SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE: '0' }, 'SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE'],
    [{ SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE: '1000001' }, 'SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE'],
    [{ SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE: '1e3' }, 'SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE'],
    [{ SIDECAR_LOG_LEVEL: 'verbose' }, 'SIDECAR_LOG_LEVEL'],
    [{ SIDECAR_BODY_LIMIT_BYTES: '10' }, 'SIDECAR_BODY_LIMIT_BYTES'],
    [{ SIDECAR_TRUST_PROXY: 'proxy.example.com' }, 'SIDECAR_TRUST_PROXY'],
    [{ SIDECAR_AUDIT_RETENTION_DAYS: '-3' }, 'SIDECAR_AUDIT_RETENTION_DAYS'],
    [{ SIDECAR_CHALLENGE_RETENTION_HOURS: '0' }, 'SIDECAR_CHALLENGE_RETENTION_HOURS'],
    [{ SIDECAR_SHUTDOWN_TIMEOUT_MS: '99' }, 'SIDECAR_SHUTDOWN_TIMEOUT_MS'],
  ];
  for (const [env, v] of cases) refuses(t, env, v);
});

t.test('unknown SIDECAR_* variables are refused, naming the variable', async (t) => {
  refuses(t, { SIDECAR_PROT: '8700' }, 'SIDECAR_PROT');
  refuses(t, { SIDECAR_MASTERKEY: KEY32 }, 'SIDECAR_MASTERKEY');
  refuses(t, { SIDECAR_: 'x' }, 'SIDECAR_');
  t.doesNotThrow(() => loadConfig({ SIDECARPORT: 'x', NOT_SIDECAR_PORT: 'abc' }), 'only the SIDECAR_ prefix is reserved');
  t.equal(ENV_VARS.length, new Set(ENV_VARS).size, 'no duplicate variable names');
  for (const v of ENV_VARS) t.doesNotThrow(() => loadConfig({ [v]: '' }), `${v} is known (empty = default)`);
});

t.test('removed settings are refused with what to do instead', async (t) => {
  for (const v of ['SIDECAR_CRYPTO_INLINE_WHEN_IDLE', 'SIDECAR_CRYPTO_INLINE_WHEN_SHARED']) {
    t.notOk((ENV_VARS as readonly string[]).includes(v), `${v} is no setting`);
    for (const value of ['0', '1', '']) {
      refuses(t, { [v]: value }, v);
      t.throws(() => loadConfig({ [v]: value }), /removed: .*SIDECAR_CRYPTO_WORKERS=0/, `${v}=${value}: says it was removed and what replaces it`);
    }
  }
  t.throws(() => loadConfig({ SIDECAR_SQLITE_BINDING: '/x.node' }), /SIDECAR_SQLITE_BINDING.*removed: it only served the benchmark/, 'the benchmark-only binding setting is gone');
  t.same(Object.keys(REMOVED_ENV_VARS).sort(), ['SIDECAR_CRYPTO_INLINE_WHEN_IDLE', 'SIDECAR_CRYPTO_INLINE_WHEN_SHARED', 'SIDECAR_SQLITE_BINDING']);
});

t.test('production without a master key is refused', async (t) => {
  refuses(t, { NODE_ENV: 'production' }, 'SIDECAR_MASTER_KEY');
  refuses(t, { NODE_ENV: 'production', SIDECAR_MASTER_KEY: '' }, 'SIDECAR_MASTER_KEY');
  t.doesNotThrow(() => loadConfig({ NODE_ENV: 'development' }), 'development may use the key file');
});

t.test('dollarsToMicros and configWith', async (t) => {
  t.equal(dollarsToMicros('10'), 10_000_000);
  t.equal(dollarsToMicros('0.000001'), 1);
  t.equal(dollarsToMicros('1.5'), 1_500_000);
  t.equal(dollarsToMicros('1.'), null);
  t.equal(dollarsToMicros('.5'), null);
  t.equal(dollarsToMicros('1e3'), null);
  t.equal(configWith({ port: 1 }).port, 1);
  t.throws(() => configWith({ bogus: 1 } as never), TypeError);
});

t.test('the entry point exits non-zero with one line naming SIDECAR_PORT', async (t) => {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SIDECAR_') && k !== 'NODE_ENV') env[k] = v;
  env.SIDECAR_PORT = 'abc';
  const main = await compiledSidecarMain();
  const child = spawn(process.execPath, [main], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  t.not(code, 0, 'exit status is non-zero');
  t.not(code, null, 'it exited by itself (not killed by the timeout)');
  const lines = stderr.split('\n').filter((l) => l.trim() !== '' && !/ExperimentalWarning|--trace-warnings/.test(l));
  t.equal(lines.length, 1, `one line on stderr: ${JSON.stringify(stderr)}`);
  t.match(lines[0] ?? '', /SIDECAR_PORT/, 'the line names SIDECAR_PORT');
  t.notMatch(stderr, /\n\s+at /, 'no stack trace');
  t.equal(stdout, '', 'nothing on stdout');
});
