/**
 * Forwarding an upstream answer's body: every chunk as it arrives, with an
 * idle limit of its own kind (docs/gateway.md#timeouts, docs/mcp.md#streams).
 *
 * - A `text/event-stream` answer gets its headers flushed at once (Node
 *   otherwise holds them until the first body byte, so a client with a
 *   connect timeout gives up on a healthy but quiet stream). When no byte
 *   arrives for the stream idle limit, the gateway ENDS the stream (a clean
 *   end of the response: an SDK client re-opens a GET stream with
 *   `Last-Event-ID`); its status was sent long ago, so nothing else can be
 *   said.
 * - Any other answer: when no byte arrives for `upstream_timeout_ms`, the
 *   body fails with {@link UpstreamIdleError}; before the first byte that is
 *   502 `upstream_unavailable` with cause `upstream_timeout` (refusal.ts),
 *   after it the connection is cut.
 */

import { PassThrough } from 'node:stream';
import type { Readable } from 'node:stream';
import type { ServerResponse } from 'node:http';

/** The upstream sent no byte of its answer's body for the idle limit. */
export class UpstreamIdleError extends Error {
  readonly code = 'UPSTREAM_IDLE';
  constructor(ms: number) {
    super(`the upstream sent nothing for ${ms} ms`);
    this.name = 'UpstreamIdleError';
  }
}

/** True for a `text/event-stream` content type. */
export function isEventStream(contentType: unknown): boolean {
  return typeof contentType === 'string' && /^\s*text\/event-stream\s*(?:;|$)/i.test(contentType);
}

/**
 * The body to send for `upstream`: a pass-through that forwards every chunk
 * at once and applies `idleMs` (see the file header); `onIdle` is told when
 * a stream is ended for being idle.
 */
export function forwardBody(
  upstream: Readable,
  res: ServerResponse,
  sse: boolean,
  idleMs: number,
  onIdle: () => void,
): Readable {
  const out = new PassThrough();
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  const arm = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      onIdle();
      if (sse) {
        // Destroying the upstream body fails it ("aborted"): the client's stream still ends cleanly.
        ended = true;
        upstream.unpipe(out);
        upstream.destroy();
        out.end();
      } else {
        upstream.destroy(new UpstreamIdleError(idleMs));
      }
    }, idleMs);
    timer.unref();
  };
  upstream.on('data', arm);
  upstream.once('end', () => clearTimeout(timer));
  upstream.on('error', (err) => {
    if (!ended) out.destroy(err);
  });
  out.once('close', () => {
    clearTimeout(timer);
    if (!upstream.destroyed) upstream.destroy();
  });
  upstream.pipe(out);
  arm();
  // Fastify sets the headers and pipes: flush them with the pipe, not with the first event.
  if (sse) res.once('pipe', () => res.flushHeaders());
  return out;
}
