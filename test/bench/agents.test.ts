/**
 * The benchmark's agent rows (bench/agents.ts) run end to end on tiny
 * counts, as the measured run runs them: a real sidecar process with the
 * bench's set-up flow, a real MCP server, the plain proxy, a gateway with an
 * MCP route, a forward-auth gateway behind real NGINX, real proofs. The
 * smoke run (test/bench/smoke.test.ts) leaves them out for time; this keeps
 * them working. It checks that every variant answered without errors and
 * that the table prints their rows; the figures themselves are not judged.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { agentComparison, startAgentProcs } from '../../bench/agents.js';
import { AGENT_ROWS } from '../../bench/agents-report.js';
import type { Run } from '../../bench/common.js';
import { setUp, startMailSink } from '../../bench/flow.js';
import { parsePlan } from '../../bench/plan.js';
import { killAll } from '../../bench/procs.js';
import { renderTable } from '../../bench/report.js';
import type { BackendResults, Results } from '../../bench/report.js';
import { freshDir, startSidecar, stopSidecar } from '../../bench/sidecar.js';

t.setTimeout(150_000);

t.test('MCP and forward-auth rows: every variant answers, the table shows them', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-authz-bench-agents-'));
  const mail = await startMailSink();
  t.teardown(async () => {
    killAll();
    await mail.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const results: Results = {
    meta: { date: new Date().toISOString(), smoke: true, full: false, scale: 1, command: 'test', sections: ['gateway'], backends: ['noble'], machine: { nproc: 2, cpuModel: 'test', memGb: 1, loadAvg: [0, 0, 0] }, node: { loadGenerator: process.version }, durationS: 0 },
    backends: {},
  };
  const run: Run = { plan: parsePlan(['--smoke']), mail, tmp, nodeFlags: [], masterKey: crypto.randomBytes(32).toString('base64'), sqlite24: undefined, results };
  const sc = await startSidecar(run, 'noble', freshDir(run, 'agents'));
  t.teardown(() => stopSidecar(sc));
  const s = await setUp(sc.url, mail, 'agents@bench.example');
  const br: BackendResults = { ceiling: { node: process.version, verifyPerSec: 60, verifyUs: 16_000, signPerSec: 30, signUs: 33_000, verifyCpuUs: 16_000, signCpuUs: 33_000, cpuShare: 1 } };
  results.backends.noble = br;
  await agentComparison(run, 'noble', sc, s, br, await startAgentProcs(run, sc, s));
  for (const v of ['mcpPlain', 'mcpGateway', 'nginx', 'nginxAuth'] as const) {
    const r = br.agents?.[v];
    t.ok(r !== undefined, `${v} measured`);
    t.ok((r?.c50.count ?? 0) > 0 && (r?.c1.count ?? 0) > 0, `${v}: requests at c=50 and c=1`);
    t.equal((r?.c50.errors ?? 1) + (r?.c1.errors ?? 1), 0, `${v}: no failed request (${r?.c50.firstError ?? r?.c1.firstError ?? ''})`);
  }
  const table = renderTable(results);
  for (const [label] of AGENT_ROWS) t.match(table, new RegExp(`^\\| ${label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} `, 'm'), `table row "${label}"`);
  t.notMatch(table, /NaN/);
});
