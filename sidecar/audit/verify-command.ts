/**
 * `agent-authz-sidecar audit verify`: checks an audit trail offline, a
 * database (a SQLite file or a PostgreSQL database, both only read) or an
 * account's export file, and reports the first broken row of each account.
 * Needs no master key and no running sidecar.
 *
 *   agent-authz-sidecar audit verify [--db FILE | --database-url URL | --export FILE] [--key-id ID]... [--json]
 *
 * Without a source flag it reads the database the sidecar itself would use:
 * PostgreSQL when `SIDECAR_DATABASE_URL` is set (with its `SIDECAR_DATABASE_*`
 * companions), else `$SIDECAR_DATA_DIR/agent-authz.sqlite` (default `./data`).
 * A PostgreSQL database is read in one REPEATABLE READ, READ ONLY snapshot, so
 * it can be checked while the replicas write. `--key-id` pins the trusted
 * checkpoint key (repeatable); without it the keys stored in the trail itself
 * are used, which proves the trail consistent but not who signed it.
 *
 * Exit codes ({@link VERIFY_EXIT}, docs/audit.md): 0 verified, 1 broken
 * (tampering or loss found), 2 usage, 3 the input cannot be read, 4 the
 * command cannot run (its own code fails to load — bin/agent-authz-sidecar.mjs
 * exits 4 then — or fails unexpectedly). 1 comes only from a check that ran to
 * the end: any other non-zero code means the trail was not checked. With
 * `--json` stdout holds one JSON document in every case ({@link VerifyJson}).
 */
import path from 'node:path';
import { ConfigError, databaseConfig } from '../config/index.js';
import type { DatabaseConfig } from '../config/index.js';
import { AuditSourceError, DB_FILE_NAME, openAuditSource, redactDatabaseUrl } from '../store/index.js';
import type { AuditSource } from '../store/types.js';
import { openExportSource } from './export-file.js';
import { verifyTrail } from './verify.js';
import type { TrailReport } from './verify.js';

/** The exit codes of `audit verify` (bin/agent-authz-sidecar.mjs repeats `cannotRun` for a load error). */
export const VERIFY_EXIT = { verified: 0, broken: 1, usage: 2, unreadable: 3, cannotRun: 4 } as const;

/** The `error.code` of a `--json` document for each exit code that is not a check's result. */
export const VERIFY_ERROR_CODE = { 2: 'usage', 3: 'unreadable', 4: 'cannot_run' } as const;

/**
 * The `--json` document on stdout: the report of a check that ran (exit 0 or 1), or why none ran (2, 3, 4;
 * the same message is on stderr).
 */
export type VerifyJson =
  | ({ exit: 0 | 1; source: string } & TrailReport)
  | { exit: 2 | 3 | 4; ok: false; error: { code: (typeof VERIFY_ERROR_CODE)[2 | 3 | 4]; message: string } };

/** Usage of the `audit` command. */
export const AUDIT_USAGE = 'audit verify [--db FILE | --database-url URL | --export FILE] [--key-id ID]... [--json]';

/** Where the command writes (tests capture it). */
export interface Out { stdout(s: string): void; stderr(s: string): void }
const processOut: Out = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) };

interface Args { db?: string; databaseUrl?: string; exportFile?: string; keyIds: string[]; json: boolean }

function parseArgs(argv: readonly string[]): Args | string {
  if (argv[0] !== 'verify') return `unknown audit subcommand ${JSON.stringify(argv[0] ?? '')}`;
  const a: Args = { keyIds: [], json: false };
  for (let i = 1; i < argv.length; i++) {
    const k = argv[i]!;
    const value = (): string | undefined => argv[++i];
    if (k === '--json') a.json = true;
    else if (k === '--db' || k === '--database-url' || k === '--export' || k === '--key-id') {
      const v = value();
      if (v === undefined || v === '') return `${k} needs a value`;
      if (k === '--db') a.db = v;
      else if (k === '--database-url') a.databaseUrl = v;
      else if (k === '--export') a.exportFile = v;
      else if (/^[0-9a-f]{32}$/.test(v)) a.keyIds.push(v);
      else return `--key-id: expected 32 lowercase hex characters, got ${JSON.stringify(v)}`;
    } else return `unknown argument ${JSON.stringify(k)}`;
  }
  if ([a.db, a.databaseUrl, a.exportFile].filter((x) => x !== undefined).length > 1) return '--db, --database-url and --export exclude each other';
  return a;
}

/** What to read: a file (database or export), or a PostgreSQL database. */
type Input = { kind: 'sqlite' | 'export'; file: string } | { kind: 'postgres'; database: DatabaseConfig };

