/**
 * Publisher-domain verification (issue 32), the pure part: which names an
 * organisation may claim, where the DNS TXT record goes, what it says, and
 * whether the records a resolver answered prove the claim. The lookup itself
 * is the sidecar's (`sidecar/publishing/dns.ts`). Pure: no I/O.
 *
 * The organisation claims a domain and gets a token; it publishes
 * `agent-authz-domain-verification=<token>` as a TXT record at
 * `_agent-authz.<domain>` (a name of its own, as GitHub's and Atlassian's
 * checks use, so it never collides with the apex's SPF and other TXT
 * records). A record proves the claim when one TXT answer, its strings
 * joined, equals that text exactly; other records at the name are ignored.
 */

/** The label the record is published under: `_agent-authz.<domain>`. */
export const DOMAIN_RECORD_LABEL = '_agent-authz';

/** The prefix of the record's text, before the token. */
export const DOMAIN_RECORD_PREFIX = 'agent-authz-domain-verification=';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const TOKEN = /^[A-Za-z0-9_-]{32,128}$/;

/**
 * The claimed domain in its canonical form (lowercase, no trailing dot), or `null` when it is not
 * a domain an organisation may claim: at least two labels of letters, digits and inner hyphens
 * (internationalised names in their `xn--` form), at most 253 characters, a top-level label that
 * is not all digits (no IP addresses), and not `localhost` or a name under `.localhost`, `.local`,
 * `.internal`, `.invalid`, `.test` or `.example` (names no one can prove on the public DNS).
 */
export function canonicalDomain(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const name = value.trim().toLowerCase().replace(/\.$/, '');
  if (name.length === 0 || name.length > 253) return null;
  const labels = name.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return null;
  const tld = labels[labels.length - 1] as string;
  if (/^\d+$/.test(tld)) return null;
  if (['localhost', 'local', 'internal', 'invalid', 'test', 'example'].includes(tld)) return null;
  return name;
}

/** The DNS name whose TXT records prove a claim on `domain` (a canonical domain). */
export function domainRecordName(domain: string): string {
  if (canonicalDomain(domain) !== domain) {
    throw new TypeError(`domainRecordName: not a canonical domain: ${JSON.stringify(domain)}`);
  }
  return `${DOMAIN_RECORD_LABEL}.${domain}`;
}

/** The TXT record's text for `token`. */
export function domainRecordText(token: string): string {
  if (!TOKEN.test(token)) throw new TypeError('domainRecordText: a token is 32 to 128 base64url characters');
  return `${DOMAIN_RECORD_PREFIX}${token}`;
}

/**
 * Whether the TXT answers at the record name prove `token`: `records` as Node's
 * `resolveTxt` gives them, each record an array of its character-strings, joined before
 * comparing (a long record arrives split into 255-byte strings).
 */
export function recordsProve(records: readonly (readonly string[])[], token: string): boolean {
  const expected = domainRecordText(token);
  return records.some((chunks) => Array.isArray(chunks) && chunks.join('') === expected);
}
