/**
 * Webhooks over real TLS. The other webhook tests deliver over plain http;
 * this one checks that the worker's https path verifies the receiver's
 * certificate against the process trust store, with real parts only:
 *
 * - a throwaway PKI made at test time with the `openssl` CLI: a test CA, a
 *   server certificate it signed for 127.0.0.1, and an unrelated self-signed
 *   certificate (fixtures/tls.ts);
 * - real `node:https` receivers on 127.0.0.1 that record every connection,
 *   handshake failure and request, and answer through the receiver helper
 *   (`receiver/`: signature, timestamp and delivery id checked);
 * - the real sidecar as a child process (test/sidecar/ops/helpers.ts), the
 *   spec flow driven over HTTP with a real SMTP sink. The trust store is fixed
 *   at process start, hence the child: `NODE_EXTRA_CA_CERTS=<test CA>`.
 *   `SIDECAR_WEBHOOK_ALLOW_INSECURE=1` is set only because 127.0.0.1 is a
 *   private address; every callback URL here is https.
 *
 * Cases: a CA-signed receiver gets the events, signed, over TLS; a
 * self-signed receiver gets no HTTP request at all and the sidecar records
 * the attempt as a certificate failure; and a second sidecar started WITHOUT
 * the CA refuses the CA-signed receiver the same way (the control that shows
 * the first case depends on the trust store).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { remoteSidecar, specFlow, startMailSink } from '../../helpers/sidecar.js';
import type { Client, Flow, MailSink, Res } from '../../helpers/sidecar.js';
import { newMasterKey, parsePrometheusText, sampleValue, spawnSidecar } from '../ops/helpers.js';
import type { ChildSidecar } from '../ops/helpers.js';
import { createWebhookReceiver, MemoryDedupStore } from '../../../receiver/index.js';
import { deliveryId, said, transportProblems, waitFor, UUID_RE } from './fixtures/hooks.js';
import { makeTestPki, opensslVersion, startTlsReceiver } from './fixtures/tls.js';
import type { TestPki, TlsReceiver } from './fixtures/tls.js';

/** Longest wait for one thing (the worker's idle poll is 1 s; a nudge usually makes it immediate). */
const WAIT_MS = 10_000;

/** One row of the deliveries API. */
interface Delivery {
  delivery_id: string; platform_id: string; event: string; state: string; attempts: number;
  next_attempt_at: string | null; last_status: number | null; last_error: string | null; delivered_at: string | null;
}

/** Every delivery of the account (one page is enough here). */
async function deliveries(user: Client): Promise<Delivery[]> {
  const r = await user.get('/v1/service/webhooks/deliveries?limit=200');
  if (r.status !== 200) throw new Error(`deliveries: ${r.status} ${r.text}`);
  return r.body.deliveries as Delivery[];
}

/** The webhook delivery counter of a sidecar's `/metrics`, by result (0 when the series is absent), read with the strict parser. */
async function deliveryCounter(sc: ChildSidecar, result: string): Promise<number> {
  const r = await fetch(`${sc.url}/metrics`, { signal: AbortSignal.timeout(5000) });
  if (r.status !== 200) throw new Error(`/metrics: ${r.status}`);
  const families = parsePrometheusText(await r.text());
  if (families.get('agent_authz_webhook_deliveries_total')?.type !== 'counter') throw new Error('/metrics: no agent_authz_webhook_deliveries_total counter');
  return sampleValue(families, 'agent_authz_webhook_deliveries_total', 'agent_authz_webhook_deliveries_total', { result }) ?? 0;
}

const putCallback = (f: Flow, url: string | null): Promise<Res> =>
  f.user.req('PUT', `/v1/service/platforms/${f.reg.platform_id}/callback`, { callback_url: url });

