/**
 * A real MCP server for the gateway's MCP tests, built with the official
 * TypeScript SDK (`McpServer` + `StreamableHTTPServerTransport`, stateless,
 * on node:http on 127.0.0.1), and a proof-attaching fetch for the SDK's
 * client transport.
 *
 * Tools: get_weather, send_payment, read_file, delete_records (mapped in the
 * tests' gateway config) and admin_shell (deliberately NOT mapped). Every
 * HTTP request the server receives and every tool it runs is recorded, so
 * tests can prove that a refused call never reached it.
 */

import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { z } from 'zod';

/** A tool run by the MCP server. */
export interface ToolRun {
  tool: string;
  args: Record<string, unknown>;
}

/** One HTTP request the MCP server received. */
export interface McpReceived {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A started MCP upstream. */
export interface McpUpstream {
  url: string;
  runs: ToolRun[];
  received: McpReceived[];
  close(): Promise<void>;
}

function text(value: string): { content: Array<{ type: 'text'; text: string }> } {
  return { content: [{ type: 'text', text: value }] };
}

function buildServer(runs: ToolRun[]): McpServer {
  const server = new McpServer({ name: 'agent-authz-test-tools', version: '1.0.0' });
  const record = (tool: string, args: Record<string, unknown>): void => {
    runs.push({ tool, args });
  };
  server.registerTool('get_weather', { description: 'Weather for a city', inputSchema: { city: z.string() } }, async (args) => {
    record('get_weather', args);
    return text(`sunny in ${args.city}`);
  });
  server.registerTool('send_payment', { description: 'Send money', inputSchema: { amount: z.number(), currency: z.string(), to: z.string() } }, async (args) => {
    record('send_payment', args);
    return text(`sent ${args.amount} ${args.currency} to ${args.to}`);
  });
  server.registerTool('read_file', { description: 'Read a file', inputSchema: { path: z.string() } }, async (args) => {
    record('read_file', args);
    return text(`contents of ${args.path}`);
  });
  server.registerTool('delete_records', { description: 'Delete records', inputSchema: { table: z.string() } }, async (args) => {
    record('delete_records', args);
    return text(`deleted ${args.table}`);
  });
  server.registerTool('admin_shell', { description: 'Run a shell command', inputSchema: { cmd: z.string() } }, async (args) => {
    record('admin_shell', args);
    return text('ran');
  });
  return server;
}

/** Starts the MCP server (stateless Streamable HTTP on `/mcp`; `json`: JSON answers instead of SSE streams). */
export async function startMcpUpstream(json = false): Promise<McpUpstream> {
  const runs: ToolRun[] = [];
  const received: McpReceived[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', headers: req.headers, body });
      const mcp = buildServer(runs);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      void mcp.connect(transport)
        .then(() => transport.handleRequest(req, res, body === '' ? undefined : JSON.parse(body) as unknown))
        .catch(() => {
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
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    runs,
    received,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** A gateway answer that was not 2xx, as the MCP client's fetch saw it. */
export interface Refused {
  status: number;
  wwwAuthenticate: string | null;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * A fetch for `StreamableHTTPClientTransport` that gets a fresh proof for
 * every request from `makeProof` (challenge + present against the real
 * sidecar) and records non-2xx answers in `refused`.
 */
export function proofFetch(makeProof: () => Promise<string>, refused: Refused[]): FetchLike {
  return async (url, init) => {
    const headers = new Headers(init?.headers);
    headers.set('x-service-proof', await makeProof());
    const res = await fetch(url, { ...init, headers });
    if (!res.ok) {
      const raw = await res.clone().text();
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
      refused.push({ status: res.status, wwwAuthenticate: res.headers.get('www-authenticate'), body });
    }
    return res;
  };
}
