/**
 * The set-up flow of a benchmark sidecar, over real HTTP (spec sections 4–5):
 * e-mail login with the code read from an in-process SMTP sink, onboarding,
 * platform registration, agent, self-request and approval. Also the producers
 * of the benchmark's inputs: challenges and proof bundles (challenge +
 * present).
 */
import { SMTPServer } from 'smtp-server';
import { Pool, request } from 'undici';
import { runLoad } from './load.js';
import type { LoadResult } from './load.js';

/** A real SMTP receiver on loopback (no auth, no TLS) that keeps the newest code per recipient. */
export interface MailSink { url: string; codeFor(to: string): Promise<string>; close(): Promise<void> }

/** Starts the SMTP sink the sidecars send their login codes to. */
export async function startMailSink(): Promise<MailSink> {
  const codes = new Map<string, string>();
  const server = new SMTPServer({
    authOptional: true, disabledCommands: ['STARTTLS'], logger: false,
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const code = /sign-in code is (\d{6})/.exec(Buffer.concat(chunks).toString('utf8'))?.[1];
        if (code) for (const r of session.envelope.rcptTo) codes.set(r.address, code);
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    async codeFor(to) {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        const c = codes.get(to);
        if (c) { codes.delete(to); return c; }
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no sign-in code e-mailed to ${to}`);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Res { status: number; body: any; text: string } // eslint-disable-line @typescript-eslint/no-explicit-any

/** A small HTTP client with a cookie jar, the CSRF header and an optional API key. */
export class Client {
  readonly jar = new Map<string, string>();
  readonly base: string;
  apiKey: string | undefined;
  constructor(base: string, apiKey?: string) {
    this.base = base;
    this.apiKey = apiKey;
  }

  async req(method: 'GET' | 'POST' | 'PUT', p: string, body?: unknown): Promise<Res> {
    const headers: Record<string, string> = {};
    if (this.jar.size) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const csrf = this.jar.get('service_csrf');
    if (method !== 'GET' && csrf) headers['x-service-csrf'] = csrf;
    if (this.apiKey) headers['x-service-api-key'] = this.apiKey;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await request(this.base + p, { method, headers, body: body === undefined ? null : JSON.stringify(body), headersTimeout: 30_000, bodyTimeout: 30_000 });
    const set = r.headers['set-cookie'];
    for (const c of Array.isArray(set) ? set : set ? [set] : []) {
      const pair = c.split(';')[0]!;
      const i = pair.indexOf('=');
      const value = pair.slice(i + 1);
      if (value === '' || /max-age=0/i.test(c)) this.jar.delete(pair.slice(0, i)); else this.jar.set(pair.slice(0, i), value);
    }
    const text = await r.body.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: r.statusCode, body: parsed, text };
  }
}

function must(r: Res, what: string): Res {
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

/** Logs in by e-mail code (read from the sink). */
export async function login(base: string, mail: MailSink, email: string): Promise<Client> {
  const c = new Client(base);
  must(await c.req('POST', '/v1/auth/email/send-code', { email }), 'send-code');
  must(await c.req('POST', '/v1/auth/email/verify-code', { email, code: await mail.codeFor(email) }), 'verify-code');
  return c;
}

/** What the set-up flow created. */
export interface Setup {
  email: string;
  user: Client;
  apiKey: string;
  connectionId: string;
  platformId: string;
  agentId: string;
  certId: string;
  /** Scope delegated to the agent (used as required_scope and as the gateway route's scope). */
  scope: string;
}

/**
 * Runs the flow from login to an approved delegation of `data:read`; `maxDepth` grants the agent
 * the right to sub-delegate that many levels (`max_delegation_depth`, docs/certificates.md).
 */
export async function setUp(base: string, mail: MailSink, email: string, maxDepth?: number): Promise<Setup> {
  const user = await login(base, mail, email);
  must(await user.req('POST', '/v1/auth/onboarding/profile', { first_name: 'Bench', last_name: 'Mark' }), 'profile');
  must(await user.req('POST', '/v1/auth/onboarding/account-type', { account_type: 'individual' }), 'account-type');
  const reg = must(await user.req('POST', '/v1/service/platforms/personal', {
    name: 'Bench platform', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'],
  }), 'platform').body;
  const platform = new Client(base, reg.api_key);
  const agent = must(await platform.req('POST', `/v1/service/connections/${reg.connection_id}/agents`, { name: 'bench-agent', agent_type: 'api_agent' }), 'agent').body;
  const sr = must(await user.req('POST', '/v1/service/delegations/self-request', { connection_id: reg.connection_id }), 'self-request').body;
  const ap = must(await user.req('POST', `/v1/service/delegations/requests/${sr.request_id}/approve`, {
    approved_scope: ['data:read'], ...(maxDepth ? { max_delegation_depth: maxDepth } : {}),
  }), 'approve').body;
  return {
    email, user, apiKey: reg.api_key, connectionId: reg.connection_id, platformId: reg.platform_id, agentId: agent.agent_id, certId: ap.cert_id, scope: 'data:read',
  };
}

/** A keep-alive pool to `base` with up to `connections` sockets. */
export function pool(base: string, connections: number): Pool {
  return new Pool(base, { connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 30_000, bodyTimeout: 30_000 });
}

/** Issues `n` challenges (concurrency 16). */
export async function makeChallenges(p: Pool, s: Setup, n: number, maxSeconds: number): Promise<string[]> {
  const out: string[] = [];
  const headers = { 'x-service-api-key': s.apiKey };
  const r = await runLoad({
    pool: p, concurrency: 16, count: n, maxSeconds,
    request: () => ({ method: 'POST', path: '/v1/service/challenge', headers }),
    onResponse: (_i, status, text) => {
      if (status !== 200) return false;
      out.push((JSON.parse(text) as { challenge: string }).challenge);
      return true;
    },
  });
  if (r.errors) throw new Error(`challenge: ${r.errors} errors (${r.firstError})`);
  return out;
}

/** What a bundle is kept as: the verify body, or the gateway header value. */
export type BundleForm = 'verify' | 'header';

/**
 * Runs present for each challenge at `concurrency`; returns the load result
 * (present's own figures) and the bundles in the requested form.
 */
export async function presentAll(p: Pool, s: Setup, challenges: readonly string[], concurrency: number, form: BundleForm, maxSeconds: number):
  Promise<{ result: LoadResult; bundles: string[] }> {
  const bundles: string[] = [];
  const path = `/v1/service/connections/${s.connectionId}/agents/${s.agentId}/present`;
  const headers = { 'x-service-api-key': s.apiKey, 'content-type': 'application/json' };
  const result = await runLoad({
    pool: p, concurrency, count: challenges.length, maxSeconds,
    request: (i) => ({ method: 'POST', path, headers, body: `{"challenge":"${challenges[i]}"}` }),
    onResponse: (_i, status, text) => {
      if (status !== 200) return false;
      const r = JSON.parse(text) as { proof_bundle: unknown; proof_header: string };
      bundles.push(form === 'header' ? r.proof_header : JSON.stringify({ proof_bundle: r.proof_bundle, required_scope: s.scope }));
      return true;
    },
  });
  return { result, bundles };
}

/** Challenges + presents `n` bundles (concurrency 16), unmeasured. */
export async function makeBundles(p: Pool, s: Setup, n: number, form: BundleForm, maxSeconds: number): Promise<string[]> {
  const deadline = Date.now() + maxSeconds * 1000;
  const ch = await makeChallenges(p, s, n, maxSeconds);
  const left = Math.max(1, (deadline - Date.now()) / 1000);
  const { result, bundles } = await presentAll(p, s, ch, 16, form, left);
  if (result.errors) throw new Error(`present: ${result.errors} errors (${result.firstError})`);
  return bundles;
}
