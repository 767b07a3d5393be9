/**
 * The SQLite store on a real file in a temp dir: WAL mode, recorded
 * migrations, idempotent reopen, and the account / platform / delegation
 * operations the routes rely on (atomic, once-only state changes).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { openSqliteStore, DB_FILE_NAME } from '../../../sidecar/store/index.js';
import type { SqliteStore } from '../../../sidecar/store/index.js';
import { MIGRATIONS } from '../../../sidecar/store/sqlite/migrations.js';
import type {
  ApiKeyRecord, CertificateRecord, ConnectionRecord, DelegationRequestRecord, OutboxEventInput, PlatformRecord,
} from '../../../sidecar/store/types.js';

function tempStore(t: { teardown(fn: () => unknown): void }): { dir: string; file: string; open(): SqliteStore } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-store-'));
  const file = path.join(dir, DB_FILE_NAME);
  const opened: SqliteStore[] = [];
  t.teardown(async () => {
    for (const s of opened) await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, file, open: () => { const s = openSqliteStore({ file }); opened.push(s); return s; } };
}

/** A read-only side connection to look at the file. */
function peek<T>(file: string, fn: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true });
  try { return fn(db); } finally { db.close(); }
}

const ev = (accountId: string, platformId: string, connectionId: string | null, type: string, now = 1): OutboxEventInput => ({
  id: randomUUID(), accountId, platformId, connectionId, eventType: type, bodyEnc: new Uint8Array([1, 2, 3]), createdAt: now,
});

/** An onboarded account with a platform, connection, active key and one agent. */
async function seed(s: SqliteStore, now = 1_000) {
  const email = `${randomUUID()}@example.com`;
  const acct = await s.accounts.findOrCreateAccount(email, randomUUID(), now);
  const p: PlatformRecord = {
    id: randomUUID(), accountId: acct.id, name: 'p', description: '', surfaceType: 'agentic_api', publishState: 'draft',
    defaultAllowedScopes: ['data:read', 'data:write'], callbackUrl: null, callbackDisabledAt: null,
    signingSecretEnc: new Uint8Array([9]), webhookSecretEnc: new Uint8Array([8]), expiresAt: now + 1e9, createdAt: now,
  };
  const c: ConnectionRecord = { id: randomUUID(), platformId: p.id, accountId: acct.id, allowedScopes: p.defaultAllowedScopes, status: 'active', removedAt: null, createdAt: now };
  const k: ApiKeyRecord = { id: randomUUID(), connectionId: c.id, prefix: `aak_${randomUUID().replace(/-/g, '').slice(0, 12)}`, digest: 'd1', status: 'active', validUntil: now + 1e9, createdAt: now };
  t.equal(await s.platforms.createPlatform(p, c, k, ev(acct.id, p.id, c.id, 'connection.created', now), 1), true);
  t.equal(await s.platforms.createPlatform({ ...p, id: randomUUID() }, { ...c, id: randomUUID() }, { ...k, id: randomUUID(), prefix: 'aak_111111111111' }, null, 1), false,
    'the platform limit is enforced inside the transaction');
  const agentId = randomUUID();
  await s.platforms.createAgent({ id: agentId, connectionId: c.id, accountId: acct.id, name: 'a', agentType: 'api_agent', custodyMode: 'custodial', publicKey: '{}', secretEnc: new Uint8Array([7]), createdAt: now });
  return { acct, p, c, k, agentId };
}

function request(accountId: string, connectionId: string, agentId: string, now = 2_000): DelegationRequestRecord {
  return { id: randomUUID(), connectionId, accountId, agentId, requestedScopes: ['data:read'], state: 'pending', certId: null, decidedAt: null, createdAt: now };
}
function cert(r: DelegationRequestRecord, now = 3_000): CertificateRecord {
  return {
    id: `cert-${randomUUID()}`, requestId: r.id, accountId: r.accountId, connectionId: r.connectionId, agentId: r.agentId, approvedScope: ['data:read'],
    constraints: null, certJson: '{}', certSha256: 'h', status: 'approved', issuedAt: now, expiresAt: null, revokedAt: null, revokeReason: null,
  };
}

