/**
 * `SIDECAR_MAX_DELEGATION_DEPTH` (docs/certificates.md, "The right to
 * delegate"): default and hard cap 8, validated once with the other
 * SIDECAR_* settings; a bad value stops startup with one line naming it.
 */
import t from 'tap';
import { MAX_DELEGATION_DEPTH } from '../../../src/certificate.js';
import { ConfigError, loadConfig } from '../../../sidecar/config/index.js';

t.test('default 8, the hard cap', async (t) => {
  t.equal(MAX_DELEGATION_DEPTH, 8);
  t.equal(loadConfig({}).maxDelegationDepth, 8);
  t.equal(loadConfig({ SIDECAR_MAX_DELEGATION_DEPTH: '' }).maxDelegationDepth, 8, 'empty: the default');
  for (const n of [1, 3, 8]) t.equal(loadConfig({ SIDECAR_MAX_DELEGATION_DEPTH: String(n) }).maxDelegationDepth, n);
});

t.test('out of range or not an integer: refused, naming the variable', async (t) => {
  for (const bad of ['0', '9', '-1', '2.5', 'eight', '100']) {
    let err: unknown;
    try { loadConfig({ SIDECAR_MAX_DELEGATION_DEPTH: bad }); } catch (e) { err = e; }
    t.ok(err instanceof ConfigError, `${bad}: a ConfigError`);
    t.match((err as Error).message, /^SIDECAR_MAX_DELEGATION_DEPTH: /, `${bad}: names the variable`);
    t.notMatch((err as Error).message, /\n/, 'one line');
  }
});
