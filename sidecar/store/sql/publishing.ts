/**
 * {@link PublishingStore} on either engine: publisher domains, publish states, the directory. A
 * lapse or a new claim unpublishes the organisation's platforms in the transaction that records
 * it, so no published platform is ever without a verified domain. Each change writes the audit
 * rows its caller builds in the same transaction (audit-append.ts).
 */
import { all, get, pgOnly, run, sql } from './core.js';
import { insertOutboxEvent } from './outbox.js';
import { insertKey } from './platforms.js';
import { appendAudits, appendAuditsByAccount } from './audit-append.js';
import type { Runner, Work } from './core.js';
import type { DomainCheckOutcome } from '../../publishing/dns.js';
import type { PublishState } from '../../../src/publishing.js';
import type {
  ApiKeyRecord, AuditEventRecord, ConnectionRecord, DirectoryEntry, DomainCheckResult, OutboxEventInput,
  PublisherDomainRecord, PublishingStore,
} from '../types.js';

interface DomainRow {
  org_id: string; domain: string; token: string; claimed_at: number; verified_at: number | null;
  lapsed_at: number | null; checked_at: number | null; last_outcome: string | null;
}
// BIGINT columns arrive as numbers on both engines (postgres/db.ts parses int8).
const domain = (r: DomainRow): PublisherDomainRecord => ({
  orgId: r.org_id, domain: r.domain, token: r.token, claimedAt: r.claimed_at, verifiedAt: r.verified_at,
  lapsedAt: r.lapsed_at, checkedAt: r.checked_at, lastOutcome: r.last_outcome as DomainCheckOutcome | null,
});

/** Unpublishes the organisation's published platforms; returns their ids, sorted. */
function* unpublishAll(orgId: string): Work<string[]> {
  return (yield* all<{ id: string }>(sql`UPDATE platforms SET publish_state = 'unpublished' WHERE account_id = ${orgId}
    AND publish_state = 'published' RETURNING id`)).map((r) => r.id).sort();
}

/** Publisher domains, publish states and the directory. */
export class SqlPublishingStore implements PublishingStore {
  private readonly r: Runner;
  private readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(r: Runner, chain = true) {
    this.r = r;
    this.chain = chain;
  }

  async claimDomain(
    orgId: string, name: string, token: string, now: number, audit: (unpublished: string[]) => AuditEventRecord[],
  ): Promise<PublisherDomainRecord> {
    const chain = this.chain;
    return this.r.tx((function* () {
      yield* run(sql`INSERT INTO publisher_domains (org_id, domain, token, claimed_at)
        VALUES (${orgId}, ${name}, ${token}, ${now})
        ON CONFLICT (org_id) DO UPDATE SET domain = excluded.domain, token = excluded.token,
        claimed_at = excluded.claimed_at, verified_at = NULL, lapsed_at = NULL, checked_at = NULL,
        last_outcome = NULL`);
      yield* appendAudits(audit(yield* unpublishAll(orgId)), chain);
      return domain((yield* get<DomainRow>(sql`SELECT * FROM publisher_domains WHERE org_id = ${orgId}`))!);
    })());
  }

  async domainOf(orgId: string): Promise<PublisherDomainRecord | undefined> {
    const row = await this.r.read(get<DomainRow>(sql`SELECT * FROM publisher_domains WHERE org_id = ${orgId}`));
    return row && domain(row);
  }

  async recordCheck(
    orgId: string, token: string, outcome: DomainCheckOutcome, now: number,
    audit: (result: DomainCheckResult, unpublished: string[]) => AuditEventRecord[],
  ): Promise<DomainCheckResult> {
    const chain = this.chain;
    return this.r.tx((function* (): Work<DomainCheckResult> {
      const row = yield* get<DomainRow>(sql`SELECT * FROM publisher_domains WHERE org_id = ${orgId}
        AND token = ${token}`);
      if (row === undefined) return 'stale';
      const live = row.verified_at !== null && row.lapsed_at === null;
      if (outcome === 'verified') {
        const other = yield* get(sql`SELECT 1 AS x FROM publisher_domains WHERE domain = ${row.domain}
          AND org_id <> ${orgId}
          AND verified_at IS NOT NULL AND lapsed_at IS NULL`);
        if (other !== undefined) {
          yield* run(sql`UPDATE publisher_domains SET checked_at = ${now}, last_outcome = 'taken'
            WHERE org_id = ${orgId}`);
          return 'taken';
        }
        yield* run(sql`UPDATE publisher_domains SET verified_at = CASE WHEN verified_at IS NULL OR lapsed_at IS NOT NULL
          THEN CAST(${now} AS BIGINT) ELSE verified_at END, lapsed_at = NULL, checked_at = ${now},
          last_outcome = ${outcome}
          WHERE org_id = ${orgId}`);
        if (live) return 'unchanged';
        yield* appendAudits(audit('verified', []), chain);
        return 'verified';
      }
      const lapse = live && outcome !== 'unreachable';
      yield* run(sql`UPDATE publisher_domains SET checked_at = ${now}, last_outcome = ${outcome},
        lapsed_at = CASE WHEN ${lapse ? 1 : 0} = 1 THEN CAST(${now} AS BIGINT) ELSE lapsed_at END
        WHERE org_id = ${orgId}`);
      if (!lapse) return 'unchanged';
      yield* appendAudits(audit('lapsed', yield* unpublishAll(orgId)), chain);
      return 'lapsed';
    })());
  }

