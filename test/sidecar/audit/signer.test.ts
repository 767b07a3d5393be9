/**
 * The checkpoint signer (sidecar/audit/signer.ts) on a real SQLite store: the first start stores one key and
 * signs with it; a later start loads the same key (its stored public key, its checkpoints verify); a second
 * candidate never replaces the stored key; a key sealed under another master key stops the start.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import t from 'tap';
import { DB_FILE_NAME, openSqliteStore } from '../../../sidecar/store/index.js';
import { createSecretBox } from '../../../sidecar/secrets.js';
import { CHECKPOINT_KEY_PURPOSE, loadCheckpointSigner } from '../../../sidecar/audit/signer.js';
import { CHECKPOINT_DOMAIN, checkpointMessage, keyIdOf } from '../../../src/audit-chain.js';
import { createVerifier, publicKeyFromJson, signatureFromJson } from '../../../src/crypto/hybrid.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-signer-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const store = openSqliteStore({ file: path.join(dir, DB_FILE_NAME) });
t.teardown(() => store.close());
const box = createSecretBox(new Uint8Array(crypto.randomBytes(32)));
const head = 'a'.repeat(64);

t.test('first start stores one key; later starts load it and sign verifiably', async (t) => {
  t.same(await store.audit.serviceKeys(), [], 'no key yet');
  const first = await loadCheckpointSigner(store.audit, box, 1_000);
  const keys = await store.audit.serviceKeys();
  t.equal(keys.length, 1);
  t.equal(keys[0]!.purpose, CHECKPOINT_KEY_PURPOSE);
  t.equal(keys[0]!.id, first.keyId, 'the key signed with is the stored one');
  t.equal(keyIdOf(publicKeyFromJson(JSON.parse(keys[0]!.publicKey))!), first.keyId);

  const again = await loadCheckpointSigner(store.audit, box, 2_000);
  t.equal(again.keyId, first.keyId, 'a restart keeps the key');
  t.same(again.publicKey, first.publicKey);
  t.equal((await store.audit.serviceKeys()).length, 1, 'and stores no other');

  const verifier = createVerifier(publicKeyFromJson(JSON.parse(keys[0]!.publicKey))!);
  for (const signer of [first, again]) {
    const c = signer.sign('acct', 7, head, 'periodic', 3_000);
    const { signature, ...unsigned } = c;
    t.equal(verifier.verify(CHECKPOINT_DOMAIN, checkpointMessage(unsigned), signatureFromJson(signature)!), true,
      'its checkpoint verifies with the stored public key');
    const forged = checkpointMessage({ ...unsigned, position: 8 });
    t.equal(verifier.verify(CHECKPOINT_DOMAIN, forged, signatureFromJson(signature)!), false,
      'and only that checkpoint');
  }
});

t.test('a key sealed under another master key stops the start', async (t) => {
  const other = createSecretBox(new Uint8Array(crypto.randomBytes(32)));
  await t.rejects(loadCheckpointSigner(store.audit, other, 4_000), 'refused');
  t.equal((await store.audit.serviceKeys()).length, 1, 'nothing stored');
});
