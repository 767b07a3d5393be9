/**
 * A2A through the REAL gateway (an A2A route), with the official
 * `@a2a-js/sdk` on both ends: a real SDK A2A server (a2a-helpers.ts) behind
 * the gateway, the real sidecar deciding, and the SDK client driven through
 * `agent-authz/client/a2a` (a fresh proof per call). Covered: the agent card
 * passes without a proof; an allowed message (v1.0 and v0.3 method names)
 * reaches the server and its task is then the sender's; an undelegated
 * message, a skill the sender lacks, another agent's task read, cancel or
 * continuation, a revoked certificate, an unknown method, ListTasks and an
 * SSRF push URL are refused in A2A's shape (a JSON-RPC error with the
 * request's id, our code in `error.data`) and never reach the server.
 */

import t from 'tap';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import type { Client } from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';
import { AgentAuthzError } from '../../client/index.js';
import { createAgentA2aFetch } from '../../client/a2a.js';
import { delegateAgent, present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, proofHeader, startGatewayWithKey } from './helpers.js';
import { startA2aUpstream } from './a2a-helpers.js';

t.setTimeout(120_000);

const sc = await startSidecar();
const server = await startA2aUpstream();
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const scopes = ['messages:send', 'messages:read', 'custom:travel:book'];
const alice = await specFlow(sc, 'a2a-alice@example.com', { scopes, approve: scopes });
const bob = await delegateAgent(alice, 'bob', { approve: ['messages:send', 'messages:read'] });
const carol = await delegateAgent(alice, 'carol', { approve: ['messages:read'] });
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [
    {
      method: 'POST', path: '/a2a', scope: 'messages:send',
      a2a: { skills: { book_flight: 'custom:travel:book' }, scopes: { task_read: 'messages:read' } },
    },
    { method: 'GET', path: '/.well-known/agent-card.json', public: true },
  ],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), alice.reg.api_key as string);
t.teardown(() => gw.close());
server.advertise(`${gw.url}/a2a`, '1.0');

function agentFetch(f: Flow): typeof fetch {
  return createAgentA2aFetch({
    sidecarUrl: sc.url, apiKey: f.platform.apiKey as string, connectionId: f.reg.connection_id as string,
    agentId: f.agentId,
  }) as typeof fetch;
}

async function sdkClient(f: Flow): Promise<Client> {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: agentFetch(f), legacyCompat: { enabled: true } })],
  }));
  return factory.createFromUrl(gw.url);
}

const text = (s: string) => ({ content: { $case: 'text' as const, value: s } });
function message(s: string, extra: { taskId?: string; skill?: string; refs?: string[] } = {}) {
  return {
    message: {
      messageId: `m-${Math.random().toString(36).slice(2)}`, contextId: '', taskId: extra.taskId ?? '',
      role: Role.ROLE_USER, parts: [text(s)] as never, extensions: [], referenceTaskIds: extra.refs ?? [],
      metadata: extra.skill === undefined ? undefined : { skill: extra.skill },
    },
    tenant: '', configuration: undefined, metadata: undefined,
  };
}

async function refusedBy(p: Promise<unknown>): Promise<AgentAuthzError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof AgentAuthzError)) throw new Error(`expected an AgentAuthzError, got ${String(err)}`);
  return err;
}

