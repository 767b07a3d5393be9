/**
 * The pure parts of A2A routes: config validation (path-named TypeErrors),
 * reading an A2A request strictly (both method generations, both spellings
 * of task ids, push URLs), the scope a request needs, the task-owner store
 * (TTL, bound, first owner wins), the answer tap that records task ids
 * before releasing the bytes (JSON and SSE split at any byte), and the
 * refusal's JSON-RPC shape.
 */

import t from 'tap';
import { PassThrough, Readable } from 'node:stream';
import { compileA2a, A2A_METHODS } from '../../gateway-plugin/a2a/config.js';
import { a2aScope, readA2aMessage } from '../../gateway-plugin/a2a/message.js';
import { TaskOwners, recordTasks, taskIdsOf } from '../../gateway-plugin/a2a/tasks.js';
import { compileRoutes } from '../../gateway-plugin/routes.js';
import { renderRefusal } from '../../gateway-plugin/refusal.js';
import type { McpFacts } from '../../gateway-plugin/mcp/message.js';
import { ServiceError } from '../../src/errors.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { resolveConfig } from '../../gateway-plugin/standalone/config.js';

const route = compileA2a({ skills: { book_flight: 'custom:travel:book' }, scopes: { task_read: 'messages:read' } },
  'routes[0].a2a', 'messages:send');
const facts = (): McpFacts => ({ parsed: false, id: null, tool: undefined, protocol: 'a2a' });
const read = (doc: unknown, f = facts()) => readA2aMessage(Buffer.from(JSON.stringify(doc)), 'application/json', f);
const code = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServiceError) return err.code;
    if (err instanceof TypeError) return `TypeError: ${err.message}`;
    throw err;
  }
  return 'no error';
};

