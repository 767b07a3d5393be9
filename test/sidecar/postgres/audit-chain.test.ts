/**
 * The audit chain with several sidecar processes on one PostgreSQL database
 * (issue 25): three replicas append to the same accounts' chains at once
 * (each decision's challenge, present and verify go to three different
 * replicas), and every replica runs the checkpoint job.
 *
 * - Linear: each account's chain is positions 1..n without gaps or repeats,
 *   one row per present and per verify, and `audit verify --database-url`
 *   passes; it also passes while the replicas are writing (its one snapshot
 *   sees rows and heads of the same moment).
 * - Checkpoints from several replicas verify: the replica that made the most
 *   is stopped, the load goes on over the other two, and they sign the new
 *   heads; the replicas' checkpoint counters add up to the stored checkpoints.
 * - The push export runs on every replica too: the collector gets every
 *   event, none twice.
 * - Retention on PostgreSQL: a fourth replica whose clock runs a day ahead
 *   prunes (SIDECAR_AUDIT_RETENTION_DAYS=1; two runs at once) while the others
 *   keep appending; each chain then starts right after a signed anchor and
 *   verifies; without the anchor the verifier reports the lost start.
 */
import t from 'tap';
import type { Test } from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { challenge, pool, verify } from '../decide/helpers.js';
import { verifyCli } from '../audit/helpers.js';
import { startCollector } from '../audit/collector.js';
import { newReplicaGroup, platformOn, startReplica, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(240_000);
const CHECKPOINTS = { SIDECAR_AUDIT_CHECKPOINT_ROWS: '5', SIDECAR_AUDIT_CHECKPOINT_SECONDS: '1' };
const DAY = 86_400_000;

interface Report {
  ok: boolean; rows: number; problems: { accountId: string; kind: string; position: number | null }[];
  accounts: { accountId: string; rows: number; firstPosition: number | null; lastPosition: number | null; signedTo: number | null; problem: unknown }[];
}

const pgc = await startPostgres(t);
if (pgc) {
  const g = await newReplicaGroup(t, pgc);
  const { dbUrl } = g;
  const db = dbUrl.split('/').pop()!;
  const collector = await startCollector();
  t.teardown(() => collector.close());
  // Every replica's exporter polls the store each FLUSH_MS (a few queries per tick): 200 ms keeps the three
  // leasing the same cursors several times a second and the last events exported within the wait, for a
  // quarter of the replicas' and the server's polling CPU at 50 ms.
  const EXPORT = {
    SIDECAR_AUDIT_EXPORT_URL: collector.url, SIDECAR_AUDIT_EXPORT_SECRET: 'x'.repeat(40),
    SIDECAR_AUDIT_EXPORT_FLUSH_MS: '200',
  };
  const all = await startReplicas(t, g, 3, { env: { ...CHECKPOINTS, ...EXPORT } });
  const flows: Flow[] = await Promise.all(all.map((r, i) => specFlow(r.sc, `chain-${i}@example.com`)));
  const accountOf = new Map<Flow, string>();
  for (const f of flows) {
    accountOf.set(f, (await pgc.admin<{ id: string }>('SELECT id FROM accounts WHERE email = $1', [`chain-${flows.indexOf(f)}@example.com`], db))[0]!.id);
  }
  const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> => pgc.admin<T>(text, params, db);
  const rowsOf = async (f: Flow): Promise<number> => Number((await sql<{ n: string }>('SELECT COUNT(*) AS n FROM audit_events WHERE account_id = $1', [accountOf.get(f)]))[0]!.n);
  const verifyDb = async (): Promise<Report & { code: number; stderr: string }> => {
    const r = await verifyCli(['--database-url', dbUrl, '--json'], {});
    return { code: r.code, stderr: r.stderr, ...(r.stdout ? JSON.parse(r.stdout) as Report : { ok: false, rows: 0, problems: [], accounts: [] }) };
  };

  /** `rounds` decisions per account, each one's challenge, present and verify on three different replicas of `on`. */
  const load = async (on: Replica[], rounds: number): Promise<string[]> => {
    const jobs = flows.flatMap((f) => Array.from({ length: rounds }, (_, i) => ({ f, i })));
    return pool(jobs, 9, async ({ f, i }) => {
      const at = (k: number): ReturnType<typeof platformOn> => platformOn(on[(i + k) % on.length]!, f.reg.api_key);
      const pr = await at(1).post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: await challenge(at(0)) });
      if (pr.status !== 200) return `present ${pr.status}`;
      const v = await verify(at(2), pr.body.proof_bundle, 'data:read');
      return v.status === 200 ? String(v.body.decision) : `verify ${v.status}`;
    });
  };
  /** Waits (at most 15 s) until every chain head is signed. */
  const headsSigned = async (t: Test): Promise<void> => {
    const deadline = Date.now() + 15_000;
    let left = -1;
    while (Date.now() < deadline) {
      left = Number((await sql<{ n: string }>('SELECT COUNT(*) AS n FROM audit_chain_heads WHERE checkpoint_position < position'))[0]!.n);
      if (left === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    t.equal(left, 0, 'every chain head is signed by a checkpoint');
  };
  const made = async (r: Replica, kind = 'periodic'): Promise<number> =>
    (await r.metric('agent_authz_audit_checkpoints_total', 'agent_authz_audit_checkpoints_total', { kind })) ?? 0;
  /** How often the collector received each event id. */
  const exported = (): Map<string, number> => {
    const seen = new Map<string, number>();
    for (const r of collector.received) {
      for (const line of r.body.split('\n').filter(Boolean)) {
        const id = (JSON.parse(line) as { event_id: string }).event_id;
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
    }
    return seen;
  };
  /** Waits (at most 15 s) until the collector has every event in the database; asserts it, and that none came twice. */
  const allExported = async (t: Test): Promise<void> => {
    const ids = (await sql<{ id: string }>('SELECT id FROM audit_events')).map((r) => r.id);
    await collector.until(() => { const seen = exported(); return ids.every((id) => seen.has(id)); }, 15_000);
    const seen = exported();
    t.same(ids.filter((id) => !seen.has(id)), [], `the push export (every replica runs it) delivered all ${ids.length} events`);
    t.same([...seen].filter(([, n]) => n > 1), [], 'none twice: an account\'s cursor is leased to one replica at a time');
  };
  const stored = async (kind = 'periodic'): Promise<number> =>
    Number((await sql<{ n: string }>('SELECT COUNT(*) AS n FROM audit_checkpoints WHERE kind = $1', [kind]))[0]!.n);
  /**
   * The checkpoint counters of `rs` (each minus its `base`) and the periodic checkpoints stored since `storedBefore`,
   * read again (at most 10 s) until they agree: a replica counts a checkpoint only once its commit has returned, so a
   * read between the two sees it stored and not yet counted (a CI run: 6 stored, 4 counted).
   */
  const counted = async (rs: Replica[], base: (r: Replica) => number, storedBefore = 0): Promise<{ by: number[]; added: number }> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const by = await Promise.all(rs.map(async (x) => (await made(x)) - base(x)));
      const added = await stored() - storedBefore;
      if (by.reduce((a, b) => a + b, 0) === added || Date.now() > deadline) return { by, added };
      await new Promise((res) => setTimeout(res, 200));
    }
  };

  const ROUNDS = 24;
  let byFirst = new Map<Replica, number>();
  let stopped: Replica | undefined;

  await t.test('three replicas append to the same chains: linear, and verified also while they write', async (t) => {
    const before = await Promise.all(flows.map(rowsOf));
    const loading = load(all, ROUNDS);
    let done = false;
    void loading.finally(() => { done = true; });
    const during: (Report & { code: number; stderr: string })[] = [];
    while (!done && during.length < 8) during.push(await verifyDb());
    const decisions = await loading;
    t.same([...new Set(decisions)], ['allow'], `${decisions.length} decisions, every one an allow`);
    t.ok(during.length >= 1, `audit verify ran ${during.length} time(s) while the replicas wrote`);
    for (const r of during) t.same([r.code, r.problems], [0, []], `verified mid-write (${r.rows} rows; ${r.stderr})`);
    const after = await Promise.all(flows.map(rowsOf));
    t.same(after.map((n, i) => n - before[i]!), flows.map(() => 2 * ROUNDS), 'one row per present and per verify');
    const shape = await sql<{ account_id: string; n: string; lo: string; hi: string; d: string; h: string }>(
      `SELECT e.account_id, COUNT(*) AS n, MIN(chain_position) AS lo, MAX(chain_position) AS hi, COUNT(DISTINCT chain_position) AS d, h.position AS h
         FROM audit_events e JOIN audit_chain_heads h USING (account_id) GROUP BY e.account_id, h.position`);
    t.equal(shape.length, 3, 'three chains');
    for (const s of shape) {
      const n = Number(s.n);
      t.same([s.lo, s.hi, s.d, s.h].map(Number), [1, n, n, n], `account ${s.account_id}: positions 1..${n}, none twice, the head at the end`);
    }
    await headsSigned(t);
    const r = await verifyDb();
    t.same([r.code, r.problems], [0, []], 'audit verify: every link and checkpoint holds');
    t.equal(r.rows, after.reduce((a, b) => a + b, 0), 'it checked every row');
    await allExported(t);
    const first = await counted(all, () => 0);
    byFirst = new Map(all.map((x, i) => [x, first.by[i]!] as const));
    t.equal(first.by.reduce((a, b) => a + b, 0), first.added, `the replicas' checkpoint counters (${first.by.join(' + ')}) add up to the stored checkpoints`);
  });

  await t.test('checkpoints from several replicas verify', async (t) => {
    stopped = [...byFirst.entries()].sort((a, b) => b[1] - a[1])[0]![0];
    t.ok(byFirst.get(stopped)! > 0, `replica ${stopped.name} made ${byFirst.get(stopped)} checkpoint(s)`);
    t.equal(await stopped.stop(), 0, `${stopped.name} stopped cleanly`);
    const rest = all.filter((x) => x !== stopped);
    const storedBefore = await stored();
    t.same([...new Set(await load(rest, 8))], ['allow'], `the load goes on over ${rest.map((x) => x.name).join(' and ')}`);
    await headsSigned(t);
    const { by: byRest, added } = await counted(rest, (x) => byFirst.get(x)!, storedBefore);
    t.ok(added > 0, `${added} new checkpoint(s)`);
    t.equal(byRest.reduce((a, b) => a + b, 0), added, `made by ${rest.map((x, i) => `${x.name} (${byRest[i]})`).join(' and ')}, not by the stopped ${stopped.name}`);
    const r = await verifyDb();
    t.same([r.code, r.problems], [0, []], 'the checkpoints of both periods verify');
    t.ok(r.accounts.every((a) => a.signedTo === a.lastPosition), 'each chain signed to its end');
    await allExported(t);
  });

  await t.test('retention on PostgreSQL leaves a signed anchor, pruning while the others append', async (t) => {
    const rest = all.filter((x) => x !== stopped);
    const R = await startReplica(t, g, 'R', {
      entry: 'test/sidecar/postgres/fixtures/replica.mjs',
      env: { ...CHECKPOINTS, SIDECAR_AUDIT_RETENTION_DAYS: '1', AUTHZ_TEST_CLOCK_OFFSET_MS: String(DAY), AUTHZ_TEST_RETENTION_ON_SIGNAL: '2' },
    });
    const rowsBefore = Number((await sql<{ n: string }>('SELECT COUNT(*) AS n FROM audit_events'))[0]!.n);
    const loading = load(rest, 10);
    // Retention starts once the others are appending (their first rows are in; at most 10 s).
    const rowsNow = async (): Promise<number> =>
      Number((await sql<{ n: string }>('SELECT COUNT(*) AS n FROM audit_events'))[0]!.n);
    const appending = Date.now() + 10_000;
    while (Date.now() < appending && await rowsNow() <= rowsBefore) await new Promise((r) => setTimeout(r, 25));
    // Two runs at once (on two pooled connections), as two replicas' hourly jobs may meet.
    R.proc.kill('SIGUSR2');
    const deadline = Date.now() + 20_000;
    const lines = (): string[] => R.output().match(/\{"test_retention(?:_error)?":.*\}\n/g) ?? [];
    while (lines().length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const results = lines().map((l) => JSON.parse(l) as { test_retention?: { audit: number }; test_retention_error?: string });
    t.equal(results.length, 2, 'both retention runs finished');
    t.same(results.filter((x) => x.test_retention_error), [], 'without an error');
    t.same([...new Set(await loading)], ['allow'], 'the others kept appending meanwhile');
    t.same([...new Set(await load(rest, 2))], ['allow'], 'and after it');
    await headsSigned(t);
    const removed = results.reduce((n, x) => n + (x.test_retention?.audit ?? 0), 0);
    t.ok(removed >= rowsBefore, `${removed} rows older than the cut-off were removed (at least the ${rowsBefore} written before)`);
    const anchors = await sql<{ account_id: string; position: string }>(
      "SELECT account_id, MAX(position) AS position, COUNT(*) AS n FROM audit_checkpoints WHERE kind = 'anchor' GROUP BY account_id");
    t.equal(anchors.length, 3, 'every account has an anchor');
    t.ok((await made(R, 'anchor')) >= 3, `signed by the retention replica (${await made(R, 'anchor')} stored by the two runs)`);
    const r = await verifyDb();
    t.same([r.code, r.problems], [0, []], 'the pruned chains verify');
    for (const a of anchors) {
      const acc = r.accounts.find((x) => x.accountId === a.account_id);
      t.ok(acc && acc.firstPosition === Number(a.position) + 1 && acc.rows > 0,
        `account ${a.account_id}: rows start right after the newest anchor at ${a.position} (${acc?.firstPosition}–${acc?.lastPosition})`);
    }
    const victim = anchors[0]!;
    await sql("DELETE FROM audit_checkpoints WHERE account_id = $1 AND kind = 'anchor'", [victim.account_id]);
    const broken = await verifyDb();
    t.equal(broken.code, 1, 'without its anchor the chain is broken');
    t.same(broken.problems.map((p) => [p.accountId, p.kind, p.position]), [[victim.account_id, 'unanchored_start', 1]], 'the lost start is named');
  });

  await t.test('no replica crashed', async (t) => {
    for (const r of all.filter((x) => x !== stopped)) t.equal(r.proc.exitCode, null, `${r.name} is running`);
  });
}
