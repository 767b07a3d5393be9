/**
 * Hybrid signatures `hybrid-ed25519-mldsa65`: every signature is an Ed25519 signature
 * AND an ML-DSA-65 signature over the same domain-separated message, and a signature is
 * valid only when both halves verify. Forging needs breaking both schemes.
 *
 * Ed25519 always runs on `node:crypto`; ML-DSA-65 on `node:crypto` when the runtime has
 * it (Node ≥ 24), else on `@noble/post-quantum` (see `backend.ts`). Pure core: no I/O.
 * Format details: `docs/crypto.md`.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { b64urlEncode, concatBytes } from './encoding.js';
import {
  ED25519_PUBLIC_KEY_BYTES,
  ED25519_SEED_BYTES,
  ED25519_SIGNATURE_BYTES,
  ed25519PrivateKeyFromSeed,
  ed25519PublicKeyObject,
  ed25519RawPublicKey,
  ed25519Sign,
  ed25519Verify,
} from './ed25519.js';
import { MLDSA65_PUBLIC_KEY_BYTES, MLDSA65_SIGNATURE_BYTES } from './mldsa-native.js';
import { getMlDsaBackend, prepareMlDsaSigner, prepareMlDsaVerifier } from './backend.js';
import { decodeLen, hasExactKeys, isPlainObject } from './hybrid-json.js';
import type { HybridSignature } from './hybrid-json.js';

export { signatureFromJson, signatureToJson } from './hybrid-json.js';
export type { HybridSignature, HybridSignatureJson } from './hybrid-json.js';

export { detectMlDsaBackend, getMlDsaBackend, setMlDsaBackend, type MlDsaBackendName } from './backend.js';

/** Algorithm identifier carried in the JSON form of public keys. */
export const HYBRID_ALG = 'hybrid-ed25519-mldsa65';
/** Length of a {@link HybridSecretSeed}: 32-byte Ed25519 seed + 32-byte ML-DSA-65 seed. */
export const HYBRID_SECRET_SEED_BYTES = 64;

/** Public half: raw Ed25519 public key (32 bytes) and raw ML-DSA-65 public key (1952 bytes). */
export interface HybridPublicKey { ed25519: Uint8Array; mldsa65: Uint8Array }
/** JSON form (used in public_key_json, certificates, docs): base64url without padding. */
export interface HybridPublicKeyJson { alg: 'hybrid-ed25519-mldsa65'; ed25519: string; ml_dsa_65: string }
/** 64-byte secret: 32-byte Ed25519 seed || 32-byte ML-DSA-65 seed (FIPS 204 xi). This is what gets encrypted at rest. */
export type HybridSecretSeed = Uint8Array;

/** Opaque prepared signer: caches imported KeyObjects / expanded noble keys so repeated signing is cheap. */
export interface HybridSigner {
  /** The public key matching the signer's seed. */
  readonly publicKey: HybridPublicKey;
  /** Signs `message` under `domain` (see {@link domainSeparatedMessage}); hedged, so not deterministic. */
  sign(domain: string, message: Uint8Array): HybridSignature;
}

/** Opaque prepared verifier for one public key (imported KeyObjects cached). */
export interface HybridVerifier {
  /** The public key this verifier checks against. */
  readonly publicKey: HybridPublicKey;
  /** `true` only when both halves verify over the domain-separated message. Never throws for bad signatures. */
  verify(domain: string, message: Uint8Array, sig: HybridSignature): boolean;
}

const PREFIX = new TextEncoder().encode('agent-authz/v1/');
const DOMAIN_RE = /^[a-z0-9.-]{1,64}$/;

/**
 * The exact bytes both halves sign: utf8("agent-authz/v1/" + domain) || 0x00 || message.
 *
 * @param domain - Purpose label; must match `/^[a-z0-9.-]{1,64}$/`.
 * @param message - Application bytes.
 * @returns The domain-separated message.
 * @throws TypeError for an invalid domain or a non-`Uint8Array` message.
 */
