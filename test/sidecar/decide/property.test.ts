/**
 * Property tests (fast-check) through the real server: random JSON
 * mutations of real, fresh bundles (members changed, deleted, added;
 * characters flipped; subtrees or the whole bundle replaced) never allow
 * and never answer 5xx; random JSON as a bundle never allows either.
 * Bounded in runs and time.
 */
import t from 'tap';
import fc from 'fast-check';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, Res, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, clone, verify } from './helpers.js';
import type { Bundle } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'prop@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

type Path = string[];
type Mutation =
  | { op: 'delete'; at: number }
  | { op: 'set'; at: number; value: unknown }
  | { op: 'add'; at: number; key: string; value: unknown }
  | { op: 'flip'; at: number; index: number; char: string }
  | { op: 'root'; value: unknown };

/** Every path in a JSON tree (the root is []). */
function paths(x: unknown, p: Path = []): Path[] {
  const out: Path[] = [p];
  if (x && typeof x === 'object' && !Array.isArray(x)) for (const k of Object.keys(x)) out.push(...paths((x as Record<string, unknown>)[k], [...p, k]));
  if (Array.isArray(x)) x.forEach((v, i) => out.push(...paths(v, [...p, String(i)])));
  return out;
}

function get(x: unknown, p: Path): unknown {
  let cur = x;
  for (const k of p) cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[k] : undefined;
  return cur;
}

/** Defines an own enumerable member (also for `__proto__`). */
function put(o: object, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

function apply(bundle: Bundle, muts: Mutation[]): unknown {
  let root: unknown = clone(bundle);
  for (const m of muts) {
    if (m.op === 'root') { root = clone(m.value); continue; }
    const all = paths(root);
    const nonRoot = all.filter((p) => p.length > 0);
    const containers = all.filter((p) => { const v = get(root, p); return !!v && typeof v === 'object'; });
    const strings = all.filter((p) => typeof get(root, p) === 'string');
    if (m.op === 'delete' || m.op === 'set') {
      if (!nonRoot.length) continue;
      const p = nonRoot[m.at % nonRoot.length]!;
      const parent = get(root, p.slice(0, -1)) as Record<string, unknown>;
      const k = p[p.length - 1]!;
      if (m.op === 'delete') {
        if (Array.isArray(parent)) parent.splice(Number(k), 1); else delete parent[k];
      } else put(parent, k, clone(m.value));
    } else if (m.op === 'add') {
      if (!containers.length) continue;
      const c = get(root, containers[m.at % containers.length]!) as Record<string, unknown> | unknown[];
      if (Array.isArray(c)) c.push(clone(m.value)); else put(c, m.key, clone(m.value));
    } else {
      if (!strings.length) continue;
      const p = strings[m.at % strings.length]!;
      const s = get(root, p) as string;
      const i = s.length ? m.index % s.length : 0;
      const next = s.slice(0, i) + m.char + s.slice(i + 1);
      if (p.length === 0) root = next;
      else put(get(root, p.slice(0, -1)) as object, p[p.length - 1]!, next);
    }
  }
  return root;
}

/** JSON text with sorted keys (what verify could distinguish). */
function stable(x: unknown): string {
  if (x === null || typeof x !== 'object') return JSON.stringify(x) ?? 'undefined';
  if (Array.isArray(x)) return `[${x.map(stable).join(',')}]`;
  return `{${Object.keys(x).sort().map((k) => `${JSON.stringify(k)}:${stable((x as Record<string, unknown>)[k])}`).join(',')}}`;
}

const MEMBERS = ['v', 'typ', 'challenge', 'aud', 'agent_id', 'cert_id', 'cert_sha256', 'presented_at', 'sig', 'ed25519', 'ml_dsa_65'];
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(1, '1', 2, 0, -1, null, true, false, '', [], {}, 'agent-authz.proof', '2030-01-01T00:00:00.000Z', 'A'.repeat(43), 'A'.repeat(86)),
);
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('delete' as const), at: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('set' as const), at: fc.nat(), value }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('add' as const), at: fc.nat(), key: fc.oneof(fc.constantFrom(...MEMBERS, '__proto__', 'constructor'), fc.string({ maxLength: 8 })), value }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('flip' as const), at: fc.nat(), index: fc.nat(), char: fc.oneof(fc.constantFrom('A', 'a', '0', '9', '-', '_', '+', '/', '=', ' ', 'Z', '.', ':', '\u00e9', '\u0000'), fc.string({ minLength: 1, maxLength: 1 })) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('root' as const), value }) },
);

/** Not a 5xx, and a well-formed answer: a decision (never allow here) or an error code. */
function acceptable(r: Res, mayAllow: boolean): boolean {
  if (r.status >= 500) return false;
  if (r.status === 200) {
    if (!['allow', 'deny', 'indeterminate'].includes(r.body?.decision)) return false;
    return mayAllow || r.body.decision !== 'allow';
  }
  return r.status === 400 && ['invalid_proof', 'invalid_signature', 'invalid_challenge', 'proof_stale', 'invalid_request'].includes(r.body?.error?.code);
}

t.test('mutated real bundles never allow and never 5xx', async (t) => {
  let runs = 0;
  let unchanged = 0;
  const failures: string[] = [];
  await fc.assert(
    fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (muts) => {
      runs++;
      const b = await bundleFor(f);
      const m = apply(b, muts);
      const same = stable(m) === stable(b);
      if (same) unchanged++;
      const r = await verify(f.platform, m, 'data:read');
      const ok = acceptable(r, same) && (!same || r.body?.decision === 'allow');
      if (!ok) failures.push(`${r.status} ${r.text.slice(0, 160)} for ${JSON.stringify(muts).slice(0, 300)}`);
      return ok;
    }),
    { numRuns: 150, interruptAfterTimeLimit: 40_000, markInterruptAsFailure: false },
  );
  t.same(failures, [], 'no allow, no 5xx');
  t.ok(runs >= 50, `${runs} runs (${unchanged} left the bundle unchanged)`);
  const verified = await auditAll(f.user, 'event_type=proof.verified');
  t.equal(verified.length, unchanged, 'the only allows recorded are for unchanged bundles');
});

t.test('random JSON as the bundle never allows and never 5xx', async (t) => {
  const failures: string[] = [];
  await fc.assert(
    fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (v) => {
      const r = await verify(f.platform, v, 'data:read');
      // The body parser refuses prototype-poisoning keys before verify looks at the bundle.
      const codes = /"(__proto__|constructor)"/.test(JSON.stringify(v)) ? ['invalid_proof', 'invalid_request'] : ['invalid_proof'];
      const ok = acceptable(r, false) && r.status === 400 && codes.includes(r.body.error.code);
      if (!ok) failures.push(`${r.status} ${r.text.slice(0, 160)}`);
      return ok;
    }),
    { numRuns: 100, interruptAfterTimeLimit: 15_000, markInterruptAsFailure: false },
  );
  t.same(failures, []);
});
