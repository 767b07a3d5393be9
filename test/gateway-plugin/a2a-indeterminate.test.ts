/**
 * A2A routes fail closed when no decision can be made: a sidecar whose verify
 * answers 500, times out, or says `indeterminate` gets the A2A request refused
 * 503 in A2A's shape (the request's id, -32603, our code and cause in
 * `error.data`), and the server never receives it; a missing proof is 401
 * with the method's scope in `WWW-Authenticate` and `error.data`. The real
 * standalone gateway, a recording upstream, a fake sidecar (the failure is
 * what is tested).
 */

import t from 'tap';
import { gatewayConfig, proofHeader, reply, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(60_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar();
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});
const gw = await startGateway(gatewayConfig(up.url, sidecar.url, {
  routes: [{ method: 'POST', path: '/a2a', scope: 'messages:send', a2a: { scopes: { task_read: 'messages:read' } } }],
  verify_timeout_ms: 300,
}));
t.teardown(() => gw.close());

const call = (method: string, params: unknown, proof = true) => send(gw.url, '/a2a', {
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(proof ? { 'x-service-proof': proofHeader() } : {}) },
  body: JSON.stringify({ jsonrpc: '2.0', id: 'q-1', method, params }),
});

t.test('verify failures are 503 in A2A\'s shape, never forwarded', async (t) => {
  const cases: Array<[string, Parameters<typeof startFakeSidecar>[0], string, 'cause' | 'reason', string]> = [
    ['500', (_c, res) => reply(res, 500, { error: { code: 'internal_error', message: 'x', status: 500 } }),
      'verify_unavailable', 'cause', 'verify_status_500'],
    ['timeout', () => undefined, 'verify_unavailable', 'cause', 'verify_timeout'],
    ['indeterminate', (_c, res) => reply(res, 200, { decision: 'indeterminate', decision_reason: 'store_unavailable' }),
      'decision_indeterminate', 'reason', 'store_unavailable'],
  ];
  for (const [name, behaviour, code, member, detail] of cases) {
    sidecar.behaviour = behaviour!;
    const before = up.received.length;
    const res = await call('message/send', { message: { messageId: 'm' } });
    t.equal(res.status, 503, name);
    t.same([res.json.id, res.json.error.code, res.json.error.data.code, res.json.error.data.method],
      ['q-1', -32603, code, 'message/send'], name);
    t.equal(res.json.error.data[member], detail, `${name}: ${member} ${detail}`);
    t.equal(up.received.length, before, `${name}: not forwarded`);
  }
});

t.test('no proof: 401 with the method\'s scope, in A2A\'s shape', async (t) => {
  const res = await call('GetTask', { id: 't-1' }, false);
  t.equal(res.status, 401);
  t.match(res.headers['www-authenticate'], /scope="messages:read", challenge="/);
  t.same([res.json.id, res.json.error.code, res.json.error.data.code, res.json.error.data.required_scope],
    ['q-1', -32041, 'proof_required', 'messages:read']);
});
