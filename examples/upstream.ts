/**
 * A tiny sample API to put behind the gateway (examples/compose.yaml,
 * examples/kubernetes/, examples/walkthrough.sh). It trusts the gateway: it
 * must only be reachable through it, and it shows the decision headers the
 * gateway adds to allowed requests.
 *
 *   GET  /v1/status     public route (no proof)
 *   GET  /v1/items      scope data:read
 *   POST /v1/items      scope data:write
 *   POST /v1/payments   scope payments:send (amount and currency from the body)
 *   GET  /healthz       the app's own health (not through the gateway)
 *
 * Runs without dependencies: `node examples/upstream.ts` on Node >= 23.6
 * (type stripping), `npx tsx examples/upstream.ts` on Node 20.
 * Environment: UPSTREAM_HOST (default 127.0.0.1), UPSTREAM_PORT (default 8081).
 */
import http from 'node:http';

const host = process.env.UPSTREAM_HOST || '127.0.0.1';
const port = Number(process.env.UPSTREAM_PORT || 8081);
const items: { id: number; name: string }[] = [{ id: 1, name: 'first item' }];

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** What the gateway vouches for on an allowed request. */
function decision(req: http.IncomingMessage): Record<string, string | undefined> {
  const h = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
  return {
    decision: h('x-service-decision'), scope: h('x-service-scope'), agent_id: h('x-service-agent-id'),
    cert_id: h('x-service-cert-id'), request_id: h('x-request-id'),
  };
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const path = (req.url ?? '/').split('?')[0];
    let body: Record<string, unknown> = {};
    try { body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> : {}; } catch { send(res, 400, { error: 'bad json' }); return; }
    const key = `${req.method} ${path}`;
    if (key === 'GET /healthz') { send(res, 200, { status: 'ok' }); return; }
    if (key === 'GET /v1/status') { send(res, 200, { status: 'up', gateway: decision(req) }); return; }
    if (key === 'GET /v1/items') { send(res, 200, { items, gateway: decision(req) }); return; }
    if (key === 'POST /v1/items') {
      const item = { id: items.length + 1, name: String(body.name ?? 'unnamed').slice(0, 100) };
      items.push(item);
      send(res, 201, { item, gateway: decision(req) });
      return;
    }
    if (key === 'POST /v1/payments') { send(res, 200, { paid: { amount: body.amount, currency: body.currency }, gateway: decision(req) }); return; }
    send(res, 404, { error: 'not found' });
  });
});

server.listen(port, host, () => process.stdout.write(`sample upstream listening on http://${host}:${port}\n`));
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => server.close(() => process.exit(0)));
