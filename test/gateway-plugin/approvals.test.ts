/**
 * Step-up approvals through the gateway in every enforcement mode (issue 23),
 * with the REAL sidecar (in process, SQLite, real signatures) deciding:
 *
 * - an action the certificate's `require_approval` names is refused with 403
 *   `proof_rejected`, reason `approval_required`, and the gateway passes the
 *   approval id on in the body (`error.approval_id`) and in the header
 *   `X-Service-Approval-Id`, with `Cache-Control: no-store`; the id is the
 *   pending approval the account holder sees;
 * - once the account holder approves it through the session API, exactly one
 *   retry with a fresh proof reaches the upstream; the next is
 *   `approval_used` with the same id;
 * - on an MCP route (proxy, plugin, and the Envoy check shape, which forwards
 *   the body) the refusal is a JSON-RPC error whose `data` carries the reason,
 *   the tool and the approval id, with the same header; the tool reaches
 *   verify as `context.tool`, so the person sees which tool waits.
 *
 * Modes: proxy, plugin, NGINX and Caddy (real), Envoy and Traefik shapes.
 */

import t from 'tap';
import { APPROVAL_ID_HEADER } from '../../src/protocol.js';
import { present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { proofHeader, send, startUpstream } from './helpers.js';
import { startMcpUpstream } from './mcp-helpers.js';
import { MODES, startMode } from './modes.js';

t.setTimeout(180_000);

const sc = await startSidecar();
const up = await startUpstream();
const mcpServer = await startMcpUpstream(true);
t.teardown(async () => {
  await mcpServer.close();
  await up.close();
  await sc.close();
});
const flow: Flow = await specFlow(sc, 'gw-approvals@example.com', {
  scopes: ['data:read', 'data:delete', 'execute:tool'], approve: ['data:read', 'data:delete', 'execute:tool'],
  constraints: { require_approval: { scopes: ['data:delete'] } },
});
const apiKey = flow.reg.api_key as string;
const timeouts = { verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 };
const PLAIN = [
  { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
  { method: 'DELETE', path: '/v1/items/:id', scope: 'data:delete' },
];
const MCP_ROUTE = { method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools: { get_weather: 'data:read', delete_records: 'data:delete' } } };

const proof = async (): Promise<string> => proofHeader(await present(flow));
const pending = async (): Promise<Array<{ approval_id: string; action: { tool: string | null; path: string | null } }>> =>
  (await flow.user.get('/v1/service/approvals?state=pending')).body.approvals;

for (const [i, mode] of MODES.entries()) {
  await t.test(`${mode}: approval_required passes the approval id on; one approved retry passes`, async (t) => {
    const gw = await startMode(mode, up.url, sc.url, { routes: PLAIN, ...timeouts }, apiKey);
    t.teardown(() => gw.close());
    const path = `/v1/items/${100 + i}`;
    const before = up.received.length;
    const first = await send(gw.url, path, { method: 'DELETE', headers: { 'x-service-proof': await proof() } });
    t.equal(first.status, 403);
    t.match(first.json?.error, { code: 'proof_rejected', reason: 'approval_required', status: 403 });
    const id = first.json?.error?.approval_id as string;
    t.match(id, /^[0-9a-f-]{36}$/, 'the approval id in the body');
    t.equal(first.headers[APPROVAL_ID_HEADER], id, 'and in X-Service-Approval-Id');
    t.equal(first.headers['cache-control'], 'no-store');
    t.ok((await pending()).some((a) => a.approval_id === id && a.action.path === path), 'the id names the pending approval of this action');
    const again = await send(gw.url, path, { method: 'DELETE', headers: { 'x-service-proof': await proof() } });
    t.equal(again.json?.error?.approval_id, id, 'a retry while pending names the same approval');
    const other = await send(gw.url, `/v1/items/${200 + i}`, { method: 'GET', headers: { 'x-service-proof': await proof() } });
    t.equal(other.status, 200, 'an action the rule does not name passes');
    t.equal(other.headers[APPROVAL_ID_HEADER], undefined, 'with no approval header');

    t.equal((await flow.user.post(`/v1/service/approvals/${id}/approve`)).status, 200, 'the account holder approves');
    const approved = await send(gw.url, path, { method: 'DELETE', headers: { 'x-service-proof': await proof() } });
    t.equal(approved.status, 200, 'the approved action passes');
    const used = await send(gw.url, path, { method: 'DELETE', headers: { 'x-service-proof': await proof() } });
    t.equal(used.status, 403);
    t.match(used.json?.error, { code: 'proof_rejected', reason: 'approval_used', approval_id: id });
    t.equal(used.headers[APPROVAL_ID_HEADER], id);
    t.equal(up.received.filter((r) => r.method === 'DELETE').length - up.received.slice(0, before).filter((r) => r.method === 'DELETE').length, 1,
      'the upstream saw the DELETE exactly once');
    t.equal(await gw.failOpen(), 0);
  });
}

const rpc = (id: number, name: string, args: Record<string, unknown>): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const mcpHeaders = async (): Promise<Record<string, string>> => ({
  'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': await proof(),
});

for (const [i, mode] of (['proxy', 'plugin', 'envoy'] as const).entries()) {
  await t.test(`${mode}, MCP route: the JSON-RPC error carries the approval id; the tool reaches verify`, async (t) => {
    const gw = await startMode(mode, mcpServer.url, sc.url, { routes: [MCP_ROUTE], ...timeouts }, apiKey);
    t.teardown(() => gw.close());
    const body = rpc(7, 'delete_records', { table: `logs_${i}` });
    const first = await send(gw.url, '/mcp', { method: 'POST', headers: await mcpHeaders(), body });
    t.equal(first.status, 403);
    t.match(first.json, { jsonrpc: '2.0', id: 7, error: { code: -32003, data: { code: 'proof_rejected', reason: 'approval_required', tool: 'delete_records' } } });
    const id = first.json?.error?.data?.approval_id as string;
    t.match(id, /^[0-9a-f-]{36}$/, 'error.data.approval_id');
    t.equal(first.headers[APPROVAL_ID_HEADER], id, 'and the header');
    t.ok((await pending()).some((a) => a.approval_id === id && a.action.tool === 'delete_records'), 'the person sees the tool (context.tool)');
    t.notOk(mcpServer.runs.some((r) => r.tool === 'delete_records' && r.args.table === `logs_${i}`), 'the tool did not run');
    t.equal((await flow.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
    const approved = await send(gw.url, '/mcp', { method: 'POST', headers: await mcpHeaders(), body });
    t.equal(approved.status, 200, `the approved tool call passes: ${approved.text.slice(0, 200)}`);
    t.equal(mcpServer.runs.filter((r) => r.tool === 'delete_records' && r.args.table === `logs_${i}`).length, 1, 'and ran once');
    const otherArgs = await send(gw.url, '/mcp', { method: 'POST', headers: await mcpHeaders(), body: rpc(8, 'delete_records', { table: `other_${i}` }) });
    t.equal(otherArgs.json?.error?.data?.reason, 'approval_required', 'other arguments are another action');
    t.not(otherArgs.json?.error?.data?.approval_id, id);
  });
}
