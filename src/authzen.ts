/**
 * The OpenID AuthZEN Authorization API 1.0 (final), as the sidecar speaks it
 * (docs/authzen.md): the paths, the request entities, how an evaluation maps
 * onto a verify request, and the batch semantics. Pure: no I/O.
 *
 * Mapping: `subject` is the agent (`type` `agent`, `id` its agent id),
 * `action.name` the scope, `resource` the operation (`http`: `"METHOD /path"`;
 * `mcp_tool`: the tool name; `any`: no operation facts), `context` the
 * constraint context (`client_ip`, `tenant`, `amount`, `currency`,
 * `body_sha256`, `query_sha256`) and, for a proof verification, `proof`.
 */
import { ServiceError } from './errors.js';
import type { VerifyContext, VerifyRequest } from './protocol.js';

/** The AuthZEN endpoints (default paths of the HTTPS binding) and the metadata document. */
export const AUTHZEN_PATHS = {
  evaluation: '/access/v1/evaluation',
  evaluations: '/access/v1/evaluations',
  searchAction: '/access/v1/search/action',
  metadata: '/.well-known/authzen-configuration',
} as const;

/** Most items of one `evaluations` request; more is 400 `batch_too_large`. */
export const AUTHZEN_MAX_BATCH = 100;

/** The subject type the sidecar knows: an agent of the caller's connection. */
export const SUBJECT_TYPE = 'agent';

/** The resource types the sidecar maps onto the constraint context. */
export const RESOURCE_TYPES = ['http', 'mcp_tool', 'any'] as const;

/** The three `options.evaluations_semantic` values of AuthZEN 1.0. */
export const EVALUATIONS_SEMANTICS = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] as const;
/** An evaluations semantic. */
export type EvaluationsSemantic = (typeof EVALUATIONS_SEMANTICS)[number];

/** A subject or resource: `type` and `id`, optional `properties` (ignored by the sidecar). */
export interface AuthzenEntity { type: string; id: string; properties?: Record<string, unknown> }
/** An action: its `name` is the scope. */
export interface AuthzenAction { name: string; properties?: Record<string, unknown> }
/** One access evaluation request (defaults already applied). */
export interface AuthzenEvaluation {
  subject: AuthzenEntity;
  action: AuthzenAction;
  resource: AuthzenEntity;
  context?: Record<string, unknown>;
}
/** An AuthZEN decision. */
export interface AuthzenDecision { decision: boolean; context?: Record<string, unknown> }

/** One evaluation mapped onto the decision pipeline. */
export interface MappedEvaluation {
  /** The agent (the subject's id). */
  agentId: string;
  /** The scope, context and (for a proof verification) the proof, as verify takes them. */
  request: VerifyRequest;
  /** `verify` when `context.proof` carries a proof, else `grant`. */
  mode: 'verify' | 'grant';
}

const CONTEXT_FACTS: Readonly<Record<Exclude<keyof VerifyContext, 'method' | 'path' | 'tool'>, RegExp>> = {
  client_ip: /^[0-9A-Fa-f:.]{2,64}$/,
  tenant: /^[\s\S]{1,128}$/,
  amount: /^[\s\S]{1,32}$/,
  currency: /^[A-Za-z]{3}$/,
  body_sha256: /^[0-9a-f]{64}$/,
  query_sha256: /^[0-9a-f]{64}$/,
};
const TOOL = /^[A-Za-z0-9_.-]{1,128}$/;
const HTTP_OPERATION = /^([A-Z]{1,16}) (\/[^\s]{0,2047})$/;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A 400 `invalid_request` naming `field`. */
export function invalid(field: string, why = 'is missing or not valid'): ServiceError {
  return new ServiceError('invalid_request', `${field} ${why}.`, { field });
}

