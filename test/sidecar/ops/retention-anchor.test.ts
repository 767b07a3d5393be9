/**
 * Audit retention on a real sidecar's SQLite store leaves a signed anchor
 * (issue 25): after `runRetention` removes the day-old chain prefix, an
 * `anchor` checkpoint signed with the service key sits at the last removed
 * position, the remaining rows start right after it, the anchor metric
 * counts it, and `audit verify --db` on the live file exits 0 with the key
 * pinned. On a copy with the anchor deleted the verifier reports the chain's
 * start as unanchored (exit 1, `unanchored_start` at position 1); with the
 * anchor's head changed too (a forged anchor anchors nothing).
 */
import t from 'tap';
import path from 'node:path';
import Database from 'better-sqlite3';
import { present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { runRetention } from '../../../sidecar/server.js';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { verifyCli } from '../audit/helpers.js';

const DAY = 86_400_000;

async function verify(f: Flow): Promise<void> {
  const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' });
  if (r.status !== 200 || r.body.decision !== 'allow') throw new Error(`verify: ${r.status} ${r.text}`);
}

interface Cp { account_id: string; position: number; head: string; kind: string; key_id: string }

t.test('retention leaves a signed anchor that audit verify accepts, and misses when it is gone', async (t) => {
  const sc = await startSidecar({ auditRetentionDays: 1 });
  t.teardown(() => sc.close());
  const keyId = sc.app.ctx.audit.signer.keyId;
  const f = await specFlow(sc, 'anchor@example.com', { approve: ['data:read'] });
  for (let i = 0; i < 3; i++) await verify(f);
  const accountId = (await f.user.get('/v1/service/identity')).body.account_id as string;
  sc.clock.advance(2 * DAY);
  await verify(f);

  const r = await runRetention(sc.app.ctx);
  t.equal(r.audit, 8, 'the registration\'s two events and the three day-old presents and verifies were removed');
  const file = path.join(sc.dataDir, DB_FILE_NAME);
  const live = new Database(file, { readonly: true });
  t.teardown(() => live.close());
  const anchors = live.prepare("SELECT account_id, position, head, kind, key_id FROM audit_checkpoints WHERE kind = 'anchor'").all() as Cp[];
  t.same(anchors.map((a) => [a.account_id, a.position, a.key_id]), [[accountId, 8, keyId]], 'one anchor, at the last removed position, signed with the service key');
  const first = live.prepare('SELECT chain_position, prev_hash FROM audit_events WHERE account_id = ? ORDER BY chain_position LIMIT 1').get(accountId) as { chain_position: number; prev_hash: string };
  t.same(first, { chain_position: 9, prev_hash: anchors[0]!.head }, 'the remaining chain starts right after the anchor and links to its head');
  const m = await fetch(`${sc.url}/metrics`).then((x) => x.text());
  t.match(m, /agent_authz_audit_checkpoints_total\{kind="anchor"\} 1\b/, 'the anchor is counted');

  const ok = await verifyCli(['--db', file, '--key-id', keyId, '--json']);
  t.equal(ok.code, 0, `the live file verifies: ${ok.stdout}${ok.stderr}`);
  const report = JSON.parse(ok.stdout) as { accounts: { accountId: string; firstPosition: number; lastPosition: number; problem: unknown }[] };
  t.match(report.accounts.find((a) => a.accountId === accountId), { firstPosition: 9, lastPosition: 10, problem: null });

  // A consistent copy of the live database (the online backup API), then the anchor deleted or changed.
  const copy = async (name: string, sql: string): Promise<string> => {
    const dest = path.join(sc.dataDir, `${name}.sqlite`);
    await live.backup(dest);
    const db = new Database(dest);
    try { db.prepare(sql).run(accountId); } finally { db.close(); }
    return dest;
  };
  const gone = await verifyCli(['--db', await copy('no-anchor', "DELETE FROM audit_checkpoints WHERE account_id = ? AND kind = 'anchor'"), '--key-id', keyId, '--json']);
  t.equal(gone.code, 1, 'without the anchor: broken');
  t.same((JSON.parse(gone.stdout) as { problems: { accountId: string; kind: string; position: number }[] }).problems.map((p) => [p.accountId, p.kind, p.position]),
    [[accountId, 'unanchored_start', 1]], 'the start is reported as unanchored');
  const text = await verifyCli(['--db', await copy('no-anchor-text', "DELETE FROM audit_checkpoints WHERE account_id = ? AND kind = 'anchor'")]);
  t.match(text.stdout, /BROKEN at position 1: unanchored_start: the chain starts at position 9 without a signed retention anchor at 8/);
  const forged = await verifyCli(['--db', await copy('forged-anchor', `UPDATE audit_checkpoints SET head = '${'0'.repeat(64)}' WHERE account_id = ? AND kind = 'anchor'`), '--key-id', keyId, '--json']);
  t.equal(forged.code, 1, 'a changed anchor: broken');
  // A forged anchor does not count as one: the first broken position is still the unanchored start.
  t.match(JSON.parse(forged.stdout), { problems: [{ kind: 'unanchored_start', position: 1 }] });

  t.same(await runRetention(sc.app.ctx), { challenges: 0, audit: 0 }, 'a second run removes nothing more');
  t.equal((live.prepare("SELECT count(*) AS n FROM audit_checkpoints WHERE kind = 'anchor'").get() as { n: number }).n, 1, 'and signs no second anchor');
});
