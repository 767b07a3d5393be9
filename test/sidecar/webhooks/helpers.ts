/**
 * Fixtures for the webhook worker tests: a real SQLite store in a temp dir,
 * a real secret box, platform and outbox rows, and a real `node:http`
 * receiver on 127.0.0.1 whose answers are scripted per request.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Db } from '../../../sidecar/store/sqlite/db.js';
import { SqliteOutboxStore, insertOutboxEvent } from '../../../sidecar/store/sqlite/outbox.js';
import { AAD, createSecretBox } from '../../../sidecar/secrets.js';
import type { SecretBox } from '../../../sidecar/secrets.js';
import type { WorkerLogger } from '../../../sidecar/webhooks/worker.js';

/** A migrated database in a fresh temp dir, with a box and the outbox store. */
export interface Fixture {
  dir: string;
  db: Db;
  box: SecretBox;
  outbox: SqliteOutboxStore;
  accountId: string;
  close(): void;
}

export function openFixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), 'authz-webhooks-'));
  const db = new Db({ file: join(dir, 'sidecar.db') });
  db.migrate();
  const box = createSecretBox(randomBytes(32));
  const accountId = randomUUID();
  db.run(`INSERT INTO accounts (id, email, onboarding_step, created_at) VALUES (?, ?, 'complete', ?)`, accountId, `${accountId}@example.test`, 0);
  return {
    dir, db, box, outbox: new SqliteOutboxStore(db), accountId,
    close() {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Inserts a platform row with a sealed webhook secret; returns its id. */
export function addPlatform(f: Fixture, callbackUrl: string | null, secret: string): string {
  const id = randomUUID();
  f.db.run(
    `INSERT INTO platforms (id, account_id, name, description, surface_type, publish_state, default_allowed_scopes,
       callback_url, callback_disabled_at, signing_secret_enc, webhook_secret_enc, expires_at, created_at)
     VALUES (?, ?, 'p', '', 'agentic_api', 'draft', '[]', ?, NULL, ?, ?, 0, 0)`,
    id, f.accountId, callbackUrl,
    Buffer.from(f.box.seal(randomBytes(16), AAD.signingSecret(id))),
    Buffer.from(f.box.seal(Buffer.from(secret, 'utf8'), AAD.webhookSecret(id))),
  );
  return id;
}

/** Enqueues an event the way the lead's stores do (inside a tx); returns the delivery id and the exact body bytes. */
export function enqueue(f: Fixture, platformId: string, createdAt: number, fields: Record<string, unknown> = {}): { id: string; body: Buffer } {
  const id = randomUUID();
  const body = Buffer.from(JSON.stringify({
    event: 'delegation.revoked', cert_id: `cert-${randomUUID()}`, agent_id: randomUUID(), connection_id: randomUUID(),
    org_id: f.accountId, reason: 'test', ...fields, delivery_id: id, occurred_at: new Date(createdAt).toISOString(),
  }), 'utf8');
  f.db.tx(() => insertOutboxEvent(f.db, {
    id, accountId: f.accountId, platformId, connectionId: null, eventType: 'delegation.revoked',
    bodyEnc: f.box.seal(body, AAD.outboxBody(id)), createdAt,
  }));
  return { id, body };
}

/** One request as the receiver saw it. */
export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** What the scripted receiver does with one request. */
export type Answer =
  | { status: number; headers?: Record<string, string>; body?: string }
  | { hang: true };

/** A real HTTP receiver on 127.0.0.1 answering from a script (default 204). */
export interface TestReceiver {
  url: string;
  port: number;
  requests: Received[];
  /** TCP connections accepted (SSRF tests assert this stays 0). */
  connections: number;
  /** Answers for the next requests, in order; afterwards `fallback`. */
  script: Answer[];
  fallback: Answer;
  close(): Promise<void>;
}

export async function startReceiver(path = '/hook'): Promise<TestReceiver> {
  const sockets = new Set<Socket>();
  const r: TestReceiver = {
    url: '', port: 0, requests: [], connections: 0, script: [], fallback: { status: 204 },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      const a = r.script.shift() ?? r.fallback;
      if ('hang' in a) return; // never answer; the client must time out
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body ?? '');
    });
  });
  server.on('connection', (s: Socket) => {
    r.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}${path}`;
  return r;
}

/** A pino-compatible logger that keeps the lines (and checks no secret leaks into them). */
export function memoryLogger(): WorkerLogger & { lines: { level: string; obj: object; msg?: string }[] } {
  const lines: { level: string; obj: object; msg?: string }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => { lines.push({ level, obj, ...(msg === undefined ? {} : { msg }) }); };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** The outbox row of a delivery (test assertions). */
export function row(f: Fixture, id: string): { state: string; attempts: number; next_attempt_at: number; lease_until: number | null; last_status: number | null; last_error: string | null } {
  return f.db.get(`SELECT state, attempts, next_attempt_at, lease_until, last_status, last_error FROM outbox WHERE id = ?`, id)!;
}
