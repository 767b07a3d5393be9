/**
 * Upgrade (issue 32, "a database written by the current release opens, migrates and keeps
 * working", on both engines): a database written by the release before organisations, by that
 * release's own code (test/sidecar/fixtures/release-0.2.0, README.md there), is opened by this one,
 * which migrates it; the personal account, its platform, connection and key, its certificates
 * (the verified one allows, the revoked one stays revoked) and its audit chain all verify
 * afterwards, and the new features work on the old data. One test body, run on each engine:
 * SQLite opens the release's database file; PostgreSQL gets the release's database as a plain-SQL
 * pg_dump loaded (by psql, as the sidecar's role) into a throwaway server.
 */
import t from 'tap';
import type { Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { Client, login, startSidecar } from '../helpers/sidecar.js';
import { startPostgres } from '../helpers/postgres.js';
import { findPostgres } from '../shared/pg-server.js';
import { runAuditCommand } from '../../sidecar/audit/verify-command.js';
import { databaseConfig } from '../../sidecar/config/index.js';
import { MIGRATIONS } from '../../sidecar/store/sqlite/migrations.js';
import { PG_SCHEMA_VERSION } from '../../sidecar/store/postgres/migrate.js';

t.setTimeout(120_000);
const FIXTURE = path.join(import.meta.dirname, 'fixtures', 'release-0.2.0');

/** What the release wrote, per engine (the fixture's manifest). */
interface Manifest {
  master_key: string; email: string; api_key: string; connection_id: string; platform_id: string; agent_id: string;
  cert_id: string; revoked_agent_id: string; revoked_cert_id: string; written_at: number;
}
const manifest = (file: string): Manifest => JSON.parse(fs.readFileSync(path.join(FIXTURE, file), 'utf8')) as Manifest;

/** A database of the release, ready for this release to open: its sidecar overrides, schema version, audit source. */
interface Opened { overrides: Parameters<typeof startSidecar>[0]; version: number; auditArgs: string[] }

/** The SQLite fixture: the release's database file in a fresh data directory. */
async function openSqlite(t: Test, dir: string): Promise<Opened> {
  const file = path.join(dir, 'agent-authz.sqlite');
  fs.writeFileSync(file, zlib.gunzipSync(fs.readFileSync(path.join(FIXTURE, 'agent-authz.sqlite.gz'))));
  t.comment('engine: SQLite');
  return { overrides: {}, version: MIGRATIONS[MIGRATIONS.length - 1]!.version, auditArgs: ['--db', file] };
}

/** The PostgreSQL fixture: the release's pg_dump loaded into a new database of a throwaway server; null: skipped. */
async function openPostgres(t: Test): Promise<Opened | null> {
  const pg = await startPostgres(t);
  if (!pg) return null;
  const found = findPostgres();
  if ('reason' in found) throw new Error(found.reason);
  const url = await pg.createDatabase('upgrade');
  // \restrict (pg_dump's guard against a hostile server's dump) needs a psql as new as the dump's; this one is ours.
  const dump = zlib.gunzipSync(fs.readFileSync(path.join(FIXTURE, 'agent-authz.pg.sql.gz'))).toString('utf8')
    .replace(/^\\(un)?restrict .*$/gm, '');
  const psql = spawnSync(path.join(found.bin, 'psql'), ['--no-psqlrc', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url],
    { input: dump, encoding: 'utf8', timeout: 60_000 });
  if (psql.status !== 0) throw new Error(`loading the release's dump failed: ${psql.stderr}`);
  return { overrides: { database: databaseConfig({ SIDECAR_DATABASE_URL: url }) }, version: PG_SCHEMA_VERSION,
    auditArgs: ['--database-url', url] };
}

for (const [engine, file] of [['sqlite', 'manifest.json'], ['postgres', 'manifest.pg.json']] as const) {
  t.test(`a ${engine} database of release 0.2.0 opens, migrates and keeps working`, async (t) => {
    const m = manifest(file);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-upgrade-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const opened = engine === 'sqlite' ? await openSqlite(t, dir) : await openPostgres(t);
    if (!opened) return;
    const sc = await startSidecar({ ...opened.overrides, dataDir: dir,
      masterKey: new Uint8Array(Buffer.from(m.master_key, 'base64')) });
    t.teardown(() => sc.close());
    sc.clock.t = m.written_at + 60_000;

    const ping = await sc.app.ctx.store.ping();
    t.equal(ping.schemaVersion, opened.version, 'migrated to the newest schema');

    // The old key, agent and certificates.
    const platform = new Client(sc.url);
    platform.apiKey = m.api_key;
    const verify = async (agentId: string, scope: string) => {
      const ch = await platform.post('/v1/service/challenge');
      const pr = await platform.post(`/v1/service/connections/${m.connection_id}/agents/${agentId}/present`,
        { challenge: ch.body.challenge });
      if (pr.status !== 200) return `present ${pr.status} ${pr.body?.error?.code}`;
      const v = await platform.post('/v1/service/verify',
        { proof_bundle: pr.body.proof_bundle, required_scope: scope });
      return `${v.body?.decision} ${v.body?.decision_reason}`;
    };
    t.equal(await verify(m.agent_id, 'data:read'), 'allow authorized', 'the old certificate still allows');
    const other = await verify(m.agent_id, 'data:write');
    t.equal(other, 'deny not_delegated', `and only what it granted (${other})`);
    t.equal(await verify(m.revoked_agent_id, 'data:read'), 'present 404 no_active_delegation',
      'the revoked one stays revoked');

    // The old person signs in to their personal workspace, with their platform and history.
    const user = await login(sc, m.email);
    const session = await user.get('/v1/auth/session');
    t.match(session.body, { email: m.email, account_type: 'individual', onboarding_step: 'complete',
      workspace: { kind: 'personal', role: 'owner' } });
    t.same((await user.get('/v1/service/platforms')).body.platforms.map((p: { platform_id: string }) => p.platform_id),
      [m.platform_id]);
    const usage = await user.get(`/v1/service/delegations/${m.cert_id}/usage`);
    t.equal(usage.status, 200, 'the certificate\'s usage reads');
    const revoked = await user.get(`/v1/service/delegations/${m.revoked_cert_id}`);
    t.equal(revoked.body.status, 'revoked', 'the revoked certificate reads as revoked');
    const requests = (await user.get('/v1/service/delegations/requests')).body.requests as Record<string, unknown>[];
    t.ok(requests.length >= 2 && requests.every((r) => r.proposed_constraints === null),
      'old requests propose nothing');
    const events = (await user.get('/v1/service/audit/personal?limit=200')).body.events as { event_type: string }[];
    t.ok(events.filter((e) => e.event_type === 'proof.verified').length >= 4,
      'the old verifies and the new one, in one trail');

    // The new features on the old data: an organisation beside the personal workspace.
    const org = await user.post('/v1/service/organizations', { name: 'Upgraded Ltd' });
    t.equal(org.status, 200);
    t.equal((await user.get('/v1/service/workspaces')).body.workspaces.length, 2);

    // The audit chain written by both releases verifies offline.
    await sc.app.close();
    const out: string[] = [];
    const code = await runAuditCommand(['verify', '--json', ...opened.auditArgs],
      { stdout: (s: string) => { out.push(s); }, stderr: (s: string) => { out.push(s); } }, {});
    t.equal(code, 0, `audit verify: ${out.join('').slice(0, 300)}`);
  });
}
