/** src/webhooks.ts: signing and verification against the spec formula computed here by hand. */
import t from 'tap';
import { createHmac } from 'node:crypto';
import {
  WEBHOOK_EVENT_TYPES, WEBHOOK_HEADERS, WEBHOOK_USER_AGENT, isTimestampFresh, isWebhookEventType, signWebhook, verifyWebhookSignature,
} from '../../src/webhooks.js';

const byHand = (secret: string, ts: string, body: string | Buffer): string =>
  createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.concat([Buffer.from(`${ts}.`), Buffer.from(body)])).digest('hex');

t.test('signWebhook = hex(HMAC-SHA256(secret, timestamp + "." + body))', async (t) => {
  const body = '{"event":"delegation.denied","delivery_id":"d1","occurred_at":"2030-01-01T00:00:00.000Z"}';
  t.equal(signWebhook('whsec_abc', 1893456000, body), byHand('whsec_abc', '1893456000', body));
  t.equal(signWebhook('whsec_abc', 1893456000, Buffer.from(body)), byHand('whsec_abc', '1893456000', body), 'bytes and string agree');
  t.equal(signWebhook('sécret ✓', 1, 'ü'), byHand('sécret ✓', '1', 'ü'), 'secret and body are UTF-8');
  // A fixed vector, so a change in the formula cannot go unnoticed.
  t.equal(signWebhook('secret', 0, ''), createHmac('sha256', 'secret').update('0.').digest('hex'));
  t.match(signWebhook('k', 1, 'b'), /^[0-9a-f]{64}$/);
  t.throws(() => signWebhook('k', -1, 'b'), TypeError);
  t.throws(() => signWebhook('k', 1.5, 'b'), TypeError);
});

t.test('verifyWebhookSignature', async (t) => {
  const body = Buffer.from('{"a":1}');
  const sig = byHand('s1', '100', body);
  t.ok(verifyWebhookSignature('s1', '100', body, sig));
  t.ok(verifyWebhookSignature('s1', '100', body, sig.toUpperCase()), 'hex case does not matter');
  t.ok(verifyWebhookSignature(['old', 's1'], '100', body, sig), 'any of several secrets');
  t.notOk(verifyWebhookSignature('s2', '100', body, sig), 'wrong secret');
  t.notOk(verifyWebhookSignature('s1', '101', body, sig), 'other timestamp');
  t.notOk(verifyWebhookSignature('s1', '100', Buffer.from('{"a":2}'), sig), 'tampered body');
  t.notOk(verifyWebhookSignature('s1', '100', body, sig.slice(0, 62)), 'short');
  t.notOk(verifyWebhookSignature('s1', '100', body, `${sig}00`), 'long');
  t.notOk(verifyWebhookSignature('s1', '100', body, `sha256=${sig}`), 'prefixed');
  t.notOk(verifyWebhookSignature('s1', '0100', body, byHand('s1', '0100', body).replace(/./, 'x')), 'non-hex');
  t.notOk(verifyWebhookSignature('s1', '1e2', body, byHand('s1', '1e2', body)), 'timestamp must be decimal digits');
  t.notOk(verifyWebhookSignature('s1', '', body, byHand('s1', '', body)));
});

t.test('isTimestampFresh: under 5 minutes either way', async (t) => {
  const now = 1_000_000_000;
  t.ok(isTimestampFresh(String(now / 1000), now));
  t.ok(isTimestampFresh(String(now / 1000 - 299), now));
  t.ok(isTimestampFresh(String(now / 1000 + 299), now));
  t.notOk(isTimestampFresh(String(now / 1000 - 300), now));
  t.notOk(isTimestampFresh(String(now / 1000 + 300), now));
  t.notOk(isTimestampFresh('abc', now));
  t.notOk(isTimestampFresh('-5', now));
});

t.test('constants', async (t) => {
  t.same([...WEBHOOK_EVENT_TYPES], [
    'connection.created', 'connection.key_rotated', 'connection.removed', 'delegation.approved', 'delegation.denied', 'delegation.revoked',
    'approval.requested', 'approval.granted', 'approval.denied', 'approval.expired',
  ]);
  t.ok(isWebhookEventType('delegation.revoked'));
  t.notOk(isWebhookEventType('proof.verified'));
  t.equal(WEBHOOK_HEADERS.deliveryId, 'X-Service-Delivery-ID');
  t.equal(WEBHOOK_USER_AGENT, 'agent-authz-webhooks/1');
});
