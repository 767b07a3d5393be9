/**
 * `agent-authz/client/a2a` with the official `@a2a-js/sdk` client, through
 * the REAL gateway (an A2A route) to a real SDK A2A server, the REAL sidecar
 * deciding, for a certificate that requires operation-bound proofs:
 *
 * - the agent card is fetched without a proof (no challenge spent); every
 *   A2A call carries its own fresh proof, bound to the call's body (so to
 *   its method and task id), and the binding verifies through the gateway;
 * - a proof made for `GetTask` of a task, sent with `CancelTask` of the same
 *   task (or `GetTask` of another), is denied `operation_mismatch` and never
 *   reaches the server;
 * - a refusal rejects the SDK call with an AgentAuthzError naming the method.
 */

import t from 'tap';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';
import { AgentAuthzError } from '../../client/index.js';
import { createAgentA2aFetch } from '../../client/a2a.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from '../gateway-plugin/helpers.js';
import { startA2aUpstream } from '../gateway-plugin/a2a-helpers.js';

t.setTimeout(90_000);

const sc = await startSidecar();
const server = await startA2aUpstream();
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const flow = await specFlow(sc, 'a2a-client@example.com', {
  scopes: ['messages:send', 'messages:read'], approve: ['messages:send', 'messages:read'],
  constraints: { require_bound_operation: true },
});
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [
    { method: 'POST', path: '/a2a', scope: 'messages:send', a2a: { scopes: { task_read: 'messages:read' } } },
    { method: 'GET', path: '/.well-known/agent-card.json', public: true },
  ],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());
server.advertise(`${gw.url}/a2a`, '1.0');

interface Sent { method: string; url: string; proof: string | null; body: string }

/** The SDK client over the agent fetch; `rewrite` may swap the body a proof was made for (a replay on the wire). */
async function sdkClient(sent: Sent[], rewrite?: (body: string) => string) {
  const wire: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    const raw = init?.body;
    let body = typeof raw === 'string' ? raw : raw instanceof Uint8Array ? new TextDecoder().decode(raw) : '';
    if (!String(input).startsWith(gw.url)) return fetch(input, init);
    if (rewrite !== undefined && body !== '') body = rewrite(body);
    sent.push({ method: init?.method ?? 'GET', url: String(input), proof: headers.get('x-service-proof'), body });
    return fetch(input, { ...init, headers, ...(body === '' ? {} : { body }) });
  };
  const fetchImpl = createAgentA2aFetch({
    sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string,
    agentId: flow.agentId, fetch: wire,
  }) as typeof fetch;
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }));
  return factory.createFromUrl(gw.url);
}

const message = (s: string) => ({
  message: {
    messageId: `m-${Math.random().toString(36).slice(2)}`, contextId: '', taskId: '', role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: s } }] as never, extensions: [], referenceTaskIds: [], metadata: undefined,
  },
  tenant: '', configuration: undefined, metadata: undefined,
});

let task = '';

t.test('every A2A call carries its own bound proof; the card none', async (t) => {
  const sent: Sent[] = [];
  const cardHits = server.cardHits;
  const client = await sdkClient(sent);
  t.equal(server.cardHits, cardHits + 1, 'the SDK read the card through the gateway');
  const result = await client.sendMessage(message('hello'));
  task = (result as { id: string }).id;
  const read = await client.getTask({ id: task, tenant: '', historyLength: undefined });
  t.equal(read.id, task);
  const card = sent.filter((s) => s.method === 'GET');
  t.same(card.map((s) => [new URL(s.url).pathname, s.proof]), [['/.well-known/agent-card.json', null]],
    'the card through the agent fetch, without a proof');
  const posts = sent.filter((s) => s.method === 'POST');
  t.equal(posts.length, 2, 'two calls');
  t.ok(posts.every((s) => s.proof !== null), 'each with a proof');
  t.not(posts[0]!.proof, posts[1]!.proof, 'a fresh proof per call');
  const events = (await flow.user.get('/v1/service/audit/personal?event_type=proof.presented&limit=2')).body.events as
    Array<{ details: { operation?: Record<string, string> } }>;
  t.ok(events.every((e) => e.details.operation?.path === '/a2a' && /^[0-9a-f]{64}$/.test(e.details.operation.body_sha256 ?? '')),
    'both proofs were bound to the endpoint and their body');
});

t.test('a proof made for one call does not pass with another method or task', async (t) => {
  const before = server.received.length;
  const swap = (from: string, to: string) => (body: string): string => body.replace(from, to);
  const cancel = await sdkClient([], swap('"method":"GetTask"', '"method":"CancelTask"'));
  const err = await cancel.getTask({ id: task, tenant: '', historyLength: undefined }).then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof AgentAuthzError);
  t.same([(err as AgentAuthzError).code, (err as AgentAuthzError).reason, (err as AgentAuthzError).details.method],
    ['proof_rejected', 'operation_mismatch', 'CancelTask']);
  const other = await sdkClient([], swap(`"id":"${task}"`, '"id":"another-task"'));
  const err2 = await other.getTask({ id: task, tenant: '', historyLength: undefined }).then(() => undefined, (e: unknown) => e);
  t.same([(err2 as AgentAuthzError).code, (err2 as AgentAuthzError).reason], ['proof_rejected', 'operation_mismatch']);
  t.equal(server.received.length, before, 'neither reached the server');
});
