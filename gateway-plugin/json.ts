/**
 * A strict JSON reader for constraint-context derivation.
 *
 * The gateway reads amount and currency out of the request body with JSON
 * pointers. `JSON.parse` is not good enough for that: it silently keeps the
 * last of duplicate keys (other parsers keep the first, so the gateway and the
 * upstream could see different amounts) and it rounds numbers. This reader
 *
 * - refuses duplicate object keys (compared after unescaping),
 * - keeps every number as its exact source text ({@link JsonNumber}),
 * - refuses a BOM, invalid UTF-8, nesting deeper than {@link MAX_JSON_DEPTH},
 *   and anything that is not RFC 8259 JSON.
 *
 * It throws {@link JsonSyntaxError}; callers decide the response.
 */

/** Deepest nesting of arrays/objects accepted. */
export const MAX_JSON_DEPTH = 64;

/** A JSON number, kept as its exact source text. */
export class JsonNumber {
  /** The number exactly as written, for example `12.50` or `1e3`. */
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** A value produced by {@link parseStrictJson}. Objects have a null prototype. */
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | { [key: string]: JsonValue };

/** Thrown for anything that is not strict JSON. */
export class JsonSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JsonSyntaxError';
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING_RUN = /[^"\\\u0000-\u001f]*/y;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const ESCAPES: Readonly<Record<string, string>> = Object.assign(Object.create(null) as Record<string, string>, {
  '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t',
});

class Reader {
  readonly text: string;
  pos = 0;
  constructor(text: string) {
    this.text = text;
  }

  error(what: string): never {
    throw new JsonSyntaxError(`${what} at offset ${this.pos}`);
  }

  skipSpace(): void {
    while (this.pos < this.text.length) {
      const c = this.text.charCodeAt(this.pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      this.pos += 1;
    }
  }

  expect(ch: string): void {
    if (this.text[this.pos] !== ch) this.error(`expected "${ch}"`);
    this.pos += 1;
  }

  value(depth: number): JsonValue {
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === '{' || c === '[') {
      if (depth >= MAX_JSON_DEPTH) this.error('nesting too deep');
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    for (const [word, val] of [['true', true], ['false', false], ['null', null]] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return val;
      }
    }
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (m === null || m[0] === '') this.error('unexpected character');
    this.pos += m[0].length;
    return new JsonNumber(m[0]);
  }

  object(depth: number): { [key: string]: JsonValue } {
    const out = Object.create(null) as { [key: string]: JsonValue };
    const seen = new Set<string>();
    this.expect('{');
    this.skipSpace();
    if (this.text[this.pos] === '}') {
      this.pos += 1;
      return out;
    }
    for (;;) {
      this.skipSpace();
      const key = this.string();
      if (seen.has(key)) this.error(`duplicate key ${JSON.stringify(key)}`);
      seen.add(key);
      this.skipSpace();
      this.expect(':');
      out[key] = this.value(depth);
      this.skipSpace();
      if (this.text[this.pos] === ',') {
        this.pos += 1;
        continue;
      }
      this.expect('}');
      return out;
    }
  }

  array(depth: number): JsonValue[] {
    const out: JsonValue[] = [];
    this.expect('[');
    this.skipSpace();
    if (this.text[this.pos] === ']') {
      this.pos += 1;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.skipSpace();
      if (this.text[this.pos] === ',') {
        this.pos += 1;
        continue;
      }
      this.expect(']');
      return out;
    }
  }

  string(): string {
    this.expect('"');
    let out = '';
    for (;;) {
      STRING_RUN.lastIndex = this.pos;
      const run = STRING_RUN.exec(this.text);
      const chunk = run === null ? '' : run[0];
      out += chunk;
      this.pos += chunk.length;
      const c = this.text[this.pos];
      if (c === '"') {
        this.pos += 1;
        return out;
      }
      if (c !== '\\') this.error('bad string');
      const e = this.text[this.pos + 1];
      this.pos += 2;
      const simple = e === undefined ? undefined : ESCAPES[e];
      if (simple !== undefined) out += simple;
      else if (e === 'u' && /^[0-9A-Fa-f]{4}$/.test(this.text.slice(this.pos, this.pos + 4))) {
        out += String.fromCharCode(parseInt(this.text.slice(this.pos, this.pos + 4), 16));
        this.pos += 4;
      } else this.error('bad escape');
    }
  }
}

/** Parses `bytes` (UTF-8) as strict JSON. Throws {@link JsonSyntaxError}. */
export function parseStrictJson(bytes: Uint8Array): JsonValue {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new JsonSyntaxError('invalid UTF-8');
  }
  if (text.charCodeAt(0) === 0xfeff) throw new JsonSyntaxError('byte order mark');
  const reader = new Reader(text);
  const value = reader.value(0);
  reader.skipSpace();
  if (reader.pos !== text.length) reader.error('trailing data');
  return value;
}

/**
 * Resolves an RFC 6901 JSON pointer. Returns `undefined` when it points at
 * nothing (missing member, index out of range, or through a scalar).
 */
export function resolvePointer(doc: JsonValue, pointer: string): JsonValue | undefined {
  if (pointer === '') return doc;
  let node: JsonValue | undefined = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) {
      if (!/^(?:0|[1-9][0-9]*)$/.test(token)) return undefined;
      node = node[Number(token)];
    } else if (node !== null && typeof node === 'object' && !(node instanceof JsonNumber)) {
      node = Object.prototype.hasOwnProperty.call(node, token) ? node[token] : undefined;
    } else {
      return undefined;
    }
    if (node === undefined) return undefined;
  }
  return node;
}
