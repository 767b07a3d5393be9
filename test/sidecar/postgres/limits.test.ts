/**
 * The login limits count across replicas: three sidecar processes on one
 * PostgreSQL database (`SIDECAR_SEND_CODE_PER_MINUTE=2`, client addresses
 * from `X-Forwarded-For` of a trusted loopback proxy), requests spread over
 * them:
 *
 * - send-code: 2 per minute per client address, 4 per hour per e-mail
 *   address, and a replica started after the limit was reached (one was
 *   killed) still refuses;
 * - verify-code: 12 per minute per client address;
 * - the 5 tries of a code: wrong tries on A, B and C count together, after
 *   the fifth even the right code is `code_locked`.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { Client } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { expectError } from '../decide/helpers.js';
import { newReplicaGroup, startReplica, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(120_000);
/** The file's root test: replicas started inside a subtest must outlive it. */
const root = t;
const pg = await startPostgres(t);
if (pg) {
  const g = await newReplicaGroup(t, pg);
  const { mail } = g;
  const env = { SIDECAR_SEND_CODE_PER_MINUTE: '2', SIDECAR_TRUST_PROXY: '127.0.0.1' };
  const all: Replica[] = await startReplicas(t, g, 3, { env });
  const send = (r: Replica, email: string, ip: string): Promise<Res> =>
    new Client(r.url).post('/v1/auth/email/send-code', { email }, { headers: { 'x-forwarded-for': ip } });
  const check = (r: Replica, email: string, code: string, ip: string): Promise<Res> =>
    new Client(r.url).post('/v1/auth/email/verify-code', { email, code }, { headers: { 'x-forwarded-for': ip } });

  await t.test('send-code: per client address, across replicas', async (t) => {
    t.equal((await send(all[0]!, 'ip1@example.com', '10.1.0.1')).status, 200, 'on A');
    t.equal((await send(all[1]!, 'ip2@example.com', '10.1.0.1')).status, 200, 'on B');
    const third = await send(all[2]!, 'ip3@example.com', '10.1.0.1');
    expectError(t, third, 429, 'rate_limited', 'the third from the same address, on C');
    t.ok(Number(third.headers.get('retry-after')) >= 1, 'with Retry-After');
    t.equal((await send(all[2]!, 'ip3@example.com', '10.1.0.2')).status, 200, 'another address is not limited by it');
  });

  await t.test('send-code: per e-mail address, across replicas and a restart', async (t) => {
    for (let i = 0; i < 4; i++) t.equal((await send(all[i % 3]!, 'victim@example.com', `10.2.0.${i + 1}`)).status, 200, `code ${i + 1} on ${all[i % 3]!.name}`);
    const fifth = await send(all[1]!, 'victim@example.com', '10.2.0.9');
    expectError(t, fifth, 429, 'rate_limited', 'the fifth within the hour, from a fifth address');
    t.match(fifth.body?.error?.message, /for this address/);
    await all[2]!.kill9();
    const d = await startReplica(root, g, 'D', { env });
    expectError(t, await send(d, 'victim@example.com', '10.2.0.10'), 429, 'rate_limited', 'a replica started since still refuses');
    all[2] = d;
  });

  await t.test('verify-code: per client address, across replicas', async (t) => {
    for (let i = 0; i < 12; i++) {
      const r = await check(all[i % 3]!, `nobody${i}@example.com`, '123456', '10.3.0.1');
      t.equal(r.body?.error?.code, 'invalid_code', `try ${i + 1} on ${all[i % 3]!.name}: counted, refused as a wrong code`);
    }
    expectError(t, await check(all[0]!, 'nobody@example.com', '123456', '10.3.0.1'), 429, 'rate_limited', 'the 13th within the minute');
  });

  await t.test('the tries of one code count across replicas', async (t) => {
    t.equal((await send(all[0]!, 'otp@example.com', '10.4.0.1')).status, 200);
    const code = await mail.codeFor('otp@example.com');
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 0; i < 5; i++) {
      const r = await check(all[i % 3]!, 'otp@example.com', wrong, `10.4.1.${i}`);
      expectError(t, r, 400, 'invalid_code', `wrong try ${i + 1} on ${all[i % 3]!.name}`);
      t.equal(r.body?.error?.tries_left, 4 - i, 'tries left, counted over every replica');
    }
    expectError(t, await check(all[2]!, 'otp@example.com', code, '10.4.1.9'), 400, 'code_locked', 'then even the right code is refused');
  });
}
