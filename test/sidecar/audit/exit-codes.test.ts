/**
 * Every exit code of `agent-authz-sidecar audit verify` through the real bin (bin/agent-authz-sidecar.mjs on the
 * compiled dist/, built by pretest), with the `--json` document of each (docs/audit.md):
 * 0 verified, 1 broken, 2 usage, 3 unreadable input, 4 cannot run. 4 is what a load error of the command's own
 * code gives — the half-written build of issue 30 (`does not provide an export named 'redecide'`), or no build —
 * and not 1, which only a check that ran to the end and found the trail broken returns. The same load error
 * without `audit` is a failed start, exit 1. An unexpected failure inside the command is 4 too.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { VERIFY_EXIT, runAuditCommand } from '../../../sidecar/audit/verify-command.js';
import { copyOf, makeTrail, tamper } from './helpers.js';
import { runNode } from '../../helpers/run-node.js';
import type { Ran } from '../../helpers/run-node.js';

const REPO = path.resolve(import.meta.dirname, '../../..');
const BIN = path.join(REPO, 'bin', 'agent-authz-sidecar.mjs');

/** Runs `bin` (the real one unless given) with `args`, as a user would. */
function bin(args: string[], file = BIN): Promise<Ran> {
  return runNode([file, ...args], { cwd: REPO });
}
const json = (r: Ran): Record<string, unknown> => JSON.parse(r.stdout) as Record<string, unknown>;

const trail = await makeTrail(t, 6, 5);
const verify = (...args: string[]) => bin(['audit', 'verify', ...args]);

t.test('the codes are the documented ones', async (t) => {
  t.same(VERIFY_EXIT, { verified: 0, broken: 1, usage: 2, unreadable: 3, cannotRun: 4 });
  const binText = fs.readFileSync(BIN, 'utf8');
  t.match(binText, `const AUDIT_CANNOT_RUN = ${VERIFY_EXIT.cannotRun};`, 'the bin uses the same "cannot run" code');
  t.match(fs.readFileSync(path.join(REPO, 'docs', 'audit.md'), 'utf8'), /\| 4 \| cannot run/, 'docs/audit.md lists it');
});

t.test('0 verified, 1 broken: a check that ran', async (t) => {
  t.ok(fs.existsSync(path.join(REPO, 'dist/sidecar/audit/verify-command.js')), 'dist/ is built (pretest)');
  const ok = await verify('--db', trail.file, '--key-id', trail.keyId);
  t.equal(ok.code, 0, ok.stderr);
  t.match(ok.stdout, /result: verified: 12 row\(s\) in 2 account\(s\)/);
  const okJson = await verify('--db', trail.file, '--key-id', trail.keyId, '--json');
  t.equal(okJson.code, 0);
  t.match(json(okJson), {
    exit: 0, source: trail.file, ok: true, keyIds: [trail.keyId], pinned: true, problems: [], rows: 12, unsigned: 2,
    accounts: [
      { accountId: String, rows: 6, firstPosition: 1, lastPosition: 6, checkpoints: 1, signedTo: 5, problem: null },
      { rows: 6 },
    ],
  });

  const bad = copyOf(trail, 'cut');
  tamper(bad, (db: Database.Database) => {
    db.exec('DROP TRIGGER IF EXISTS audit_no_update');
    db.prepare('DELETE FROM audit_events WHERE chain_position = 4').run();
  });
  const broken = await verify('--db', bad);
  t.equal(broken.code, 1);
  t.match(broken.stdout, /BROKEN at position 4: rows_missing/);
  const brokenJson = await verify('--db', bad, '--json');
  t.equal(brokenJson.code, 1);
  t.match(json(brokenJson), {
    exit: 1, ok: false, pinned: false, problems: [{ kind: 'rows_missing', position: 4, accountId: String }],
  });
});

