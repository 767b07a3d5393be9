/**
 * Online backup of the SQLite database file, safe while a sidecar is running:
 * a separate connection copies the database page by page with SQLite's backup
 * API (restarting the copy when the source is written in between), so the
 * result is a consistent snapshot that includes committed WAL content.
 *
 * The copy is written next to the destination as `<dest>.partial`, checked
 * with `PRAGMA quick_check`, then renamed into place: a failed or interrupted
 * backup never leaves a truncated file under the final name.
 */
import fs from 'node:fs';
import path from 'node:path';
import { openDatabase } from './driver.js';

/** Statements kept reachable for the life of the process (see backupDatabase). */
const KEEP: unknown[] = [];

/** What {@link backupDatabase} wrote. */
export interface BackupResult {
  /** Absolute path of the backup file. */
  file: string;
  /** Size in bytes. */
  bytes: number;
  /** Database pages copied. */
  pages: number;
  /** Highest applied schema migration in the copy. */
  schemaVersion: number;
}

/**
 * Copies the database `srcFile` to `destFile` online. Refuses to overwrite an
 * existing `destFile` (TypeError) and a missing `srcFile` (TypeError).
 */
export async function backupDatabase(srcFile: string, destFile: string): Promise<BackupResult> {
  const dest = path.resolve(destFile);
  if (!fs.existsSync(srcFile)) throw new TypeError(`no database at ${srcFile}`);
  if (fs.existsSync(dest)) throw new TypeError(`${dest} exists; choose a new file name`);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const partial = `${dest}.partial`;
  fs.rmSync(partial, { force: true });

  const dbOpts = { fileMustExist: true };
  const src = openDatabase(srcFile, dbOpts);
  let pages = 0;
  try {
    src.exec('PRAGMA busy_timeout = 5000');
    const r = await src.backup(partial);
    pages = r.totalPages;
  } catch (err) {
    fs.rmSync(partial, { force: true });
    throw err;
  } finally {
    src.close();
  }

  let schemaVersion = 0;
  const copy = openDatabase(partial, dbOpts);
  try {
    // The copy keeps the source's WAL flag; a single-file rollback journal is simpler to move around.
    copy.exec('PRAGMA journal_mode = DELETE');
    // Statements stay referenced until the process ends: on Node >= 24.19 a collected
    // better-sqlite3 (< 13) Statement aborts the process (see Db.stmt()).
    const checkStmt = copy.prepare('PRAGMA quick_check').pluck();
    const versionStmt = copy.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').pluck();
    KEEP.push(checkStmt, versionStmt);
    const check = checkStmt.get();
    if (check !== 'ok') throw new Error(`backup copy failed quick_check: ${String(check)}`);
    schemaVersion = versionStmt.get() as number;
  } catch (err) {
    copy.close();
    fs.rmSync(partial, { force: true });
    throw err;
  }
  copy.close();
  fs.renameSync(partial, dest);
  return { file: dest, bytes: fs.statSync(dest).size, pages, schemaVersion };
}
