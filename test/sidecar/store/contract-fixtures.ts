/**
 * Fixtures of the store contract (contract.ts): records with fresh ids, an
 * onboarded account with a platform, connection, key and agent, and helpers
 * that open a store for one subtest and close it in its teardown.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type {
  ApiKeyRecord, AuditEventRecord, CertificateRecord, ChallengeRecord, ConnectionRecord, DelegationRequestRecord,
  OutboxEventInput, PlatformRecord, Store,
} from '../../../sidecar/store/types.js';

/** A fixed "now" (Unix ms) the contract's records are built around. */
export const NOW = 1_700_000_000_000;

/** Opens a store for the subtest `t`, closed in its teardown. */
export async function storeFor(t: Test, open: () => Promise<Store>): Promise<Store> {
  const s = await open();
  t.teardown(() => s.close());
  return s;
}

/** A fresh API-key prefix (`aak_` + 12 hex). */
export const newPrefix = (): string => `aak_${randomUUID().replace(/-/g, '').slice(0, 12)}`;

/** An outbox event with a fresh id. */
export function ev(accountId: string, platformId: string, connectionId: string | null, type: string, createdAt = NOW): OutboxEventInput {
  return { id: randomUUID(), accountId, platformId, connectionId, eventType: type, bodyEnc: new Uint8Array([1, 2, 3, createdAt % 251]), createdAt };
}

/** An administrative audit row of `accountId` with a fresh id. */
export function auditRow(
  accountId: string, eventType: AuditEventRecord['eventType'], details: Record<string, unknown> = {},
): AuditEventRecord {
  return { id: randomUUID(), accountId, eventType, connectionId: null, agentId: null, certId: null, requiredScope: null,
    details, createdAt: NOW };
}

/** An account's chain as [event type, details] pairs, in chain order. */
export async function chainOf(s: Store, accountId: string): Promise<[string, Record<string, unknown>][]> {
  return (await s.audit.readChain(accountId, 0, 500)).map((r) => [r.eventType, r.details]);
}

/** What {@link seed} made. */
export interface Seeded {
  accountId: string;
  email: string;
  p: PlatformRecord;
  c: ConnectionRecord;
  k: ApiKeyRecord;
  agentId: string;
}

/**
 * An account (onboarded with `credits` micro-dollars unless `credits` is null) with a
 * platform (callback `callbackUrl`), its connection, active key and one agent.
 */
export async function seed(s: Store, o: { credits?: number | null; callbackUrl?: string | null; now?: number } = {}): Promise<Seeded> {
  const now = o.now ?? NOW;
  const email = `${randomUUID()}@example.com`;
  const acct = await s.accounts.findOrCreateAccount(email, randomUUID(), now);
  if (o.credits !== null) {
    await s.accounts.completeOnboarding(acct.id, { accountType: 'individual', rootPublicKey: '{"k":1}', rootSecretEnc: new Uint8Array([5, 6]), creditsMicros: o.credits ?? 1_000_000 });
  }
  const p: PlatformRecord = {
    id: randomUUID(), accountId: acct.id, name: 'p', description: 'd', surfaceType: 'agentic_api', publishState: 'draft',
    defaultAllowedScopes: ['data:read', 'data:write'], callbackUrl: o.callbackUrl ?? null, callbackDisabledAt: null,
    signingSecretEnc: new Uint8Array([9, 9]), webhookSecretEnc: new Uint8Array([8, 8]), expiresAt: now + 1e9, createdAt: now,
  };
  const c: ConnectionRecord = { id: randomUUID(), platformId: p.id, accountId: acct.id, allowedScopes: p.defaultAllowedScopes, status: 'active', removedAt: null, createdAt: now };
  const k: ApiKeyRecord = { id: randomUUID(), connectionId: c.id, prefix: newPrefix(), digest: 'a'.repeat(64), status: 'active', validUntil: now + 1e9, createdAt: now };
  if (!(await s.platforms.createPlatform(p, c, k, null, 10, []))) throw new Error('seed: createPlatform refused');
  const agentId = randomUUID();
  await s.platforms.createAgent({
    id: agentId, connectionId: c.id, accountId: acct.id, name: 'agent', agentType: 'api_agent', custodyMode: 'custodial',
    publicKey: '{"pk":1}', secretEnc: new Uint8Array([7, 7, 7]), createdAt: now,
  });
  return { accountId: acct.id, email, p, c, k, agentId };
}

