/**
 * The Dockerfile builds and runs (issue 19), checked without a Docker engine: `docker.ts`
 * replays it — for each stage exactly the files its COPY lines name (the build context
 * filtered by .dockerignore, or another stage's root with --from), then its RUN commands, on
 * the base image's Node (24, the `node@24` devDependency). Its header lists what is not run
 * as written: apt-get (the named tools must exist), mkdir/chown of container paths (applied
 * inside the replayed root), npm offline from the cache, better-sqlite3's prebuilt binary
 * offered locally instead of downloaded.
 *
 * Then both targets start from the runtime file set with their ENTRYPOINT/CMD and ENV, and
 * the `docker run` settings a user gives (`-e`, `-v`, `-p`): loopback host and free ports,
 * SIDECAR_MASTER_KEY (required with NODE_ENV=production), a minimal gateway config at
 * /config/gateway.yaml. Checked: /healthz and /readyz answer 200, each HEALTHCHECK command
 * exits 0, the runtime holds compiled JavaScript and production dependencies only (no tsx, no
 * TypeScript, no sources), the sidecar writes its database to the /data volume, SIGTERM exits
 * 0. And the check can fail: the same replay without `COPY package.json package-lock.json ./`
 * fails at `npm ci`, and without `COPY bin ./bin` or `COPY --from=build /app/dist ./dist` the
 * sidecar target does not start.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DockerIgnore, inRoot, parseDockerfile, replay } from './docker.js';
import type { ReplayOptions, Stage, StageState } from './docker.js';
import { cleanEnv, reportSteps, ROOT, run, startProc, waitFor } from './helpers.js';
import type { Proc } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { ensureNode24SqliteBinding, lockedSqliteVersion, NODE24, SQLITE24_BINDING } from '../shared/node24.js';

t.setTimeout(15 * 60_000);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-docker-'));
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
const DOCKERFILE = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(DOCKERFILE);
reportSteps(t);

t.test('the Dockerfile: a build stage, a runtime, two targets; the context leaves local state out', async (t) => {
  t.same(stages.map((s) => `${s.name}<${s.from}`), ['build<node:24-bookworm-slim', 'runtime<node:24-bookworm-slim', 'gateway<runtime', 'sidecar<runtime'], 'stages');
  t.equal(stages.at(-1)!.name, 'sidecar', 'the sidecar is the default target (the last stage)');
  const ignore = new DockerIgnore(fs.readFileSync(path.join(ROOT, '.dockerignore'), 'utf8'));
  for (const p of ['node_modules/fastify/package.json', 'dist/sidecar/main.js', 'data/master.key', 'sidecar/x/master.key', '.cache/node24-sqlite', '.git/HEAD', 'a/b.db', 'test/package/pack.test.ts', 'x.env', 'agent-authz-0.2.0.tgz']) {
    t.ok(ignore.excludes(p), `.dockerignore excludes ${p}`);
  }
  for (const p of ['src/index.ts', 'sidecar/main.ts', 'bin/agent-authz-sidecar.mjs', 'package.json', 'tsconfig.build.json', 'runtime/shutdown.ts', 'console/vite.config.ts']) {
    t.notOk(ignore.excludes(p), `.dockerignore keeps ${p}`);
  }
});

/** The local prebuild of better-sqlite3 for Node 24: the binary prebuild-install would download. */
function localPrebuild(): string {
  ensureNode24SqliteBinding((s) => t.comment(s), { quiet: true });
  const abi = spawnSync(NODE24, ['-p', 'process.versions.modules'], { encoding: 'utf8' }).stdout.trim();
  const dir = path.join(work, 'prebuilds');
  const staging = path.join(work, 'prebuild-staging');
  fs.mkdirSync(path.join(staging, 'build/Release'), { recursive: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(SQLITE24_BINDING, path.join(staging, 'build/Release/better_sqlite3.node'));
  const file = path.join(dir, `better-sqlite3-v${lockedSqliteVersion()}-node-v${abi}-${process.platform}-${process.arch}.tar.gz`);
  const r = spawnSync('tar', ['-czf', file, '-C', staging, 'build'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tar: ${r.stderr}`);
  return dir;
}

const options = (): ReplayOptions => ({
  context: ROOT,
  workDir: work,
  nodeFor: (major) => {
    if (major !== 24) throw new Error(`no Node ${major} here (the node@24 devDependency is Node 24)`);
    return NODE24;
  },
  baseEnv: cleanEnv(),
  runEnv: { npm_config_offline: 'true', npm_config_better_sqlite3_local_prebuilds: prebuilds, npm_config_loglevel: 'error' },
  log: (s) => t.comment(s),
});
const prebuilds = localPrebuild();

/** A container path or value: absolute paths under the replayed root's top-level folders go there. */
function mapped(state: StageState, value: string): string {
  const first = value.split('/')[1];
  return value.startsWith('/') && first !== undefined && fs.existsSync(path.join(state.root, first)) ? inRoot(state, value) : value;
}

/** Starts a target: ENTRYPOINT + CMD in WORKDIR with ENV (mapped), plus the `docker run` settings. */
function startTarget(state: StageState, settings: Record<string, string>): Proc {
  const [cmd, ...args] = [...state.entrypoint, ...state.cmd].map((v) => mapped(state, v));
  if (cmd !== 'node') throw new Error(`${state.name}: the command is ${cmd}, expected plain node`);
  const env: NodeJS.ProcessEnv = { PATH: `${path.dirname(NODE24)}${path.delimiter}${process.env.PATH ?? ''}`, HOME: os.tmpdir() };
  for (const [k, v] of Object.entries({ ...state.env, ...settings })) env[k] = mapped(state, v);
  return startProc(NODE24, args, { cwd: inRoot(state, state.workdir), env });
}

/** Runs a stage's HEALTHCHECK command (with the target's env); resolves to its exit code. */
async function healthcheck(state: StageState, env: Record<string, string>, port: number): Promise<number | null> {
  const [cmd, ...args] = state.healthcheck;
  if (cmd !== 'node') throw new Error(`${state.name}: HEALTHCHECK runs ${cmd}`);
  // The container's own port is 8080 (gateway); here it is the replay's free port.
  const r = await run(NODE24, args.map((a) => a.replace(':8080/', `:${port}/`)), { cwd: inRoot(state, state.workdir), env: cleanEnv({ ...state.env, ...env }) });
  return r.code;
}

let states = new Map<string, StageState>();

t.test('replay: every stage builds from exactly its COPY lines and RUN commands', async (t) => {
  const started = Date.now();
  states = await replay(stages, options());
  t.comment(`replayed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const runtime = states.get('runtime')!;
  const app = inRoot(runtime, '/app');
  t.equal(runtime.workdir, '/app');
  t.equal(runtime.user, 'node', 'runs as the unprivileged node user');
  t.same(runtime.owners, { '/data': 'node:node' }, '/data belongs to node');
  t.equal(runtime.env.NODE_ENV, 'production');
  for (const f of ['dist/sidecar/main.js', 'dist/gateway-plugin/standalone/main.js', 'dist/sidecar/crypto/worker.js', 'dist/console/index.html', 'bin/agent-authz-sidecar.mjs', 'bin/agent-authz-gateway.mjs', 'package.json']) {
    t.ok(fs.existsSync(path.join(app, f)), `the runtime has ${f}`);
  }
  t.ok(fs.existsSync(path.join(app, 'node_modules/fastify/package.json')), 'fastify (a peer dependency) survived the prune');
  t.ok(fs.existsSync(path.join(app, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')), 'better-sqlite3 has its binary');
  for (const dev of ['tsx', 'typescript', 'tap', '@types/node', 'esbuild', 'node', 'node22', 'fast-check']) {
    t.notOk(fs.existsSync(path.join(app, 'node_modules', dev, 'package.json')), `no ${dev} (a dev dependency)`);
  }
  const top = fs.readdirSync(app).sort();
  t.same(top, ['bin', 'dist', 'node_modules', 'package.json'], 'the app folder: bin, dist, node_modules, package.json');
  const sources = fs.readdirSync(path.join(app, 'dist'), { recursive: true }).map(String).filter((f) => /\.ts$/.test(f) && !/\.d\.ts$/.test(f));
  t.same(sources, [], 'no TypeScript sources, only compiled JavaScript and .d.ts');
});

t.test('both targets start from the runtime file set and answer /healthz', async (t) => {
  const sidecar = states.get('sidecar');
  const gateway = states.get('gateway');
  if (sidecar === undefined || gateway === undefined) {
    t.fail('the replay did not finish');
    return;
  }
  t.same(sidecar.volumes, ['/data'], 'the sidecar declares the /data volume');
  t.same(gateway.expose, ['8080', '9464'], 'the gateway exposes 8080 and 9464');
  t.same([...gateway.entrypoint, ...gateway.cmd], ['node', 'bin/agent-authz-gateway.mjs', '--config', '/config/gateway.yaml']);
  t.same(sidecar.cmd, ['node', 'bin/agent-authz-sidecar.mjs']);

  const sidecarPort = await freePort();
  const sidecarSettings = { SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(sidecarPort), SIDECAR_MASTER_KEY: randomBytes(32).toString('base64') };
  const sc = startTarget(sidecar, sidecarSettings);
  t.teardown(() => sc.stop());
  const scUrl = `http://127.0.0.1:${sidecarPort}`;
  await waitFor(`${scUrl}/healthz`, sc);
  await waitFor(`${scUrl}/readyz`, sc);
  t.pass('sidecar: /healthz and /readyz 200');
  const consolePage = await fetch(`${scUrl}/console/`);
  t.equal(consolePage.status, 200, 'sidecar: the console is served from the image');
  t.match(await consolePage.text(), /<script type="module"[^>]*src="\/console\/assets\//, 'with its built scripts');
  t.equal(await healthcheck(sidecar, sidecarSettings, sidecarPort), 0, 'sidecar: its HEALTHCHECK command exits 0');
  t.ok(fs.readdirSync(inRoot(sidecar, '/data')).some((f) => /\.(db|sqlite)$/.test(f)), 'the database is on the /data volume');
  t.match(sc.output(), /"mldsa_backend":"native"/, 'on Node 24: native ML-DSA-65');

  const gwPort = await freePort();
  fs.writeFileSync(inRoot(gateway, '/config/gateway.yaml'), [
    `upstream_url: http://127.0.0.1:${await freePort()}`,
    `sidecar_url: ${scUrl}`,
    'api_key_env: GATEWAY_API_KEY',
    'routes:',
    '  - { method: GET, path: /v1/status, public: true }',
    `listen: { host: 127.0.0.1, port: ${gwPort} }`,
    'metrics: false',
    '',
  ].join('\n'));
  const gwSettings = { GATEWAY_API_KEY: 'aak_docker_replay_key' };
  const gw = startTarget(gateway, gwSettings);
  t.teardown(() => gw.stop());
  await waitFor(`http://127.0.0.1:${gwPort}/healthz`, gw);
  await waitFor(`http://127.0.0.1:${gwPort}/readyz`, gw);
  t.pass('gateway: /healthz and /readyz 200 (the sidecar is ready)');
  t.equal(await healthcheck(gateway, gwSettings, gwPort), 0, 'gateway: its HEALTHCHECK command exits 0');

  t.equal(await gw.stop(), 0, 'gateway: SIGTERM exits 0');
  t.equal(await sc.stop(), 0, 'sidecar: SIGTERM exits 0');
});

/** The Dockerfile without the line `line` (exactly as written). */
function without(line: string): Stage[] {
  if (!DOCKERFILE.split('\n').includes(line)) throw new Error(`the Dockerfile has no line ${JSON.stringify(line)}`);
  return parseDockerfile(DOCKERFILE.split('\n').filter((l) => l !== line).join('\n'));
}

t.test('the replay fails when a COPY line is missing', async (t) => {
  await t.rejects(replay(without('COPY package.json package-lock.json ./'), { ...options(), until: 'build' }),
    /line \d+: RUN npm ci .* failed/, 'without the package files: the build stage fails at npm ci');
  const build = states.get('build');
  if (build === undefined) {
    t.fail('the replay did not finish');
    return;
  }
  for (const line of ['COPY bin ./bin', 'COPY --from=build /app/dist ./dist']) {
    const mutated = await replay(without(line), { ...options(), given: new Map([['build', build]]) });
    const port = await freePort();
    const proc = startTarget(mutated.get('sidecar')!, { SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_MASTER_KEY: randomBytes(32).toString('base64') });
    t.teardown(() => proc.stop());
    await t.rejects(waitFor(`http://127.0.0.1:${port}/healthz`, proc, { timeoutMs: 15_000 }), /exited/, `without ${line}: the sidecar target does not start`);
    t.match(proc.output(), /Cannot find module|ERR_MODULE_NOT_FOUND/, 'a module is missing');
  }
});
