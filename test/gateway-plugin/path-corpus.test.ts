/**
 * Path safety over real HTTP, in every enforcement mode (modes.ts: proxy,
 * plugin, forward-auth behind real NGINX and Caddy and the Envoy/Traefik
 * check-request shapes):
 * - a corpus of >= 300 hostile spellings (dot segments raw/encoded, encoded
 *   slashes and backslashes, `;` parameters, doubled slashes, bad/overlong
 *   percent-encoding, NUL/controls, double encoding, confusables, ...) against
 *   protected routes, with a sidecar that denies everything and with no proof
 *   at all: the upstream must receive nothing;
 * - a differential test with a sidecar that allows: for many valid spellings
 *   the path verify saw equals byte-for-byte the path the upstream received,
 *   equals the expected normalized path, and the query is passed unchanged.
 *   Behind a forward-auth proxy the upstream gets the proxy's own (raw)
 *   spelling, so there the check is that verify saw exactly its normalized
 *   form (every spelling that could be read two ways was refused).
 *
 * Both run COMPLETELY in every mode, and the counts are asserted: every
 * corpus variant with and without a proof (2 x the corpus size, 4 requests in
 * flight), every differential spelling of every round. The per-mode deadlines
 * (40 s and 20 s, against about 1.5 s and 1 s on an idle machine) only turn a
 * machine far slower than CI into a failing count: the test never passes
 * having run part of the corpus. Each request has its own 10 s timeout, and
 * the file's timeout exceeds all deadlines together.
 */

import t from 'tap';
import type { Test } from 'tap';
import { isNormalizedPath, normalizePath } from '../../src/path.js';
import { allowAll, denyAll, proofHeader, rawRequest, startFakeSidecar, startUpstream } from './helpers.js';
import { MODES, startMode } from './modes.js';
import type { ModeServer } from './modes.js';

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE_PIECES = [
  '/./', '/../', '/.', '/..', '/%2e/', '/%2e%2e/', '/%2E%2E/', '/.%2e/', '/%2e./', '/..%2f', '/%2e%2e%2f', '%2f', '%2F', '%5c', '%5C', '\\',
  '\\..\\', ';', ';jsessionid=1', '%3b', '%3B', '//', '///', '%00', '%01', '%0a', '%0d', '%09', '%1f', '%7f', '%c0%af', '%c0%ae', '%e0%80%af',
  '%c1%9c', '%f0%80%80%af', '%ff', '%80', '%zz', '%g0', '%4', '%', '%252e', '%252f', '%255c', '%25%32%65', '%ef%bc%8f', '%ef%bc%8e', '%e2%80%a8',
  '%c2%85', '%ef%bc%bc', '#', '#frag', '/..;/', '/;/', '/.;/', '%2e%2e;/', '..', '...', '/...', '/a..', '/..a',
];
const PROTECTED = ['/admin', '/v1/items/1', '/files/x', '/v1/payments'];

function corpus(): string[] {
  const out = new Set<string>([
    '/public/status/../../admin', '/public/status/..%2f..%2fadmin', '/public/status%2f..%2f..%2fadmin', '/public/status;/../../admin',
    '/public/status/%2e%2e/%2e%2e/admin', '/public//status', '//public/status', '/public/status/.', 'admin', '*', 'http://127.0.0.1/admin',
    '/%2e%2e/admin', '/admin%00', '/admin%2500', '/ad%00min', '/admin\\', '/admin/..', '/admin/.', '/./admin', '//admin', '/admin;', '/admin;x=1',
    '/v1/items/1/..', '/v1/items/..%2f..%2fadmin', '/v1/items/%2e%2e%5cadmin', '/files/..', '/files/%2e%2e', '/files/a/../../admin',
  ]);
  const rand = prng(42);
  for (let i = 0; out.size < 420 && i < 5000; i += 1) {
    const base = PROTECTED[Math.floor(rand() * PROTECTED.length)] as string;
    const piece = HOSTILE_PIECES[Math.floor(rand() * HOSTILE_PIECES.length)] as string;
    const at = 1 + Math.floor(rand() * (base.length - 1));
    const mode = Math.floor(rand() * 3);
    out.add(mode === 0 ? base.slice(0, at) + piece + base.slice(at) : mode === 1 ? base + piece : piece + base.slice(1));
  }
  return [...out];
}

