/**
 * A throwaway PostgreSQL server for one test file: Debian's `postgresql`
 * package (installed by `.ci/run`; binaries in /usr/lib/postgresql/<major>/bin,
 * major 15 or later), `initdb` into a temp dir, `postgres` on a free loopback
 * port with its socket in that dir, stopped and removed in the test's
 * teardown. Run as root, the server runs as the `postgres` user (initdb refuses
 * root).
 *
 * The cluster has password (SCRAM) authentication over TCP: the sidecar
 * connects as the role `authz` to databases it owns, like a real deployment;
 * the test itself administers as the superuser over the same TCP port.
 *
 * In CI (`CI=true`) a missing or failing server fails the test with the
 * reason; elsewhere {@link startPostgres} returns null after printing why the
 * file is skipped.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Test } from 'tap';
import { freePort } from './net.js';

/** Password of the `authz` role and the superuser in every test cluster (loopback only). */
const PASSWORD = `pw-${crypto.randomBytes(6).toString('hex')}`;

/** A running test cluster. */
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

/**
 * Starts a cluster for the test `t` (stopped and removed in its teardown). Returns null
 * outside CI when no server can be started (the reason is printed and the file is skipped);
 * in CI it throws with the reason.
 */
export async function startPostgres(t: Test, o: { settings?: Record<string, string> } = {}): Promise<PgCluster | null> {
  const found = findPostgres();
  const refuse = (reason: string): null => {
    if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`PostgreSQL tests must run in CI: ${reason}`);
    t.comment(`skipped: ${reason}`);
    t.pass('PostgreSQL tests', { skip: `PostgreSQL not available: ${reason}` });
    return null;
  };
  if ('reason' in found) return refuse(found.reason);
  try {
    const c = await launch(found.bin, found.major, o.settings ?? {});
    t.teardown(() => c.destroy());
    return c;
  } catch (err) {
    return refuse(`the test server did not start: ${(err as Error).message}`);
  }
}

async function launch(bin: string, major: number, settings: Record<string, string>): Promise<PgCluster & { destroy(): Promise<void> }> {
  const user = serverUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-pg-'));
  const data = path.join(dir, 'data');
  const pwfile = path.join(dir, 'pw');
  fs.writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
  if (user) { fs.chownSync(dir, user.uid, user.gid); fs.chownSync(pwfile, user.uid, user.gid); }
  const asServer = user ? { uid: user.uid, gid: user.gid } : {};
  const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '--no-sync', '-E', 'UTF8', '--locale=C', '-U', 'postgres',
    '--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwfile}`], { encoding: 'utf8', timeout: 60_000, cwd: dir, ...asServer });
  if (init.status !== 0) throw new Error(`initdb failed (${init.status ?? init.signal}): ${(init.stderr || init.stdout).slice(-1500)}`);
  const port = await freePort();
  let logText = '';
  let proc: ChildProcess | undefined;
  const args = ['-D', data, '-k', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300',
    // Test speed on shared cores; the benchmark's cluster keeps the defaults.
    '-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'shared_buffers=64MB',
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
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: PASSWORD, database: 'postgres', connectionTimeoutMillis: 1000 });
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
