/**
 * Secrets at rest: after a full flow (platform registered with a callback,
 * agent created, certificate approved, key rotated, proofs verified), the
 * SQLite file and its -wal file contain no API key, signing secret, webhook
 * secret, login code, session or CSRF token, and no private-key seed in any
 * encoding. The development master key file is created with mode 0600.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { login, present, specFlow, startSidecar } from '../helpers/sidecar.js';
import { MASTER_KEY_FILE, resolveMasterKey } from '../../sidecar/server.js';
import { DB_FILE_NAME } from '../../sidecar/store/index.js';
import { AAD, createSecretBox } from '../../sidecar/secrets.js';

/** Every encoding a secret could plausibly be written in. */
function encodings(label: string, bytes: Uint8Array): [string, Buffer][] {
  const b = Buffer.from(bytes);
  return [
    [`${label} raw`, b],
    [`${label} hex`, Buffer.from(b.toString('hex'))],
    [`${label} HEX`, Buffer.from(b.toString('hex').toUpperCase())],
    [`${label} base64`, Buffer.from(b.toString('base64').replace(/=+$/, ''))],
    [`${label} base64url`, Buffer.from(b.toString('base64url'))],
  ];
}

t.test('no secret or private key in the SQLite file or its WAL', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  // The development master key file: created, mode 0600, base64 of 32 bytes, stable.
  const keyFile = path.join(sc.dataDir, MASTER_KEY_FILE);
  t.equal(sc.config.masterKey, null, 'SIDECAR_MASTER_KEY is unset');
  t.ok(fs.existsSync(keyFile), 'master.key created');
  t.equal(fs.statSync(keyFile).mode & 0o777, 0o600, 'mode 0600');
  const masterKey = Buffer.from(fs.readFileSync(keyFile, 'utf8').trim(), 'base64');
  t.equal(masterKey.length, 32);
  const again = resolveMasterKey(sc.config);
  t.equal(again.generated, false, 'an existing key file is reused');
  t.ok(Buffer.from(again.key).equals(masterKey));

  const f = await specFlow(sc, 'rest@example.com', { callbackUrl: 'http://127.0.0.1:9/hook', approve: ['data:read', 'payments:send'] });
  const rot = await f.user.post(`/v1/service/connections/${f.reg.connection_id}/rotate-key`);
  t.equal(rot.status, 200);
  f.platform.apiKey = rot.body.api_key;
  const bundle = await present(f);
  t.equal((await f.platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: 'data:read' })).body.decision, 'allow');
  t.equal((await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'end' })).status, 200);
  const second = await login(sc, 'rest@example.com');
  await second.post('/v1/auth/refresh');
  const codes = sc.mail.messages.map((m) => /sign-in code is (\d{6})/.exec(m.raw)?.[1]).filter((c): c is string => !!c);

  // Recover the private seeds in-test by opening the sealed columns with the master key.
  const me = await f.user.get('/v1/auth/session');
  const account = await sc.app.ctx.store.accounts.getAccount(me.body.account_id);
  const agent = await sc.app.ctx.store.platforms.getAgent(f.agentId);
  const box = createSecretBox(new Uint8Array(masterKey));
  const rootSeed = box.open(account!.rootSecretEnc!, AAD.rootSecret(account!.id));
  const agentSeed = sc.app.ctx.box.open(agent!.secretEnc, AAD.agentSecret(agent!.id));
  t.equal(rootSeed.length, 64);
  t.equal(agentSeed.length, 64);
  t.ok(Buffer.from(box.open(agent!.secretEnc, AAD.agentSecret(agent!.id))).equals(Buffer.from(agentSeed)), 'the key file is the key in use');

  const needles: [string, Buffer][] = [
    ['api_key', Buffer.from(f.reg.api_key)],
    ['api_key secret part', Buffer.from(f.reg.api_key.slice(17))],
    ['rotated api_key', Buffer.from(rot.body.api_key)],
    ['signing_secret', Buffer.from(f.reg.signing_secret)],
    ['webhook_signing_secret', Buffer.from(f.reg.webhook_signing_secret)],
    ['webhook secret body', Buffer.from(f.reg.webhook_signing_secret.replace(/^whsec_/, ''))],
    ['session token', Buffer.from(decodeURIComponent(second.jar.get('service_session')!))],
    ['old session token', Buffer.from(decodeURIComponent(f.user.jar.get('service_session')!))],
    ['csrf token', Buffer.from(decodeURIComponent(second.jar.get('service_csrf')!))],
    ...encodings('master key', masterKey),
  ];
  for (const [label, seed] of [['root seed', rootSeed], ['agent seed', agentSeed]] as const) {
    needles.push(...encodings(label, seed));
    needles.push(...encodings(`${label} ed25519 half`, seed.subarray(0, 32)));
    needles.push(...encodings(`${label} ml-dsa half`, seed.subarray(32)));
  }
  for (const c of codes) needles.push([`login code ${c}`, Buffer.from(`"${c}"`)]);
  t.ok(codes.length >= 2, 'login codes were e-mailed');

  const dbFile = path.join(sc.dataDir, DB_FILE_NAME);
  const files = [dbFile, `${dbFile}-wal`, `${dbFile}-shm`].filter((p) => fs.existsSync(p));
  t.ok(files.includes(`${dbFile}-wal`), 'the WAL file exists and is checked');
  const contents = files.map((p) => [path.basename(p), fs.readFileSync(p)] as const);
  t.ok(contents.reduce((s, [, b]) => s + b.length, 0) > 10_000, 'the files hold data');
  // Sanity: the checks can see plaintext that is stored (a public value).
  t.ok(contents.some(([, b]) => b.includes(Buffer.from(f.certId))), 'a stored public value is found (the search works)');
  t.ok(contents.some(([, b]) => b.includes(Buffer.from(f.reg.api_key_prefix))), 'the non-secret prefix is stored');
  for (const [label, needle] of needles) {
    for (const [name, buf] of contents) t.notOk(buf.includes(needle), `${name}: no ${label}`);
  }

  // The sealed columns are not the seeds themselves.
  t.notOk(Buffer.from(account!.rootSecretEnc!).includes(Buffer.from(rootSeed.subarray(0, 32))), 'root_secret_enc does not contain the seed');
  t.notOk(Buffer.from(agent!.secretEnc).includes(Buffer.from(agentSeed.subarray(0, 32))), 'secret_enc does not contain the seed');
  t.throws(() => box.open(agent!.secretEnc, AAD.rootSecret(account!.id)), 'a sealed value is bound to its record and column');
});
