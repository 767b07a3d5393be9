/**
 * Helpers for the operation-binding, approval and limit tests (real sidecar
 * over HTTP): bound presents, the body hash and context a gateway derives
 * for a JSON payment, and the approval routes.
 */
import { createHash } from 'node:crypto';
import type { Client, Flow, Res } from '../../helpers/sidecar.js';
import { challenge } from '../decide/helpers.js';
import type { Bundle } from '../decide/helpers.js';

/** Lowercase hex SHA-256 of a text. */
export const sha = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** A JSON payment body and the context a gateway derives from it for `POST path`. */
export function payment(amount: string, o: { path?: string; currency?: string; to?: string } = {}): { body: string; context: Record<string, string> } {
  const body = JSON.stringify({ amount, currency: o.currency ?? 'USD', to: o.to ?? 'acct_42' });
  return { body, context: { method: 'POST', path: o.path ?? '/v1/payments', amount, currency: o.currency ?? 'USD', body_sha256: sha(body) } };
}

/** Present with `operation` (raw response). */
export async function presentOp(f: Flow, operation: unknown, audience: Client = f.platform): Promise<Res> {
  const c = await challenge(audience);
  return f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: c, operation });
}

/** A bundle bound to `operation`; throws unless present answers 200. */
export async function boundBundle(f: Flow, operation: unknown): Promise<Bundle> {
  const r = await presentOp(f, operation);
  if (r.status !== 200) throw new Error(`present: ${r.status} ${r.text}`);
  return r.body.proof_bundle as Bundle;
}

/** The bound operation of a payment context. */
export const opOf = (ctx: Record<string, string>, scope?: string): Record<string, string> =>
  ({ method: ctx.method!, path: ctx.path!, body_sha256: ctx.body_sha256!, ...(scope ? { scope } : {}) });

/** GET an approval (session); throws on a non-200. */
export async function getApproval(user: Client, id: string): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await user.get(`/v1/service/approvals/${id}`);
  if (r.status !== 200) throw new Error(`approval: ${r.status} ${r.text}`);
  return r.body;
}
