/**
 * ML-DSA-65 (FIPS 204) through `node:crypto`, available from Node 24 on.
 *
 * Private keys are imported from their 32-byte seed ξ as a seed-only PKCS#8 document
 * (RFC 9881 / draft-ietf-lamps-dilithium-certificates `seed` CHOICE: `[0] IMPLICIT OCTET
 * STRING`), public keys from the raw 1952 bytes behind the fixed SPKI header. Whether the
 * running Node supports this is found by feature detection ({@link nativeMlDsaAvailable}).
 * Internal to `src/crypto/`; the public API is in `hybrid.ts`.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { concatBytes, toPlainBytes } from './encoding.js';

/** ML-DSA-65 seed (ξ) length in bytes. */
export const MLDSA65_SEED_BYTES = 32;
/** ML-DSA-65 public key length in bytes. */
export const MLDSA65_PUBLIC_KEY_BYTES = 1952;
/** ML-DSA-65 signature length in bytes. */
export const MLDSA65_SIGNATURE_BYTES = 3309;
/** Longest context string FIPS 204 allows. */
export const MLDSA_MAX_CONTEXT_BYTES = 255;

/** `SEQUENCE { INTEGER 0, AlgorithmIdentifier{id-ml-dsa-65}, OCTET STRING { [0] seed } }` header. */
const PKCS8_SEED_PREFIX = Uint8Array.from(Buffer.from('3034020100300b0609608648016503040312042280' + '20', 'hex'));
/** `SEQUENCE { AlgorithmIdentifier{id-ml-dsa-65}, BIT STRING }` header for a 1952-byte key. */
const SPKI_PREFIX = Uint8Array.from(Buffer.from('308207b2300b0609608648016503040312038207a100', 'hex'));

/** `crypto.sign`/`crypto.verify` key input with the Node ≥ 24 `context` option (absent from @types/node 20). */
type KeyWithContext = { key: KeyObject; context: Buffer };

let available: boolean | undefined;

/**
 * Whether `node:crypto` can import, sign and verify ML-DSA-65 keys as this module needs.
 * Probed once (import from a seed, sign, verify), then cached. Never throws.
 *
 * @returns `true` on Node builds with ML-DSA support (Node ≥ 24).
 */
export function nativeMlDsaAvailable(): boolean {
  if (available === undefined) {
    try {
      const priv = nativePrivateKeyFromSeed(new Uint8Array(MLDSA65_SEED_BYTES));
      const pub = nativePublicKeyObject(nativeRawPublicKey(priv));
      const msg = new Uint8Array([1, 2, 3]);
      available = pub !== null && nativeVerify(pub, msg, nativeSign(priv, msg));
    } catch {
      available = false;
    }
  }
  return available;
}

/**
 * Imports a 32-byte ML-DSA-65 seed as a private `KeyObject`.
 *
 * @param seed - 32-byte FIPS 204 seed ξ.
 * @returns The private key object.
 * @throws TypeError if the seed is not 32 bytes; an `Error` if the runtime lacks ML-DSA.
 */
export function nativePrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  if (!(seed instanceof Uint8Array) || seed.length !== MLDSA65_SEED_BYTES) {
    throw new TypeError('ml-dsa-65: seed must be 32 bytes');
  }
  const key = createPrivateKey({ key: Buffer.from(concatBytes(PKCS8_SEED_PREFIX, seed)), format: 'der', type: 'pkcs8' });
  if (key.asymmetricKeyType !== ('ml-dsa-65' as string)) throw new Error('ml-dsa-65: unexpected key type');
  return key;
}

/**
 * Imports a raw 1952-byte ML-DSA-65 public key as a `KeyObject`.
 *
 * @param raw - Raw public key.
 * @returns The key object, or `null` if the runtime refuses it.
 * @throws TypeError if the key is not 1952 bytes.
 */
export function nativePublicKeyObject(raw: Uint8Array): KeyObject | null {
  if (!(raw instanceof Uint8Array) || raw.length !== MLDSA65_PUBLIC_KEY_BYTES) {
    throw new TypeError('ml-dsa-65: public key must be 1952 bytes');
  }
  try {
    return createPublicKey({ key: Buffer.from(concatBytes(SPKI_PREFIX, raw)), format: 'der', type: 'spki' });
  } catch {
    return null;
  }
}

/**
 * Extracts the raw 1952-byte public key of an ML-DSA-65 key object.
 *
 * @param key - Private or public ML-DSA-65 key object.
 * @returns The raw public key.
 */
export function nativeRawPublicKey(key: KeyObject): Uint8Array {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const spki = pub.export({ format: 'der', type: 'spki' });
  return toPlainBytes(spki.subarray(SPKI_PREFIX.length));
}

/**
 * Signs with ML-DSA-65 (hedged: the runtime mixes in fresh randomness).
 *
 * @param key - Private key object from {@link nativePrivateKeyFromSeed}.
 * @param message - Bytes to sign.
 * @param context - FIPS 204 context string (default empty).
 * @returns The 3309-byte signature.
 * @throws TypeError for a context longer than 255 bytes.
 */
export function nativeSign(key: KeyObject, message: Uint8Array, context?: Uint8Array): Uint8Array {
  if (context !== undefined && context.length > MLDSA_MAX_CONTEXT_BYTES) {
    throw new TypeError('ml-dsa-65: context must be at most 255 bytes');
  }
  if (context === undefined || context.length === 0) return toPlainBytes(sign(null, message, key));
  const input: KeyWithContext = { key, context: Buffer.from(context) };
  return toPlainBytes(sign(null, message, input as unknown as KeyObject));
}

/**
 * Verifies an ML-DSA-65 signature. Never throws.
 *
 * @param key - Public key object (`null` always fails).
 * @param message - Signed bytes.
 * @param signature - Untrusted signature bytes.
 * @param context - FIPS 204 context string (default empty); longer than 255 bytes fails.
 * @returns `true` only for a valid 3309-byte signature.
 */
export function nativeVerify(key: KeyObject | null, message: Uint8Array, signature: unknown, context?: Uint8Array): boolean {
  if (key === null || !(signature instanceof Uint8Array) || signature.length !== MLDSA65_SIGNATURE_BYTES) return false;
  if (context !== undefined && context.length > MLDSA_MAX_CONTEXT_BYTES) return false;
  try {
    if (context === undefined || context.length === 0) return verify(null, message, key, signature);
    const input: KeyWithContext = { key, context: Buffer.from(context) };
    return verify(null, message, input as unknown as KeyObject, signature);
  } catch {
    return false;
  }
}
