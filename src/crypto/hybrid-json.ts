/**
 * The JSON form of hybrid signatures, apart from the signing code: parsing and
 * serialising `{ ed25519, ml_dsa_65 }` needs only base64url and the two lengths,
 * so the proof parser (and with it the gateway plugin) loads no ML-DSA backend
 * and no post-quantum library. `hybrid.ts` re-exports these.
 */
import { b64urlDecode, b64urlEncode } from './encoding.js';
import { ED25519_SIGNATURE_BYTES } from './ed25519.js';
import { MLDSA65_SIGNATURE_BYTES } from './mldsa-native.js';

/** Signature: raw Ed25519 signature (64 bytes) and ML-DSA-65 signature (3309 bytes). */
export interface HybridSignature { ed25519: Uint8Array; mldsa65: Uint8Array }
/** JSON form of a {@link HybridSignature}: base64url without padding. */
export interface HybridSignatureJson { ed25519: string; ml_dsa_65: string }

/** True for a plain (non-null, non-array) object. */
export function isPlainObject(j: unknown): j is Record<string, unknown> {
  if (typeof j !== 'object' || j === null || Array.isArray(j)) return false;
  const proto: unknown = Object.getPrototypeOf(j);
  return proto === Object.prototype || proto === null;
}

/** True when `o` has exactly `keys` as own keys. */
export function hasExactKeys(o: Record<string, unknown>, keys: readonly string[]): boolean {
  const own = Object.keys(o);
  return own.length === keys.length && keys.every((k) => Object.prototype.hasOwnProperty.call(o, k));
}

/** Decodes canonical base64url of exactly `len` bytes, else `null`. */
export function decodeLen(v: unknown, len: number): Uint8Array | null {
  if (typeof v !== 'string') return null;
  const b = b64urlDecode(v);
  return b !== null && b.length === len ? b : null;
}

/**
 * Serialises a signature to its JSON form.
 *
 * @param s - Signature.
 * @returns `{ ed25519, ml_dsa_65 }` with base64url (unpadded) values.
 * @throws TypeError if a half is not a `Uint8Array`.
 */
export function signatureToJson(s: HybridSignature): HybridSignatureJson {
  if (typeof s !== 'object' || s === null || !(s.ed25519 instanceof Uint8Array) || !(s.mldsa65 instanceof Uint8Array)) {
    throw new TypeError('hybrid: signature must be { ed25519: Uint8Array, mldsa65: Uint8Array }');
  }
  return { ed25519: b64urlEncode(s.ed25519), ml_dsa_65: b64urlEncode(s.mldsa65) };
}

/**
 * Parses the JSON form of a signature: exactly `{ ed25519, ml_dsa_65 }`, canonical
 * base64url, 64 and 3309 bytes. Never throws.
 *
 * @param j - Parsed JSON value (untrusted).
 * @returns The signature, or `null` when malformed.
 */
export function signatureFromJson(j: unknown): HybridSignature | null {
  if (!isPlainObject(j) || !hasExactKeys(j, ['ed25519', 'ml_dsa_65'])) return null;
  const ed25519 = decodeLen(j.ed25519, ED25519_SIGNATURE_BYTES);
  const mldsa65 = decodeLen(j.ml_dsa_65, MLDSA65_SIGNATURE_BYTES);
  return ed25519 !== null && mldsa65 !== null ? { ed25519, mldsa65 } : null;
}
