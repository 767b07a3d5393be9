/**
 * Crashes under load: three sidecar processes on one PostgreSQL database,
 * loaders that challenge, present and verify without pause on whichever
 * replicas are up, and `kill -9` of one replica after another (20 times, most
 * with requests in flight on it; each killed one is started again at once, on
 * a new port; the replicas run the compiled sidecar and sign and check on the
 * main thread, which keeps the restarts cheap on two cores). Afterwards: every
 * allow a client received has its audit row, the account's allow counter
 * equals the allows in the audit, and the balance equals the credits minus
 * the counted calls (0 allows without an audit row or a debit).
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { VERIFY_PRICE_MICROS } from '../../../sidecar/decide/billing.js';
import { verify } from '../decide/helpers.js';
import { newReplicaGroup, platformOn, startReplica } from './replicas.js';
import type { Replica } from './replicas.js';

const KILLS = 20;

t.setTimeout(240_000);
const pg = await startPostgres(t);
if (pg) {
  const g = await newReplicaGroup(t, pg);
  const db = g.dbUrl.split('/').pop()!;
  let generation = 0;
  const start = (slot: number): Promise<Replica> =>
    startReplica(t, g, `${String.fromCharCode(65 + slot)}${generation++}`, { env: { SIDECAR_CRYPTO_WORKERS: '0' } });
  const slots: (Replica | null)[] = await Promise.all([0, 1, 2].map(start));
  const f: Flow = await specFlow(slots[0]!.sc, 'crash@example.com');
  const initial = Number((await pg.admin<{ c: string }>('SELECT credits_micros AS c FROM accounts WHERE email = $1', ['crash@example.com'], db))[0]!.c);

  const allowIds: string[] = [];
  const inflight = new Map<Replica, number>();
  let attempts = 0;
  let running = true;
  const live = (): Replica[] => slots.filter((r): r is Replica => r !== null && r.proc.exitCode === null && r.proc.signalCode === null);
  /** One challenge + present + verify on a live replica; errors (a replica died under it) are expected. */
  const once = async (n: number): Promise<void> => {
    const up = live();
    if (up.length === 0) { await new Promise((r) => setTimeout(r, 50)); return; }
    const c = platformOn(up[n % up.length]!, f.reg.api_key);
    attempts++;
    try {
      const ch = await c.post('/v1/service/challenge');
      if (ch.status !== 200) return;
      const pr = await c.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
      if (pr.status !== 200) return;
      const target = up[(n + 1) % up.length]!;
      inflight.set(target, (inflight.get(target) ?? 0) + 1);
      try {
        const v = await verify(platformOn(target, f.reg.api_key), pr.body.proof_bundle, 'data:read');
        if (v.status === 200 && v.body?.decision === 'allow') allowIds.push(v.body.audit_event_id as string);
      } finally {
        inflight.set(target, inflight.get(target)! - 1);
      }
    } catch { /* connection reset by a kill */ }
  };
  // Two loaders: enough to have verifies in flight at every kill, and CPU left on two cores for the restarts.
  const loaders = Promise.all(Array.from({ length: 2 }, async (_, k) => {
    for (let n = k; running; n += 2) await once(n);
  }));

  await t.test(`kill -9 one replica after another, ${KILLS} times, under load`, async (t) => {
    const restarts: Promise<void>[] = [];
    let busyKills = 0;
    const restartMs: number[] = [];
    for (let i = 0; i < KILLS; i++) {
      const slot = i % 3;
      while (slots[slot] === null) await new Promise((r) => setTimeout(r, 20));
      const victim = slots[slot]!;
      // Kill it while a verify is in flight on it (or after 2 s, whatever comes first).
      const deadline = Date.now() + 2_000;
      while ((inflight.get(victim) ?? 0) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      if ((inflight.get(victim) ?? 0) > 0) busyKills++;
      slots[slot] = null;
      await victim.kill9();
      const t0 = Date.now();
      restarts.push(start(slot).then((r) => { slots[slot] = r; restartMs.push(Date.now() - t0); }));
    }
    await Promise.all(restarts);
    await new Promise((r) => setTimeout(r, 500));
    running = false;
    await loaders;
    t.comment(`${KILLS} kills (${busyKills} with verifies in flight on the victim), ${allowIds.length} allows in ${attempts} attempts; restart to ready: median ${restartMs.sort((a, b) => a - b)[restartMs.length >> 1]} ms`);
    t.ok(busyKills >= KILLS / 2, `most kills hit a replica with verifies in flight (${busyKills} of ${KILLS})`);
    t.ok(allowIds.length > 0, 'allows went on between the kills');
  });

  await t.test('0 allows without an audit row or a debit', async (t) => {
    const found = await pg.admin<{ id: string }>('SELECT id FROM audit_events WHERE id = ANY($1)', [allowIds], db);
    t.equal(allowIds.length - found.length, 0, `allows lacking an audit row: ${allowIds.length - found.length} of ${allowIds.length}`);
    const a = (await pg.admin<{ c: string; calls: string; allows: string }>(
      'SELECT credits_micros AS c, verify_calls AS calls, verify_allows AS allows FROM accounts WHERE email = $1', ['crash@example.com'], db))[0]!;
    const verified = (await pg.admin<{ n: number }>("SELECT COUNT(*)::int AS n FROM audit_events WHERE event_type = 'proof.verified'", [], db))[0]!.n;
    t.equal(Number(a.allows), verified, 'the allow counter equals the allows in the audit (debit and audit in one transaction)');
    t.ok(Number(a.allows) >= allowIds.length, 'and covers every allow received');
    t.equal(Number(a.c), initial - Number(a.calls) * VERIFY_PRICE_MICROS, 'the balance is the credits minus every counted call');
  });
}
