/**
 * A client generated from the served description works: swagger-typescript-api
 * generates a TypeScript client from a real sidecar's `GET /openapi.json`; the
 * client and the spec-flow program written against it (generated-client/flow.ts)
 * compile under strict `tsc` (NodeNext); then the program drives the spec's
 * flow against the same sidecar — sign-in with the code from the real SMTP
 * sink, onboarding, platform, agent, delegation, challenge, present, verify,
 * revoke, audit — through the generated methods only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { startSidecar } from '../../helpers/sidecar.js';
import { REPO } from './helpers.js';

const run = promisify(execFile);

/** The shape of generated-client/flow.ts's export (that file is compiled on its own, against the generated client). */
type RunFlow = (baseUrl: string, email: string, codeFor: (email: string) => Promise<string>) => Promise<{
  onboardingStep: string; certId: string; refreshed: string; auditTypes: string[];
  allow: { decision: string; decision_reason: string }; afterRevoke: { decision: string; decision_reason: string };
  presentAfterRevoke: { status: number; code: string };
}>;
const FIXTURE = path.join(REPO, 'test/sidecar/ops/generated-client');

/** Runs a node script of a dev dependency; rejects with its output on failure. */
async function node(args: string[], timeout = 120_000): Promise<string> {
  // Without tap's NODE_OPTIONS and TAP* variables: its process-info hook would load into the tools.
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== 'NODE_OPTIONS' && !/^_?TAP/.test(k)) env[k] = v;
  try {
    const r = await run(process.execPath, args, { cwd: REPO, env, timeout, maxBuffer: 16 << 20 });
    return r.stdout + r.stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${args.slice(0, 2).join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`.slice(0, 6000));
  }
}

t.test('a TypeScript client generated from /openapi.json compiles strictly and drives the spec flow', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  // Inside the repository, so the generated code resolves @types/node from its node_modules.
  fs.mkdirSync(path.join(REPO, '.cache'), { recursive: true });
  const dir = fs.mkdtempSync(path.join(REPO, '.cache', 'generated-client-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

  const doc = await (await fetch(`${sc.url}/openapi.json`)).text();
  fs.writeFileSync(path.join(dir, 'openapi.json'), doc);
  await node([path.join(REPO, 'node_modules/swagger-typescript-api/dist/cli.mjs'), 'generate', '-p', path.join(dir, 'openapi.json'), '-o', dir, '-n', 'api.ts',
    '--type-only-imports', '--module-name-first-tag', '--unwrap-response-data', '--silent']);
  const api = fs.readFileSync(path.join(dir, 'api.ts'), 'utf8');
  for (const method of ['sendLoginCode', 'verifyLoginCode', 'registerPersonalPlatform', 'createAgent', 'approveDelegationRequest', 'presentProof', 'verifyProof', 'revokeCertificate', 'listAuditEvents']) {
    t.match(api, new RegExp(`\\b${method}: \\(`), `the client has ${method}()`);
  }
  t.match(api, /export interface VerifyResult \{/, 'typed responses: VerifyResult');
  t.match(api, /limit\?: number;/, 'the listings\' limit is a number');
  t.match(api, /decision_reason:\s*\|?\s*"authorized"/, 'decision_reason is a union of the reasons');

  fs.copyFileSync(path.join(FIXTURE, 'flow.ts'), path.join(dir, 'flow.ts'));
  fs.copyFileSync(path.join(FIXTURE, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
  await node([path.join(REPO, 'node_modules/typescript/lib/tsc.js'), '-p', path.join(dir, 'tsconfig.json')]);
  t.pass('the generated client and the flow compile under strict tsc');

  const { runFlow } = await import(pathToFileURL(path.join(dir, 'flow.ts')).href) as { runFlow: RunFlow };
  const r = await runFlow(sc.url, 'generated-client@example.com', (email) => sc.mail.codeFor(email));
  t.equal(r.refreshed, 'authenticated/refreshed', 'signed in with the e-mailed code, then refreshed');
  t.equal(r.onboardingStep, 'complete');
  t.match(r.certId, /^cert-[0-9a-f-]{36}$/);
  t.same(r.allow, { decision: 'allow', decision_reason: 'authorized' });
  t.same(r.afterRevoke, { decision: 'deny', decision_reason: 'delegation_revoked' });
  t.same(r.presentAfterRevoke, { status: 404, code: 'no_active_delegation' });
  t.ok(r.auditTypes.includes('proof.verified') && r.auditTypes.includes('proof.rejected') && r.auditTypes.includes('proof.presented'), `audit: ${r.auditTypes.join(', ')}`);
});
