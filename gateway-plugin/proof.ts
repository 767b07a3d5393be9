/**
 * Reading the proof bundle from the single `X-Service-Proof` header (spec 2.6).
 *
 * - no header, or only whitespace: missing (401 `proof_required`);
 * - the header more than once, or a comma-joined value: 403
 *   `duplicate_proof_header` (base64 never contains a comma; an ambiguous
 *   proof demonstrates no authority, spec 4.15);
 * - longer than {@link MAX_PROOF_HEADER_LENGTH}, not base64/base64url, not
 *   UTF-8, not JSON, not a JSON object, or not a structurally valid bundle
 *   (`parseProofBundle` of src/proof.ts: exact members, types, lengths, size
 *   limit, decodable signature): 403 `proof_rejected` with
 *   `reason: "invalid_proof"` before verify is called. Garbage therefore never
 *   costs a (billed) verify call, and only small, flat, bounded objects are
 *   ever serialized into the verify request.
 *
 * The bundle that passed the parse is sent to verify as decoded: its decoded
 * JSON text is spliced into the verify body as is (no re-serialization; the
 * sidecar's JSON.parse-based parser reads the same object the gateway
 * checked), unless that text is longer than `MAX_BUNDLE_BYTES` (whitespace
 * padding), in which case the compact `JSON.stringify` of the checked object
 * is sent. The signatures are checked only by verify.
 */

import { isAscii } from 'node:buffer';
import { ServiceError } from '../src/errors.js';
import { MAX_BUNDLE_BYTES, parseProofBundle } from '../src/proof.js';
import { PROOF_HEADER } from '../src/protocol.js';
import { isPlainObject } from './validate.js';

/** Longest accepted `X-Service-Proof` value, in characters (16 KiB). */
export const MAX_PROOF_HEADER_LENGTH = 16_384;

/** What the request carries in `X-Service-Proof`. */
export type ProofHeader = { kind: 'missing' } | { kind: 'duplicate' } | { kind: 'present'; value: string };

/** Classifies the request's `X-Service-Proof` header(s) using the raw header list (`IncomingMessage.rawHeaders`). */
export function readProofHeader(list: readonly string[]): ProofHeader {
  const values: string[] = [];
  for (let i = 0; i + 1 < list.length; i += 2) {
    if ((list[i] as string).toLowerCase() === PROOF_HEADER) values.push((list[i + 1] as string).trim());
  }
  const present = values.filter((v) => v !== '');
  if (values.length > 1) return present.length === 0 ? { kind: 'missing' } : { kind: 'duplicate' };
  const value = present[0];
  if (value === undefined) return { kind: 'missing' };
  if (value.includes(',')) return { kind: 'duplicate' };
  return { kind: 'present', value };
}

function rejected(message: string): never {
  throw new ServiceError('proof_rejected', message, { reason: 'invalid_proof' });
}

/** A proof that passed the structural pre-check. */
export interface DecodedProof {
  /** The decoded bundle object. */
  readonly bundle: Record<string, unknown>;
  /** JSON text of exactly that object, to splice into the verify body (see the file header). */
  readonly json: string;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The bytes of a base64 header value, or `null` when it is not base64. Accepts the
 * standard and the URL-safe alphabet (not mixed), padding optional.
 *
 * Fast path (what present produces: standard base64 with padding, or base64url without):
 * decode, re-encode, compare: equal text means the value was canonical base64 of those
 * bytes, with no character outside the alphabet. Anything else takes the exact path with
 * the alphabet regexes, which accepts the same set plus non-canonical trailing bits.
 */
function base64Bytes(value: string): Buffer | null {
  if (value === '') return null; // as the regexes below (callers treat an empty header as missing anyway)
  const fast = Buffer.from(value, 'base64');
  if (fast.toString('base64') === value || fast.toString('base64url') === value) return fast;
  const standard = /^[A-Za-z0-9+/]+={0,2}$/.test(value);
  const urlSafe = /^[A-Za-z0-9_-]+={0,2}$/.test(value);
  let end = value.length;
  while (end > 0 && value.charCodeAt(end - 1) === 0x3d /* = */) end -= 1;
  if ((!standard && !urlSafe) || end % 4 === 1 || (value.length !== end && value.length % 4 !== 0)) return null;
  return Buffer.from(value.slice(0, end), standard ? 'base64' : 'base64url');
}

/** UTF-8 text of `bytes` (fatal on malformed UTF-8); ASCII, the usual case, skips the decoder. */
function utf8Text(bytes: Buffer): string {
  return isAscii(bytes) ? bytes.toString('latin1') : UTF8.decode(bytes);
}

/**
 * Decodes a header value (standard base64 or base64url, padding optional)
 * into the bundle object and checks its structure with `parseProofBundle`.
 * Returns the decoded object itself. Throws 403 `proof_rejected` when malformed.
 */
export function decodeProof(value: string): Record<string, unknown> {
  return decodeProofJson(value).bundle;
}

/** {@link decodeProof}, also returning the JSON text to send to verify. */
export function decodeProofJson(value: string): DecodedProof {
  if (value.length > MAX_PROOF_HEADER_LENGTH) rejected('The X-Service-Proof header is too large.');
  const bytes = base64Bytes(value);
  if (bytes === null) rejected('The X-Service-Proof header is not base64.');
  let bundle: unknown;
  let text: string;
  try {
    text = utf8Text(bytes);
    bundle = JSON.parse(text);
  } catch {
    rejected('The X-Service-Proof header is not base64 of a JSON object.');
  }
  if (!isPlainObject(bundle)) rejected('The X-Service-Proof header is not base64 of a JSON object.');
  // Never throws (a deeply nested member is refused by its exact-members and depth checks).
  if (parseProofBundle(bundle) === null) rejected('The X-Service-Proof header is not a well-formed proof bundle.');
  // `text` is one JSON value (JSON.parse accepted all of it) and an object: safe to splice.
  return { bundle, json: text.length <= MAX_BUNDLE_BYTES ? text : JSON.stringify(bundle) };
}
