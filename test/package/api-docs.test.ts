/**
 * The public API is documented (issue 19): every name exported by the entry points `agent-authz`
 * (src/index.ts), `/gateway`, `/client`, `/client/mcp`, `/receiver`, `/receiver/sqlite` and
 * `/sidecar` is declared with a TSDoc comment that holds an example (a ``` block or `@example`).
 * The entry files are read as source: each `export { ... } from './x.js'` is followed to the
 * declaration in x.ts (through further re-exports).
 *
 * Also: the receiver entry exports none of its internals.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers.js';

const ENTRIES = ['src/index.ts', 'receiver/index.ts', 'receiver/sqlite.ts', 'sidecar/index.ts', 'gateway-plugin/index.ts', 'client/index.ts', 'client/mcp.ts'];

/** `export { a, b as c } from './x.js'` and `export type { ... } from` lines: [exported name, source name, file]. */
function reexports(file: string): [string, string, string][] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const out: [string, string, string][] = [];
  for (const m of text.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s*from\s*'([^']+)'/g)) {
    const target = path.posix.join(path.posix.dirname(file), m[2]!.replace(/\.js$/, '.ts'));
    for (const spec of m[1]!.split(',').map((s) => s.trim().replace(/^type\s+/, '')).filter(Boolean)) {
      const [source, exported] = spec.split(/\s+as\s+/);
      out.push([exported ?? source!, source!, target]);
    }
  }
  return out;
}

/** The TSDoc comment right before `name`'s declaration in `file` (following re-exports), or undefined. */
function docOf(name: string, file: string, depth = 0): string | undefined {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const decl = new RegExp(`(/\\*\\*(?:(?!\\*/)[\\s\\S])*\\*/)\\s*export\\s+(?:declare\\s+)?(?:async\\s+)?(?:abstract\\s+)?(?:function|const|let|class|interface|type)\\s+${name}\\b`);
  const m = decl.exec(text);
  if (m) return m[1];
  if (depth > 3) return undefined;
  const via = reexports(file).find(([exported]) => exported === name);
  return via === undefined ? undefined : docOf(via[1], via[2], depth + 1);
}

for (const entry of ENTRIES) {
  t.test(`${entry}: every export has TSDoc with an example`, async (t) => {
    const names = reexports(entry);
    const own = [...fs.readFileSync(path.join(ROOT, entry), 'utf8').matchAll(/export\s+(?:declare\s+)?(?:function|const|class|interface|type)\s+(\w+)/g)].map((m) => m[1]!);
    t.ok(names.length + own.length > 0, `${names.length + own.length} exports`);
    for (const name of [...names.map(([n]) => n), ...own]) {
      const source = names.find(([n]) => n === name);
      const doc = source === undefined ? docOf(name, entry) : docOf(source[1], source[2]);
      t.ok(doc !== undefined && /```|@example/.test(doc), `${name}: TSDoc with an example`);
    }
  });
}

t.test('agent-authz/receiver exports no internals', async (t) => {
  const names = reexports('receiver/index.ts').map(([n]) => n);
  for (const internal of ['headerValue', 'receiverError', 'readRawBody', 'SqliteDedupStore', 'resolveReceiverOptions']) {
    t.notOk(names.includes(internal), `${internal} is not exported`);
  }
});
