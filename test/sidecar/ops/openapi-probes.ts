/**
 * Bad requests for every operation of the served OpenAPI document, for
 * `openapi-errors.test.ts`. The operations, their path and query parameters,
 * their request bodies and their security come from the document itself, so
 * a new operation is probed without editing this file; a parameter, security
 * mode or required body member the probes do not know makes
 * {@link probesFor} throw, so the test fails rather than skip it.
 *
 * Requests go out through `node:http` (not fetch), so that an `Expect`
 * header, a header block over Node's limit, a malformed percent escape or a
 * body without a content type reach the sidecar as written.
 */
import http from 'node:http';

/** The parts of a served operation the probes use. */
export interface DocOperation {
  /** `METHOD /path/{param}` as the document names it. */
  readonly key: string;
  readonly operationId: string;
  readonly method: string;
  readonly path: string;
  /** `none`, `session`, `session_csrf` or `api_key` (from `security`). */
  readonly auth: AuthKind;
  readonly pathParams: readonly string[];
  /** Query parameters: name → schema. */
  readonly query: Readonly<Record<string, Schema>>;
  /** The request body's schema (the object branch of a union), or null when none is documented. */
  readonly body: Schema | null;
  /** The document says a body is required (`requestBody.required`). */
  readonly bodyRequired: boolean;
  /** The documented error codes by status. */
  readonly listed: ReadonlyMap<number, ReadonlySet<string>>;
}

/** An authentication mode as the document states it. */
export type AuthKind = 'none' | 'session' | 'session_csrf' | 'api_key';
/** A JSON schema of the document (loosely typed). */
export type Schema = { type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; maxLength?: number; anyOf?: Schema[]; [k: string]: unknown };

/** The served document, as far as the probes read it. */
export type ServedDoc = { paths: Record<string, Record<string, any>> }; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The authentication mode of a `security` list. */
export function authOf(security: Record<string, string[]>[] | undefined): AuthKind {
  const req = JSON.stringify((security ?? []).map((r) => Object.keys(r).sort()));
  const modes: Record<string, AuthKind> = { '[]': 'none', '[["session"]]': 'session', '[["csrf","session"]]': 'session_csrf', '[["apiKey"]]': 'api_key' };
  const mode = modes[req];
  if (mode === undefined) throw new Error(`security ${req} is not known to the probes`);
  return mode;
}

/** Every operation of the document. */
export function operationsOf(doc: ServedDoc): DocOperation[] {
  const out: DocOperation[] = [];
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [method, o] of Object.entries(item)) {
      const listed = new Map<number, Set<string>>();
      for (const [status, resp] of Object.entries(o.responses as Record<string, any>)) { // eslint-disable-line @typescript-eslint/no-explicit-any
        const codes: string[] | undefined = resp.content?.['application/json']?.schema?.allOf?.[1]?.properties?.error?.properties?.code?.enum;
        if (codes) listed.set(Number(status), new Set(codes));
      }
      const params = (o.parameters ?? []) as { in: string; name: string; schema: Schema }[];
      let body: Schema | null = o.requestBody?.content?.['application/json']?.schema ?? null;
      if (body?.anyOf) body = body.anyOf.find((s) => s.type === 'object') ?? body;
      out.push({
        key: `${method.toUpperCase()} ${p}`, operationId: o.operationId, method: method.toUpperCase(), path: p, auth: authOf(o.security),
        pathParams: params.filter((x) => x.in === 'path').map((x) => x.name),
        query: Object.fromEntries(params.filter((x) => x.in === 'query').map((x) => [x.name, x.schema])),
        body, bodyRequired: o.requestBody?.required === true, listed,
      });
    }
  }
  return out;
}

/** One HTTP request. */
export interface Probe {
  /** What is wrong with it (for failure messages and the coverage check). */
  readonly name: string;
  /** A category the coverage check counts: auth, path, body, media, query, headers, state. */
  readonly kind: 'auth' | 'path' | 'body' | 'media' | 'query' | 'headers' | 'state';
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
  /** True when a 2xx answer is itself a failure (the request is wrong whatever the server's state). */
  readonly mustRefuse: boolean;
}

/** An answer. */
export interface Answer { status: number; text: string; json: any } // eslint-disable-line @typescript-eslint/no-explicit-any

/** Sends one request with `node:http` (no agent, so a refused request cannot poison a pooled socket). */
export function send(base: string, p: Probe): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const u = new URL(base);
    let answered = false;
    const req = http.request({ host: u.hostname, port: u.port, method: p.method, path: p.url, headers: p.headers, agent: false, timeout: 15_000 }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode ?? 0, text, json });
      });
    });
    // The server may answer (413, 431) and close before it read the whole request.
    req.on('error', (err) => { if (!answered) reject(err); });
    req.on('timeout', () => req.destroy(new Error(`${p.method} ${p.url}: timeout`)));
    if (p.body !== undefined) req.write(p.body);
    req.end();
  });
}

