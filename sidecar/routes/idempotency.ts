/**
 * The idempotency ledger's API-key routes (docs/gateway.md#idempotency): after the upstream
 * answered a request whose verify claimed its key, the gateway records the answer under the
 * claim's id (`recordIdempotentResponse`); when no answer came (the upstream failed), it
 * releases the claim so that the agent's retry can claim the key again
 * (`releaseIdempotencyClaim`). Only the connection that claimed may do either.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { ServiceContext } from '../context.js';
import { ServiceError } from '../../src/errors.js';
import { IDEMPOTENCY_RECORD_PATH, IDEMPOTENCY_RELEASE_PATH } from '../../src/protocol.js';
import type { RecordedResponse } from '../../src/protocol.js';

const ClaimId = Type.String({ pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' });
const RecordBody = Type.Object({ claim_id: ClaimId, response: S.recordedResponseShape() },
  { additionalProperties: false });
const ReleaseBody = Type.Object({ claim_id: ClaimId }, { additionalProperties: false });

/** The ledger's routes, defined once (api/route.ts). */
export const IDEMPOTENCY_ROUTES = {
  recordIdempotentResponse: defineRoute({
    method: 'POST', url: IDEMPOTENCY_RECORD_PATH, auth: 'api_key',
    schema: { body: RecordBody, tags: ['verify'] },
    operation: op('recordIdempotentResponse', 'Record the answer to an idempotent request (API key)',
      'For the gateway: the upstream\'s answer (status, headers, base64 body; bounded, docs/gateway.md#idempotency) '
        + 'to the request whose verify claimed an idempotency key (`idempotency.claim_id` of the allow). Repeats of '
        + 'the same request replay it until `expires_at` (SIDECAR_IDEMPOTENCY_RETENTION_HOURS).',
      S.IdempotencyRecorded, ['idempotency_claim_not_found']),
  }),
  releaseIdempotencyClaim: defineRoute({
    method: 'POST', url: IDEMPOTENCY_RELEASE_PATH, auth: 'api_key',
    schema: { body: ReleaseBody, tags: ['verify'] },
    operation: op('releaseIdempotencyClaim', 'Release an idempotency claim (API key)',
      'For the gateway: the request whose verify claimed the key got no upstream answer; the key is free again.',
      S.IdempotencyReleased, ['idempotency_claim_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the ledger's routes. */
export async function registerIdempotencyRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, IDEMPOTENCY_ROUTES.recordIdempotentResponse, async (request) => {
    const { claim_id: claimId, response } = request.body as { claim_id: string; response: RecordedResponse };
    const expiresAt = ctx.clock() + ctx.config.idempotencyRetentionHours * 3600_000;
    const done = await ctx.store.idempotency.complete(request.apiKey!.connectionId, claimId, {
      status: response.status, headers: response.headers, body: response.body, bodyOmitted: response.body_omitted,
    }, expiresAt);
    if (!done) throw new ServiceError('idempotency_claim_not_found');
    return { claim_id: claimId, expires_at: new Date(expiresAt).toISOString() };
  });
  mount(app, IDEMPOTENCY_ROUTES.releaseIdempotencyClaim, async (request) => {
    const { claim_id: claimId } = request.body as { claim_id: string };
    if (!await ctx.store.idempotency.release(request.apiKey!.connectionId, claimId)) {
      throw new ServiceError('idempotency_claim_not_found');
    }
    return { claim_id: claimId, released: true as const };
  });
}
