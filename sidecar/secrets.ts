/**
 * Sealing of secrets and private keys at rest under the master key
 * (AES-256-GCM, record id in the associated data). The store only ever sees
 * the sealed bytes.
 */
import { seal, open, deriveKey } from '../src/crypto/seal.js';

/** Seals and opens values bound to an associated-data label. */
export interface SecretBox {
  /** Seals `plaintext`; `aad` names the record, e.g. `agent:<id>:secret`. */
  seal(plaintext: Uint8Array, aad: string): Uint8Array;
  /** Opens a sealed value; throws if the key, label or bytes do not match. */
  open(sealed: Uint8Array, aad: string): Uint8Array;
  /** A purpose-specific subkey derived from the master key (HKDF). */
  subkey(purpose: string): Uint8Array;
}

/** Associated-data labels, one per sealed column, so sealed values cannot be swapped between records or columns. */
export const AAD = {
  rootSecret: (accountId: string) => `account:${accountId}:root_secret`,
  agentSecret: (agentId: string) => `agent:${agentId}:secret`,
  signingSecret: (platformId: string) => `platform:${platformId}:signing_secret`,
  webhookSecret: (platformId: string) => `platform:${platformId}:webhook_secret`,
  outboxBody: (deliveryId: string) => `outbox:${deliveryId}:body`,
  serviceKey: (keyId: string) => `service-key:${keyId}:secret`,
} as const;

/** Creates the box for a 32-byte master key. */
export function createSecretBox(masterKey: Uint8Array): SecretBox {
  if (masterKey.length !== 32) throw new TypeError('master key must be 32 bytes');
  const sealKey = deriveKey(masterKey, 'seal', 32);
  return {
    seal: (plaintext, aad) => seal(sealKey, plaintext, aad),
    open: (sealed, aad) => open(sealKey, sealed, aad),
    subkey: (purpose) => deriveKey(masterKey, purpose, 32),
  };
}
