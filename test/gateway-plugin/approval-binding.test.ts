/**
 * An approval granted for one operation cannot be spent on another (issue 23:
 * "an approval that cannot be used for another amount, tool or path"),
 * through the real gateway in every enforcement mode, with the REAL sidecar
 * (in process, SQLite, real signatures) deciding and the account holder
 * approving through the session + CSRF endpoints.
 *
 * Plain routes (proxy, plugin, NGINX and Caddy for real, the Envoy and
 * Traefik check shapes): `DELETE /v1/items/A` is approval_required and
 * approved; then
 * - `DELETE /v1/items/B` (same scope, same certificate, another path) is
 *   refused with a NEW approval_required and another approval id, and a retry
 *   names that same new id (it stays pending);
 * - `POST /v1/items/A` (same scope and path, another method) gets its own;
 * - `DELETE /v1/items/A?cascade=1` (the same path with a query) gets its own:
 *   the gateway sends the query's hash (`query_sha256`), which the approval
 *   covers;
 * - `DELETE /v1/items/A` then passes exactly once (the approval was not spent
 *   by the refused requests), the next is approval_used with the first id;
 * - the upstream saw exactly that one request; the pending list holds the two
 *   new approvals, with their own method and path, and not the first.
 *
 * MCP route (proxy, plugin, Envoy shape: the modes that forward the body):
 * `delete_records` and `read_file` both map to `data:delete`. An approval of
 * a `delete_records` call does not let `read_file` run: it gets its own
 * approval_required (JSON-RPC error, `data.tool` read_file) before the MCP
 * server sees it. The approval binds the whole message (the context's
 * `body_sha256`), so the same call under another JSON-RPC id gets its own
 * approval too; the approved message, resent byte for byte (as the client's
 * `waitForApproval` does), runs exactly once.
 */

import t from 'tap';
import type { Test } from 'tap';
import { APPROVAL_ID_HEADER } from '../../src/protocol.js';
import { present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { proofHeader, send, startUpstream } from './helpers.js';
import type { Response } from './helpers.js';
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
const flow: Flow = await specFlow(sc, 'gw-approval-binding@example.com', {
  scopes: ['data:read', 'data:delete', 'execute:tool'], approve: ['data:read', 'data:delete', 'execute:tool'],
  constraints: { require_approval: { scopes: ['data:delete'] } },
});
const apiKey = flow.reg.api_key as string;
const timeouts = { verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 };
const PLAIN = [{ method: ['DELETE', 'POST'], path: '/v1/items/:id', scope: 'data:delete' }];
const MCP_ROUTE = { method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools: { delete_records: 'data:delete', read_file: 'data:delete' } } };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const proof = async (): Promise<string> => proofHeader(await present(flow));
type Action = { method: string | null; path: string | null; tool: string | null };
const pending = async (): Promise<Map<string, Action>> =>
  new Map(((await flow.user.get('/v1/service/approvals?state=pending&limit=200')).body.approvals as Array<{ approval_id: string; action: Action }>).map((a) => [a.approval_id, a.action]));
const stateOf = async (id: string): Promise<string> => (await flow.user.get(`/v1/service/approvals/${id}`)).body.state as string;
const reached = (method: string, path: string): number => up.received.filter((r) => r.method === method && r.url === path).length;

/** The approval id of a plain approval_required refusal (body and header must agree). */
function approvalRequired(t: Test, res: Response, what: string): string {
  t.equal(res.status, 403, `${what}: 403`);
  t.match(res.json?.error, { code: 'proof_rejected', reason: 'approval_required', status: 403 }, `${what}: approval_required`);
  const id = res.json?.error?.approval_id as string;
  t.match(id, UUID, `${what}: an approval id`);
  t.equal(res.headers[APPROVAL_ID_HEADER], id, `${what}: the same id in ${APPROVAL_ID_HEADER}`);
  return id;
}