/** Checks an entity's shape (`type`/`id` strings, or `name` for an action); a 400 naming the field, or null. */
export function entityError(value: unknown, field: string, kind: 'entity' | 'action'): ServiceError | null {
  if (!isObject(value)) return invalid(field);
  const keys = kind === 'action' ? ['name'] : ['type', 'id'];
  for (const k of keys) {
    const v = value[k];
    if (typeof v !== 'string' || v.length === 0 || v.length > 2048) return invalid(`${field}.${k}`);
  }
  if (value.properties !== undefined && !isObject(value.properties)) return invalid(`${field}.properties`);
  return null;
}

/**
 * One evaluation with the top-level defaults applied (`item` overrides `defaults`), checked;
 * a 400 naming the first missing or malformed member otherwise. Unknown members are ignored.
 */
export function resolveEvaluation(item: Record<string, unknown>, defaults: Record<string, unknown>, at: string):
  AuthzenEvaluation | ServiceError {
  const pick = (k: string): unknown => (item[k] !== undefined ? item[k] : defaults[k]);
  const subject = pick('subject');
  const action = pick('action');
  const resource = pick('resource');
  const context = pick('context');
  const where = (k: string): string => (item[k] !== undefined ? `${at}${k}` : k);
  const bad = entityError(subject, where('subject'), 'entity') ?? entityError(action, where('action'), 'action')
    ?? entityError(resource, where('resource'), 'entity')
    ?? (context !== undefined && !isObject(context) ? invalid(where('context')) : null);
  if (bad) return bad;
  return {
    subject: subject as AuthzenEntity, action: action as AuthzenAction, resource: resource as AuthzenEntity,
    ...(context !== undefined ? { context: context as Record<string, unknown> } : {}),
  };
}

/**
 * Maps a checked evaluation onto the pipeline: the agent, the verify request and the mode; a 400
 * `invalid_request` for a subject type, resource or context fact the sidecar cannot map. A proof
 * in `context.proof` is passed as it is (a base64 string is decoded by the caller, `decodeProof`).
 */
export function mapEvaluation(e: AuthzenEvaluation,
  decodeProof: (v: unknown) => unknown): MappedEvaluation | ServiceError {
  if (e.subject.type !== SUBJECT_TYPE) return invalid('subject.type', `must be "${SUBJECT_TYPE}"`);
  const context: VerifyContext = {};
  const r = e.resource;
  if (r.type === 'http') {
    const m = HTTP_OPERATION.exec(r.id);
    if (!m) return invalid('resource.id', 'must be "METHOD /path" for a resource of type http');
    context.method = m[1]!;
    context.path = m[2]!;
  } else if (r.type === 'mcp_tool') {
    if (!TOOL.test(r.id)) return invalid('resource.id', 'must be an MCP tool name (1-128 of A-Z a-z 0-9 _ - .)');
    context.tool = r.id;
  } else if (r.type !== 'any') {
    return invalid('resource.type', `must be one of ${RESOURCE_TYPES.join(', ')}`);
  }
  const c = e.context ?? {};
  for (const [k, pattern] of Object.entries(CONTEXT_FACTS)) {
    const v = c[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !pattern.test(v)) return invalid(`context.${k}`);
    (context as Record<string, string>)[k] = v;
  }
  const hasContext = Object.keys(context).length > 0;
  const base = { required_scope: e.action.name, ...(hasContext ? { context } : {}) };
  if (c.proof === undefined) {
    return { agentId: e.subject.id, request: { proof_bundle: undefined, ...base }, mode: 'grant' };
  }
  return { agentId: e.subject.id, request: { proof_bundle: decodeProof(c.proof), ...base }, mode: 'verify' };
}

/**
 * Whether a batch stops after this decision: `deny_on_first_deny` stops after the first
 * `false` (a deny or a failed item), `permit_on_first_permit` after the first `true`.
 */
export function stopsAfter(semantic: EvaluationsSemantic, d: AuthzenDecision): boolean {
  return (semantic === 'deny_on_first_deny' && !d.decision) || (semantic === 'permit_on_first_permit' && d.decision);
}