t.test('WAL mode, migrations recorded, reopening is idempotent', async (t) => {
  const { file, open } = tempStore(t);
  const s1 = open();
  const ping = await s1.ping();
  const latest = MIGRATIONS[MIGRATIONS.length - 1]!.version;
  t.same(ping, { ok: true, schemaVersion: latest, expectedVersion: latest });
  const acct = await s1.accounts.findOrCreateAccount('wal@example.com', randomUUID(), 5);
  t.equal(peek(file, (db) => db.pragma('journal_mode', { simple: true })), 'wal', 'journal_mode=wal is set on the file');
  t.ok(fs.existsSync(`${file}-wal`), 'a -wal file exists while open');
  const rows = peek(file, (db) => db.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all() as { version: number; name: string; applied_at: string }[]);
  t.same(rows.map((r) => [r.version, r.name]), MIGRATIONS.map((m) => [m.version, m.name]), 'one row per migration');
  for (const r of rows) t.ok(!Number.isNaN(Date.parse(r.applied_at)), 'applied_at is a timestamp');
  const tables = peek(file, (db) => (db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as { name: string }[]).map((x) => x.name));
  for (const name of ['accounts', 'login_codes', 'sessions', 'platforms', 'connections', 'api_keys', 'agents', 'delegation_requests', 'certificates', 'challenges', 'audit_events', 'outbox', 'delivery_attempts']) {
    t.ok(tables.includes(name), `table ${name}`);
  }
  await s1.close();

  // Reopen twice: no migration runs again, data survives.
  for (let i = 0; i < 2; i++) {
    const s = open();
    t.same(await s.ping(), { ok: true, schemaVersion: latest, expectedVersion: latest }, `reopen ${i + 1}: ping`);
    t.equal((await s.accounts.getAccount(acct.id))?.email, 'wal@example.com', 'data survives reopen');
    await s.close();
    const again = peek(file, (db) => db.prepare('SELECT version, applied_at FROM schema_migrations ORDER BY version').all());
    t.same(again, rows.map((r) => ({ version: r.version, applied_at: r.applied_at })), 'migration rows unchanged (not re-applied)');
    t.equal(peek(file, (db) => db.pragma('journal_mode', { simple: true })), 'wal');
  }
  const s3 = open();
  t.equal((await s3.accounts.findOrCreateAccount('wal@example.com', randomUUID(), 9)).id, acct.id, 'findOrCreate returns the existing account');
});

t.test('login codes: newest wins, tries are reserved atomically, a code is consumed once', async (t) => {
  const s = tempStore(t).open();
  const email = 'code@example.com';
  const c1 = { id: randomUUID(), email, codeHash: 'h1', attempts: 0, expiresAt: 100, usedAt: null, createdAt: 1 };
  await s.accounts.insertLoginCode(c1);
  const c2 = { ...c1, id: randomUUID(), codeHash: 'h2', createdAt: 2 };
  await s.accounts.insertLoginCode(c2);
  t.equal((await s.accounts.latestLoginCode(email))?.id, c2.id);
  for (let i = 0; i < 5; i++) t.equal(await s.accounts.reserveCodeAttempt(c2.id, 5), true, `try ${i + 1} reserved`);
  t.equal(await s.accounts.reserveCodeAttempt(c2.id, 5), false, 'the sixth is refused');
  await s.accounts.releaseCodeAttempt(c2.id);
  t.equal((await s.accounts.latestLoginCode(email))?.attempts, 4, 'release gives a try back');
  t.equal(await s.accounts.consumeLoginCode(c2.id, 50), true);
  t.equal(await s.accounts.consumeLoginCode(c2.id, 51), false, 'consumed once');
  t.equal((await s.accounts.latestLoginCode(email))?.usedAt, 50);
  t.equal(await s.accounts.latestLoginCode('none@example.com'), undefined);
});

