/**
 * MCP routes when no decision can be made (issue 22 §1: "an indeterminate
 * answer gives 503"), in every mode that forwards the body an MCP route
 * needs (modes.ts: the standalone proxy, the plugin in an app's own Fastify
 * server, the forward-auth endpoint behind the Envoy ext_authz check shape).
 *
 * A fake sidecar that records every verify call plays each failure: verify
 * answers 200 `indeterminate` (with and without a reason), 500, 503, a hung
 * answer (timeout), a reset connection, and a sidecar that is not there at
 * all (a closed port). Behind the gateway runs the real MCP server of
 * mcp-helpers.ts (official SDK, JSON answers). For a `tools/call` each case
 * must give:
 *
 * - HTTP 503 with `Cache-Control: no-store` and no `WWW-Authenticate`;
 * - a JSON-RPC 2.0 error response carrying the request's own `id` (number
 *   and string ids), `error.code` -32603 (docs/mcp.md: 5xx → -32603) and the
 *   table message;
 * - `error.data`: the service error (`code` decision_indeterminate or
 *   verify_unavailable, `status` 503, `cause` for verify_unavailable),
 *   `reason` (the sidecar's reason, else the code) and `tool`;
 * - verify asked once, for the tool's scope with `context.tool`;
 * - the MCP server never receiving the request, the tool never running, and
 *   the fail-open tripwire at 0.
 */

import t from 'tap';
import type { Test } from 'tap';
import type { ServerResponse } from 'node:http';
import { ERRORS } from '../../src/errors.js';
import { allowAll, proofHeader, reply, send, startFakeSidecar } from './helpers.js';
import type { VerifyBehaviour } from './helpers.js';
import { startMcpUpstream } from './mcp-helpers.js';
import { startMode } from './modes.js';
import type { Mode } from './modes.js';

t.setTimeout(120_000);

const MODES_WITH_BODY: readonly Mode[] = ['proxy', 'plugin', 'envoy'];
const MCP_ROUTE = {
  method: 'POST', path: '/mcp', scope: 'execute:tool',
  mcp: { tools: { get_weather: 'data:read', send_payment: { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } } } },
};
// 1 s: short enough for the timeout case, long enough for a loaded 2-core machine to answer the rest.
const TIMEOUTS = { verify_timeout_ms: 1000, challenge_timeout_ms: 500 };

const mcpServer = await startMcpUpstream(true);
const sidecar = await startFakeSidecar();
const hung: ServerResponse[] = [];
t.teardown(async () => {
  for (const res of hung) res.destroy();
  await mcpServer.close();
  await sidecar.close();
});

interface Case {
  name: string;
  behaviour: VerifyBehaviour;
  code: 'decision_indeterminate' | 'verify_unavailable';
  reason: string;
  cause?: string;
}

const CASES: Case[] = [
  { name: '200 indeterminate with a reason', behaviour: (_c, res) => reply(res, 200, { decision: 'indeterminate', decision_reason: 'store_unavailable' }), code: 'decision_indeterminate', reason: 'store_unavailable' },
  { name: '200 indeterminate without a reason', behaviour: (_c, res) => reply(res, 200, { decision: 'indeterminate' }), code: 'decision_indeterminate', reason: 'decision_indeterminate' },
  { name: '200 indeterminate with an unsafe reason', behaviour: (_c, res) => reply(res, 200, { decision: 'indeterminate', decision_reason: 'Store <down>' }), code: 'decision_indeterminate', reason: 'decision_indeterminate' },
  { name: '500', behaviour: (_c, res) => reply(res, 500, { error: { code: 'internal_error', message: 'stack at x.ts:1', status: 500 } }), code: 'verify_unavailable', reason: 'verify_unavailable', cause: 'verify_status_500' },
  { name: '503', behaviour: (_c, res) => reply(res, 503, { error: { code: 'service_unavailable', message: 'x', status: 503 } }), code: 'verify_unavailable', reason: 'verify_unavailable', cause: 'verify_status_503' },
  { name: 'no answer (timeout)', behaviour: (_c, res) => { hung.push(res); }, code: 'verify_unavailable', reason: 'verify_unavailable', cause: 'verify_timeout' },
  { name: 'connection reset', behaviour: (_c, res) => { res.socket?.destroy(); }, code: 'verify_unavailable', reason: 'verify_unavailable', cause: 'verify_network' },
];

