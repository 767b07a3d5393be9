/**
 * Byte-encoding helpers shared by the crypto core: strict base64url (RFC 4648 §5,
 * no padding), SHA-256 hex digests and a constant-time string comparison.
 *
 * Pure functions; no I/O.
 */
import { createHash, createHmac, createSecretKey, randomBytes, timingSafeEqual } from 'node:crypto';

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
  if (typeof s !== 'string') return null;
  // Node's decoder is lenient (both alphabets, padding, whitespace, non-zero trailing bits), so the
  // text must equal the (unpadded, canonical) base64url of what it decoded to: exactly the strict set
  // the doc comment describes, checked with one encode and a string compare instead of a regex scan.
  const bytes = Buffer.from(s, 'base64url');
  if (bytes.toString('base64url') !== s) return null;
  return new Uint8Array(bytes);
}

/** SHA-256 of no bytes (computed once). */
const EMPTY_SHA256 = createHash('sha256').digest('hex');

/**
 * SHA-256 digest as lowercase hex.
 *
 * @param data - Bytes, or a string hashed as its UTF-8 encoding.
 * @returns 64 lowercase hex characters.
 */
export function sha256Hex(data: Uint8Array | string): string {
  if (data.length === 0) return EMPTY_SHA256; // the gateway hashes the empty body of every GET, HEAD and DELETE
  return createHash('sha256').update(data).digest('hex');
}

/** Per-process random key so the comparison digests reveal nothing reusable (a KeyObject: cheaper per HMAC on Node 24). */
const CMP_KEY = createSecretKey(randomBytes(32));

/**
 * Compares two strings in constant time with respect to their contents.
 *
 * Equal-length ASCII strings (hex and base64 tokens, digests, codes: the usual case) are
 * compared byte for byte with `crypto.timingSafeEqual` directly; ASCII encodes each character
 * as one byte, so equal bytes mean equal strings. Anything else (different lengths, non-ASCII
 * text) is HMAC-SHA256'd under a per-process random key and the fixed-size digests are
 * compared, so the time does not depend on where the strings differ or on how long the
 * expected one is. The only thing the choice of path reveals is whether the lengths are
 * equal — public for the fixed-format tokens this is used on.
 *
 * @param a - First string (e.g. a presented token).
 * @param b - Second string (e.g. the expected token).
 * @returns `true` exactly when `a === b`; `false` for non-strings.
 */
export function timingSafeEqualStr(a: string, b: string): boolean {
  if (typeof a !== 'string' || typeof b !== 'string') return false;
  // UTF-8 byte length equals the UTF-16 length exactly when every character is ASCII.
  if (a.length === b.length && Buffer.byteLength(a, 'utf8') === a.length && Buffer.byteLength(b, 'utf8') === b.length) {
    return timingSafeEqual(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
  }
  // UTF-16 code units, not UTF-8: UTF-8 maps every lone surrogate to U+FFFD, which would make
  // different strings compare equal.
  const da = createHmac('sha256', CMP_KEY).update(a, 'utf16le').digest();
  const db = createHmac('sha256', CMP_KEY).update(b, 'utf16le').digest();
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
