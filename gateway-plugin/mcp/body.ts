/**
 * Reading a request body with the limit of its route, and the one case where
 * the gateway reads past it: an MCP answer (a JSON-RPC response POSTed by
 * the client) in a session bound to its agent, with a session proof.
 *
 * Over the limit, such an answer is not forwarded, but the gateway keeps
 * reading it (up to {@link MAX_OVERFLOW_BYTES}) without storing it: it keeps
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

/** Largest answer read past the limit to answer the server (64 MiB); beyond, plain 413. */
export const MAX_OVERFLOW_BYTES = 64 * 1024 * 1024;
const EDGE = 1024;

/** How to read past the limit: the session key of the answer's session and the proof it must match. */
export interface OverflowCheck {
  /** The session key (base64url), `McpSessions.answerKey`. */
  readonly key: string;
  /** The `X-Service-Session-Proof` the client sent. */
  readonly proof: string;
}

/** 413 for an MCP answer over the limit whose request id and session proof were read: the server gets an error for it. */
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
  payload: Readable, contentLength: string | undefined, limit: number, overflow: OverflowCheck | undefined,
  done: (err: Error | null, body?: Buffer) => void,
): void {
  const declared = contentLength === undefined ? NaN : Number(contentLength);
  if (declared > limit && (overflow === undefined || declared > MAX_OVERFLOW_BYTES)) {
    done(new ServiceError('body_too_large'));
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  let head: Buffer | undefined;
  let tail = Buffer.alloc(0);
  let mac: ReturnType<typeof createHmac> | undefined;
  const stop = (err: Error): void => {
    payload.removeListener('data', onData);
    payload.removeListener('end', onEnd);
    payload.removeListener('error', onError);
    done(err);
  };
  function onData(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    received += buf.length;
    if (received <= limit) {
      chunks.push(buf);
      return;
    }
    if (overflow === undefined || received > MAX_OVERFLOW_BYTES) {
      stop(new ServiceError('body_too_large'));
      return;
    }
    if (mac === undefined) {
      const start = Buffer.concat(chunks);
      chunks.length = 0;
      head = start.subarray(0, EDGE);
      mac = createHmac('sha256', Buffer.from(overflow.key, 'base64url')).update(start);
      tail = start.subarray(-EDGE);
    }
    mac.update(buf);
    tail = Buffer.concat([tail, buf]).subarray(-EDGE);
  }
  function onEnd(): void {
    payload.removeListener('data', onData);
    payload.removeListener('error', onError);
    if (!Number.isNaN(declared) && received !== declared) {
      done(invalidLength());
      return;
    }
    if (mac === undefined) {
      done(null, Buffer.concat(chunks, received));
      return;
    }
    done(overflowRefusal(mac.digest('base64url'), overflow?.proof ?? '', head ?? tail, tail, limit));
  }
  function onError(err: Error & { statusCode?: number }): void {
    if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
    stop(err);
  }
  payload.on('data', onData);
  payload.on('end', onEnd);
  payload.on('error', onError);
  payload.resume();
}

function overflowRefusal(digest: string, proof: string, head: Buffer, tail: Buffer, limit: number): ServiceError {
  const expected = Buffer.from(digest);
  const given = Buffer.from(proof);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return new ServiceError('body_too_large');
  const id = answerIdOf(head, tail);
  return id === undefined || id === null ? new ServiceError('body_too_large') : new McpAnswerTooLarge(id, limit);
}