/** The input of `a`, with the environment's defaults (see the file header); a string is a usage error. */
function inputOf(a: Args, env: NodeJS.ProcessEnv): Input | string {
  if (a.exportFile !== undefined) return { kind: 'export', file: a.exportFile };
  if (a.db !== undefined) return { kind: 'sqlite', file: a.db };
  try {
    const database = databaseConfig(a.databaseUrl !== undefined ? { ...env, SIDECAR_DATABASE_URL: a.databaseUrl } : env);
    if (database) return { kind: 'postgres', database };
  } catch (err) {
    if (err instanceof ConfigError) return a.databaseUrl !== undefined ? `--database-url: ${err.message.replace(/^SIDECAR_DATABASE_URL: /, '')}` : err.message;
    throw err;
  }
  return { kind: 'sqlite', file: path.join(path.resolve(env.SIDECAR_DATA_DIR || './data'), DB_FILE_NAME) };
}

function render(r: TrailReport, source: string): string {
  const out = [`audit verify: ${source}`];
  out.push(r.pinned ? `trusted keys (pinned): ${r.keyIds.join(', ') || 'none found'}`
    : `trusted keys (taken from the trail itself; pin with --key-id): ${r.keyIds.join(', ') || 'none'}`);
  for (const a of r.accounts) {
    const span = a.firstPosition === null ? 'no rows' : `rows ${a.firstPosition}–${a.lastPosition} (${a.rows})`;
    if (a.problem) {
      const p = a.problem;
      out.push(`account ${a.accountId}: BROKEN at ${p.position === null ? 'an unknown position' : `position ${p.position}`}`
        + `${p.eventId ? ` (event ${p.eventId})` : ''}: ${p.kind}: ${p.message}`);
    } else {
      out.push(`account ${a.accountId}: ok, ${span}, ${a.checkpoints} checkpoint(s), signed up to ${a.signedTo ?? 'none'}`);
    }
  }
  out.push(r.ok
    ? `result: verified: ${r.rows} row(s) in ${r.accounts.length} account(s); ${r.unsigned} row(s) after the last checkpoint are linked but not yet signed`
    : `result: BROKEN: ${r.problems.length} of ${r.accounts.length} account(s)`);
  return out.join('\n') + '\n';
}

/** Reports why no check ran (stderr, and the `--json` document when asked for); resolves to `exit`. */
function failed(out: Out, json: boolean, exit: 2 | 3 | 4, message: string, hint = ''): 2 | 3 | 4 {
  const doc: VerifyJson = { exit, ok: false, error: { code: VERIFY_ERROR_CODE[exit], message } };
  try {
    out.stderr(`agent-authz sidecar: ${exit === VERIFY_EXIT.usage ? '' : 'audit verify: '}${message}\n${hint}`);
    if (json) out.stdout(JSON.stringify(doc) + '\n');
  } catch { /* the output itself fails: the exit code still says why */ }
  return exit;
}

/**
 * Runs `audit ...` (`env` supplies the defaults); resolves to the exit code ({@link VERIFY_EXIT}), never rejects:
 * an unexpected failure is 4, so that 1 always means a check found the trail broken.
 */
export async function runAuditCommand(argv: readonly string[], out: Out = processOut, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const json = argv.includes('--json');
  let source: AuditSource | undefined;
  try {
    const a = parseArgs(argv);
    const input = typeof a === 'string' ? a : inputOf(a, env);
    if (typeof a === 'string' || typeof input === 'string') {
      return failed(out, json, VERIFY_EXIT.usage, String(input), `usage: agent-authz-sidecar ${AUDIT_USAGE}\n`);
    }
    const name = input.kind === 'postgres' ? redactDatabaseUrl(input.database.url) : input.file;
    const exported = input.kind === 'export' ? await openExportSource(input.file) : undefined;
    source = exported ?? await openAuditSource(input.kind === 'postgres' ? { database: input.database } : { file: input.file });
    const report = await verifyTrail(source, {
      partial: exported !== undefined, ...(exported ? { range: exported.range } : {}), ...(a.keyIds.length ? { pinnedKeyIds: a.keyIds } : {}),
    });
    const exit = report.ok ? VERIFY_EXIT.verified : VERIFY_EXIT.broken;
    const doc: VerifyJson = { exit, source: name, ...report };
    out.stdout(a.json ? JSON.stringify(doc) + '\n' : render(report, name));
    return exit;
  } catch (err) {
    if (err instanceof AuditSourceError) return failed(out, json, VERIFY_EXIT.unreadable, err.message);
    return failed(out, json, VERIFY_EXIT.cannotRun, `cannot run: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await source?.close().catch(() => undefined);
  }
}
