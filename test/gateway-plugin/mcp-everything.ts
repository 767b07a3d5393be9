/**
 * The MCP reference server that exercises every protocol feature,
 * `@modelcontextprotocol/server-everything` (a devDependency), on the
 * Streamable HTTP transport on 127.0.0.1 and a free port, for issue 31's
 * tests.
 *
 * The package's own `streamableHttp` entry point listens on every interface
 * on `PORT` (3001 by default) and does not say which port it got, so this
 * helper hosts the package's server factory (`createServer()`: every tool,
 * resource, prompt, completion, logging, subscriptions, sampling,
 * elicitation, tasks) exactly the way that entry point does: one
 * `StreamableHTTPServerTransport` per session, with an in-memory event store
 * for resumption (`Last-Event-ID`; see the store below), cleaned up when the session closes; an
 * unknown session id is 400, as there. Every HTTP request it receives is
 * recorded (method, session id, JSON-RPC body), so a test can prove that a
 * refused request never reached it.
 */

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createServer } from '@modelcontextprotocol/server-everything/dist/server/index.js';

/** One HTTP request the everything server received. */
export interface EverythingReceived {
  method: string;
  session: string | undefined;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  /** Epoch ms of arrival. */
  at: number;
}

/** A started everything server. */
export interface EverythingServer {
  /** Origin, e.g. `http://127.0.0.1:39123` (the endpoint is `/mcp`). */
  url: string;
  received: EverythingReceived[];
  /** Open sessions (upstream session ids). */
  sessions(): string[];
  close(): Promise<void>;
}

/**
 * An in-memory event store for resumption. The package's own store (in its
 * entry point) replays every stream's events and returns the last event id
 * where the SDK expects the stream id, so a resumed stream gets the events
 * stored so far and none that come later; this one keeps the SDK's contract
 * (events of the resumed stream only, in order; the stream id returned).
 */
class InMemoryEventStore implements EventStore {
  readonly events = new Map<string, { streamId: string; message: JSONRPCMessage }>();
  #next = 0;
  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    this.#next += 1;
    const eventId = `${streamId}_${this.#next}`;
    this.events.set(eventId, { streamId, message });
    return eventId;
  }
  async replayEventsAfter(lastEventId: string, { send }: { send: (id: string, m: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const streamId = this.events.get(lastEventId)?.streamId;
    if (streamId === undefined) return '';
    let after = false;
    for (const [id, event] of this.events) {
      if (id === lastEventId) after = true;
      else if (after && event.streamId === streamId) await send(id, event.message);
    }
    return streamId;
  }
}

function badSession(res: http.ServerResponse): void {
  res.writeHead(400, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null }));
}

/** Starts the everything server on 127.0.0.1 (see the file header). */
export async function startEverything(): Promise<EverythingServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const cleanups: Array<() => void> = [];
  const received: EverythingReceived[] = [];
  const sockets = new Set<Socket>();
  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    const session = typeof req.headers['mcp-session-id'] === 'string' ? req.headers['mcp-session-id'] : undefined;
    const body = raw === '' ? undefined : JSON.parse(raw) as unknown;
    received.push({ method: req.method ?? '', session, headers: req.headers, body, at: Date.now() });
    const existing = session === undefined ? undefined : transports.get(session);
    if (existing !== undefined) return existing.handleRequest(req, res, body);
    if (session !== undefined || req.method !== 'POST') return badSession(res);
    const { server, cleanup } = createServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new InMemoryEventStore(),
      onsessioninitialized: (sid) => { transports.set(sid, transport); },
    });
    const end = (): void => {
      const sid = transport.sessionId;
      if (sid !== undefined && transports.delete(sid)) cleanup(sid);
    };
    cleanups.push(end);
    server.server.onclose = async () => end();
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks).toString('utf8')).catch(() => {
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    sessions: () => [...transports.keys()],
    close: async () => {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      for (const end of cleanups) end();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
