/**
 * A real HTTP collector on loopback for the push-export tests: records every
 * request (headers and raw body), and answers as the test sets it: `ok`, a
 * status (an outage), `slow` (keeps the answer past the sender's timeout,
 * after reading the body, so the sender retries what was already received),
 * or `drop` (reads and records the body, then cuts the connection without an
 * answer: the sender must send the same events again). Every request is
 * counted in `attempts`, answered or not.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received request. */
export interface Received { path: string; headers: http.IncomingHttpHeaders; body: string }

/** A running collector. */
export interface Collector {
  url: string;
  received: Received[];
  mode: 'ok' | 'slow' | 'drop' | number;
  /** Requests that reached the collector, whatever the answer. */
  attempts: number;
  /** How long `slow` holds the answer (ms). */
  slowMs: number;
  /** Stops listening (connections refused) until {@link resume}. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  close(): Promise<void>;
  /** Waits until `pred` holds (polls every 20 ms, at most `ms`). */
  until(pred: () => boolean, ms?: number): Promise<boolean>;
}

/** Starts a collector on 127.0.0.1 (a free port, kept across pause/resume). */
export async function startCollector(): Promise<Collector> {
  const received: Received[] = [];
  let server: http.Server;
  let port = 0;
  const c: Collector = {
    url: '', received, mode: 'ok', attempts: 0, slowMs: 600,
    async pause() { server.closeAllConnections(); await new Promise<void>((r) => server.close(() => r())); },
    async resume() { await listen(); },
    async close() { server.closeAllConnections(); await new Promise<void>((r) => server.close(() => r())); },
    async until(pred, ms = 10_000) {
      const end = Date.now() + ms;
      while (Date.now() < end) { if (pred()) return true; await new Promise((r) => setTimeout(r, 20)); }
      return pred();
    },
  };
  const listen = async (): Promise<void> => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const mode = c.mode;
        c.attempts++;
        if (typeof mode === 'number') { res.writeHead(mode, { 'content-type': 'text/plain' }).end('outage'); return; }
        received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        if (mode === 'drop') { req.socket.destroy(); return; }
        const answer = (): void => { if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end('{}'); };
        if (mode === 'slow') setTimeout(answer, c.slowMs).unref(); else answer();
      });
    });
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
    c.url = `http://127.0.0.1:${port}`;
  };
  await listen();
  return c;
}
