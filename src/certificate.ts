/**
 * Delegation certificates: the signed statement "account holder X delegates
 * scopes S, under constraints C, to the agent with public key K on
 * connection N, from issued_at until expires_at".
 *
 * Encoding: `{payload, signature}` where `signature` is a hybrid signature
 * (domain `delegation-cert`) over the canonical JSON of `payload`
 * (src/canonical.ts). {@link verifyCertificate} checks one offline with only
 * the issuer's root public key. docs/certificates.md documents the format.
 */
import { canonicalBytes, canonicalize, tryCanonicalize } from './canonical.js';
import { sha256Hex } from './crypto/encoding.js';
import {
  createVerifier, publicKeyFromJson, signatureFromJson, signatureToJson,
} from './crypto/hybrid.js';
import type { HybridPublicKey, HybridPublicKeyJson, HybridSignatureJson, HybridSigner, HybridVerifier } from './crypto/hybrid.js';
import type { Constraints } from './constraints.js';
import { validateConstraints } from './constraints.js';
import { isValidScope } from './scopes.js';

/** Signature domain of certificates. */
export const CERT_DOMAIN = 'delegation-cert';
/** `typ` of a certificate payload. */
export const CERT_TYPE = 'agent-authz.delegation-certificate';

/** The deepest sub-delegation chain any certificate may name (the hard cap of `SIDECAR_MAX_DELEGATION_DEPTH`). */
export const MAX_DELEGATION_DEPTH = 8;

/** The parent a sub-delegated certificate names (docs/certificates.md, "Sub-delegation"). */
export interface ParentRef {
  /** The parent certificate's id. */
  cert_id: string;
  /** SHA-256 (hex) of the parent certificate's canonical JSON. */
  cert_sha256: string;
  /** This certificate's depth in its chain: 1 under a certificate the account holder signed. */
  depth: number;
}

/** The signed content of a certificate. */
export interface CertificatePayload {
  v: 1;
  typ: typeof CERT_TYPE;
  cert_id: string;
  request_id: string;
  /**
   * Who signed it: the account holder's root identity, or for a sub-delegated certificate
   * (`parent` present) the delegating agent (`agent_id`) with its custodial key.
   */
  issuer: { account_id: string; agent_id?: string; public_key: HybridPublicKeyJson };
  subject: { agent_id: string; public_key: HybridPublicKeyJson };
  connection_id: string;
  /** Granted scopes, sorted. */
  scopes: string[];
  constraints: Constraints | null;
  /** ISO 8601 UTC with milliseconds. */
  issued_at: string;
  expires_at: string | null;
  /** The right to delegate further: how many levels below this certificate a chain may go (absent: none). */
  max_delegation_depth?: number;
  /** A sub-delegated certificate's parent (absent: signed by the account holder). */
  parent?: ParentRef;
}

/** A signed delegation certificate (the `cert_json` of the API and webhooks). */
export interface DelegationCertificate {
  payload: CertificatePayload;
  signature: HybridSignatureJson;
}

/** Signs a certificate payload with the issuer's root signer. */
export function signCertificate(payload: CertificatePayload, rootSigner: HybridSigner): DelegationCertificate {
  const sig = rootSigner.sign(CERT_DOMAIN, canonicalBytes(payload));
  return { payload, signature: signatureToJson(sig) };
}

/** SHA-256 (hex) of the certificate's canonical JSON: its identity in proofs and caches. */
export function certificateHash(cert: DelegationCertificate): string {
  return sha256Hex(canonicalize(cert));
}

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function exactKeys(o: unknown, keys: string[]): o is Record<string, unknown> {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return false;
  const k = Object.keys(o);
  return k.length === keys.length && keys.every((x) => Object.prototype.hasOwnProperty.call(o, x));
}

const SHA256_RE = /^[0-9a-f]{64}$/;
const isDepth = (n: unknown): boolean => Number.isSafeInteger(n) && (n as number) >= 1
  && (n as number) <= MAX_DELEGATION_DEPTH;
const CERT_ID_OK = (id: unknown): boolean => typeof id === 'string' && id.startsWith('cert-') && UUID_RE.test(id.slice(5));