/** A pending delegation request of the seeded agent. */
export function request(x: Seeded, createdAt = NOW): DelegationRequestRecord {
  return { id: randomUUID(), connectionId: x.c.id, accountId: x.accountId, agentId: x.agentId, requestedScopes: ['data:read'],
    proposedConstraints: null, state: 'pending', certId: null, decidedAt: null, createdAt };
}

/** An approved certificate for request `r`. */
export function cert(r: DelegationRequestRecord, issuedAt = NOW + 1): CertificateRecord {
  return {
    id: `cert-${randomUUID()}`, requestId: r.id, accountId: r.accountId, connectionId: r.connectionId, agentId: r.agentId,
    approvedScope: ['data:read'], constraints: { max_calls: 3, nested: { a: [1, 'x'] } }, certJson: '{"cert":true}',
    certSha256: randomUUID().replace(/-/g, ''), status: 'approved', issuedAt, expiresAt: null, revokedAt: null, revokeReason: null,
    parentCertId: null, depth: 0, maxDelegationDepth: 0,
  };
}

/** A request approved with a certificate; returns the certificate. */
export async function approved(s: Store, x: Seeded, issuedAt = NOW + 1): Promise<CertificateRecord> {
  const r = request(x, issuedAt - 1);
  await s.delegations.createRequest(r);
  const c = cert(r, issuedAt);
  if (!(await s.delegations.approveRequest(r.id, c, null))) throw new Error('fixture: approve refused');
  return c;
}

/** A live challenge for the seeded connection. */
export function challenge(x: Seeded, o: Partial<ChallengeRecord> = {}): ChallengeRecord {
  return { id: randomUUID().replace(/-/g, '') + randomUUID().replace(/-/g, ''), audienceConnectionId: x.c.id, accountId: x.accountId, expiresAt: NOW + 300_000, presentedAt: null, consumedAt: null, createdAt: NOW, ...o };
}

/** An audit row of the seeded account. */
export function audit(x: Seeded, type: AuditEventRecord['eventType'], o: Partial<AuditEventRecord> = {}): AuditEventRecord {
  return {
    id: randomUUID(), accountId: x.accountId, eventType: type, connectionId: x.c.id, agentId: x.agentId, certId: null,
    requiredScope: 'data:read', details: { decision: 'allow', n: 1, nested: { ok: true } }, createdAt: NOW + 10, ...o,
  };
}

/** Enqueues one outbox event for the seeded platform (a request denied with its event); returns the event. */
export async function enqueue(s: Store, x: Seeded, createdAt: number, type = 'delegation.denied'): Promise<OutboxEventInput> {
  const r = request(x, createdAt);
  await s.delegations.createRequest(r);
  const e = ev(x.accountId, x.p.id, x.c.id, type, createdAt);
  if (!(await s.delegations.denyRequest(r.id, createdAt, e))) throw new Error('fixture: deny refused');
  return e;
}

/** `n` promises started together; resolves to their settled results. */
export function together<T>(n: number, fn: (i: number) => Promise<T>): Promise<PromiseSettledResult<T>[]> {
  return Promise.allSettled(Array.from({ length: n }, (_, i) => fn(i)));
}

/** The fulfilled values of settled results; fails the test for each rejection. */
export function values<T>(t: Test, rs: PromiseSettledResult<T>[]): T[] {
  const out: T[] = [];
  for (const r of rs) {
    if (r.status === 'fulfilled') out.push(r.value);
    else t.fail(`an operation rejected: ${(r.reason as Error)?.message ?? String(r.reason)}`);
  }
  return out;
}

/** How many values equal `v`. */
export const count = <T>(xs: T[], v: T): number => xs.filter((x) => x === v).length;
