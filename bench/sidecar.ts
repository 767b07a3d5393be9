/**
 * The sidecar as a benchmark process: start it (`node --import tsx
 * sidecar/main.ts` with SIDECAR_* variables, on Node 24 for the native
 * backend) and stop it, retry a start that lost its port, and the data-dir
 * helpers of the store (fresh data dirs, database bytes after a checkpoint).
 */
import fs from 'node:fs';
import path from 'node:path';
import { BenchSeedDb, dbBytes } from './seed-db.js';
import { DB_FILE_NAME } from '../sidecar/store/index.js';
import { NODE24, NODE24_SQLITE_PRELOAD } from '../test/shared/node24.js';
import type { Backend } from './plan.js';
import { Child, childEnv, freePort, tsArgs, waitForHttp } from './procs.js';
import { log, sidecarTuningEnv, sleep } from './common.js';
import type { Run } from './common.js';

/** A running sidecar. */
export interface Sidecar { child: Child; url: string; dataDir: string; dbFile: string; backend: Backend }

/** Retries a start that lost the race for a port picked by freePort(). */
export async function retryPort<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
      log(`port taken; retrying (${(err as Error).message.split('\n')[0]})`);
    }
  }
}

/** Options of {@link startSidecar}: extra Node flags, a name for the logs, webhooks to loopback, more SIDECAR_* variables. */
export interface SidecarOptions { nodeFlags?: string[]; name?: string; webhooks?: boolean; env?: Readonly<Record<string, string>> }

/** Starts a sidecar on `dataDir` (a free port; retried if the port was taken) and waits for /readyz. */
export function startSidecar(run: Run, backend: Backend, dataDir: string, o: SidecarOptions = {}): Promise<Sidecar> {
  return retryPort(() => startSidecarOnce(run, backend, dataDir, o));
}

async function startSidecarOnce(run: Run, backend: Backend, dataDir: string, o: SidecarOptions): Promise<Sidecar> {
  const port = await freePort();
  const env = childEnv({
    SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir, SIDECAR_SMTP_URL: run.mail.url,
    SIDECAR_MASTER_KEY: run.masterKey, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_ALPHA_CREDITS: '100000000',
    SIDECAR_SEND_CODE_PER_MINUTE: '10000', SIDECAR_LOG_LEVEL: 'warn',
    // Bundles are made ahead of the measured steps: keep them fresh for the whole run.
    SIDECAR_CHALLENGE_TTL_SECONDS: '3600', SIDECAR_PROOF_FRESHNESS_SECONDS: '3600',
    ...(o.webhooks ? { SIDECAR_WEBHOOK_ALLOW_INSECURE: '1' } : {}),
    ...sidecarTuningEnv(),
    ...o.env,
  });
  delete env.NODE_ENV;
  const bin = backend === 'native' ? NODE24 : process.execPath;
  // On Node 24, better-sqlite3 comes from its Node 24 build (test/shared/node24-sqlite.mjs; run.sqlite24 made sure it exists).
  const preload = backend === 'native' ? ['--import', NODE24_SQLITE_PRELOAD] : [];
  const child = new Child(o.name ?? `sidecar(${backend})`, bin, tsArgs('sidecar/main.ts', [...preload, ...run.nodeFlags, ...(o.nodeFlags ?? [])]), env);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/readyz`, child, 60_000);
  return { child, url, dataDir, dbFile: path.join(dataDir, DB_FILE_NAME), backend };
}

/** Stops a sidecar; logs a warning when it does not exit with 0. */
export async function stopSidecar(s: Sidecar): Promise<void> {
  const code = await s.child.stop(15_000);
  if (code !== 0) log(`warning: ${s.child.name} exited with ${code}`);
}

/** Checkpoints the WAL into the file (from a second connection) and returns file + WAL bytes. */
export async function checkpointedBytes(dbFile: string): Promise<number> {
  const db = new BenchSeedDb(dbFile, { live: true });
  try {
    for (let i = 0; i < 40 && !db.checkpoint(); i++) await sleep(50);
  } finally {
    db.close();
  }
  return dbBytes(dbFile);
}

/** Verify tasks the sidecar counted so far by thread (`agent_authz_crypto_tasks_total`); undefined when /metrics cannot be read. */
export async function verifyThreads(url: string): Promise<{ main: number; worker: number } | undefined> {
  try {
    const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) return undefined;
    const text = await res.text();
    const count = (thread: string): number => {
      const m = new RegExp(`^agent_authz_crypto_tasks_total\\{op="verify",thread="${thread}"\\} (\\S+)$`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    };
    return { main: count('main'), worker: count('worker') };
  } catch {
    return undefined;
  }
}

/** Returns an empty directory `name` under the run's temp dir (removing what was there). */
export function freshDir(run: Run, name: string): string {
  const d = path.join(run.tmp, name);
  fs.rmSync(d, { recursive: true, force: true });
  fs.mkdirSync(d, { recursive: true });
  return d;
}