const version = opensslVersion();
if (version === undefined) {
  t.skip('webhooks over TLS: the `openssl` CLI is not installed (not on PATH); it makes the test certificates', () => {});
} else {
  t.comment(`certificates made with ${version}`);

  let dir: string;
  let pki: TestPki;
  let mail: MailSink;
  /** Sidecar that trusts the test CA (NODE_EXTRA_CA_CERTS). */
  let withCa: ChildSidecar;
  /** Sidecar started without it. */
  let withoutCa: ChildSidecar;
  /** CA-signed receiver for `withCa`. */
  let trusted: TlsReceiver;
  /** Self-signed receiver. */
  let untrusted: TlsReceiver;
  /** Another CA-signed receiver (same certificate as `trusted`) for `withoutCa`. */
  let trustedForNoCa: TlsReceiver;
  let flow: Flow;
  let secret: string;

  t.before(async () => {
    const t0 = Date.now();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-webhooks-tls-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    pki = makeTestPki(dir);
    mail = await startMailSink();
    t.teardown(() => mail.close());
    trusted = await startTlsReceiver({ cert: pki.serverCert, key: pki.serverKey });
    untrusted = await startTlsReceiver({ cert: pki.rogueCert, key: pki.rogueKey });
    trustedForNoCa = await startTlsReceiver({ cert: pki.serverCert, key: pki.serverKey });
    t.teardown(async () => { await Promise.all([trusted.close(), untrusted.close(), trustedForNoCa.close()]); });

    const env = { SIDECAR_SMTP_URL: mail.url, SIDECAR_WEBHOOK_ALLOW_INSECURE: '1', SIDECAR_MASTER_KEY: newMasterKey() };
    // Both at once (each takes a few seconds to start). '' overrides an inherited value: Node ignores an empty one.
    const started = await Promise.allSettled([
      spawnSidecar({ env: { ...env, NODE_EXTRA_CA_CERTS: pki.caCert } }),
      spawnSidecar({ env: { ...env, NODE_EXTRA_CA_CERTS: '' } }),
    ]);
    for (const s of started) {
      if (s.status !== 'fulfilled') continue;
      const sc = s.value;
      t.teardown(async () => {
        sc.kill();
        await sc.exited;
        fs.rmSync(sc.dataDir, { recursive: true, force: true });
      });
    }
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    withCa = (started[0] as PromiseFulfilledResult<ChildSidecar>).value;
    withoutCa = (started[1] as PromiseFulfilledResult<ChildSidecar>).value;
    t.comment(`certificates, receivers and two sidecars ready in ${Date.now() - t0} ms`);
  });

  t.test('a receiver with a certificate from the trusted CA gets the events over TLS, signed', async (t) => {
    // No callback yet: the flow's events are held, so the receiver knows the secret before anything arrives.
    flow = await specFlow(remoteSidecar(withCa.url, mail), 'webhooks-tls@example.test', { approve: ['data:read'] });
    secret = flow.reg.webhook_signing_secret;
    t.match(secret, /^whsec_/);
    const held = await deliveries(flow.user);
    t.same(held.map((d) => [d.event, d.state, d.attempts]).sort(), [['connection.created', 'pending', 0], ['delegation.approved', 'pending', 0]], 'held while there is no callback');
    trusted.accept(secret);

    const put = await putCallback(flow, trusted.url);
    t.equal(put.status, 200, said(put, 'PUT callback (https, CA-signed receiver)'));
    t.equal(put.body.callback_url, trusted.url);
    t.match(trusted.url, /^https:\/\/127\.0\.0\.1:\d+\/hook$/);

    await waitFor('2 deliveries at the CA-signed receiver', WAIT_MS, () => trusted.hits.length >= 2);
    t.same(trusted.hits.map((h) => String(h.body.event)).sort(), ['connection.created', 'delegation.approved'], 'each held event once, nothing else');
    t.equal(trusted.tlsErrors.length, 0, `no failed handshake (${trusted.tlsErrors.join('; ')})`);
    t.ok(trusted.secureConnections >= 1, 'TLS handshakes completed');
    for (const h of trusted.hits) {
      const what = `${String(h.body.event)} ${deliveryId(h)}`;
      t.equal(h.encrypted, true, `${what}: came over TLS`);
      t.match(h.protocol, /^TLSv1\.[23]$/, `${what}: negotiated ${String(h.protocol)}`);
      t.equal(h.method, 'POST');
      t.equal(h.path, '/hook');
      t.match(h.headers['x-service-delivery-id'], UUID_RE, `${what}: delivery id header`);
      t.same(transportProblems(h, secret), [], `${what}: headers, timestamp and HMAC (by hand, node:crypto) over the raw body`);
      t.equal(h.answer, 204, `${what}: the receiver helper accepted it (answer code ${String(h.answerCode)})`);
    }
    t.same(
      trusted.events.map((e) => [e.deliveryId, e.event.event]).sort(),
      trusted.hits.map((h) => [deliveryId(h), String(h.body.event)]).sort(),
      'the receiver helper verified and handed over each event with its delivery id',
    );
    // The check is not vacuous: the same bytes under another secret are refused.
    const wrong = createWebhookReceiver({ secret: 'whsec_not_the_secret', dedup: new MemoryDedupStore(10), onEvent: () => {} });
    const refused = await wrong.handleWebhook({ rawBody: trusted.hits[0]!.raw, headers: trusted.hits[0]!.headers });
    t.equal(refused.body?.error.code, 'invalid_signature', 'another secret does not verify');
    await wrong.close();

    const done = await waitFor('both recorded as delivered', WAIT_MS, async () => {
      const ds = await deliveries(flow.user);
      return ds.length === 2 && ds.every((d) => d.state === 'delivered') ? ds : undefined;
    });
    t.same(done.map((d) => d.delivery_id).sort(), trusted.hits.map(deliveryId).sort(), 'the sidecar\'s delivery ids are the ones received');
    for (const d of done) t.match(d, { state: 'delivered', attempts: 1, last_status: 204, last_error: null, next_attempt_at: null, delivered_at: String }, `${d.event} delivered`);
    t.equal(await deliveryCounter(withCa, 'delivered'), 2, 'metrics: 2 delivered');
    t.equal(await deliveryCounter(withCa, 'failed'), 0, 'metrics: none failed');
  });

  t.test('a receiver with a self-signed certificate gets no request; the attempt fails on the certificate', async (t) => {
    t.ok(flow, 'the first case ran');
    if (!flow) return;
    const trustedBefore = trusted.hits.length;
    const put = await putCallback(flow, untrusted.url);
    t.equal(put.status, 200, said(put, 'PUT callback (https, self-signed receiver)'));
    t.equal(put.body.callback_url, untrusted.url);
    const rot = await flow.user.post(`/v1/service/connections/${flow.reg.connection_id}/rotate-key`);
    t.equal(rot.status, 200, said(rot, 'rotate-key'));

    const failed = await waitFor('the key_rotated attempt recorded', WAIT_MS, async () => {
      const d = (await deliveries(flow.user)).find((x) => x.event === 'connection.key_rotated');
      return d && d.attempts >= 1 ? d : undefined;
    });
    t.match(failed, { platform_id: flow.reg.platform_id, state: 'pending', last_status: null, delivered_at: null }, 'failed, will retry');
    t.match(failed.last_error, /^DEPTH_ZERO_SELF_SIGNED_CERT: self[- ]signed certificate/, `last_error names the certificate failure: ${String(failed.last_error)}`);
    t.ok(failed.next_attempt_at !== null && Date.parse(failed.next_attempt_at) > Date.now(), `next attempt scheduled (${String(failed.next_attempt_at)})`);
    const one = await flow.user.get(`/v1/service/webhooks/deliveries/${failed.delivery_id}`);
    t.equal(one.status, 200, said(one, 'delivery detail'));
    t.match(one.body.attempt_history[0], { attempt: 1, status: null, error: /^DEPTH_ZERO_SELF_SIGNED_CERT\b/ }, 'attempt 1 in the history, no HTTP status');

    t.ok(untrusted.connections >= 1, `the sidecar did connect (TCP) to the self-signed receiver (${untrusted.connections})`);
    t.equal(untrusted.secureConnections, 0, 'no TLS handshake completed');
    t.ok(untrusted.tlsErrors.length >= 1, `the handshake failed on the receiver's side too: ${untrusted.tlsErrors.join('; ')}`);
    t.same(untrusted.hits, [], 'no HTTP request reached the self-signed receiver');
    t.equal(trusted.hits.length, trustedBefore, 'and nothing went to the old receiver');
    t.ok(await deliveryCounter(withCa, 'failed') >= 1, 'metrics: a failed attempt');
    t.equal(await deliveryCounter(withCa, 'delivered'), 2, 'metrics: still 2 delivered');
    // Stop the retries (the next one is ~5 s away): nothing more to see.
    t.equal((await putCallback(flow, null)).status, 200, 'callback cleared');
  });

  t.test('control: a sidecar without NODE_EXTRA_CA_CERTS refuses the CA-signed receiver', async (t) => {
    const f = await specFlow(remoteSidecar(withoutCa.url, mail), 'webhooks-tls-noca@example.test', { approve: ['data:read'], callbackUrl: trustedForNoCa.url });
    trustedForNoCa.accept(f.reg.webhook_signing_secret);
    const failed = await waitFor('both attempts recorded', WAIT_MS, async () => {
      const ds = await deliveries(f.user);
      return ds.length === 2 && ds.every((d) => d.attempts >= 1) ? ds : undefined;
    });
    t.same(failed.map((d) => d.event).sort(), ['connection.created', 'delegation.approved']);
    for (const d of failed) {
      t.match(d, { state: 'pending', last_status: null, delivered_at: null }, `${d.event}: failed, will retry`);
      t.match(d.last_error, /^UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate/, `${d.event}: ${String(d.last_error)}`);
    }
    t.ok(trustedForNoCa.connections >= 1, `the sidecar did connect (TCP) (${trustedForNoCa.connections})`);
    t.equal(trustedForNoCa.secureConnections, 0, 'no TLS handshake completed');
    t.same(trustedForNoCa.hits, [], 'no HTTP request reached the CA-signed receiver');
    t.equal(await deliveryCounter(withoutCa, 'delivered'), 0, 'metrics: nothing delivered');
    t.ok(await deliveryCounter(withoutCa, 'failed') >= 2, 'metrics: the attempts failed');
    t.equal((await putCallback(f, null)).status, 200, 'callback cleared');
  });
}