const up = await startUpstream();
const sidecar = await startFakeSidecar(denyAll);
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});

/** The path the upstream's request line names, as the gateway would normalize it (`undefined` if it would refuse it). */
function normalizedOrUndefined(path: string): string | undefined {
  try {
    return normalizePath(path);
  } catch {
    return undefined;
  }
}

function randomSpelling(normalized: string, rand: () => number): string {
  let out = '';
  for (let i = 0; i < normalized.length; i += 1) {
    const ch = normalized[i] as string;
    if (ch === '%') {
      const triplet = normalized.slice(i, i + 3);
      out += rand() < 0.5 ? triplet.toLowerCase() : triplet;
      i += 2;
    } else if (/[A-Za-z0-9\-._~]/.test(ch) && rand() < 0.35) {
      const hex = ch.charCodeAt(0).toString(16).padStart(2, '0');
      out += `%${rand() < 0.5 ? hex : hex.toUpperCase()}`;
    } else {
      out += ch;
    }
  }
  return out;
}

/**
 * Runs `work` on every item with at most `workers` requests in flight. Stops taking new items
 * once `deadlineMs` has passed (a safety valve for a machine far slower than CI: the caller then
 * FAILS on the count, it never passes short). Returns how many items ran.
 */
async function runAll<T>(items: readonly T[], workers: number, deadlineMs: number, work: (item: T) => Promise<void>): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  let next = 0;
  let ran = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length && Date.now() < deadline) {
      const item = items[next] as T;
      next += 1;
      await work(item);
      ran += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(workers, items.length) }, worker));
  return ran;
}

/** In-flight requests of the hostile corpus (each on its own connection): enough to use both cores, few enough for a busy machine. */
const CORPUS_WORKERS = 4;
/** Per mode; the idle run needs about 1.5 s. Hitting it fails the test (see runAll). */
const CORPUS_DEADLINE_MS = 40_000;
const DIFFERENTIAL_ROUNDS = 30;
/** Per mode; the idle run needs about 1 s. Hitting it fails the test. */
const DIFFERENTIAL_DEADLINE_MS = 20_000;
// Longer than every mode hitting both deadlines, plus starting the proxies: a slow machine fails on a count, not on the file timeout.
t.setTimeout(6 * (CORPUS_DEADLINE_MS + DIFFERENTIAL_DEADLINE_MS) + 60_000);

