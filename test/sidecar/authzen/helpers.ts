/**
 * Helpers for the AuthZEN black-box tests: the endpoints by their default
 * paths of the AuthZEN 1.0 HTTPS binding, requests with the platform's API
 * key, and the entities the sidecar maps (docs/authzen.md).
 */
import type { Client, Res } from '../../helpers/sidecar.js';

/** The default paths of the AuthZEN 1.0 HTTPS binding (its endpoint table). */
export const PATHS = {
  evaluation: '/access/v1/evaluation',
  evaluations: '/access/v1/evaluations',
  searchAction: '/access/v1/search/action',
  searchSubject: '/access/v1/search/subject',
  searchResource: '/access/v1/search/resource',
  metadata: '/.well-known/authzen-configuration',
} as const;

/** The subject for an agent. */
export const agent = (id: string): { type: string; id: string } => ({ type: 'agent', id });
/** An action (scope). */
export const action = (name: string): { name: string } => ({ name });
/** An HTTP operation resource. */
export const http = (method: string, path: string): { type: string; id: string } => ({ type: 'http', id: `${method} ${path}` });
/** The resource with no operation facts. */
export const ANY = { type: 'any', id: '*' } as const;

/** POST an AuthZEN request with `client`'s API key. */
export function pdp(client: Client, path: string, body: unknown, o: { apiKey?: string | null; headers?: Record<string, string> } = {}): Promise<Res> {
  return client.post(path, body, o);
}

/** The subset of tap's Test these helpers use. */
export interface T {
  equal(found: unknown, wanted: unknown, message: string): unknown;
  ok(found: unknown, message: string): unknown;
  type(found: unknown, type: string, message: string): unknown;
}

/** Asserts a 200 single decision and returns its context. */
export function expectDecision(t: T, r: Res, decision: boolean, reason?: string, msg = ''): Record<string, unknown> {
  const m = msg ? `${msg}: ` : '';
  t.equal(r.status, 200, `${m}200 (${r.text.slice(0, 300)})`);
  t.equal(r.body?.decision, decision, `${m}decision ${decision}`);
  if (reason !== undefined) t.equal(r.body?.context?.reason, reason, `${m}reason ${reason}`);
  return (r.body?.context ?? {}) as Record<string, unknown>;
}