t.test('config: validated with path-named errors', async (t) => {
  t.equal(route.scopes.send, 'messages:send');
  t.equal(route.scopes.task_read, 'messages:read');
  t.equal(route.scopes.task_cancel, 'messages:send', 'default: the route\'s scope');
  t.equal(route.taskTtlMs, 86_400_000);
  t.match(code(() => compileA2a({ skils: {} }, 'r.a2a', 'data:read')), /r\.a2a\.skils: unknown key/);
  t.match(code(() => compileA2a({ skills: { 'bad id!': 'data:read' } }, 'r.a2a', 'data:read')), /r\.a2a\.skills\.bad id!/);
  t.match(code(() => compileA2a({ scopes: { task_read: 'data:raed' } }, 'r.a2a', 'data:read')), /r\.a2a\.scopes\.task_read/);
  t.match(code(() => compileA2a({ task_ttl_ms: 5 }, 'r.a2a', 'data:read')), /r\.a2a\.task_ttl_ms/);
  const entry = { method: 'POST', path: '/a2a', scope: 'messages:send', a2a: {} };
  t.match(code(() => compileRoutes([{ ...entry, mcp: { tools: { x: 'data:read' } } }], 'routes')), /MCP route or an A2A route/);
  t.match(code(() => compileRoutes([{ ...entry, method: 'GET' }], 'routes')), /must accept POST/);
  t.match(code(() => compileRoutes([{ method: 'POST', path: '/a2a', public: true, a2a: {} }], 'routes')), /must not be public/);
  t.match(code(() => compileRoutes([{ ...entry, mode: 'shadow', a2a: { skills: { pay: 'payments:send' } } }], 'routes')),
    /skill pay's scope payments:send is sensitive/, 'a shadow route with a sensitive skill scope is refused');
  t.equal(A2A_METHODS.size, 21, 'eleven v1.0 names and ten v0.3 names');
});

t.test('reading requests of both generations', async (t) => {
  const f = facts();
  const send = read({ jsonrpc: '2.0', id: 1, method: 'SendMessage',
    params: { message: { messageId: 'm', taskId: 't-1', metadata: { skill: 'book_flight' } } } }, f);
  t.same([send.taskIds, send.skill, f.id, f.method], [['t-1'], 'book_flight', 1, 'SendMessage']);
  t.equal(a2aScope(route, send), 'custom:travel:book', 'a known skill: its scope');
  t.equal(a2aScope(route, read({ jsonrpc: '2.0', id: 1, method: 'message/send',
    params: { message: { messageId: 'm', metadata: { skill: 'unknown' } } } })), 'messages:send', 'an unknown skill: the route\'s');
  t.same(read({ jsonrpc: '2.0', id: 'a', method: 'SendMessage', params: { message: { task_id: 't-2' } } }).taskIds, ['t-2']);
  t.equal(code(() => read({ jsonrpc: '2.0', id: 'a', method: 'SendMessage',
    params: { message: { taskId: 't-1', task_id: 't-2' } } })), 'invalid_request', 'both spellings are refused');
  const get = read({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: 't-3' } });
  t.same([get.taskIds, a2aScope(route, get)], [['t-3'], 'messages:read']);
  t.same(read({ jsonrpc: '2.0', id: 2, method: 'tasks/pushNotificationConfig/list', params: { id: 't-4' } }).taskIds, ['t-4']);
  const set = read({ jsonrpc: '2.0', id: 2, method: 'tasks/pushNotificationConfig/set',
    params: { taskId: 't-5', pushNotificationConfig: { url: 'https://h.example.com/' } } });
  t.same([set.taskIds, set.pushUrls], [['t-5'], ['https://h.example.com/']]);
  const create = read({ jsonrpc: '2.0', id: 2, method: 'CreateTaskPushNotificationConfig',
    params: { task_id: 't-6', url: 'http://10.1.2.3/' } });
  t.same([create.taskIds, create.pushUrls], [['t-6'], ['http://10.1.2.3/']]);
  t.equal(code(() => a2aScope(route, create)), 'a2a_push_url_refused');
  const v1Send = read({ jsonrpc: '2.0', id: 2, method: 'SendStreamingMessage',
    params: { message: {}, configuration: { taskPushNotificationConfig: { url: 'https://localhost/' } } } });
  t.equal(code(() => a2aScope(route, v1Send)), 'a2a_push_url_refused');
  t.same(read({ jsonrpc: '2.0', id: 2, method: 'GetExtendedAgentCard' }).taskIds, [], 'no params needed');
  const refs = read({ jsonrpc: '2.0', id: 3, method: 'SendMessage',
    params: { message: { taskId: 't-7', referenceTaskIds: ['t-8', 't-9'] } } });
  t.same(refs.taskIds, ['t-7', 't-8', 't-9'], 'referenced tasks must be the caller\'s too');
  t.same(read({ jsonrpc: '2.0', id: 3, method: 'message/send', params: { message: { reference_task_ids: ['t-1'] } } }).taskIds, ['t-1']);
  t.equal(code(() => read({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: { referenceTaskIds: 't-1' } } })),
    'invalid_request');
  const odd = read({ jsonrpc: '2.0', id: 4, method: 'message/send',
    params: {
      message: {}, configuration: { push_notification_config: { url: 'http://127.0.0.1/' } },
      metadata: { pushTo: [{ url: 'https://x.example/' }] },
    } });
  t.same([...odd.pushUrls].sort(), ['http://127.0.0.1/', 'https://x.example/'], 'a push URL under any push-named member is checked');
  t.equal(code(() => a2aScope(route, odd)), 'a2a_push_url_refused');
});

t.test('refused requests', async (t) => {
  const bad = (doc: unknown): string => code(() => read(doc));
  t.equal(bad([{ jsonrpc: '2.0', id: 1, method: 'GetTask' }]), 'batch_not_supported');
  t.equal(bad({ jsonrpc: '2.0', method: 'GetTask', params: { id: 'x' } }), 'invalid_request', 'a notification');
  t.equal(bad({ jsonrpc: '1.0', id: 1, method: 'GetTask', params: { id: 'x' } }), 'invalid_request');
  t.equal(bad({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 7 } }), 'invalid_request', 'a numeric task id');
  t.equal(bad({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: {} }), 'invalid_request', 'no task id');
  t.equal(bad({ jsonrpc: '2.0', id: 1, method: 'tasks/list' }), 'a2a_method_not_mapped');
  t.equal(bad({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} }), 'a2a_method_not_mapped');
  t.equal(code(() => readA2aMessage(Buffer.from('{"jsonrpc":"2.0","id":1,"id":2}'), 'application/json', facts())),
    'invalid_request', 'duplicate keys');
  t.equal(code(() => readA2aMessage(Buffer.from('{}'), 'text/plain', facts())), 'unsupported_media_type');
});