async function corpusTests(t: Test, gw: ModeServer): Promise<void> {
  const direct = gw.mode === 'proxy' || gw.mode === 'plugin';
  await t.test('hostile corpus never reaches the upstream', async (t) => {
    sidecar.behaviour = denyAll;
    const received = up.received.length;
    const paths = corpus();
    t.ok(paths.length >= 300, `corpus has ${paths.length} variants`);
    // Every variant twice: with a proof (the sidecar denies) and without one.
    const attempts = paths.flatMap((path) => [{ path, withProof: true }, { path, withProof: false }]);
    const statuses = new Map<number, number>();
    const done = new Set<string>();
    // Behind Envoy a target such as `*` makes a check path the endpoint does not serve: 404 route_not_found.
    const refusals = direct ? [400, 401, 403] : [400, 401, 403, 404];
    const unexpected: string[] = [];
    const started = Date.now();
    const ran = await runAll(attempts, CORPUS_WORKERS, CORPUS_DEADLINE_MS, async ({ path, withProof }) => {
      const headers = withProof ? [`X-Service-Proof: ${proofHeader()}`] : [];
      const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, headers, '', 10_000);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (!refusals.includes(res.status)) unexpected.push(`${res.status} for ${JSON.stringify(path)} (proof: ${withProof})`);
      done.add(`${withProof ? 'proof' : 'none'} ${path}`);
    });
    t.equal(ran, attempts.length, `every variant ran, with and without a proof (${ran} of ${attempts.length} in ${Date.now() - started} ms)`);
    t.equal(done.size, attempts.length, 'each attempt was a distinct variant');
    t.equal([...statuses.values()].reduce((a, b) => a + b, 0), attempts.length, 'one answer per attempt');
    t.same(unexpected, [], 'every answer was a refusal');
    t.equal(up.received.length, received, 'upstream received nothing');
    const odd = sidecar.verifyCalls.map((c) => c.body.context.path ?? '').filter((p) => !isNormalizedPath(p));
    t.same(odd, [], 'verify only ever saw normalized paths');
    t.comment(`statuses: ${JSON.stringify([...statuses])}`);
  });

  await t.test('differential: verify path == upstream path == normalized path', async (t) => {
    sidecar.behaviour = allowAll;
    const cases: Array<[string, string]> = [
      ['/admin', 'custom:admin'],
      ['/v1/items/abc-1._~', 'data:read'],
      ['/v1/items/%C3%A9t%C3%A9', 'data:read'],
      ['/v1/items/a%20b%3Fc%23d', 'data:read'],
      ['/v1/items/%3A@!$&\'()*+,=', 'data:read'],
      ['/files/a/b/c.txt', 'data:read'],
      ['/files/a/', 'data:read'],
      ['/files/%22quoted%22/%7Bx%7D', 'data:read'],
      ['/files/x.y/z~w', 'data:read'],
    ];
    const rand = prng(7);
    let checked = 0;
    const deadline = Date.now() + DIFFERENTIAL_DEADLINE_MS;
    for (let round = 0; round < DIFFERENTIAL_ROUNDS && Date.now() < deadline; round += 1) {
      for (const [normalized, scope] of cases) {
        const spelling = round === 0 ? normalized : randomSpelling(normalized, rand);
        const query = round % 3 === 0 ? '' : `?q=%7a%2F&x=1+2&y=${round}`;
        const before = up.received.length;
        const res = await rawRequest(gw.port, `GET ${spelling}${query} HTTP/1.1`, [`X-Service-Proof: ${proofHeader()}`], '', 10_000);
        if (res.status !== 200) {
          t.fail(`status ${res.status} for ${spelling}: ${res.text}`);
          continue;
        }
        const seen = sidecar.verifyCalls.at(-1)?.body;
        const got = up.received[before];
        const upstreamPath = got?.url.split('?')[0];
        const upstreamSaw = direct ? upstreamPath : normalizedOrUndefined(upstreamPath ?? '');
        if (up.received.length !== before + 1 || seen?.context.path !== normalized || upstreamSaw !== normalized || seen.required_scope !== scope) {
          t.fail(`mismatch for ${spelling}: verify ${seen?.context.path} (${seen?.required_scope}) upstream ${got?.url}`);
        }
        if ((got?.url.slice(upstreamPath?.length ?? 0) ?? '') !== query) t.fail(`query changed for ${spelling}${query}: ${got?.url}`);
        checked += 1;
      }
    }
    t.equal(checked, DIFFERENTIAL_ROUNDS * cases.length, `every spelling of every round was checked (${checked})`);
  });

  await t.test('/%61dmin hits the /admin route', async (t) => {
    const before = up.received.length;
    const res = await rawRequest(gw.port, 'GET /%61dmin HTTP/1.1', [`X-Service-Proof: ${proofHeader()}`]);
    t.equal(res.status, 200);
    t.equal(sidecar.verifyCalls.at(-1)?.body.required_scope, 'custom:admin');
    t.equal(sidecar.verifyCalls.at(-1)?.body.context.path, '/admin');
    t.equal(direct ? up.received[before]?.url : normalizePath(up.received[before]?.url ?? ''), '/admin');
    const missing = await rawRequest(gw.port, 'GET /%61%64%6D%69%6E HTTP/1.1');
    t.equal(missing.status, 401);
    t.equal(missing.json?.error?.required_scope, 'custom:admin');
  });
}

for (const mode of MODES) {
  await t.test(`mode ${mode}`, async (t) => {
    const gw = await startMode(mode, up.url, sidecar.url);
    t.teardown(() => gw.close());
    await corpusTests(t, gw);
    t.equal(await gw.failOpen(), 0, 'fail_open_total stayed 0');
  });
}
