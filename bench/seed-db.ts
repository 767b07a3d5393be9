/**
 * Benchmark seeding (bench code, never part of the sidecar): writes
 * synthetic audit rows, certificates + agents and outbox rows straight into a
 * sidecar's SQLite file while that sidecar is stopped, so the scaling runs
 * can measure the decision path against big tables and indexes.
 *
 * Synthetic rows copy a real row (the bench's own certificate, agent and
 * delegation request) with fresh ids: they share one key pair, which is fine
 * because they only make the tables and indexes big; no proof is ever
 * verified against them. It writes the SQLite schema of
 * `sidecar/store/sqlite/migrations.ts` directly, so a migration that changes
 * these tables must change this file too (the bench smoke test runs it).
 */
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { Database as SqliteDatabase } from 'better-sqlite3';

/** Rows inserted per transaction (bounds memory and WAL size). */
export const SEED_CHUNK_ROWS = 50_000;
/** Largest count one seeding call accepts (a bound on every loop). */
export const SEED_MAX_ROWS = 20_000_000;

/** Row counts of the tables the scaling runs grow. */
export interface BenchCounts { audit: number; certificates: number; agents: number; outbox: number; challenges: number }

/** One outbox row to seed: the body is already sealed (AAD `outbox:<id>:body`). */
export interface SeedOutboxRow { id: string; eventType: string; bodyEnc: Uint8Array }

function checkCount(n: number): void {
  if (!Number.isInteger(n) || n < 0 || n > SEED_MAX_ROWS) throw new TypeError(`seed count must be an integer from 0 to ${SEED_MAX_ROWS}`);
}

/** A random 32-bit tag so that ids of separate seeding calls never collide. */
const tag = (): number => Math.floor(Math.random() * 0xffff_ffff);

/**
 * A connection to a sidecar's database file. Seeding needs the sidecar
 * stopped. With `live: true` (the sidecar may be running) only
 * {@link BenchSeedDb.checkpoint}, {@link BenchSeedDb.counts} and
 * {@link BenchSeedDb.snapshot} may be used, and the connection settings are
 * left alone.
 */
export class BenchSeedDb {
  private readonly db: SqliteDatabase;
  private readonly live: boolean;

  constructor(file: string, opts: { live?: boolean } = {}) {
    this.live = opts.live === true;
    if (!fs.existsSync(file)) throw new TypeError(`no database file at ${file}`);
    this.db = new Database(file);
    this.db.exec('PRAGMA busy_timeout = 10000');
    if (!opts.live) {
      // Seeding speed only (the sidecar is stopped; it reopens the file in WAL mode with its own
      // settings): write pages straight into the file instead of through the WAL.
      this.db.exec('PRAGMA journal_mode = MEMORY');
      this.db.exec('PRAGMA synchronous = OFF');
      this.db.pragma('cache_size = -65536');
    }
  }

  /** Row counts (COUNT(*) scans: use between phases, not under load). */
  counts(): BenchCounts {
    const n = (table: string): number => (this.db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    return { audit: n('audit_events'), certificates: n('certificates'), agents: n('agents'), outbox: n('outbox'), challenges: n('challenges') };
  }

  /** `PRAGMA wal_checkpoint(TRUNCATE)`: folds the WAL into the file and empties it. Returns whether it completed. */
  checkpoint(): boolean {
    const r = this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number; log: number; checkpointed: number }[];
    return r[0]?.busy === 0;
  }

  /** Writes a consistent copy of the database to `dest` (`VACUUM INTO`; safe next to a running sidecar). */
  snapshot(dest: string): void {
    if (fs.existsSync(dest)) throw new TypeError(`${dest} exists`);
    this.db.prepare('VACUUM INTO ?').run(dest);
  }

  /** The owner (account, connection, agent) of a certificate. */
  certificateOwner(certId: string): { accountId: string; connectionId: string; agentId: string; requestId: string } {
    const r = this.db.prepare('SELECT account_id, connection_id, agent_id, request_id FROM certificates WHERE id = ?').get(certId) as
      { account_id: string; connection_id: string; agent_id: string; request_id: string } | undefined;
    if (!r) throw new TypeError(`no certificate ${certId}`);
    return { accountId: r.account_id, connectionId: r.connection_id, agentId: r.agent_id, requestId: r.request_id };
  }

  /**
   * Appends `n` synthetic audit events for the owner of `certId` (all three
   * event types, decisions in `details`), oldest first, ending just before now.
   */
  seedAudit(certId: string, n: number, now: number = Date.now()): void {
    checkCount(n);
    const o = this.certificateOwner(certId);
    const t = tag();
    const insert = this.db.prepare(`
      INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at)
      WITH RECURSIVE k(i) AS (SELECT @from UNION ALL SELECT i + 1 FROM k WHERE i < @to)
      SELECT printf('%08x-0000-4000-8000-%012x', @tag, i), @account,
             CASE i % 3 WHEN 0 THEN 'proof.presented' WHEN 1 THEN 'proof.verified' ELSE 'proof.rejected' END,
             @connection, @agent, @cert,
             CASE i % 3 WHEN 0 THEN NULL ELSE 'data:read' END,
             CASE i % 3 WHEN 0 THEN '{"audience_connection_id":"' || @connection || '"}'
                        WHEN 1 THEN '{"decision":"allow","decision_reason":"authorized"}'
                        ELSE '{"decision":"deny","decision_reason":"not_delegated"}' END,
             @now - (@n - i)
        FROM k`);
    for (let from = 1; from <= n; from += SEED_CHUNK_ROWS) {
      const to = Math.min(n, from + SEED_CHUNK_ROWS - 1);
      this.db.transaction(() => insert.run({
        from, to, n, now, tag: t, account: o.accountId, connection: o.connectionId, agent: o.agentId, cert: certId,
      }))();
    }
  }

