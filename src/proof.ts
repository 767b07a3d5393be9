/**
 * Proof bundles: what present returns and verify checks.
 *
 * A bundle is a flat JSON object: the signed fields (challenge, audience
 * connection, agent, certificate id and hash, presentation time) plus `sig`,
 * a hybrid signature (domain `proof`) by the agent's key over the canonical
 * JSON of the signed fields. The certificate is referred to by id and
 * SHA-256, not embedded, so the base64 of a bundle stays near 6.4 KiB — small
 * enough for one `X-Service-Proof` header. docs/proofs.md documents it.
 *
 * An operation-bound bundle also signs `operation` (src/operation.ts): the
 * method, path or tool, body hash and optionally the scope of the one request
 * it may authorize. Bundles without it keep their exact format.
 */
import { canonicalBytes } from './canonical.js';
import { sha256Hex } from './crypto/encoding.js';
import { signatureFromJson, signatureToJson } from './crypto/hybrid-json.js';
import type { HybridSignature, HybridSignatureJson } from './crypto/hybrid-json.js';
import { parseOperation } from './operation.js';
import type { BoundOperation } from './operation.js';

/** Signature domain of proofs. */
export const PROOF_DOMAIN = 'proof';
/** `typ` of a proof bundle. */
export const PROOF_TYPE = 'agent-authz.proof';
/** Largest accepted bundle (canonical JSON bytes). */
export const MAX_BUNDLE_BYTES = 8192;
/** Largest accepted challenge string. */
export const MAX_CHALLENGE_LENGTH = 128;

/** The signed fields of a bundle. */
export interface ProofPayload {
  v: 1;
  typ: typeof PROOF_TYPE;
  challenge: string;
  /** The audience: the connection whose API key issued the challenge. */
  aud: string;
  agent_id: string;
  cert_id: string;
  cert_sha256: string;
  /** ISO 8601 UTC with milliseconds. */
  presented_at: string;
  /** The operation the proof is bound to (operation-bound proofs); absent in an unbound proof. */
  operation?: BoundOperation;
}

/** A proof bundle (the `proof_bundle` of present and verify). */
export interface ProofBundle extends ProofPayload {
  sig: HybridSignatureJson;
}

/** A parsed, structurally valid bundle. */
export interface ParsedProof {
  payload: ProofPayload;
  signature: HybridSignature;
  presentedAt: number;
}

/**
 * What {@link signProof} needs of a signer: a `HybridSigner` (src/crypto/hybrid.ts) is one. Written here
 * structurally so this module's import graph stays free of the post-quantum backend: the gateway, which
 * only parses bundles, loads this file (issue 30).
 */
export interface ProofSigner {
  /** Signs `message` under `domain` (domain-separated by the hybrid layer). */
  sign(domain: string, message: Uint8Array): HybridSignature;
}

/** Builds and signs a bundle with the agent's signer. */
export function signProof(payload: ProofPayload, agentSigner: ProofSigner): ProofBundle {
  return { ...payload, sig: signatureToJson(agentSigner.sign(PROOF_DOMAIN, proofSignedBytes(payload))) };
}

/** Printable ASCII other than `"` and `\\`: text that JSON.stringify only wraps in quotes. */
const PLAIN_JSON_TEXT = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * The bytes the agent signed for `payload` (domain separation is applied by the hybrid layer):
 * its canonical JSON. For the payloads present builds and parseProofBundle accepts (every member
 * plain ASCII), the text is put together directly, members in canonical (sorted) order; anything
 * else goes through the general canonicalizer. Both give the same bytes.
 */
export function proofSignedBytes(payload: ProofPayload): Uint8Array {
  const p = payload;
  if (p.v === 1 && p.typ === PROOF_TYPE && Object.keys(p).length === 8
    && typeof p.agent_id === 'string' && typeof p.aud === 'string' && typeof p.cert_id === 'string' && typeof p.cert_sha256 === 'string'
    && typeof p.challenge === 'string' && typeof p.presented_at === 'string'
    && PLAIN_JSON_TEXT.test(p.agent_id + p.aud + p.cert_id + p.cert_sha256 + p.challenge + p.presented_at)) {
    return new TextEncoder().encode(`{"agent_id":"${p.agent_id}","aud":"${p.aud}","cert_id":"${p.cert_id}","cert_sha256":"${p.cert_sha256}",`
      + `"challenge":"${p.challenge}","presented_at":"${p.presented_at}","typ":"${PROOF_TYPE}","v":1}`);
  }
  return canonicalBytes(payload);
}

