/**
 * PostgreSQL implementation of {@link AccountStore}: login codes, accounts,
 * sessions and the login rate limits. Once-only changes are conditional
 * UPDATEs, which PostgreSQL re-checks on the newest row version when a
 * concurrent transaction changed the row first.
 */
import type { PgDb } from './db.js';
import type { AccountRecord, AccountStore, LoginCodeRecord, RateLimitHit, SessionRecord } from '../types.js';
import { accountFromRow, codeFromRow, sessionFromRow } from '../rows.js';
import type { AccountRow, CodeRow, SessionRow } from '../rows.js';

const bytes = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** Accounts, login codes, sessions and rate limits on PostgreSQL. */
export class PgAccountStore implements AccountStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async latestLoginCode(email: string): Promise<LoginCodeRecord | undefined> {
    const r = await this.db.get<CodeRow>('SELECT * FROM login_codes WHERE email = $1 ORDER BY created_at DESC, seq DESC LIMIT 1', [email]);
    return r && codeFromRow(r);
  }

  async insertLoginCode(c: LoginCodeRecord): Promise<void> {
    await this.db.tx(async (q) => {
      // Sends for one address are serialized, so exactly the newest code is left unused.
      await q.run("SELECT pg_advisory_xact_lock(1, hashtext('login:' || $1))", [c.email]);
      await q.run('DELETE FROM login_codes WHERE email = $1 AND used_at IS NULL', [c.email]);
      await q.run('INSERT INTO login_codes (id, email, code_hash, attempts, expires_at, used_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [c.id, c.email, c.codeHash, c.attempts, c.expiresAt, c.usedAt, c.createdAt]);
    });
  }

  async reserveCodeAttempt(id: string, max: number): Promise<boolean> {
    return (await this.db.run('UPDATE login_codes SET attempts = attempts + 1 WHERE id = $1 AND attempts < $2', [id, max])) === 1;
  }

  async releaseCodeAttempt(id: string): Promise<void> {
    await this.db.run('UPDATE login_codes SET attempts = attempts - 1 WHERE id = $1 AND attempts > 0', [id]);
  }

  async consumeLoginCode(id: string, now: number): Promise<boolean> {
    return (await this.db.run('UPDATE login_codes SET used_at = $1 WHERE id = $2 AND used_at IS NULL', [now, id])) === 1;
  }

  async hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<RateLimitHit> {
    const r = (await this.db.get<{ count: number; window_end: number }>(
      `INSERT INTO rate_limits AS r (key, window_end, count) VALUES ($1, $2::bigint + $3::bigint, 1)
       ON CONFLICT (key) DO UPDATE SET
         count = CASE WHEN r.window_end <= $2::bigint THEN 1 ELSE r.count + 1 END,
         window_end = CASE WHEN r.window_end <= $2::bigint THEN $2::bigint + $3::bigint ELSE r.window_end END
       RETURNING count, window_end`, [key, now, windowMs]))!;
    return { allowed: r.count <= limit, count: r.count, retryAfterMs: Math.max(0, r.window_end - now) };
  }

  async releaseRateLimit(key: string, windowEnd: number): Promise<void> {
    await this.db.run('UPDATE rate_limits SET count = count - 1 WHERE key = $1 AND window_end = $2 AND count > 0', [key, windowEnd]);
  }

  async purgeRateLimits(olderThan: number): Promise<number> {
    return this.db.run('DELETE FROM rate_limits WHERE window_end < $1', [olderThan]);
  }

  async findOrCreateAccount(email: string, newId: string, now: number): Promise<AccountRecord> {
    // Two statements, not one: the SELECT takes a new snapshot, so it sees an account a
    // concurrent first login committed while the INSERT waited for it.
    await this.db.run("INSERT INTO accounts (id, email, onboarding_step, created_at) VALUES ($1, $2, 'profile', $3) ON CONFLICT (email) DO NOTHING", [newId, email, now]);
    return accountFromRow((await this.db.get<AccountRow>('SELECT * FROM accounts WHERE email = $1', [email]))!);
  }

  async getAccount(id: string): Promise<AccountRecord | undefined> {
    const r = await this.db.get<AccountRow>('SELECT * FROM accounts WHERE id = $1', [id]);
    return r && accountFromRow(r);
  }

  async lowestBalances(limit: number): Promise<{ accountId: string; creditsMicros: number }[]> {
    return (await this.db.all<{ id: string; c: number }>("SELECT id, credits_micros AS c FROM accounts WHERE onboarding_step = 'complete' ORDER BY credits_micros, id LIMIT $1", [limit]))
      .map((r) => ({ accountId: r.id, creditsMicros: r.c }));
  }

  async updateProfile(id: string, firstName: string, lastName: string): Promise<void> {
    await this.db.run("UPDATE accounts SET first_name = $1, last_name = $2, onboarding_step = CASE WHEN onboarding_step = 'profile' THEN 'account_type' ELSE onboarding_step END WHERE id = $3",
      [firstName, lastName, id]);
  }

  async completeOnboarding(id: string, v: { accountType: string; rootPublicKey: string; rootSecretEnc: Uint8Array; creditsMicros: number }): Promise<boolean> {
    return (await this.db.run(
      "UPDATE accounts SET account_type = $1, root_public_key = $2, root_secret_enc = $3, credits_micros = credits_micros + $4, onboarding_step = 'complete' WHERE id = $5 AND onboarding_step <> 'complete'",
      [v.accountType, v.rootPublicKey, bytes(v.rootSecretEnc), v.creditsMicros, id])) === 1;
  }

  async createSession(s: SessionRecord, replaces?: string): Promise<void> {
    await this.db.tx(async (q) => {
      if (replaces) await q.run('UPDATE sessions SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL', [s.createdAt, replaces]);
      await q.run('INSERT INTO sessions (id, token_hash, account_id, expires_at, absolute_expires_at, ended_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [s.id, s.tokenHash, s.accountId, s.expiresAt, s.absoluteExpiresAt, s.endedAt, s.createdAt]);
    });
  }

  async getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined> {
    const r = await this.db.get<SessionRow>('SELECT * FROM sessions WHERE token_hash = $1', [tokenHash]);
    return r && sessionFromRow(r);
  }

  async endSession(id: string, now: number): Promise<void> {
    await this.db.run('UPDATE sessions SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL', [now, id]);
  }
}
