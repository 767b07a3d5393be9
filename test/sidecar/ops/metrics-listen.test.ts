/**
 * `SIDECAR_METRICS_LISTEN`: the sidecar, started as users start it (a child
 * process running sidecar/main.ts), serves `/metrics` on the separate
 * listener only — the main port answers 404 for it — keeps the metrics
 * families, answers other paths there with the API's 404 error shape, names
 * the address in its startup log, and closes both listeners on SIGTERM.
 */
import fs from 'node:fs';
import net from 'node:net';
import t from 'tap';
import { exitWithin, parsePrometheusText, spawnSidecar } from './helpers.js';
import { freePort } from '../../helpers/net.js';

async function closed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(true));
  });
}

t.test('metrics on their own listener', async (t) => {
  const metricsPort = await freePort();
  const sc = await spawnSidecar({ env: { SIDECAR_METRICS_LISTEN: `127.0.0.1:${metricsPort}` } });
  t.teardown(async () => {
    sc.kill();
    await sc.exited;
    fs.rmSync(sc.dataDir, { recursive: true, force: true });
  });
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;

  const onMain = await fetch(`${sc.url}/metrics`);
  t.equal(onMain.status, 404, 'the main port no longer serves /metrics');
  const mainBody = await onMain.json() as { error?: { code?: string; status?: number } };
  t.equal(mainBody.error?.status, 404);
  t.match(mainBody.error?.code, /^(route_)?not_found$/, 'in the error shape');

  const r = await fetch(`${metricsUrl}/metrics`);
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const families = parsePrometheusText(await r.text());
  for (const name of ['agent_authz_verify_decisions_total', 'agent_authz_verify_duration_seconds', 'process_cpu_seconds_total']) {
    t.ok(families.has(name), `${name} is served`);
  }

  // Scraped again at once: prom-client's event-loop lag gauges are NaN then; the exposition must still parse.
  for (let i = 0; i < 2; i++) {
    const again = await (await fetch(`${metricsUrl}/metrics`)).text();
    t.doesNotThrow(() => parsePrometheusText(again), `an immediate re-scrape parses strictly (${i + 1})`);
  }

  const other = await fetch(`${metricsUrl}/readyz`);
  t.equal(other.status, 404, 'only /metrics on the metrics listener');
  t.same((await other.json() as { error?: { code?: string } }).error?.code, 'not_found');
  t.equal((await fetch(`${sc.url}/readyz`)).status, 200, 'health stays on the main port');

  const ready = sc.lines.map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return {}; } })
    .find((o) => o.msg === 'agent-authz sidecar ready');
  t.equal(ready?.metrics_listen, `127.0.0.1:${metricsPort}`, 'the startup log names the metrics address');

  sc.child.kill('SIGTERM');
  const exit = await exitWithin(sc, 15_000);
  t.not(exit, null, 'exits within 15 s');
  if (exit !== null) t.equal(exit.code, 0, 'graceful exit');
  t.ok(await closed(metricsPort), 'the metrics listener is closed too');
});
