/**
 * Answers for requests that never reach a route, shared by the sidecar and
 * the gateway: Node's HTTP parser refuses malformed requests (a NUL or bare LF
 * in a header, folded headers, a duplicate or negative Content-Length,
 * Content-Length with chunked encoding, a bad chunk size, an unknown method,
 * a header block or URL over the size limit), Node answers an unsupported
 * `Expect` header with a bare 417, and Fastify's router refuses a
 * URL it cannot decode or a path parameter over its length limit. Without
 * these handlers those answers would be Node's or Fastify's own bodies; with
 * them every refusal has the service's `{error:{code,message,status}}` shape,
 * `Cache-Control: no-store` and an `X-Request-Id`.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ERRORS, errorBody } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import { isLingering, lingerClose } from './linger.js';

/** The refusal of a request Node's HTTP parser rejected: the code, and the message when it says more than the table's. */
export function clientErrorCode(err: NodeJS.ErrnoException): { code: ErrorCode; message?: string } {
  if (err.code === 'HPE_HEADER_OVERFLOW') return { code: 'headers_too_large' };
  if (err.code === 'HPE_INVALID_METHOD') return { code: 'invalid_request', message: 'The request method is not valid.' };
  return { code: 'invalid_request', message: 'The request is not valid HTTP/1.1.' };
}

/**
 * Writes a complete, minimal HTTP/1.1 response in the error shape on a socket
 * whose request the parser refused, then closes it (the parser cannot go on
 * after such an error) with a lingering close (linger.ts), so that a client
 * still sending its request reads the answer instead of a reset. Like Node's own handler, it writes nothing while a
 * response to an earlier request is already being sent on that socket. `onRefusal` sees the code (metrics). Timeouts and
 * resets get no answer: there is nobody to read it.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket, onRefusal?: (code: ErrorCode) => void): void {
  // A lingering socket's parser reports its error again for every chunk it discards.
  if (err.code === 'ECONNRESET' || socket.destroyed || isLingering(socket)) return;
  // As Node's own handler: never write into a response already under way on this socket (it would corrupt it).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' && socket.writable && inFlight?.headersSent !== true) {
    const { code, message } = clientErrorCode(err);
    onRefusal?.(code);
    writeRefusal(socket, code, message);
    lingerClose(socket);
    return;
  }
  socket.destroy();
}

const REASON_PHRASES: Readonly<Record<number, string>> = {
  400: 'Bad Request', 403: 'Forbidden', 405: 'Method Not Allowed', 431: 'Request Header Fields Too Large',
};

/**
 * Writes a complete HTTP/1.1 refusal `code` in the error shape, with `Cache-Control: no-store`,
 * a fresh `X-Request-Id` and `Connection: close`, straight onto `socket` (for requests that never
 * get a `ServerResponse`). The caller closes the socket.
 */
export function writeRefusal(socket: Socket, code: ErrorCode, message?: string): void {
  const status = ERRORS[code].status;
  const body = JSON.stringify(errorBody(code, message));
  socket.write(`HTTP/1.1 ${status} ${REASON_PHRASES[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\n`
    + `Cache-Control: no-store\r\nX-Request-Id: ${crypto.randomUUID()}\r\nConnection: close\r\n\r\n${body}`);
}

/** The refusal of a request Fastify's router rejected before routing (`frameworkErrors`). */
export function frameworkErrorCode(fastifyCode: string | undefined): { code: ErrorCode; message: string } {
  if (fastifyCode === 'FST_ERR_BAD_URL') return { code: 'invalid_request', message: 'The request URL is not valid (a malformed percent escape).' };
  if (fastifyCode === 'FST_ERR_MAX_PARAM_LENGTH') return { code: 'invalid_request', message: 'A path parameter of the request URL is too long.' };
  return { code: 'invalid_request', message: ERRORS.invalid_request.message };
}

/**
 * Answers a request whose `Expect` header is not `100-continue` (Node would send a bare 417
 * itself): 417 `expectation_failed` in the error shape. Install on the HTTP server.
 * `onRefusal` sees the code (metrics).
 */
export function answerExpectationFailed(server: Server, onRefusal?: (code: ErrorCode) => void): void {
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    onRefusal?.('expectation_failed');
    const body = JSON.stringify(errorBody('expectation_failed'));
    res.writeHead(417, {
      'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store', 'x-request-id': crypto.randomUUID(), connection: 'close',
    });
    res.end(body);
  });
}

/**
 * Answers a `CONNECT` request (Node would close the connection without an answer) with the
 * refusal `code` in the error shape, then closes the socket. Install on the HTTP server.
 */
export function answerConnect(server: Server, code: ErrorCode, message: string, onRefusal?: (code: ErrorCode) => void): void {
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => undefined);
    if (socket.writable) {
      onRefusal?.(code);
      writeRefusal(socket, code, message);
      lingerClose(socket);
      return;
    }
    socket.destroy();
  });
}