const KEYS = ['v', 'typ', 'challenge', 'aud', 'agent_id', 'cert_id', 'cert_sha256', 'presented_at', 'sig'];
const SIG_KEYS = ['ed25519', 'ml_dsa_65'];
/** Canonical JSON bytes of an object with these member names, without its values: braces, commas, quoted names and colons. */
const frameBytes = (keys: readonly string[]): number => 2 + (keys.length - 1) + keys.reduce((n, k) => n + k.length + 3, 0);
const BUNDLE_FRAME_BYTES = frameBytes(KEYS);
const SIG_FRAME_BYTES = frameBytes(SIG_KEYS);
/** `,"operation":` before the operation's own canonical JSON. */
const OPERATION_FRAME_BYTES = 1 + '"operation":'.length;
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{16,128}$/;

/** True when `s` has the shape of a challenge: base64url, 16–128 characters. */
export function isChallengeShape(s: string): boolean {
  return CHALLENGE_RE.test(s);
}

/** The store id of a challenge: the SHA-256 (hex) of its value, which is never stored itself. */
export function challengeId(challenge: string): string {
  return sha256Hex(challenge);
}

/**
 * Size of the canonical JSON of a bundle whose members passed the format checks, computed
 * without serializing it. Every string member but the signature halves is checked to be ASCII
 * that JSON does not escape, so it takes its length + 2 quotes; for the signature halves this
 * is a lower bound (exact for the base64url that `signatureFromJson` accepts next).
 */
function canonicalBundleBytes(o: Record<string, unknown>, sig: { ed25519: string; ml_dsa_65: string }): number {
  const str = (v: unknown): number => (v as string).length + 2;
  return BUNDLE_FRAME_BYTES + 1 /* v: 1 */ + str(o.typ) + str(o.challenge) + str(o.aud) + str(o.agent_id) + str(o.cert_id)
    + str(o.cert_sha256) + str(o.presented_at) + SIG_FRAME_BYTES + str(sig.ed25519) + str(sig.ml_dsa_65);
}

/**
 * Parses an untrusted bundle strictly: exact members, types, lengths, the
 * size limit, and a decodable signature. Returns null for anything else.
 * Signatures are not checked here.
 */
export function parseProofBundle(input: unknown): ParsedProof | null {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return null;
  const proto: unknown = Object.getPrototypeOf(input);
  if (proto !== Object.prototype && proto !== null) return null;
  const o = input as Record<string, unknown>;
  const keys = Object.keys(o);
  const bound = Object.prototype.hasOwnProperty.call(o, 'operation');
  if (keys.length !== KEYS.length + (bound ? 1 : 0) || !KEYS.every((k) => Object.prototype.hasOwnProperty.call(o, k))) return null;
  let operation: BoundOperation | undefined;
  if (bound) {
    const op = parseOperation(o.operation);
    if (!op.ok) return null;
    operation = op.value;
  }
  if (o.v !== 1 || o.typ !== PROOF_TYPE) return null;
  if (typeof o.challenge !== 'string' || !isChallengeShape(o.challenge)) return null;
  if (typeof o.aud !== 'string' || !ID_RE.test(o.aud)) return null;
  if (typeof o.agent_id !== 'string' || !ID_RE.test(o.agent_id)) return null;
  if (typeof o.cert_id !== 'string' || !o.cert_id.startsWith('cert-') || !ID_RE.test(o.cert_id.slice(5))) return null;
  if (typeof o.cert_sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(o.cert_sha256)) return null;
  if (typeof o.presented_at !== 'string' || !ISO_RE.test(o.presented_at)) return null;
  const presentedAt = Date.parse(o.presented_at);
  if (!Number.isFinite(presentedAt) || new Date(presentedAt).toISOString() !== o.presented_at) return null;
  const sig = o.sig as { ed25519?: unknown; ml_dsa_65?: unknown } | null;
  if (typeof sig !== 'object' || sig === null || typeof sig.ed25519 !== 'string' || typeof sig.ml_dsa_65 !== 'string') return null;
  // The size limit (canonical JSON bytes), from the member lengths: no serialization.
  const operationBytes = operation === undefined ? 0 : OPERATION_FRAME_BYTES + canonicalBytes(operation).length;
  if (canonicalBundleBytes(o, sig as { ed25519: string; ml_dsa_65: string }) + operationBytes > MAX_BUNDLE_BYTES) return null;
  const signature = signatureFromJson(sig);
  if (!signature) return null;
  const payload: ProofPayload = {
    v: 1, typ: PROOF_TYPE, challenge: o.challenge, aud: o.aud, agent_id: o.agent_id,
    cert_id: o.cert_id, cert_sha256: o.cert_sha256, presented_at: o.presented_at,
  };
  if (operation !== undefined) payload.operation = operation;
  return { payload, signature, presentedAt };
}

/** Encodes a bundle for the `X-Service-Proof` header (standard base64 of its JSON). */
export function encodeProofHeader(bundle: ProofBundle): string {
  return Buffer.from(JSON.stringify(bundle), 'utf8').toString('base64');
}
