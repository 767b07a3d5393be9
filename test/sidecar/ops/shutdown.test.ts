/**
 * Graceful shutdown of the real sidecar process (`node --import tsx
 * sidecar/main.ts`): under concurrent load (8 workers, at most 3 s, of
 * `/healthz`, `/readyz`, verify with a bad key and real present + verify),
 * SIGTERM makes the process stop accepting and finish what it received: no
 * request that got a connection sees a reset (refused connections after the
 * listener closed are fine), the process exits 0, and the database is
 * consistent (integrity_check ok, WAL checkpointed, every allow the clients
 * saw is in the audit trail).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { present, remoteSidecar, specFlow } from '../../helpers/sidecar.js';
import type { Flow, MailSink, TestSidecar } from '../../helpers/sidecar.js';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { exitWithin, newMasterKey, spawnSidecar } from './helpers.js';
import type { ChildSidecar } from './helpers.js';

/** specFlow against a child sidecar: the development mailer logs the code as `devLoginCode`. */
function asTestSidecar(child: ChildSidecar): TestSidecar {
  const mail: MailSink = {
    url: '', messages: [], close: async () => {},
    async codeFor(to: string): Promise<string> {
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        for (const line of [...child.lines].reverse()) {
          if (!line.includes('devLoginCode')) continue;
          const j = JSON.parse(line) as { to?: string; devLoginCode?: string };
          if (j.to === to && j.devLoginCode) return j.devLoginCode;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no code logged for ${to}`);
    },
  };
  return remoteSidecar(child.url, mail);
}

/** The error code of a failed fetch (its cause's code, or the message). */
function failure(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err as Error).message;
}

const RESET = /ECONNRESET|UND_ERR_SOCKET|socket hang up|other side closed|EPIPE/i;

t.test('SIGTERM under load: no resets, exit 0, consistent database', async (t) => {
  const t0 = Date.now();
  const sc = await spawnSidecar({ env: { SIDECAR_MASTER_KEY: newMasterKey(), SIDECAR_SHUTDOWN_TIMEOUT_MS: '5000' } });
  t.teardown(() => { sc.kill(); fs.rmSync(sc.dataDir, { recursive: true, force: true }); });
  const f: Flow = await specFlow(asTestSidecar(sc), 'shutdown@example.com');
  t.equal((await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' })).body?.decision, 'allow', 'warm-up allow');
  let allowsSeen = 1;
  t.comment(`started and flow done in ${Date.now() - t0} ms`);

  const outcomes: { op: string; result: string; afterSignal: boolean }[] = [];
  let signalled = false;
  const badKey = `aak_000000000000_${'B'.repeat(43)}`;
  const ops: Record<string, () => Promise<string>> = {
    healthz: async () => String((await fetch(`${sc.url}/healthz`)).status),
    readyz: async () => {
      const r = await fetch(`${sc.url}/readyz`);
      const b = await r.json() as { reason?: string };
      return r.status === 503 ? `503 ${b.reason}` : String(r.status);
    },
    badkey: async () => {
      const r = await fetch(`${sc.url}/v1/service/verify`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-api-key': badKey }, body: JSON.stringify({ proof_bundle: {}, required_scope: 'data:read' }) });
      await r.arrayBuffer();
      return String(r.status);
    },
    allow: async () => {
      const bundle = await present(f);
      const r = await f.platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: 'data:read' });
      if (r.body?.decision === 'allow') allowsSeen += 1;
      return `${r.status} ${r.body?.decision ?? r.body?.error?.code}`;
    },
  };
  const names = ['healthz', 'readyz', 'badkey', 'allow', 'healthz', 'readyz', 'badkey', 'allow'];
  const stopAt = Date.now() + 3000;
  const worker = async (op: string) => {
    while (Date.now() < stopAt) {
      const afterSignal = signalled;
      try {
        outcomes.push({ op, result: await ops[op]!(), afterSignal });
      } catch (err) {
        const result = failure(err);
        outcomes.push({ op, result, afterSignal });
        if (/ECONNREFUSED/.test(result) || RESET.test(result)) return; // the listener is gone
      }
    }
  };
  const load = Promise.all(names.map(worker));
  await new Promise((r) => setTimeout(r, 800));
  signalled = true;
  sc.child.kill('SIGTERM');
  await load;
  t.comment(`load done at ${Date.now() - t0} ms`);
  const exit = await exitWithin(sc, 10_000);

  t.comment(`exited at ${Date.now() - t0} ms`);
  const summary = new Map<string, number>();
  for (const o of outcomes) summary.set(`${o.op} ${o.result}`, (summary.get(`${o.op} ${o.result}`) ?? 0) + 1);
  t.comment(JSON.stringify(Object.fromEntries(summary)));
  t.ok(outcomes.filter((o) => !o.afterSignal).length > 20, 'load ran before the signal');
  t.same(outcomes.filter((o) => RESET.test(o.result)), [], 'no request that got a connection was reset');
  const allowed = new Set(['200', '401', '503 shutting_down', '200 allow', 'ECONNREFUSED']);
  t.same(outcomes.filter((o) => !allowed.has(o.result)), [], 'every other outcome is a normal answer or a refused connection');
  t.ok(outcomes.some((o) => o.result === 'ECONNREFUSED'), 'new connections are refused after the listener closed');
  t.same(exit, { code: 0, signal: null }, `exits 0 (stderr: ${sc.stderr.join('').slice(0, 500)})`);
  t.ok(sc.lines.some((l) => /"msg":"shutdown complete"/.test(l)), 'logged: shutdown complete');

  // The database was closed cleanly and is consistent.
  const file = path.join(sc.dataDir, DB_FILE_NAME);
  t.notOk(fs.existsSync(`${file}-wal`) && fs.statSync(`${file}-wal`).size > 0, 'the WAL was checkpointed');
  const db = new Database(file, { readonly: true });
  try {
    t.equal(db.pragma('integrity_check', { simple: true }), 'ok', 'integrity_check ok');
    t.same(db.pragma('foreign_key_check'), [], 'foreign keys ok');
    const verified = (db.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'proof.verified'").get() as { n: number }).n;
    t.equal(verified, allowsSeen, 'every allow a client saw was committed, and nothing else');
  } finally {
    db.close();
  }
});
