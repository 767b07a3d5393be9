/**
 * A throwaway PostgreSQL server from Debian's `postgresql` package (major 15
 * or later, binaries in /usr/lib/postgresql/<major>/bin): a copy of a data
 * directory made once by `initdb` ({@link pristineDataDir}) in a temp dir,
 * `postgres` on a free loopback port with its socket in that dir. Run as
 * root, the server runs as the `postgres` user (initdb refuses root). Password
 * (SCRAM) authentication over TCP: sidecars connect as the role `authz` to
 * databases it owns; the caller administers as the superuser.
 *
 * Used by the PostgreSQL tests (test/helpers/postgres.ts adds the tap side:
 * teardown, skip or fail) and by the benchmark's PostgreSQL step, which keeps
 * the server's durability settings (`fast: false`).
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './ports.js';

/** Password of the `authz` role and the superuser in every test cluster (loopback only). */
const PASSWORD = `pw-${crypto.randomBytes(6).toString('hex')}`;

/** A running cluster. */
export interface PgCluster {
  readonly port: number;
  readonly version: string;
  /** Connection URL of database `db` as the sidecar's role (`authz`). */
  url(db: string): string;
  /** Creates an empty database owned by `authz` (a fresh name when none is given); returns its URL. */
  createDatabase(name?: string): Promise<string>;
  /** Runs SQL as the superuser on database `db` (default `postgres`). */
  admin<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[], db?: string): Promise<T[]>;
  /** Stops the server: `fast` (clients are disconnected, clean shutdown) or `immediate` (like a crash). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts it again on the same port and data (after {@link stop}). */
  start(): Promise<void>;
  /** The server log so far (for failure messages). */
  log(): string;
}

/** The newest installed PostgreSQL major (≥ 15) and its bin dir, or the reason there is none. */
export function findPostgres(): { bin: string; major: number } | { reason: string } {
  const base = '/usr/lib/postgresql';
  const majors = fs.existsSync(base) ? fs.readdirSync(base).map(Number).filter((n) => n >= 15).sort((a, b) => b - a) : [];
  for (const major of majors) {
    const bin = path.join(base, String(major), 'bin');
    if (fs.existsSync(path.join(bin, 'initdb')) && fs.existsSync(path.join(bin, 'postgres'))) return { bin, major };
  }
  return { reason: `no PostgreSQL >= 15 server binaries under ${base} (install Debian's postgresql package; .ci/run does)` };
}

/** uid/gid of the `postgres` user when running as root (initdb refuses root), else undefined. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || uid <= 0) throw new Error('running as root, but there is no postgres user to run the server as');
  return { uid, gid };
}

/** Options of {@link launchPostgres}. */
export interface LaunchOptions {
  /** Extra server settings (`-c name=value`). */
  settings?: Record<string, string>;
  /** Test speed: fsync and full-page writes off (default true); false keeps PostgreSQL's durability defaults. */
  fast?: boolean;
}

/**
 * A data directory fresh from `initdb` (UTF8, locale C, superuser `postgres`, trust on the socket, SCRAM over
 * TCP), made once per machine and PostgreSQL major under the OS temp dir and copied (`cp -a`) by every
 * launch: initdb costs about a second of CPU, the copy a tenth. Made aside and renamed into place, so
 * concurrent test files never see a half-made one. Its superuser password is a throwaway; each launch sets
 * its own over the socket.
 */