t.test('sessions: a refresh ends the replaced session in the same transaction; completeOnboarding runs once', async (t) => {
  const s = tempStore(t).open();
  const acct = await s.accounts.findOrCreateAccount('sess@example.com', randomUUID(), 1);
  t.equal(acct.onboardingStep, 'profile');
  const s1 = { id: randomUUID(), tokenHash: 't1', accountId: acct.id, expiresAt: 10, absoluteExpiresAt: 100, endedAt: null, createdAt: 1 };
  await s.accounts.createSession(s1);
  await s.accounts.createSession({ ...s1, id: randomUUID(), tokenHash: 't2', createdAt: 5 }, s1.id);
  t.equal((await s.accounts.getSessionByTokenHash('t1'))?.endedAt, 5, 'replaced session ended');
  t.equal((await s.accounts.getSessionByTokenHash('t2'))?.endedAt, null);
  await s.accounts.updateProfile(acct.id, 'A', 'B');
  t.equal((await s.accounts.getAccount(acct.id))?.onboardingStep, 'account_type');
  const v = { accountType: 'individual', rootPublicKey: '{}', rootSecretEnc: new Uint8Array([1]), creditsMicros: 10 };
  t.equal(await s.accounts.completeOnboarding(acct.id, v), true);
  t.equal(await s.accounts.completeOnboarding(acct.id, { ...v, creditsMicros: 99 }), false, 'only once');
  t.equal((await s.accounts.getAccount(acct.id))?.creditsMicros, 10, 'credits granted once');
});

t.test('platforms: create is atomic with its event; rotate keeps grace only for the newest previous key', async (t) => {
  const s = tempStore(t).open();
  const { acct, p, c, k } = await seed(s);
  t.equal(await s.platforms.countPlatforms(acct.id), 1);
  t.same((await s.outbox.listDeliveries({ accountId: acct.id, limit: 10 })).map((d) => d.eventType), ['connection.created']);
  // A failing create (duplicate platform id) leaves no connection, key or event behind.
  const c2 = { ...c, id: randomUUID() };
  await t.rejects(s.platforms.createPlatform(p, c2, { ...k, id: randomUUID(), prefix: 'aak_000000000000', connectionId: c2.id }, ev(acct.id, p.id, c2.id, 'connection.created'), 2));
  t.equal(await s.platforms.getConnection(c2.id), undefined);
  t.equal(await s.platforms.getApiKeyByPrefix('aak_000000000000'), undefined);
  t.equal((await s.outbox.listDeliveries({ accountId: acct.id, limit: 10 })).length, 1);

  const k2: ApiKeyRecord = { ...k, id: randomUUID(), prefix: 'aak_222222222222', digest: 'd2' };
  const prev = await s.platforms.rotateApiKey(c.id, k2, 5_000, (pp) => ev(acct.id, p.id, c.id, `connection.key_rotated:${pp}`));
  t.equal(prev?.prefix, k.prefix);
  t.same(await s.platforms.getApiKeyByPrefix(k.prefix), { ...k, status: 'rotated', validUntil: 5_000 });
  const k3: ApiKeyRecord = { ...k, id: randomUUID(), prefix: 'aak_333333333333', digest: 'd3' };
  await s.platforms.rotateApiKey(c.id, k3, 6_000, (pp) => ev(acct.id, p.id, c.id, `connection.key_rotated:${pp}`));
  t.equal((await s.platforms.getApiKeyByPrefix(k.prefix))?.validUntil, null, 'the older rotated key lost its grace');
  t.same(await s.platforms.getApiKeyByPrefix(k2.prefix), { ...k2, status: 'rotated', validUntil: 6_000 });
  t.equal((await s.platforms.getApiKeyByPrefix(k3.prefix))?.status, 'active');
  const types = (await s.outbox.listDeliveries({ accountId: acct.id, limit: 10 })).map((d) => d.eventType).sort();
  t.same(types, ['connection.created', `connection.key_rotated:${k.prefix}`, `connection.key_rotated:${k2.prefix}`].sort());
});

