/**
 * `buildServer(config)`: creates the sidecar (a Fastify instance with every
 * `/v1` route, health, metrics and the webhook worker) without listening.
 * Only `main.ts` calls `listen`.
 */
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyServerOptions } from 'fastify';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { SidecarConfig } from './config/index.js';
import type { Clock, ServiceContext } from './context.js';
import type { Store } from './store/types.js';
import { openStore } from './store/index.js';
import { createStoreMetrics } from './store/metrics.js';
import { checkMasterKey } from './store/key-check.js';
import { followChanges } from './store/follow.js';
import { createSecretBox } from './secrets.js';
import { createLogMailer, createSmtpMailer } from './mail.js';
import type { Mailer } from './mail.js';
import { createMetrics } from './metrics.js';
import { DecisionCaches } from './decide/caches.js';
import { createProofCrypto } from './crypto/pool.js';
import type { PoolLimits } from './crypto/pool.js';
import { installErrorHandlers } from './http/errors.js';
import { lazyCompilers } from './http/compilers.js';
import { answerClientError, answerConnect, answerExpectationFailed, frameworkErrorCode } from '../runtime/client-error.js';
import { installLingeringClose } from '../runtime/linger.js';
import { installUnusedConnectionClose } from '../runtime/unused.js';
import { ERRORS, errorBody } from '../src/errors.js';
import { installAuth } from './http/auth.js';
import { registerAuthRoutes } from './routes/auth.js';
import { registerOnboardingRoutes } from './routes/onboarding.js';
import { registerPlatformRoutes } from './routes/platforms.js';
import { registerDelegationRoutes } from './routes/delegations.js';
import { registerSubDelegationRoutes } from './routes/subdelegations.js';
import { registerProofRoutes } from './routes/proofs.js';
import { registerVerifyRoutes } from './routes/verify.js';
import { registerAuthzenRoutes } from './routes/authzen.js';
import { registerDecisionRoutes } from './routes/decisions.js';
import { registerIdempotencyRoutes } from './routes/idempotency.js';
import { registerAuditRoutes } from './routes/audit.js';
import { registerWebhookRoutes } from './routes/webhooks.js';
import { registerOrganisationRoutes } from './routes/organisations.js';
import { registerInvitationRoutes } from './routes/invitations.js';
import { registerPublishingRoutes } from './routes/publishing.js';
import { registerConnectRoutes } from './routes/connect.js';
import { domainResolver } from './publishing/dns.js';
import { startDomainRecheck } from './publishing/recheck.js';
import { registerApprovalRoutes } from './routes/approvals.js';
import { registerLimitRoutes } from './routes/limits.js';
import { startApprovalExpiry } from './approvals/expiry.js';
import { registerConsoleRoutes } from './routes/console.js';
import { buildMetricsServer, registerHealthRoutes } from './routes/health.js';
import { WebhookWorker } from './webhooks/worker.js';
import { LOG_REDACT_PATHS } from './log.js';
import { ERROR_SCHEMA, OPENAPI_INFO, OPENAPI_OPTIONS, attachOperation } from './openapi.js';
import { RESPONSE_SCHEMAS } from './api/schemas.js';
import { createAuditServices } from './audit/services.js';

/** Name of the generated development master-key file in the data directory. */
export const MASTER_KEY_FILE = 'master.key';

/**
 * Injectable parts, for tests and embedding.
 *
 * ```ts
 * const app = await buildServer(loadConfig(process.env), { startWorkers: false, logger: false });
 * ```
 */
export interface BuildOptions {
  /** Clock in Unix ms (default `Date.now`). */
  clock?: Clock;
  /** Mailer (default: SMTP from config, or the development log mailer). */
  mailer?: Mailer;
  /** Store (default: SQLite file in the data directory). */
  store?: Store;
  /** Fastify logger options (default: JSON logs at the configured level, with redaction). */
  logger?: FastifyServerOptions['logger'];
  /** Pino destination stream (tests capture logs with it). */
  logStream?: NodeJS.WritableStream;
  /** Start the webhook worker and the retention job (default true). */
  startWorkers?: boolean;
  /** Webhook worker tuning (tests). */
  webhook?: { timeoutMs?: number; pollIntervalMs?: number; leaseMs?: number };
  /** Crypto pool limits (tests). */
  cryptoLimits?: Partial<PoolLimits>;
  /**
   * When the route schemas are compiled: `'first-use'` (default) each on its route's first request,
   * `'ready'` all before the server is ready (http/compilers.ts).
   */
  compileSchemas?: 'first-use' | 'ready';
}

