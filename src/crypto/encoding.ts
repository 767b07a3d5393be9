/**
 * Byte-encoding helpers shared by the crypto core: strict base64url (RFC 4648 §5,
 * no padding), SHA-256 hex digests and a constant-time string comparison.
 *
 * Pure functions; no I/O.
 */
import { createHash, randomBytes, createHmac, timingSafeEqual } from 'node:crypto';

const B64URL_RE = /^[A-Za-z0-9_-]*$/;

/**
 * Encodes bytes as base64url without padding.
 *
 * @param b - Bytes to encode.
 * @returns The unpadded base64url text.
 */
export function b64urlEncode(b: Uint8Array): string {
  if (!(b instanceof Uint8Array)) throw new TypeError('b64urlEncode: expected a Uint8Array');
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64url');
}

/**
 * Strictly decodes unpadded base64url text.
 *
 * Rejects (returns `null`) padding, characters outside the base64url alphabet,
 * impossible lengths (length ≡ 1 mod 4) and non-canonical encodings whose unused
 * trailing bits are not zero, so every byte string has exactly one accepted text.
 * Never throws.
 *
 * @param s - Text to decode (any value is accepted; non-strings give `null`).
 * @returns The decoded bytes as a fresh `Uint8Array`, or `null` when malformed.
 */
export function b64urlDecode(s: string): Uint8Array | null {
  if (typeof s !== 'string' || s.length % 4 === 1 || !B64URL_RE.test(s)) return null;
  const buf = Buffer.from(s, 'base64url');
  // Canonical check: re-encoding must give the same text (catches non-zero trailing bits).
  if (buf.toString('base64url') !== s) return null;
  return new Uint8Array(buf);
}

/**
 * SHA-256 digest as lowercase hex.
 *
 * @param data - Bytes, or a string hashed as its UTF-8 encoding.
 * @returns 64 lowercase hex characters.
 */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Per-process random key so the comparison digests reveal nothing reusable. */
const CMP_KEY = randomBytes(32);

/**
 * Compares two strings in constant time with respect to their contents and
 * without leaking their lengths through an early exit.
 *
 * Both inputs are HMAC-SHA256'd under a per-process random key and the fixed-size
 * digests are compared with `crypto.timingSafeEqual`; the lengths are compared too so
 * that a (practically impossible) digest collision cannot yield `true`.
 *
 * @param a - First string (e.g. a presented token).
 * @param b - Second string (e.g. the expected token).
 * @returns `true` exactly when `a === b`; `false` for non-strings.
 */
export function timingSafeEqualStr(a: string, b: string): boolean {
  if (typeof a !== 'string' || typeof b !== 'string') return false;
  const da = createHmac('sha256', CMP_KEY).update(a, 'utf8').digest();
  const db = createHmac('sha256', CMP_KEY).update(b, 'utf8').digest();
  const same = timingSafeEqual(da, db);
  return same && a.length === b.length;
}

/**
 * Copies a Buffer (or any Uint8Array view) into a fresh, plain `Uint8Array`.
 *
 * Internal helper: the crypto core hands out plain `Uint8Array`s so callers' deep
 * equality checks and serialisers treat all returned bytes alike.
 *
 * @param b - Bytes to copy.
 * @returns A new `Uint8Array` with the same contents.
 */
export function toPlainBytes(b: Uint8Array): Uint8Array {
  return new Uint8Array(b);
}

/**
 * Concatenates byte arrays.
 *
 * @param parts - Arrays to join, in order.
 * @returns A new `Uint8Array` holding all parts back to back.
 */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
