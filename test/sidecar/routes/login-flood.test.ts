/**
 * The login-code flood of issue 20 §3, on SQLite, through a real sidecar
 * process behind a trusted loopback proxy, with the default per-address
 * limits (N = 5: at most 10 codes per address per hour, 5 tries each):
 *
 * 1. the victim address uses its 10 codes of the hour and its last code's 5
 *    tries;
 * 2. 50,000 send-code requests for 50,000 other addresses, each from its own
 *    client IPv6 /64, concurrently on keep-alive connections. The global cap
 *    is raised for this test so that every one of them gets a code, a login
 *    code row and a per-address window: the flood that evicted the victim's
 *    in-memory counter before (the cap itself: auth-global-cap.test.ts);
 * 3. the victim still gets no code and its code stays locked; its window is
 *    in the store among 50,000 others;
 * 4. the same after a restart of the process on the same data directory.
 *
 * Codes are counted from the development mailer's log lines (one per code).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import Database from 'better-sqlite3';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { Client } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { expectError } from '../decide/helpers.js';
import { parsePrometheusText, sampleValue } from '../ops/helpers.js';
import { flood, startSidecarProcess } from './flood.js';
import type { SidecarProcess } from './flood.js';

t.setTimeout(150_000);
const VICTIM = 'victim@example.com';
const FLOOD = 50_000;

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-flood-'));
t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
const env = {
  SIDECAR_DATA_DIR: dataDir, SIDECAR_MASTER_KEY: crypto.randomBytes(32).toString('base64'),
  SIDECAR_TRUST_PROXY: '127.0.0.1', SIDECAR_CRYPTO_WORKERS: '0', SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE: '1000000',
  // Rate-limit state under a flood, not durability: under the default `full` every send-code waits for its own
  // WAL sync, which held 50,000 requests to about 34,000 in the 80 s budget (docs/storage.md, "Durability").
  SIDECAR_SQLITE_SYNCHRONOUS: 'normal',
};
const send = (sc: SidecarProcess, email: string, ip: string): Promise<Res> =>
  new Client(sc.url).post('/v1/auth/email/send-code', { email }, { headers: { 'x-forwarded-for': ip } });
const check = (sc: SidecarProcess, code: string, ip: string): Promise<Res> =>
  new Client(sc.url).post('/v1/auth/email/verify-code', { email: VICTIM, code }, { headers: { 'x-forwarded-for': ip } });
/** Codes the victim got from processes that have been stopped. */
let earlier = 0;
let ip = 0;
/** Waits (at most 5 s) for `done`, then a little more for a late log line: the mailer's lines come through a pipe. */
async function settled(done: () => boolean): Promise<void> {
  for (let i = 0; i < 250 && !done(); i++) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 200));
}
const nextIp = (): string => `198.51.100.${++ip}`;

/** The victim gets no code (its address's limit, for the rest of the hour) and its code stays locked. */
async function victimHeld(t: Test, sc: SidecarProcess, code: string, when: string): Promise<void> {
  const r = await send(sc, VICTIM, nextIp());
  expectError(t, r, 429, 'rate_limited', `${when}: no 11th code in the hour`);
  t.match(r.body?.error?.message, /for this address/, `${when}: refused by the address's own limit`);
  t.ok(Number(r.headers.get('retry-after')) > 60, `${when}: Retry-After ${r.headers.get('retry-after')} s, the rest of the hour`);
  expectError(t, await check(sc, code, nextIp()), 400, 'code_locked', `${when}: the right code after 5 wrong tries`);
  await new Promise((r) => setTimeout(r, 200)); // a late line of the mailer would show here
  t.equal(earlier + sc.codesFor(VICTIM).length, 10, `${when}: the victim got 10 codes in all`);
}

let sc = await startSidecarProcess(t, env);
let code = '';

await t.test('the victim uses its 10 codes and the tries of the last', async (t) => {
  for (let i = 0; i < 10; i++) t.equal((await send(sc, VICTIM, nextIp())).status, 200, `code ${i + 1}`);
  expectError(t, await send(sc, VICTIM, nextIp()), 429, 'rate_limited', 'the 11th');
  await settled(() => sc.codesFor(VICTIM).length >= 10);
  t.equal(sc.codesFor(VICTIM).length, 10, 'ten codes');
  code = sc.codesFor(VICTIM).at(-1)!;
  const wrong = code === '000000' ? '111111' : '000000';
  for (let i = 0; i < 5; i++) expectError(t, await check(sc, wrong, nextIp()), 400, 'invalid_code', `wrong try ${i + 1}`);
  expectError(t, await check(sc, code, nextIp()), 400, 'code_locked');
});

await t.test(`a flood of ${FLOOD} other addresses from ${FLOOD} /64s`, async (t) => {
  const started = Date.now();
  const res = await flood([sc.url], FLOOD, { concurrency: 32, budgetMs: 80_000, domain: 'flood.example' });
  const seconds = (Date.now() - started) / 1000;
  t.comment(`${FLOOD} requests in ${seconds.toFixed(1)} s: ${JSON.stringify(Object.fromEntries(res))}`);
  t.equal([...res.values()].reduce((a, b) => a + b, 0), FLOOD, 'every request answered');
  t.same([...res.keys()].filter((k) => k !== '200 code_sent' && k !== '429 rate_limited'), [], 'only codes sent and 429 rate_limited');
  t.equal(res.get('200 code_sent'), FLOOD, 'every flood address got a code');
  const m = parsePrometheusText(await (await fetch(`${sc.url}/metrics`)).text());
  t.equal(sampleValue(m, 'agent_authz_login_codes_total', 'agent_authz_login_codes_total', { result: 'sent' }), FLOOD + 10, 'metric: codes sent');
  await settled(() => sc.codesSent() >= FLOOD + 10);
  t.equal(sc.codesSent(), FLOOD + 10, 'the mailer sent them');

  const db = new Database(path.join(dataDir, DB_FILE_NAME), { readonly: true });
  try {
    const windowsStored = db.prepare("SELECT count(*) AS n FROM rate_limits WHERE key LIKE 'send-code:email:%'").get() as { n: number };
    t.ok(windowsStored.n >= FLOOD + 1, `the store holds ${windowsStored.n} per-address windows`);
    const victim = db.prepare('SELECT count FROM rate_limits WHERE key = ?').get(`send-code:email:${VICTIM}`) as { count: number } | undefined;
    t.equal(victim?.count, 11, 'the victim\'s among them, its count intact');
    const codeRows = db.prepare('SELECT count(*) AS n FROM login_codes').get() as { n: number };
    t.ok(codeRows.n >= FLOOD + 1, `and ${codeRows.n} login codes`);
  } finally {
    db.close();
  }
});

await t.test('after the flood', (t) => victimHeld(t, sc, code, 'after the flood'));

await t.test('after a restart of the process on the same data directory', async (t) => {
  earlier += sc.codesFor(VICTIM).length;
  t.equal(await sc.stop(), 0, 'stopped cleanly');
  sc = await startSidecarProcess(t, env);
  await victimHeld(t, sc, code, 'after the restart');
});