t.test('platforms: removing a connection removes keys, revokes certificates, denies pending requests, once', async (t) => {
  const s = tempStore(t).open();
  const { acct, p, c, k, agentId } = await seed(s);
  const r1 = request(acct.id, c.id, agentId);
  await s.delegations.createRequest(r1);
  const cert1 = cert(r1);
  t.equal(await s.delegations.approveRequest(r1.id, cert1, null), true);
  const r2 = request(acct.id, c.id, agentId);
  await s.delegations.createRequest(r2);
  const revoked = await s.platforms.removeConnection(c.id, 9_000, (certs) => [
    ...certs.map((x) => ev(acct.id, p.id, c.id, `delegation.revoked:${x.certId}`)), ev(acct.id, p.id, c.id, 'connection.removed'),
  ]);
  t.same(revoked, [{ certId: cert1.id, agentId }]);
  t.same(await s.platforms.getConnection(c.id), { ...c, status: 'removed', removedAt: 9_000 });
  t.same(await s.platforms.getApiKeyByPrefix(k.prefix), { ...k, status: 'removed', validUntil: null });
  const after = await s.delegations.getCertificate(cert1.id);
  t.equal(after?.status, 'revoked');
  t.equal(after?.revokedAt, 9_000);
  t.equal((await s.delegations.getRequest(r2.id))?.state, 'denied');
  t.equal(await s.delegations.activeCertificateForAgent(agentId), undefined);
  t.equal(await s.platforms.removeConnection(c.id, 9_500, () => [ev(acct.id, p.id, c.id, 'connection.removed')]), undefined, 'second removal: no-op');
  t.equal(await s.platforms.rotateApiKey(c.id, { ...k, id: randomUUID(), prefix: 'aak_444444444444' }, null, () => ev(acct.id, p.id, c.id, 'x')), undefined, 'no rotation after removal');
  t.equal(await s.platforms.getApiKeyByPrefix('aak_444444444444'), undefined);
  const types = (await s.outbox.listDeliveries({ accountId: acct.id, limit: 10 })).map((d) => d.eventType).sort();
  t.same(types, ['connection.created', 'connection.removed', `delegation.revoked:${cert1.id}`]);
  t.same(await s.delegations.revokedCertificateIds(), [cert1.id]);
});

t.test('delegations: approve, deny and revoke each happen once', async (t) => {
  const s = tempStore(t).open();
  const { acct, p, c, agentId } = await seed(s);
  const r = request(acct.id, c.id, agentId);
  await s.delegations.createRequest(r);
  t.same(await s.delegations.getRequest(r.id), r);
  const c1 = cert(r);
  t.equal(await s.delegations.approveRequest(r.id, c1, ev(acct.id, p.id, c.id, 'delegation.approved')), true);
  t.equal(await s.delegations.approveRequest(r.id, { ...c1, id: `cert-${randomUUID()}` }, ev(acct.id, p.id, c.id, 'delegation.approved')), false, 'approve twice');
  t.equal(await s.delegations.denyRequest(r.id, 5, ev(acct.id, p.id, c.id, 'delegation.denied')), false, 'deny after approve');
  t.same(await s.delegations.getRequest(r.id), { ...r, state: 'approved', certId: c1.id, decidedAt: c1.issuedAt });
  t.same(await s.delegations.getCertificate(c1.id), c1);
  t.same((await s.delegations.activeCertificateForAgent(agentId))?.id, c1.id);
  t.equal(await s.delegations.revokeCertificate(c1.id, 'done', 7, ev(acct.id, p.id, c.id, 'delegation.revoked')), true);
  t.equal(await s.delegations.revokeCertificate(c1.id, 'again', 8, ev(acct.id, p.id, c.id, 'delegation.revoked')), false, 'revoke twice');
  const rc = await s.delegations.getCertificate(c1.id);
  t.equal(rc?.revokeReason, 'done');
  t.equal(rc?.revokedAt, 7);
  const d = request(acct.id, c.id, agentId);
  await s.delegations.createRequest(d);
  t.equal(await s.delegations.denyRequest(d.id, 9, ev(acct.id, p.id, c.id, 'delegation.denied')), true);
  t.equal(await s.delegations.denyRequest(d.id, 10, ev(acct.id, p.id, c.id, 'delegation.denied')), false);
  t.equal(await s.delegations.approveRequest(d.id, cert(d), null), false, 'approve after deny');
  const types = (await s.outbox.listDeliveries({ accountId: acct.id, limit: 20 })).map((x) => x.eventType).sort();
  t.same(types, ['connection.created', 'delegation.approved', 'delegation.denied', 'delegation.revoked'], 'one event per state change, none for refused ones');
  t.equal((await s.delegations.listRequests(acct.id)).length, 2);
  t.equal((await s.delegations.listCertificates(acct.id)).length, 1);
});

