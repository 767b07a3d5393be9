/**
 * Serving the console (sidecar/routes/console.ts): the strict CSP and the
 * other security headers, content types, caching (hashed assets immutable,
 * index no-store, ETag revalidation), gzip, the SPA fallback for client
 * routes, 404s for missing files, the /console redirect, SIDECAR_CONSOLE=0,
 * a missing build (503), and the compiled sidecar that `npm start` runs
 * serving it. Needs `npm run build` (which `npm ci` runs).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import t from 'tap';
import Fastify from 'fastify';
import { startSidecar } from '../helpers/sidecar.js';
import { freePort } from '../helpers/net.js';
import { ConfigError, configWith, loadConfig } from '../../sidecar/config/index.js';
import { installErrorHandlers } from '../../sidecar/http/errors.js';
import type { ServiceContext } from '../../sidecar/context.js';
import { CACHE_CONTROL, CONSOLE_CSP, defaultConsoleDir, registerConsoleRoutes } from '../../sidecar/routes/console.js';
import { cleanEnv } from '../sidecar/ops/helpers.js';
import { REPO } from './browser.js';

const BUILT = path.join(REPO, 'dist', 'console', 'index.html');

t.test('the build is where the sidecar looks, with no inline script', async (t) => {
  t.equal(defaultConsoleDir(), path.join(REPO, 'dist', 'console'));
  t.ok(fs.existsSync(BUILT), 'dist/console/index.html exists (npm run build)');
  const html = fs.readFileSync(BUILT, 'utf8');
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'every script has a src');
  t.notMatch(html, /\son[a-z]+=|style=|https?:\/\//i, 'no inline handlers or styles, nothing from another origin');
  t.match(html, /<script type="module" crossorigin src="\/console\/assets\/index-[\w-]+\.js">/);
});

t.test('serving, headers, caching and fallback', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  const index = await fetch(`${sc.url}/console/`);
  t.equal(index.status, 200);
  t.equal(index.headers.get('content-type'), 'text/html; charset=utf-8');
  t.equal(index.headers.get('content-security-policy'), CONSOLE_CSP);
  t.match(CONSOLE_CSP, /frame-ancestors 'none'/);
  t.match(CONSOLE_CSP, /script-src 'self'(;|$)/, 'scripts from the origin only, no unsafe-inline or eval');
  t.notMatch(CONSOLE_CSP, /unsafe|\*|https?:/);
  t.equal(index.headers.get('cache-control'), CACHE_CONTROL.index);
  t.equal(index.headers.get('x-content-type-options'), 'nosniff');
  t.equal(index.headers.get('x-frame-options'), 'DENY');
  t.equal(index.headers.get('referrer-policy'), 'no-referrer');
  t.equal(index.headers.get('etag'), null, 'index is not revalidated: always fetched');
  const html = await index.text();
  const js = /src="\/console\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
  const css = /href="\/console\/(assets\/[^"]+\.css)"/.exec(html)?.[1];
  t.ok(js && css, 'index names a script and a style sheet');

  const a = await fetch(`${sc.url}/console/${js}`, { headers: { 'accept-encoding': 'gzip' } });
  t.equal(a.status, 200);
  t.equal(a.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.equal(a.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  t.equal(a.headers.get('content-encoding'), 'gzip', 'compressed for a client that accepts gzip');
  t.equal(a.headers.get('vary'), 'Accept-Encoding');
  t.equal(a.headers.get('content-security-policy'), CONSOLE_CSP);
  const body = await a.text();
  t.equal(body, fs.readFileSync(path.join(REPO, 'dist', 'console', js!), 'utf8'), 'the built file, byte for byte');
  const etag = a.headers.get('etag');
  t.match(etag, /^"[\w-]+"$/);
  const again = await fetch(`${sc.url}/console/${js}`, { headers: { 'if-none-match': etag! } });
  t.equal(again.status, 304, 'revalidation with the ETag');
  const style = await fetch(`${sc.url}/console/${css}`);
  t.equal(style.headers.get('content-type'), 'text/css; charset=utf-8');

  for (const route of ['requests/5f0c2a9e-1b7d-4c3e-9a51-0d7f9e1c2b3a', 'audit', 'sign-in']) {
    const r = await fetch(`${sc.url}/console/${route}?next=%2Faudit`);
    t.equal(r.status, 200, `/console/${route}: the app`);
    t.equal(await r.text(), html);
    t.equal(r.headers.get('cache-control'), 'no-store');
  }
  const head = await fetch(`${sc.url}/console/`, { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(await head.text(), '');

  for (const missing of ['assets/index-nope.js', 'favicon.ico', 'assets/x']) {
    const r = await fetch(`${sc.url}/console/${missing}`);
    t.equal(r.status, 404, `${missing}: 404`);
    t.equal(((await r.json()) as { error: { code: string } }).error.code, 'route_not_found');
  }
  const traversal = await fetch(`${sc.url}/console/..%2f..%2fpackage.json`);
  t.equal(traversal.status, 404, 'no file outside the build');

  const bare = await fetch(`${sc.url}/console?next=%2Faudit`, { redirect: 'manual' });
  t.equal(bare.status, 308);
  t.equal(bare.headers.get('location'), '/console/?next=%2Faudit');

  const post = await fetch(`${sc.url}/console/`, { method: 'POST' });
  t.equal(post.status, 404, 'only GET and HEAD');
  const api = await fetch(`${sc.url}/v1/auth/session`);
  t.equal(api.status, 401, 'the API is unchanged');
  t.equal(api.headers.get('content-security-policy'), null, 'API answers carry no console headers');
});

t.test('SIDECAR_CONSOLE', async (t) => {
  t.equal(loadConfig({}).consoleEnabled, true, 'on by default');
  t.equal(loadConfig({ SIDECAR_CONSOLE: '0' }).consoleEnabled, false);
  t.equal(loadConfig({ SIDECAR_CONSOLE: 'true' }).consoleEnabled, true);
  t.throws(() => loadConfig({ SIDECAR_CONSOLE: 'off' }), new ConfigError('SIDECAR_CONSOLE: expected 1/true or 0/false, got "off"'));
  const sc = await startSidecar({ consoleEnabled: false });
  t.teardown(() => sc.close());
  for (const p of ['/console/', '/console', '/console/audit']) {
    const r = await fetch(`${sc.url}${p}`, { redirect: 'manual' });
    t.equal(r.status, 404, `${p}: not served`);
    t.equal(((await r.json()) as { error: { code: string } }).error.code, 'route_not_found');
  }
});

t.test('a sidecar without the build answers 503, naming the fix', async (t) => {
  const app = Fastify({ logger: false });
  installErrorHandlers(app);
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'console-empty-'));
  t.teardown(() => { fs.rmSync(empty, { recursive: true, force: true }); return app.close(); });
  const warnings: string[] = [];
  const ctx = { config: configWith({}), log: { warn: (_o: unknown, m: string) => warnings.push(m) } } as unknown as ServiceContext;
  await registerConsoleRoutes(app, ctx, empty);
  const r = await app.inject({ method: 'GET', url: '/console/' });
  t.equal(r.statusCode, 503);
  t.equal(r.json().error.code, 'service_unavailable');
  t.match(r.json().error.message, /npm run build/);
  t.match(warnings.join('\n'), /not built/);
});

t.test('`npm start` (the compiled sidecar) serves the console', async (t) => {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-start-'));
  const child = spawn(process.execPath, ['bin/agent-authz-sidecar.mjs'], {
    cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'],
    env: cleanEnv({ SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir, SIDECAR_LOG_LEVEL: 'error', SIDECAR_CRYPTO_WORKERS: '0' }),
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(async () => {
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  let res: Response | undefined;
  // Start-up only (the compiled sidecar, no tsx): generous, since tap runs files in parallel on shared cores.
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && !res) {
    try { res = await fetch(`http://127.0.0.1:${port}/console/`); } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  t.equal(res?.status, 200, 'http://127.0.0.1:<port>/console/ answers');
  t.match(await res?.text(), /<title>agent-authz console<\/title>/);
  t.equal(res?.headers.get('content-security-policy'), CONSOLE_CSP);
});
