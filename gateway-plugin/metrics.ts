/**
 * Prometheus metrics of one gateway instance (its own prom-client Registry,
 * never the global default registry).
 *
 * - `agent_authz_gateway_requests_total{outcome,reason}`: every request the
 *   gateway answered. `outcome` is `allowed`, `public`, or the refusal status
 *   (`400`, `401`, `403`, `413`, `500`, `502`, `503`); `reason` is the error
 *   code, the verify deny/reject reason (403), or the cause (503).
 * - `agent_authz_gateway_verify_duration_seconds{result}`: verify latency;
 *   `result` is allow, deny, rejected, indeterminate, error, timeout, network.
 * - `agent_authz_gateway_upstream_duration_seconds{status_class}`: upstream
 *   latency of forwarded requests (until the response is finished).
 * - `agent_authz_gateway_shadow_would_refuse_total{route,reason}`: requests
 *   of shadow-mode routes (shadow.ts) that were forwarded although they would
 *   have been refused; `route` is the route's pattern, `reason` as above (a
 *   missing proof is `proof_required`). Such requests are also counted in
 *   `requests_total` with `outcome="shadow"`.
 * - `agent_authz_gateway_fail_open_total`: tripwire, always exported, must
 *   stay 0. Only {@link guardForward} increments it: when a request reaches the
 *   forwarding step without a recorded allow/public decision (a bug), it is
 *   counted here AND refused instead of forwarded. Alert on any non-zero value.
 *
 * The standalone server adds prom-client's default process and Node.js
 * metrics with the same prefix ({@link collectGatewayDefaultMetrics}), minus
 * the gauges named `*_total` ({@link DROPPED_DEFAULT_METRICS}).
 */

import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { isErrorCode } from '../src/errors.js';
import { normalizeExposition } from '../src/prometheus.js';
import { DENY_CODES } from './outcome.js';

/** Metric name prefix. */
export const METRIC_PREFIX = 'agent_authz_gateway_';
/** Buckets of the verify-latency histogram (seconds). */
export const VERIFY_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Buckets of the upstream-latency histogram (seconds). */
export const UPSTREAM_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Default Node.js metrics that prom-client exports as gauges named `*_total`
 * (against the convention that `_total` marks a counter; `promtool check
 * metrics` flags them). Removed, as in the sidecar (sidecar/metrics.ts): the
 * per-type gauges without the suffix remain (`…_nodejs_active_handles` etc.)
 * and sum to the same totals.
 */
export const DROPPED_DEFAULT_METRICS: readonly string[] = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']
  .map((name) => `${METRIC_PREFIX}${name}`);

const KNOWN_CAUSES = new Set(['verify_timeout', 'verify_network', 'verify_bad_response', 'verify_unknown_decision',
  'unspecified', 'authorized', 'public', 'upstream_error', 'upstream_timeout']);
const BRAND: unique symbol = Symbol('agent-authz-gateway-metrics');

/**
 * The metrics of one gateway. Create with {@link createGatewayMetrics}.
 *
 * @example
 * ```ts
 * const metrics: GatewayMetrics = createGatewayMetrics();
 * app.get('/metrics', async (_req, reply) => reply.type(metrics.registry.contentType).send(await metrics.exposition()));
 * ```
 */
export interface GatewayMetrics {
  /** @internal brand checked by option validation. */
  readonly [BRAND]: true;
  /** The registry holding every gateway metric (serve it with {@link GatewayMetrics.exposition}). */
  readonly registry: Registry;
  /** The registry's Prometheus text exposition, with NaN spelled `NaN` (prom-client writes `Nan`). */
  exposition(): Promise<string>;
  /** `agent_authz_gateway_requests_total`. */
  readonly requests: Counter<'outcome' | 'reason'>;
  /** `agent_authz_gateway_verify_duration_seconds`. */
  readonly verifyDuration: Histogram<'result'>;
  /** `agent_authz_gateway_upstream_duration_seconds`. */
  readonly upstreamDuration: Histogram<'status_class'>;
  /** `agent_authz_gateway_shadow_would_refuse_total` (shadow mode; see file header). */
  readonly shadowWouldRefuse: Counter<'route' | 'reason'>;
  /** `agent_authz_gateway_fail_open_total` (tripwire; see file header). */
  readonly failOpen: Counter;
}

