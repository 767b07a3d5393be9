/**
 * The OpenID AuthZEN Authorization API 1.0 (docs/authzen.md): access
 * evaluation, access evaluations (batch, three semantics), action search and
 * the PDP metadata document. Authenticated with the platform's API key, like
 * verify. Every evaluation runs the one decision pipeline (`authzen/evaluate.ts`).
 * A whole-request failure is an HTTP error in the API's error shape; a failed
 * batch item is `decision: false` with the error in its context; an allow is
 * the only `true`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as A from '../api/authzen-schemas.js';
import {
  AUTHZEN_MAX_BATCH, AUTHZEN_PATHS, EVALUATIONS_SEMANTICS, entityError, invalid, resolveEvaluation, stopsAfter,
} from '../../src/authzen.js';
import type { AuthzenDecision, EvaluationsSemantic } from '../../src/authzen.js';
import { ServiceError } from '../../src/errors.js';
import { API_KEY_HEADER } from '../../src/protocol.js';
import type { ServiceContext } from '../context.js';
import { evaluate, toDecision } from '../authzen/evaluate.js';
import type { EvaluationOutcome } from '../authzen/evaluate.js';
import { searchActions } from '../authzen/search.js';

const TAGS = ['authzen'];
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The AuthZEN routes, defined once (api/route.ts). */
export const AUTHZEN_ROUTES = {
  accessEvaluation: defineRoute({
    method: 'POST', url: AUTHZEN_PATHS.evaluation, auth: 'api_key', schema: { tags: TAGS },
    operation: { ...op('accessEvaluation', 'AuthZEN access evaluation',
      'One decision: a grant check (no proof: nothing is consumed) or, with `context.proof`, a proof verification '
      + '(exactly verify). `true` only for an allow; a deny is `false` with its reason; an item that cannot be '
      + 'evaluated is `false` with `context.error`; no decision at all is 503 `evaluation_indeterminate`.',
      A.AuthzenDecision, ['credits_exhausted', 'evaluation_indeterminate']), body: A.AuthzenEvaluationRequest },
  }),
  accessEvaluations: defineRoute({
    method: 'POST', url: AUTHZEN_PATHS.evaluations, auth: 'api_key', schema: { tags: TAGS },
    operation: { ...op('accessEvaluations', 'AuthZEN access evaluations (batch)',
      `Up to ${AUTHZEN_MAX_BATCH} evaluations in order, with the top-level subject, action, resource and context as `
      + 'defaults, and `options.evaluations_semantic` `execute_all` (default), `deny_on_first_deny` or '
      + '`permit_on_first_permit` (the answer stops after the deciding item). Without `evaluations`: one evaluation.',
      A.AuthzenDecisions, ['batch_too_large', 'credits_exhausted', 'evaluation_indeterminate']),
    body: A.AuthzenEvaluationsRequest },
  }),
  actionSearch: defineRoute({
    method: 'POST', url: AUTHZEN_PATHS.searchAction, auth: 'api_key', schema: { tags: TAGS },
    operation: { ...op('actionSearch', 'AuthZEN action search',
      'The scopes the subject agent may use now on the resource with the context: each scope of its delegation for '
      + 'which a grant check (not recorded) allows. One page.',
      A.AuthzenActionSearchResult, ['agent_not_found', 'credits_exhausted', 'evaluation_indeterminate']),
    body: A.AuthzenActionSearchRequest },
  }),
  authzenConfiguration: defineRoute({
    method: 'GET', url: AUTHZEN_PATHS.metadata, auth: 'none', schema: { tags: TAGS },
    operation: op('authzenConfiguration', 'AuthZEN PDP metadata',
      'The endpoints this sidecar serves, under `SIDECAR_PUBLIC_URL` (else the URL the request was sent to).',
      A.AuthzenConfiguration),
  }),
} as const satisfies Record<string, RouteSpec>;

/** The base URL of the metadata: `SIDECAR_PUBLIC_URL`, else the request's scheme and host. */
export function baseUrl(ctx: ServiceContext, request: FastifyRequest): string {
  return ctx.config.publicUrl ?? `${request.protocol}://${request.host}`;
}

/** One evaluation's answer; no decision at all is 503 `evaluation_indeterminate` (never a `true`). */
function single(o: EvaluationOutcome): AuthzenDecision {
  if (o.kind === 'indeterminate') {
    throw new ServiceError('evaluation_indeterminate', undefined, { reason: o.answer.decision_reason,
      decision_id: o.answer.decision_id });
  }
  return toDecision(o);
}