/**
 * The sidecar instance: a Fastify server with its service context, and the separate metrics
 * server when `SIDECAR_METRICS_LISTEN` is set (not listening; main.ts listens on it, and
 * closing the sidecar closes it).
 *
 * ```ts
 * const app: SidecarServer = await buildServer(config);
 * const res = await app.inject({ method: 'GET', url: '/readyz' });   // or app.listen({ port: 8700 })
 * await app.close();                                                  // stops workers, closes the store
 * ```
 */
export type SidecarServer = FastifyInstance & { ctx: ServiceContext; metricsServer: FastifyInstance | null };

/** Reads the master key from config, or creates/reads `<dataDir>/master.key` (mode 0600). */
export function resolveMasterKey(config: SidecarConfig): { key: Uint8Array; generated: boolean; file: string | null } {
  if (config.masterKey) return { key: config.masterKey, generated: false, file: null };
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  fs.mkdirSync(config.dataDir, { recursive: true });
  try {
    const raw = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
    if (raw.length !== 32) throw new TypeError(`${file}: not base64 of 32 bytes`);
    return { key: new Uint8Array(raw), generated: false, file };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = crypto.randomBytes(32);
  fs.writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  return { key: new Uint8Array(key), generated: true, file };
}

/** Accepts an incoming `X-Request-Id` when it is short and plain; otherwise makes one. */
function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const h = req.headers['x-request-id'];
  return typeof h === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(h) ? h : crypto.randomUUID();
}

/**
 * Creates the sidecar. Call `listen` yourself (see main.ts) or use `inject` in tests.
 *
 * ```ts
 * import { buildServer, loadConfig } from 'agent-authz/sidecar';
 *
 * const app = await buildServer(loadConfig({ ...process.env, SIDECAR_DATA_DIR: './data' }));
 * await app.listen({ host: '127.0.0.1', port: 8700 });
 * ```
 */
