/**
 * Prometheus metrics of one sidecar instance (prom-client, a registry per
 * instance, served at `GET /metrics` on the main port). Names follow
 * Prometheus conventions: `agent_authz_` prefix, `_total` only on counters,
 * base units (`_seconds`, `_dollars`). docs/operations.md lists every metric
 * family served (between its `metrics:begin`/`metrics:end` markers);
 * test/sidecar/ops/metrics.test.ts checks that list against `/metrics` both
 * ways and lints the exposition.
 *
 * Label values are bounded: decisions and reasons come from fixed tables,
 * error codes from src/errors.ts, and the credits gauge keeps at most
 * {@link CREDITS_GAUGE_MAX_SERIES} series.
 */
import client from 'prom-client';

/** Verify latency buckets: 0.1 ms to 1 s. */
export const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/**
 * Default Node.js metrics that prom-client exports as gauges named `*_total`
 * (against the convention that `_total` marks a counter; `promtool check
 * metrics` flags them). Removed: the per-type gauges without the suffix
 * remain (`nodejs_active_handles` etc.) and sum to the same totals.
 */
export const DROPPED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;

/** Series cap of the per-account credits gauge (the lowest balances). */
export const CREDITS_GAUGE_MAX_SERIES = 20;

/**
 * Results of a send-code request (`agent_authz_login_codes_total`): the code was e-mailed; refused
 * by the client IP's, the e-mail address's or the global limit (`SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE`);
 * the mailer failed.
 */
export const LOGIN_CODE_RESULTS = ['sent', 'ip_limited', 'address_limited', 'global_limited', 'mail_failed'] as const;

/** One of {@link LOGIN_CODE_RESULTS}. */
export type LoginCodeResult = typeof LOGIN_CODE_RESULTS[number];

/** Async sources the gauges read at scrape time. */
export interface MetricSources {
  outboxStats(): Promise<{ pending: number; oldestPendingAt: number | null }>;
  lowestBalances(limit: number): Promise<{ accountId: string; creditsMicros: number }[]>;
  clock(): number;
}

/** The metric objects the sidecar updates. */
export interface SidecarMetrics {
  readonly registry: client.Registry;
  readonly verifyDecisions: client.Counter<'decision' | 'reason'>;
  readonly verifyErrors: client.Counter<'code'>;
  readonly verifyDuration: client.Histogram<'outcome'>;
  readonly presentDuration: client.Histogram<string>;
  readonly cryptoTasks: client.Counter<'op' | 'thread'>;
  readonly signDuration: client.Histogram<'kind'>;
  readonly challenges: client.Counter<'event'>;
  readonly cache: client.Counter<'cache' | 'result'>;
  readonly webhookDeliveries: client.Counter<'result'>;
  /** Send-code requests by {@link LoginCodeResult}. */
  readonly loginCodes: client.Counter<'result'>;
  readonly sqliteTx: client.Histogram<'result'>;
  /** Connects the scrape-time gauges to their sources. */
  bindSources(src: MetricSources): void;
}

