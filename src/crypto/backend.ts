/**
 * ML-DSA-65 backend selection and dispatch.
 *
 * Two interchangeable implementations exist: `native` (`node:crypto`, Node ≥ 24) and
 * `noble` (`@noble/post-quantum`, any Node). The default is chosen by feature detection
 * — never by environment variables — and tests/benchmarks can force one with
 * {@link setMlDsaBackend}. Both produce the same public key from the same seed and
 * accept each other's signatures (checked by the cross-backend tests).
 */
import type { KeyObject } from 'node:crypto';
import {
  MLDSA65_PUBLIC_KEY_BYTES,
  nativeMlDsaAvailable,
  nativePrivateKeyFromSeed,
  nativePublicKeyObject,
  nativeRawPublicKey,
  nativeSign,
  nativeVerify,
} from './mldsa-native.js';
import { nobleKeygen, nobleSign, nobleVerify } from './mldsa-noble.js';

/** Name of an ML-DSA-65 implementation. */
export type MlDsaBackendName = 'native' | 'noble';

let selected: MlDsaBackendName | undefined;

/**
 * Detects the best available ML-DSA-65 backend.
 *
 * @returns `'native'` when `node:crypto` supports ML-DSA-65 (Node ≥ 24), else `'noble'`.
 */
export function detectMlDsaBackend(): MlDsaBackendName {
  return nativeMlDsaAvailable() ? 'native' : 'noble';
}

/**
 * The backend new signers and verifiers use: the one forced with {@link setMlDsaBackend},
 * or else the detected one.
 *
 * @returns The current backend name.
 */
export function getMlDsaBackend(): MlDsaBackendName {
  if (selected === undefined) selected = detectMlDsaBackend();
  return selected;
}

/**
 * For tests and benchmarks: forces a backend for signers/verifiers created afterwards
 * (already-prepared ones keep the backend they were built with).
 *
 * @param name - `'native'` or `'noble'`.
 * @throws TypeError for an unknown name, or `'native'` on a runtime without ML-DSA.
 */
export function setMlDsaBackend(name: MlDsaBackendName): void {
  if (name !== 'native' && name !== 'noble') throw new TypeError(`unknown ML-DSA backend: ${String(name)}`);
  if (name === 'native' && !nativeMlDsaAvailable()) {
    throw new TypeError('ML-DSA backend "native" is unavailable: node:crypto lacks ml-dsa-65 (needs Node >= 24)');
  }
  selected = name;
}

/** Internal: a prepared ML-DSA-65 signer (key material imported once). */
export interface MlDsaSigner {
  /** Backend that built it. */
  readonly backend: MlDsaBackendName;
  /** Raw 1952-byte public key. */
  readonly publicKey: Uint8Array;
  /** Hedged signature over `message` with the empty context. */
  sign(message: Uint8Array): Uint8Array;
}

/** Internal: a prepared ML-DSA-65 verifier for one public key. */
export interface MlDsaVerifier {
  /** Backend that built it. */
  readonly backend: MlDsaBackendName;
  /** Verifies with the empty context. Never throws. */
  verify(message: Uint8Array, signature: unknown): boolean;
}

/**
 * Internal: imports a 32-byte ML-DSA-65 seed once for repeated signing.
 *
 * @param seed - 32-byte seed ξ.
 * @param backend - Backend to use (default: {@link getMlDsaBackend}).
 * @returns The prepared signer.
 * @throws TypeError for a wrong seed length or an unavailable backend.
 */
export function prepareMlDsaSigner(seed: Uint8Array, backend: MlDsaBackendName = getMlDsaBackend()): MlDsaSigner {
  if (backend === 'native') {
    if (!nativeMlDsaAvailable()) throw new TypeError('ML-DSA backend "native" is unavailable');
    const key: KeyObject = nativePrivateKeyFromSeed(seed);
    const publicKey = nativeRawPublicKey(key);
    return { backend, publicKey, sign: (m) => nativeSign(key, m) };
  }
  const { publicKey, secretKey } = nobleKeygen(seed);
  return { backend, publicKey, sign: (m) => nobleSign(secretKey, m) };
}

/**
 * Internal: prepares verification under one raw public key.
 *
 * @param publicKey - Raw 1952-byte public key.
 * @param backend - Backend to use (default: {@link getMlDsaBackend}).
 * @returns The prepared verifier.
 * @throws TypeError for a wrong key length or an unavailable backend.
 */
export function prepareMlDsaVerifier(publicKey: Uint8Array, backend: MlDsaBackendName = getMlDsaBackend()): MlDsaVerifier {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== MLDSA65_PUBLIC_KEY_BYTES) {
    throw new TypeError('ml-dsa-65: public key must be 1952 bytes');
  }
  if (backend === 'native') {
    if (!nativeMlDsaAvailable()) throw new TypeError('ML-DSA backend "native" is unavailable');
    const key = nativePublicKeyObject(publicKey);
    return { backend, verify: (m, s) => nativeVerify(key, m, s) };
  }
  const pk = new Uint8Array(publicKey);
  return { backend, verify: (m, s) => nobleVerify(pk, m, s) };
}

/**
 * Internal, for known-answer tests and cross-backend checks: the public key a seed gives.
 *
 * @param seed - 32-byte seed ξ.
 * @param backend - Backend to use.
 * @returns Raw 1952-byte public key.
 */
export function mldsaPublicKeyFromSeed(seed: Uint8Array, backend: MlDsaBackendName): Uint8Array {
  return prepareMlDsaSigner(seed, backend).publicKey;
}

/**
 * Internal, for known-answer tests: raw ML-DSA-65 signing (no domain separation)
 * with an optional context. Hedged (randomised) on both backends.
 *
 * @param seed - 32-byte seed ξ.
 * @param message - Bytes to sign.
 * @param backend - Backend to use.
 * @param context - FIPS 204 context string (default empty).
 * @returns The 3309-byte signature.
 */
export function mldsaSignRaw(seed: Uint8Array, message: Uint8Array, backend: MlDsaBackendName, context?: Uint8Array): Uint8Array {
  if (backend === 'native') return nativeSign(nativePrivateKeyFromSeed(seed), message, context);
  return nobleSign(nobleKeygen(seed).secretKey, message, context === undefined ? {} : { context });
}

/**
 * Internal, for known-answer tests: raw ML-DSA-65 verification (no domain separation)
 * with an optional context. Any malformed input (key/signature length, context > 255
 * bytes) gives `false`. Never throws.
 *
 * @param backend - Backend to use (`'native'` on a runtime without it gives `false`).
 * @param publicKey - Raw public key bytes.
 * @param message - Signed bytes.
 * @param signature - Signature bytes.
 * @param context - FIPS 204 context string (default empty).
 * @returns Whether the signature is valid.
 */
export function mldsaVerifyRaw(
  backend: MlDsaBackendName,
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
  context?: Uint8Array,
): boolean {
  if (publicKey.length !== MLDSA65_PUBLIC_KEY_BYTES) return false;
  if (backend === 'native') {
    if (!nativeMlDsaAvailable()) return false;
    return nativeVerify(nativePublicKeyObject(publicKey), message, signature, context);
  }
  return nobleVerify(publicKey, message, signature, context);
}
