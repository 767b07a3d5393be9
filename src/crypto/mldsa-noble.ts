/**
 * ML-DSA-65 (FIPS 204) in pure JavaScript via `@noble/post-quantum` (0.7.x API:
 * `keygen(seed)`, `sign(msg, secretKey, opts)`, `verify(sig, msg, publicKey, opts)`).
 *
 * Used when `node:crypto` lacks ML-DSA (Node < 24) and in tests as the reference
 * for cross-backend checks. Internal to `src/crypto/`; the public API is in `hybrid.ts`.
 */
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js';
import { MLDSA65_PUBLIC_KEY_BYTES, MLDSA65_SEED_BYTES, MLDSA65_SIGNATURE_BYTES, MLDSA_MAX_CONTEXT_BYTES } from './mldsa-native.js';

/** Expanded noble key pair: the 1952-byte public key and the 4032-byte expanded secret key. */
export interface NobleKeyPair {
  /** Raw public key (1952 bytes). */
  publicKey: Uint8Array;
  /** Expanded secret key (4032 bytes); never leaves `src/crypto/`. */
  secretKey: Uint8Array;
}

/** Options for {@link nobleSign}. */
export interface NobleSignOptions {
  /** FIPS 204 context string (default empty). */
  context?: Uint8Array;
  /**
   * The 32-byte `rnd` of FIPS 204 Algorithm 2; `false` for deterministic signing
   * (rnd = 0³²); omitted for hedged signing with fresh randomness (the default).
   */
  rnd?: Uint8Array | false;
}

/**
 * Deterministic ML-DSA-65 key generation from a 32-byte seed ξ (FIPS 204 ML-DSA.KeyGen_internal).
 *
 * @param seed - 32-byte seed.
 * @returns The key pair.
 * @throws TypeError if the seed is not 32 bytes.
 */
export function nobleKeygen(seed: Uint8Array): NobleKeyPair {
  if (!(seed instanceof Uint8Array) || seed.length !== MLDSA65_SEED_BYTES) {
    throw new TypeError('ml-dsa-65: seed must be 32 bytes');
  }
  const { publicKey, secretKey } = ml_dsa65.keygen(seed);
  return { publicKey, secretKey };
}

/**
 * Signs with ML-DSA-65.
 *
 * @param secretKey - Expanded secret key from {@link nobleKeygen}.
 * @param message - Bytes to sign.
 * @param opts - Context and randomness options.
 * @returns The 3309-byte signature.
 * @throws TypeError for a context longer than 255 bytes.
 */
export function nobleSign(secretKey: Uint8Array, message: Uint8Array, opts: NobleSignOptions = {}): Uint8Array {
  if (opts.context !== undefined && opts.context.length > MLDSA_MAX_CONTEXT_BYTES) {
    throw new TypeError('ml-dsa-65: context must be at most 255 bytes');
  }
  const o: { context?: Uint8Array; extraEntropy?: Uint8Array | false } = {};
  if (opts.context !== undefined) o.context = opts.context;
  if (opts.rnd !== undefined) o.extraEntropy = opts.rnd;
  return ml_dsa65.sign(message, secretKey, o);
}

/**
 * Verifies an ML-DSA-65 signature. Wrong lengths, over-long contexts and malformed
 * encodings give `false`. Never throws.
 *
 * @param publicKey - Raw public key (1952 bytes expected).
 * @param message - Signed bytes.
 * @param signature - Untrusted signature bytes.
 * @param context - FIPS 204 context string (default empty).
 * @returns Whether the signature is valid.
 */
export function nobleVerify(publicKey: Uint8Array, message: Uint8Array, signature: unknown, context?: Uint8Array): boolean {
  if (!(signature instanceof Uint8Array) || signature.length !== MLDSA65_SIGNATURE_BYTES) return false;
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== MLDSA65_PUBLIC_KEY_BYTES) return false;
  if (context !== undefined && context.length > MLDSA_MAX_CONTEXT_BYTES) return false;
  try {
    return ml_dsa65.verify(signature, message, publicKey, context === undefined ? {} : { context });
  } catch {
    return false;
  }
}