export function domainSeparatedMessage(domain: string, message: Uint8Array): Uint8Array {
  if (typeof domain !== 'string' || !DOMAIN_RE.test(domain)) {
    throw new TypeError('hybrid: domain must match /^[a-z0-9.-]{1,64}$/');
  }
  if (!(message instanceof Uint8Array)) throw new TypeError('hybrid: message must be a Uint8Array');
  // The domain alphabet is ASCII, so its UTF-8 bytes are its char codes.
  const d = Uint8Array.from(domain, (c) => c.charCodeAt(0));
  return concatBytes(PREFIX, d, new Uint8Array([0]), message);
}

function checkSeed(secretSeed: HybridSecretSeed): void {
  if (!(secretSeed instanceof Uint8Array) || secretSeed.length !== HYBRID_SECRET_SEED_BYTES) {
    throw new TypeError('hybrid: secret seed must be 64 bytes');
  }
}

function checkPublicKey(k: HybridPublicKey): void {
  if (
    typeof k !== 'object' || k === null ||
    !(k.ed25519 instanceof Uint8Array) || k.ed25519.length !== ED25519_PUBLIC_KEY_BYTES ||
    !(k.mldsa65 instanceof Uint8Array) || k.mldsa65.length !== MLDSA65_PUBLIC_KEY_BYTES
  ) {
    throw new TypeError('hybrid: public key must be { ed25519: 32 bytes, mldsa65: 1952 bytes }');
  }
}

/**
 * Prepares a signer: imports both private keys once.
 *
 * @param secretSeed - 64-byte secret (Ed25519 seed || ML-DSA-65 seed).
 * @returns A signer bound to the current ML-DSA backend.
 * @throws TypeError if the seed is not 64 bytes.
 */
export function createSigner(secretSeed: HybridSecretSeed): HybridSigner {
  checkSeed(secretSeed);
  const edKey = ed25519PrivateKeyFromSeed(secretSeed.subarray(0, ED25519_SEED_BYTES));
  const ml = prepareMlDsaSigner(secretSeed.slice(ED25519_SEED_BYTES));
  const publicKey: HybridPublicKey = { ed25519: ed25519RawPublicKey(edKey), mldsa65: ml.publicKey };
  return {
    publicKey,
    sign(domain: string, message: Uint8Array): HybridSignature {
      const m = domainSeparatedMessage(domain, message);
      return { ed25519: ed25519Sign(edKey, m), mldsa65: ml.sign(m) };
    },
  };
}

/**
 * Generates a fresh key pair from 64 random bytes.
 *
 * @returns The public key and the 64-byte secret seed to store (encrypted).
 */
export function generateHybridKeyPair(): { publicKey: HybridPublicKey; secretSeed: HybridSecretSeed } {
  const secretSeed = new Uint8Array(randomBytes(HYBRID_SECRET_SEED_BYTES));
  return { publicKey: publicKeyFromSeed(secretSeed), secretSeed };
}

/**
 * Recomputes the public key from a secret seed (identical under both ML-DSA backends).
 *
 * @param secretSeed - 64-byte secret.
 * @returns The matching public key.
 * @throws TypeError if the seed is not 64 bytes.
 */
export function publicKeyFromSeed(secretSeed: HybridSecretSeed): HybridPublicKey {
  return createSigner(secretSeed).publicKey;
}

/**
 * Prepares a verifier: imports both public keys once.
 *
 * @param publicKey - Key to verify against (e.g. from {@link publicKeyFromJson}).
 * @returns A verifier bound to the current ML-DSA backend.
 * @throws TypeError if a half has the wrong type or length (programmer misuse).
 */
export function createVerifier(publicKey: HybridPublicKey): HybridVerifier {
  checkPublicKey(publicKey);
  const pk: HybridPublicKey = { ed25519: new Uint8Array(publicKey.ed25519), mldsa65: new Uint8Array(publicKey.mldsa65) };
  const edKey = ed25519PublicKeyObject(pk.ed25519);
  const ml = prepareMlDsaVerifier(pk.mldsa65);
  return {
    publicKey: pk,
    verify(domain: string, message: Uint8Array, sig: HybridSignature): boolean {
      const m = domainSeparatedMessage(domain, message);
      if (typeof sig !== 'object' || sig === null) return false;
      const { ed25519, mldsa65 } = sig;
      if (!(ed25519 instanceof Uint8Array) || ed25519.length !== ED25519_SIGNATURE_BYTES) return false;
      if (!(mldsa65 instanceof Uint8Array) || mldsa65.length !== MLDSA65_SIGNATURE_BYTES) return false;
      // Cheap half first; both must pass.
      return ed25519Verify(edKey, m, ed25519) && ml.verify(m, mldsa65);
    },
  };
}

