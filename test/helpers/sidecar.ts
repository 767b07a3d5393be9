/**
 * Test harness for the sidecar: a real SMTP receiver (smtp-server), a real
 * sidecar listening on 127.0.0.1 with a temp-dir SQLite file and a
 * controllable clock, and an HTTP client with a cookie jar that follows the
 * spec's flow (login → onboarding → platform → agent → delegation → proofs).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import type { BuildOptions, SidecarServer } from '../../sidecar/server.js';
import { configWith } from '../../sidecar/config/index.js';
import type { SidecarConfig } from '../../sidecar/config/index.js';

/** A real SMTP receiver on loopback that keeps every message. */
export interface MailSink {
  url: string;
  messages: { to: string; raw: string }[];
  /** The newest 6-digit code sent to `to` (waits up to 5 s). */
  codeFor(to: string): Promise<string>;
  close(): Promise<void>;
}

/** Starts an SMTP receiver on 127.0.0.1 (no auth, no TLS). */
export async function startMailSink(): Promise<MailSink> {
  const messages: { to: string; raw: string }[] = [];
  const server = new SMTPServer({
    authOptional: true, disabledCommands: ['STARTTLS'], logger: false,
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        for (const r of session.envelope.rcptTo) messages.push({ to: r.address, raw: Buffer.concat(chunks).toString('utf8') });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async codeFor(to) {
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        const m = [...messages].reverse().find((x) => x.to === to);
        const code = m && /sign-in code is (\d{6})/.exec(m.raw)?.[1];
        if (code) return code;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no code e-mailed to ${to}`);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A controllable clock (Unix ms). */
export class TestClock {
  t: number;
  constructor(t: number = Date.now()) {
    this.t = t;
  }
  now = (): number => this.t;
  advance(ms: number): void { this.t += ms; }
}

/** A running sidecar for tests. */
export interface TestSidecar {
  app: SidecarServer;
  url: string;
  mail: MailSink;
  clock: TestClock;
  dataDir: string;
  config: SidecarConfig;
  close(): Promise<void>;
}

/**
 * Crypto worker threads of a test sidecar unless a test sets `cryptoWorkers`: one, so every signature and check
 * still takes the worker path the sidecar takes in production (`defaultCryptoWorkers()` is 2 on two cores), for
 * half the start-up cost (each worker loads the crypto code through tsx: about 0.65 CPU s). Tests whose point is
 * the pool's parallelism, or the count, set it (crypto-pool, decide/concurrency, routes/present-race).
 */
export const TEST_CRYPTO_WORKERS = 1;

/** Starts a sidecar on 127.0.0.1:0 with a fresh data dir and a real SMTP receiver. */
export async function startSidecar(overrides: Partial<SidecarConfig> = {}, opts: BuildOptions & { clock?: never } = {}): Promise<TestSidecar> {
  const mail = await startMailSink();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-test-'));
  const clock = new TestClock();
  const config = configWith({
    dataDir, port: 0, smtpUrl: mail.url, insecureCookies: true, webhookAllowInsecure: true, logLevel: 'silent',
    sendCodePerMinute: 1000, cryptoWorkers: TEST_CRYPTO_WORKERS, ...overrides,
  });
  // Loaded here, not at the top: files that use only the other helpers (a remote sidecar, the mail
  // sink) do not load the whole server (about 3 CPU s under tsx).
  const { buildServer } = await import('../../sidecar/server.js');
  const app = await buildServer(config, { ...opts, clock: clock.now });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  return {
    app, url: `http://127.0.0.1:${port}`, mail, clock, dataDir, config,
    async close() {
      await app.close();
      await mail.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A response as the tests see it. */
export interface Res {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

/** An HTTP client with a cookie jar and the CSRF header, against one sidecar. */
export class Client {
  readonly jar = new Map<string, string>();
  apiKey: string | undefined;
  readonly base: string;
  constructor(base: string) {
    this.base = base;
  }

  /** Sends a request; `auth` adds the CSRF header (from the jar) and/or the API key. */
  async req(method: string, p: string, body?: unknown, o: { csrf?: boolean | string; apiKey?: string | null; headers?: Record<string, string>; raw?: string } = {}): Promise<Res> {
    const headers: Record<string, string> = { ...o.headers };
    if (this.jar.size) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (o.csrf !== false && (o.csrf === true || typeof o.csrf === 'string' || method !== 'GET')) {
      const t = typeof o.csrf === 'string' ? o.csrf : this.jar.get('service_csrf');
      if (t) headers['x-service-csrf'] = t;
    }
    const key = o.apiKey === null ? undefined : o.apiKey ?? this.apiKey;
    if (key) headers['x-service-api-key'] = key;
    let payload: string | undefined = o.raw;
    if (body !== undefined) { payload = JSON.stringify(body); }
    if (payload !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
    const r = await fetch(this.base + p, { method, headers, ...(payload !== undefined ? { body: payload } : {}) });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      const name = pair!.slice(0, i);
      const value = pair!.slice(i + 1);
      if (value === '' || /max-age=0|expires=thu, 01 jan 1970/i.test(c)) this.jar.delete(name); else this.jar.set(name, value);
    }
    const text = await r.text();
    let parsed: unknown = undefined;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: r.status, headers: r.headers, body: parsed, text };
  }

  post(p: string, body?: unknown, o?: Parameters<Client['req']>[3]): Promise<Res> { return this.req('POST', p, body, o); }
  get(p: string, o?: Parameters<Client['req']>[3]): Promise<Res> { return this.req('GET', p, undefined, o); }
}

/** Logs in through send-code / verify-code with the code read from the SMTP receiver. */
export async function login(sc: TestSidecar, email: string): Promise<Client> {
  const c = new Client(sc.url);
  const s = await c.post('/v1/auth/email/send-code', { email });
  if (s.status !== 200) throw new Error(`send-code: ${s.status} ${s.text}`);
  const code = await sc.mail.codeFor(email);
  const v = await c.post('/v1/auth/email/verify-code', { email, code });
  if (v.status !== 200) throw new Error(`verify-code: ${v.status} ${v.text}`);
  return c;
}

/** Logs in and completes onboarding as an individual. */
export async function onboard(sc: TestSidecar, email: string): Promise<Client> {
  const c = await login(sc, email);
  const p = await c.post('/v1/auth/onboarding/profile', { first_name: 'Ada', last_name: 'Lovelace' });
  if (p.status !== 200) throw new Error(`profile: ${p.status} ${p.text}`);
  const t = await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' });
  if (t.status !== 200) throw new Error(`account-type: ${t.status} ${t.text}`);
  return c;
}

/** Everything the spec flow creates up to an approved delegation. */
export interface Flow {
  user: Client;
  platform: Client;
  reg: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  agentId: string;
  requestId: string;
  certId: string;
}

/** Runs the spec flow from login to an approved certificate. */
export async function specFlow(sc: TestSidecar, email: string, o: {
  scopes?: string[]; approve?: string[]; constraints?: unknown; expiresAt?: string; callbackUrl?: string;
} = {}): Promise<Flow> {
  const user = await onboard(sc, email);
  const reg = await user.post('/v1/service/platforms/personal', {
    name: 'Test platform', surface_type: 'agentic_api', default_allowed_scopes: o.scopes ?? ['data:read', 'data:write', 'payments:send'],
    ...(o.callbackUrl ? { callback_url: o.callbackUrl } : {}),
  });
  if (reg.status !== 200) throw new Error(`platform: ${reg.status} ${reg.text}`);
  const platform = new Client(sc.url);
  platform.apiKey = reg.body.api_key;
  const agent = await platform.post(`/v1/service/connections/${reg.body.connection_id}/agents`, { name: 'agent-1', agent_type: 'api_agent' });
  if (agent.status !== 200) throw new Error(`agent: ${agent.status} ${agent.text}`);
  const sr = await user.post('/v1/service/delegations/self-request', { connection_id: reg.body.connection_id });
  if (sr.status !== 200) throw new Error(`self-request: ${sr.status} ${sr.text}`);
  const ap = await user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, {
    approved_scope: o.approve ?? ['data:read'],
    ...(o.constraints !== undefined ? { constraints: o.constraints } : {}),
    ...(o.expiresAt !== undefined ? { expires_at: o.expiresAt } : {}),
  });
  if (ap.status !== 200) throw new Error(`approve: ${ap.status} ${ap.text}`);
  return { user, platform, reg: reg.body, agentId: agent.body.agent_id, requestId: sr.body.request_id, certId: ap.body.cert_id };
}

/** challenge + present for the flow's agent; returns the bundle. */
export async function present(f: Flow, audience: Client = f.platform): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const ch = await audience.post('/v1/service/challenge');
  if (ch.status !== 200) throw new Error(`challenge: ${ch.status} ${ch.text}`);
  const pr = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
  if (pr.status !== 200) throw new Error(`present: ${pr.status} ${pr.text}`);
  return pr.body.proof_bundle;
}

/**
 * Adapts a sidecar reached only by URL (a child process) plus its mail sink
 * to the `TestSidecar` shape that {@link login}, {@link onboard} and
 * {@link specFlow} take: they use only `url` and `mail`. Every other member
 * throws when read (there is no in-process server, clock or config).
 */
export function remoteSidecar(url: string, mail: MailSink): TestSidecar {
  const absent = (name: string): never => { throw new Error(`remoteSidecar(${url}): ${name} is not available for a sidecar reached by URL`); };
  return {
    url, mail,
    get app(): SidecarServer { return absent('app'); },
    get clock(): TestClock { return absent('clock'); },
    get dataDir(): string { return absent('dataDir'); },
    get config(): SidecarConfig { return absent('config'); },
    async close() { /* the caller owns the process and the mail sink */ },
  };
}

/**
 * Adds another agent to the flow's connection and approves a delegation for
 * it (self-request with `agent_id`). Returns a Flow for the new agent (same
 * user, platform and connection), usable with {@link present}.
 */
export async function delegateAgent(f: Flow, name: string, o: { approve: string[]; constraints?: unknown; expiresAt?: string }): Promise<Flow> {
  const agent = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents`, { name, agent_type: 'api_agent' });
  if (agent.status !== 200) throw new Error(`agent: ${agent.status} ${agent.text}`);
  const sr = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id, agent_id: agent.body.agent_id });
  if (sr.status !== 200) throw new Error(`self-request: ${sr.status} ${sr.text}`);
  const ap = await f.user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, {
    approved_scope: o.approve,
    ...(o.constraints !== undefined ? { constraints: o.constraints } : {}),
    ...(o.expiresAt !== undefined ? { expires_at: o.expiresAt } : {}),
  });
  if (ap.status !== 200) throw new Error(`approve: ${ap.status} ${ap.text}`);
  return { ...f, agentId: agent.body.agent_id, requestId: sr.body.request_id, certId: ap.body.cert_id };
}

/** Present for the flow's agent on a given challenge (e.g. one a gateway handed out); returns the raw response. */
export function presentChallenge(f: Flow, challenge: string): Promise<Res> {
  return f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge });
}

/** The tap assertions {@link expectError} uses. */
export type ErrorAsserts = { equal: (...a: any[]) => unknown; type: (...a: any[]) => unknown; notMatch: (...a: any[]) => unknown }; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Asserts an error response: status, code, the spec's error shape, and no stack trace in the body. */
export function expectError(t: ErrorAsserts, res: Res, status: number, code: string, msg = code): void {
  t.equal(res.status, status, `${msg}: status ${status}`);
  t.equal(res.body?.error?.code, code, `${msg}: code ${code}`);
  t.equal(res.body?.error?.status, status, `${msg}: error.status`);
  t.type(res.body?.error?.message, 'string', `${msg}: error.message`);
  t.notMatch(res.text, /\n\s+at |\.ts:\d+|node_modules/, `${msg}: no stack trace`);
}
