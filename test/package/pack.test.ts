/**
 * The root package, `agent-authz` (the sidecar, its CLI and the old subpaths), as a user gets it (issue 19,
 * "A packaging test"; the workspace packages by audience are packages.test.ts's):
 *
 * 1. `npm pack` in a copy of the project (so `prepare` builds dist/ there, as for a fresh
 *    clone, without rewriting the dist/ that other tests read): the tarball holds dist/, bin/,
 *    README, LICENSE and package.json only — no tests, benchmarks, docs, TypeScript sources
 *    outside .d.ts, .tap, data or keys — every `exports` target and bin is in it, and the
 *    package has no install scripts (installing it runs nothing of ours).
 * 2. A fresh consumer app installs the tarball offline from npm's cache (helpers.ts says how).
 * 3. On this machine's Node, on Node 22.12.0 (the engines floor) and on Node 24, under plain
 *    `node`: every public entry point imports, and a CommonJS app require()s each of them; `agent-authz`, `agent-authz/gateway` and
 *    `agent-authz/receiver` load no native addon, no mailer and no post-quantum library
 *    (every module loaded is recorded; the SQLite subpath is the positive control); and a
 *    Fastify app with the gateway plugin answers 401 `proof_required`, with a challenge from a
 *    real sidecar started from the installed package's bin, to a request without a proof;
 *    and the installed sidecar itself runs on that Node, with its compiled crypto workers
 *    signing and checking proofs (installed-sidecar.ts). The sidecar on this machine's Node is started
 *    once: the gateway apps use it, and it is the first of those sidecar checks.
 * 4. `tsc` (NodeNext, strict, skipLibCheck off) type-checks a consumer file that uses the
 *    plugin's option types, the receiver, the SQLite store and the sidecar.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cleanEnv, copyProject, installConsumer, NODES, reportSteps, ROOT, run } from './helpers.js';
import { onboard, remoteSidecar, startMailSink } from '../helpers/sidecar.js';
import type { MailSink } from '../helpers/sidecar.js';
import { exerciseInstalledSidecar, layoutSqliteBindings, startInstalledSidecar, stopInstalledSidecar } from './installed-sidecar.js';
import type { InstalledSidecar } from './installed-sidecar.js';

// Builds better-sqlite3 for Node 22.12.0 and Node 24 on a fresh machine (minutes, once).
t.setTimeout(900_000);
const FIXTURES = path.join(import.meta.dirname, 'fixtures');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-pack-'));
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
const started = Date.now();
reportSteps(t);

// 1. pack ---------------------------------------------------------------------------------
let tarball = '';
let files: string[] = [];
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | Record<string, string>>; bin: Record<string, string>; scripts: Record<string, string>;
};

t.test('the tarball holds what a user runs, and nothing else', async (t) => {
  const source = path.join(work, 'source');
  copyProject(source);
  const packed = await run('npm', ['pack', '--json', '--pack-destination', work, '--loglevel=error'], { cwd: source, timeoutMs: 120_000 });
  if (packed.code !== 0) throw new Error(`npm pack failed:\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  tarball = path.join(work, info!.filename);
  files = info!.files.map((f) => f.path);
  t.ok(files.length > 50, `${files.length} files`);
  const outside = files.filter((f) => !/^(dist|bin)\//.test(f) && !['package.json', 'README.md', 'LICENSE'].includes(f));
  t.same(outside, [], 'only dist/, bin/, package.json, README.md, LICENSE');
  t.same(files.filter((f) => /(^|\/)(test|tests|bench|docs|examples|\.tap|coverage|data)\//.test(f)), [], 'no tests, benchmarks, docs, examples, .tap or data');
  t.same(files.filter((f) => /\.(ts|mts|cts)$/.test(f) && !/\.d\.(ts|mts|cts)$/.test(f)), [], 'no TypeScript sources (only .d.ts)');
  t.same(files.filter((f) => /\.(key|pem|db|sqlite|sqlite-wal|sqlite-shm|env|log|tgz)$|master\.key/.test(f)), [], 'no keys, databases, env files or logs');
  for (const [entry, target] of Object.entries(manifest.exports)) {
    for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
      t.ok(files.includes(file.replace(/^\.\//, '')), `exports["${entry}"] → ${file} is in the tarball`);
    }
  }
  for (const [name, file] of Object.entries(manifest.bin)) t.ok(files.includes(file), `bin ${name} → ${file} is in the tarball`);
  t.ok(files.includes('dist/sidecar/crypto/worker.js'), 'the crypto worker is compiled');
  t.ok(files.includes('dist/console/index.html') && files.some((f) => /^dist\/console\/assets\/.+\.js$/.test(f)), 'the console is built');
  const installScripts = Object.keys(manifest.scripts).filter((s) => /^(pre|post)?install$/.test(s));
  t.same(installScripts, [], 'no install scripts: installing the package runs nothing of ours');
});

// 2. install ------------------------------------------------------------------------------
const app = path.join(work, 'app');

t.test('a fresh app installs the tarball offline', async (t) => {
  // The MCP SDK is the optional peer of agent-authz/client/mcp: the consumer installs it, as an MCP agent would.
  const installed = await installConsumer(app, tarball, ['@types/node', '@modelcontextprotocol/sdk']);
  t.equal(installed.code, 0, `npm ci --offline in the consumer app${installed.code === 0 ? '' : `:\n${installed.stderr}`}`);
  const own = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/agent-authz/package.json'), 'utf8')) as { version: string };
  t.ok(own.version, `agent-authz@${own.version} installed`);
  t.ok(fs.existsSync(path.join(app, 'node_modules/fastify/package.json')), 'fastify (a peer dependency) is installed beside it');
  t.notOk(fs.existsSync(path.join(app, 'node_modules/agent-authz/node_modules/fastify')), 'and not a second copy inside the package');
  for (const dev of ['tsx', 'typescript', 'tap']) t.notOk(fs.existsSync(path.join(app, 'node_modules', dev)), `no ${dev}`);
  for (const f of ['record-loads.mjs', 'import-entries.mjs', 'require-entries.cjs', 'gateway-app.mjs']) fs.copyFileSync(path.join(FIXTURES, f), path.join(app, f));
  await layoutSqliteBindings(app, NODES, (s) => t.comment(s));
});

// 3. run ----------------------------------------------------------------------------------
let sidecarUrl = '';
let apiKey = '';
let mail: MailSink;
/** The installed sidecar on this machine's Node: the gateway apps' sidecar, and the first of the sidecar checks. */
let machineSidecar: InstalledSidecar | undefined;
t.teardown(async () => { await mail?.close(); });
const file = t;
t.test('a sidecar from the installed bin, and a platform API key for the gateway apps', async (t) => {
  mail = await startMailSink();
  machineSidecar = await startInstalledSidecar(t, file, NODES[0]!, app, path.join(work, 'sidecar-data-0'), mail);
  sidecarUrl = machineSidecar.url;
  const user = await onboard(remoteSidecar(sidecarUrl, mail), 'packaging@example.com');
  const reg = await user.post('/v1/service/platforms/personal', { name: 'Packaging test', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] });
  t.equal(reg.status, 200, 'platform registered');
  apiKey = (reg.body as { api_key?: string }).api_key ?? '';
  t.match(apiKey, /\S{8,}/, 'an API key');
});

