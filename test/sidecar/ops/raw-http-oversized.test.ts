/**
 * The raw-HTTP test's oversized case (issue 35; the random requests are in
 * raw-http-property.test.ts): a real sidecar process gets requests far over
 * its limits at full speed — 1 MiB bodies (the limit is 64 KiB) refused with
 * 413 with or without an API key, an early 401 of a request with a body, a
 * 431 whose header block is over the limit and whose body is never read —
 * 1,000 times idle and 1,000 times under load, and Node's `fetch` sends
 * 3 MB bodies to `POST /v1/service/verify`. Every one must get its refusal
 * read without a reset: the sidecar closes such connections with a lingering
 * close (runtime/linger.ts). Without it a few in a hundred end in `EPIPE`.
 */
import t from 'tap';
import { fillerBody, refusedWith, sendOversized, spawnSidecarProcess, tally } from './oversized.js';

// 2,000 requests of 1 MiB and a process start: minutes on a loaded 2-core machine (the default file timeout is 180 s).
t.setTimeout(420_000);

const JSON_TYPE = 'Content-Type: application/json';
/** [request head, expected refusal code]. */
const CASES: readonly [string, string][] = [
  [`POST /v1/auth/email/send-code HTTP/1.1\r\nHost: 127.0.0.1\r\n${JSON_TYPE}`, 'body_too_large'],
  [`POST /v1/service/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${JSON_TYPE}`, 'body_too_large'],
  [`POST /v1/service/verify HTTP/1.1\r\nHost: 127.0.0.1\r\n${JSON_TYPE}\r\nX-Service-API-Key: aak_000000000000_x`, 'body_too_large'],
  [`GET /v1/service/audit/personal HTTP/1.1\r\nHost: 127.0.0.1\r\n${JSON_TYPE}`, 'auth_required'],
  [`POST /v1/service/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'p'.repeat(20_000)}\r\n${JSON_TYPE}`, 'headers_too_large'],
];

t.test('oversized requests at full speed: every one gets its refusal, no reset (lingering close)', async (t) => {
  const sc = await spawnSidecarProcess();
  t.teardown(() => sc.kill());
  const big = fillerBody(1024 * 1024);
  const huge = fillerBody(3 * 1024 * 1024);

  const raw = async (label: string): Promise<void> => {
    const began = Date.now();
    const counts = await tally(1_000, 8, async (i) => ({ i: i % CASES.length, r: await sendOversized(sc.port, CASES[i % CASES.length]![0], big) }),
      ({ i, r }) => (refusedWith(r, CASES[i]![1]) ? `${r.status} ${r.code}` : `case ${i}: ${r.status} ${r.code ?? '-'} ${r.error ?? ''}`));
    t.comment(`${label} (${Date.now() - began} ms): ${JSON.stringify(counts)}`);
    t.same(counts, { '413 body_too_large': 600, '401 auth_required': 200, '431 headers_too_large': 200 },
      `${label}: 1,000 oversized requests, each answered with its refusal, 0 resets`);
  };
  const viaFetch = async (label: string, n: number): Promise<void> => {
    const began = Date.now();
    const counts = await tally(n, 4, () => fetch(`${sc.url}/v1/service/verify`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: huge,
    }).then(async (r) => `${r.status} ${((await r.json()) as { error?: { code?: string } }).error?.code ?? '-'}`,
      (err: Error & { cause?: { code?: string } }) => `failed ${err.cause?.code ?? err.message}`), (k) => k);
    t.comment(`${label} (${Date.now() - began} ms): ${JSON.stringify(counts)}`);
    t.same(counts, { '413 body_too_large': n }, `${label}: Node's fetch gets the 413 every time`);
  };

  await raw('idle');
  await viaFetch('fetch, idle', 25);
  // Load: keep-alive requests (verifies refused for their missing API key, readiness probes), 8 at a time.
  let stop = false;
  let loadDone = 0;
  const load = Promise.all(Array.from({ length: 8 }, async (_, w) => {
    while (!stop) {
      const r = w % 2 === 0
        ? await fetch(`${sc.url}/v1/service/verify`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ proof_bundle: {}, required_scope: 'data:read' }),
        })
        : await fetch(`${sc.url}/readyz`);
      await r.arrayBuffer();
      loadDone++;
    }
  }));
  try {
    await raw('under load');
    await viaFetch('fetch, under load', 25);
  } finally {
    stop = true;
    await load;
  }
  t.ok(loadDone > 100, `${loadDone} requests of load ran alongside`);
});
