/**
 * The store interface (types.ts) of publishing (issue 32; docs/organisations.md, "Publishing"):
 * an organisation's publisher domain and its checks, platforms' publish states, and the
 * directory of published platforms.
 */
import type { DomainCheckOutcome } from '../../publishing/dns.js';
import type { PublishState } from '../../../src/publishing.js';
import type { ApiKeyRecord, ConnectionRecord } from './platforms.js';
import type { OutboxEventInput } from './outbox.js';
import type { AuditEventRecord } from './audit.js';

/** An organisation's claimed publisher domain. */
export interface PublisherDomainRecord {
  orgId: string;
  /** Canonical (lowercase, no trailing dot). */
  domain: string;
  /** What the TXT record must carry (src/publisher-domain.ts). */
  token: string;
  claimedAt: number;
  /** When the current verification began; null until verified. */
  verifiedAt: number | null;
  /** When a re-check found the record gone; null while verified or never verified. */
  lapsedAt: number | null;
  checkedAt: number | null;
  lastOutcome: DomainCheckOutcome | null;
}

/** What recording a check did. */
export type DomainCheckResult = 'verified' | 'lapsed' | 'unchanged' | 'taken' | 'stale';

/** A published platform as the directory lists it. */
export interface DirectoryEntry {
  platformId: string;
  name: string;
  description: string;
  surfaceType: string;
  defaultAllowedScopes: string[];
  orgId: string;
  orgName: string;
  domain: string;
}

/** Publisher domains, publish states and the directory. */
export interface PublishingStore {
  /**
   * Claims `domain` for `orgId` with a new `token`, replacing an earlier claim; until it is
   * verified the organisation's published platforms are unpublished, with the audit rows `audit`
   * builds from their ids, in the same transaction.
   */
  claimDomain(
    orgId: string, domain: string, token: string, now: number, audit: (unpublished: string[]) => AuditEventRecord[],
  ): Promise<PublisherDomainRecord>;
  /** The organisation's claim, or undefined. */
  domainOf(orgId: string): Promise<PublisherDomainRecord | undefined>;
  /**
   * Records a check of the claim with `token` (`stale` when the claim changed since): `verified`
   * verifies it (`taken` when another organisation holds the domain verified); `absent` or
   * `mismatch` lapses a verified claim and unpublishes the organisation's platforms at once
   * (`lapsed`); `unreachable` changes nothing but the time of the check. On `verified` and `lapsed`
   * the audit rows `audit` builds (from the result and the ids of the platforms unpublished) are
   * written in the same transaction.
   */
  recordCheck(
    orgId: string, token: string, outcome: DomainCheckOutcome, now: number,
    audit: (result: DomainCheckResult, unpublished: string[]) => AuditEventRecord[],
  ): Promise<DomainCheckResult>;
  /** Verified claims last checked at or before `checkedBefore`, oldest first. */
  domainsDue(checkedBefore: number, limit: number): Promise<PublisherDomainRecord[]>;
  /**
   * Moves the platform from `from` to `to` if it is in `from` and belongs to `accountId`; to
   * `published` only if it has a description; with the `audits` rows, written only when it moves.
   */
  setPublishState(
    platformId: string, accountId: string, from: PublishState, to: PublishState, audits: readonly AuditEventRecord[],
  ): Promise<boolean>;
  /**
   * Connects the workspace `c.accountId` to the published platform `c.platformId`: the connection,
   * its key and its `connection.created` event at once. `not_published` when the platform is not
   * published (now, inside the transaction); `already_connected` when the workspace has an active
   * connection to it (concurrent connects of one workspace are serialized on its row). The `audits`
   * rows (of one or both workspaces) are written with the connection, and only with it.
   */
  connect(c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput, audits: readonly AuditEventRecord[]):
    Promise<'connected' | 'not_published' | 'already_connected'>;
  /** Published platforms with their publisher and verified domain, by name. */
  directory(limit: number): Promise<DirectoryEntry[]>;
}
