/**
 * Online backup and restore: `agent-authz-sidecar backup` (what `npm run backup --
 * <file>` runs) copies the live database while the sidecar serves verify
 * calls; the copy, restored into a new data directory with the same master
 * key, serves a fresh proof of the same agent (verify: allow).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import t from 'tap';
import { Client, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { MASTER_KEY_FILE } from '../../../sidecar/server.js';
import { backupDatabase } from '../../../sidecar/store/sqlite/backup.js';
import { REPO, cleanEnv } from './helpers.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

/** Runs `node <compiled sidecar main.js> backup ...args` (SIDECAR_MAIN) with SIDECAR_DATA_DIR set. */
function runBackup(dataDir: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SIDECAR_MAIN, 'backup', ...args], {
      cwd: REPO, env: cleanEnv({ SIDECAR_DATA_DIR: dataDir }), stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

t.test('online backup, restore with the same master key, verify allow', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'backup@example.com', { approve: ['data:read'] });
  const verify = async (flow: Flow) => (await flow.platform.post('/v1/service/verify', { proof_bundle: await present(flow), required_scope: 'data:read' })).body?.decision as string;
  t.equal(await verify(f), 'allow');

  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-backup-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const backupFile = path.join(out, 'nightly', 'agent-authz-backup.sqlite');

  // Writes keep going while the backup runs.
  let writing = true;
  let during = 0;
  const load = (async () => { while (writing) { if (await verify(f) === 'allow') during += 1; } })();
  const r = await runBackup(sc.dataDir, [backupFile]);
  writing = false;
  await load;
  t.equal(r.code, 0, `backup exit code (stderr: ${r.stderr})`);
  const report = JSON.parse(r.stdout) as { backup: string; bytes: number; schema_version: number };
  t.equal(report.backup, backupFile);
  t.ok(report.bytes > 0 && report.schema_version >= 1, 'reported size and schema version');
  t.ok(during >= 1, `the sidecar kept serving during the backup (${during} verifications)`);
  t.ok(fs.existsSync(backupFile), 'backup written');
  t.notOk(fs.existsSync(`${backupFile}.partial`), 'no partial file left');
  t.match(r.stderr, /same master key/, 'reminds about the master key');

  // Refusals: an existing file, bad usage.
  const again = await runBackup(sc.dataDir, [backupFile]);
  t.equal(again.code, 2, 'an existing backup file is never overwritten');
  t.match(again.stderr, /exists/);
  await t.rejects(backupDatabase(path.join(out, 'nothing-here', DB_FILE_NAME), path.join(out, 'x.sqlite')), TypeError, 'no database to back up');

  // Restore: stop nothing (the original keeps running), copy the backup and the master key into a new data dir.
  const restored = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-restored-'));
  fs.copyFileSync(backupFile, path.join(restored, DB_FILE_NAME));
  fs.copyFileSync(path.join(sc.dataDir, MASTER_KEY_FILE), path.join(restored, MASTER_KEY_FILE));
  const sc2 = await startSidecar({ dataDir: restored });
  t.teardown(async () => {
    await sc2.close();
    fs.rmSync(restored, { recursive: true, force: true });
  });
  t.equal((await fetch(`${sc2.url}/readyz`)).status, 200, 'the restored sidecar is ready');
  const platform = new Client(sc2.url);
  platform.apiKey = f.reg.api_key;
  const f2: Flow = { ...f, platform };
  t.equal(await verify(f2), 'allow', 'a fresh bundle of the same agent verifies against the restored data');
  const deny = await f2.platform.post('/v1/service/verify', { proof_bundle: await present(f2), required_scope: 'data:write' });
  t.equal(deny.body?.decision_reason, 'not_delegated', 'the delegation came back as it was');
});
