/**
 * The service's checkpoint signing key: a hybrid Ed25519 + ML-DSA-65 key pair
 * made once per database and stored with its secret sealed under the master key
 * (aad `service-key:<key id>:secret`, like account root keys), and the signer
 * that turns a chain head into a signed checkpoint (`src/audit-chain.ts`).
 */
import crypto from 'node:crypto';
import { CHECKPOINT_DOMAIN, checkpointMessage, keyIdOf } from '../../src/audit-chain.js';
import type { CheckpointKind } from '../../src/audit-chain.js';
import {
  HYBRID_SECRET_SEED_BYTES, createSigner, publicKeyFromJson, publicKeyToJson, signatureToJson,
} from '../../src/crypto/hybrid.js';
import type { HybridPublicKeyJson, HybridSigner } from '../../src/crypto/hybrid.js';
import { canonicalize } from '../../src/canonical.js';
import type { AuditCheckpointRecord, AuditStore } from '../store/types.js';
import { AAD } from '../secrets.js';
import type { SecretBox } from '../secrets.js';

/** The `purpose` of the checkpoint key in the service key table. */
export const CHECKPOINT_KEY_PURPOSE = 'audit-checkpoint';

/** Signs checkpoints with the service key. */
export interface CheckpointSigner {
  /** The key id checkpoints name (`keyIdOf` the public key). */
  readonly keyId: string;
  readonly publicKey: HybridPublicKeyJson;
  /** A signed checkpoint of `head` at `position` of `accountId`'s chain. */
  sign(accountId: string, position: number, head: string, kind: CheckpointKind, now: number): AuditCheckpointRecord;
}

/**
 * Loads the checkpoint key, creating and storing it on first use (concurrent starts agree on
 * one: the store keeps the first). Throws when the stored secret cannot be opened (another
 * master key): the sidecar must not start then.
 */
export async function loadCheckpointSigner(store: AuditStore, box: SecretBox, now: number): Promise<CheckpointSigner> {
  // One ML-DSA key expansion per start (~0.15 CPU s each with the noble backend): the stored key when there is
  // one, else a fresh one, whose signer is kept when the store keeps it.
  let stored = (await store.serviceKeys()).find((k) => k.purpose === CHECKPOINT_KEY_PURPOSE);
  let fresh: { seed: Uint8Array; signer: HybridSigner; id: string } | undefined;
  if (stored === undefined) {
    const seed = new Uint8Array(crypto.randomBytes(HYBRID_SECRET_SEED_BYTES));
    const freshSigner = createSigner(seed);
    fresh = { seed, signer: freshSigner, id: keyIdOf(freshSigner.publicKey) };
    stored = await store.ensureServiceKey({
      id: fresh.id, purpose: CHECKPOINT_KEY_PURPOSE, publicKey: canonicalize(publicKeyToJson(freshSigner.publicKey)),
      secretEnc: box.seal(seed, AAD.serviceKey(fresh.id)), createdAt: now,
    });
  }
  // Opened even when it is the key just stored: a key sealed under another master key stops the start.
  const seed = box.open(stored.secretEnc, AAD.serviceKey(stored.id));
  const signer = fresh !== undefined && fresh.id === stored.id && Buffer.from(seed).equals(fresh.seed)
    ? fresh.signer : createSigner(seed);
  const publicKey = publicKeyToJson(signer.publicKey);
  const storedKey = publicKeyFromJson(JSON.parse(stored.publicKey));
  if (keyIdOf(signer.publicKey) !== stored.id || storedKey === null || keyIdOf(storedKey) !== stored.id) {
    throw new Error(`service key ${stored.id}: the stored public key does not match its secret`);
  }
  return {
    keyId: stored.id,
    publicKey,
    sign(accountId, position, head, kind, at) {
      const unsigned = { id: crypto.randomUUID(), accountId, position, head, kind, keyId: stored.id, createdAt: at };
      return { ...unsigned, signature: signatureToJson(signer.sign(CHECKPOINT_DOMAIN, checkpointMessage(unsigned))) };
    },
  };
}
