/**
 * Canonical JSON encoding for signed structures (certificates, proofs).
 *
 * A strict subset of RFC 8785 (JCS): objects with keys sorted by UTF-16 code
 * units, no whitespace, strings escaped as by `JSON.stringify`, integers only
 * (safe integers; no floats, no -0), `true`/`false`/`null`, arrays. Anything
 * else (undefined, functions, floats, NaN, bigint, non-plain objects) is not
 * encodable: signing code gets a `TypeError`, verification code gets `null`.
 */

/** A value {@link canonicalize} accepts. */
export type CanonicalValue = null | boolean | number | string | CanonicalValue[] | { [k: string]: CanonicalValue };

function enc(v: unknown, depth: number): string {
  if (depth > 32) throw new TypeError('canonical: nesting too deep');
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean': return v ? 'true' : 'false';
    case 'string': return JSON.stringify(v);
    case 'number':
      if (!Number.isSafeInteger(v) || Object.is(v, -0)) throw new TypeError('canonical: only safe integers are allowed');
      return String(v);
    case 'object': {
      if (Array.isArray(v)) {
        // Index loop, not map(): map skips holes, which would give `[1,,3]` (not JSON). A hole is undefined and refused.
        const items: string[] = [];
        for (let i = 0; i < v.length; i++) items.push(enc(v[i], depth + 1));
        return '[' + items.join(',') + ']';
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw new TypeError('canonical: only plain objects are allowed');
      const keys = Object.keys(v as object).sort();
      const parts: string[] = [];
      for (const k of keys) {
        const x = (v as Record<string, unknown>)[k];
        if (x === undefined) throw new TypeError(`canonical: undefined member ${JSON.stringify(k)}`);
        parts.push(JSON.stringify(k) + ':' + enc(x, depth + 1));
      }
      return '{' + parts.join(',') + '}';
    }
    default:
      throw new TypeError(`canonical: ${typeof v} is not encodable`);
  }
}

/** Canonical JSON text of `value`; throws `TypeError` for values outside the subset. */
export function canonicalize(value: unknown): string {
  return enc(value, 0);
}

/** Like {@link canonicalize} but returns `null` instead of throwing (for untrusted input). */
export function tryCanonicalize(value: unknown): string | null {
  try {
    return enc(value, 0);
  } catch {
    return null;
  }
}

/** UTF-8 bytes of the canonical encoding. */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalize(value));
}
