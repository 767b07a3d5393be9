/**
 * Reading a request body with the limit of its route, and the one case where
 * the gateway reads past it: an MCP answer (a JSON-RPC response POSTed by
 * the client) in a session bound to its agent, with a session proof.
 *
 * Over the limit, such an answer is not forwarded, but the gateway keeps
 * reading it without storing it, only when its session proof is well formed
 * (43 base64url characters), up to the route's `answer_overflow_bytes`
 * (default {@link OVERFLOW_FACTOR} × the limit, at most
 * {@link MAX_OVERFLOW_BYTES}), and at most {@link MAX_OVERFLOW_READS} such
 * reads at a time per gateway process: it keeps
 * its first and last bytes, to find the id of the server's request it
 * answers (message.ts `answerIdOf`), and MACs it, to check the session proof.
 * When both succeed the refusal is a {@link McpAnswerTooLarge}: the plugin
 * then answers the server on the client's behalf with a JSON-RPC error for
 * that id, so the server's request does not wait for an answer that will
 * never come. Every other body over the limit is 413 `body_too_large`, at once
 * when `Content-Length` says so.
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ServiceError } from '../../src/errors.js';
import { answerIdOf } from './message.js';
import type { JsonRpcId } from './message.js';

/** Largest answer ever read past the limit to answer the server (64 MiB); beyond, plain 413. */
export const MAX_OVERFLOW_BYTES = 64 * 1024 * 1024;
/** Default read cap past the limit: this many times the limit (`mcp.answer_overflow_bytes` sets it). */
export const OVERFLOW_FACTOR = 4;
/** Most over-limit answers read at once per gateway process; more are plain 413. */
export const MAX_OVERFLOW_READS = 8;
const EDGE = 1024;
/** A session proof: base64url of an HMAC-SHA256. */
const PROOF = /^[A-Za-z0-9_-]{43}$/;
let overflowReads = 0;

/** How to read past the limit: the session key of the answer's session and the proof it must match. */
export interface OverflowCheck {
  /** The session key (base64url), `McpSessions.answerKey`. */
  readonly key: string;
  /** The `X-Service-Session-Proof` the client sent. */
  readonly proof: string;
  /** Largest answer read (default {@link OVERFLOW_FACTOR} × the limit); never more than {@link MAX_OVERFLOW_BYTES}. */
  readonly maxBytes?: number | undefined;
}

/**
 * 413 for an MCP answer over the limit whose request id and session proof were read: the server gets an error for it.
 */
export class McpAnswerTooLarge extends ServiceError {
  /** The id of the server's request the answer was for. */
  readonly answerId: JsonRpcId;
  /** The body limit that was exceeded. */
  readonly limit: number;
  constructor(answerId: JsonRpcId, limit: number) {
    super('body_too_large');
    this.answerId = answerId;
    this.limit = limit;
  }
}

/** As Fastify's own reader: a body whose length differs from its Content-Length is 400 `invalid_request`. */
function invalidLength(): ServiceError {
  return new ServiceError('invalid_request');
}

/**
 * Reads `payload` as a Buffer of at most `limit` bytes into `done`, or fails
 * with 413 (see the file header for `overflow`).
 */
export function readLimitedBody(
  payload: Readable, contentLength: string | undefined, limit: number, check: OverflowCheck | undefined,
  done: (err: Error | null, body?: Buffer) => void,
): void {
  const overflow = check !== undefined && PROOF.test(check.proof) ? check : undefined;
  const cap = Math.min(overflow?.maxBytes ?? OVERFLOW_FACTOR * limit, MAX_OVERFLOW_BYTES);
  const declared = contentLength === undefined ? NaN : Number(contentLength);
  if (declared > limit && (overflow === undefined || declared > cap || overflowReads >= MAX_OVERFLOW_READS)) {
    done(new ServiceError('body_too_large'));
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  let head = Buffer.alloc(0);
  let tail = Buffer.alloc(0);
  let mac: ReturnType<typeof createHmac> | undefined;
  let finished = false;
  const finish = (err: Error | null, body?: Buffer): void => {
    payload.removeListener('data', onData);
    payload.removeListener('end', onEnd);
    payload.removeListener('error', onError);
    payload.removeListener('close', onClose);
    if (finished) return;
    finished = true;
    if (mac !== undefined) overflowReads -= 1;
    done(err, body);
  };
  function onData(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    received += buf.length;
    if (received <= limit) {
      chunks.push(buf);
      return;
    }
    if (overflow === undefined || received > cap || (mac === undefined && overflowReads >= MAX_OVERFLOW_READS)) {
      finish(new ServiceError('body_too_large'));
      return;
    }
    if (mac === undefined) {
      overflowReads += 1;
      const start = Buffer.concat(chunks);
      chunks.length = 0;
      head = start.subarray(0, EDGE);
      mac = createHmac('sha256', Buffer.from(overflow.key, 'base64url')).update(start);
      tail = start.subarray(-EDGE);
    }
    mac.update(buf);
    // With a limit under EDGE bytes the head is still filling.
    if (head.length < EDGE) head = Buffer.concat([head, buf]).subarray(0, EDGE);
    tail = Buffer.concat([tail, buf]).subarray(-EDGE);
  }
  function onEnd(): void {
    if (!Number.isNaN(declared) && received !== declared) {
      finish(invalidLength());
      return;
    }
    if (mac === undefined) {
      finish(null, Buffer.concat(chunks, received));
      return;
    }
    finish(overflowRefusal(mac.digest('base64url'), overflow?.proof ?? '', head, tail, limit));
  }
  function onError(err: Error & { statusCode?: number }): void {
    if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
    finish(err);
  }
  payload.on('data', onData);
  payload.on('end', onEnd);
  payload.on('error', onError);
  // A client that goes away mid-body frees its overflow read.
  function onClose(): void {
    finish(new ServiceError('body_too_large'));
  }
  payload.on('close', onClose);
  payload.resume();
}

/** Over-limit answers being read now (for tests and metrics). */
export function overflowReadsInProgress(): number {
  return overflowReads;
}

function overflowRefusal(digest: string, proof: string, head: Buffer, tail: Buffer, limit: number): ServiceError {
  const expected = Buffer.from(digest);
  const given = Buffer.from(proof);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return new ServiceError('body_too_large');
  const id = answerIdOf(head, tail);
  return id === undefined || id === null ? new ServiceError('body_too_large') : new McpAnswerTooLarge(id, limit);
}