t.test('refusals take A2A\'s JSON-RPC codes and name the method', async (t) => {
  const f: McpFacts = { parsed: true, id: 'q', tool: undefined, protocol: 'a2a', method: 'GetTask' };
  const body = (err: ServiceError) => renderRefusal(err, f).body as { id: unknown; error: { code: number; data: Record<string, unknown> } };
  t.equal(body(new ServiceError('a2a_task_not_found')).error.code, -32001);
  t.equal(body(new ServiceError('a2a_method_not_mapped')).error.code, -32601);
  t.equal(body(new ServiceError('a2a_push_url_refused')).error.code, -32602);
  t.equal(body(new ServiceError('not_delegated')).error.code, -32043);
  t.equal(body(new ServiceError('proof_required')).error.code, -32041);
  t.equal(body(new ServiceError('verify_unavailable')).error.code, -32603);
  t.same([body(new ServiceError('not_delegated')).id, body(new ServiceError('not_delegated')).error.data.method], ['q', 'GetTask']);
  const mcp = renderRefusal(new ServiceError('not_delegated'), { parsed: true, id: 1, tool: 'x' }).body as { error: { code: number } };
  t.equal(mcp.error.code, -32003, 'MCP keeps its codes');
});

t.test('task owners: first owner wins, TTL, bound', async (t) => {
  let now = 1_000;
  const owners = new TaskOwners(10_000, 3, () => now);
  owners.record('t1', 'alice');
  owners.record('t1', 'bob');
  t.equal(owners.owner('t1'), 'alice', 'another agent cannot take a task over');
  now += 10_000;
  t.equal(owners.owner('t1'), undefined, 'expired');
  owners.record('a', 'x');
  owners.record('b', 'x');
  owners.record('c', 'x');
  owners.record('a', 'x');
  owners.record('d', 'x');
  t.same(['a', 'b', 'c', 'd'].map((id) => owners.owner(id)), ['x', undefined, 'x', 'x'], 'the least recently recorded goes');
  t.equal(owners.size, 3);
});

async function tapped(sse: boolean, chunks: string[]): Promise<{ out: string; ids: string[]; idsAtRelease: number[] }> {
  const ids: string[] = [];
  const idsAtRelease: number[] = [];
  const tap = recordTasks(sse, (id) => ids.push(id));
  const sink = new PassThrough();
  let out = '';
  sink.on('data', (c: Buffer) => { out += c.toString('utf8'); idsAtRelease.push(ids.length); });
  await new Promise<void>((resolve, reject) => {
    Readable.from(chunks.map((c) => Buffer.from(c))).pipe(tap).pipe(sink).on('end', resolve).on('error', reject);
  });
  return { out, ids, idsAtRelease };
}

t.test('the answer tap records task ids before the bytes that name them are released', async (t) => {
  t.same(taskIdsOf({ result: { task: { id: 'a' } } }), ['a']);
  t.same(taskIdsOf({ result: { kind: 'task', id: 'b' } }), ['b']);
  t.same(taskIdsOf({ result: { kind: 'status-update', taskId: 'c' } }), ['c']);
  t.same(taskIdsOf({ result: { statusUpdate: { taskId: 'd' } } }), ['d']);
  t.same(taskIdsOf({ error: { code: 1 } }), []);
  const json = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { task: { id: 'task-ü' } } });
  const split = [json.slice(0, 7), json.slice(7, 30), json.slice(30)];
  const j = await tapped(false, split);
  t.same([j.out, j.ids], [json, ['task-ü']]);
  t.equal(j.idsAtRelease.at(-1), 1, 'the last bytes left after the id was recorded');
  const events = ['data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"s1"}}}\n\n',
    'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"s2"}}}\n\n'].join('');
  const s = await tapped(true, [events.slice(0, 20), events.slice(20, 70), events.slice(70)]);
  t.same([s.out, s.ids], [events, ['s1', 's2']]);
  t.equal(s.idsAtRelease[0], 1, 'the first released bytes came after s1 was recorded');
});

t.test('docs/a2a.md: the example config is a valid gateway config', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '../../docs/a2a.md'), 'utf8');
  const yaml = /```yaml\n(upstream_url:[\s\S]*?)```/.exec(doc)?.[1] ?? '';
  const cfg = resolveConfig(parseYaml(yaml), { GATEWAY_API_KEY: 'a-key-of-the-platform-0123456789' });
  const routes = compileRoutes(cfg.plugin.routes, 'config: routes');
  const a2a = routes.resolve('POST', '/a2a');
  t.equal(a2a.kind, 'match');
  if (a2a.kind === 'match') {
    t.same([a2a.route.a2a?.skills.get('book_flight'), a2a.route.a2a?.scopes.task_read], ['custom:travel:book', 'messages:read']);
  }
  const card = routes.resolve('GET', '/.well-known/agent-card.json');
  t.ok(card.kind === 'match' && card.route.scope === undefined, 'the agent card route is public');
});