/** Request headers of one identity for an operation's authentication. */
export interface Creds { cookie?: string; csrf?: string; apiKey?: string }

/** What the probes need from the running sidecar. */
export interface ProbeFixture {
  /** The account that owns every real id. */
  readonly owner: Creds;
  /** Another onboarded account with its own platform key. */
  readonly other: Creds;
  /** Real ids of the owner, by path parameter name. */
  readonly ids: Readonly<Record<string, string>>;
  /** Request-body values by member name, for the members a body requires. */
  readonly samples: Readonly<Record<string, unknown>>;
  /** Largest accepted body (bytes). */
  readonly bodyLimit: number;
}

/** Headers carrying `c` for an operation with authentication `auth`. */
export function authHeaders(auth: AuthKind, c: Creds): Record<string, string> {
  const h: Record<string, string> = {};
  if ((auth === 'session' || auth === 'session_csrf') && c.cookie !== undefined) h.cookie = c.cookie;
  if (auth === 'session_csrf' && c.csrf !== undefined) h['x-service-csrf'] = c.csrf;
  if (auth === 'api_key' && c.apiKey !== undefined) h['x-service-api-key'] = c.apiKey;
  return h;
}

/** The operation's URL with each path parameter from `ids` (raw: not encoded again). */
export function urlOf(op: DocOperation, ids: Readonly<Record<string, string>>, query = ''): string {
  return op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    const v = ids[name];
    if (v === undefined) throw new Error(`${op.key}: no id for path parameter ${name}`);
    return v;
  }) + query;
}

/** A sample body with every required member (and no optional one), or undefined when none is documented. */
export function sampleBody(op: DocOperation, samples: Readonly<Record<string, unknown>>): Record<string, unknown> | undefined {
  if (!op.body?.properties) return undefined;
  const out: Record<string, unknown> = {};
  for (const name of op.body.required ?? []) {
    if (!(name in samples)) throw new Error(`${op.key}: no sample value for the required body member ${name}`);
    out[name] = samples[name];
  }
  return out;
}

/** A JSON value that does not have `schema`'s type (undefined when the schema accepts anything). */
export function wrongType(schema: Schema): unknown {
  const types = new Set([schema.type, ...(schema.anyOf ?? []).map((s) => s.type)].flat().filter((t): t is string => typeof t === 'string'));
  if (types.size === 0) return undefined;
  if (!types.has('number') && !types.has('integer')) return 12345;
  if (!types.has('string')) return 'not-a-number';
  return { unexpected: true };
}

/** 101 characters: over every id's `maxLength` (100); 201: over the router's parameter limit (200). */
const LONG_ID = 'x'.repeat(101);
const OVER_ROUTER_LIMIT = 'x'.repeat(201);

/** Whether requests of `method` carry a JSON body (POST, PUT and PATCH). */
export const takesBody = (method: string): boolean => method === 'POST' || method === 'PUT' || method === 'PATCH';

