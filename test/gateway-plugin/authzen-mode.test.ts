/**
 * The gateway's two decision APIs against each other (issue 34): one real
 * sidecar, two real gateways in front of one recording upstream — one with
 * `decision_api: verify` (the default), one with `decision_api: authzen` (the
 * same proof through `POST /access/v1/evaluation`). For each row of an outcome
 * table made of real situations (allow, the denies, a replayed proof, a proof
 * for another agent's scope, a forged signature, an approval, no proof, an
 * unknown route) both answer the same status and error code, and the upstream
 * receives exactly the allowed requests. Config: an unknown value is refused.
 */
import t from 'tap';
import { delegateAgent, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { bundleFor } from '../sidecar/decide/helpers.js';
import { gatewayConfig, proofHeader, send, startGatewayWithKey, startUpstream } from './helpers.js';
import type { StartedGateway } from './helpers.js';

t.setTimeout(90_000);
const sc = await startSidecar();
const up = await startUpstream();
t.teardown(async () => { await up.close(); await sc.close(); });

const reader: Flow = await specFlow(sc, 'gw-authzen@example.com', { scopes: ['data:read', 'data:write', 'payments:send'],
  approve: ['data:read', 'data:write'], constraints: { require_approval: { scopes: ['data:write'] } } });
const payer: Flow = await delegateAgent(reader, 'payer', { approve: ['payments:send'],
  constraints: { max_amount: { amount: '50.00', currency: 'USD' } } });
const revoked: Flow = await delegateAgent(reader, 'revoked', { approve: ['data:read'] });
// Made before the revocation (a revoked agent cannot present): one per mode.
const revokedBundles = [await bundleFor(revoked), await bundleFor(revoked)];
t.equal((await reader.user.post(`/v1/service/delegations/${revoked.certId}/revoke`, { reason: 'test' })).status, 200);

const ROUTES = [
  { method: 'GET', path: '/v1/items/*', scope: 'data:read' },
  { method: 'POST', path: '/v1/items', scope: 'data:write' },
  // The AuthZEN evaluation carries no idempotency block: money routes must not key requests (see the last test).
  { method: 'DELETE', path: '/v1/items/*', scope: 'payments:send', idempotency: 'off' },
  { method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' },
    idempotency: 'off' },
];
const gateways: Record<'verify' | 'authzen', StartedGateway> = {
  verify: await startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: ROUTES }), reader.reg.api_key),
  authzen: await startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: ROUTES, decision_api: 'authzen' }),
    reader.reg.api_key),
};
t.teardown(async () => { await gateways.verify.close(); await gateways.authzen.close(); });

const header = (b: Record<string, unknown>): Record<string, string> => ({ 'x-service-proof': proofHeader(b) });
const pay = (amount: string): string => JSON.stringify({ amount, currency: 'USD' });

