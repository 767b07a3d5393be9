/**
 * Decimal amounts as verify's context and the constraints carry them: a
 * decimal string (up to 15 integer digits and 6 decimals), compared exactly
 * in integer micro-units. Pure: no I/O.
 */

/** Decimal amount syntax (up to 15 integer digits and 6 decimals). */
export const AMOUNT_RE = /^(0|[1-9][0-9]{0,14})(\.[0-9]{1,6})?$/;

/** Amount in micro-units as a bigint (`"1.5"` → `1500000n`); `a` must match {@link AMOUNT_RE}. */
export function amountMicros(a: string): bigint {
  const [i, f = ''] = a.split('.');
  return BigInt(i!) * 1_000_000n + BigInt(f.padEnd(6, '0'));
}
