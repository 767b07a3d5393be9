/** SqliteOutboxStore and insertOutboxEvent on a real SQLite file. */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { insertOutboxEvent, SqliteOutboxStore } from '../../../sidecar/store/sqlite/outbox.js';
import { Db } from '../../../sidecar/store/sqlite/db.js';
import { AAD } from '../../../sidecar/secrets.js';
import { addPlatform, enqueue, openFixture, row } from './helpers.js';

t.test('insertOutboxEvent: seq = MAX+1, pending, due at createdAt; commits or rolls back with the caller', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const pid = addPlatform(f, 'https://example.com/hook', 's');
  const a = enqueue(f, pid, 1_000);
  const b = enqueue(f, pid, 2_000);
  const seqs = f.db.all<{ id: string; seq: number; state: string; next_attempt_at: number; attempts: number }>(
    'SELECT id, seq, state, next_attempt_at, attempts FROM outbox ORDER BY seq');
  t.same(seqs, [
    { id: a.id, seq: 1, state: 'pending', next_attempt_at: 1_000, attempts: 0 },
    { id: b.id, seq: 2, state: 'pending', next_attempt_at: 2_000, attempts: 0 },
  ]);
  const id = randomUUID();
  t.throws(() => f.db.tx(() => {
    insertOutboxEvent(f.db, { id, accountId: f.accountId, platformId: pid, connectionId: null, eventType: 'x', bodyEnc: new Uint8Array(1), createdAt: 3 });
    throw new Error('state change failed');
  }));
  t.equal(await f.outbox.getDelivery(id), undefined, 'no event without its state change');
  t.throws(() => f.db.tx(() => insertOutboxEvent(f.db, {
    id: a.id, accountId: f.accountId, platformId: pid, connectionId: null, eventType: 'x', bodyEnc: new Uint8Array(1), createdAt: 3,
  })), 'a duplicate id is refused');
});

t.test('claimDue: due, unleased, deliverable platforms only; oldest first; leases', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const ok = addPlatform(f, 'https://example.com/hook', 'secret-1');
  const noUrl = addPlatform(f, null, 's');
  const off = addPlatform(f, 'https://example.com/off', 's');
  f.db.run('UPDATE platforms SET callback_disabled_at = 5 WHERE id = ?', off);
  const later = enqueue(f, ok, 200);
  const first = enqueue(f, ok, 100);
  enqueue(f, noUrl, 50);
  enqueue(f, off, 50);
  const future = enqueue(f, ok, 10_000);

  const c = await f.outbox.claimDue(1_000, 10, 500);
  t.same(c.map((d) => d.id), [first.id, later.id]);
  const d = c[0]!;
  t.same({ ...d, bodyEnc: undefined, webhookSecretEnc: undefined }, {
    id: first.id, platformId: ok, eventType: 'delegation.revoked', attempts: 0, createdAt: 100, callbackUrl: 'https://example.com/hook',
    callbackDisabled: false, bodyEnc: undefined, webhookSecretEnc: undefined,
  });
  t.ok(Buffer.from(f.box.open(d.bodyEnc, AAD.outboxBody(d.id))).equals(first.body));
  t.equal(Buffer.from(f.box.open(d.webhookSecretEnc, AAD.webhookSecret(ok))).toString(), 'secret-1');
  t.equal(row(f, first.id).lease_until, 1_500);
  t.same(await f.outbox.claimDue(1_000, 10, 500), [], 'leased rows are not claimed twice');
  t.same((await f.outbox.claimDue(1_500, 1, 500)).map((x) => x.id), [first.id], 'lease expired: due again; limit respected');
  t.same(await f.outbox.claimDue(1_500, 0, 500), []);
  await f.outbox.release(later.id);
  t.same((await f.outbox.claimDue(1_600, 10, 500)).map((x) => x.id), [later.id], 'released: due at once');
  t.same((await f.outbox.claimDue(10_000, 10, 500)).map((x) => x.id), [first.id, later.id, future.id], 'all leases ran out');
});

