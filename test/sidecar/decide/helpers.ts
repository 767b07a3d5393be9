/**
 * Helpers for the decision-path tests: verify calls, challenge/present with
 * the raw responses, decision and error assertions, audit and usage reads.
 * Everything goes through the real HTTP server started by
 * test/helpers/sidecar.ts.
 */
import type { Client, Flow, Res } from '../../helpers/sidecar.js';

/** The subset of a tap Test these helpers use. */
export interface T {
  equal(found: unknown, wanted: unknown, message: string): unknown;
  not(found: unknown, wanted: unknown, message: string): unknown;
  ok(found: unknown, message: string): unknown;
  notOk(found: unknown, message: string): unknown;
  same(found: unknown, wanted: unknown, message: string): unknown;
}

/** The verify path. */
export const VERIFY = '/v1/service/verify';

/** A bundle as the tests handle it (plain JSON). */
export type Bundle = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Calls verify with `client`'s API key (or `o.apiKey`). */
export function verify(client: Client, bundle: unknown, requiredScope: unknown, context?: Record<string, string>, o: { apiKey?: string | null } = {}): Promise<Res> {
  return client.post(VERIFY, { proof_bundle: bundle, required_scope: requiredScope, ...(context ? { context } : {}) }, o);
}

/** POST /v1/service/challenge for `client`; returns the challenge value. */
export async function challenge(client: Client): Promise<string> {
  const r = await client.post('/v1/service/challenge');
  if (r.status !== 200 || typeof r.body?.challenge !== 'string') throw new Error(`challenge: ${r.status} ${r.text}`);
  return r.body.challenge as string;
}

/** Present for the flow's agent with `challengeValue`; returns the raw response. */
export function presentRaw(f: Flow, challengeValue: unknown, by: Client = f.platform): Promise<Res> {
  return by.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: challengeValue });
}

/** challenge (by `audience`) + present (by the flow's platform); returns the bundle. */
export async function bundleFor(f: Flow, audience: Client = f.platform): Promise<Bundle> {
  const c = await challenge(audience);
  const r = await presentRaw(f, c);
  if (r.status !== 200) throw new Error(`present: ${r.status} ${r.text}`);
  return r.body.proof_bundle as Bundle;
}

/** Asserts a 200 decision (and the named constraint for constraint_denied). */
export function expectDecision(t: T, r: Res, decision: 'allow' | 'deny' | 'indeterminate', reason: string, constraint?: string, msg = ''): void {
  const m = msg ? `${msg}: ` : '';
  t.equal(r.status, 200, `${m}status 200 (${r.text.slice(0, 200)})`);
  t.equal(r.body?.decision, decision, `${m}decision ${decision}`);
  t.equal(r.body?.decision_reason, reason, `${m}decision_reason ${reason}`);
  if (constraint !== undefined) t.equal(r.body?.constraint, constraint, `${m}constraint ${constraint}`);
}

/** Asserts an error response `{error:{code,status}}` with the given status and code. */
export function expectError(t: T, r: Res, status: number, code: string, msg = ''): void {
  const m = msg ? `${msg}: ` : '';
  t.equal(r.status, status, `${m}status ${status} (${r.text.slice(0, 200)})`);
  t.equal(r.body?.error?.code, code, `${m}error code ${code}`);
  t.equal(r.body?.error?.status, status, `${m}error.status ${status}`);
  t.not(r.body?.decision, 'allow', `${m}never allow`);
}

/** An audit event as the API shows it. */
export interface AuditEvent {
  event_id: string; event_type: string; occurred_at: string; connection_id: string | null; agent_id: string | null;
  cert_id: string | null; required_scope: string | null; details: Record<string, unknown>;
}

/** GET /v1/service/audit/personal with `query`; throws on a non-200. */
export async function auditPage(user: Client, query = 'limit=25'): Promise<{ events: AuditEvent[]; next_cursor: string | null }> {
  const r = await user.get(`/v1/service/audit/personal?${query}`);
  if (r.status !== 200) throw new Error(`audit: ${r.status} ${r.text}`);
  return r.body as { events: AuditEvent[]; next_cursor: string | null };
}

/** Every audit event of the account (newest first), following cursors (bounded to 50 pages). */
export async function auditAll(user: Client, filter = ''): Promise<AuditEvent[]> {
  const out: AuditEvent[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 50; page++) {
    const p = await auditPage(user, `limit=200${filter ? `&${filter}` : ''}${cursor ? `&cursor=${cursor}` : ''}`);
    out.push(...p.events);
    cursor = p.next_cursor;
    if (!cursor) return out;
  }
  throw new Error('audit: more than 50 pages');
}

/** The usage read. */
export interface Usage {
  balance_micros: number; price_per_verify_micros: number; verify_calls: number; allows: number; denies: number; remaining_verify_calls: number;
}

/** GET /v1/service/usage/personal; throws on a non-200. */
export async function usage(user: Client): Promise<Usage> {
  const r = await user.get('/v1/service/usage/personal');
  if (r.status !== 200) throw new Error(`usage: ${r.status} ${r.text}`);
  return r.body as Usage;
}

/** Deep copy of a JSON value. */
export const clone = <X>(x: X): X => JSON.parse(JSON.stringify(x)) as X;

/** Changes one character in the middle of a base64url string, keeping it canonical base64url of the same length. */
export function flipB64(s: string, at = Math.floor(s.length / 2)): string {
  const c = s[at]!;
  return s.slice(0, at) + (c === 'A' ? 'B' : 'A') + s.slice(at + 1);
}

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function pool<I, O>(items: I[], limit: number, fn: (x: I, i: number) => Promise<O>): Promise<O[]> {
  const out: O[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