/** A raw JSON-RPC call with a proof made before it (present of the flow's agent). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rawCall(f: Flow, body: Record<string, unknown>, proof?: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`${gw.url}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-service-proof': proof ?? proofHeader(await present(f)) },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const hits = (): number => server.received.length;

let aliceTask = '';

t.test('the agent card passes without a proof', async (t) => {
  const before = server.cardHits;
  const res = await fetch(`${gw.url}/.well-known/agent-card.json`);
  t.equal(res.status, 200);
  t.equal(((await res.json()) as { name: string }).name, 'agent-authz test agent');
  t.equal(server.cardHits, before + 1, 'served by the A2A server');
});

t.test('v1.0: an allowed message reaches the server; its task is the sender\'s', async (t) => {
  const client = await sdkClient(alice);
  const before = hits();
  const result = await client.sendMessage(message('hello'));
  t.ok('id' in result && typeof result.id === 'string', 'a task came back');
  aliceTask = (result as { id: string }).id;
  t.equal(hits(), before + 1);
  const got = server.received.at(-1)!;
  t.equal(got.method, 'SendMessage');
  t.equal(got.headers['x-service-agent-id'], alice.agentId, 'the server learns the agent');
  t.equal(got.headers['x-service-scope'], 'messages:send');
  t.equal(got.headers['accept-encoding'], 'identity', 'the answer is asked for uncompressed (it is read for task ids)');
  const task = await client.getTask({ id: aliceTask, tenant: '', historyLength: undefined });
  t.equal(task.id, aliceTask, 'the creator reads its task');
  t.equal(server.received.at(-1)!.headers['x-service-scope'], 'messages:read', 'GetTask needs the task_read scope');
  const events = [];
  for await (const e of client.sendMessageStream(message('stream me'))) events.push(e);
  t.ok(events.length >= 1, 'a streamed answer');
  const streamed = events.map((e) => (e.payload?.$case === 'task' ? e.payload.value.id : undefined)).find(Boolean);
  t.ok(streamed, 'the stream named its task');
  const again = await client.getTask({ id: streamed!, tenant: '', historyLength: undefined });
  t.equal(again.id, streamed, 'a task from a streamed answer is the sender\'s too');
});

t.test('an undelegated message and a skill the sender lacks are refused, never forwarded', async (t) => {
  const before = hits();
  const carolClient = await sdkClient(carol);
  const err = await refusedBy(carolClient.sendMessage(message('hi')));
  t.same([err.code, err.status, err.details.method], ['not_delegated', 403, 'SendMessage']);
  const bobClient = await sdkClient(bob);
  const skill = await refusedBy(bobClient.sendMessage(message('to Lisbon', { skill: 'book_flight' })));
  t.same([skill.code, skill.details.method], ['not_delegated', 'SendMessage'], 'book_flight needs custom:travel:book');
  t.equal(hits(), before, 'the server saw neither');
  const ok = await (await sdkClient(alice)).sendMessage(message('to Lisbon', { skill: 'book_flight' }));
  t.ok('id' in ok, 'the agent holding the skill\'s scope books');
  t.equal(server.received.at(-1)!.headers['x-service-scope'], 'custom:travel:book');
});

t.test('another agent cannot read, cancel, continue or reference a task', async (t) => {
  const bobClient = await sdkClient(bob);
  const before = hits();
  const read = await refusedBy(bobClient.getTask({ id: aliceTask, tenant: '', historyLength: undefined }));
  t.same([read.code, read.status, read.details.method], ['a2a_task_not_found', 404, 'GetTask']);
  const cancel = await refusedBy(bobClient.cancelTask({ id: aliceTask, tenant: '', metadata: undefined }));
  t.same([cancel.code, cancel.details.method], ['a2a_task_not_found', 'CancelTask']);
  const cont = await refusedBy(bobClient.sendMessage(message('me too', { taskId: aliceTask })));
  t.same([cont.code, cont.details.method], ['a2a_task_not_found', 'SendMessage']);
  const ref = await refusedBy(bobClient.sendMessage(message('summarize it', { refs: [aliceTask] })));
  t.same([ref.code, ref.details.method], ['a2a_task_not_found', 'SendMessage'],
    'nor reference it (the server would hand its contents to the agent)');
  const raw = await rawCall(bob, { jsonrpc: '2.0', id: 'r-7', method: 'GetTask', params: { id: aliceTask } });
  t.equal(raw.status, 404);
  t.same(raw.json.id, 'r-7', 'the request\'s id');
  t.equal(raw.json.error.code, -32001, 'A2A\'s TaskNotFoundError code');
  t.same([raw.json.error.data.code, raw.json.error.data.method], ['a2a_task_not_found', 'GetTask']);
  t.equal(hits(), before, 'none reached the server');
  const aliceClient = await sdkClient(alice);
  const cancelled = await aliceClient.cancelTask({ id: aliceTask, tenant: '', metadata: undefined });
  t.equal(cancelled.id, aliceTask, 'the creator cancels');
  t.equal(server.received.at(-1)!.method, 'CancelTask');
});

t.test('a revoked certificate is refused in A2A\'s shape', async (t) => {
  const dave = await delegateAgent(alice, 'dave', { approve: ['messages:send'] });
  const proof = proofHeader(await present(dave));
  const rv = await alice.user.post(`/v1/service/delegations/${dave.certId}/revoke`, { reason: 'test' });
  t.equal(rv.status, 200);
  const before = hits();
  const res = await rawCall(dave, {
    jsonrpc: '2.0', id: 41, method: 'SendMessage',
    params: { message: { messageId: 'm-dave', role: 'ROLE_USER', parts: [{ text: 'hi' }] } },
  }, proof);
  t.equal(res.status, 403);
  t.same([res.json.jsonrpc, res.json.id, res.json.error.code], ['2.0', 41, -32043]);
  t.same([res.json.error.data.code, res.json.error.data.method], ['delegation_revoked', 'SendMessage']);
  t.equal(hits(), before, 'never reached the server');
});

t.test('v0.3 method names: the SDK\'s v0.3 transport through the gateway', async (t) => {
  server.advertise(`${gw.url}/a2a`, '0.3');
  t.teardown(() => server.advertise(`${gw.url}/a2a`, '1.0'));
  const client = await sdkClient(alice);
  const result = await client.sendMessage(message('hello 0.3'));
  const task = (result as { id: string }).id;
  t.equal(server.received.at(-1)!.method, 'message/send');
  const read = await client.getTask({ id: task, tenant: '', historyLength: undefined });
  t.equal(read.id, task);
  t.equal(server.received.at(-1)!.method, 'tasks/get');
  const before = hits();
  const bobClient = await sdkClient(bob);
  const err = await refusedBy(bobClient.getTask({ id: task, tenant: '', historyLength: undefined }));
  t.same([err.code, err.details.method], ['a2a_task_not_found', 'tasks/get']);
  const raw = await rawCall(bob, { jsonrpc: '2.0', id: 3, method: 'tasks/cancel', params: { id: task } });
  t.same([raw.status, raw.json.id, raw.json.error.data.code], [404, 3, 'a2a_task_not_found']);
  t.equal(hits(), before, 'neither reached the server');
  const cancelled = await rawCall(alice, { jsonrpc: '2.0', id: 4, method: 'tasks/cancel', params: { id: task } });
  t.equal(cancelled.status, 200, 'the creator cancels with the v0.3 name');
  t.equal(server.received.at(-1)!.method, 'tasks/cancel');
});

t.test('unknown methods and ListTasks are refused before verify', async (t) => {
  const before = hits();
  for (const method of ['tasks/list', 'ListTasks', 'DeleteTask', 'message/Send']) {
    const res = await rawCall(alice, { jsonrpc: '2.0', id: 'x', method, params: {} });
    t.equal(res.status, 403, method);
    t.same([res.json.id, res.json.error.code, res.json.error.data.code], ['x', -32601, 'a2a_method_not_mapped'], method);
  }
  t.equal(hits(), before);
});

t.test('push-notification URLs follow the webhook SSRF rules', async (t) => {
  const client = await sdkClient(alice);
  const own = (await client.sendMessage(message('push me')) as { id: string }).id;
  const before = hits();
  for (const url of ['http://169.254.169.254/latest', 'https://127.0.0.1/hook', 'https://[::1]/x', 'https://10.0.0.8/',
    'https://user:pw@hooks.example.com/']) {
    const res = await rawCall(alice, {
      jsonrpc: '2.0', id: 9, method: 'CreateTaskPushNotificationConfig', params: { taskId: own, url },
    });
    t.same([res.status, res.json.id, res.json.error.code, res.json.error.data.code], [400, 9, -32602, 'a2a_push_url_refused'], url);
  }
  const inSend = await rawCall(alice, {
    jsonrpc: '2.0', id: 10, method: 'message/send',
    params: {
      message: { messageId: 'm-p', role: 'user', kind: 'message', parts: [{ kind: 'text', text: 'x' }] },
      configuration: { pushNotificationConfig: { url: 'https://localhost/cb' } },
    },
  });
  t.same([inSend.status, inSend.json.error.data.code, inSend.json.error.data.method], [400, 'a2a_push_url_refused', 'message/send']);
  t.equal(hits(), before, 'none reached the server');
  const ok = await rawCall(alice, {
    jsonrpc: '2.0', id: 11, method: 'CreateTaskPushNotificationConfig',
    params: { taskId: own, url: 'https://hooks.example.com/a2a' },
  });
  t.equal(ok.status, 200, 'a public https URL passes');
  t.equal(server.received.at(-1)!.method, 'CreateTaskPushNotificationConfig');
});

t.test('mode: shadow forwards what it would refuse, marked for the server', async (t) => {
  const shadow = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
    routes: [{ method: 'POST', path: '/a2a', scope: 'messages:send', mode: 'shadow', a2a: {} }],
    verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
  }), alice.reg.api_key as string);
  t.teardown(() => shadow.close());
  const post = async (f: Flow, body: Record<string, unknown>): Promise<number> => (await fetch(`${shadow.url}/a2a`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-service-proof': proofHeader(await present(f)) },
    body: JSON.stringify(body),
  })).status;
  const send = { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm-s', role: 'ROLE_USER', parts: [{ text: 'x' }] } } };
  t.equal(await post(carol, send), 200, 'an undelegated message is forwarded');
  t.same([server.received.at(-1)!.headers['x-service-decision'], server.received.at(-1)!.headers['x-service-shadow-refusal']],
    ['shadow', '403 not_delegated']);
  t.equal(await post(bob, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: aliceTask } }), 200);
  t.equal(server.received.at(-1)!.headers['x-service-shadow-refusal'], '404 a2a_task_not_found', 'another agent\'s task');
  const unknown = await fetch(`${shadow.url}/a2a`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'Nope' }),
  });
  t.equal(unknown.status, 200, 'shadow mode forwards an unknown method too (would be 403 a2a_method_not_mapped)');
  t.equal(server.received.at(-1)!.headers['x-service-shadow-refusal'], '403 a2a_method_not_mapped');
});

t.test('mode: shadow still refuses an SSRF push URL', async (t) => {
  const shadow = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
    routes: [{ method: 'POST', path: '/a2a', scope: 'messages:send', mode: 'shadow', a2a: {} }],
    verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
  }), alice.reg.api_key as string);
  t.teardown(() => shadow.close());
  const before = hits();
  const res = await fetch(`${shadow.url}/a2a`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-service-proof': proofHeader(await present(alice)) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'CreateTaskPushNotificationConfig', params: { taskId: aliceTask, url: 'https://169.254.169.254/' } }),
  });
  t.equal(res.status, 400);
  t.equal(((await res.json()) as { error: { data: { code: string } } }).error.data.code, 'a2a_push_url_refused');
  t.equal(hits(), before, 'not forwarded');
});

t.test('forward-auth mode (Envoy check shape) decides A2A requests but knows no task', async (t) => {
  const { upstream_url: _unused, ...rest } = gatewayConfig(server.url, sc.url, {
    routes: [{ method: 'POST', path: '/a2a', scope: 'messages:send', a2a: { scopes: { task_read: 'messages:read' } } }],
    verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
  });
  const fa = await startGatewayWithKey({ ...rest, mode: 'forward_auth' }, alice.reg.api_key as string);
  t.teardown(() => fa.close());
  const check = async (body: Record<string, unknown>): Promise<{ status: number; json: any }> => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const text = JSON.stringify(body);
    const res = await fetch(`${fa.url}/forward-auth/envoy/a2a`, {
      method: 'POST', body: text,
      headers: {
        'content-type': 'application/json', 'x-service-proof': proofHeader(await present(alice)),
        'x-envoy-auth-partial-body': 'false',
      },
    });
    const raw = await res.text();
    return { status: res.status, json: raw === '' ? undefined : JSON.parse(raw) };
  };
  const send = await check({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm-fa' } } });
  t.equal(send.status, 200, 'a message is allowed');
  const read = await check({ jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: aliceTask } });
  t.same([read.status, read.json?.id, read.json?.error?.data?.code], [404, 2, 'a2a_task_not_found'],
    'even the creator\'s task: the endpoint never sees the answers that name tasks');
});