  /**
   * Adds `n` synthetic agents, each with a delegation request and a
   * certificate (copies of the template certificate's rows with fresh ids;
   * every 10th certificate is revoked), on the template's account and
   * connection.
   */
  seedCertificatesAndAgents(certId: string, n: number, now: number = Date.now()): void {
    checkCount(n);
    const o = this.certificateOwner(certId);
    const t = tag();
    const k = `WITH RECURSIVE k(i) AS (SELECT @from UNION ALL SELECT i + 1 FROM k WHERE i < @to)`;
    const agentId = `printf('%08x-0001-4000-8000-%012x', @tag, k.i)`;
    const requestId = `printf('%08x-0002-4000-8000-%012x', @tag, k.i)`;
    const newCertId = `printf('cert-%08x-0003-4000-8000-%012x', @tag, k.i)`;
    const agents = this.db.prepare(`
      INSERT INTO agents (id, connection_id, account_id, name, agent_type, custody_mode, public_key, secret_enc, created_at)
      ${k} SELECT ${agentId}, a.connection_id, a.account_id, 'bench-agent-' || k.i, a.agent_type, a.custody_mode, a.public_key, a.secret_enc, @now - (@n - k.i)
        FROM k, agents a WHERE a.id = @agent`);
    const requests = this.db.prepare(`
      INSERT INTO delegation_requests (id, connection_id, account_id, agent_id, requested_scopes, state, cert_id, decided_at, created_at)
      ${k} SELECT ${requestId}, r.connection_id, r.account_id, ${agentId}, r.requested_scopes, 'approved', ${newCertId}, @now - (@n - k.i), @now - (@n - k.i)
        FROM k, delegation_requests r WHERE r.id = @request`);
    const certs = this.db.prepare(`
      INSERT INTO certificates (id, request_id, account_id, connection_id, agent_id, approved_scope, constraints, cert_json, cert_sha256,
                                status, issued_at, expires_at, revoked_at, revoke_reason)
      ${k} SELECT ${newCertId}, ${requestId}, c.account_id, c.connection_id, ${agentId}, c.approved_scope, c.constraints, c.cert_json,
                  lower(hex(randomblob(32))),
                  CASE WHEN k.i % 10 = 0 THEN 'revoked' ELSE 'approved' END, @now - (@n - k.i), NULL,
                  CASE WHEN k.i % 10 = 0 THEN @now ELSE NULL END, CASE WHEN k.i % 10 = 0 THEN 'bench' ELSE NULL END
        FROM k, certificates c WHERE c.id = @cert`);
    for (let from = 1; from <= n; from += SEED_CHUNK_ROWS) {
      const to = Math.min(n, from + SEED_CHUNK_ROWS - 1);
      const p = { from, to, n, now, tag: t, agent: o.agentId, request: o.requestId, cert: certId };
      this.db.transaction(() => {
        agents.run(p);
        requests.run(p);
        certs.run(p);
      })();
    }
  }

  /** Sets a platform's callback URL (and re-enables it). */
  setCallbackUrl(platformId: string, url: string | null): void {
    if (this.db.prepare('UPDATE platforms SET callback_url = ?, callback_disabled_at = NULL WHERE id = ?').run(url, platformId).changes !== 1) {
      throw new TypeError(`no platform ${platformId}`);
    }
  }

  /** The platform of a connection. */
  platformOf(connectionId: string): string {
    const r = this.db.prepare('SELECT platform_id FROM connections WHERE id = ?').get(connectionId) as { platform_id: string } | undefined;
    if (!r) throw new TypeError(`no connection ${connectionId}`);
    return r.platform_id;
  }

  /** Puts pre-sealed events into the outbox of the connection's platform, due now. */
  seedOutbox(connectionId: string, rows: readonly SeedOutboxRow[], now: number = Date.now()): void {
    checkCount(rows.length);
    const c = this.db.prepare('SELECT account_id, platform_id FROM connections WHERE id = ?').get(connectionId) as { account_id: string; platform_id: string } | undefined;
    if (!c) throw new TypeError(`no connection ${connectionId}`);
    const insert = this.db.prepare(`
      INSERT INTO outbox (id, seq, account_id, platform_id, connection_id, event_type, body_enc, state, attempts, next_attempt_at, created_at)
      SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, 'pending', 0, ?, ? FROM outbox`);
    for (let from = 0; from < rows.length; from += SEED_CHUNK_ROWS) {
      const chunk = rows.slice(from, from + SEED_CHUNK_ROWS);
      this.db.transaction(() => {
        for (const r of chunk) insert.run(r.id, c.account_id, c.platform_id, connectionId, r.eventType, Buffer.from(r.bodyEnc), now, now);
      })();
    }
  }

  /** Outbox rows by state. */
  outboxStates(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.db.prepare('SELECT state, COUNT(*) AS n FROM outbox GROUP BY state').all() as { state: string; n: number }[]) out[r.state] = r.n;
    return out;
  }

  /** Closes the connection (a seeding connection first puts the file back in WAL mode). */
  close(): void {
    if (!this.db.open) return;
    if (!this.live) this.db.pragma('journal_mode = WAL');
    this.db.close();
  }
}

/** Bytes of a database file plus its WAL (0 for missing files). */
export function dbBytes(file: string): number {
  let total = 0;
  for (const f of [file, `${file}-wal`]) {
    try { total += fs.statSync(f).size; } catch { /* missing */ }
  }
  return total;
}