  async domainsDue(checkedBefore: number, limit: number): Promise<PublisherDomainRecord[]> {
    return (await this.r.read(all<DomainRow>(sql`SELECT * FROM publisher_domains WHERE verified_at IS NOT NULL
      AND lapsed_at IS NULL AND (checked_at IS NULL OR checked_at <= ${checkedBefore})
      ORDER BY checked_at, org_id LIMIT ${limit}`))).map(domain);
  }

  async setPublishState(
    platformId: string, accountId: string, from: PublishState, to: PublishState, audits: readonly AuditEventRecord[],
  ): Promise<boolean> {
    // A platform is published only with a description and a callback, even if an edit cleared one since it was read.
    const described = to === 'published' ? sql` AND description <> '' AND callback_url IS NOT NULL` : sql``;
    const chain = this.chain;
    return this.r.tx((function* () {
      const moved = (yield* run(sql`UPDATE platforms SET publish_state = ${to} WHERE id = ${platformId}
        AND account_id = ${accountId} AND publish_state = ${from}${described}`)) === 1;
      if (moved) yield* appendAudits(audits, chain);
      return moved;
    })());
  }

  async connect(c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput, audits: readonly AuditEventRecord[]):
    Promise<'connected' | 'not_published' | 'already_connected'> {
    const chain = this.chain;
    return this.r.tx((function* () {
      yield* pgOnly(sql`SELECT 1 FROM accounts WHERE id = ${c.accountId} FOR UPDATE`);
      const p = yield* get(sql`SELECT 1 AS x FROM platforms WHERE id = ${c.platformId}
        AND publish_state = 'published'`);
      if (p === undefined) return 'not_published' as const;
      const dup = yield* get(sql`SELECT 1 AS x FROM connections WHERE platform_id = ${c.platformId}
        AND account_id = ${c.accountId} AND status = 'active'`);
      if (dup !== undefined) return 'already_connected' as const;
      yield* run(sql`INSERT INTO connections (id, platform_id, account_id, allowed_scopes, status, removed_at,
        created_at)
        VALUES (${c.id}, ${c.platformId}, ${c.accountId}, ${JSON.stringify(c.allowedScopes)}, 'active', NULL,
          ${c.createdAt})`);
      yield* insertKey(k);
      yield* insertOutboxEvent(event);
      yield* appendAuditsByAccount(audits, chain);
      return 'connected' as const;
    })());
  }

  async directory(limit: number): Promise<DirectoryEntry[]> {
    const rows = await this.r.read(all<{
      id: string; name: string; description: string; surface_type: string; default_allowed_scopes: string;
      org_id: string; org_name: string | null; domain: string;
    }>(sql`SELECT p.id, p.name, p.description, p.surface_type, p.default_allowed_scopes, a.id AS org_id, a.org_name,
        d.domain
      FROM platforms p JOIN accounts a ON a.id = p.account_id JOIN publisher_domains d ON d.org_id = p.account_id
      WHERE p.publish_state = 'published' AND d.verified_at IS NOT NULL AND d.lapsed_at IS NULL
      ORDER BY p.name, p.id LIMIT ${limit}`));
    return rows.map((r) => ({
      platformId: r.id, name: r.name, description: r.description, surfaceType: r.surface_type,
      defaultAllowedScopes: JSON.parse(r.default_allowed_scopes) as string[], orgId: r.org_id,
      orgName: r.org_name ?? '',
      domain: r.domain,
    }));
  }
}
