/**
 * Answering the MCP server on the client's behalf (docs/mcp.md#limits).
 *
 * When the client's answer to a server request (a sampling result, an
 * elicitation result, …) is over the MCP body limit, the client gets 413
 * `body_too_large`, which the SDK only reports to `onerror`; the server would
 * wait for the answer until its own timeout. So the gateway POSTs, in the
 * client's session and with the same decision headers a session-proved answer
 * gets, a JSON-RPC error for that request id:
 *
 * ```json
 * {"jsonrpc":"2.0","id":7,"error":{"code":-32600,
 *   "message":
 *     "The client's answer was larger than the gateway's MCP body limit (1048576 bytes) and was not delivered.",
 *   "data":{"code":"body_too_large","limit":1048576}}}
 * ```
 *
 * The server's request then fails at once with that error (the tool that
 * asked gets it), instead of hanging. Failures are logged, never retried.
 */

import { request } from 'undici';
import type { FastifyBaseLogger } from 'fastify';
import type { JsonRpcId } from './message.js';

/** JSON-RPC code of the error sent for an answer that was too large. */
export const ANSWER_TOO_LARGE_CODE = -32600;
const TIMEOUT_MS = 10_000;

/** The JSON-RPC error the server receives for an answer that was too large. */
export function answerTooLargeMessage(id: JsonRpcId, limit: number): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: {
      code: ANSWER_TOO_LARGE_CODE,
      message: `The client's answer was larger than the gateway's MCP body limit (${limit} bytes)`
        + ' and was not delivered.',
      data: { code: 'body_too_large', limit },
    },
  });
}

/** POSTs {@link answerTooLargeMessage} to `url` with `headers` (the session's, rewritten for the upstream). */
export async function answerOnBehalf(
  url: string, headers: Record<string, string>, id: JsonRpcId, limit: number, log: FastifyBaseLogger,
): Promise<void> {
  const body = answerTooLargeMessage(id, limit);
  try {
    const res = await request(url, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'content-length': String(Buffer.byteLength(body)),
      },
      body,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    });
    await res.body.dump();
    log.warn(
      { status: res.statusCode, id },
      'gateway: an MCP answer over the body limit was answered to the server as an error',
    );
  } catch (err) {
    log.warn({ err, id }, 'gateway: could not answer the MCP server for an answer over the body limit');
  }
}
