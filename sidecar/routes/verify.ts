/**
 * `POST /v1/service/verify` (spec endpoint 13): validates the body shape and
 * hands everything else, including API-key authentication, to the one
 * decision pipeline (`decide()`); writes the decision-log line when the log is on.
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../context.js';
import { decide } from '../decide/pipeline.js';
import { ServiceError } from '../../src/errors.js';
import { API_KEY_HEADER, IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_LIMITS, VERIFY_PATH } from '../../src/protocol.js';
import type { VerifyRequest, VerifyResponse } from '../../src/protocol.js';
import type { VerifyCall } from '../decide/stage.js';

const Str = (max: number) => Type.String({ maxLength: max });
const VerifyBody = Type.Object({
  proof_bundle: Type.Unknown(),
  required_scope: Str(200),
  context: Type.Optional(Type.Object({
    method: Type.Optional(Str(16)),
    path: Type.Optional(Str(2048)),
    client_ip: Type.Optional(Str(64)),
    tenant: Type.Optional(Str(128)),
    amount: Type.Optional(Str(32)),
    currency: Type.Optional(Str(3)),
    body_sha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
    query_sha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
    tool: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,128}$' })),
  }, { additionalProperties: false })),
  idempotency: Type.Optional(Type.Object({
    key: Type.String({ pattern: IDEMPOTENCY_KEY_PATTERN.source }),
    request_sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    lease_seconds: Type.Integer({
      minimum: IDEMPOTENCY_LIMITS.minLeaseSeconds, maximum: IDEMPOTENCY_LIMITS.maxLeaseSeconds }),
  }, { additionalProperties: false })),
}, { additionalProperties: false });

/**
 * Stands in for a body that is not valid JSON: it fails the schema like any
 * bad body, so decide() authenticates first (a bad key is 401 even then).
 */
const INVALID_JSON_BODY: Readonly<Record<string, never>> = Object.freeze({});

/**
 * The verify request the schema accepted, or the 400 `invalid_request` that names the field
 * that is missing or not valid (decide() answers it after authenticating the key).
 */
function verifyBody(body: unknown, validationError: Error | undefined): VerifyRequest | ServiceError {
  if (body === INVALID_JSON_BODY) return new ServiceError(
    'invalid_request', 'The request body is not valid JSON.', { field: 'body' });
  // `satisfies`: the schema's type must fit the protocol's request type (src/protocol.ts).
  if (!validationError && (
    body as Partial<VerifyRequest> | undefined)?.proof_bundle !== undefined) return body as Static<typeof VerifyBody> satisfies VerifyRequest;
  const v = (validationError as { validation?: { instancePath?: string; params?: Record<string,
    unknown> }[] } | undefined)?.validation?.[0];
  const field = ['body', v?.instancePath?.replace(/^\//, '').replace(/\//g, '.'), v?.params?.missingProperty ??
    v?.params?.additionalProperty]
    .filter((x) => typeof x === 'string' && x !== '').join('.');
  const named = field === 'body' && !v ? 'body.proof_bundle' : field;
  return new ServiceError('invalid_request', `${named} is missing or not valid.`, { field: named });
}

/** The verify route, defined once (api/route.ts): the hook lets it through, the pipeline authenticates. */
export const VERIFY_ROUTES = {
  verifyProof: defineRoute({
    method: 'POST', url: VERIFY_PATH, auth: 'none',
    schema: { body: VerifyBody, tags: ['verify'] },
    operation: {
      ...op('verifyProof', 'Verify a proof (spec 4.13)',
        'Answers a decision: allow, deny or indeterminate, with a stable reason. Metered, checked against revocation, '
        + 'recorded in the audit trail. A 400 means the proof is bad or spent. With an `idempotency` block, an allow '
        + 'claims the key or replays its recorded answer (unbilled); 409 and 422 are the ledger\'s refusals.',
        S.VerifyResult, ['invalid_challenge', 'invalid_proof', 'proof_stale', 'invalid_signature', 'invalid_scopes',
          'credits_exhausted', 'idempotency_in_flight', 'idempotency_key_reused']),
      handlerAuth: 'api_key',
    },
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers verify. */
export async function registerVerifyRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  await app.register(async (scope) => registerVerify(scope, ctx));
}

async function registerVerify(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  // In this encapsulated scope only: a JSON syntax error is handed to the handler instead of
  // answering 400 before the API key was looked at. Same parser (proto poisoning refused) otherwise.
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '' || body === undefined) { done(null, undefined); return; }
    jsonParser(req, body as string, (err, value) => {
      if (err && (err as { statusCode?: number }).statusCode === 400) done(null, INVALID_JSON_BODY);
      else done(err, value);
    });
  });
  // Validation errors are handed to decide(), which authenticates first: a bad key is 401 whatever the body.
  mount(app, VERIFY_ROUTES.verifyProof, async (request) => {
    const started = process.hrtime.bigint();
    const decisionLog = ctx.audit.decisionLog;
    let settled: { call: Readonly<VerifyCall>; outcome: VerifyResponse | ServiceError } | undefined;
    const opts = { log: request.log, ...(decisionLog ? { onSettled: (call: Readonly<VerifyCall>,
      outcome: VerifyResponse | ServiceError) => { settled = { call, outcome }; } } : {}) };
    const logDecision = (seconds: number): void => {
      if (!decisionLog || !settled) return;
      const { call, outcome } = settled;
      decisionLog.write({ requestId: request.id, now: call.now, auth: call.auth, scope: call.request?.required_scope,
        context: call.request?.context, outcome, latencyMs: seconds * 1000, decisionId: call.decisionId });
    };
    try {
      const result = await decide(ctx, request.headers[API_KEY_HEADER], verifyBody(request.body,
        request.validationError), opts);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      ctx.metrics.verifyDuration.observe({ outcome: result.decision }, seconds);
      logDecision(seconds);
      return result;
    } catch (err) {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      ctx.metrics.verifyDuration.observe({ outcome: 'error' }, seconds);
      logDecision(seconds);
      throw err;
    }
  }, { attachValidation: true });
}