/** Creates the metrics of one sidecar on a fresh registry. */
export function createMetrics(): SidecarMetrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
  const reg = [registry];
  let sources: MetricSources | undefined;

  const m: SidecarMetrics = {
    registry,
    verifyDecisions: new client.Counter({ name: 'agent_authz_verify_decisions_total',
      help: 'Verify decisions by decision (allow, deny, indeterminate) and reason.', labelNames: ['decision', 'reason'],
      registers: reg }),
    verifyErrors: new client.Counter({ name: 'agent_authz_verify_errors_total',
      help: 'Verify calls answered with a 4xx/5xx error, by error code.', labelNames: ['code'], registers: reg }),
    verifyDuration: new client.Histogram({ name: 'agent_authz_verify_duration_seconds',
      help: 'Server time of a verify call, by outcome (allow, deny, indeterminate, error).', labelNames: ['outcome'],
      buckets: LATENCY_BUCKETS, registers: reg }),
    presentDuration: new client.Histogram({ name: 'agent_authz_present_duration_seconds',
      help: 'Server time of a present call.', buckets: LATENCY_BUCKETS, registers: reg }),
    cryptoTasks: new client.Counter({ name: 'agent_authz_crypto_tasks_total',
      help: 'Hybrid signature tasks by op (verify, sign) and the thread that ran them (main, worker).',
      labelNames: ['op', 'thread'], registers: reg }),
    signDuration: new client.Histogram({ name: 'agent_authz_sign_duration_seconds',
      help: 'Time of one hybrid signature, by kind (proof, certificate).', labelNames: ['kind'],
      buckets: LATENCY_BUCKETS, registers: reg }),
    challenges: new client.Counter({ name: 'agent_authz_challenges_total',
      help: 'Challenges by lifecycle event: issued, consumed (by verify), expired (used after its expiry).',
      labelNames: ['event'], registers: reg }),
    cache: new client.Counter({ name: 'agent_authz_cache_requests_total',
      help: 'Decision-cache lookups by cache (revocation, certificate) and result (hit, miss).',
      labelNames: ['cache', 'result'], registers: reg }),
    webhookDeliveries: new client.Counter({ name: 'agent_authz_webhook_deliveries_total',
      help: 'Webhook delivery attempts by result (delivered, failed, dead, disabled).', labelNames: ['result'],
      registers: reg }),
    loginCodes: new client.Counter({ name: 'agent_authz_login_codes_total',
      help: `Send-code requests by result: ${LOGIN_CODE_RESULTS.join(', ')}.`, labelNames: ['result'],
      registers: reg }),
    sqliteTx: new client.Histogram({ name: 'agent_authz_sqlite_transaction_duration_seconds',
      help: 'SQLite write-transaction latency, by result (commit, rollback).', labelNames: ['result'],
      buckets: LATENCY_BUCKETS, registers: reg }),
    bindSources(src) { sources = src; },
  };

  // Scrape-time gauges read the store. A failing read keeps the previous value (the
  // scrape still succeeds); /readyz reports the store fault.
  const outbox = async (): Promise<{ pending: number; oldestPendingAt: number | null } | undefined> => {
    try { return sources ? await sources.outboxStats() : undefined; } catch { return undefined; }
  };
  new client.Gauge({
    name: 'agent_authz_webhook_outbox_depth', help: 'Webhook deliveries waiting to be delivered.', registers: reg,
    async collect() { const s = await outbox(); if (s) this.set(s.pending); },
  });
  new client.Gauge({
    name: 'agent_authz_webhook_oldest_pending_age_seconds', help: 'Age of the oldest undelivered webhook event (0 when none).', registers: reg,
    async collect() {
      const s = await outbox();
      if (s && sources) this.set(s.oldestPendingAt === null ? 0 : Math.max(0, (sources.clock() - s.oldestPendingAt) / 1000));
    },
  });
  new client.Gauge({
    name: 'agent_authz_credits_remaining_dollars',
    help: `Remaining credits of the ${CREDITS_GAUGE_MAX_SERIES} accounts with the lowest balances; label account is the first 8 characters of the account id.`,
    labelNames: ['account'], registers: reg,
    async collect() {
      if (!sources) return;
      let lowest: { accountId: string; creditsMicros: number }[];
      try { lowest = await sources.lowestBalances(CREDITS_GAUGE_MAX_SERIES); } catch { return; }
      this.reset();
      for (const b of lowest) this.set({ account: b.accountId.slice(0, 8) }, b.creditsMicros / 1_000_000);
    },
  });
  for (const event of ['issued', 'consumed', 'expired']) m.challenges.inc({ event }, 0);
  for (const result of LOGIN_CODE_RESULTS) m.loginCodes.inc({ result }, 0);
  for (const cache of ['revocation', 'certificate']) for (const result of ['hit', 'miss']) m.cache.inc({ cache, result }, 0);
  return m;
}
