/**
 * The agent-side client and the idempotency ledger, against the REAL sidecar (SQLite) and the
 * REAL standalone gateway in front of a slow counting upstream (docs/gateway.md#idempotency):
 *
 * - a POST gets an `Idempotency-Key`, and the client's own retry (the 401 challenge of
 *   `challenge: 'server'`) sends the same key; a GET gets none;
 * - two concurrent calls with the caller's key: one reaches the upstream, the other gets 409
 *   `idempotency_in_flight`, retries with the same key and a fresh proof, and returns the replay;
 * - the same key for another body throws 422 `idempotency_key_reused`; `idempotencyKeys: false`
 *   on a route that requires a key throws 400 `idempotency_key_required`.
 */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AgentAuthzError, createAgentFetch } from '../../client/index.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from '../gateway-plugin/helpers.js';

t.setTimeout(90_000);

const received: { method: string; key: string | undefined; body: string }[] = [];
const upstream = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push({ method: req.method ?? '', key: req.headers['idempotency-key'] as string | undefined,
      body: Buffer.concat(chunks).toString('utf8') });
    const n = received.length;
    setTimeout(() => {
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ n }));
    }, 400);
  });
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
const sc = await startSidecar();
sc.clock.t = Date.now();
const ticker = setInterval(() => { sc.clock.t = Math.max(sc.clock.t, Date.now()); }, 20);
ticker.unref();
const f: Flow = await specFlow(sc, 'client-ledger@example.com', { approve: ['data:read', 'payments:send'] });
const gw = await startGatewayWithKey(gatewayConfig(upstreamUrl, sc.url, {
  routes: [
    { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
    { method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
  ],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), f.reg.api_key as string);
t.teardown(async () => {
  clearInterval(ticker);
  await gw.close();
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
  await sc.close();
});

/** The keys of the requests the client sent to the gateway, in order (a wrapped fetch). */
const sent: { key: string | null; proof: boolean }[] = [];
const options = {
  sidecarUrl: sc.url, apiKey: f.reg.api_key as string, connectionId: f.reg.connection_id as string, agentId: f.agentId,
  fetch: ((input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.startsWith(gw.url)) {
      const h = new Headers(init?.headers);
      sent.push({ key: h.get('idempotency-key'), proof: h.has('x-service-proof') });
    }
    return fetch(input, init);
  }) as typeof fetch,
};
const payment = (amount: number): RequestInit => ({
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount, currency: 'USD' }),
});

t.test('a POST gets a key, and the client\'s retry after a 401 challenge sends the same one', async (t) => {
  sent.length = 0;
  const before = received.length;
  const agentFetch = createAgentFetch({ ...options, challenge: 'server' });
  const res = await agentFetch(`${gw.url}/v1/payments`, payment(5));
  t.equal(res.status, 201);
  t.same(sent.map((s) => s.proof), [false, true], 'first without a proof, then the retry with one');
  t.match(sent[0]!.key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a random UUID');
  t.equal(sent[1]!.key, sent[0]!.key, 'the retry re-sends the key');
  t.equal(received.length, before + 1);
  t.equal(received[received.length - 1]!.key, sent[0]!.key, 'the upstream sees it');
  const second = await agentFetch(`${gw.url}/v1/payments`, payment(5));
  t.equal(second.status, 201);
  t.not(sent[2]!.key, sent[0]!.key, 'another call, another key');
  t.equal(received.length, before + 2, 'so it is another payment');
  sent.length = 0;
  t.equal((await agentFetch(`${gw.url}/v1/items/7`)).status, 200);
  t.same(sent.map((s) => s.key), [null, null], 'a GET gets no key');
});

t.test('concurrent calls with one key: the later one waits out the 409 with the same key and gets the replay', async (t) => {
  sent.length = 0;
  const before = received.length;
  const agentFetch = createAgentFetch(options);
  const key = `order-${Date.now()}`;
  const withKey = (): RequestInit => ({ ...payment(8), headers: { 'content-type': 'application/json', 'idempotency-key': key } });
  const first = agentFetch(`${gw.url}/v1/payments`, withKey());
  await new Promise((r) => setTimeout(r, 150));
  const second = agentFetch(`${gw.url}/v1/payments`, withKey());
  const [a, b] = await Promise.all([first, second]);
  t.equal(received.length, before + 1, 'one upstream call');
  t.equal(a.status, 201);
  t.equal(b.status, 201);
  // Whichever claimed the key first (the head start is no guarantee on a loaded machine), the other is its replay.
  const replays = [a, b].map((r) => r.headers.get('idempotent-replayed'));
  t.same(replays.slice().sort(), [null, 'true'].sort(), 'exactly one of them is the replay');
  t.equal(await b.text(), await a.text(), 'of the same answer');
  t.ok(sent.length >= 3, `the later call tried ${sent.length - 1} times`);
  t.ok(sent.every((s) => s.key === key), 'every try sent the caller\'s key');
});

t.test('refusals of the ledger are thrown', async (t) => {
  const agentFetch = createAgentFetch(options);
  const key = `order-${Date.now()}-x`;
  const headers = { 'content-type': 'application/json', 'idempotency-key': key };
  t.equal((await agentFetch(`${gw.url}/v1/payments`, { ...payment(1), headers })).status, 201);
  const reused = await agentFetch(`${gw.url}/v1/payments`, { ...payment(2), headers }).catch((e: unknown) => e);
  t.ok(reused instanceof AgentAuthzError);
  t.match(reused, { status: 422, code: 'idempotency_key_reused' });
  const off = createAgentFetch({ ...options, idempotencyKeys: false });
  const missing = await off(`${gw.url}/v1/payments`, payment(3)).catch((e: unknown) => e);
  t.match(missing, { status: 400, code: 'idempotency_key_required' });
  t.throws(() => createAgentFetch({ ...options, idempotencyKeys: 'yes' as unknown as boolean }),
    new TypeError('agent fetch options: idempotencyKeys: must be true or false'));
});

t.test('without crypto.randomUUID (a browser page outside a secure context) the key comes from getRandomValues', async (t) => {
  const c = globalThis.crypto as { randomUUID?: unknown };
  const own = Object.getOwnPropertyDescriptor(c, 'randomUUID');
  Object.defineProperty(c, 'randomUUID', { value: undefined, configurable: true, writable: true });
  try {
    sent.length = 0;
    const res = await createAgentFetch(options)(`${gw.url}/v1/payments`, payment(2));
    t.equal(res.status, 201);
    t.match(sent[0]!.key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a v4 UUID');
  } finally {
    if (own) Object.defineProperty(c, 'randomUUID', own);
    else delete c.randomUUID;
  }
  t.equal(typeof globalThis.crypto.randomUUID, 'function', 'restored');
});
