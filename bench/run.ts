/**
 * The benchmark (`npm run bench`; see docs/benchmarks.md). Loopback only,
 * real processes: the sidecar started as users start it (`node --import tsx
 * sidecar/main.ts` with SIDECAR_* variables, a fresh data dir, an in-process
 * SMTP sink), the gateway started with `gateway-plugin/standalone/main.ts --config`,
 * real bundles from present, real SQLite files. This process is the load
 * generator (undici keep-alive pools); the servers are separate processes.
 *
 *   npm run bench                       full run (native + noble; ≤ 11 min)
 *   npm run bench -- --smoke            tiny run for CI (noble; ≤ 15 s)
 *   npm run bench -- --only=verify,gateway --backends=native
 *   npm run bench -- --only=postgres      PostgreSQL vs SQLite, one vs two sidecars, revocation propagation
 *   npm run bench -- --only=verify,authzen  AuthZEN evaluation latency and batch throughput beside verify
 *   npm run bench -- --only=chains        verify under sub-delegation chains of depth 1, 3, 8 ÷ depth 0
 *   npm run bench -- --profile          also profile the sidecar and gateway (--cpu-prof)
 *
 * Prints one table (stdout; progress goes to stderr), writes
 * bench/out/results-<time>.json, bench/out/latest.json, bench/out/chart.svg
 * and, on full runs, docs/benchmarks-chart.svg.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { parsePlan } from './plan.js';
import type { Plan } from './plan.js';
import { NODE24, ROOT, ensureNode24SqliteBinding, node24Available } from '../test/shared/node24.js';
import { killAll, probeNodeFlags } from './procs.js';
import type { Child } from './procs.js';
import { setUp, startMailSink } from './flow.js';
import { evaluateTargets, renderTable, stripSamples } from './report.js';
import { renderSvg } from './chart.js';
import type { BackendResults, Results } from './report.js';
import { gatewayComparison, profileGateway, startGatewayProcs } from './gateway.js';
import { agentComparison, startAgentProcs } from './agents.js';
import { cryptoCeiling, presentAndVerify, profileSidecar } from './verify.js';
import { synchronousRatio } from './durability.js';
import { authzenStep } from './authzen.js';
import { chainsStep } from './chains.js';
import { measureAudit, prepareAudit } from './audit.js';
import type { AuditPrepared } from './audit.js';
import { snapshotBase, storeSections } from './store.js';
import { postgresSection } from './postgres.js';
import type { StoreBase } from './store.js';
import { freshDir, startSidecar, stopSidecar } from './sidecar.js';
import { OUT, log, productNodeFlags, tuningOf } from './common.js';
import type { Run } from './common.js';

function machine(): Results['meta']['machine'] {
  const cpu = /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  return { nproc: os.availableParallelism(), cpuModel: cpu.trim(), memGb: Math.round(os.totalmem() / 2 ** 30), loadAvg: os.loadavg().map((x) => Number(x.toFixed(2))) };
}

async function main(): Promise<number> {
  const started = performance.now();
  let plan: Plan;
  let nodeFlags: string[];
  try {
    plan = parsePlan(process.argv.slice(2));
    nodeFlags = productNodeFlags();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  const watchdog = setTimeout(() => {
    process.stderr.write(`[bench] watchdog: run exceeded ${plan.maxSeconds} s; killing children\n`);
    killAll();
    process.exit(1);
  }, plan.maxSeconds * 1000);
  watchdog.unref();

  const major = Number(process.versions.node.split('.')[0]);
  let backends = plan.backends;
  if (backends.includes('native') && !node24Available()) {
    log('native backend skipped: node_modules/node/bin/node (Node 24 with ml-dsa-65) is not available');
    backends = backends.filter((b) => b !== 'native');
  }
  if (backends.includes('noble') && major >= 24) {
    log('noble backend skipped: the sidecar picks its ML-DSA backend by feature detection, and this Node has native ML-DSA');
    backends = backends.filter((b) => b !== 'noble');
  }
  if (!backends.length) { log('no backend to run'); return 1; }
  try {
    probeNodeFlags(nodeFlags, [process.execPath, ...(backends.includes('native') ? [NODE24] : [])]);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  const tuning = tuningOf();

  fs.mkdirSync(OUT, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-authz-bench-'));
  const mail = await startMailSink();
  const run: Run = {
    plan, mail, tmp, nodeFlags, masterKey: crypto.randomBytes(32).toString('base64'),
    sqlite24: backends.includes('native') ? ensureNode24SqliteBinding(log) : undefined,
    results: {
      meta: {
        date: new Date().toISOString(), smoke: plan.smoke, full: plan.full, scale: plan.scale, command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
        sections: [...plan.sections], backends, machine: machine(), node: { loadGenerator: process.version }, tuning, durationS: 0,
      },
      backends: {},
    },
  };
  let failed = false;
  let storeBase: StoreBase | undefined;
  let storeP: Promise<void> | undefined;
  // Smoke runs do the PostgreSQL step alongside everything else (process start-up dominates a tiny run).
  let pgP = plan.smoke && plan.sections.has('postgres') ? postgresSection(run, backends[0]!) : undefined;
  pgP?.catch(() => undefined);
  try {
    const perBackend = ['crypto', 'present', 'verify', 'audit', 'gateway', 'authzen', 'chains'].some((x) => plan.sections.has(x as never));
    for (const backend of perBackend ? backends : []) {
      const br: BackendResults = {};
      run.results.backends[backend] = br;
      const needSidecar = ['present', 'verify', 'audit', 'gateway', 'authzen', 'chains'].some((x) => plan.sections.has(x as never));
      // Smoke runs start the sidecar while the ceiling loop runs; measured runs keep the ceiling quiet.
      let scP = needSidecar && plan.smoke ? startSidecar(run, backend, freshDir(run, `${backend}-main`)) : undefined;
      scP?.catch(() => undefined);
      // Smoke runs prepare the audit step's two sidecars at once too; measured runs after verify.
      let auditP: Promise<AuditPrepared> | undefined = plan.smoke && plan.sections.has('audit') ? prepareAudit(run, backend, 100) : undefined;
      auditP?.catch(() => undefined);
      let ceiling;
      try {
        ceiling = await cryptoCeiling(run, backend);
      } catch (err) {
        if (scP) await stopSidecar(await scP).catch(() => undefined);
        throw err;
      }
      br.ceiling = ceiling;
      run.results.meta.node[backend] = ceiling.node;
      if (!needSidecar) continue;
      scP ??= startSidecar(run, backend, freshDir(run, `${backend}-main`));
      let sc = await scP;
      try {
        const s = await setUp(sc.url, run.mail, `bench-${backend}@bench.example`);
        if (backend === backends[0] && (plan.sections.has('scaling') || plan.sections.has('webhooks'))) {
          storeBase = snapshotBase(run, sc, s);
          // Smoke runs do the store steps alongside the rest (process start-up dominates a tiny run).
          if (plan.smoke) {
            storeP = storeSections(run, backends[0]!, storeBase);
            storeP.catch(() => undefined);
          }
        }
        log(`${backend}: sidecar pid ${sc.child.pid} ready on ${sc.url}; flow done (agent ${s.agentId})`);
        // Smoke runs start the gateway's servers while present/verify run (startup dominates a tiny run).
        let gwProcs = plan.smoke && plan.sections.has('gateway') ? startGatewayProcs(run, sc, s) : undefined;
        gwProcs?.catch(() => undefined);
        // The agent rows (MCP, forward-auth through NGINX) run with the gateway part, on the primary backend,
        // in measured runs only: a smoke run has no time left for four more servers (test/bench/agents.test.ts runs them).
        const agents = !plan.smoke && plan.sections.has('gateway') && backend === backends[0];
        let agentProcs: ReturnType<typeof startAgentProcs> | undefined;
        try {
          if (plan.sections.has('present') || plan.sections.has('verify')) await presentAndVerify(run, backend, sc, s, br);
          // The price of SIDECAR_SQLITE_SYNCHRONOUS=full, on two fresh sidecars (a measurement, no target).
          // Not in the smoke run: two more sidecars and their bundles do not fit its 60 s budget (bench/durability.ts runs alone).
          if (plan.sections.has('verify') && backend === backends[0] && !plan.smoke) {
            br.synchronousRatio = await synchronousRatio(run, backend, [1, 64], 3, 600);
          }
          if (plan.sections.has('audit')) {
            auditP ??= prepareAudit(run, backend, br.verify?.find((r) => r.concurrency === 64)?.rps ?? br.ceiling!.verifyPerSec);
            await measureAudit(run, await auditP, br);
            auditP = undefined;
          }
          if (plan.sections.has('gateway')) {
            gwProcs ??= startGatewayProcs(run, sc, s);
            await gatewayComparison(run, backend, sc, s, br, await gwProcs);
            gwProcs = undefined;
          }
          if (agents) {
            agentProcs ??= startAgentProcs(run, sc, s);
            await agentComparison(run, backend, sc, s, br, await agentProcs);
            agentProcs = undefined;
          }
          // Last measured step on this sidecar (only the profiles come after): its grant checks add audit rows.
          if (plan.sections.has('authzen')) await authzenStep(run, backend, sc, s, br);
          // Verify under sub-delegation chains of depth 1, 3 and 8 beside the root (its own account holder).
          if (plan.sections.has('chains')) await chainsStep(run, backend, sc, br);
        } finally {
          if (gwProcs) await Promise.all((await gwProcs.catch(() => ({ children: [] as Child[] }))).children.map((c) => c.stop(5000)));
          if (agentProcs) await Promise.all((await agentProcs.catch(() => ({ children: [] as Child[] }))).children.map((c) => c.stop(5000)));
        }
        const primary = backend === backends[0];
        const t = evaluateTargets(run.results, backend);
        const missed = (names: string[]): boolean => t.some((x) => names.includes(x.id) && x.met === false);
        const wantSidecar = plan.profile === 'always' || (plan.profile === 'auto' && primary && missed(['cpu', 'verify-ratio', 'present']));
        const wantGateway = plan.sections.has('gateway') && (plan.profile === 'always' || (plan.profile === 'auto' && primary && missed(['gw-bound', 'gw-latency'])));
        if (wantSidecar && plan.sections.has('verify')) sc = await profileSidecar(run, backend, sc, s, br);
        if (wantGateway) await profileGateway(run, backend, sc, s, br);
      } finally {
        await stopSidecar(sc);
        if (auditP) await auditP.then((a) => Promise.all(a.variants.map((v) => v.close())).then(() => a.collector.close()), () => undefined);
      }
    }
    if (storeP) await storeP;
    else if (plan.sections.has('scaling') || plan.sections.has('webhooks')) await storeSections(run, backends[0]!, storeBase);
    if (plan.sections.has('postgres')) {
      pgP ??= postgresSection(run, backends[0]!);
      const pg = await pgP;
      pgP = undefined;
      if (pg) run.results.postgres = pg;
    }
  } catch (err) {
    failed = true;
    process.stderr.write(`[bench] FAILED: ${(err as Error).stack ?? String(err)}\n`);
  } finally {
    await pgP?.catch(() => undefined);
    killAll();
    await mail.close();
    if (process.env.BENCH_KEEP_TMP) log(`kept the data dirs in ${tmp}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
  run.results.meta.durationS = (performance.now() - started) / 1000;
  run.results.targets = evaluateTargets(run.results, backends[0]!);
  const table = renderTable(run.results);
  const json = JSON.stringify(stripSamples(run.results), null, 2);
  const stamp = run.results.meta.date.replace(/[:.]/g, '-');
  fs.writeFileSync(path.join(OUT, `results-${stamp}${plan.smoke ? '-smoke' : ''}.json`), json);
  fs.writeFileSync(path.join(OUT, 'latest.json'), json);
  fs.writeFileSync(path.join(OUT, 'latest-table.md'), table + '\n');
  const svg = renderSvg(run.results);
  fs.writeFileSync(path.join(OUT, 'chart.svg'), svg);
  // Only an untuned full run speaks for the defaults in docs/.
  if (plan.full && !failed && tuning.length) {
    log(`tuned run (${tuning.join(' ')}): docs/ charts and flame graphs left as they were`);
  } else if (plan.full && !failed) {
    fs.writeFileSync(path.join(ROOT, 'docs/benchmarks-chart.svg'), svg);
    // The primary backend's flame graphs of this run: bench/out/prof-native-gateway/flame.svg → docs/flame-native-gateway.svg.
    for (const f of run.results.backends[backends[0]!]?.profiles?.flames ?? []) {
      fs.copyFileSync(path.join(ROOT, f), path.join(ROOT, 'docs', `${path.basename(path.dirname(f)).replace(/^prof-/, 'flame-')}${path.basename(f).replace(/^flame/, '')}`));
    }
  }
  process.stdout.write(table + '\n');
  log(`done in ${run.results.meta.durationS.toFixed(1)} s; results in ${path.relative(ROOT, OUT)}/latest.json`);
  const errors = Object.values(run.results.backends).flatMap((b) => [...(b.present ?? []), ...(b.verify ?? [])]).reduce((a, r) => a + r.errors, 0);
  if (errors) log(`warning: ${errors} failed requests in the present/verify steps`);
  return failed ? 1 : 0;
}

main().then((code) => {
  killAll();
  process.exit(code);
}, (err: unknown) => {
  process.stderr.write(`[bench] ${(err as Error).stack ?? String(err)}\n`);
  killAll();
  process.exit(1);
});
