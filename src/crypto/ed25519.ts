/**
 * Ed25519 through `node:crypto` (available on every supported Node, ≥ 20).
 *
 * Raw 32-byte keys are turned into `KeyObject`s by prefixing the fixed DER headers
 * of RFC 8410 (SPKI for public keys, PKCS#8 for the 32-byte private seed). This module
 * is internal to `src/crypto/`; the public API is in `hybrid.ts`.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { concatBytes, toPlainBytes } from './encoding.js';

/** Raw Ed25519 public key length in bytes. */
export const ED25519_PUBLIC_KEY_BYTES = 32;
/** Ed25519 private seed length in bytes (RFC 8032 secret key). */
export const ED25519_SEED_BYTES = 32;
/** Ed25519 signature length in bytes. */
export const ED25519_SIGNATURE_BYTES = 64;

/** DER SPKI header for an Ed25519 public key (OID 1.3.101.112), followed by the 32 raw bytes. */
const SPKI_PREFIX = Uint8Array.from(Buffer.from('302a300506032b6570032100', 'hex'));
/** DER PKCS#8 header for an Ed25519 private key, followed by the 32-byte seed. */
const PKCS8_PREFIX = Uint8Array.from(Buffer.from('302e020100300506032b657004220420', 'hex'));

/**
 * Imports a 32-byte Ed25519 seed as a private `KeyObject`.
 *
 * @param seed - 32-byte private seed.
 * @returns The private key object.
 * @throws TypeError if the seed is not 32 bytes.
 */
export function ed25519PrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  if (!(seed instanceof Uint8Array) || seed.length !== ED25519_SEED_BYTES) {
    throw new TypeError('ed25519: seed must be 32 bytes');
  }
  return createPrivateKey({ key: Buffer.from(concatBytes(PKCS8_PREFIX, seed)), format: 'der', type: 'pkcs8' });
}

/**
 * Imports a raw 32-byte Ed25519 public key as a `KeyObject`.
 *
 * @param raw - 32-byte public key.
 * @returns The key object, or `null` if OpenSSL refuses the encoding.
 * @throws TypeError if the key is not 32 bytes.
 */
export function ed25519PublicKeyObject(raw: Uint8Array): KeyObject | null {
  if (!(raw instanceof Uint8Array) || raw.length !== ED25519_PUBLIC_KEY_BYTES) {
    throw new TypeError('ed25519: public key must be 32 bytes');
  }
  try {
    return createPublicKey({ key: Buffer.from(concatBytes(SPKI_PREFIX, raw)), format: 'der', type: 'spki' });
  } catch {
    return null;
  }
}

/**
 * Extracts the raw 32-byte public key of an Ed25519 key object.
 *
 * @param key - Private or public Ed25519 key object.
 * @returns The raw public key.
 */
export function ed25519RawPublicKey(key: KeyObject): Uint8Array {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const spki = pub.export({ format: 'der', type: 'spki' });
  return toPlainBytes(spki.subarray(SPKI_PREFIX.length));
}

/**
 * Signs a message with Ed25519 (pure EdDSA, RFC 8032).
 *
 * @param key - Private key object from {@link ed25519PrivateKeyFromSeed}.
 * @param message - Bytes to sign.
 * @returns The 64-byte signature.
 */
export function ed25519Sign(key: KeyObject, message: Uint8Array): Uint8Array {
  return toPlainBytes(sign(null, message, key));
}

/**
 * Verifies an Ed25519 signature. Never throws.
 *
 * @param key - Public key object (`null` — an unimportable key — always fails).
 * @param message - Signed bytes.
 * @param signature - Untrusted signature bytes.
 * @returns `true` only for a valid 64-byte signature.
 */
export function ed25519Verify(key: KeyObject | null, message: Uint8Array, signature: unknown): boolean {
  if (key === null || !(signature instanceof Uint8Array) || signature.length !== ED25519_SIGNATURE_BYTES) {
    return false;
  }
  try {
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

/**
 * Internal, for known-answer tests: verifies with a raw public key of any length.
 * Wrong-length keys or signatures give `false`. Never throws.
 *
 * @param publicKey - Raw public key bytes (expected 32).
 * @param message - Signed bytes.
 * @param signature - Signature bytes (expected 64).
 * @returns Whether the signature is valid.
 */
export function ed25519VerifyRaw(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== ED25519_PUBLIC_KEY_BYTES) return false;
  return ed25519Verify(ed25519PublicKeyObject(publicKey), message, signature);
}
