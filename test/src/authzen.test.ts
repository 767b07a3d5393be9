/**
 * The pure AuthZEN mapping (src/authzen.ts) and SIDECAR_PUBLIC_URL: defaults
 * and overrides, each resource type onto the constraint context, facts
 * refused with their member named, the grant/verify mode, the short-circuit
 * rule, and the public URL's validation messages.
 */
import t from 'tap';
import { mapEvaluation, resolveEvaluation, stopsAfter } from '../../src/authzen.js';
import { ServiceError } from '../../src/errors.js';
import { loadConfig } from '../../sidecar/config/index.js';

const subject = { type: 'agent', id: 'agt-1' };
const id = (v: unknown): unknown => v;

t.test('defaults: an item member replaces the top-level one as a whole', async (t) => {
  const e = resolveEvaluation({ action: { name: 'data:write' }, context: { tenant: 'b' } },
    { subject, action: { name: 'data:read' }, resource: { type: 'any', id: '*' }, context: { tenant: 'a', amount: '1' } }, 'x.');
  t.same(e, { subject, action: { name: 'data:write' }, resource: { type: 'any', id: '*' }, context: { tenant: 'b' } });
  const missing = resolveEvaluation({}, { subject, resource: { type: 'any', id: '*' } }, 'evaluations[0].');
  t.ok(missing instanceof ServiceError);
  t.equal((missing as ServiceError).extra?.field, 'action', 'a member missing at both levels is named at the top');
  const bad = resolveEvaluation({ action: { name: '' } }, { subject, resource: { type: 'any', id: '*' } }, 'evaluations[2].');
  t.equal((bad as ServiceError).extra?.field, 'evaluations[2].action.name', 'a bad item member is named in its item');
});

t.test('resources and context facts onto the verify context', async (t) => {
  const base = { subject, action: { name: 'data:read' } };
  t.same(mapEvaluation({ ...base, resource: { type: 'http', id: 'POST /v1/pay' }, context: { amount: '2.50', currency: 'USD',
    time: 'ignored' } }, id), { agentId: 'agt-1', mode: 'grant', request: { proof_bundle: undefined, required_scope: 'data:read',
    context: { method: 'POST', path: '/v1/pay', amount: '2.50', currency: 'USD' } } });
  t.same((mapEvaluation({ ...base, resource: { type: 'mcp_tool', id: 'search' } }, id) as { request: unknown }).request,
    { proof_bundle: undefined, required_scope: 'data:read', context: { tool: 'search' } });
  t.same((mapEvaluation({ ...base, resource: { type: 'http', id: 'POST /mcp' }, context: { tool: 'search', method: 'GET' } },
    id) as { request: unknown }).request, { proof_bundle: undefined, required_scope: 'data:read',
    context: { method: 'POST', path: '/mcp', tool: 'search' } }, 'context facts fill only what the resource left');
  t.same((mapEvaluation({ ...base, resource: { type: 'any', id: '*' } }, id) as { request: unknown }).request,
    { proof_bundle: undefined, required_scope: 'data:read' });
  const proof = mapEvaluation({ ...base, resource: { type: 'any', id: '*' }, context: { proof: 'abc' } }, (v) => `decoded:${String(v)}`);
  t.equal((proof as { mode: string }).mode, 'verify');
  t.equal((proof as { request: { proof_bundle: unknown } }).request.proof_bundle, 'decoded:abc');
  const refused: [Record<string, unknown>, string][] = [
    [{ subject: { type: 'user', id: 'x' }, resource: { type: 'any', id: '*' } }, 'subject.type'],
    [{ subject, resource: { type: 'http', id: '/no-method' } }, 'resource.id'],
    [{ subject, resource: { type: 'http', id: 'post /lower' } }, 'resource.id'],
    [{ subject, resource: { type: 'mcp_tool', id: 'bad tool' } }, 'resource.id'],
    [{ subject, resource: { type: 'book', id: '1' } }, 'resource.type'],
    [{ subject, resource: { type: 'any', id: '*' }, context: { currency: 'dollars' } }, 'context.currency'],
    [{ subject, resource: { type: 'any', id: '*' }, context: { body_sha256: 'XYZ' } }, 'context.body_sha256'],
    [{ subject, resource: { type: 'any', id: '*' }, context: { tenant: 7 } }, 'context.tenant'],
    [{ subject, resource: { type: 'any', id: '*' }, context: { path: 'relative' } }, 'context.path'],
  ];
  for (const [e, field] of refused) {
    const r = mapEvaluation({ action: { name: 'data:read' }, ...e } as never, id);
    t.ok(r instanceof ServiceError, `${field}: refused`);
    t.equal((r as ServiceError).code, 'invalid_request');
    t.equal((r as ServiceError).extra?.field, field);
  }
});

t.test('short-circuit', async (t) => {
  t.notOk(stopsAfter('execute_all', { decision: false }));
  t.ok(stopsAfter('deny_on_first_deny', { decision: false }));
  t.notOk(stopsAfter('deny_on_first_deny', { decision: true }));
  t.ok(stopsAfter('permit_on_first_permit', { decision: true }));
  t.notOk(stopsAfter('permit_on_first_permit', { decision: false }));
});

t.test('SIDECAR_PUBLIC_URL', async (t) => {
  t.equal(loadConfig({}).publicUrl, null);
  t.equal(loadConfig({ SIDECAR_PUBLIC_URL: 'https://pdp.example.com/authz/' }).publicUrl, 'https://pdp.example.com/authz');
  t.equal(loadConfig({ SIDECAR_PUBLIC_URL: 'http://127.0.0.1:8700' }).publicUrl, 'http://127.0.0.1:8700');
  for (const [v, msg] of [['not a url', /SIDECAR_PUBLIC_URL: not a URL/], ['ftp://x', /SIDECAR_PUBLIC_URL: scheme/],
    ['https://x/?a=1', /SIDECAR_PUBLIC_URL: no query/], ['https://u:p@x', /SIDECAR_PUBLIC_URL: no query/]] as const) {
    t.throws(() => loadConfig({ SIDECAR_PUBLIC_URL: v }), msg, v);
  }
});
