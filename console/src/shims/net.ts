/**
 * The part of `node:net` that the shared constraint validator
 * (src/constraints.ts) uses, for the browser: `isIP` with the same grammar as
 * Node's (dotted-quad IPv4 without leading zeros; IPv6 with `::`, an embedded
 * IPv4 tail and an optional zone). test/console/net-shim.test.ts checks it
 * against `node:net` itself. `BlockList` (used only to evaluate constraints,
 * which the console never does) throws.
 */
const V4_SEG = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
const V4 = `(?:${V4_SEG}\\.){3}${V4_SEG}`;
const V6_SEG = '(?:[0-9a-fA-F]{1,4})';
const IPV4_RE = new RegExp(`^${V4}$`);
const IPV6_RE = new RegExp('^(?:'
  + `(?:${V6_SEG}:){7}(?:${V6_SEG}|:)|`
  + `(?:${V6_SEG}:){6}(?:${V4}|:${V6_SEG}|:)|`
  + `(?:${V6_SEG}:){5}(?::${V4}|(?::${V6_SEG}){1,2}|:)|`
  + `(?:${V6_SEG}:){4}(?:(?::${V6_SEG}){0,1}:${V4}|(?::${V6_SEG}){1,3}|:)|`
  + `(?:${V6_SEG}:){3}(?:(?::${V6_SEG}){0,2}:${V4}|(?::${V6_SEG}){1,4}|:)|`
  + `(?:${V6_SEG}:){2}(?:(?::${V6_SEG}){0,3}:${V4}|(?::${V6_SEG}){1,5}|:)|`
  + `(?:${V6_SEG}:){1}(?:(?::${V6_SEG}){0,4}:${V4}|(?::${V6_SEG}){1,6}|:)|`
  + `(?::(?:(?::${V6_SEG}){0,5}:${V4}|(?::${V6_SEG}){1,7}|:))`
  + ')(?:%[0-9a-zA-Z-.:]{1,})?$');

/** 4 for an IPv4 address, 6 for an IPv6 address, else 0 (as `net.isIP`). */
export function isIP(s: string): 0 | 4 | 6 {
  if (IPV4_RE.test(s)) return 4;
  if (IPV6_RE.test(s)) return 6;
  return 0;
}

/** Not available in the browser (the console validates constraints; it never evaluates them). */
export class BlockList {
  constructor() {
    throw new TypeError('net.BlockList is not available in the console');
  }
  addSubnet(_a: string, _p: number, _f: string): void { /* unreachable */ }
  check(_a: string, _f: string): boolean { return false; }
}

/** The default export, as `import net from 'node:net'` reads it. */
export default { isIP, BlockList };
