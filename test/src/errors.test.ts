/**
 * Checks the error-code table (src/errors.ts) and the decision reasons
 * (src/decisions.ts) against docs/errors.md, both ways.
 */
import fs from 'node:fs';
import t from 'tap';
import { ERRORS, GATEWAY_ERRORS, GATEWAY_ERROR_CODES, ServiceError, errorBody, isErrorCode } from '../../src/errors.js';
import { GATEWAY_REFUSAL_CODES, gatewayRefusal } from '../../client/errors.js';
import { DECISION_REASONS } from '../../src/decisions.js';

const doc = fs.readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

function section(title: string): string {
  const start = doc.indexOf(`## ${title}`);
  if (start < 0) throw new Error(`docs/errors.md has no section ${title}`);
  const next = doc.indexOf('\n## ', start + 3);
  return doc.slice(start, next < 0 ? undefined : next);
}

t.test('every error code is documented with its status and message, and nothing else is', async (t) => {
  const rows = [...section('Error codes').matchAll(/^\| `([a-z0-9_]+)` \| (\d{3}) \| (.+?) \|$/gm)];
  t.ok(rows.length >= 40, `found ${rows.length} documented codes`);
  const documented = new Map(rows.map((r) => [r[1]!, { status: Number(r[2]), message: r[3]! }]));
  for (const [code, spec] of Object.entries(ERRORS)) {
    t.same(documented.get(code), { status: spec.status, message: spec.message }, `docs row for ${code}`);
  }
  for (const code of documented.keys()) t.ok(isErrorCode(code), `documented code ${code} exists in src/errors.ts`);
});

t.test('every decision reason is documented with its decision', async (t) => {
  const rows = [...section('Decision reasons').matchAll(/^\| `([a-z_]+)` \| `([a-z]+)` \| .+ \|$/gm)];
  t.equal(rows.length, Object.keys(DECISION_REASONS).length, 'same number of reasons');
  for (const r of rows) t.equal(DECISION_REASONS[r[1] as keyof typeof DECISION_REASONS]?.decision, r[2], `reason ${r[1]}`);
});

t.test('ServiceError carries the table status and builds the spec error shape', async (t) => {
  const e = new ServiceError('invalid_scopes', undefined, { invalid_scopes: ['x'] });
  t.equal(e.status, 400);
  t.same(e.toBody(), { error: { invalid_scopes: ['x'], code: 'invalid_scopes', message: ERRORS.invalid_scopes.message, status: 400 } });
  t.same(errorBody('rate_limited').error.status, 429);
  t.notOk(isErrorCode('toString'), 'prototype keys are not codes');
});

t.test('the client knows the gateway codes from the table, not from a list of its own', async (t) => {
  const codes = Object.keys(ERRORS);
  t.same(GATEWAY_ERROR_CODES, codes.slice(codes.indexOf('proof_required')), 'the gateway part is the tail of the table, from proof_required');
  const documented = [...section('Error codes').matchAll(/^\| `([a-z0-9_]+)` \| \d{3} \|/gm)].map((r) => r[1]);
  t.same(documented.slice(documented.indexOf('proof_required')), [...GATEWAY_ERROR_CODES], 'docs/errors.md: the same tail, in order');
  for (const code of GATEWAY_ERROR_CODES) t.same(ERRORS[code], GATEWAY_ERRORS[code], `${code}: one entry`);
  t.same([...GATEWAY_REFUSAL_CODES].sort(), [...GATEWAY_ERROR_CODES].sort(), 'client/errors.ts: the same codes');
  const refused = gatewayRefusal(403, errorBody('route_not_mapped'));
  t.equal(refused?.error.code, 'route_not_mapped', 'a gateway code with its status is a refusal');
  t.equal(gatewayRefusal(400, errorBody('invalid_signature')), undefined, 'a sidecar code is the API\'s own answer');
  t.equal(gatewayRefusal(401, errorBody('route_not_mapped')), undefined, 'a gateway code with another status is not');
});
