/**
 * `agent-authz-sidecar copy-to-postgres`: moves the SQLite store of
 * `SIDECAR_DATA_DIR` into the empty PostgreSQL database of
 * `SIDECAR_DATABASE_URL`, verifies the copy table by table, and prints the
 * row counts as one JSON line. Stop the sidecar first: rows written to the
 * SQLite file after the copy's snapshot are not copied.
 *
 * `SIDECAR_MASTER_KEY` must be the key the SQLite store was created with
 * (the value, not the master.key file: every replica needs it); the command
 * checks it against the store's key-check value before copying anything.
 *
 * Exit codes: 0 copied and verified, 1 copy failed (nothing is left half
 * copied: the target is written in one transaction), 2 usage or configuration.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from './config/index.js';
import type { SidecarConfig } from './config/index.js';
import { DB_FILE_NAME, openSqliteStore } from './store/index.js';
import { copySqliteToPostgres, TargetNotEmptyError } from './store/copy.js';
import { checkMasterKey, MasterKeyMismatchError } from './store/key-check.js';
import { createSecretBox } from './secrets.js';

const USAGE = 'usage: agent-authz-sidecar copy-to-postgres   (environment: SIDECAR_DATA_DIR, SIDECAR_DATABASE_URL, SIDECAR_MASTER_KEY)';

/** Runs the command with its arguments (after `copy-to-postgres`); resolves to the exit code. */
export async function runCopyCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const fail = (code: number, msg: string): number => { process.stderr.write(`agent-authz copy-to-postgres: ${msg}\n`); return code; };
  if (argv.length > 0) return fail(2, USAGE);
  let config: SidecarConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) return fail(2, `configuration error: ${err.message}`);
    throw err;
  }
  if (!config.database) return fail(2, 'SIDECAR_DATABASE_URL is not set: it names the empty PostgreSQL database to copy into');
  const file = path.join(config.dataDir, DB_FILE_NAME);
  if (!fs.existsSync(file)) return fail(2, `no SQLite store at ${file} (set SIDECAR_DATA_DIR)`);
  try {
    // The key must open the source's secrets before anything is copied (stored now if the store predates the check).
    const src = openSqliteStore({ file });
    try { await checkMasterKey(src, createSecretBox(config.masterKey!)); } finally { await src.close(); }
    const counts = await copySqliteToPostgres(file, config.database);
    process.stdout.write(`${JSON.stringify({ copied: counts, source: file, verified: true })}\n`);
    process.stderr.write('agent-authz copy-to-postgres: done and verified. Start the sidecars with '
      + 'SIDECAR_DATABASE_URL and the same SIDECAR_MASTER_KEY; keep the SQLite file as a backup.\n');
    return 0;
  } catch (err) {
    if (err instanceof MasterKeyMismatchError || err instanceof TargetNotEmptyError) return fail(1, (err as Error).message);
    return fail(1, `failed, nothing was committed to the target: ${(err as Error).message}`);
  }
}
