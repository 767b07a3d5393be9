/**
 * Issue 23, "the OpenAPI document includes them": the served document's
 * top-level `webhooks` section lists exactly the event kinds of
 * `WEBHOOK_EVENT_TYPES` (src/webhook-events.ts), each a signed `POST` with
 * the signature headers and its body schema; and the deliveries a real
 * sidecar sends to a real receiver — all ten kinds, driven through the API —
 * match the documented body schema and header patterns, and their signatures
 * verify.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Ajv } from 'ajv';
import { specFlow, present, startSidecar } from '../../helpers/sidecar.js';
import { startReceiver } from '../webhooks/helpers.js';
import { WEBHOOK_EVENT_TYPES } from '../../../src/webhook-events.js';
import { WEBHOOK_HEADERS, verifyWebhookSignature } from '../../../src/webhooks.js';
import { REPO } from './helpers.js';

type Doc = { webhooks?: Record<string, Record<string, any>>; components: { schemas: Record<string, any> } }; // eslint-disable-line @typescript-eslint/no-explicit-any

t.test('the webhooks section and real deliveries', async (t) => {
  const rx = await startReceiver();
  t.teardown(() => rx.close());
  const sc = await startSidecar({ approvalTtlSeconds: 60 }, { webhook: { pollIntervalMs: 50 } });
  t.teardown(() => sc.close());
  const doc = await (await fetch(`${sc.url}/openapi.json`)).json() as Doc;

  // The section: exactly the kinds of the code, in its order, each fully described.
  t.same(Object.keys(doc.webhooks ?? {}), [...WEBHOOK_EVENT_TYPES], 'one webhook per event kind, nothing else');
  t.ok(WEBHOOK_EVENT_TYPES.includes('approval.requested') && WEBHOOK_EVENT_TYPES.includes('approval.expired'), 'the approval events are among them');
  const ids = new Set<string>();
  for (const kind of WEBHOOK_EVENT_TYPES) {
    const op = doc.webhooks?.[kind]?.post;
    t.ok(op?.operationId && op.summary && op.description, `${kind}: operationId, summary, description`);
    ids.add(op?.operationId);
    const ref = op?.requestBody?.content?.['application/json']?.schema?.$ref as string | undefined;
    const schema = doc.components.schemas[String(ref?.replace('#/components/schemas/', ''))];
    t.same(schema?.properties?.event?.enum, [kind], `${kind}: its body schema (${ref}) names the kind`);
    t.match(schema?.required, ['event', 'delivery_id', 'occurred_at'], `${kind}: the envelope is required`);
    const headers = (op?.parameters ?? []).filter((p: { in: string }) => p.in === 'header').map((p: { name: string; required: boolean }) => p.required && p.name);
    t.match(headers, [WEBHOOK_HEADERS.signature, WEBHOOK_HEADERS.timestamp, WEBHOOK_HEADERS.deliveryId], `${kind}: the signature headers, required`);
    t.ok(op?.responses?.['2XX'] && op.responses['410'], `${kind}: what the sidecar does with the answer`);
  }
  t.equal(ids.size, WEBHOOK_EVENT_TYPES.length, 'operationIds are unique');
  const apiDoc = fs.readFileSync(path.join(REPO, 'docs/api.md'), 'utf8');
  t.same([...ids].filter((id) => !apiDoc.includes(`| \`${id}\` |`)), [], 'docs/api.md lists every webhook operationId');

  // Every kind, delivered for real.
  const f = await specFlow(sc, 'openapi-webhooks@example.com', {
    approve: ['data:read', 'payments:send'], callbackUrl: rx.url, constraints: { require_approval: { scopes: ['payments:send'] } },
  });
  const pay = async (amount: string): Promise<string> => {
    const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'payments:send', context: { amount, currency: 'USD' } });
    if (r.body?.decision_reason !== 'approval_required') throw new Error(`verify: ${r.status} ${r.text}`);
    return r.body.approval_id as string;
  };
  const ok = (r: { status: number; text: string }, what: string): void => { if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text}`); };
  ok(await f.user.post(`/v1/service/approvals/${await pay('1.00')}/approve`, {}), 'grant');
  ok(await f.user.post(`/v1/service/approvals/${await pay('2.00')}/deny`, { note: 'no' }), 'deny');
  await pay('3.00');
  sc.clock.advance(61_000);
  ok(await f.user.get('/v1/service/approvals'), 'list (expires the due approvals)');
  const req = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id });
  ok(req, 'self-request');
  ok(await f.user.post(`/v1/service/delegations/requests/${req.body.request_id}/deny`, { reason: 'not now' }), 'deny request');
  ok(await f.user.post(`/v1/service/connections/${f.reg.connection_id}/rotate-key`, {}), 'rotate');
  ok(await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'done' }), 'revoke');
  ok(await f.user.post(`/v1/service/connections/${f.reg.connection_id}/remove`, {}), 'remove');

  const kinds = (): Set<string> => new Set(rx.requests.map((r) => String(JSON.parse(r.body.toString('utf8')).event)));
  const deadline = Date.now() + 30_000;
  while (WEBHOOK_EVENT_TYPES.some((k) => !kinds().has(k)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.same(WEBHOOK_EVENT_TYPES.filter((k) => !kinds().has(k)), [], 'every kind was delivered');

  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
  for (const r of rx.requests) {
    const body = JSON.parse(r.body.toString('utf8')) as { event: (typeof WEBHOOK_EVENT_TYPES)[number] };
    const op = doc.webhooks?.[body.event]?.post;
    const ref = String(op?.requestBody?.content?.['application/json']?.schema?.$ref);
    t.ok(ajv.validate(ref, body), `${body.event}: the body matches ${ref} ${JSON.stringify(ajv.errors ?? '')}`);
    for (const p of op?.parameters ?? []) {
      const value = r.headers[String(p.name).toLowerCase()];
      t.ok(typeof value === 'string' && (p.schema.pattern === undefined || new RegExp(p.schema.pattern, 'u').test(value)), `${body.event}: header ${p.name} as documented`);
    }
    t.ok(verifyWebhookSignature(f.reg.webhook_signing_secret, String(r.headers['x-service-timestamp']), r.body, String(r.headers['x-service-signature'])), `${body.event}: the signature verifies`);
  }
});
