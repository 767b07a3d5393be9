/**
 * `agent-authz-sidecar backup <file>` (`npm run backup -- <file>`): an online
 * backup of the sidecar's database.
 *
 * Reads the configuration from the same `SIDECAR_*` environment variables as
 * the sidecar (`SIDECAR_DATA_DIR`), and copies
 * `<data dir>/agent-authz.sqlite` to `<file>` with SQLite's backup API on a
 * separate connection, so it can run while the sidecar serves requests. The
 * file is a consistent snapshot; the existing file is never overwritten.
 *
 * The backup holds sealed secrets and private keys: restoring it needs the
 * SAME master key (`SIDECAR_MASTER_KEY`, or the `master.key` file of the data
 * directory). Restore: docs/operations.md.
 *
 * Exit codes: 0 written, 1 backup failed, 2 usage or configuration error.
 */
import path from 'node:path';
import { ConfigError, loadConfig } from './config/index.js';
import { DB_FILE_NAME } from './store/index.js';
import { backupDatabase } from './store/sqlite/backup.js';

const USAGE = 'usage: agent-authz-sidecar backup <backup-file>   (environment: SIDECAR_DATA_DIR)';

/** Runs the backup command with its arguments (after `backup`); resolves to the exit code. */
export async function runBackupCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (argv.length !== 1 || argv[0]!.startsWith('-')) {
    process.stderr.write(`agent-authz backup: ${USAGE}\n`);
    return 2;
  }
  let dataDir: string;
  try {
    const c = loadConfig();
    if (c.database) {
      process.stderr.write('agent-authz backup: SIDECAR_DATABASE_URL is set: back up the PostgreSQL database with '
        + 'pg_dump or point-in-time recovery (docs/storage.md)\n');
      return 2;
    }
    ({ dataDir } = c);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agent-authz backup: configuration error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const src = path.join(dataDir, DB_FILE_NAME);
  try {
    const r = await backupDatabase(src, argv[0]!);
    process.stdout.write(`${JSON.stringify({ backup: r.file, source: src, bytes: r.bytes, pages: r.pages, schema_version: r.schemaVersion })}\n`);
    process.stderr.write('agent-authz backup: done. The backup is only usable with the same master key; keep '
      + 'SIDECAR_MASTER_KEY (or master.key) safe and separate.\n');
    return 0;
  } catch (err) {
    process.stderr.write(`agent-authz backup: failed: ${(err as Error).message}\n`);
    return err instanceof TypeError ? 2 : 1;
  }
}
