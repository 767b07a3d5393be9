/**
 * Time limits of the decision path, driven by the sidecar's controllable
 * clock: challenge lifetime (`challengeTtlSeconds`, default 300 s) and proof
 * freshness (`proofFreshnessSeconds`, default 120 s), with their boundaries.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor, challenge, expectDecision, expectError, presentRaw, verify } from './helpers.js';
import type { Bundle } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  t.equal(sc.config.challengeTtlSeconds, 300, 'default challenge lifetime');
  t.equal(sc.config.proofFreshnessSeconds, 120, 'default freshness window');
  f = await specFlow(sc, 'fresh@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

/** challenge now, advance `beforePresent` ms, present; returns the bundle. */
async function presentAfter(ms: number): Promise<Bundle> {
  const c = await challenge(f.platform);
  sc.clock.advance(ms);
  const r = await presentRaw(f, c);
  if (r.status !== 200) throw new Error(`present: ${r.status} ${r.text}`);
  return r.body.proof_bundle as Bundle;
}

t.test('an expired challenge is invalid_challenge at verify', async (t) => {
  // Present late in the challenge's life so that the proof itself is still fresh.
  const live = await presentAfter(200_000);
  sc.clock.advance(99_999);
  expectDecision(t, await verify(f.platform, live, 'data:read'), 'allow', 'authorized', undefined, '1 ms before the challenge expires');

  const dead = await presentAfter(200_000);
  sc.clock.advance(100_000);
  expectError(t, await verify(f.platform, dead, 'data:read'), 400, 'invalid_challenge', 'at the challenge expiry (proof 100 s old)');

  const older = await bundleFor(f);
  sc.clock.advance(301_000);
  expectError(t, await verify(f.platform, older, 'data:read'), 400, 'invalid_challenge', 'challenge and proof both too old');
});

t.test('a stale proof is proof_stale within the challenge lifetime', async (t) => {
  const atEdge = await bundleFor(f);
  sc.clock.advance(120_000);
  expectDecision(t, await verify(f.platform, atEdge, 'data:read'), 'allow', 'authorized', undefined, 'exactly 120 s old');

  const stale = await bundleFor(f);
  sc.clock.advance(120_001);
  expectError(t, await verify(f.platform, stale, 'data:read'), 400, 'proof_stale', '120.001 s old');
  expectError(t, await verify(f.platform, stale, 'data:read'), 400, 'invalid_challenge', 'a stale proof spends its challenge');

  const veryStale = await bundleFor(f);
  sc.clock.advance(250_000);
  expectError(t, await verify(f.platform, veryStale, 'data:read'), 400, 'proof_stale', '250 s old, challenge still live');
});

t.test('present refuses expired, unknown, already-presented and malformed challenges', async (t) => {
  const c = await challenge(f.platform);
  sc.clock.advance(300_000);
  expectError(t, await presentRaw(f, c), 400, 'invalid_challenge', 'expired challenge');

  expectError(t, await presentRaw(f, 'A'.repeat(43)), 400, 'invalid_challenge', 'unknown challenge');
  expectError(t, await presentRaw(f, 'short'), 400, 'invalid_challenge', 'malformed challenge');
  expectError(t, await presentRaw(f, ''), 400, 'invalid_challenge', 'empty challenge');
  expectError(t, await presentRaw(f, 'x'.repeat(300)), 400, 'invalid_request', 'over-long challenge');
  expectError(t, await presentRaw(f, 42), 400, 'invalid_request', 'non-string challenge');

  const once = await challenge(f.platform);
  const first = await presentRaw(f, once);
  t.equal(first.status, 200, first.text);
  expectError(t, await presentRaw(f, once), 400, 'invalid_challenge', 'already presented');

  // Spent by verify: present again still refuses.
  const spent = await challenge(f.platform);
  const p = await presentRaw(f, spent);
  expectDecision(t, await verify(f.platform, p.body.proof_bundle, 'data:read'), 'allow', 'authorized');
  expectError(t, await presentRaw(f, spent), 400, 'invalid_challenge', 'consumed challenge');
});
