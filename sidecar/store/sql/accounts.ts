/**
 * {@link AccountStore} on either engine: login codes, accounts, sessions and
 * the login rate limits. Once-only changes are conditional UPDATEs, which
 * PostgreSQL re-checks on the newest row version when a concurrent
 * transaction changed the row first (SQLite has one writer).
 */
import { all, bytes, get, pgOnly, run, sql, SEQ } from './core.js';
import type { Runner } from './core.js';
import type { AccountRecord, AccountStore, LoginCodeRecord, RateLimitHit, SessionRecord } from '../types.js';
import { accountFromRow, codeFromRow, sessionFromRow } from '../rows.js';
import type { AccountRow, CodeRow, SessionRow } from '../rows.js';

/** Accounts, login codes, sessions and rate limits. */
export class SqlAccountStore implements AccountStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async latestLoginCode(email: string): Promise<LoginCodeRecord | undefined> {
    const row = await this.r.read(get<CodeRow>(sql`SELECT * FROM login_codes WHERE email = ${email}
      ORDER BY created_at DESC, ${SEQ} DESC LIMIT 1`));
    return row && codeFromRow(row);
  }

  async insertLoginCode(c: LoginCodeRecord): Promise<void> {
    await this.r.tx((function* () {
      // Sends for one address are serialized, so exactly the newest code is left unused.
      yield* pgOnly(sql`SELECT pg_advisory_xact_lock(1, hashtext('login:' || ${c.email}))`);
      yield* run(sql`DELETE FROM login_codes WHERE email = ${c.email} AND used_at IS NULL`);
      yield* run(sql`INSERT INTO login_codes (id, email, code_hash, attempts, expires_at, used_at, created_at)
        VALUES (${c.id}, ${c.email}, ${c.codeHash}, ${c.attempts}, ${c.expiresAt}, ${c.usedAt}, ${c.createdAt})`);
    })(), { group: true });
  }

  async reserveCodeAttempt(id: string, max: number): Promise<boolean> {
    return (await this.r.write(run(sql`UPDATE login_codes SET attempts = attempts + 1 WHERE id = ${id}
      AND attempts < ${max}`))) === 1;
  }

  async releaseCodeAttempt(id: string): Promise<void> {
    await this.r.write(run(sql`UPDATE login_codes SET attempts = attempts - 1 WHERE id = ${id} AND attempts > 0`));
  }

  async consumeLoginCode(id: string, now: number): Promise<boolean> {
    return (await this.r.write(run(sql`UPDATE login_codes SET used_at = ${now} WHERE id = ${id}
      AND used_at IS NULL`))) === 1;
  }

  async hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<RateLimitHit> {
    // Plain parameters only (no nested fragments), so the text is compiled once: this runs on every login send.
    const row = (await this.r.write(get<{ count: number; window_end: number }>(sql`INSERT INTO rate_limits (key,
      window_end, count)
       VALUES (${key}, CAST(${now} AS BIGINT) + CAST(${windowMs} AS BIGINT), 1)
       ON CONFLICT (key) DO UPDATE SET
         count = CASE WHEN rate_limits.window_end <= CAST(${now} AS BIGINT) THEN 1 ELSE rate_limits.count + 1 END,
         window_end = CASE WHEN rate_limits.window_end <= CAST(${now} AS BIGINT) THEN CAST(${now} AS BIGINT) +
           CAST(${windowMs} AS BIGINT)
           ELSE rate_limits.window_end END
       RETURNING count, window_end`), { group: true }))!;
    return { allowed: row.count <= limit, count: row.count, retryAfterMs: Math.max(0, row.window_end - now) };
  }

  async releaseRateLimit(key: string, windowEnd: number): Promise<void> {
    await this.r.write(run(sql`UPDATE rate_limits SET count = count - 1 WHERE key = ${key} AND window_end = ${windowEnd}
      AND count > 0`), { group: true });
  }

  async purgeRateLimits(olderThan: number): Promise<number> {
    return this.r.write(run(sql`DELETE FROM rate_limits WHERE window_end < ${olderThan}`));
  }

  async findOrCreateAccount(email: string, newId: string, now: number): Promise<AccountRecord> {
    // Two statements and, on PostgreSQL, no transaction: the SELECT takes a new snapshot, so it
    // sees an account a concurrent first login committed while the INSERT waited for it.
    return this.r.write((function* () {
      yield* run(sql`INSERT INTO accounts (id, email, onboarding_step, created_at)
        VALUES (${newId}, ${email}, 'profile', ${now})
        ON CONFLICT (email) DO NOTHING`);
      return accountFromRow((yield* get<AccountRow>(sql`SELECT * FROM accounts WHERE email = ${email}`))!);
    })());
  }

  async getAccount(id: string): Promise<AccountRecord | undefined> {
    const row = await this.r.read(get<AccountRow>(sql`SELECT * FROM accounts WHERE id = ${id}`));
    return row && accountFromRow(row);
  }

  async lowestBalances(limit: number): Promise<{ accountId: string; creditsMicros: number }[]> {
    const rows = await this.r.read(all<{ id: string; c: number }>(
      sql`SELECT id, credits_micros AS c FROM accounts WHERE onboarding_step = 'complete' ORDER BY credits_micros, id
        LIMIT ${limit}`));
    return rows.map((row) => ({ accountId: row.id, creditsMicros: row.c }));
  }

  async updateProfile(id: string, firstName: string, lastName: string): Promise<void> {
    await this.r.write(run(sql`UPDATE accounts SET first_name = ${firstName}, last_name = ${lastName},
      onboarding_step = CASE WHEN onboarding_step = 'profile' THEN 'account_type' ELSE onboarding_step END
        WHERE id = ${id}`));
  }

  async completeOnboarding(
    id: string, v: { accountType: string; rootPublicKey: string; rootSecretEnc: Uint8Array; creditsMicros: number },
  ): Promise<boolean> {
    return (await this.r.write(run(sql`UPDATE accounts
      SET account_type = ${v.accountType}, root_public_key = ${v.rootPublicKey},
      root_secret_enc = ${bytes(v.rootSecretEnc)}, credits_micros = credits_micros + ${v.creditsMicros}, onboarding_step
        = 'complete'
      WHERE id = ${id} AND onboarding_step <> 'complete'`))) === 1;
  }

  async createSession(s: SessionRecord, replaces?: string): Promise<void> {
    await this.r.tx((function* () {
      if (replaces) yield* run(sql`UPDATE sessions SET ended_at = ${s.createdAt} WHERE id = ${replaces}
        AND ended_at IS NULL`);
      yield* run(sql`INSERT INTO sessions (id, token_hash, account_id, expires_at, absolute_expires_at, ended_at,
        created_at, workspace_id)
        VALUES (${s.id}, ${s.tokenHash}, ${s.accountId}, ${s.expiresAt}, ${s.absoluteExpiresAt}, ${s.endedAt},
          ${s.createdAt}, ${s.workspaceId ?? null})`);
    })());
  }

  async getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined> {
    const row = await this.r.read(get<SessionRow>(sql`SELECT * FROM sessions WHERE token_hash = ${tokenHash}`));
    return row && sessionFromRow(row);
  }

  async endSession(id: string, now: number): Promise<void> {
    await this.r.write(run(sql`UPDATE sessions SET ended_at = ${now} WHERE id = ${id} AND ended_at IS NULL`));
  }
}
