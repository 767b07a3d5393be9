/**
 * Network helpers shared by the tests that start servers as child processes
 * (which need a port chosen before they start).
 */
import net from 'node:net';

export { freePort } from '../shared/ports.js';

/** A response read off a raw socket. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends `bytes` as they are on a new TCP connection to 127.0.0.1:`port` and reads one HTTP/1.1
 * response (until the body's Content-Length, the connection's end, or `timeoutMs`). For requests
 * no HTTP client library would send: malformed framing, control characters, unknown methods.
 */
export function rawRequest(port: number, bytes: string | Buffer, timeoutMs = 5_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) { reject(err); return; }
      const raw = Buffer.concat(chunks).toString('latin1');
      const split = raw.indexOf('\r\n\r\n');
      if (split < 0) { reject(new Error(`no complete response: ${JSON.stringify(raw.slice(0, 200))}`)); return; }
      const [statusLine = '', ...lines] = raw.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      // One response only: a refused request that left bytes behind may be followed by a second answer.
      let rest = Buffer.from(raw.slice(split + 4), 'latin1');
      if (headers['content-length'] !== undefined) rest = rest.subarray(0, Number(headers['content-length']));
      const body = rest.toString('utf8');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body });
    };
    const timer = setTimeout(() => finish(), timeoutMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      const raw = Buffer.concat(chunks).toString('latin1');
      const split = raw.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(raw.slice(0, split))?.[1];
      if (split >= 0 && len !== undefined && Buffer.byteLength(raw.slice(split + 4), 'latin1') >= Number(len)) finish();
    });
    socket.on('end', () => finish());
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' && chunks.length ? finish() : finish(err)));
    socket.write(bytes);
  });
}
