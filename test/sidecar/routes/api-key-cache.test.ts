/**
 * The API-key authentication cache (sidecar/decide/caches.ts ApiKeyCache,
 * used by authenticateApiKey): a success is reused for a few seconds without
 * reading the store, never past the key's own validity; failures are never
 * cached; rotation and removal drop a connection's entries before they
 * return; an authentication that read the store before an invalidation is
 * not cached after it.
 */
import t from 'tap';
import { Client, expectError, onboard } from '../../helpers/sidecar.js';
import { startFaultySidecar } from '../../helpers/store-faults.js';
import type { FaultySidecar } from '../../helpers/store-faults.js';
import { API_KEY_LIFETIME_MS } from '../../../sidecar/routes/registration.js';
import { API_KEY_CACHE_TTL_MS, ApiKeyCache } from '../../../sidecar/auth/api-key.js';

let sc: FaultySidecar;
t.before(async () => { sc = await startFaultySidecar({}, { startWorkers: false }); });
t.teardown(() => sc.close());

const reg = { name: 'Cache platform', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] };

/** Counts the API-key row reads while `fn` runs. */
async function keyReads(fn: () => Promise<unknown>): Promise<number> {
  const spy = sc.faults.spy('platforms.getApiKeyByPrefix');
  try { await fn(); } finally { sc.faults.clear(); }
  return spy.hits;
}

t.test('a success is reused; a failure is not cached; clear() forces a read', async (t) => {
  const user = await onboard(sc, 'cache1@example.com');
  const r = (await user.post('/v1/service/platforms/personal', reg)).body;
  const platform = new Client(sc.url);
  platform.apiKey = r.api_key;
  t.equal(await keyReads(async () => {
    for (let i = 0; i < 5; i++) t.equal((await platform.post('/v1/service/challenge')).status, 200);
  }), 1, 'five calls, one store read');
  const wrong = new Client(sc.url);
  wrong.apiKey = r.api_key.slice(0, -1) + (r.api_key.endsWith('A') ? 'B' : 'A');
  t.equal(await keyReads(async () => {
    for (let i = 0; i < 3; i++) expectError(t, await wrong.post('/v1/service/challenge'), 401, 'invalid_api_key');
  }), 3, 'a wrong secret with a known prefix is read and refused every time');
  t.equal((await platform.post('/v1/service/challenge')).status, 200, 'the right key still works');
  sc.app.ctx.caches.apiKeys.clear();
  t.equal(await keyReads(() => platform.post('/v1/service/challenge')), 1, 'read again after clear()');
});

t.test('a cached key is refused once its lifetime ends', async (t) => {
  const user = await onboard(sc, 'cache2@example.com');
  const r = (await user.post('/v1/service/platforms/personal', reg)).body;
  const platform = new Client(sc.url);
  platform.apiKey = r.api_key;
  t.equal((await platform.post('/v1/service/challenge')).status, 200, 'cached');
  sc.clock.advance(API_KEY_LIFETIME_MS - 1_000);
  t.equal((await platform.post('/v1/service/challenge')).status, 200, 'just before the end of its lifetime');
  sc.clock.advance(1_000);
  expectError(t, await platform.post('/v1/service/challenge'), 401, 'invalid_api_key', 'at the end of its lifetime, cache or not');
});

t.test('rotation and removal take effect before they return, cache or not', async (t) => {
  const user = await onboard(sc, 'cache3@example.com');
  const r = (await user.post('/v1/service/platforms/personal', reg)).body;
  const old = new Client(sc.url);
  old.apiKey = r.api_key;
  for (let i = 0; i < 3; i++) t.equal((await old.post('/v1/service/challenge')).status, 200, 'cached');
  const rot = await user.post(`/v1/service/connections/${r.connection_id}/rotate-key`);
  t.equal(rot.status, 200);
  expectError(t, await old.post('/v1/service/challenge'), 401, 'invalid_api_key', 'the rotated-out key, right after the rotation');
  const fresh = new Client(sc.url);
  fresh.apiKey = rot.body.api_key;
  for (let i = 0; i < 3; i++) t.equal((await fresh.post('/v1/service/challenge')).status, 200, 'the new key (cached)');
  t.equal((await user.post(`/v1/service/connections/${r.connection_id}/remove`)).status, 200);
  expectError(t, await fresh.post('/v1/service/challenge'), 401, 'invalid_api_key', 'right after the removal');
});

t.test('ApiKeyCache: TTL, validity, invalidation generations', async (t) => {
  const cache = new ApiKeyCache();
  const auth = { connectionId: 'c1', platformId: 'p1', accountId: 'a1', keyId: 'k1' };
  cache.set('d1', auth, null, cache.generation);
  t.same(cache.get('d1', 0), auth);
  // Valid until a given time on the service clock.
  cache.set('d2', { ...auth, keyId: 'k2' }, 1_000, cache.generation);
  t.ok(cache.get('d2', 999));
  t.equal(cache.get('d2', 1_000), undefined, 'not at or past validUntil');
  t.equal(cache.get('d2', 0), undefined, 'and the entry is gone');
  // An authentication that read the store before an invalidation is not cached.
  const g = cache.generation;
  cache.invalidateConnection('c-other');
  cache.set('d3', auth, null, g);
  t.equal(cache.get('d3', 0), undefined, 'stale generation: not cached');
  t.ok(cache.get('d1', 0), 'other connections are kept');
  cache.invalidateConnection('c1');
  t.equal(cache.get('d1', 0), undefined, 'dropped with its connection');
  // The TTL runs on monotonic time.
  cache.set('d4', auth, null, cache.generation);
  const now = performance.now.bind(performance);
  performance.now = () => now() + API_KEY_CACHE_TTL_MS + 1;
  try {
    t.equal(cache.get('d4', 0), undefined, 'expired after the TTL');
  } finally {
    performance.now = now;
  }
});
