/**
 * The reverse proxy's use of the idempotency ledger (docs/gateway.md#idempotency; the rules and
 * the bounds are in idempotency.ts): the answer to a claimed request is recorded in the sidecar
 * before the agent's response ends, a request the upstream never received releases its claim, and a repeat
 * gets the recorded answer, marked `Idempotent-Replayed: true`, without reaching the upstream.
 */
import { pipeline } from 'node:stream';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IDEMPOTENT_REPLAYED_HEADER } from '../src/protocol.js';
import type { RecordedResponse } from '../src/protocol.js';
import { LedgerTap, recordedHeaders } from './idempotency.js';
import type { SidecarClient } from './verify-client.js';

/** Set on a replay whose recorded answer had a body over the ledger's bound (it is replayed without it). */
export const IDEMPOTENT_BODY_OMITTED_HEADER = 'idempotent-body-omitted';

/**
 * The upstream's body, passed on chunk by chunk while a copy is kept; the answer is recorded under
 * `claimId` before the stream ends (a body that fails part-way is recorded without its body).
 */
export function recordingBody(
  sidecar: SidecarClient, request: FastifyRequest, reply: FastifyReply, res: { statusCode: number; stream: Readable },
  claimId: string,
): Readable {
  let recorded = false;
  const record = async (body: Buffer | undefined): Promise<void> => {
    if (recorded) return;
    recorded = true;
    const response: RecordedResponse = {
      status: res.statusCode, headers: recordedHeaders(reply.getHeaders()), body: body?.toString('base64') ?? '',
      body_omitted: body === undefined,
    };
    if (!await sidecar.recordIdempotent(claimId, response, request.id)) {
      request.log.warn({ claim_id: claimId }, 'gateway: the answer was not recorded in the idempotency ledger '
        + '(the claim holds the key until its lease ends)');
    }
  };
  const tap = new LedgerTap(record);
  pipeline(res.stream, tap, (err) => {
    if (err) void record(undefined);
  });
  return tap;
}

/** Errors of the connect phase: the request never reached the upstream. */
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT']);

/** True when an upstream error (or one of its causes) says the request was never delivered. */
export function notDelivered(error: unknown): boolean {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e !== null && typeof e === 'object'; depth += 1) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECT_ERRORS.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Releases the claim of a request that got no upstream answer (logged when the sidecar did not). */
export function releaseClaim(sidecar: SidecarClient, request: FastifyRequest, claimId: string): void {
  void sidecar.releaseIdempotent(claimId, request.id).then((ok) => {
    if (!ok) {
      request.log.warn({ claim_id: claimId }, 'gateway: an idempotency claim was not released (its lease frees it)');
    }
  });
}

/** Answers with a recorded answer, marked as a replay. */
export function replayAnswer(reply: FastifyReply, response: RecordedResponse, requestId: string): FastifyReply {
  const headers = new Map<string, string[]>();
  for (const [name, value] of response.headers) headers.set(name, [...(headers.get(name) ?? []), value]);
  reply.code(response.status);
  for (const [name, values] of headers) reply.header(name, values.length === 1 ? values[0] : values);
  reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true').header('x-request-id', requestId);
  if (response.body_omitted) reply.header(IDEMPOTENT_BODY_OMITTED_HEADER, 'true');
  return reply.send(Buffer.from(response.body, 'base64'));
}
