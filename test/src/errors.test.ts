/**
 * Checks the error-code table (src/errors.ts) and the decision reasons
 * (src/decisions.ts) against docs/errors.md, both ways.
 */
import fs from 'node:fs';
import t from 'tap';
import { ERRORS, ServiceError, errorBody, isErrorCode } from '../../src/errors.js';
import { DECISION_REASONS } from '../../src/decisions.js';

const doc = fs.readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

function section(title: string): string {
  const start = doc.indexOf(`## ${title}`);
  if (start < 0) throw new Error(`docs/errors.md has no section ${title}`);
  const next = doc.indexOf('\n## ', start + 3);
  return doc.slice(start, next < 0 ? undefined : next);
}

t.test('every error code is documented with its status and message, and nothing else is', async (t) => {
  const rows = [...section('Error codes').matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (.+?) \|$/gm)];
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
