/**
 * The idempotency ledger at the sidecar's API (docs/api.md): verify's `idempotency` block
 * (validated; an allow claims, a deny claims nothing, a replay is unbilled and audited with
 * `idempotent_replay`), and the API-key routes that record and release a claim — only for the
 * connection that claimed, only while in flight, bodies validated and bounded.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { delegateAgent, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectError, VERIFY } from '../decide/helpers.js';

const RECORD = '/v1/service/idempotency/record';
const RELEASE = '/v1/service/idempotency/release';
const HASH = 'ab'.repeat(32);
const ANSWER = { status: 201, headers: [['content-type', 'application/json']], body: 'eyJpZCI6MX0=', body_omitted: false };

let sc: TestSidecar;
let f: Flow;
let other: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'ledger-api@example.com', { approve: ['payments:send'] });
  other = await specFlow(sc, 'ledger-other@example.com', { approve: ['payments:send'] });
});
t.teardown(async () => { await sc.close(); });

const verifyKeyed = async (flow: Flow, key: string, scope = 'payments:send', hash = HASH) => flow.platform.post(VERIFY, {
  proof_bundle: await bundleFor(flow), required_scope: scope, idempotency: { key, request_sha256: hash, lease_seconds: 60 },
});
const balance = async (): Promise<number> => (await f.user.get('/v1/service/usage/personal')).body.balance_micros as number;

t.test('the idempotency block is validated', async (t) => {
  const bundle = await bundleFor(f);
  const bad: [unknown, string][] = [
    [{ key: '', request_sha256: HASH, lease_seconds: 60 }, 'body.idempotency.key'],
    [{ key: 'a b', request_sha256: HASH, lease_seconds: 60 }, 'body.idempotency.key'],
    [{ key: 'k', request_sha256: 'XY', lease_seconds: 60 }, 'body.idempotency.request_sha256'],
    [{ key: 'k', request_sha256: HASH, lease_seconds: 0 }, 'body.idempotency.lease_seconds'],
    [{ key: 'k', request_sha256: HASH, lease_seconds: 3601 }, 'body.idempotency.lease_seconds'],
    [{ key: 'k', request_sha256: HASH }, 'body.idempotency.lease_seconds'],
    [{ key: 'k', request_sha256: HASH, lease_seconds: 60, extra: 1 }, 'body.idempotency.extra'],
  ];
  for (const [idempotency, field] of bad) {
    const r = await f.platform.post(VERIFY, { proof_bundle: bundle, required_scope: 'payments:send', idempotency });
    expectError(t, r, 400, 'invalid_request', field);
    t.equal(r.body?.error?.field, field);
  }
});

t.test('claim, record, replay: the replay is unbilled and audited', async (t) => {
  const key = `k-${randomUUID()}`;
  const first = await verifyKeyed(f, key);
  t.equal(first.body.decision, 'allow');
  t.equal(first.body.idempotency?.status, 'claimed');
  const claimId = first.body.idempotency.claim_id as string;
  expectError(t, await other.platform.post(RECORD, { claim_id: claimId, response: ANSWER }), 404, 'idempotency_claim_not_found',
    'another connection cannot record it');
  const busy = await verifyKeyed(f, key);
  expectError(t, busy, 409, 'idempotency_in_flight');
  const recorded = await f.platform.post(RECORD, { claim_id: claimId, response: ANSWER });
  t.equal(recorded.status, 200);
  t.equal(recorded.body.claim_id, claimId);
  t.ok(Date.parse(recorded.body.expires_at as string) - Date.now() > 23.9 * 3600_000, 'kept for 24 h');
  expectError(t, await f.platform.post(RECORD, { claim_id: claimId, response: ANSWER }), 404, 'idempotency_claim_not_found',
    'recorded once');
  const credits = await balance();
  const replay = await verifyKeyed(f, key);
  t.equal(replay.body.decision, 'allow');
  t.same(replay.body.idempotency, { status: 'replay', response: ANSWER });
  t.equal(await balance(), credits, 'the replay is not billed');
  const row = (await auditAll(f.user)).find((e) => e.event_id === replay.body.audit_event_id);
  t.equal(row?.event_type, 'proof.verified');
  t.equal(row?.details.idempotent_replay, true, 'audited as a replay');
  expectError(t, await verifyKeyed(f, key, 'payments:send', 'cd'.repeat(32)), 422, 'idempotency_key_reused');
  t.equal(await balance(), credits, 'the 422 is not billed');
});

t.test('a deny claims nothing; a released claim frees the key', async (t) => {
  const key = `k-${randomUUID()}`;
  const deny = await verifyKeyed(f, key, 'data:read');
  t.equal(deny.body.decision, 'deny');
  t.equal(deny.body.idempotency, undefined);
  const claimed = await verifyKeyed(f, key);
  t.equal(claimed.body.idempotency?.status, 'claimed', 'the key was free');
  const claimId = claimed.body.idempotency.claim_id as string;
  expectError(t, await other.platform.post(RELEASE, { claim_id: claimId }), 404, 'idempotency_claim_not_found');
  t.same((await f.platform.post(RELEASE, { claim_id: claimId })).body, { claim_id: claimId, released: true });
  expectError(t, await f.platform.post(RELEASE, { claim_id: claimId }), 404, 'idempotency_claim_not_found', 'once');
  t.equal((await verifyKeyed(f, key)).body.idempotency?.status, 'claimed', 'free again');
  const second = await delegateAgent(f, 'second', { approve: ['payments:send'] });
  t.equal((await verifyKeyed(second, key)).body.idempotency?.status, 'claimed', 'another agent has its own keys');
});

t.test('record and release: API key only, bodies validated and bounded', async (t) => {
  const claimId = randomUUID();
  expectError(t, await f.platform.post(RECORD, { claim_id: claimId, response: ANSWER }, { apiKey: null }), 401, 'invalid_api_key');
  expectError(t, await f.platform.post(RELEASE, { claim_id: claimId }, { apiKey: null }), 401, 'invalid_api_key');
  const bad: [unknown, string][] = [
    [{ claim_id: 'nope', response: ANSWER }, 'claim id'],
    [{ claim_id: claimId }, 'no response'],
    [{ claim_id: claimId, response: { ...ANSWER, status: 99 } }, 'status'],
    [{ claim_id: claimId, response: { ...ANSWER, body: '!!' } }, 'body not base64'],
    [{ claim_id: claimId, response: { ...ANSWER, body: 'A'.repeat(43_696) } }, 'body over 32 KiB'],
    [{ claim_id: claimId, response: { ...ANSWER, headers: [['a']] } }, 'header pair'],
    [{ claim_id: claimId, response: { ...ANSWER, headers: Array.from({ length: 65 }, () => ['a', 'b']) } }, '65 headers'],
    [{ claim_id: claimId, response: { ...ANSWER, extra: 1 } }, 'unknown member'],
  ];
  for (const [body, what] of bad) expectError(t, await f.platform.post(RECORD, body), 400, 'invalid_request', what);
  expectError(t, await f.platform.post(RECORD, { claim_id: claimId, response: ANSWER }), 404, 'idempotency_claim_not_found',
    'an unknown claim');
});
