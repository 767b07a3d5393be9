/**
 * {@link PublishingStore} on either engine: publisher domains, publish states, the directory. A
 * lapse or a new claim unpublishes the organisation's platforms in the transaction that records
 * it, so no published platform is ever without a verified domain.
 */
import { all, get, pgOnly, run, sql } from './core.js';
import { insertOutboxEvent } from './outbox.js';
import { insertKey } from './platforms.js';
import type { Runner, Work } from './core.js';
import type { DomainCheckOutcome } from '../../publishing/dns.js';
import type { PublishState } from '../../../src/publishing.js';
import type {
  ApiKeyRecord, ConnectionRecord, DirectoryEntry, DomainCheckResult, OutboxEventInput, PublisherDomainRecord,
  PublishingStore,
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

function* unpublishAll(orgId: string): Work<number> {
  return yield* run(sql`UPDATE platforms SET publish_state = 'unpublished' WHERE account_id = ${orgId}
    AND publish_state = 'published'`);
}

/** Publisher domains, publish states and the directory. */
export class SqlPublishingStore implements PublishingStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async claimDomain(orgId: string, name: string, token: string, now: number): Promise<PublisherDomainRecord> {
    return this.r.tx((function* () {
      yield* run(sql`INSERT INTO publisher_domains (org_id, domain, token, claimed_at)
        VALUES (${orgId}, ${name}, ${token}, ${now})
        ON CONFLICT (org_id) DO UPDATE SET domain = excluded.domain, token = excluded.token,
        claimed_at = excluded.claimed_at, verified_at = NULL, lapsed_at = NULL, checked_at = NULL,
        last_outcome = NULL`);
      yield* unpublishAll(orgId);
      return domain((yield* get<DomainRow>(sql`SELECT * FROM publisher_domains WHERE org_id = ${orgId}`))!);
    })());
  }

  async domainOf(orgId: string): Promise<PublisherDomainRecord | undefined> {
    const row = await this.r.read(get<DomainRow>(sql`SELECT * FROM publisher_domains WHERE org_id = ${orgId}`));
    return row && domain(row);
  }

  async recordCheck(
    orgId: string, token: string, outcome: DomainCheckOutcome, now: number,
  ): Promise<DomainCheckResult> {
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
        return live ? 'unchanged' : 'verified';
      }
      const lapse = live && outcome !== 'unreachable';
      yield* run(sql`UPDATE publisher_domains SET checked_at = ${now}, last_outcome = ${outcome},
        lapsed_at = CASE WHEN ${lapse ? 1 : 0} = 1 THEN CAST(${now} AS BIGINT) ELSE lapsed_at END
        WHERE org_id = ${orgId}`);
      if (!lapse) return 'unchanged';
      yield* unpublishAll(orgId);
      return 'lapsed';
    })());
  }

  async domainsDue(checkedBefore: number, limit: number): Promise<PublisherDomainRecord[]> {
    return (await this.r.read(all<DomainRow>(sql`SELECT * FROM publisher_domains WHERE verified_at IS NOT NULL
      AND lapsed_at IS NULL AND (checked_at IS NULL OR checked_at <= ${checkedBefore})
      ORDER BY checked_at, org_id LIMIT ${limit}`))).map(domain);
  }

  async setPublishState(platformId: string, accountId: string, from: PublishState, to: PublishState): Promise<boolean> {
    // A platform is published only with a description, even if an edit emptied it since it was read.
    const described = to === 'published' ? sql` AND description <> ''` : sql``;
    return (await this.r.write(run(sql`UPDATE platforms SET publish_state = ${to} WHERE id = ${platformId}
      AND account_id = ${accountId} AND publish_state = ${from}${described}`))) === 1;
  }

  async connect(c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput):
    Promise<'connected' | 'not_published' | 'already_connected'> {
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
