/**
 * The login-code limits on PostgreSQL, shared by replicas (issue 20 §3):
 *
 * - the flood: two sidecar processes on one database with the default
 *   limits (10 codes per address per hour, 5 tries each; 600 codes a minute
 *   over all addresses); the victim uses its codes on A and B, then 50,000
 *   send-code requests for 50,000 other addresses, each from its own client
 *   IPv6 /64 through a trusted proxy, alternate between A and B. The one
 *   global cap bounds the codes both send together and one warn line in all
 *   announces it; the victim gets no 11th code on either and its code stays
 *   locked, also after A is killed (`SIGKILL`) and started again. (The flood
 *   in which every one of 50,000 addresses gets a code and a window is
 *   login-flood.test.ts, on SQLite: on PostgreSQL its nine statements a
 *   request take about 40 s on two busy cores.)
 * - the global cap, exactly: codes sent on A and B count together.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { loadConfig } from '../../../sidecar/config/index.js';
import { startPostgres } from '../../helpers/postgres.js';
import { Client, startSidecar } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { expectError } from '../decide/helpers.js';
import { flood, startSidecarProcess } from './flood.js';
import type { SidecarProcess } from './flood.js';

t.setTimeout(180_000);
const VICTIM = 'victim@example.com';
const FLOOD = 50_000;
const CAP = 600;

const pg = await startPostgres(t);
if (pg) {
  const masterKey = crypto.randomBytes(32);
  const send = (url: string, email: string, ip: string): Promise<Res> =>
    new Client(url).post('/v1/auth/email/send-code', { email }, { headers: { 'x-forwarded-for': ip } });
  let ip = 0;
  const nextIp = (): string => `198.51.100.${++ip}`;

  await t.test('a flood of 50,000 addresses over two replicas, and a replica killed and started again', async (t) => {
    const env = {
      SIDECAR_DATABASE_URL: await pg.createDatabase(), SIDECAR_MASTER_KEY: masterKey.toString('base64'), SIDECAR_TRUST_PROXY: '127.0.0.1',
      SIDECAR_CRYPTO_WORKERS: '0', SIDECAR_DATABASE_POOL_MAX: '8',
    };
    const replica = async (): Promise<SidecarProcess> => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-flood-pg-'));
      t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
      return startSidecarProcess(t, { ...env, SIDECAR_DATA_DIR: dataDir });
    };
    const rs = await Promise.all([replica(), replica()]);
    /** Codes the victim got from every replica, the stopped ones included. */
    let earlier = 0;
    const victimCodes = (): number => earlier + rs[0]!.codesFor(VICTIM).length + rs[1]!.codesFor(VICTIM).length;
    const check = (r: SidecarProcess, code: string): Promise<Res> =>
      new Client(r.url).post('/v1/auth/email/verify-code', { email: VICTIM, code }, { headers: { 'x-forwarded-for': nextIp() } });
    const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

    for (let i = 0; i < 10; i++) t.equal((await send(rs[i % 2]!.url, VICTIM, nextIp())).status, 200, `victim code ${i + 1}, on ${'AB'[i % 2]}`);
    for (let i = 0; i < 250 && victimCodes() < 10; i++) await pause(20);
    const code = rs[1]!.codesFor(VICTIM).at(-1)!;
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 0; i < 5; i++) expectError(t, await check(rs[i % 2]!, wrong), 400, 'invalid_code', `wrong try ${i + 1}`);

    const started = Date.now();
    const res = await flood(rs.map((r) => r.url), FLOOD, { concurrency: 32, budgetMs: 120_000, domain: 'flood.example' });
    t.comment(`${FLOOD} requests over two replicas in ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(Object.fromEntries(res))}`);
    t.equal([...res.values()].reduce((a, b) => a + b, 0), FLOOD, 'every request answered');
    t.same([...res.keys()].filter((k) => k !== '200 code_sent' && k !== '429 rate_limited'), [], 'only codes sent and 429 rate_limited');
    const sent = res.get('200 code_sent') ?? 0;
    const minutes = Math.ceil((Date.now() - started) / 60_000);
    t.ok(sent + 10 >= CAP && sent + 10 <= CAP * minutes, `codes sent by A and B together (${sent} + the victim's 10) bounded by the one cap: ${CAP} a minute`);
    await pause(200);
    t.equal(rs[0]!.codesSent() + rs[1]!.codesSent(), sent + 10, 'the mailers sent just those');
    const warned = rs.flatMap((r) => r.lines()).filter((l) => l.includes('login-code global cap reached'));
    t.ok(warned.length >= 1 && warned.length <= minutes, `one warn line per capped minute over both replicas (${warned.length})`);

    const dbName = new URL(env.SIDECAR_DATABASE_URL).pathname.slice(1);
    // Within the flood's minute a replica that saw the cap refuse answers with the cap's message
    // before looking at the address; one that did not (A, started again) reaches the address's
    // own limit. Either way no code; the address's window in the database is what holds.
    const held = async (when: string, addressLimitOn: string[]): Promise<void> => {
      for (const [i, r] of rs.entries()) {
        const name = 'AB'[i]!;
        const refused = await send(r.url, VICTIM, nextIp());
        expectError(t, refused, 429, 'rate_limited', `${when}, on ${name}: no 11th code`);
        t.match(refused.body?.error?.message, addressLimitOn.includes(name) ? /for this address/ : /for this address|being sent right now/, `${when}, on ${name}: ${refused.body?.error?.message}`);
        expectError(t, await check(r, code), 400, 'code_locked', `${when}, on ${name}: the right code is locked`);
      }
      const [w] = await pg.admin<{ count: number; window_end: string }>('SELECT count, window_end FROM rate_limits WHERE key = $1', [`send-code:email:${VICTIM}`], dbName);
      t.ok(w && w.count >= 10 && Number(w.window_end) > Date.now() + 50 * 60_000, `${when}: the victim's window is intact (${w?.count} hits, ending in ${Math.round((Number(w?.window_end) - Date.now()) / 60_000)} min)`);
      await pause(200); // a late line of the mailer would show here
      t.equal(victimCodes(), 10, `${when}: the victim got 10 codes in all`);
    };
    await held('after the flood', []);
    earlier += rs[0]!.codesFor(VICTIM).length;
    t.equal(await rs[0]!.kill9(), null, 'A was killed');
    rs[0] = await replica();
    await held('after A was killed and started again', ['A']);
  });

  await t.test('the global cap counts over all replicas, and one of them warns', async (t) => {
    const database = loadConfig({ SIDECAR_DATABASE_URL: await pg.createDatabase(), SIDECAR_MASTER_KEY: masterKey.toString('base64') }).database!;
    const lines: string[] = [];
    const logStream = new Writable({ write(c: Buffer, _e, done) { lines.push(...c.toString('utf8').split('\n').filter(Boolean)); done(); } });
    const o = { database, masterKey, sendCodeGlobalPerMinute: 4, trustProxy: ['127.0.0.1'], logLevel: 'warn', cryptoWorkers: 0 };
    const a = await startSidecar(o, { logStream });
    t.teardown(() => a.close());
    const b = await startSidecar(o, { logStream });
    t.teardown(() => b.close());
    for (let i = 0; i < 4; i++) t.equal((await send([a, b][i % 2]!.url, `cap${i}@example.com`, nextIp())).status, 200, `code ${i + 1} of the minute`);
    for (const [name, sc] of [['A', a], ['B', b]] as const) {
      const r = await send(sc.url, `over-${name}@example.com`, nextIp());
      expectError(t, r, 429, 'rate_limited', `the 5th on ${name}`);
      t.match(r.body?.error?.message, /being sent right now/);
    }
    t.equal(a.mail.messages.length + b.mail.messages.length, 4, 'four codes e-mailed in all');
    t.equal(lines.filter((l) => l.includes('login-code global cap reached')).length, 1, 'one warn line over both replicas');
  });
}