function pristineDataDir(bin: string, major: number, user: { uid: number; gid: number } | undefined): string {
  const args = ['--no-sync', '-E', 'UTF8', '--locale=C', '-U', 'postgres',
    '--auth-local=trust', '--auth-host=scram-sha-256'];
  const owner = user?.uid ?? process.getuid?.();
  const key = crypto.createHash('sha256').update(JSON.stringify([bin, major, owner, args])).digest('hex');
  const final = path.join(os.tmpdir(), `authz-pg-template-${major}-${key.slice(0, 16)}`);
  if (fs.existsSync(path.join(final, 'data', 'PG_VERSION'))) return path.join(final, 'data');
  const work = fs.mkdtempSync(`${final}.tmp-`);
  try {
    const pwfile = path.join(work, 'pw');
    fs.writeFileSync(pwfile, `${crypto.randomBytes(12).toString('hex')}\n`, { mode: 0o600 });
    if (user) { fs.chownSync(work, user.uid, user.gid); fs.chownSync(pwfile, user.uid, user.gid); }
    const init = spawnSync(path.join(bin, 'initdb'), ['-D', path.join(work, 'data'), ...args, `--pwfile=${pwfile}`],
      { encoding: 'utf8', timeout: 60_000, cwd: work, ...(user ? { uid: user.uid, gid: user.gid } : {}) });
    if (init.status !== 0) {
      throw new Error(`initdb failed (${init.status ?? init.signal}): ${(init.stderr || init.stdout).slice(-1500)}`);
    }
    fs.rmSync(pwfile);
    try {
      fs.renameSync(work, final);
    } catch (err) {
      // Another process put its template there first: use that one.
      if (!fs.existsSync(path.join(final, 'data', 'PG_VERSION'))) throw err;
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return path.join(final, 'data');
}

/** Starts a cluster; `destroy()` stops it and removes its files. */
export async function launchPostgres(o: LaunchOptions = {}): Promise<PgCluster & { destroy(): Promise<void> }> {
  const found = findPostgres();
  if ('reason' in found) throw new Error(found.reason);
  const { bin, major } = found;
  const settings = o.settings ?? {};
  const user = serverUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-pg-'));
  const data = path.join(dir, 'data');
  if (user) fs.chownSync(dir, user.uid, user.gid);
  const asServer = user ? { uid: user.uid, gid: user.gid } : {};
  const template = pristineDataDir(bin, major, user);
  const copied = spawnSync('cp', ['-a', template, data], { encoding: 'utf8', timeout: 60_000 });
  if (copied.status !== 0) throw new Error(`copying the initdb template failed: ${copied.stderr}`);
  const port = await freePort();
  let logText = '';
  let proc: ChildProcess | undefined;
  const args = ['-D', data, '-k', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300',
    // Test speed on shared cores; the benchmark's cluster keeps the durability defaults.
    ...(o.fast === false ? ['-c', 'shared_buffers=128MB'] : ['-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'shared_buffers=64MB']),
    ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const start = async (): Promise<void> => {
    const child = spawn(path.join(bin, 'postgres'), args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...asServer });
    proc = child;
    const collect = (c: Buffer): void => { logText = (logText + c.toString()).slice(-20_000); };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`postgres exited during startup:\n${logText.slice(-1500)}`);
      // Over the Unix socket (trust): the copied template's superuser password is not this process's yet.
      const c = new pg.Client({ host: dir, port, user: 'postgres', database: 'postgres',
        connectionTimeoutMillis: 1000 });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.query('SELECT 1');
        await c.end();
        return;
      } catch {
        await c.end().catch(() => {});
      }
      if (Date.now() > deadline) { child.kill('SIGQUIT'); throw new Error(`postgres was not ready within 30 s:\n${logText.slice(-1500)}`); }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stop = async (mode: 'fast' | 'immediate' = 'fast'): Promise<void> => {
    const child = proc;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(killer);
  };
  const admin = async <T extends pg.QueryResultRow>(sql: string, params: unknown[] = [], db = 'postgres'): Promise<T[]> => {
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: PASSWORD, database: db });
    await c.connect();
    try { return (await c.query<T>(sql, params)).rows; } finally { await c.end(); }
  };
  await start();
  // A crash of the test process must not leave the server running.
  const onExit = (): void => { try { proc?.kill('SIGQUIT'); } catch { /* gone */ } };
  process.once('exit', onExit);
  const local = new pg.Client({ host: dir, port, user: 'postgres', database: 'postgres' });
  await local.connect();
  try { await local.query(`ALTER ROLE postgres PASSWORD '${PASSWORD}'`); } finally { await local.end(); }
  await admin(`CREATE ROLE authz LOGIN PASSWORD '${PASSWORD}'`);
  const version = (await admin<{ server_version: string }>('SHOW server_version'))[0]!.server_version;
  let n = 0;
  const url = (db: string): string => `postgres://authz:${PASSWORD}@127.0.0.1:${port}/${db}`;
  return {
    port, version: `${version} (major ${major})`, url, admin, stop, start, log: () => logText,
    async createDatabase(name) {
      const db = name ?? `t${process.pid}_${++n}_${crypto.randomBytes(3).toString('hex')}`;
      await admin(`CREATE DATABASE ${db} OWNER authz`);
      return url(db);
    },
    async destroy() {
      process.removeListener('exit', onExit);
      await stop('immediate');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