/** The optional members (`max_delegation_depth`, `parent`, `issuer.agent_id`) of a payload; the reason, or null. */
function chainMembersError(p: Record<string, unknown>): string | null {
  if ('max_delegation_depth' in p && !isDepth(p.max_delegation_depth)) return 'max_delegation_depth';
  if (!('parent' in p)) return null;
  const parent = p.parent;
  if (!exactKeys(parent, ['cert_id', 'cert_sha256', 'depth']) || !CERT_ID_OK(parent.cert_id)
    || typeof parent.cert_sha256 !== 'string' || !SHA256_RE.test(parent.cert_sha256) || !isDepth(parent.depth)) {
    return 'parent';
  }
  if (parent.cert_id === p.cert_id) return 'parent';
  return null;
}

/** Strict structural check of an untrusted certificate; returns the reason it is malformed, or null. */
export function certificateShapeError(cert: unknown): string | null {
  if (!exactKeys(cert, ['payload', 'signature'])) return 'certificate must be {payload, signature}';
  const p = cert.payload;
  const optional = ['max_delegation_depth', 'parent'].filter((k) => p && typeof p === 'object' && k in p);
  if (!exactKeys(p, ['v', 'typ', 'cert_id', 'request_id', 'issuer', 'subject', 'connection_id', 'scopes', 'constraints',
    'issued_at', 'expires_at', ...optional])) return 'payload members';
  if (p.v !== 1 || p.typ !== CERT_TYPE) return 'version or type';
  if (!CERT_ID_OK(p.cert_id)) return 'cert_id';
  const chainError = chainMembersError(p);
  if (chainError !== null) return chainError;
  const issuerKeys = 'parent' in p ? ['account_id', 'agent_id', 'public_key'] : ['account_id', 'public_key'];
  if (typeof p.request_id !== 'string' || !UUID_RE.test(p.request_id)) return 'request_id';
  if (typeof p.connection_id !== 'string' || !UUID_RE.test(p.connection_id)) return 'connection_id';
  if (!exactKeys(p.issuer, issuerKeys) || typeof p.issuer.account_id !== 'string'
    || ('agent_id' in p.issuer && typeof p.issuer.agent_id !== 'string')
    || !publicKeyFromJson(p.issuer.public_key)) return 'issuer';
  if (!exactKeys(p.subject, ['agent_id', 'public_key']) || typeof p.subject.agent_id !== 'string' || !publicKeyFromJson(p.subject.public_key)) return 'subject';
  if (!Array.isArray(p.scopes) || p.scopes.length === 0 || !p.scopes.every(isValidScope)) return 'scopes';
  if (p.constraints !== null && validateConstraints(p.constraints) !== null) return 'constraints';
  if (typeof p.issued_at !== 'string' || !ISO_RE.test(p.issued_at)) return 'issued_at';
  if (p.expires_at !== null && (typeof p.expires_at !== 'string' || !ISO_RE.test(p.expires_at))) return 'expires_at';
  if (!signatureFromJson(cert.signature)) return 'signature';
  if (tryCanonicalize(cert) === null) return 'not canonically encodable';
  return null;
}

/** Result of {@link verifyCertificate}. */
export type CertificateCheck =
  | { ok: true; cert: DelegationCertificate; expired: boolean }
  | { ok: false; reason: 'malformed' | 'wrong_issuer' | 'bad_signature' };

function sameKey(a: HybridPublicKey, b: HybridPublicKey): boolean {
  return Buffer.from(a.ed25519).equals(Buffer.from(b.ed25519)) && Buffer.from(a.mldsa65).equals(Buffer.from(b.mldsa65));
}

/**
 * Verifies a certificate offline with only the issuer's root public key:
 * strict shape, the embedded issuer key equals `rootPublicKey`, and both
 * signature halves verify over the canonical payload. `expired` is computed
 * against `now` (Unix ms) when given.
 */
export function verifyCertificate(cert: unknown, rootPublicKey: HybridPublicKey | HybridVerifier, now?: number): CertificateCheck {
  if (certificateShapeError(cert) !== null) return { ok: false, reason: 'malformed' };
  const c = cert as DelegationCertificate;
  const verifier = 'verify' in rootPublicKey ? rootPublicKey : createVerifier(rootPublicKey);
  const issuerKey = publicKeyFromJson(c.payload.issuer.public_key)!;
  if (!sameKey(issuerKey, verifier.publicKey)) return { ok: false, reason: 'wrong_issuer' };
  const sig = signatureFromJson(c.signature)!;
  if (!verifier.verify(CERT_DOMAIN, canonicalBytes(c.payload), sig)) return { ok: false, reason: 'bad_signature' };
  const expired = now !== undefined && c.payload.expires_at !== null && Date.parse(c.payload.expires_at) <= now;
  return { ok: true, cert: c, expired };
}
