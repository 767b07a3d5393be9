/**
 * Request-target normalization and path safety: ONE definition for the
 * gateway (route matching, the verify context and the upstream all use the
 * same normalized path, produced here once per request) and the sidecar (a
 * `path_prefixes` constraint matches only a context path in this normalized
 * form, so the two can never read a path differently). Pure: no I/O.
 *
 * Normalization:
 *
 * - percent-encoded unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded
 *   (`/%61dmin` becomes `/admin`);
 * - every other percent-encoding keeps its encoding with uppercase hex digits;
 * - raw printable characters outside RFC 3986 `pchar` (`" < > [ ] ^ \` { | }`
 *   and the space) are percent-encoded.
 *
 * Everything that different servers could read differently is refused with
 * 400 `ambiguous_path`: encoded or raw (back)slash tricks, dot segments raw or
 * encoded, segments that begin or end with `..`, `;` path parameters (raw or
 * `%3B`), doubled slashes, invalid or overlong percent-encoding, non-UTF-8 or
 * confusable (NFKC-folding to a delimiter) encoded text, double encoding
 * (`%25` followed by two hex digits), NUL and other control characters, raw
 * non-ASCII, a raw `#`, and a target that does not start with `/`.
 *
 * A segment that a lenient server reads as a dot segment is refused too: one
 * whose percent-decoded text, without combining marks and default-ignorable
 * characters (zero-width space, soft hyphen, ...), NFKC-normalized and trimmed
 * of white space, is `.` or `..` or begins or ends with `..` (`.%20`,
 * `.%E2%80%8B.`).
 *
 * A normalized path longer than {@link MAX_PATH_LENGTH} (the sidecar's verify
 * limit on `context.path`) is refused with 400 `invalid_request`.
 *
 * {@link foldPath} gives the loosest reading of a normalized path that common
 * servers may apply (letter case, NFKC, accents, trailing dots and spaces,
 * merged slashes); the gateway's route table refuses a path whose folded
 * reading is routed differently (docs/gateway.md, "Folded spellings").
 *
 * The query string is not normalized: it is forwarded byte-for-byte, but it
 * must consist of printable ASCII without `#` (else 400 `invalid_request`).
 */

import { ServiceError } from './errors.js';

/**
 * Longest accepted NORMALIZED path, in characters. Equals the limit of the
 * sidecar's verify on `context.path` (2048): a longer path could never be
 * verified, so it is refused (400 `invalid_request`) before verify is called,
 * on every route (public ones too, so the limit is the same everywhere).
 */
export const MAX_PATH_LENGTH = 2048;
/** Longest raw path examined at all: every normalized character comes from at most 3 raw ones. */
const MAX_RAW_PATH_LENGTH = 3 * MAX_PATH_LENGTH;

/** A normalized request target. */
export interface RequestTarget {
  /** The normalized path, always starting with `/`. */
  readonly path: string;
  /** The original query string without the leading `?`, or `undefined`. */
  readonly query: string | undefined;
}

