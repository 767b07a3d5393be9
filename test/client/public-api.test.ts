/**
 * The public API of `agent-authz/client`, `agent-authz/client/mcp` and `agent-authz/client/a2a`:
 * exactly the names an agent needs, each documented with TSDoc that carries
 * an example, and the package exports pointing at the compiled entries.
 */

import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as api from '../../client/index.js';
import * as mcp from '../../client/mcp.js';
import * as a2a from '../../client/a2a.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

t.test('runtime exports', async (t) => {
  t.same(Object.keys(api).sort(), [
    'AgentAuthzError', 'DEFAULT_APPROVAL_POLL_MS', 'DEFAULT_APPROVAL_TIMEOUT_MS', 'DEFAULT_MAX_BODY_BYTES', 'DEFAULT_SIDECAR_TIMEOUT_MS', 'boundOperation',
    'createAgentFetch', 'describeOperation',
  ]);
  t.same(Object.keys(mcp).sort(), ['createAgentMcpTransport']);
  t.same(Object.keys(a2a).sort(), ['AGENT_CARD_PATH', 'createAgentA2aFetch']);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown>; peerDependenciesMeta: Record<string, unknown> };
  t.same(pkg.exports['./client'], { types: './dist/client/index.d.ts', default: './dist/client/index.js' });
  t.same(pkg.exports['./client/mcp'], { types: './dist/client/mcp.d.ts', default: './dist/client/mcp.js' });
  t.same(pkg.exports['./client/a2a'], { types: './dist/client/a2a.d.ts', default: './dist/client/a2a.js' });
  t.same(pkg.peerDependenciesMeta['@modelcontextprotocol/sdk'], { optional: true }, 'the MCP SDK is needed only by client/mcp');
});

t.test('every export has TSDoc with an @example', async (t) => {
  const entries: Array<[string, string]> = [];
  for (const entry of ['index.ts', 'mcp.ts', 'a2a.ts']) {
    const file = join(ROOT, 'client', entry);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/export (?:type )?\{([^}]*)\} from '([^']+)'/g)) {
      for (const name of (m[1] as string).split(',').map((s) => s.trim()).filter((s) => s !== '')) entries.push([name, join(ROOT, 'client', (m[2] as string).replace(/\.js$/, '.ts'))]);
    }
    for (const m of text.matchAll(/export (?:interface|function|const|class) (\w+)/g)) entries.push([m[1] as string, file]);
  }
  t.ok(entries.length >= 11, `${entries.length} exports`);
  for (const [name, file] of entries) {
    const decl = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*export (?:const|function|class|interface|type) ${name}\\b`).exec(readFileSync(file, 'utf8'));
    t.match(decl?.[1] ?? '', /@example/, `${name}: TSDoc with an example`);
  }
});
