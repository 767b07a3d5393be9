/**
 * The public API of `agent-authz/gateway` (gateway-plugin/index.ts): exactly
 * the names a user needs, no internals (normalizePath, RouteTable,
 * compileRoutes, option resolvers), and every export documented with TSDoc
 * that carries an example.
 */

import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as api from '../../gateway-plugin/index.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const INDEX = join(ROOT, 'gateway-plugin', 'index.ts');

/** Runtime exports users need. */
const RUNTIME = [
  'DECISION_HEADERS', 'DEFAULT_BODY_LIMIT_BYTES', 'DEFAULT_CHALLENGE_TIMEOUT_MS', 'DEFAULT_SIDECAR_CONNECTIONS',
  'DEFAULT_UPSTREAM_TIMEOUT_MS', 'DEFAULT_VERIFY_TIMEOUT_MS', 'DEFAULT_FORWARD_AUTH_PREFIX', 'GATEWAY_MAX_HEADER_SIZE', 'agentAuthzForwardAuth', 'agentAuthzGateway',
  'createGatewayMetrics', 'default', 'gatewayClientErrors', 'gatewayFrameworkErrors', 'gatewayNotFound', 'OVERRIDE_HEADERS',
];

t.test('runtime exports are exactly the public ones', async (t) => {
  t.same(Object.keys(api).sort(), [...RUNTIME].sort());
  t.equal(api.default, api.agentAuthzGateway, 'the default export is the plugin');
  for (const internal of ['normalizePath', 'normalizeRequestTarget', 'RouteTable', 'compileRoutes', 'SCOPE_PATTERN', 'resolveGatewayOptions', 'SUPPORTED_METHODS', 'PROOF_HEADER', 'MAX_PATH_LENGTH']) {
    t.notOk(internal in api, `${internal} is not public`);
  }
});

/** `export { a, b as c } from './x.js'` and `export type { … } from` statements of index.ts → [name, module file]. */
function exportedDeclarations(): Array<[string, string]> {
  const text = readFileSync(INDEX, 'utf8');
  const out: Array<[string, string]> = [];
  for (const m of text.matchAll(/export (?:type )?\{([^}]*)\} from '([^']+)'/g)) {
    const file = join(dirname(INDEX), (m[2] as string).replace(/\.js$/, '.ts'));
    for (const part of (m[1] as string).split(',').map((s) => s.trim()).filter((s) => s !== '')) {
      out.push([part.split(/\s+as\s+/)[0] as string, file]);
    }
  }
  return out;
}

t.test('every export has TSDoc with an @example', async (t) => {
  const decls = exportedDeclarations();
  t.ok(decls.length >= 18, `${decls.length} exported declarations`);
  for (const [name, file] of decls) {
    const source = readFileSync(file, 'utf8');
    const decl = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*export (?:async )?(?:const|function|class|interface|type) ${name}\\b`).exec(source);
    t.ok(decl !== null, `${name}: declared with TSDoc in ${file.slice(ROOT.length + 1)}`);
    t.match(decl?.[1] ?? '', /@example/, `${name}: the TSDoc has an example`);
  }
});
