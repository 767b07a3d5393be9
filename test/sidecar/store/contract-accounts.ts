/**
 * Store contract, accounts part: login codes (newest wins, tries reserved
 * atomically, consumed once, also under concurrency), accounts (found or
 * created once per address, onboarding completes once), the lowest balances,
 * and sessions (a refresh ends the replaced session in the same transaction).
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { LoginCodeRecord, SessionRecord } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, count, storeFor, together, values } from './contract-fixtures.js';

const code = (email: string, o: Partial<LoginCodeRecord> = {}): LoginCodeRecord => ({
  id: randomUUID(), email, codeHash: `h-${randomUUID()}`, attempts: 0, expiresAt: NOW + 600_000, usedAt: null, createdAt: NOW, ...o,
});

/** Runs the accounts part. */
export async function accountsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('login codes: the newest wins and earlier unused ones stop working', async (t) => {
    const email = `code-${randomUUID()}@example.com`;
    const c1 = code(email, { createdAt: NOW });
    await s.accounts.insertLoginCode(c1);
    t.same(await s.accounts.latestLoginCode(email), c1, 'read back as written');
    const c2 = code(email, { createdAt: NOW + 1 });
    await s.accounts.insertLoginCode(c2);
    t.same(await s.accounts.latestLoginCode(email), c2);
    t.equal(await s.accounts.reserveCodeAttempt(c1.id, 5), false, 'the earlier code takes no tries');
    t.equal(await s.accounts.consumeLoginCode(c1.id, NOW + 2), false, 'the earlier code cannot be used');
    t.equal(await s.accounts.latestLoginCode('nobody@example.com'), undefined);
    // A used code is kept (it answers code_used) when a new one is sent.
    t.equal(await s.accounts.consumeLoginCode(c2.id, NOW + 3), true);
    const c3 = code(email, { createdAt: NOW + 4 });
    await s.accounts.insertLoginCode(c3);
    t.equal(await s.accounts.consumeLoginCode(c2.id, NOW + 5), false, 'consumed once');
    t.equal((await s.accounts.latestLoginCode(email))?.id, c3.id);
    // A failing insert (duplicate id) leaves the current code working: delete and insert are one transaction.
    await t.rejects(s.accounts.insertLoginCode({ ...code(email, { createdAt: NOW + 6 }), id: c1.id === c3.id ? randomUUID() : c2.id }), 'a duplicate id is refused');
    t.equal((await s.accounts.latestLoginCode(email))?.id, c3.id, 'the current code survives the failed insert');
    t.equal(await s.accounts.reserveCodeAttempt(c3.id, 5), true, 'and still takes tries');
  });

  await t.test('login codes: tries are reserved and released atomically', async (t) => {
    const c = code(`tries-${randomUUID()}@example.com`);
    await s.accounts.insertLoginCode(c);
    for (let i = 0; i < 5; i++) t.equal(await s.accounts.reserveCodeAttempt(c.id, 5), true, `try ${i + 1}`);
    t.equal(await s.accounts.reserveCodeAttempt(c.id, 5), false, 'the sixth is refused');
    await s.accounts.releaseCodeAttempt(c.id);
    t.equal((await s.accounts.latestLoginCode(c.email))?.attempts, 4, 'release gives one back');
    const c0 = code(`tries0-${randomUUID()}@example.com`);
    await s.accounts.insertLoginCode(c0);
    await s.accounts.releaseCodeAttempt(c0.id);
    t.equal((await s.accounts.latestLoginCode(c0.email))?.attempts, 0, 'never below zero');

    const hot = code(`hot-${randomUUID()}@example.com`);
    await s.accounts.insertLoginCode(hot);
    const tries = values(t, await together(30, () => s.accounts.reserveCodeAttempt(hot.id, 5)));
    t.equal(count(tries, true), 5, '30 concurrent tries: exactly 5 reserved');
    t.equal((await s.accounts.latestLoginCode(hot.email))?.attempts, 5);
    const uses = values(t, await together(20, (i) => s.accounts.consumeLoginCode(hot.id, NOW + i)));
    t.equal(count(uses, true), 1, '20 concurrent uses: exactly one');
  });

  await t.test('accounts: found or created once per address; profile and onboarding steps', async (t) => {
    const email = `acct-${randomUUID()}@example.com`;
    const a = await s.accounts.findOrCreateAccount(email, randomUUID(), NOW);
    t.same(a, {
      id: a.id, email, firstName: null, lastName: null, accountType: null, onboardingStep: 'profile', rootPublicKey: null,
      rootSecretEnc: null, creditsMicros: 0, verifyCalls: 0, verifyAllows: 0, verifyDenies: 0, createdAt: NOW, orgName: null,
    });
    t.same(await s.accounts.getAccount(a.id), a);
    t.equal(await s.accounts.getAccount(randomUUID()), undefined);
    t.equal((await s.accounts.findOrCreateAccount(email, randomUUID(), NOW + 5)).id, a.id, 'the existing account');
    const race = `race-${randomUUID()}@example.com`;
    const ids = values(t, await together(10, () => s.accounts.findOrCreateAccount(race, randomUUID(), NOW))).map((x) => x.id);
    t.equal(new Set(ids).size, 1, '10 concurrent first logins: one account');

    await s.accounts.updateProfile(a.id, 'Ada', 'Lovelace');
    let r = await s.accounts.getAccount(a.id);
    t.same([r?.firstName, r?.lastName, r?.onboardingStep], ['Ada', 'Lovelace', 'account_type']);
    const v = { accountType: 'individual', rootPublicKey: '{"pk":"x"}', rootSecretEnc: new Uint8Array([1, 2, 250]), creditsMicros: 10_000_000 };
    const done = values(t, await together(5, () => s.accounts.completeOnboarding(a.id, v)));
    t.equal(count(done, true), 1, '5 concurrent completions: one');
    await s.accounts.updateProfile(a.id, 'Ada', 'King');
    r = await s.accounts.getAccount(a.id);
    t.same([r?.lastName, r?.onboardingStep, r?.accountType, r?.rootPublicKey, r?.creditsMicros], ['King', 'complete', 'individual', '{"pk":"x"}', 10_000_000],
      'a later profile change keeps the step; credits granted once');
    t.same(Array.from(r?.rootSecretEnc ?? []), [1, 2, 250], 'sealed bytes round-trip');
    t.equal(await s.accounts.completeOnboarding(a.id, { ...v, creditsMicros: 1 }), false);
  });

  await t.test('lowest balances: onboarded accounts only, lowest first', async (t) => {
    const fresh = await storeFor(t, open);
    const made: { id: string; c: number }[] = [];
    for (const c of [500, 100, 300, 100]) {
      const a = await fresh.accounts.findOrCreateAccount(`low-${randomUUID()}@example.com`, randomUUID(), NOW);
      await fresh.accounts.completeOnboarding(a.id, { accountType: 'individual', rootPublicKey: '{}', rootSecretEnc: new Uint8Array([1]), creditsMicros: c });
      made.push({ id: a.id, c });
    }
    await fresh.accounts.findOrCreateAccount(`pending-${randomUUID()}@example.com`, randomUUID(), NOW);
    const want = [...made].sort((x, y) => x.c - y.c || (x.id < y.id ? -1 : 1)).map((x) => ({ accountId: x.id, creditsMicros: x.c }));
    t.same(await fresh.accounts.lowestBalances(3), want.slice(0, 3));
    t.same(await fresh.accounts.lowestBalances(10), want, 'accounts still onboarding are left out');
  });

  await t.test('sessions: create, replace in one transaction, end', async (t) => {
    const a = await s.accounts.findOrCreateAccount(`sess-${randomUUID()}@example.com`, randomUUID(), NOW);
    const s1: SessionRecord = { id: randomUUID(), tokenHash: `t-${randomUUID()}`, accountId: a.id, expiresAt: NOW + 10, absoluteExpiresAt: NOW + 100, endedAt: null, createdAt: NOW, workspaceId: null };
    await s.accounts.createSession(s1);
    t.same(await s.accounts.getSessionByTokenHash(s1.tokenHash), s1);
    const s2 = { ...s1, id: randomUUID(), tokenHash: `t-${randomUUID()}`, createdAt: NOW + 5 };
    await s.accounts.createSession(s2, s1.id);
    t.equal((await s.accounts.getSessionByTokenHash(s1.tokenHash))?.endedAt, NOW + 5, 'the replaced session ended');
    t.equal((await s.accounts.getSessionByTokenHash(s2.tokenHash))?.endedAt, null);
    // A refresh whose insert fails (token hash taken) does not end the session it replaces.
    await t.rejects(s.accounts.createSession({ ...s2, id: randomUUID(), createdAt: NOW + 6 }, s2.id));
    t.equal((await s.accounts.getSessionByTokenHash(s2.tokenHash))?.endedAt, null, 'not ended by the failed refresh');
    await s.accounts.endSession(s2.id, NOW + 7);
    await s.accounts.endSession(s2.id, NOW + 8);
    t.equal((await s.accounts.getSessionByTokenHash(s2.tokenHash))?.endedAt, NOW + 7, 'ended once; a second logout keeps the time');
    t.equal(await s.accounts.getSessionByTokenHash('nope'), undefined);
  });
}