for (const [i, mode] of MODES.entries()) {
  await t.test(`${mode}: an approval of DELETE on one path is not usable for another path or method`, async (t) => {
    const gw = await startMode(mode, up.url, sc.url, { routes: PLAIN, ...timeouts }, apiKey);
    t.teardown(() => gw.close());
    const a = `/v1/items/${300 + i}`;
    const b = `/v1/items/${400 + i}`;
    const del = async (path: string, method = 'DELETE'): Promise<Response> => send(gw.url, path, { method, headers: { 'x-service-proof': await proof() } });

    const first = approvalRequired(t, await del(a), `DELETE ${a}`);
    t.equal((await flow.user.post(`/v1/service/approvals/${first}/approve`)).status, 200, 'the account holder approves DELETE A');
    t.equal(await stateOf(first), 'granted');

    const otherPath = approvalRequired(t, await del(b), `DELETE ${b}`);
    t.not(otherPath, first, 'another path gets a new approval, not the granted one');
    t.equal(approvalRequired(t, await del(b), `DELETE ${b} again`), otherPath, 'a retry names the same, still pending, approval');
    const otherMethod = approvalRequired(t, await del(a, 'POST'), `POST ${a}`);
    t.not(otherMethod, first, 'another method on the same path gets a new approval');
    t.not(otherMethod, otherPath);
    const withQuery = approvalRequired(t, await del(`${a}?cascade=1`), `DELETE ${a}?cascade=1`);
    t.not(withQuery, first, 'the same path with a query gets a new approval');
    t.not(withQuery, otherPath);
    t.equal(await stateOf(first), 'granted', 'the refused requests did not spend the approval');

    const approved = await del(a);
    t.equal(approved.status, 200, `the approved DELETE ${a} passes: ${approved.text.slice(0, 200)}`);
    const used = await del(a);
    t.equal(used.status, 403, 'once');
    t.match(used.json?.error, { code: 'proof_rejected', reason: 'approval_used', approval_id: first });
    t.equal(await stateOf(first), 'used');

    t.equal(reached('DELETE', a), 1, 'the upstream saw DELETE A exactly once');
    t.equal(reached('DELETE', b), 0, 'and never DELETE B');
    t.equal(reached('POST', a), 0, 'nor POST A');
    t.equal(reached('DELETE', `${a}?cascade=1`), 0, 'nor DELETE A with a query');
    const open = await pending();
    t.notOk(open.has(first), 'the first approval is not pending');
    t.match(open.get(otherPath), { method: 'DELETE', path: b, tool: null }, 'the new approval shows its own path');
    t.match(open.get(otherMethod), { method: 'POST', path: a, tool: null }, 'and its own method');
    t.ok(open.has(withQuery), 'the approval of the request with a query is pending');
    t.equal(await gw.failOpen(), 0);
  });
}

const rpc = (id: number, name: string, args: Record<string, unknown>): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

for (const [i, mode] of (['proxy', 'plugin', 'envoy'] as const).entries()) {
  await t.test(`${mode}, MCP route: an approval of one tool is not usable for another tool of the same scope`, async (t) => {
    const gw = await startMode(mode, mcpServer.url, sc.url, { routes: [MCP_ROUTE], ...timeouts }, apiKey);
    t.teardown(() => gw.close());
    const callTool = async (id: number, name: string, args: Record<string, unknown>): Promise<Response> => send(gw.url, '/mcp', {
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': await proof() }, body: rpc(id, name, args),
    });
    const toolRequired = (res: Response, id: number, tool: string): string => {
      t.equal(res.status, 403, `${tool}: 403`);
      t.match(res.json, { jsonrpc: '2.0', id, error: { code: -32003, data: { code: 'proof_rejected', reason: 'approval_required', tool } } }, `${tool}: approval_required for this tool`);
      const approvalId = res.json?.error?.data?.approval_id as string;
      t.match(approvalId, UUID, `${tool}: an approval id`);
      t.equal(res.headers[APPROVAL_ID_HEADER], approvalId, `${tool}: the same id in the header`);
      return approvalId;
    };
    const table = `binding_${i}`;
    const file = `/binding/${i}`;
    const runs = (tool: string): number => mcpServer.runs.filter((r) => (tool === 'read_file' ? r.args.path === file : r.args.table === table) && r.tool === tool).length;

    const first = toolRequired(await callTool(1, 'delete_records', { table }), 1, 'delete_records');
    t.equal((await flow.user.post(`/v1/service/approvals/${first}/approve`)).status, 200, 'the account holder approves the delete_records call');

    const other = toolRequired(await callTool(2, 'read_file', { path: file }), 2, 'read_file');
    t.not(other, first, 'the other tool gets its own approval, not the granted one');
    t.equal(runs('read_file'), 0, 'read_file did not run');
    t.match((await pending()).get(other), { tool: 'read_file' }, 'the person sees the other tool waiting');

    const otherId = toolRequired(await callTool(5, 'delete_records', { table }), 5, 'delete_records');
    t.not(otherId, first, 'the same call under another JSON-RPC id is another message (body_sha256): its own approval');
    t.equal(await stateOf(first), 'granted', 'the refused calls did not spend the approval');

    const approved = await callTool(1, 'delete_records', { table });
    t.equal(approved.status, 200, `the approved message, resent byte for byte, runs: ${approved.text.slice(0, 200)}`);
    t.equal(approved.json?.id, 1);
    const used = await callTool(1, 'delete_records', { table });
    t.match(used.json, { id: 1, error: { data: { reason: 'approval_used', approval_id: first, tool: 'delete_records' } } }, 'once');
    t.equal(runs('delete_records'), 1, 'delete_records ran exactly once');
    t.equal(runs('read_file'), 0, 'read_file never ran');
    t.equal(await gw.failOpen(), 0);
  });
}