const mcpHeaders = (): Record<string, string> => ({ 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': proofHeader() });
const toolCall = (id: number | string, name: string, args: Record<string, unknown>): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const posts = (): number => mcpServer.received.filter((r) => r.method === 'POST').length;

/** Sends one tools/call and checks the 503 JSON-RPC refusal of `c`; `verified`: whether verify must have been asked. */
async function expectRefusal(t: Test, url: string, c: Pick<Case, 'code' | 'reason' | 'cause'>, id: number | string, verified: boolean): Promise<void> {
  const before = posts();
  const calls = sidecar.verifyCalls.length;
  const started = Date.now();
  const res = await send(url, '/mcp', { method: 'POST', headers: mcpHeaders(), body: toolCall(id, 'send_payment', { amount: 12.5, currency: 'usd', to: `acct-${id}` }) });
  t.ok(Date.now() - started < 5000, 'answered within the verify deadline');
  t.equal(res.status, 503, 'HTTP 503');
  t.equal(res.headers['cache-control'], 'no-store');
  t.equal(res.headers['www-authenticate'], undefined, 'no WWW-Authenticate: this is not a missing proof');
  t.match(String(res.headers['content-type']), /^application\/json/);
  t.same(res.json, {
    jsonrpc: '2.0', id,
    error: {
      code: -32603, message: ERRORS[c.code].message,
      data: { code: c.code, message: ERRORS[c.code].message, status: 503, reason: c.reason, ...(c.cause === undefined ? {} : { cause: c.cause }), tool: 'send_payment' },
    },
  }, 'the JSON-RPC error: the request id, -32603, data.code/reason/cause/tool and nothing else');
  t.notMatch(res.text, /stack|\.ts:|127\.0\.0\.1|ECONN/, 'no internal details');
  if (verified) {
    t.equal(sidecar.verifyCalls.length, calls + 1, 'verify asked once');
    const v = sidecar.verifyCalls.at(-1)?.body;
    t.equal(v?.required_scope, 'payments:send', "for the tool's scope");
    t.match(v?.context, { tool: 'send_payment', amount: '12.5', currency: 'USD', method: 'POST' }, 'with the tool and its arguments');
  }
  t.equal(posts(), before, 'the MCP server received nothing');
  t.notOk(mcpServer.runs.some((r) => r.args.to === `acct-${id}`), 'the tool did not run');
}

for (const mode of MODES_WITH_BODY) {
  await t.test(`${mode}: an undecidable tool call is a 503 JSON-RPC error and never reaches the MCP server`, async (t) => {
    const gw = await startMode(mode, mcpServer.url, sidecar.url, { routes: [MCP_ROUTE], ...TIMEOUTS });
    t.teardown(() => gw.close());
    let n = 0;
    for (const c of CASES) {
      await t.test(c.name, async (t) => {
        sidecar.behaviour = c.behaviour;
        n += 1;
        await expectRefusal(t, gw.url, c, n, true);
        await expectRefusal(t, gw.url, c, `req-${mode}-${n}`, true);
      });
    }
    await t.test('the same gateway still forwards an allowed call (the refusals were not a broken setup)', async (t) => {
      sidecar.behaviour = allowAll;
      const res = await send(gw.url, '/mcp', { method: 'POST', headers: mcpHeaders(), body: toolCall(99, 'get_weather', { city: mode }) });
      t.equal(res.status, 200, res.text.slice(0, 200));
      t.equal(res.json?.id, 99);
      t.ok(mcpServer.runs.some((r) => r.tool === 'get_weather' && r.args.city === mode), 'the tool ran');
    });
    t.equal(await gw.failOpen(), 0, 'fail_open_total stayed 0');
  });
}

await t.test('sidecar unreachable (closed port): 503 verify_unavailable, verify_network, in every mode', async (t) => {
  const gone = await startFakeSidecar();
  const deadUrl = gone.url;
  await gone.close();
  for (const mode of MODES_WITH_BODY) {
    await t.test(mode, async (t) => {
      const gw = await startMode(mode, mcpServer.url, deadUrl, { routes: [MCP_ROUTE], ...TIMEOUTS });
      t.teardown(() => gw.close());
      const c = { code: 'verify_unavailable', reason: 'verify_unavailable', cause: 'verify_network' } as const;
      await expectRefusal(t, gw.url, c, 41, false);
      await expectRefusal(t, gw.url, c, `dead-${mode}`, false);
      t.equal(await gw.failOpen(), 0, 'fail_open_total stayed 0');
    });
  }
});
