/**
 * Helpers of the audit tests: a real audit trail in a real SQLite file (two
 * accounts' chains written by the store's decision commits, checkpoints signed
 * with the real service key by the real checkpoint job; {@link writeTrail}
 * writes the same into any store, PostgreSQL too), copies of it to tamper
 * with directly, and the verify command run in-process with its output kept.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import Database from 'better-sqlite3';
import { DB_FILE_NAME, openSqliteStore } from '../../../sidecar/store/index.js';
import { createSecretBox } from '../../../sidecar/secrets.js';
import { loadCheckpointSigner } from '../../../sidecar/audit/signer.js';
import type { CheckpointSigner } from '../../../sidecar/audit/signer.js';
import type { Store } from '../../../sidecar/store/types.js';
import { CheckpointJob } from '../../../sidecar/audit/checkpoints.js';
import { runAuditCommand } from '../../../sidecar/audit/verify-command.js';
import { NOW, seed } from '../store/contract-fixtures.js';
import type { Seeded } from '../store/contract-fixtures.js';
import { decideOnce } from '../store/contract-audit.js';

/** A trail on disk. */
export interface Trail { dir: string; file: string; accounts: Seeded[]; keyId: string; masterKey: Uint8Array }

/**
 * Writes `rows` decisions for each of two accounts into a fresh database, with a checkpoint
 * after every `every` rows (the checkpoint job, `rows` = every), then closes it.
 */
export async function makeTrail(t: { teardown(fn: () => unknown): void }, rows = 12, every = 5): Promise<Trail> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-audit-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, DB_FILE_NAME);
  const store = openSqliteStore({ file });
  const masterKey = new Uint8Array(crypto.randomBytes(32));
  try {
    return { dir, file, masterKey, ...(await writeTrail(store, masterKey, rows, every)) };
  } finally {
    await store.close();
  }
}

/**
 * Writes `rows` decisions for each of two new accounts into `store` (left open), with the
 * checkpoint job run after each round (`every` rows per checkpoint) and the service key
 * sealed under `masterKey`.
 */
export async function writeTrail(store: Store, masterKey: Uint8Array, rows = 12, every = 5): Promise<{ accounts: Seeded[]; keyId: string }> {
  const signer = await loadCheckpointSigner(store.audit, createSecretBox(masterKey), NOW);
  let now = NOW;
  const job = new CheckpointJob({ store: store.audit, signer, clock: () => now, rows: every, seconds: 86_400, log: { error: () => undefined } });
  const accounts = [await seed(store, { credits: 1e9 }), await seed(store, { credits: 1e9 })];
  for (let i = 0; i < rows; i++) {
    for (const x of accounts) await decideOnce(store, x, { createdAt: NOW + i * 1000 });
    now += 1000;
    await job.runOnce();
  }
  return { accounts, keyId: signer.keyId };
}

/** A copy of the trail's database to tamper with (the WAL was checkpointed by close()). */
export function copyOf(trail: Trail, name: string): string {
  const f = path.join(trail.dir, `${name}.sqlite`);
  fs.copyFileSync(trail.file, f);
  return f;
}

/** Runs `fn` on a raw connection to `file`, as someone with write access to the file would. */
export function tamper(file: string, fn: (db: Database.Database) => void): void {
  const db = new Database(file);
  try { fn(db); } finally { db.close(); }
}

/** `audit verify` in-process (with `env` for its defaults, else the process's): exit code and output. */
export async function verifyCli(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runAuditCommand(['verify', ...args], { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; } }, env);
  return { code, stdout, stderr };
}

/** The signer of the trail (opened with its master key) or a stranger's key in a throwaway store. */
export async function signerOf(file: string, masterKey: Uint8Array): Promise<CheckpointSigner> {
  const store = openSqliteStore({ file });
  try {
    return await loadCheckpointSigner(store.audit, createSecretBox(masterKey), NOW);
  } finally {
    await store.close();
  }
}
