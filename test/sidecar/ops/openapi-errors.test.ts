/**
 * Issue 26: "the error shape on every 4xx and 5xx, with the possible codes
 * listed per operation". Against a real sidecar, every operation of the
 * served document gets the bad requests a client can realistically send
 * (openapi-probes.ts: no, unknown or malformed credentials, a missing or
 * foreign CSRF token, unknown, foreign, over-long and undecodable ids,
 * malformed JSON, bodies of the wrong shape, unknown members, wrong types,
 * missing members, wrong content types, a body over the limit, bad query
 * values, an over-long header block, an unsupported `Expect`), a session of
 * an account that has not finished onboarding, the state-dependent mistakes
 * of {@link STATE_PROBES}, and expired sessions and API keys. Every refusal
 * must be in the documented error shape, and its (status, code) must be
 * listed for that operation in the document. An operation of the document
 * that no probe reached fails the test.
 */
import t from 'tap';
import { Ajv } from 'ajv';
import { Client, login, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { authHeaders, operationsOf, probesFor, sampleBody, send, takesBody, urlOf } from './openapi-probes.js';
import type { Answer, Creds, DocOperation, Probe, ProbeFixture, ServedDoc } from './openapi-probes.js';
import { STATE_PROBES } from './openapi-state-probes.js';

/** The cookie header and CSRF token of a client's jar, and its API key. */
function credsOf(c: Client, apiKey?: string): Creds {
  return {
    cookie: [...c.jar].map(([k, v]) => `${k}=${v}`).join('; '),
    ...(c.jar.get('service_csrf') !== undefined ? { csrf: c.jar.get('service_csrf')! } : {}),
    ...(apiKey !== undefined ? { apiKey } : {}),
  };
}

t.test('every documented operation answers bad requests with documented errors', async (t) => {
  const sc = await startSidecar({}, { webhook: { pollIntervalMs: 60_000 } });
  t.teardown(() => sc.close());
  const doc = await (await fetch(`${sc.url}/openapi.json`)).json() as ServedDoc & { components: { schemas: Record<string, object> } };
  const ops = operationsOf(doc);
  t.ok(ops.length >= 40, `${ops.length} operations`);
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
  const isError = ajv.compile({ $ref: '#/components/schemas/ErrorResponse' });

  // The owner: a platform with a callback (so a delivery exists), an approved certificate with an
  // approval rule, a pending step-up approval, a decided and a pending delegation request.
  const f = await specFlow(sc, 'probe-owner@example.com', {
    approve: ['data:read', 'payments:send'], callbackUrl: 'http://127.0.0.1:9/hook',
    constraints: { require_approval: { scopes: ['payments:send'] } },
  });
  const pending = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id });
  const v = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'payments:send', context: { amount: '5.00', currency: 'USD' } });
  t.equal(v.body?.decision_reason, 'approval_required', 'a pending approval exists');
  const deliveries = await f.user.get('/v1/service/webhooks/deliveries');
  t.ok(deliveries.body?.deliveries?.length > 0, 'a webhook delivery exists');
  const other = await specFlow(sc, 'probe-other@example.com', {});

  const fx: ProbeFixture = {
    owner: credsOf(f.user, f.platform.apiKey),
    other: credsOf(other.user, other.platform.apiKey),
    ids: {
      platform_id: f.reg.platform_id, connection_id: f.reg.connection_id, agent_id: f.agentId, request_id: pending.body.request_id,
      cert_id: f.certId, approval_id: v.body.approval_id, delivery_id: deliveries.body.deliveries[0].delivery_id,
      decision_id: v.body.decision_id,
      // Organisations: ids no one has (the owner acts in a personal workspace: 403 account_type_not_supported first).
      account_id: '00000000-0000-4000-8000-000000000002', invitation_id: '00000000-0000-4000-8000-000000000003',
    },
    samples: {
      email: 'probe-owner@example.com', code: '000000', first_name: 'Ada', last_name: 'Lovelace', account_type: 'individual',
      name: 'probe', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'], agent_type: 'api_agent',
      connection_id: f.reg.connection_id, approved_scope: ['data:read'], reason: 'probe', challenge: 'A'.repeat(43),
      proof_bundle: {}, required_scope: 'data:read', callback_url: null,
      subject: { type: 'agent', id: f.agentId }, action: { name: 'data:read' }, resource: { type: 'any', id: '*' },
      // The idempotency ledger's gateway routes: a claim id no verify made (documented 404 idempotency_claim_not_found).
      claim_id: '00000000-0000-4000-8000-000000000000',
      // Organisations: a workspace the owner does not belong to (404), a role, an address to invite.
      workspace_id: '00000000-0000-4000-8000-000000000001', role: 'member', domain: 'probe.example.org',
      allowed_scopes: ['data:read'], scopes: ['data:read'], agent_id: f.agentId,
      response: { status: 200, headers: [['content-type', 'application/json']], body: 'e30=', body_omitted: false },
      // Sub-delegation: to the agent itself (documented 400 invalid_request).
      to_agent_id: f.agentId,
    },
    bodyLimit: sc.config.bodyLimitBytes,
  };

  const violations = new Map<string, string[]>();
  const seen = new Map<string, Map<string, number>>();
  const kinds = new Map<string, Set<string>>();
  /** Checks one answer of `op` to `p`. */
  const check = (op: DocOperation, p: Pick<Probe, 'name' | 'kind' | 'mustRefuse'>, a: Answer): void => {
    const bad = (msg: string): void => { violations.set(op.key, [...(violations.get(op.key) ?? []), `${p.name}: ${msg}`]); };
    if (!kinds.has(op.key)) kinds.set(op.key, new Set());
    kinds.get(op.key)!.add(p.kind);
    if (a.status < 400) {
      if (a.status < 200 || a.status >= 300) bad(`status ${a.status}`);
      else if (p.mustRefuse) bad(`accepted (${a.status}): ${a.text.slice(0, 200)}`);
      return;
    }
    const body = a.json as { error: { code: string; status: number } };
    if (!isError(body) || body.error.status !== a.status) { bad(`${a.status} not in the error shape: ${a.text.slice(0, 200)}`); return; }
    const code = body.error.code;
    const tally = seen.get(op.key) ?? new Map<string, number>();
    tally.set(`${a.status} ${code}`, (tally.get(`${a.status} ${code}`) ?? 0) + 1);
    seen.set(op.key, tally);
    if (!op.listed.get(a.status)?.has(code)) bad(`${a.status} ${code} is not listed (${[...op.listed].map(([s, c]) => `${s}: ${[...c].join(',')}`).join('; ')})`);
  };
  const run = async (op: DocOperation, p: Probe): Promise<void> => { check(op, p, await send(sc.url, p)); };

  // The generic probes, a few operations at a time.
  for (let i = 0; i < ops.length; i += 4) {
    await Promise.all(ops.slice(i, i + 4).map(async (op) => { for (const p of probesFor(op, fx)) await run(op, p); }));
  }

  // A signed-in account that has not finished onboarding, on every session operation (a fresh one
  // each time: some of them succeed, such as logout).
  for (const op of ops.filter((o) => o.auth === 'session' || o.auth === 'session_csrf')) {
    const fresh = credsOf(await login(sc, `probe-new-${op.operationId.toLowerCase()}@example.com`));
    const body = takesBody(op.method) ? JSON.stringify(sampleBody(op, fx.samples) ?? {}) : undefined;
    await run(op, {
      kind: 'state', name: 'an account that has not finished onboarding', method: op.method, url: urlOf(op, fx.ids), mustRefuse: false,
      headers: { ...authHeaders(op.auth, fresh), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body } : {}),
    });
  }

  // State-dependent mistakes (openapi-state-probes.ts), in order: some change the state the next ones need.
  const byId = new Map(ops.map((o) => [o.operationId, o]));
  for (const s of STATE_PROBES) {
    const op = byId.get(s.operationId);
    if (!op) { t.fail(`state probe for ${s.operationId}, which the document lacks`); continue; }
    const ids = { ...fx.ids, ...(s.ids?.(f) ?? {}) };
    const headers = { ...authHeaders(op.auth, s.as === 'other' ? fx.other : fx.owner), ...(s.body !== undefined ? { 'content-type': 'application/json' } : {}) };
    // `"{name}"` in a body stands for that real id.
    const body = s.body === undefined ? undefined : JSON.stringify(s.body).replace(/"\{(\w+)\}"/g, (_m, n: string) => JSON.stringify(ids[n]));
    const a = await send(sc.url, { kind: 'state', name: s.name, method: op.method, url: urlOf(op, ids), headers, mustRefuse: s.expect !== undefined, ...(body !== undefined ? { body } : {}) });
    check(op, { kind: 'state', name: s.name, mustRefuse: s.expect !== undefined }, a);
    if (s.expect !== undefined) t.equal(`${a.status} ${a.json?.error?.code}`, s.expect, `${s.operationId}: ${s.name}`);
  }

  // Expired credentials: sessions after their 15 minutes, API keys after their year.
  sc.clock.advance(16 * 60_000);
  for (const op of ops.filter((o) => o.auth === 'session' || o.auth === 'session_csrf')) {
    const body = takesBody(op.method) ? '{}' : undefined;
    await run(op, { kind: 'auth', name: 'an expired session', method: op.method, url: urlOf(op, fx.ids), mustRefuse: true,
      headers: { ...authHeaders(op.auth, fx.other), ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body } : {}) });
  }
  sc.clock.advance(366 * 86_400_000);
  for (const op of ops.filter((o) => o.auth === 'api_key')) {
    const body = op.method === 'POST' ? JSON.stringify(sampleBody(op, fx.samples) ?? {}) : undefined;
    await run(op, { kind: 'auth', name: 'an expired API key', method: op.method, url: urlOf(op, fx.ids), mustRefuse: true,
      headers: { ...authHeaders(op.auth, fx.other), ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body } : {}) });
  }

  // Every operation was exercised, with every kind of probe that applies to it.
  for (const op of ops) {
    const want = ['headers', ...(op.method === 'GET' ? ['query'] : ['body', 'media']), ...(op.auth === 'none' ? [] : ['auth']), ...(op.pathParams.length ? ['path'] : [])];
    const got = kinds.get(op.key) ?? new Set();
    t.same(want.filter((k) => !got.has(k)), [], `${op.key} (${op.operationId}) exercised: ${[...got].sort().join(', ')}`);
    t.same(violations.get(op.key) ?? [], [], `${op.key}: every refusal is a documented error (${[...(seen.get(op.key) ?? [])].map(([k, n]) => `${k} ×${n}`).join(', ')})`);
  }
  t.same([...kinds.keys()].filter((k) => !ops.some((o) => o.key === k)), [], 'no answer outside the document\'s operations');
});
