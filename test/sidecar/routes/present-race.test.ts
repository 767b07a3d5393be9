/**
 * Present claims its challenge before signing (issue 20 §4): 200 concurrent
 * presents of one challenge, through the real server, return exactly one
 * bundle and compute exactly one signature (`agent_authz_crypto_tasks_total`
 * with `op="sign"`, over every thread); the other 199 are `400
 * invalid_challenge`. Exactly one `proof.presented` audit row is written, and
 * the one bundle verifies. On SQLite (an in-process sidecar with its crypto
 * workers) and, where PostgreSQL runs, on two replica processes sharing one
 * database, the presents alternating between them (signatures summed).
 */
import t from 'tap';
import type { Test } from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { Client, specFlow, startMailSink, startSidecar } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { auditAll, challenge, expectDecision, expectError, presentRaw, verify } from '../decide/helpers.js';
import { parsePrometheusText } from '../ops/helpers.js';
import { newMasterKey, platformOn, startReplicas } from '../postgres/replicas.js';

t.setTimeout(180_000);
const PRESENTS = 200;

/** Sign tasks counted by the sidecar at `url`, over every thread. */
async function signs(url: string): Promise<number> {
  const fam = parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).get('agent_authz_crypto_tasks_total');
  return (fam?.samples ?? []).filter((s) => s.labels.op === 'sign').reduce((a, s) => a + s.value, 0);
}

/** Fires the presents of one challenge at once over `clients` (round robin) and checks the outcome. */
async function race(t: Test, f: Flow, clients: Client[], urls: string[]): Promise<void> {
  const presented = async (): Promise<number> => (await auditAll(f.user)).filter((e) => e.event_type === 'proof.presented').length;
  const c = await challenge(f.platform);
  const before = { signs: await Promise.all(urls.map(signs)), presented: await presented() };
  const rs = await Promise.all(Array.from({ length: PRESENTS }, (_, i) => presentRaw(f, c, clients[i % clients.length])));
  const won = rs.filter((r) => r.status === 200);
  t.equal(won.length, 1, `${PRESENTS} concurrent presents of one challenge: one bundle`);
  const lost = rs.filter((r) => r.status !== 200);
  t.equal(lost.filter((r) => r.status === 400 && r.body?.error?.code === 'invalid_challenge').length, PRESENTS - 1, 'the others: 400 invalid_challenge');
  if (lost.length > 0) expectError(t, lost[0]!, 400, 'invalid_challenge', 'in the error shape');
  const after = await Promise.all(urls.map(signs));
  const signed = after.reduce((a, n, i) => a + n - before.signs[i]!, 0);
  t.equal(signed, 1, 'exactly one signature computed');
  t.equal(await presented(), before.presented + 1, 'one proof.presented audit row');
  expectDecision(t, await verify(f.platform, won[0]!.body.proof_bundle, 'data:read'), 'allow', 'authorized', undefined, 'the bundle verifies');
  expectError(t, await presentRaw(f, c), 400, 'invalid_challenge', 'the challenge stays spent');
}

t.test('SQLite: one sidecar with its crypto workers', async (t) => {
  // Two workers (the production default on two cores): the presents race across worker threads too.
  const sc = await startSidecar({ cryptoWorkers: 2 });
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'race@example.com');
  await race(t, f, [f.platform], [sc.url]);
  // Again on the main thread (SIDECAR_CRYPTO_WORKERS=0): the claim, not the pool, bounds the work.
  const inline = await startSidecar({ cryptoWorkers: 0 });
  t.teardown(() => inline.close());
  const g = await specFlow(inline, 'race-inline@example.com');
  await race(t, g, [g.platform], [inline.url]);
});

t.test('PostgreSQL: two replicas on one database', async (t) => {
  const pg = await startPostgres(t);
  if (!pg) return;
  const mail = await startMailSink();
  t.teardown(() => mail.close());
  const replicas = await startReplicas(t, { dbUrl: await pg.createDatabase(), masterKey: newMasterKey(), mail }, 2);
  const f = await specFlow(replicas[0]!.sc, 'race-pg@example.com');
  await race(t, f, replicas.map((r) => platformOn(r, f.reg.api_key)), replicas.map((r) => r.url));
});