t.test('group commit: one transaction per event-loop turn, a savepoint per unit of work', async (t) => {
  const { Db } = await import('../../../sidecar/store/sqlite/db.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-group-'));
  const txs: boolean[] = [];
  const db = new Db({ file: path.join(dir, 'g.sqlite'), onTransaction: (_s, ok) => txs.push(ok) });
  t.teardown(() => { db.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  db.raw.exec('CREATE TABLE g (k TEXT PRIMARY KEY, v INTEGER NOT NULL)');
  const rows = (): { k: string; v: number }[] => db.all('SELECT k, v FROM g ORDER BY k');
  const insert = (k: string) => () => db.run('INSERT INTO g (k, v) VALUES (?, 1)', k);

  // Three units in one turn: one transaction; the one that throws loses only its own changes.
  const results = await Promise.allSettled([
    db.groupTx(insert('a')),
    db.groupTx(() => { insert('b')(); throw new Error('unit b fails'); }),
    db.groupTx(() => { insert('c')(); return 'c done'; }),
  ]);
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.equal((results[1] as PromiseRejectedResult).reason.message, 'unit b fails');
  t.equal((results[2] as PromiseFulfilledResult<string>).value, 'c done');
  t.same(rows().map((r) => r.k), ['a', 'c'], 'b rolled back to its savepoint, a and c committed');
  t.same(txs, [true], 'one transaction for the three');

  // A constraint error in one unit (the key exists) rolls back that unit only.
  const dup = await Promise.allSettled([db.groupTx(insert('d')), db.groupTx(insert('a')), db.groupTx(insert('e'))]);
  t.same(dup.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e']);

  // COMMIT fails: every unit of the group rejects and nothing of it is written.
  db.fault = (sql) => { if (sql === 'COMMIT') throw new Error('SQLITE_IOERR: disk I/O error'); };
  const failed = await Promise.allSettled([db.groupTx(insert('f')), db.groupTx(insert('g'))]);
  db.fault = undefined;
  t.same(failed.map((r) => r.status), ['rejected', 'rejected']);
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e'], 'nothing of the failed group');
  t.notOk(db.raw.inTransaction, 'rolled back');

  // A group of one is a plain transaction; later turns get their own transactions.
  t.equal(await db.groupTx(() => { insert('h')(); return 7; }), 7);
  await db.groupTx(insert('i'));
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e', 'h', 'i']);

  // Work queued when the connection closes is committed first.
  const late = db.groupTx(insert('j'));
  db.close();
  t.equal(await late, 1, 'flushed by close()');
  t.same(peek(path.join(dir, 'g.sqlite'), (d) => d.prepare('SELECT k FROM g ORDER BY k').all().map((r) => (r as { k: string }).k)), ['a', 'c', 'd', 'e', 'h', 'i', 'j']);
});