/** A request to send through both gateways, and the outcome (`status code [approval-id] upstream:n`) verify mode must give. */
interface Row {
  name: string; want: RegExp;
  request: () => Promise<{ method: string; path: string; headers: Record<string, string>; body?: string }>;
}
const rows: Row[] = [
  { name: 'allow', want: /^200 - upstream:1$/,
    request: async () => ({ method: 'GET', path: '/v1/items/1', headers: header(await bundleFor(reader)) }) },
  { name: 'not_delegated', want: /^403 not_delegated upstream:0$/,
    request: async () => ({ method: 'GET', path: '/v1/items/1', headers: header(await bundleFor(payer)) }) },
  { name: 'delegation_revoked', want: /^403 delegation_revoked upstream:0$/, request: async () => ({ method: 'GET', path: '/v1/items/1',
    headers: header(revokedBundles.shift()!) }) },
  { name: 'constraint_denied', want: /^403 constraint_denied upstream:0$/, request: async () => ({ method: 'POST', path: '/v1/payments',
    headers: { ...header(await bundleFor(payer)), 'content-type': 'application/json' }, body: pay('80.00') }) },
  { name: 'allowed payment', want: /^200 - upstream:1$/, request: async () => ({ method: 'POST', path: '/v1/payments',
    headers: { ...header(await bundleFor(payer)), 'content-type': 'application/json' }, body: pay('20.00') }) },
  { name: 'payment without amount (constraint context missing)', want: /^403 constraint_denied upstream:0$/, request: async () => ({ method: 'DELETE',
    path: '/v1/items/9', headers: header(await bundleFor(payer)) }) },
  { name: 'approval_required', want: /^403 proof_rejected approval-id upstream:0$/, request: async () => ({ method: 'POST', path: '/v1/items',
    headers: { ...header(await bundleFor(reader)), 'content-type': 'application/json' }, body: '{}' }) },
  { name: 'forged signature', want: /^403 proof_rejected upstream:0$/, request: async () => {
    const b = await bundleFor(reader);
    const sig = b.sig as Record<string, string>;
    const k = Object.keys(sig)[0]!;
    const flipped = sig[k]!.startsWith('A') ? `B${sig[k]!.slice(1)}` : `A${sig[k]!.slice(1)}`;
    return { method: 'GET', path: '/v1/items/1', headers: header({ ...b, sig: { ...sig, [k]: flipped } }) };
  } },
  { name: 'no proof', want: /^401 proof_required upstream:0$/, request: async () => ({ method: 'GET', path: '/v1/items/1', headers: {} }) },
  { name: 'route not mapped', want: /^403 route_not_mapped upstream:0$/, request: async () => ({ method: 'GET', path: '/elsewhere', headers: {} }) },
];

t.test('both decision APIs give the same outcome for every row', async (t) => {
  for (const row of rows) {
    const got: Record<string, string> = {};
    for (const mode of ['verify', 'authzen'] as const) {
      const before = up.received.length;
      const r = await row.request();
      const res = await send(gateways[mode].url, r.path, { method: r.method, headers: r.headers,
        ...(r.body !== undefined ? { body: r.body } : {}) });
      const code = (res.json as { error?: { code?: string } } | undefined)?.error?.code ?? '-';
      const approval = res.headers['x-service-approval-id'] !== undefined ? ' approval-id' : '';
      got[mode] = `${res.status} ${code}${approval} upstream:${up.received.length - before}`;
    }
    t.match(got.verify, row.want, `${row.name}: the expected outcome`);
    t.equal(got.authzen, got.verify, `${row.name}: ${got.verify}`);
  }
  // Replay: the same proof twice, per mode (a fresh bundle for each mode).
  for (const mode of ['verify', 'authzen'] as const) {
    const h = header(await bundleFor(reader));
    const first = await send(gateways[mode].url, '/v1/items/2', { headers: h });
    const again = await send(gateways[mode].url, '/v1/items/2', { headers: h });
    t.equal(first.status, 200, `${mode}: first use`);
    t.equal(again.status, 403, `${mode}: replay refused`);
    t.equal((again.json as { error?: { code?: string } }).error?.code, 'proof_rejected', `${mode}: proof_rejected`);
  }
});

t.test('decision_api takes verify or authzen, nothing else', async (t) => {
  await t.rejects(startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: ROUTES, decision_api: 'grpc' }),
    reader.reg.api_key), /decision_api/);
});

t.test('decision_api authzen refuses a route that keys requests in the idempotency ledger, naming it', async (t) => {
  const keyed = [{ method: 'POST', path: '/v1/payments', scope: 'payments:send' }];
  await t.rejects(startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: keyed, decision_api: 'authzen' }), reader.reg.api_key),
    /routes\[0\]\.idempotency: route \/v1\/payments uses the idempotency ledger/);
  const gw = await startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: keyed }), reader.reg.api_key);
  t.pass('decision_api verify takes it');
  await gw.close();
});
