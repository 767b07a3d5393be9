/**
 * Sealing of secrets at rest (e.g. hybrid secret seeds) with AES-256-GCM, and HKDF-SHA256
 * derivation of purpose-bound subkeys from the master key.
 *
 * Sealed format: `0x01 (version) || nonce (12 random bytes) || ciphertext || tag (16 bytes)`,
 * with the UTF-8 record id as GCM associated data, so a sealed value moved to another
 * record fails to open. Pure core: no I/O. Details: `docs/crypto.md`.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { concatBytes } from './encoding.js';

/** Version byte of the current sealed format. */
export const SEAL_VERSION = 0x01;
/** AES-256 key length in bytes. */
export const SEAL_KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Bytes a sealed value adds to its plaintext: version + nonce + tag. */
export const SEAL_OVERHEAD_BYTES = 1 + NONCE_BYTES + TAG_BYTES;
const PURPOSE_RE = /^[a-z0-9.-]{1,64}$/;

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.length !== SEAL_KEY_BYTES) {
    throw new TypeError('seal: key must be 32 bytes');
  }
}

function checkAad(aad: string): void {
  if (typeof aad !== 'string') throw new TypeError('seal: aad must be a string');
}

/**
 * Seals plaintext under a 32-byte key, with `aad` (the record id) as associated data.
 * Output: version byte 0x01 || 12-byte random nonce || ciphertext || 16-byte tag.
 *
 * @param key - 32-byte AES-256 key (e.g. `deriveKey(master, 'seal')`).
 * @param plaintext - Secret bytes.
 * @param aad - Record id bound to the sealed value (authenticated, not stored).
 * @returns The sealed bytes (plaintext length + 29).
 * @throws TypeError for a wrong key length or non-byte/non-string arguments.
 */
export function seal(key: Uint8Array, plaintext: Uint8Array, aad: string): Uint8Array {
  checkKey(key);
  checkAad(aad);
  if (!(plaintext instanceof Uint8Array)) throw new TypeError('seal: plaintext must be a Uint8Array');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = cipher.update(plaintext);
  const fin = cipher.final();
  return concatBytes(new Uint8Array([SEAL_VERSION]), nonce, ct, fin, cipher.getAuthTag());
}

/**
 * Opens a sealed value; throws a TypeError-free `Error('seal: authentication failed')` if the key, aad or bytes are wrong.
 *
 * @param key - The 32-byte key it was sealed under.
 * @param sealed - Output of {@link seal} (untrusted bytes).
 * @param aad - The same record id given to {@link seal}.
 * @returns The plaintext.
 * @throws Error('seal: authentication failed') for a wrong key value, wrong aad, unknown
 *   version, truncated or modified bytes; TypeError only for a wrong key length.
 */
export function open(key: Uint8Array, sealed: Uint8Array, aad: string): Uint8Array {
  checkKey(key);
  checkAad(aad);
  if (!(sealed instanceof Uint8Array) || sealed.length < SEAL_OVERHEAD_BYTES || sealed[0] !== SEAL_VERSION) {
    throw new Error('seal: authentication failed');
  }
  const nonce = sealed.subarray(1, 1 + NONCE_BYTES);
  const ct = sealed.subarray(1 + NONCE_BYTES, sealed.length - TAG_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(tag);
    const pt = decipher.update(ct);
    const fin = decipher.final();
    return concatBytes(pt, fin);
  } catch {
    throw new Error('seal: authentication failed');
  }
}

/**
 * HKDF-SHA256 subkey derivation from the master key for a named purpose (e.g. 'csrf', 'seal').
 *
 * `HKDF(IKM = masterKey, salt = "" (HashLen zero bytes), info = "agent-authz/v1/key/" + purpose, L = length)`.
 * Different purposes give independent keys; the same inputs always give the same key.
 *
 * @param masterKey - Master key, at least 32 bytes.
 * @param purpose - Purpose label matching `/^[a-z0-9.-]{1,64}$/`.
 * @param length - Output length in bytes, 16..64 (default 32).
 * @returns The derived key.
 * @throws TypeError for a short master key, an invalid purpose or length.
 */
export function deriveKey(masterKey: Uint8Array, purpose: string, length = 32): Uint8Array {
  if (!(masterKey instanceof Uint8Array) || masterKey.length < 32) {
    throw new TypeError('deriveKey: master key must be at least 32 bytes');
  }
  if (typeof purpose !== 'string' || !PURPOSE_RE.test(purpose)) {
    throw new TypeError('deriveKey: purpose must match /^[a-z0-9.-]{1,64}$/');
  }
  if (!Number.isInteger(length) || length < 16 || length > 64) {
    throw new TypeError('deriveKey: length must be an integer from 16 to 64');
  }
  const info = Buffer.from('agent-authz/v1/key/' + purpose, 'utf8');
  return new Uint8Array(hkdfSync('sha256', masterKey, new Uint8Array(0), info, length));
}