/** Tiny bounded LRU on a Map (insertion order = recency). */
class Lru<V> {
  private readonly map = new Map<string, V>();
  private readonly cap: number;
  constructor(cap: number) {
    this.cap = cap;
  }
  get(k: string): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }
  set(k: string, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    if (this.map.size > this.cap) this.map.delete(this.map.keys().next().value as string);
  }
}

const verifierCache = new Lru<HybridVerifier>(256);
const signerCache = new Lru<HybridSigner>(16);
/** Per-process key so the signer cache is keyed by an HMAC of the seed, not the seed itself. */
const SIGNER_CACHE_KEY = randomBytes(32);

/**
 * One-shot signing. Prepared signers are cached (bounded, keyed by an HMAC of the seed
 * and the backend), so repeated calls with the same seed are cheap.
 *
 * @param secretSeed - 64-byte secret.
 * @param domain - Purpose label (see {@link domainSeparatedMessage}).
 * @param message - Bytes to sign.
 * @returns The hybrid signature.
 * @throws TypeError for a wrong seed length or an invalid domain.
 */
export function hybridSign(secretSeed: HybridSecretSeed, domain: string, message: Uint8Array): HybridSignature {
  checkSeed(secretSeed);
  const key = getMlDsaBackend() + ':' + createHmac('sha256', SIGNER_CACHE_KEY).update(secretSeed).digest('base64');
  let s = signerCache.get(key);
  if (s === undefined) {
    s = createSigner(secretSeed);
    signerCache.set(key, s);
  }
  return s.sign(domain, message);
}

/**
 * One-shot verification. Prepared verifiers are cached (bounded, keyed by the public key
 * bytes and the backend), so repeated calls with the same key are cheap.
 *
 * @param publicKey - Key to verify against.
 * @param domain - Purpose label the signature must have been made for.
 * @param message - Signed bytes.
 * @param sig - Untrusted signature; anything malformed gives `false`.
 * @returns `true` only when both halves verify.
 * @throws TypeError for a malformed public key or an invalid domain (programmer misuse).
 */
export function hybridVerify(publicKey: HybridPublicKey, domain: string, message: Uint8Array, sig: HybridSignature): boolean {
  checkPublicKey(publicKey);
  const key = getMlDsaBackend() + ':' + b64urlEncode(publicKey.ed25519) + '.' + b64urlEncode(publicKey.mldsa65);
  let v = verifierCache.get(key);
  if (v === undefined) {
    v = createVerifier(publicKey);
    verifierCache.set(key, v);
  }
  return v.verify(domain, message, sig);
}

/**
 * Serialises a public key to its JSON form.
 *
 * @param k - Public key.
 * @returns `{ alg, ed25519, ml_dsa_65 }` with base64url (unpadded) values.
 * @throws TypeError if a half has the wrong length.
 */
export function publicKeyToJson(k: HybridPublicKey): HybridPublicKeyJson {
  checkPublicKey(k);
  return { alg: HYBRID_ALG, ed25519: b64urlEncode(k.ed25519), ml_dsa_65: b64urlEncode(k.mldsa65) };
}

/**
 * Parses the JSON form of a public key.
 * Returns null for anything malformed (wrong alg, wrong lengths, bad base64url, extra keys). Never throws.
 *
 * @param j - Parsed JSON value (untrusted).
 * @returns The public key, or `null`.
 */
export function publicKeyFromJson(j: unknown): HybridPublicKey | null {
  if (!isPlainObject(j) || !hasExactKeys(j, ['alg', 'ed25519', 'ml_dsa_65']) || j.alg !== HYBRID_ALG) return null;
  const ed25519 = decodeLen(j.ed25519, ED25519_PUBLIC_KEY_BYTES);
  const mldsa65 = decodeLen(j.ml_dsa_65, MLDSA65_PUBLIC_KEY_BYTES);
  return ed25519 !== null && mldsa65 !== null ? { ed25519, mldsa65 } : null;
}
