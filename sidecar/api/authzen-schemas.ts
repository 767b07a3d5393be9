/**
 * The request and answer bodies of the AuthZEN 1.0 endpoints (routes/authzen.ts,
 * docs/authzen.md), for the OpenAPI document and Fastify's serializer. The
 * requests are checked by the handler (src/authzen.ts), which names the member
 * that is missing or malformed and ignores unknown members, as AuthZEN requires.
 */
import { Type } from '@sinclair/typebox';
import type { TSchema } from '@sinclair/typebox';
import { AUTHZEN_MAX_BATCH, EVALUATIONS_SEMANTICS, RESOURCE_TYPES, SUBJECT_TYPE } from '../../src/authzen.js';

const Open = (description: string) => Type.Object({}, { additionalProperties: true, description });
const Entity = (what: string) => Type.Object({
  type: Type.String({ description: `The ${what}'s type.` }),
  id: Type.String({ description: `The ${what}'s id.` }),
  properties: Type.Optional(Open('Ignored.')),
}, { additionalProperties: true });
const Subject = Type.Object({ ...Entity('subject').properties,
  type: Type.String({ description: `Always \`${SUBJECT_TYPE}\`.` }),
  id: Type.String({ description: 'The agent id.' }) });
const Resource = Type.Object({ ...Entity('resource').properties,
  type: Type.String({ description: `One of ${RESOURCE_TYPES.map((r) => `\`${r}\``).join(', ')}.` }),
  id: Type.String({ description: '`http`: `"METHOD /path"`; `mcp_tool`: the tool name; `any`: ignored.' }) });
const Action = Type.Object({
  name: Type.String({ description: 'The scope.' }), properties: Type.Optional(Open('Ignored.')),
}, { additionalProperties: true });
const Context = Open('The constraint context (`client_ip`, `tenant`, `amount`, `currency`, `body_sha256`, '
  + '`query_sha256`) and, for a proof verification, `proof` (the bundle, or its base64). Other members are ignored.');
const Members = { subject: Subject, action: Action, resource: Resource, context: Type.Optional(Context) };

/** The access evaluation request (the handler checks it; documented inline). */
export const AuthzenEvaluationRequest = Type.Object(Members, { additionalProperties: true });

/** The access evaluations request (the handler checks it). */
export const AuthzenEvaluationsRequest = Type.Object({
  subject: Type.Optional(Subject), action: Type.Optional(Action), resource: Type.Optional(Resource),
  context: Type.Optional(Context),
  evaluations: Type.Optional(Type.Array(Type.Object({
    subject: Type.Optional(Subject), action: Type.Optional(Action), resource: Type.Optional(Resource),
    context: Type.Optional(Context),
  }, { additionalProperties: true }), { maxItems: AUTHZEN_MAX_BATCH })),
  options: Type.Optional(Type.Object({
    evaluations_semantic: Type.Optional(Type.Union(EVALUATIONS_SEMANTICS.map((s) => Type.Literal(s)))),
  }, { additionalProperties: true })),
}, { additionalProperties: true });

/** The action search request (the handler checks it). */
export const AuthzenActionSearchRequest = Type.Object({
  subject: Subject, resource: Resource, context: Type.Optional(Context),
  page: Type.Optional(Type.Object({
    token: Type.Optional(Type.String({ description: 'The `next_token` of the previous page.' })),
    limit: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'Most results; default 100.' })),
  }, { additionalProperties: true })),
}, { additionalProperties: true });

const DecisionContext = Open('`decision_id` and `reason` (a decision reason, docs/errors.md), `constraint` and '
  + '`approval_id` when they apply; for a failed item, `error` ({code, message, status}) instead of `reason`.');

/** An AuthZEN decision. */
export const AuthzenDecision = Type.Object({
  decision: Type.Boolean({ description: 'true only for an allow.' }),
  context: Type.Optional(DecisionContext),
}, { $id: 'AuthzenDecision' });

/** The access evaluations answer: one decision per evaluated item, in order (a single one without `evaluations`). */
export const AuthzenDecisions = Type.Object({
  decision: Type.Optional(Type.Boolean({ description: 'Only for a request without `evaluations`.' })),
  context: Type.Optional(DecisionContext),
  evaluations: Type.Optional(Type.Array(Type.Object({
    decision: Type.Boolean(), context: Type.Optional(DecisionContext),
  }))),
}, { $id: 'AuthzenDecisions' });

/** The action search answer: the scopes a grant check allows for the subject, resource and context. */
export const AuthzenActionSearchResult = Type.Object({
  page: Type.Object({ next_token: Type.String(), count: Type.Integer(), total: Type.Integer() }),
  results: Type.Array(Type.Object({ name: Type.String({ description: 'A scope.' }) })),
}, { $id: 'AuthzenActionSearchResult' });

/** The PDP metadata document (`/.well-known/authzen-configuration`). */
export const AuthzenConfiguration = Type.Object({
  policy_decision_point: Type.String({ description: 'The base URL (`SIDECAR_PUBLIC_URL`, else the request\'s).' }),
  access_evaluation_endpoint: Type.String(),
  access_evaluations_endpoint: Type.String(),
  search_action_endpoint: Type.String(),
}, { $id: 'AuthzenConfiguration', additionalProperties: false });

/** The explanation of a decision (routes/decisions.ts; src/explain.ts builds it). */
export const DecisionExplanation = Type.Object({
  decision_id: Type.String(), time: Type.String({ format: 'date-time' }),
  mode: Type.String({ description: '`verify` or `grant`.' }),
  decision: Type.String({ description: '`allow` or `deny`.' }),
  reason: Type.String({ description: 'A decision reason.' }),
  stage: Type.String({ description: 'The pipeline stage that decided (`delegation`, `limits`, `approval`, '
    + '`commit`, …).' }),
  agent_id: Type.String(),
  certificate: Type.Union([Open('The certificate\'s claims: ids, scopes, constraints, issued_at, expires_at (no key).'),
    Type.Null()]),
  scope: Type.Object({ asked: Type.String(), granted: Type.Array(Type.String()), delegated: Type.Boolean() }),
  context: Type.Union([Open('The constraint context evaluated.'), Type.Null()]),
  constraints: Type.Array(Open('`{name, limit, value, holds, missing?}`: one constraint evaluated alone.')),
  constraint: Type.Optional(Type.String()),
  chain: Type.Optional(Type.Array(Type.String(), { description: 'Under a sub-delegated certificate: the chain\'s '
    + 'certificate ids, leaf to root (docs/certificates.md).' })),
  link: Type.Optional(Type.Object({ depth: Type.Integer(), cert_id: Type.String() }, { description: 'Under a chain, '
    + 'the link a deny failed at; `certificate`, `scope` and `constraints` are then that link\'s.' })),
  approval: Open('`{rule, approval_id, state}`.'),
  counters: Type.Array(Open('`{kind, window_start, used, this_call, limit, currency?}` as read before the call.')),
  would_allow: Type.Array(Open('For a deny: `{change, …}`, the smallest change that would have allowed it.')),
}, { $id: 'DecisionExplanation' });

/** The named AuthZEN schemas (api/schemas.ts lists them in `RESPONSE_SCHEMAS`). */
export const AUTHZEN_SCHEMAS: readonly TSchema[] = [
  AuthzenDecision, AuthzenDecisions, AuthzenActionSearchResult, AuthzenConfiguration, DecisionExplanation,
];