t.test('recordAttempt: states, attempt log, delivered_at, 410 disables the platform', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const pid = addPlatform(f, 'https://example.com/hook', 's');
  const ev = enqueue(f, pid, 0);
  await f.outbox.claimDue(0, 1, 1_000);
  await f.outbox.recordAttempt(ev.id, { attempt: 1, attemptedAt: 10, status: 500, error: 'HTTP 500', durationMs: 12.6 }, { state: 'pending', nextAttemptAt: 5_010 });
  let d = (await f.outbox.getDelivery(ev.id))!;
  t.match(d, { state: 'pending', attempts: 1, nextAttemptAt: 5_010, lastStatus: 500, lastError: 'HTTP 500', deliveredAt: null, accountId: f.accountId, seq: 1 });
  t.equal(row(f, ev.id).lease_until, null);
  await f.outbox.recordAttempt(ev.id, { attempt: 2, attemptedAt: 5_010, status: 204, error: null, durationMs: 3 }, { state: 'delivered', nextAttemptAt: 5_010 });
  d = (await f.outbox.getDelivery(ev.id))!;
  t.match(d, { state: 'delivered', attempts: 2, deliveredAt: 5_010, lastStatus: 204, lastError: null });
  t.same(await f.outbox.listAttempts(ev.id), [
    { attempt: 1, attemptedAt: 10, status: 500, error: 'HTTP 500', durationMs: 13 },
    { attempt: 2, attemptedAt: 5_010, status: 204, error: null, durationMs: 3 },
  ]);

  const gone = enqueue(f, pid, 0);
  await f.outbox.recordAttempt(gone.id, { attempt: 1, attemptedAt: 7, status: 410, error: 'x'.repeat(2_000), durationMs: 1 }, { state: 'disabled', nextAttemptAt: 7 });
  t.equal(row(f, gone.id).state, 'disabled');
  t.equal(row(f, gone.id).last_error!.length, 500, 'error text is clipped');
  t.equal(f.db.get<{ d: number }>('SELECT callback_disabled_at AS d FROM platforms WHERE id = ?', pid)!.d, 7);
  const held = enqueue(f, pid, 8);
  t.same(await f.outbox.claimDue(100, 10, 100), [], 'nothing claimed while disabled');
  f.db.run('UPDATE platforms SET callback_url = ?, callback_disabled_at = NULL WHERE id = ?', 'https://example.com/new', pid);
  const again = await f.outbox.claimDue(100, 10, 100);
  t.same(again.map((x) => x.id), [gone.id, held.id], 're-enabled: the parked delivery and the held one are due');
  t.equal(again[0]!.attempts, 1, 'attempt count kept');
  t.equal(row(f, gone.id).state, 'pending', 'the parked delivery is pending again once claimed');
});

t.test('listDeliveries, redeliver, stats', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const p1 = addPlatform(f, 'https://example.com/1', 's');
  const p2 = addPlatform(f, null, 's');
  const evs = [enqueue(f, p1, 10), enqueue(f, p1, 20), enqueue(f, p2, 5), enqueue(f, p1, 30)];
  t.same(await f.outbox.stats(), { pending: 3, oldestPendingAt: 10 }, 'held deliveries (no URL) are not backlog');
  const all = await f.outbox.listDeliveries({ accountId: f.accountId, limit: 10 });
  t.same(all.map((d) => d.seq), [4, 3, 2, 1], 'newest first');
  t.same((await f.outbox.listDeliveries({ accountId: f.accountId, limit: 2, before: 3 })).map((d) => d.seq), [2, 1]);
  t.same((await f.outbox.listDeliveries({ accountId: f.accountId, platformId: p2, limit: 10 })).map((d) => d.id), [evs[2]!.id]);
  t.same(await f.outbox.listDeliveries({ accountId: 'someone-else', limit: 10 }), []);
  await f.outbox.recordAttempt(evs[0]!.id, { attempt: 10, attemptedAt: 50, status: 500, error: 'HTTP 500', durationMs: 1 }, { state: 'dead', nextAttemptAt: 50 });
  t.same((await f.outbox.listDeliveries({ accountId: f.accountId, state: 'dead', limit: 10 })).map((d) => d.id), [evs[0]!.id]);
  t.same(await f.outbox.stats(), { pending: 2, oldestPendingAt: 20 });
  await f.outbox.redeliver(evs[0]!.id, 60);
  t.match(await f.outbox.getDelivery(evs[0]!.id), { state: 'pending', nextAttemptAt: 60, attempts: 10 });
  t.same((await f.outbox.claimDue(60, 10, 10)).map((d) => d.id), [evs[1]!.id, evs[3]!.id, evs[0]!.id], 'ordered by due time');
  t.equal(await f.outbox.getDelivery('nope'), undefined);
});

t.test('durability: committed events survive closing and reopening the database', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const pid = addPlatform(f, 'https://example.com/hook', 's');
  const ev = enqueue(f, pid, 0);
  await f.outbox.claimDue(0, 10, 60_000); // claimed by a process that then "dies"
  f.db.close();
  const db2 = new Db({ file: `${f.dir}/sidecar.db` });
  t.teardown(() => db2.close());
  const store = new SqliteOutboxStore(db2);
  t.same(await store.claimDue(59_999, 10, 1_000), [], 'lease still running');
  t.same((await store.claimDue(60_000, 10, 1_000)).map((d) => d.id), [ev.id], 'due again with its original id after the lease');
});
