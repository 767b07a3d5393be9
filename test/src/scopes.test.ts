/** The scope vocabulary: canonical scopes, custom-scope rules, no wildcards. */
import t from 'tap';
import {
  CANONICAL_SCOPES, CUSTOM_SCOPE_RULES, MAX_SCOPES_PER_LIST, invalidScopes, isCanonicalScope, isCustomScope, isSensitiveScope, isValidScope,
} from '../../src/scopes.js';

t.test('canonical vocabulary', async (t) => {
  for (const s of ['data:read', 'data:write', 'payments:send', 'execute:tool']) t.ok(isCanonicalScope(s), `spec example ${s} exists`);
  for (const s of Object.keys(CANONICAL_SCOPES)) {
    t.match(s, /^[a-z]+:[a-z]+$/, `${s} has the form <area>:<action>`);
    t.ok(isValidScope(s));
    t.notOk(isCustomScope(s));
  }
  for (const s of ['data:read ', 'Data:read', 'data', 'data:', ':read', 'data:read:x', 'toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf']) {
    t.notOk(isCanonicalScope(s), `${JSON.stringify(s)} is not canonical`);
    t.notOk(isValidScope(s), `${JSON.stringify(s)} is not valid`);
  }
});

t.test('sensitive scopes', async (t) => {
  t.ok(isSensitiveScope('payments:send'));
  t.ok(isSensitiveScope('data:delete'));
  t.ok(isSensitiveScope('execute:code'));
  t.ok(isSensitiveScope('admin:manage'));
  t.notOk(isSensitiveScope('data:read'));
  t.notOk(isSensitiveScope('custom:payments:send'), 'custom scopes are not sensitive');
  t.notOk(isSensitiveScope('nonsense'));
});

t.test('custom scopes', async (t) => {
  const valid = [
    'custom:a', 'custom:0', 'custom:crm', 'custom:crm:contacts:read', 'custom:a_b', 'custom:a-b', 'custom:a.b', 'custom:9lives',
    'custom:a:b:c:d:e:f:g:h', // 8 segments
    'custom:' + 'a'.repeat(63), // longest segment
    'custom:' + 'a'.repeat(63) + ':' + 'b'.repeat(57), // exactly 128 characters
  ];
  t.equal(valid[valid.length - 1]!.length, CUSTOM_SCOPE_RULES.maxLength);
  for (const s of valid) {
    t.ok(isCustomScope(s), `${s.slice(0, 40)} is a custom scope`);
    t.ok(isValidScope(s));
  }
  const invalid = [
    'custom:', 'custom', 'custom::a', 'custom:a::b', 'custom:a:', 'custom::', ':custom:a',
    'custom:A', 'custom:crm:Contacts', 'custom:ä', 'custom:a b', 'custom:a/b', 'custom:a*', 'custom:*', 'custom:a:*',
    'custom:-a', 'custom:_a', 'custom:.a', 'Custom:a', 'CUSTOM:a', ' custom:a', 'custom:a ', 'custom:a\n',
    'custom:a:b:c:d:e:f:g:h:i', // 9 segments
    'custom:' + 'a'.repeat(64), // segment too long
    'custom:' + 'a'.repeat(63) + ':' + 'b'.repeat(58), // 129 characters
    'custom:a%20b', 'custom:a\u0000',
  ];
  for (const s of invalid) {
    t.notOk(isCustomScope(s), `${JSON.stringify(s).slice(0, 40)} is not a custom scope`);
    t.notOk(isValidScope(s));
  }
});

t.test('no wildcards, no non-strings', async (t) => {
  for (const s of ['*', 'data:*', '*:read', 'payments:*', '**', 'custom:*', 'custom:crm:*', '', ' ']) {
    t.notOk(isValidScope(s), `${JSON.stringify(s)} is refused`);
  }
  for (const v of [null, undefined, 5, true, {}, [], ['data:read'], new String('data:read')]) {
    t.notOk(isValidScope(v), `${Object.prototype.toString.call(v)} is refused`);
  }
});

t.test('invalidScopes lists the offending entries in order', async (t) => {
  t.same(invalidScopes(['data:read', 'custom:x']), []);
  t.same(invalidScopes(['data:*', 'data:read', '*', 5, null, { a: 1 }, '']), ['data:*', '*', '5', 'null', '(object)', '']);
  // Non-strings are named by type, never serialized: a 20 000-deep array must not overflow the stack.
  let deep: unknown = [];
  for (let i = 0; i < 20_000; i++) deep = [deep];
  t.same(invalidScopes([deep, 'x'.repeat(500)]), ['(array)', 'x'.repeat(140)]);
  t.same(invalidScopes([]), []);
  t.equal(MAX_SCOPES_PER_LIST, 64);
});