const HEX = '0123456789ABCDEF';
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** Raw characters kept as they are (RFC 3986 pchar without `%` and `;`, plus `/`). */
const RAW_KEPT = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]$/;
/** Raw printable characters that are percent-encoded. */
const RAW_ENCODED = /^[ "<>[\]^`{|}]$/;
/** Characters an encoded non-ASCII run must not fold to under NFKC. */
// eslint-disable-next-line no-control-regex
const CONFUSABLE = /[/\\.;%?#:\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Combining marks (dropped by accent-insensitive servers and collations). */
const MARKS = /\p{M}/gu;
/** Default-ignorable code points (zero-width characters, soft hyphen, BOM, variation selectors, ...). */
const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;

function ambiguous(): never {
  throw new ServiceError('ambiguous_path');
}

function tooLong(): never {
  throw new ServiceError('invalid_request', `The request path is longer than ${MAX_PATH_LENGTH} characters.`);
}

function hexValue(text: string, index: number): number {
  const pair = text.slice(index, index + 2);
  if (!/^[0-9A-Fa-f]{2}$/.test(pair)) ambiguous();
  return parseInt(pair, 16);
}

function encodeByte(byte: number): string {
  return `%${HEX[byte >> 4]}${HEX[byte & 15]}`;
}

/**
 * Appends the percent-encoded run starting at `start` (bytes >= 0x80) to `out`
 * after checking it is valid, non-confusable UTF-8. Returns the index after it.
 */
function takeNonAsciiRun(raw: string, start: number, out: string[]): number {
  const bytes: number[] = [];
  let i = start;
  while (i < raw.length && raw[i] === '%') {
    const byte = hexValue(raw, i + 1);
    if (byte < 0x80) break;
    bytes.push(byte);
    i += 3;
  }
  let text: string;
  try {
    text = utf8.decode(Uint8Array.from(bytes));
  } catch {
    ambiguous();
  }
  if (CONFUSABLE.test(text) || CONFUSABLE.test(text.normalize('NFKC'))) ambiguous();
  for (const byte of bytes) out.push(encodeByte(byte));
  return i;
}

/**
 * Normalizes a request path (no query string). Throws a {@link ServiceError}
 * `ambiguous_path` for anything listed in the file header, `invalid_request`
 * for a path longer than {@link MAX_PATH_LENGTH} once normalized.
 */
export function normalizePath(raw: string): string {
  if (raw.length === 0 || raw[0] !== '/') ambiguous();
  if (raw.length > MAX_RAW_PATH_LENGTH) tooLong();
  const out: string[] = [];
  let i = 0;
  while (i < raw.length) {
    const ch = raw[i] as string;
    if (ch === '%') {
      const byte = hexValue(raw, i + 1);
      if (byte >= 0x80) {
        i = takeNonAsciiRun(raw, i, out);
        continue;
      }
      const decoded = String.fromCharCode(byte);
      if (UNRESERVED.test(decoded)) {
        out.push(decoded);
      } else if (byte < 0x20 || byte === 0x7f || decoded === '/' || decoded === '\\' || decoded === ';') {
        ambiguous();
      } else {
        out.push(encodeByte(byte));
      }
      i += 3;
      continue;
    }
    if (RAW_KEPT.test(ch)) out.push(ch);
    else if (RAW_ENCODED.test(ch)) out.push(encodeByte(ch.charCodeAt(0)));
    else ambiguous(); // \ ; # controls, non-ASCII
    i += 1;
  }
  const path = out.join('');
  if (path.length > MAX_PATH_LENGTH) tooLong();
  // Double encoding such as %252e, also when produced by decoding (%25%32%65).
  if (/%25[0-9A-Fa-f]{2}/.test(path)) ambiguous();
  const segments = path.split('/');
  for (let s = 1; s < segments.length; s += 1) {
    const segment = segments[s] as string;
    if (segment === '' && s < segments.length - 1) ambiguous(); // doubled slash
    if (isDotSegment(segment)) ambiguous();
    if (segment.includes('%') && isDotSegment(looseText(segment).trim())) ambiguous();
  }
  return path;
}

/** `.`, `..`, or a segment beginning or ending with `..` (which some servers read as `..`). */
function isDotSegment(segment: string): boolean {
  return segment === '.' || segment.startsWith('..') || segment.endsWith('..');
}

/** A normalized segment percent-decoded, without marks and ignorables, NFKC-normalized. */
function looseText(segment: string): string {
  let text: string;
  try {
    text = decodeURIComponent(segment);
  } catch {
    text = segment; // not reached for a normalized segment (its encodings are valid UTF-8)
  }
  return text.normalize('NFKD').replace(MARKS, '').replace(IGNORABLE, '').normalize('NFKC');
}

/**
 * The loosest reading of one segment of a NORMALIZED path that a lenient
 * server may give it: percent-decoded; combining marks and default-ignorable
 * characters dropped; NFKC-normalized; case-folded (upper, then lower case, so
 * `ı` and `ſ` fold to `i` and `s`); leading white space and trailing white
 * space and dots dropped (Windows and IIS drop trailing dots and spaces;
 * `trim()` drops Unicode white space such as U+00A0). `adm%C4%B1n`,
 * `%EF%BD%81dmin`, `ADMIN.` and `admin%C2%A0` all fold to `admin`.
 */
export function foldSegment(segment: string): string {
  const text = looseText(segment).toUpperCase().toLowerCase().normalize('NFKD').replace(MARKS, '').normalize('NFKC');
  return text.replace(/^\s+/u, '').replace(/[\s.]+$/u, '');
}

/**
 * The segments of a NORMALIZED path (without the leading `/`) in their
 * {@link foldSegment} reading, with segments that fold to nothing dropped
 * except the last one (servers that merge slashes read `/a/%20/b` as `/a/b`).
 * A trailing empty segment stays: `/a/` gives `['a', '']`.
 */
export function foldPath(path: string): string[] {
  const parts = path.slice(1).split('/').map(foldSegment);
  return parts.filter((part, i) => part !== '' || i === parts.length - 1);
}

/**
 * True when {@link foldPath} may read `path` differently from its plain ASCII
 * lower-casing: it has a percent-encoding, or a segment ending in a dot.
 */
export function mayFoldBeyondCase(path: string): boolean {
  return path.includes('%') || /\.(?:\/|$)/.test(path);
}

/** True when `path` is already in the normalized form of {@link normalizePath}. */
export function isNormalizedPath(path: string): boolean {
  try {
    return normalizePath(path) === path;
  } catch {
    return false;
  }
}

/**
 * Splits and normalizes a raw request target (`request.raw.url`).
 * Throws `ambiguous_path` for the path, `invalid_request` for a bad query.
 */
export function normalizeRequestTarget(rawUrl: string): RequestTarget {
  const q = rawUrl.indexOf('?');
  const rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? undefined : rawUrl.slice(q + 1);
  const path = normalizePath(rawPath);
  if (query !== undefined && !/^[\u0021-\u0022\u0024-\u007e]*$/.test(query)) {
    throw new ServiceError('invalid_request', 'The query string is malformed.');
  }
  return { path, query: query === '' ? undefined : query };
}