/**
 * Creates the gateway metrics in `registry` (default: a new private Registry,
 * never prom-client's global one). Pass them as the plugin's `metrics` option
 * to serve them yourself.
 *
 * @example
 * ```ts
 * const metrics = createGatewayMetrics();
 * await app.register(agentAuthzGateway, { ...options, metrics });
 * app.get('/metrics', async (_req, reply) => reply.type(metrics.registry.contentType).send(await metrics.exposition()));
 * ```
 */
export function createGatewayMetrics(registry: Registry = new Registry()): GatewayMetrics {
  const registers = [registry];
  const failOpen = new Counter({ name: `${METRIC_PREFIX}fail_open_total`,
    help: 'Requests that reached the forwarding step without an allow decision (must stay 0; such requests are '
      + 'refused).',
    registers });
  failOpen.inc(0);
  return {
    [BRAND]: true,
    registry,
    exposition: async () => normalizeExposition(await registry.metrics()),
    requests: new Counter({ name: `${METRIC_PREFIX}requests_total`,
      help: 'Requests answered by the gateway, by outcome and reason.', labelNames: ['outcome', 'reason'], registers }),
    verifyDuration: new Histogram({ name: `${METRIC_PREFIX}verify_duration_seconds`,
      help: 'Latency of verify calls to the sidecar.', labelNames: ['result'], buckets: [...VERIFY_BUCKETS],
      registers }),
    upstreamDuration: new Histogram({ name: `${METRIC_PREFIX}upstream_duration_seconds`,
      help: 'Latency of forwarded requests at the upstream.', labelNames: ['status_class'],
      buckets: [...UPSTREAM_BUCKETS], registers }),
    shadowWouldRefuse: new Counter({
      name: `${METRIC_PREFIX}shadow_would_refuse_total`,
      help: 'Requests of shadow-mode routes forwarded although they would have been refused, by route and reason.',
      labelNames: ['route', 'reason'], registers,
    }),
    failOpen,
  };
}

/**
 * Registers prom-client's default process and Node.js metrics in `registry`,
 * prefixed with {@link METRIC_PREFIX}, without {@link DROPPED_DEFAULT_METRICS}.
 * Call it once per registry (the standalone server does, for its metrics
 * listener).
 */
export function collectGatewayDefaultMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
}

/** True for a value made by {@link createGatewayMetrics}. */
export function isGatewayMetrics(value: unknown): value is GatewayMetrics {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/** Bounds a `reason` label to known values (anything else becomes `other`). */
export function reasonLabel(reason: string): string {
  return isErrorCode(reason) || DENY_CODES.has(reason) || KNOWN_CAUSES.has(reason) || /^verify_status_[1-5][0-9]{2}$/.test(reason) ? reason : 'other';
}

/** Counts one answered request. */
export function countRequest(metrics: GatewayMetrics, outcome: string, reason: string): void {
  metrics.requests.inc({ outcome, reason: reasonLabel(reason) });
}

/**
 * Counts one answered request of the proxy (`outcome`: its outcome and reason labels) and, when it was
 * forwarded at `forwardStart` (`performance.now()`), the upstream's time by the answer's status class.
 */
export function countAnswer(
  metrics: GatewayMetrics, outcome: readonly [string, string], status: number, forwardStart: number | undefined,
): void {
  countRequest(metrics, outcome[0], outcome[1]);
  if (forwardStart === undefined) return;
  metrics.upstreamDuration.observe(
    { status_class: `${Math.floor(status / 100)}xx` }, (performance.now() - forwardStart) / 1000);
}

/**
 * Counts one shadow-mode request that would have been refused in `shadow_would_refuse_total`
 * (`route`: the route's pattern); the caller counts it in `requests_total` with outcome `shadow`.
 */
export function countShadow(metrics: GatewayMetrics, route: string, reason: string): void {
  metrics.shadowWouldRefuse.inc({ route, reason: reasonLabel(reason) });
}

/**
 * The forwarding tripwire. Returns true when forwarding may proceed, i.e. the
 * request carries an explicit allow, is on a public route, or is a shadow-mode
 * route's (which the pipeline only decides for routes configured so).
 * Otherwise counts `fail_open_total` and returns false; the caller must refuse the request.
 */
export function guardForward(metrics: GatewayMetrics, decision: 'allow' | 'public' | 'shadow' | undefined): boolean {
  if (decision === 'allow' || decision === 'public' || decision === 'shadow') return true;
  metrics.failOpen.inc();
  return false;
}
