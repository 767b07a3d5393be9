/**
 * Helper servers of the agent rows (bench/agents.ts), one per process
 * (child of bench/run.ts). Each listens on 127.0.0.1:0 and prints
 * `READY <name> <port>`.
 *
 *   mcp       a real MCP server (official SDK, `McpServer` + stateless
 *             `StreamableHTTPServerTransport`, JSON answers) with one tool,
 *             `get_weather`: the upstream of the MCP rows
 *   upstream  node:http answering every request 200 with a small JSON body
 *             (the same 42 bytes as bench/servers.ts): behind NGINX
 *   all       both in one process (smoke runs only)
 *
 *   node --import tsx bench/agent-servers.ts mcp|upstream|all
 */
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const MAX_HEADER_SIZE = 32_768;
const servers: http.Server[] = [];

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    setTimeout(() => process.exit(0), 2000).unref();
    for (const s of servers) s.closeAllConnections();
    void Promise.all(servers.map((s) => new Promise((r) => s.close(r)))).then(() => process.exit(0));
  });
}

async function listen(name: string, handler: http.RequestListener): Promise<void> {
  const server = http.createServer({ maxHeaderSize: MAX_HEADER_SIZE, keepAliveTimeout: 60_000 }, handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  process.stdout.write(`READY ${name} ${(server.address() as { port: number }).port}\n`);
}

function tools(): McpServer {
  const server = new McpServer({ name: 'bench-tools', version: '1.0.0' });
  server.registerTool('get_weather', { inputSchema: { city: z.string() } }, async ({ city }) => ({ content: [{ type: 'text', text: `sunny in ${city}` }] }));
  return server;
}

const mcp = (): Promise<void> => listen('mcp', (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const server = tools();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    server.connect(transport)
      .then(() => transport.handleRequest(req, res, body === '' ? undefined : JSON.parse(body) as unknown))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
  });
});

const FIXED = Buffer.from('{"ok":true,"item":{"id":1,"name":"bench"}}');
const upstream = (): Promise<void> => listen('upstream', (req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': FIXED.length });
    res.end(FIXED);
  });
});

const mode = process.argv[2];
if (mode === 'mcp') await mcp();
else if (mode === 'upstream') await upstream();
else if (mode === 'all') {
  await mcp();
  await upstream();
} else {
  process.stderr.write('usage: agent-servers.ts mcp|upstream|all\n');
  process.exit(2);
}