export async function buildServer(config: SidecarConfig, opts: BuildOptions = {}): Promise<SidecarServer> {
  const clock = opts.clock ?? Date.now;
  const logger = opts.logger ?? {
    level: config.logLevel,
    redact: { paths: [...LOG_REDACT_PATHS], censor: '[redacted]' },
    ...(opts.logStream ? { stream: opts.logStream } : {}),
  };
  const compilers = lazyCompilers();
  const app = Fastify({
    logger,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: config.trustProxy.length ? config.trustProxy : false,
    genReqId: requestId,
    logController: new Fastify.LogController({ requestIdLogLabel: 'request_id' }),
    routerOptions: { maxParamLength: 200 },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    schemaController: { compilersFactory: compilers.compilersFactory }, // compiled on first use (http/compilers.ts)
    // During a graceful shutdown, requests already on a connection are answered normally (with
    // `Connection: close`) instead of a bare 503; /readyz reports the shutdown (routes/health.ts).
    return503OnClosing: false,
    // Refusals before routing, in the error shape too (runtime/client-error.ts): an undecodable URL
    // or an over-long path parameter (Fastify's router), a request Node's HTTP parser rejects.
    frameworkErrors: (err, request, reply: FastifyReply) => {
      const { code, message } = frameworkErrorCode(err.code);
      void reply.code(ERRORS[code].status).header('cache-control', 'no-store').header('x-request-id', request.id)
        .type('application/json; charset=utf-8').send(errorBody(code, message));
    },
    clientErrorHandler: (err, socket) => answerClientError(err, socket),
  });

  answerExpectationFailed(app.server);
  answerConnect(app.server, 'method_not_allowed', 'CONNECT is not supported.');
  // A refusal before the body was read (413, an early 401) reaches a client still sending it (runtime/linger.ts).
  installLingeringClose(app.server);
  installUnusedConnectionClose(app.server); // a close does not wait for connections that never sent a byte
  const metrics = createMetrics();
  const master = resolveMasterKey(config);
  if (master.generated) app.log.warn({ file: master.file },
    'SIDECAR_MASTER_KEY is not set: generated a development master key file. Set SIDECAR_MASTER_KEY in production.');
  else if (master.file) app.log.warn({ file: master.file }, 'SIDECAR_MASTER_KEY is not set: using the development master key file.');
  if (config.webhookAllowInsecure) app.log.warn('SIDECAR_WEBHOOK_ALLOW_INSECURE=1: webhooks may go to http and '
    + 'private addresses. FOR DEVELOPMENT AND TESTS ONLY.');
  if (config.insecureCookies) app.log.warn('SIDECAR_INSECURE_COOKIES=1: session cookies are sent without Secure. FOR LOOPBACK DEVELOPMENT ONLY.');

  const storeMetrics = createStoreMetrics(metrics.registry, (s, ok) => metrics.sqliteTx.observe({ result: ok ? 'commit' : 'rollback' }, s));
  const store = opts.store ?? await openStore({ dataDir: config.dataDir, database: config.database,
    monitor: storeMetrics.monitor, auditChain: config.audit.chain, sqliteSynchronous: config.sqliteSynchronous });
  storeMetrics.bindPool(() => store.poolStats());
  const box = createSecretBox(master.key);
  try {
    await checkMasterKey(store, box);
  } catch (err) {
    if (!opts.store) await store.close();
    throw err;
  }
  const audit = await createAuditServices({
    config: config.audit, store, box, clock, log: app.log, registry: metrics.registry, serviceVersion: OPENAPI_INFO.info?.version ?? 'unknown',
  });
  // Label children bound once: one counter increment per signature task, without a label lookup.
  const cryptoTasks = {
    verify: { main: metrics.cryptoTasks.labels('verify', 'main'), worker: metrics.cryptoTasks.labels('verify', 'worker') },
    sign: { main: metrics.cryptoTasks.labels('sign', 'main'), worker: metrics.cryptoTasks.labels('sign', 'worker') },
  };
  let worker: WebhookWorker | undefined;
  const ctx: ServiceContext = {
    config, store, box, clock, metrics, audit,
    mailer: opts.mailer ?? (config.smtpUrl ? createSmtpMailer(config.smtpUrl, config.mailFrom) : createLogMailer(app.log)),
    log: app.log,
    caches: new DecisionCaches(),
    crypto: createProofCrypto(config.cryptoWorkers, {
      log: app.log, onTask: (op, thread) => cryptoTasks[op][thread].inc(),
      ...(opts.cryptoLimits ? { limits: opts.cryptoLimits } : {}),
    }),
    keys: {
      csrf: crypto.createSecretKey(box.subkey('csrf')),
      loginCode: crypto.createSecretKey(box.subkey('login-code')),
      apiKey: crypto.createSecretKey(box.subkey('api-key')),
    },
    dns: domainResolver({ servers: config.dnsServers, timeoutMs: 2_000, tries: 2 }),
    nudgeWebhooks: () => worker?.nudge(),
  };
  metrics.bindSources({
    outboxStats: () => store.outbox.stats(),
    lowestBalances: (n) => store.accounts.lowestBalances(n),
    clock,
  });
  for (const id of await store.delegations.revokedCertificateIds()) ctx.caches.markRevoked(id);
  // Changes other replicas commit (a shared database): drop what they make stale; while the feed
  // is down the caches read through to the store (sidecar/store/follow.ts).
  followChanges(store, {
    revoked: (id) => ctx.caches.markRevoked(id), keysChanged: (id) => ctx.caches.apiKeys.invalidateConnection(id),
    suspend: () => ctx.caches.suspend(), resume: (ids) => ctx.caches.resume(ids),
  }, { onResync: () => storeMetrics.monitor.resync?.(),
    onError: (err) => app.log.warn({ err: { message: (err as Error).message } },
      'change feed resync failed; caches keep reading through') });

  app.decorate('ctx', ctx);
  // Callback-style hooks (here and in installAuth): no promise per request on the hot path.
  app.addHook('onSend', (request, reply, payload, done) => { void reply.header('x-request-id', request.id); done(null, payload); });
  await app.register(cookie);
  await app.register(swagger, OPENAPI_OPTIONS);
  // The documented success schemas serialize the 200 bodies (api/operations.ts, openapi.ts).
  for (const schema of [ERROR_SCHEMA, ...RESPONSE_SCHEMAS]) app.addSchema(schema);
  app.addHook('onRoute', attachOperation);
  // Only JSON bodies: without Fastify's text/plain parser, any other type is 415 unsupported_media_type.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '' || body === undefined) { done(null, undefined); return; }
    jsonParser(req, body as string, done);
  });
  installErrorHandlers(app, (code, url) => { if (url.startsWith('/v1/service/verify')) metrics.verifyErrors.inc({ code }); });
  installAuth(app, ctx);

  await registerHealthRoutes(app, ctx);
  app.get('/openapi.json', { schema: { hide: true }, config: { auth: 'none' } }, async () => app.swagger());
  await registerAuthRoutes(app, ctx);
  await registerOnboardingRoutes(app, ctx);
  await registerPlatformRoutes(app, ctx);
  await registerDelegationRoutes(app, ctx);
  await registerSubDelegationRoutes(app, ctx);
  await registerProofRoutes(app, ctx);
  await registerVerifyRoutes(app, ctx);
  await registerAuthzenRoutes(app, ctx);
  await registerDecisionRoutes(app, ctx);
  await registerIdempotencyRoutes(app, ctx);
  await registerAuditRoutes(app, ctx);
  await registerWebhookRoutes(app, ctx);
  await registerOrganisationRoutes(app, ctx);
  await registerInvitationRoutes(app, ctx);
  await registerPublishingRoutes(app, ctx);
  await registerConnectRoutes(app, ctx);
  await registerApprovalRoutes(app, ctx);
  await registerLimitRoutes(app, ctx);
  await registerConsoleRoutes(app, ctx);

  let retention: NodeJS.Timeout | undefined;
  let stopApprovalExpiry: (() => void) | undefined;
  let stopDomainRecheck: (() => void) | undefined;
  if (opts.startWorkers !== false) {
    worker = new WebhookWorker({
      store: store.outbox, box, clock, allowInsecure: config.webhookAllowInsecure, logger: app.log,
      ...(opts.webhook?.timeoutMs ? { timeoutMs: opts.webhook.timeoutMs } : {}),
      ...(opts.webhook?.pollIntervalMs ? { pollIntervalMs: opts.webhook.pollIntervalMs } : {}),
      ...(opts.webhook?.leaseMs ? { leaseMs: opts.webhook.leaseMs } : {}),
      onResult: (result) => metrics.webhookDeliveries.inc({ result }),
    });
    app.addHook('onReady', async () => {
      worker!.start();
      audit.start();
      retention = setInterval(() => { void runRetention(ctx).catch((err: unknown) => app.log.error({ err }, 'retention job failed')); }, 3600_000);
      retention.unref();
      stopApprovalExpiry = startApprovalExpiry(ctx);
      stopDomainRecheck = startDomainRecheck(ctx);
    });
  }
  if (opts.compileSchemas === 'ready') app.addHook('onReady', async () => { compilers.compilePending(); });
  // Start the crypto workers with the server, so the first present or verify does not wait for them.
  app.addHook('onReady', async () => { ctx.crypto.warm(); });
  const metricsServer = config.metricsListen === null ? null : await buildMetricsServer(ctx);
  app.decorate('metricsServer', metricsServer);
  app.addHook('onClose', async () => {
    // After the main listener's connections are done: scrapes keep working during a graceful shutdown.
    await metricsServer?.close();
    if (retention) clearInterval(retention);
    stopApprovalExpiry?.();
    stopDomainRecheck?.();
    await worker?.stop();
    await audit.stop();
    await ctx.crypto.close();
    ctx.mailer.close();
    await store.close();
  });
  return app as unknown as SidecarServer;
}

/**
 * The retention job: purges spent or expired challenges older than
 * `SIDECAR_CHALLENGE_RETENTION_HOURS`, and audit rows older than
 * `SIDECAR_AUDIT_RETENTION_DAYS` when that is set (0 keeps audit forever), whole
 * chain prefixes at a time, each leaving a signed anchor checkpoint, and rate-limit
 * windows that have ended, and idempotency records past their expiry or lease.
 */
export async function runRetention(ctx: ServiceContext): Promise<{ challenges: number; audit: number }> {
  const now = ctx.clock();
  await ctx.store.accounts.purgeRateLimits(now);
  const challenges = await ctx.store.proofs.purgeChallenges(now - ctx.config.challengeRetentionHours * 3600_000);
  await ctx.store.idempotency.purgeIdempotency(now);
  const audit = ctx.config.auditRetentionDays > 0 ? await ctx.audit.prune(now - ctx.config.auditRetentionDays * 86_400_000) : 0;
  return { challenges, audit };
}
