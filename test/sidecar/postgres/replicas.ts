/**
 * Sidecar replicas as real processes on one PostgreSQL database, for the
 * multi-replica tests: each is the sidecar compiled from the current sources
 * (`node <main.js>`, as `npm start` runs dist/; test/helpers/compiled-sidecar.ts:
 * about 1.4 CPU s less per start than tsx) with its own port and data
 * directory, the shared `SIDECAR_DATABASE_URL` and master key, and a real SMTP
 * sink. `fixtures/replica.mjs` can be started instead (plain node, on the same compiled build) when a test
 * needs build options that have no setting (the webhook worker's lease).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { freePort } from '../../helpers/net.js';
import { supervise } from '../../helpers/supervise.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';
import { Client, remoteSidecar, startMailSink } from '../../helpers/sidecar.js';
import type { MailSink, TestSidecar } from '../../helpers/sidecar.js';
import { parsePrometheusText, sampleValue } from '../ops/helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** A running replica. */
export interface Replica {
  readonly name: string;
  readonly url: string;
  /** For the flow helpers (login, onboard, specFlow). */
  readonly sc: TestSidecar;
  readonly proc: ChildProcess;
  output(): string;
  /** SIGTERM, then SIGKILL after 10 s; resolves to the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL at once; resolves when the process is gone. */
  kill9(): Promise<void>;
  /** One sample of a metric family from /metrics (undefined when absent). */
  metric(family: string, sample?: string, labels?: Record<string, string>): Promise<number | undefined>;
}

/** What every replica of a group shares. */
export interface ReplicaGroup {
  readonly dbUrl: string;
  readonly masterKey: string;
  readonly mail: MailSink;
}

/** A new base64 master key. */
export const newMasterKey = (): string => crypto.randomBytes(32).toString('base64');

/**
 * What a test's replicas share, new: a database of `pg`, a master key and a mail sink (closed in
 * `t`'s teardown).
 */
export async function newReplicaGroup(t: Test, pg: { createDatabase(): Promise<string> }): Promise<ReplicaGroup> {
  const mail = await startMailSink();
  t.teardown(() => mail.close());
  return { dbUrl: await pg.createDatabase(), masterKey: newMasterKey(), mail };
}

/**
 * Starts one replica; resolves once `/readyz` answers 200 (at most 60 s). `entry` is a script to
 * run instead of the compiled sidecar's main.js, with AUTHZ_TEST_COMPILED set to that build's root (see the file
 * header).
 * The process is killed in `t`'s teardown.
 */
export async function startReplica(t: Test, g: ReplicaGroup, name: string,
  o: { env?: Record<string, string>; entry?: string } = {}): Promise<Replica> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `authz-${name}-`));
  const main = await compiledSidecarMain();
  const argv = o.entry !== undefined ? [o.entry] : [main];
  const child = spawn(process.execPath, argv, {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir,
      SIDECAR_SMTP_URL: g.mail.url, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'warn', SIDECAR_SEND_CODE_PER_MINUTE: '1000',
      SIDECAR_DATABASE_URL: g.dbUrl, SIDECAR_MASTER_KEY: g.masterKey, SIDECAR_WEBHOOK_ALLOW_INSECURE: '1',
      SIDECAR_CRYPTO_WORKERS: '1', SIDECAR_DATABASE_POOL_MAX: '8',
      AUTHZ_TEST_COMPILED: path.dirname(path.dirname(main)), ...o.env,
    },
  });
  const proc = supervise(child);
  const url = `http://127.0.0.1:${port}`;
  const r: Replica = {
    name, url, proc: child, sc: remoteSidecar(url, g.mail), output: proc.output,
    stop: () => proc.stop('SIGTERM', 10_000),
    kill9: async () => { await proc.stop('SIGKILL', 5_000); },
    async metric(family, sample = family, labels = {}) {
      const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
      return sampleValue(parsePrometheusText(text), family, sample, labels);
    },
  };
  t.teardown(async () => { await proc.stop('SIGKILL', 5_000); fs.rmSync(dataDir, { recursive: true, force: true }); });
  await proc.ready(url, `replica ${name}`);
  return r;
}

/** Starts `n` replicas named A, B, C, … at once. */
export function startReplicas(t: Test, g: ReplicaGroup, n: number, o: { env?: Record<string, string> } = {}): Promise<Replica[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => startReplica(t, g, String.fromCharCode(65 + i), o)));
}

/** A client of replica `r` that carries the cookies (session, CSRF) of `from`. */
export function sameSession(from: Client, r: Replica): Client {
  const c = new Client(r.url);
  for (const [k, v] of from.jar) c.jar.set(k, v);
  c.apiKey = from.apiKey;
  return c;
}

/** A platform client (API key) of `key` on replica `r`. */
export function platformOn(r: Replica, apiKey: string): Client {
  const c = new Client(r.url);
  c.apiKey = apiKey;
  return c;
}