/** Entry points that must stay light, and the packages they must not load. */
const LIGHT = ['agent-authz', 'agent-authz/gateway', 'agent-authz/receiver', 'agent-authz/client'];
const HEAVY = /\/node_modules\/(better-sqlite3|nodemailer|@noble\/post-quantum)\//;

for (const node of NODES) {
  t.test(`plain node, ${node.name}`, async (t) => {
    const all = await run(node.bin, ['import-entries.mjs'], { cwd: app });
    t.equal(all.code, 0, `every entry point imports${all.code === 0 ? '' : `:\n${all.stderr}`}`);
    const got = JSON.parse(all.stdout || '{}') as { exports?: Record<string, string[]>; version?: string };
    const has = (entry: string, names: string[]) => t.ok(names.every((n) => got.exports?.[entry]?.includes(n)), `${entry} exports ${names.join(', ')}`);
    has('agent-authz', ['ERRORS', 'errorBody', 'isValidScope', 'DECISION_REASONS', 'verifyWebhookSignature', 'VERIFY_PATH']);
    has('agent-authz/gateway', ['agentAuthzGateway', 'default']);
    has('agent-authz/receiver', ['createWebhookReceiver', 'createNodeWebhookHandler', 'webhookFastifyPlugin', 'MemoryDedupStore']);
    has('agent-authz/receiver/sqlite', ['SqliteDedupStore']);
    has('agent-authz/sidecar', ['buildServer', 'loadConfig']);
    has('agent-authz/client', ['createAgentFetch']);
    has('agent-authz/client/mcp', ['createAgentMcpTransport']);
    t.notOk(got.exports?.['agent-authz/receiver']?.includes('SqliteDedupStore'), 'the SQLite store is not on agent-authz/receiver');
    const cjs = await run(node.bin, ['--no-warnings', 'require-entries.cjs'], { cwd: app });
    t.equal(cjs.code, 0, `a CommonJS app require()s every entry point${cjs.code === 0 ? '' : `:\n${cjs.stderr}`}`);
    const required = JSON.parse(cjs.stdout || '{}') as Record<string, string[]>;
    for (const [entry, names] of Object.entries(got.exports ?? {})) t.same(required[entry], names, `require('${entry}') gives the same exports`);

    for (const entry of [...LIGHT, 'agent-authz/receiver/sqlite']) {
      const log = path.join(work, `loads-${path.basename(node.bin)}-${NODES.indexOf(node)}-${entry.replace(/\W/g, '_')}.txt`);
      const r = await run(node.bin, ['--import', './record-loads.mjs', 'import-entries.mjs', entry], { cwd: app, env: cleanEnv({ LOAD_LOG: log }) });
      t.equal(r.code, 0, `${entry} imports with the recorder${r.code === 0 ? '' : `:\n${r.stderr}`}`);
      const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
      t.ok(lines.some((l) => l.includes('/node_modules/agent-authz/dist/')), `${entry}: the recorder saw the package load (${lines.length} modules)`);
      const heavy = lines.filter((l) => HEAVY.test(l) || l.startsWith('native '));
      if (LIGHT.includes(entry)) t.same(heavy, [], `${entry} loads no native addon, mailer or post-quantum library`);
      else t.ok(heavy.some((l) => l.includes('/better-sqlite3/')), `${entry} loads better-sqlite3 (the recorder sees it)`);
    }

    const gw = await run(node.bin, ['gateway-app.mjs'], { cwd: app, env: cleanEnv({ SIDECAR_URL: sidecarUrl, API_KEY: apiKey }) });
    t.equal(gw.code, 0, `the gateway app ran${gw.code === 0 ? '' : `:\n${gw.stderr}`}`);
    const res = JSON.parse(gw.stdout || '{}') as { protected?: { status: number; www: string | null; body: { error?: { code?: string; challenge?: string } } }; public?: { status: number; body: string } };
    t.equal(res.protected?.status, 401, 'a protected route without a proof: 401');
    t.equal(res.protected?.body.error?.code, 'proof_required', 'error.code proof_required');
    t.match(res.protected?.body.error?.challenge, /^[A-Za-z0-9_-]{20,}$/, 'with a challenge from the real sidecar');
    t.match(res.protected?.www, /^ServiceProof realm="agent-authz", scope="data:read", challenge="/, 'and WWW-Authenticate');
    t.same(res.public, { status: 200, body: 'upstream /v1/status' }, 'a public route reaches the upstream');

    if (node === NODES[0]) {
      if (machineSidecar === undefined) throw new Error('the machine\'s sidecar did not start');
      await exerciseInstalledSidecar(t, machineSidecar, mail);
    } else {
      const sc = await startInstalledSidecar(t, t, node, app, path.join(work, `sidecar-data-${NODES.indexOf(node)}`), mail);
      await exerciseInstalledSidecar(t, sc, mail);
      await stopInstalledSidecar(t, sc);
    }
  });
}

// 4. types --------------------------------------------------------------------------------
t.test('tsc (NodeNext, strict, skipLibCheck off) type-checks a consumer', async (t) => {
  fs.copyFileSync(path.join(FIXTURES, 'consumer.ts.txt'), path.join(app, 'consumer.ts'));
  fs.copyFileSync(path.join(FIXTURES, 'consumer.tsconfig.json.txt'), path.join(app, 'tsconfig.json'));
  const r = await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: app });
  t.equal(r.code, 0, `no type errors (and every @ts-expect-error line is one)${r.code === 0 ? '' : `:\n${r.stdout}${r.stderr}`}`);
});

t.test('the installed sidecar on this machine\'s Node stops', async (t) => {
  if (machineSidecar === undefined) throw new Error('the machine\'s sidecar did not start');
  await stopInstalledSidecar(t, machineSidecar);
  t.comment(`packaging test: ${((Date.now() - started) / 1000).toFixed(1)} s`);
});