/** The semantic of `options`, or a 400. */
function semanticOf(options: unknown): EvaluationsSemantic {
  if (options === undefined) return 'execute_all';
  if (!isObject(options)) throw invalid('options');
  const s = options.evaluations_semantic;
  if (s === undefined) return 'execute_all';
  if (typeof s !== 'string' || !(EVALUATIONS_SEMANTICS as readonly string[]).includes(s)) {
    throw invalid('options.evaluations_semantic', `must be one of ${EVALUATIONS_SEMANTICS.join(', ')}`);
  }
  return s as EvaluationsSemantic;
}

/** Most results of one action search page (and the default `page.limit`). */
export const SEARCH_PAGE_MAX = 100;

/**
 * The search page asked for: `page.limit` (0–{@link SEARCH_PAGE_MAX}) and `page.token` (a
 * `next_token` of this sidecar: `o` and the offset); a 400 naming the member otherwise.
 */
function pageOf(page: unknown): { offset: number; limit: number } {
  if (page === undefined) return { offset: 0, limit: SEARCH_PAGE_MAX };
  if (!isObject(page)) throw invalid('page');
  const { token, limit } = page;
  const n = limit as number;
  if (limit !== undefined && !(Number.isInteger(n) && n >= 0 && n <= SEARCH_PAGE_MAX)) {
    throw invalid('page.limit', `must be an integer from 0 to ${SEARCH_PAGE_MAX}`);
  }
  let offset = 0;
  if (token !== undefined && token !== '') {
    const m = typeof token === 'string' ? /^o([0-9]{1,4})$/.exec(token) : null;
    if (!m) throw invalid('page.token', 'is not a next_token of this sidecar');
    offset = Number(m[1]);
  }
  return { offset, limit: (limit as number | undefined) ?? SEARCH_PAGE_MAX };
}

/** Registers the AuthZEN routes. */
export async function registerAuthzenRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  const opts = (request: FastifyRequest) => ({ log: request.log, requestId: request.id });
  const body = (request: FastifyRequest): Record<string, unknown> => {
    if (!isObject(request.body)) throw invalid('body', 'must be a JSON object');
    return request.body;
  };

  mount(app, AUTHZEN_ROUTES.accessEvaluation, async (request) => {
    const e = resolveEvaluation(body(request), {}, '');
    if (e instanceof ServiceError) throw e;
    return single(await evaluate(ctx, request.headers[API_KEY_HEADER], e, opts(request)));
  });

  mount(app, AUTHZEN_ROUTES.accessEvaluations, async (request) => {
    const b = body(request);
    const semantic = semanticOf(b.options);
    const items = b.evaluations;
    if (items !== undefined && !Array.isArray(items)) throw invalid('evaluations');
    if (items === undefined || items.length === 0) {
      const e = resolveEvaluation(b, {}, '');
      if (e instanceof ServiceError) throw e;
      return single(await evaluate(ctx, request.headers[API_KEY_HEADER], e, opts(request)));
    }
    if (items.length > AUTHZEN_MAX_BATCH) {
      throw new ServiceError('batch_too_large', undefined, { max: AUTHZEN_MAX_BATCH, evaluations: items.length });
    }
    // Every item is checked before any is evaluated: a malformed batch evaluates nothing.
    const resolved = items.map((item, i) => {
      if (!isObject(item)) throw invalid(`evaluations[${i}]`);
      const e = resolveEvaluation(item, b, `evaluations[${i}].`);
      if (e instanceof ServiceError) throw e;
      return e;
    });
    const evaluations: AuthzenDecision[] = [];
    for (const e of resolved) {
      const d = toDecision(await evaluate(ctx, request.headers[API_KEY_HEADER], e, opts(request)));
      evaluations.push(d);
      if (stopsAfter(semantic, d)) break;
    }
    return { evaluations };
  });

  mount(app, AUTHZEN_ROUTES.actionSearch, async (request) => {
    const b = body(request);
    const bad = entityError(b.subject, 'subject', 'entity') ?? entityError(b.resource, 'resource', 'entity')
      ?? (b.context !== undefined && !isObject(b.context) ? invalid('context') : null);
    if (bad) throw bad;
    const page = pageOf(b.page);
    const names = await searchActions(ctx, request.headers[API_KEY_HEADER], request.apiKey!, b, opts(request));
    const shown = names.slice(page.offset, page.offset + page.limit);
    const next = page.offset + shown.length < names.length ? `o${page.offset + shown.length}` : '';
    return { page: { next_token: next, count: shown.length, total: names.length },
      results: shown.map((name) => ({ name })) };
  });

  mount(app, AUTHZEN_ROUTES.authzenConfiguration, async (request) => {
    const base = baseUrl(ctx, request);
    return {
      policy_decision_point: base,
      access_evaluation_endpoint: base + AUTHZEN_PATHS.evaluation,
      access_evaluations_endpoint: base + AUTHZEN_PATHS.evaluations,
      search_action_endpoint: base + AUTHZEN_PATHS.searchAction,
    };
  });
}
