/**
 * A database outage under load, with three sidecar processes on one
 * PostgreSQL server: verifies run continuously while the server is stopped
 * (fast shutdown: every connection is cut) and started again.
 *
 * While it is down: verify answers 200 `indeterminate` (never 5xx), account
 * calls 503 `service_unavailable`, `/readyz` 503, `/healthz` 200, and no
 * replica exits. Once it is back: every replica becomes ready and allows
 * again without a restart. Nothing acknowledged is lost: every allow a client
 * received has its audit row in the database, and the account's counters and
 * balance match the audit and the calls. The store metrics show it: each
 * replica's `agent_authz_store_errors_total` rises during the outage, and its
 * pool gauge reports in_use, idle and waiting connections throughout.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { specFlow } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { VERIFY_PRICE_MICROS } from '../../../sidecar/decide/billing.js';
import { bundleFor, expectError, verify } from '../decide/helpers.js';
import type { Bundle } from '../decide/helpers.js';
import { newReplicaGroup, platformOn, sameSession, startReplicas } from './replicas.js';

t.setTimeout(180_000);
const pg = await startPostgres(t);
if (pg) {
  const g = await newReplicaGroup(t, pg);
  const db = g.dbUrl.split('/').pop()!;
  const all = await startReplicas(t, g, 3, { env: { SIDECAR_DATABASE_CONNECT_TIMEOUT_MS: '1000', SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS: '2000' } });
  const f = await specFlow(all[0]!.sc, 'outage@example.com');
  const initial = (await pg.admin<{ c: string }>('SELECT credits_micros AS c FROM accounts WHERE email = $1', ['outage@example.com'], db))[0]!.c;
  const bundles: Bundle[] = [];
  for (let i = 0; i < 90; i++) bundles.push(await bundleFor(f, platformOn(all[i % 3]!, f.reg.api_key)));

  const results: { res: Res; phase: string }[] = [];
  let phase = 'before';
  let next = 0;
  let running = true;
  // Four loops, each verifying one bundle after another on the next replica. Each phase may use
  // bundles only up to its cap (the loops wait at it), so a slow stop or a slow metrics read
  // cannot use up, before the outage, the bundles the outage needs.
  const caps: Record<string, number> = { before: 25, stopping: 35, down: 70, after: bundles.length };
  const load = Promise.all(Array.from({ length: 4 }, async () => {
    while (running && next < bundles.length) {
      if (next >= caps[phase]!) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const i = next++;
      const res = await verify(platformOn(all[i % 3]!, f.reg.api_key), bundles[i], 'data:read').catch((err: unknown) => ({ status: 0, body: null, text: String(err), headers: new Headers() }));
      results.push({ res, phase });
      await new Promise((r) => setTimeout(r, 20));
    }
  }));

  /** Each replica's failed-operation count and its pool gauge's states. */
  const storeMetrics = async (r: (typeof all)[number]) => ({
    errors: (await r.metric('agent_authz_store_errors_total')) ?? -1,
    pool: await Promise.all(['in_use', 'idle', 'waiting'].map((state) => r.metric('agent_authz_store_pool_connections', undefined, { state }))),
  });
  const errorsBefore: number[] = [];

  await t.test('the database stops mid-load', async (t) => {
    for (const deadline = Date.now() + 30_000; results.length < 15 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
    for (const r of all) {
      const m = await storeMetrics(r);
      errorsBefore.push(m.errors);
      t.ok(m.errors >= 0, `${r.name}: agent_authz_store_errors_total is exported (${m.errors})`);
      t.ok(m.pool.every((v) => typeof v === 'number' && v >= 0), `${r.name}: the pool gauge reports in_use, idle and waiting (${m.pool.join(', ')})`);
    }
    phase = 'stopping';
    await pg.stop('fast');
    phase = 'down';
    const downAt = results.length;
    for (const deadline = Date.now() + 30_000; results.length < downAt + 15 && next < caps.down! && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const during = results.slice(downAt + 4).map((x) => x.res);
    t.same(all.filter((r) => r.proc.exitCode !== null || r.proc.signalCode !== null).map((r) => `${r.name} exited: ${r.output().slice(-3000)}`), [], 'no replica exited');
    t.ok(during.length >= 8, `${during.length} verifies while the database was down`);
    t.same(during.filter((r) => !(r.status === 200 && r.body?.decision === 'indeterminate')).map((r) => `${r.status} ${r.text.slice(0, 120)}`), [],
      'every verify during the outage: 200 indeterminate');
    for (const r of all) {
      const ready = await fetch(`${r.url}/readyz`);
      t.equal(ready.status, 503, `${r.name}: /readyz 503`);
      t.equal(((await ready.json()) as { reason: string }).reason, 'store_unavailable');
      t.equal((await fetch(`${r.url}/healthz`)).status, 200, `${r.name}: /healthz 200`);
      expectError(t, await sameSession(f.user, r).get('/v1/service/usage/personal'), 503, 'service_unavailable', `${r.name}: an account call`);
    }
    for (const [i, r] of all.entries()) {
      const m = await storeMetrics(r);
      t.ok(m.errors > errorsBefore[i]!, `${r.name}: agent_authz_store_errors_total rose during the outage (${errorsBefore[i]} → ${m.errors})`);
      t.ok(m.pool.every((v) => typeof v === 'number' && v >= 0), `${r.name}: the pool gauge still reports every state (${m.pool.join(', ')})`);
    }
  });

  await t.test('the database is back: service resumes without a restart', async (t) => {
    await pg.start();
    phase = 'after';
    for (const r of all) {
      const deadline = Date.now() + 20_000;
      let status = 0;
      while (status !== 200 && Date.now() < deadline) {
        status = (await fetch(`${r.url}/readyz`)).status;
        if (status !== 200) await new Promise((res) => setTimeout(res, 100));
      }
      t.equal(status, 200, `${r.name}: ready again`);
      const b = await bundleFor(f, platformOn(r, f.reg.api_key));
      const v = await verify(platformOn(r, f.reg.api_key), b, 'data:read');
      t.equal(v.body?.decision, 'allow', `${r.name}: allows again`);
      if (v.body?.decision === 'allow') results.push({ res: v, phase: 'after' });
      t.equal((await sameSession(f.user, r).get('/v1/service/usage/personal')).status, 200, `${r.name}: account calls work`);
    }
    running = false;
    await load;
    for (const r of all) t.equal(r.proc.exitCode, null, `${r.name} never exited`);
    t.notMatch(all.map((r) => r.output()).join('\n'), /uncaught|unhandled/i, 'no uncaught error in any log');
  });

  await t.test('nothing acknowledged was lost', async (t) => {
    const allows = results.filter((x) => x.res.status === 200 && x.res.body?.decision === 'allow');
    t.ok(allows.length >= 15, `${allows.length} allows received`);
    const ids = allows.map((x) => x.res.body.audit_event_id as string);
    const found = await pg.admin<{ id: string }>('SELECT id FROM audit_events WHERE id = ANY($1)', [ids], db);
    t.equal(found.length, ids.length, 'every allow a client received has its audit row');
    const acct = (await pg.admin<{ c: string; calls: number; allows: number }>(
      'SELECT credits_micros AS c, verify_calls AS calls, verify_allows AS allows FROM accounts WHERE email = $1', ['outage@example.com'], db))[0]!;
    const verified = (await pg.admin<{ n: number }>("SELECT COUNT(*)::int AS n FROM audit_events WHERE event_type = 'proof.verified'", [], db))[0]!.n;
    t.ok(Number(acct.allows) >= allows.length, `the allow counter (${acct.allows}) covers every allow received (${allows.length})`);
    t.equal(Number(acct.allows), verified, 'one allow counted per verified audit row (debit and audit committed together)');
    t.equal(Number(acct.c), Number(initial) - Number(acct.calls) * VERIFY_PRICE_MICROS, 'the balance is the credits minus the counted calls');
  });
}
