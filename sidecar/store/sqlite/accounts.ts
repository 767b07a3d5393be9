/**
 * SQLite implementation of {@link AccountStore}: login codes, accounts,
 * sessions and the login rate limits.
 */
import type { Db } from './db.js';
import type { AccountRecord, AccountStore, LoginCodeRecord, RateLimitHit, SessionRecord } from '../types.js';
import { accountFromRow, codeFromRow, sessionFromRow } from '../rows.js';
import type { AccountRow, CodeRow, SessionRow } from '../rows.js';


/** Accounts, login codes and sessions on SQLite. */
export class SqliteAccountStore implements AccountStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  async latestLoginCode(email: string): Promise<LoginCodeRecord | undefined> {
    const r = this.db.get<CodeRow>('SELECT * FROM login_codes WHERE email = ? ORDER BY created_at DESC, rowid DESC LIMIT 1', email);
    return r && codeFromRow(r);
  }

  async insertLoginCode(c: LoginCodeRecord): Promise<void> {
    await this.db.groupTx(() => {
      this.db.run('DELETE FROM login_codes WHERE email = ? AND used_at IS NULL', c.email);
      this.db.run('INSERT INTO login_codes (id, email, code_hash, attempts, expires_at, used_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        c.id, c.email, c.codeHash, c.attempts, c.expiresAt, c.usedAt, c.createdAt);
    });
  }

  async reserveCodeAttempt(id: string, max: number): Promise<boolean> {
    return this.db.tx(() => this.db.run('UPDATE login_codes SET attempts = attempts + 1 WHERE id = ? AND attempts < ?', id, max) === 1);
  }

  async releaseCodeAttempt(id: string): Promise<void> {
    this.db.tx(() => { this.db.run('UPDATE login_codes SET attempts = attempts - 1 WHERE id = ? AND attempts > 0', id); });
  }

  async consumeLoginCode(id: string, now: number): Promise<boolean> {
    return this.db.tx(() => this.db.run('UPDATE login_codes SET used_at = ? WHERE id = ? AND used_at IS NULL', now, id) === 1);
  }

  async hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<RateLimitHit> {
    const r = (await this.db.groupTx(() => this.db.get<{ count: number; window_end: number }>(
      `INSERT INTO rate_limits (key, window_end, count) VALUES (?, ? + ?, 1)
       ON CONFLICT (key) DO UPDATE SET
         count = CASE WHEN rate_limits.window_end <= excluded.window_end - ? THEN 1 ELSE rate_limits.count + 1 END,
         window_end = CASE WHEN rate_limits.window_end <= excluded.window_end - ? THEN excluded.window_end ELSE rate_limits.window_end END
       RETURNING count, window_end`, key, now, windowMs, windowMs, windowMs)))!;
    return { allowed: r.count <= limit, count: r.count, retryAfterMs: Math.max(0, r.window_end - now) };
  }

  async releaseRateLimit(key: string, windowEnd: number): Promise<void> {
    await this.db.groupTx(() => { this.db.run('UPDATE rate_limits SET count = count - 1 WHERE key = ? AND window_end = ? AND count > 0', key, windowEnd); });
  }

  async purgeRateLimits(olderThan: number): Promise<number> {
    return this.db.tx(() => this.db.run('DELETE FROM rate_limits WHERE window_end < ?', olderThan));
  }

  async findOrCreateAccount(email: string, newId: string, now: number): Promise<AccountRecord> {
    return this.db.tx(() => {
      this.db.run("INSERT INTO accounts (id, email, onboarding_step, created_at) VALUES (?, ?, 'profile', ?) ON CONFLICT(email) DO NOTHING", newId, email, now);
      return accountFromRow(this.db.get<AccountRow>('SELECT * FROM accounts WHERE email = ?', email)!);
    });
  }

  async getAccount(id: string): Promise<AccountRecord | undefined> {
    const r = this.db.get<AccountRow>('SELECT * FROM accounts WHERE id = ?', id);
    return r && accountFromRow(r);
  }

  async lowestBalances(limit: number): Promise<{ accountId: string; creditsMicros: number }[]> {
    return this.db.all<{ id: string; c: number }>("SELECT id, credits_micros AS c FROM accounts WHERE onboarding_step = 'complete' ORDER BY credits_micros, id LIMIT ?", limit)
      .map((r) => ({ accountId: r.id, creditsMicros: r.c }));
  }

  async updateProfile(id: string, firstName: string, lastName: string): Promise<void> {
    this.db.tx(() => {
      this.db.run("UPDATE accounts SET first_name = ?, last_name = ?, onboarding_step = CASE WHEN onboarding_step = 'profile' THEN 'account_type' ELSE onboarding_step END WHERE id = ?", firstName, lastName, id);
    });
  }

  async completeOnboarding(id: string, v: { accountType: string; rootPublicKey: string; rootSecretEnc: Uint8Array; creditsMicros: number }): Promise<boolean> {
    return this.db.tx(() => this.db.run(
      "UPDATE accounts SET account_type = ?, root_public_key = ?, root_secret_enc = ?, credits_micros = credits_micros + ?, onboarding_step = 'complete' WHERE id = ? AND onboarding_step <> 'complete'",
      v.accountType, v.rootPublicKey, Buffer.from(v.rootSecretEnc), v.creditsMicros, id) === 1);
  }

  async createSession(s: SessionRecord, replaces?: string): Promise<void> {
    this.db.tx(() => {
      if (replaces) this.db.run('UPDATE sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL', s.createdAt, replaces);
      this.db.run('INSERT INTO sessions (id, token_hash, account_id, expires_at, absolute_expires_at, ended_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        s.id, s.tokenHash, s.accountId, s.expiresAt, s.absoluteExpiresAt, s.endedAt, s.createdAt);
    });
  }

  async getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined> {
    const r = this.db.get<SessionRow>('SELECT * FROM sessions WHERE token_hash = ?', tokenHash);
    return r && sessionFromRow(r);
  }

  async endSession(id: string, now: number): Promise<void> {
    this.db.tx(() => { this.db.run('UPDATE sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL', now, id); });
  }
}
