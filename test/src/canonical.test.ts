/** Canonical JSON: sorted keys, no whitespace, integers only; everything else is refused. */
import t from 'tap';
import { canonicalBytes, canonicalize, tryCanonicalize } from '../../src/canonical.js';

t.test('key order and layout', async (t) => {
  t.equal(canonicalize({ b: 1, a: 2 }), '{"a":2,"b":1}');
  t.equal(canonicalize({ b: { d: 1, c: [3, { z: null, y: true }] }, a: 'x' }), '{"a":"x","b":{"c":[3,{"y":true,"z":null}],"d":1}}');
  t.equal(canonicalize({ B: 1, a: 2, _: 3, '1': 4, '': 5 }), '{"":5,"1":4,"B":1,"_":3,"a":2}', 'UTF-16 code-unit order');
  t.equal(canonicalize({ '\u00e9': 1, z: 2, '\ud83d\ude00': 3, '\uffff': 4 }), '{"z":2,"\u00e9":1,"\ud83d\ude00":3,"\uffff":4}', 'sorted by code units, not code points');
  t.equal(canonicalize([3, 1, 2]), '[3,1,2]', 'arrays keep their order');
  t.equal(canonicalize({}), '{}');
  t.equal(canonicalize([]), '[]');
  t.equal(canonicalize('a"b\\c\n\u0001'), JSON.stringify('a"b\\c\n\u0001'));
  t.equal(canonicalize(null), 'null');
  t.equal(canonicalize(false), 'false');
  t.equal(canonicalize(0), '0');
  t.equal(canonicalize(-5), '-5');
  t.equal(canonicalize(Number.MAX_SAFE_INTEGER), '9007199254740991');
  t.equal(canonicalize(Object.assign(Object.create(null) as object, { b: 1, a: 1 })), '{"a":1,"b":1}', 'null-prototype objects are plain');
  t.equal(canonicalize({ a: 1, b: 2 }), canonicalize({ b: 2, a: 1 }), 'insertion order does not matter');
  t.same(Buffer.from(canonicalBytes({ k: '\u00e9' })), Buffer.from('{"k":"\u00e9"}', 'utf8'), 'UTF-8 bytes');
  const round = { x: [1, 'two', { three: null }], y: { z: true } };
  t.same(JSON.parse(canonicalize(round)), round, 'parses back to the same value');
});

t.test('refuses floats, -0, unsafe integers, NaN, Infinity', async (t) => {
  for (const v of [1.5, 0.1, -0, 2 ** 53, -(2 ** 53), NaN, Infinity, -Infinity, 1e21]) {
    t.throws(() => canonicalize(v), TypeError, `${Object.is(v, -0) ? '-0' : String(v)} throws TypeError`);
    t.throws(() => canonicalize({ a: [v] }), TypeError, 'also nested');
    t.equal(tryCanonicalize({ a: v }), null, 'tryCanonicalize gives null');
  }
});

t.test('refuses undefined, functions, symbols, bigint and non-plain objects', async (t) => {
  const bad: [string, unknown][] = [
    ['undefined', undefined],
    ['undefined member', { a: undefined }],
    ['undefined in array', [undefined]],
    ['function', () => 1],
    ['function member', { f: () => 1 }],
    ['symbol', Symbol('x')],
    ['bigint', 1n],
    ['Date', new Date(0)],
    ['Map', new Map()],
    ['class instance', new (class X { a = 1; })()],
    ['Uint8Array', new Uint8Array(1)],
    ['boxed string', new String('x')],
    ['regexp', /x/],
  ];
  for (const [label, v] of bad) {
    t.throws(() => canonicalize(v), TypeError, `${label} throws TypeError`);
    t.equal(tryCanonicalize(v), null, `${label}: tryCanonicalize gives null`);
  }
  // Sparse array holes are undefined.
  t.throws(() => canonicalize([1, , 3]), TypeError, 'array holes'); // eslint-disable-line no-sparse-arrays
});

t.test('nesting is bounded', async (t) => {
  let deep: unknown = 1;
  for (let i = 0; i < 40; i++) deep = [deep];
  t.throws(() => canonicalize(deep), TypeError);
  t.equal(tryCanonicalize(deep), null);
  let ok: unknown = 1;
  for (let i = 0; i < 30; i++) ok = { a: ok };
  t.type(canonicalize(ok), 'string');
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  t.equal(tryCanonicalize(cyclic), null, 'a cycle is refused, not a stack overflow');
});
