/**
 * `GET /v1/service/audit/personal/export`: streams the signed-in account's
 * audit trail for a time range as NDJSON (docs/audit.md, "Export"): a header
 * with the service's public keys, the checkpoints in the range, the events in
 * chain order, a trailer with the counts. The range is the contiguous part of
 * the chain from the first event at or after `from` to the last before `to`,
 * and the export makes sure a signed checkpoint covers its last event, so the
 * file verifies offline on its own (`agent-authz-sidecar audit verify --export`).
 * A store failure mid-stream cuts the response: the file then has no trailer
 * and the verifier refuses it.
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import { EXPORT_HEADER, EXPORT_TRAILER, EXPORT_VERSION, checkpointLine, eventLine } from '../audit/format.js';

/** Events read from the store per page while streaming. */
const PAGE = 500;

const ExportQuery = Type.Object({
  from: Type.Optional(Type.String({ maxLength: 40, description: 'ISO 8601 time; default: the beginning.' })),
  to: Type.Optional(Type.String({ maxLength: 40, description: 'ISO 8601 time; default: now.' })),
}, { additionalProperties: false });

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** Parses an ISO 8601 time of the query string into Unix ms; 400 `invalid_request` naming the field otherwise. */
export function queryTime(raw: string | undefined, field: string): number | undefined {
  if (raw === undefined) return undefined;
  const t = ISO_TIME.test(raw) ? Date.parse(raw) : NaN;
  if (!Number.isFinite(t)) throw new ServiceError(
    'invalid_request', `${field} must be an ISO 8601 time such as 2026-01-31T00:00:00Z.`, {
      field: `querystring.${field}` });
  return t;
}

/** Checks a time range (from < to when both are given). */
export function queryRange(q: { from?: string; to?: string }): { from?: number; to?: number } {
  const from = queryTime(q.from, 'from');
  const to = queryTime(q.to, 'to');
  if (from !== undefined && to !== undefined && from >= to) throw new ServiceError(
    'invalid_request', 'from must be before to.', { field: 'querystring.from' });
  return { ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) };
}


/** The lines of one account's export. */
async function* exportLines(ctx: ServiceContext, accountId: string, from: number, to: number): AsyncGenerator<string> {
  const range = await ctx.store.audit.chainRange(accountId, from, to);
  if (range) {
    // The last exported event is signed now if no checkpoint signs it yet (one signature per export at most).
    const last = (await ctx.store.audit.readChain(accountId, range.last - 1, 1))[0];
    if (last && (await ctx.store.audit.listCheckpoints({ accountId, fromPosition: range.last,
      toPosition: range.last })).length === 0) {
      if (await ctx.store.audit.insertCheckpoint(
        ctx.audit.signer.sign(accountId, last.position, last.hash, 'periodic', ctx.clock()))) {
        ctx.audit.metrics.checkpoints.inc({ kind: 'periodic' });
      }
    }
  }
  const keys = (await ctx.store.audit.serviceKeys()).map(
    (k) => ({ key_id: k.id, purpose: k.purpose, public_key: JSON.parse(k.publicKey) as unknown }));
  yield JSON.stringify({
    type: EXPORT_HEADER, version: EXPORT_VERSION, account_id: accountId, from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
    first_position: range?.first ?? null, last_position: range?.last ?? null, generated_at: new Date(
      ctx.clock()).toISOString(), service_keys: keys,
  }) + '\n';
  let checkpoints = 0;
  let events = 0;
  if (range) {
    for (const c of await ctx.store.audit.listCheckpoints({ accountId, fromPosition: range.first,
      toPosition: range.last })) {
      checkpoints++;
      yield JSON.stringify(checkpointLine(c)) + '\n';
    }
    for (let after = range.first - 1; after < range.last;) {
      const page = await ctx.store.audit.readChain(accountId, after, Math.min(PAGE, range.last - after));
      if (page.length === 0) break;
      let chunk = '';
      for (const e of page) chunk += JSON.stringify(eventLine(e)) + '\n';
      events += page.length;
      after = page[page.length - 1]!.position;
      yield chunk;
    }
  }
  yield JSON.stringify({ type: EXPORT_TRAILER, events, checkpoints }) + '\n';
}

/** The routes of this file, each defined once (api/route.ts). */
export const AUDIT_EXPORT_ROUTES = {
  exportAuditEvents: defineRoute({
    method: 'GET', url: '/v1/service/audit/personal/export', auth: 'session', permission: 'audit_read',
    schema: { querystring: ExportQuery, tags: ['audit'] },
    operation: op('exportAuditEvents', 'Export audit events as NDJSON',
      'Streams the account\'s hash-chained audit trail for `from`–`to` as `application/x-ndjson`: a header with the '
        + 'service keys, the signed checkpoints, the events in chain order, a trailer with the counts '
          + '(docs/audit.md). The last event is always covered by a signed checkpoint, so the file verifies offline '
            + 'with `agent-authz-sidecar audit verify --export`.',
      S.AuditExport),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the export route (called by `registerAuditRoutes`). */
export async function registerAuditExportRoute(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, AUDIT_EXPORT_ROUTES.exportAuditEvents, async (request, reply) => {
    const range = queryRange(request.query as { from?: string; to?: string });
    const now = ctx.clock();
    const from = range.from ?? 0;
    const to = range.to ?? now + 1;
    if (from >= to) throw new ServiceError('invalid_request', 'from must be before to.', { field: 'querystring.from' });
    const lines = exportLines(ctx, request.session!.accountId, from, to);
    // The first line is made before answering, so a store failure there is a normal 503.
    const first = await lines.next();
    const stream = Readable.from((async function* () {
      if (!first.done) yield first.value;
      yield* lines;
    })());
    stream.on('error', (err) => request.log.error({ err }, 'audit export failed mid-stream; response cut'));
    void reply.type('application/x-ndjson; charset=utf-8').header('cache-control', 'no-store')
      .header('content-disposition', `attachment; filename="audit-${request.session!.accountId}.ndjson"`);
    return reply.send(stream);
  });
}
