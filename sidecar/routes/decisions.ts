/**
 * Explained decisions (docs/authzen.md, "Explained decisions"): the
 * explanation of a verify or AuthZEN decision by its `decision_id`, for the
 * platform whose connection asked (API key) or the account holder (session).
 * Another account's or connection's decision is 404 `decision_not_found`,
 * like one that does not exist.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import { DecisionExplanation } from '../api/authzen-schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';

const IdParam = Type.Object({ decision_id: Type.String({ maxLength: 100 }) });
const DESCRIPTION = 'The stage that decided, the certificate, the scope asked and granted, each constraint with the '
  + 'context value and its limit, the approval state, the budget and call counters at that moment and, for a deny, '
  + 'the smallest change that would have allowed it. Never a secret or a proof.';

/** The decision routes, defined once (api/route.ts). */
export const DECISIONS_ROUTES = {
  getDecision: defineRoute({
    method: 'GET', url: '/v1/service/decisions/:decision_id', auth: 'api_key',
    schema: { params: IdParam, tags: ['authzen'] },
    operation: op('getDecision', 'Explain a decision (API key)',
      `A decision of the API key's connection. ${DESCRIPTION}`, DecisionExplanation, ['decision_not_found']),
  }),
  getPersonalDecision: defineRoute({
    method: 'GET', url: '/v1/service/decisions/personal/:decision_id', auth: 'session', permission: 'audit_read',
    schema: { params: IdParam, tags: ['authzen'] },
    operation: op('getPersonalDecision', 'Explain a decision (account holder)',
      `A decision made for the signed-in account. ${DESCRIPTION}`, DecisionExplanation, ['decision_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the decision routes. */
export async function registerDecisionRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  const find = async (id: string, owns: (d: { accountId: string; connectionId: string }) => boolean) => {
    const d = await ctx.store.decisions.getExplanation(id);
    if (!d || !owns(d)) throw new ServiceError('decision_not_found');
    return d.explanation;
  };
  mount(app, DECISIONS_ROUTES.getDecision, async (request) =>
    find((request.params as { decision_id: string }).decision_id,
      (d) => d.connectionId === request.apiKey!.connectionId));
  mount(app, DECISIONS_ROUTES.getPersonalDecision, async (request) =>
    find((request.params as { decision_id: string }).decision_id, (d) => d.accountId === request.session!.accountId));
}