t.test('2 usage', async (t) => {
  const unknown = await verify('--nope');
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /^agent-authz sidecar: unknown argument "--nope"\nusage: agent-authz-sidecar audit verify /);
  t.equal(unknown.stdout, '', 'nothing on stdout without --json');
  const asJson = await verify('--key-id', 'nothex', '--json');
  t.equal(asJson.code, 2);
  const message = '--key-id: expected 32 lowercase hex characters, got "nothex"';
  t.same(json(asJson), { exit: 2, ok: false, error: { code: 'usage', message } });
  const sub = await bin(['audit', 'check']);
  t.equal(sub.code, 2);
  t.match(sub.stderr, /unknown audit subcommand "check"/);
});

t.test('3 the input cannot be read', async (t) => {
  const missing = await verify('--db', path.join(trail.dir, 'missing.sqlite'));
  t.equal(missing.code, 3);
  t.match(missing.stderr, /^agent-authz sidecar: audit verify: .*missing\.sqlite: cannot open the database/);
  const junk = path.join(trail.dir, 'junk.sqlite');
  fs.writeFileSync(junk, 'not a database at all, just text '.repeat(200));
  const notDb = await verify('--db', junk, '--json');
  t.equal(notDb.code, 3, 'not a database');
  t.match(json(notDb), { exit: 3, ok: false, error: { code: 'unreadable', message: String } });
});

t.test('4 cannot run: the command\'s own code does not load', async (t) => {
  // An installation whose build is half-written: main.js from a new build, the module it imports from an old one.
  const install = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-half-build-'));
  t.teardown(() => fs.rmSync(install, { recursive: true, force: true }));
  fs.mkdirSync(path.join(install, 'bin'));
  fs.mkdirSync(path.join(install, 'dist', 'sidecar'), { recursive: true });
  fs.copyFileSync(BIN, path.join(install, 'bin', 'agent-authz-sidecar.mjs'));
  fs.writeFileSync(path.join(install, 'package.json'), '{"type":"module"}\n');
  const halfBin = path.join(install, 'bin', 'agent-authz-sidecar.mjs');
  t.equal((await bin(['audit', 'verify', '--db', trail.file], halfBin)).code, 4, 'no dist/ at all: 4');

  fs.writeFileSync(path.join(install, 'dist', 'redecide.js'), 'export const previous = 1;\n');
  const main = path.join(install, 'dist', 'sidecar', 'main.js');
  fs.writeFileSync(main, "import { redecide } from '../redecide.js';\nredecide();\n");
  const half = await bin(['audit', 'verify', '--db', trail.file], halfBin);
  t.equal(half.code, 4, 'a half-written build: 4, not 1 ("broken")');
  t.match(half.stderr, /^agent-authz sidecar: audit verify: cannot run: cannot load .*dist\/sidecar\/main\.js: /);
  t.match(half.stderr, /does not provide an export named 'redecide'/, 'with the load error');
  t.match(half.stderr, /npm run build/, 'and says how to fix it');
  const halfJson = await bin(['audit', 'verify', '--json'], halfBin);
  t.equal(halfJson.code, 4);
  t.match(json(halfJson), { exit: 4, ok: false, error: { code: 'cannot_run', message: /does not provide an export/ } });

  const serve = await bin([], halfBin);
  t.equal(serve.code, 1, 'serve with the same build: a failed start, 1');
  t.match(serve.stderr, /^agent-authz sidecar: failed to start: cannot load .*does not provide an export named/);
});

t.test('4 cannot run: an unexpected failure inside the command', async (t) => {
  let stderr = '';
  const code = await runAuditCommand(['verify', '--db', trail.file], {
    stdout: () => { throw new Error('write EPIPE'); },
    stderr: (s) => { stderr += s; },
  }, {});
  t.equal(code, VERIFY_EXIT.cannotRun, 'the report cannot be written: 4, not a crash with 1');
  t.equal(stderr, 'agent-authz sidecar: audit verify: cannot run: write EPIPE\n');
});
