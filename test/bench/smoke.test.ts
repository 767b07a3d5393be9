/**
 * The benchmark's smoke run (`npm run bench -- --smoke`) as a child process:
 * it must finish within 170 s (a hung run is killed), exit 0 and print the results table. The
 * benchmark itself is not part of the test suite; this only checks that it
 * still runs end to end (sidecar, gateway, baselines, seeding, webhooks, AuthZEN,
 * sub-delegation chains).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TIMEOUT_MS = 170_000;

t.setTimeout(TIMEOUT_MS + 20_000);

t.test('npm run bench -- --smoke exits 0 and prints the table', async (t) => {
  // Without tap's NODE_OPTIONS/TAP_* (its process-info hook would load into every server).
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== 'NODE_OPTIONS' && !/^_?TAP/.test(k)) env[k] = v;
  // Own process group, so the benchmark and every server it started can be killed together.
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/run.ts'), '--smoke'], {
    cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const killGroup = (signal: NodeJS.Signals): void => {
    try { process.kill(-child.pid!, signal); } catch { /* already gone */ }
  };
  t.teardown(() => killGroup('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString('utf8'); });
  child.stderr.on('data', (c: Buffer) => { stderr = (stderr + c.toString('utf8')).slice(-20_000); });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), 3000).unref();
  }, TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  if (code !== 0 || timedOut) t.comment(stderr);
  t.notOk(timedOut, `finished within ${TIMEOUT_MS / 1000} s`);
  t.equal(code, 0, 'exit code 0');
  t.match(stdout, /^\| Figure +\| native +\| noble +\| Target +\| Status +\|$/m, 'prints the table header');
  for (const row of ['Hybrid verify per second', 'Verify c=1', 'Verify c=64', 'Verify c=64, audit chain + export on ÷ both off', 'Present c=16', 'Server CPU per verify',
    'agent-authz gateway + sidecar', 'Gateway ÷ plain proxy', 'Verify p50 at 10^4 audit rows', 'Audit read', 'Outbox drain',
    'AuthZEN evaluation c=1', 'AuthZEN evaluations, batch of 100', 'Chain depth 0', 'Chain depth 8']) {
    t.match(stdout, new RegExp(`^\\| ${row.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'm'), `table has "${row}"`);
  }
  t.notMatch(stdout, /NaN/, 'no NaN in the table');
});