/** Every generic probe of one operation, with the owner's valid credentials unless the probe is about them. */
export function probesFor(op: DocOperation, fx: ProbeFixture): Probe[] {
  const out: Probe[] = [];
  const json = { 'content-type': 'application/json' };
  const valid = authHeaders(op.auth, fx.owner);
  const hasBody = takesBody(op.method);
  const sample = sampleBody(op, fx.samples);
  const bodyText = hasBody ? JSON.stringify(sample ?? {}) : undefined;
  const withBody = (headers: Record<string, string>): Pick<Probe, 'headers' | 'body'> =>
    bodyText === undefined ? { headers } : { headers: { ...headers, ...json }, body: bodyText };
  const add = (kind: Probe['kind'], name: string, p: Omit<Probe, 'name' | 'kind' | 'method'>): void => { out.push({ kind, name, method: op.method, ...p }); };
  const url = urlOf(op, fx.ids);

  // Credentials: missing, unknown, malformed, another account's CSRF token.
  if (op.auth !== 'none') {
    add('auth', 'no credentials', { url, ...withBody({}), mustRefuse: true });
    add('auth', 'unknown credentials', { url, ...withBody(authHeaders(op.auth, {
      cookie: 'service_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA; service_csrf=AAAA.BBBB', csrf: 'AAAA.BBBB',
      apiKey: 'aak_000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    })), mustRefuse: true });
    add('auth', 'malformed credentials', { url, ...withBody(authHeaders(op.auth, { cookie: 'service_session=%%%', csrf: '.', apiKey: 'Bearer nope' })), mustRefuse: true });
  }
  if (op.auth === 'session_csrf') {
    add('auth', 'no CSRF header', { url, ...withBody(authHeaders('session', fx.owner)), mustRefuse: true });
    add('auth', 'another session\'s CSRF token', { url, ...withBody({ ...valid, 'x-service-csrf': fx.other.csrf ?? '' }), mustRefuse: true });
  }

  // Path parameters: unknown, another account's owner, too long, over the router's limit, undecodable.
  for (const name of op.pathParams) {
    const bad = (v: string): string => urlOf(op, { ...fx.ids, [name]: v });
    add('path', `unknown ${name}`, { url: bad(`unknown-${name}-0000`), ...withBody(valid), mustRefuse: true });
    add('path', `${name} of 101 characters`, { url: bad(LONG_ID), ...withBody(valid), mustRefuse: true });
    add('path', `${name} of 201 characters`, { url: bad(OVER_ROUTER_LIMIT), ...withBody(valid), mustRefuse: true });
    add('path', `${name} with a malformed percent escape`, { url: bad('%zz'), ...withBody(valid), mustRefuse: true });
    add('path', `${name} with an encoded slash and non-ASCII`, { url: bad('a%2Fb%C3%A9'), ...withBody(valid), mustRefuse: true });
  }
  if (op.pathParams.length > 0 && op.auth !== 'none') {
    add('path', 'ids of another account', { url, ...withBody(authHeaders(op.auth, fx.other)), mustRefuse: true });
  }

  // Bodies: malformed JSON, not an object, unknown member, wrong types, missing members, too long, prototype keys.
  if (hasBody) {
    const raw = (name: string, body: string, mustRefuse = true): void => add('body', name, { url, headers: { ...valid, ...json }, body, mustRefuse });
    raw('malformed JSON', '{"a":');
    if (op.bodyRequired) {
      add('body', 'no body, though it is required', { url, headers: valid, mustRefuse: true });
      raw('an empty JSON body, though one is required', '');
    }
    raw('a JSON array', '[]');
    raw('a JSON string', '"text"');
    raw('a JSON number', '42');
    // An unknown member is refused, except by a body whose schema allows any (AuthZEN 1.0: "receivers MUST ignore
    // unknown fields"): there it is ignored.
    raw('an unknown member', JSON.stringify({ ...sample, unknown_member: 1 }), op.body?.additionalProperties !== true);
    raw('a __proto__ member', `{"__proto__":{"polluted":true}${bodyText && bodyText !== '{}' ? `,${bodyText.slice(1)}` : '}'}`);
    for (const [name, schema] of Object.entries(op.body?.properties ?? {})) {
      const v = wrongType(schema);
      if (v !== undefined) raw(`${name} of the wrong type`, JSON.stringify({ ...sample, [name]: v }));
      if (typeof schema.maxLength === 'number') raw(`${name} too long`, JSON.stringify({ ...sample, [name]: 'x'.repeat(schema.maxLength + 1) }));
    }
    for (const name of op.body?.required ?? []) {
      const rest = { ...sample };
      delete rest[name];
      raw(`${name} missing`, JSON.stringify(rest));
    }
    // Content types and sizes.
    const media = (name: string, headers: Record<string, string>, body: string | Buffer): void => add('media', name, { url, headers: { ...valid, ...headers }, body, mustRefuse: true });
    media('text/plain', { 'content-type': 'text/plain' }, bodyText ?? '{}');
    media('a form', { 'content-type': 'application/x-www-form-urlencoded' }, 'a=b');
    media('no content type', {}, bodyText ?? '{}');
    media('application/xml', { 'content-type': 'application/xml' }, '<a/>');
    media('a body over the limit', json, `{"a":"${'x'.repeat(fx.bodyLimit)}"}`);
  }

  // Query strings (reads only: a write with a valid body would succeed): an unknown parameter,
  // each documented one too long, repeated, or a bad value.
  if (op.method === 'GET') add('query', 'an unknown query parameter', { url: urlOf(op, fx.ids, '?unknown_param=1'), ...withBody(valid), mustRefuse: false });
  for (const [name, schema] of Object.entries(op.query)) {
    const q = (name2: string, value: string, mustRefuse: boolean): void =>
      add('query', name2, { url: urlOf(op, fx.ids, `?${name}=${encodeURIComponent(value)}`), ...withBody(valid), mustRefuse });
    if (typeof schema.maxLength === 'number') q(`${name} too long`, 'x'.repeat(schema.maxLength + 1), true);
    q(`${name} not a valid value`, 'not-valid-!', false);
    add('query', `${name} repeated`, { url: urlOf(op, fx.ids, `?${name}=1&${name}=2`), ...withBody(valid), mustRefuse: false });
  }
  if ('limit' in op.query) for (const v of ['0', '-1', '1.5', '201', '1e2', 'ten']) add('query', `limit=${v}`, { url: urlOf(op, fx.ids, `?limit=${v}`), ...withBody(valid), mustRefuse: true });

  // Headers: a header block over Node's 16 KiB, an Expect the server does not support.
  add('headers', 'a header block over 16 KiB', { url, ...withBody({ ...valid, 'x-padding': 'x'.repeat(17 * 1024) }), mustRefuse: true });
  add('headers', 'Expect: something-else', { url, ...withBody({ ...valid, expect: 'something-else' }), mustRefuse: true });
  return out;
}
