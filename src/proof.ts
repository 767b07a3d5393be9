/**
 * Proof bundles: what present returns and verify checks.
 *
 * A bundle is a flat JSON object: the signed fields (challenge, audience
 * connection, agent, certificate id and hash, presentation time) plus `sig`,
 * a hybrid signature (domain `proof`) by the agent's key over the canonical
 * JSON of the signed fields. The certificate is referred to by id and
 * SHA-256, not embedded, so the base64 of a bundle stays near 6.4 KiB — small
 * enough for one `X-Service-Proof` header. docs/proofs.md documents it.
 */
import { canonicalBytes, tryCanonicalize } from './canonical.ts';
import { signatureFromJson, signatureToJson } from './crypto/hybrid.ts';
import type { HybridSignature, HybridSignatureJson, HybridSigner } from './crypto/hybrid.ts';

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

/** Builds and signs a bundle with the agent's signer. */
export function signProof(payload: ProofPayload, agentSigner: HybridSigner): ProofBundle {
  return { ...payload, sig: signatureToJson(agentSigner.sign(PROOF_DOMAIN, canonicalBytes(payload))) };
}

/** The bytes the agent signed for `payload` (domain separation is applied by the hybrid layer). */
export function proofSignedBytes(payload: ProofPayload): Uint8Array {
  return canonicalBytes(payload);
}

const KEYS = ['v', 'typ', 'challenge', 'aud', 'agent_id', 'cert_id', 'cert_sha256', 'presented_at', 'sig'];
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * Parses an untrusted bundle strictly: exact members, types, lengths, the
 * size limit, and a decodable signature. Returns null for anything else.
 * Signatures are not checked here.
 */
export function parseProofBundle(input: unknown): ParsedProof | null {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return null;
  const o = input as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length !== KEYS.length || !KEYS.every((k) => Object.prototype.hasOwnProperty.call(o, k))) return null;
  if (o.v !== 1 || o.typ !== PROOF_TYPE) return null;
  if (typeof o.challenge !== 'string' || !CHALLENGE_RE.test(o.challenge)) return null;
  if (typeof o.aud !== 'string' || !ID_RE.test(o.aud)) return null;
  if (typeof o.agent_id !== 'string' || !ID_RE.test(o.agent_id)) return null;
  if (typeof o.cert_id !== 'string' || !o.cert_id.startsWith('cert-') || !ID_RE.test(o.cert_id.slice(5))) return null;
  if (typeof o.cert_sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(o.cert_sha256)) return null;
  if (typeof o.presented_at !== 'string' || !ISO_RE.test(o.presented_at)) return null;
  const presentedAt = Date.parse(o.presented_at);
  if (!Number.isFinite(presentedAt) || new Date(presentedAt).toISOString() !== o.presented_at) return null;
  const text = tryCanonicalize(o);
  if (text === null || text.length > MAX_BUNDLE_BYTES) return null;
  const signature = signatureFromJson(o.sig);
  if (!signature) return null;
  const payload: ProofPayload = {
    v: 1, typ: PROOF_TYPE, challenge: o.challenge, aud: o.aud, agent_id: o.agent_id,
    cert_id: o.cert_id, cert_sha256: o.cert_sha256, presented_at: o.presented_at,
  };
  return { payload, signature, presentedAt };
}

/** Encodes a bundle for the `X-Service-Proof` header (standard base64 of its JSON). */
export function encodeProofHeader(bundle: ProofBundle): string {
  return Buffer.from(JSON.stringify(bundle), 'utf8').toString('base64');
}
