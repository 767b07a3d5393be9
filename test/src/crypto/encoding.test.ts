/**
 * Tests for the encoding helpers: strict base64url, SHA-256 hex, constant-time string equality.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { b64urlDecode, b64urlEncode, sha256Hex, timingSafeEqualStr } from '../../../src/crypto/encoding.ts';

t.test('base64url round trip', async (tt) => {
  for (let n = 0; n <= 40; n++) {
    const b = new Uint8Array(randomBytes(n));
    const s = b64urlEncode(b);
    tt.notMatch(s, /[=+/]/, `length ${n}: no padding or standard alphabet`);
    tt.same(b64urlDecode(s), b, `length ${n}: decodes back`);
  }
  tt.equal(b64urlEncode(new Uint8Array([0xfb, 0xff])), '-_8');
  tt.same(b64urlDecode('-_8'), new Uint8Array([0xfb, 0xff]));
  tt.same(b64urlDecode(''), new Uint8Array(), 'empty string is empty bytes');
  tt.equal(Object.getPrototypeOf(b64urlDecode('AA')), Uint8Array.prototype, 'plain Uint8Array, not Buffer');
});

t.test('base64url decoding is strict', async (tt) => {
  const bad = ['AA==', 'AA=', 'A', 'AAAAA', '+/8', 'ab+c', 'ab/c', 'AB', 'AAB', '_-9', ' AA', 'AA\n', 'A A', 'ÄA', 'AA.'];
  for (const s of bad) tt.equal(b64urlDecode(s), null, `${JSON.stringify(s)} → null`);
  for (const v of [null, undefined, 1, {}, ['AA']]) tt.equal(b64urlDecode(v as unknown as string), null, `${String(v)} → null`);
  tt.throws(() => b64urlEncode('x' as unknown as Uint8Array), TypeError);
});

t.test('sha256Hex', async (tt) => {
  const abc = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
  tt.equal(sha256Hex('abc'), abc, 'FIPS 180-2 "abc" vector (string)');
  tt.equal(sha256Hex(new TextEncoder().encode('abc')), abc, 'same for bytes');
  tt.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

t.test('timingSafeEqualStr', async (tt) => {
  tt.equal(timingSafeEqualStr('abc', 'abc'), true);
  tt.equal(timingSafeEqualStr('', ''), true);
  tt.equal(timingSafeEqualStr('abc', 'abd'), false);
  tt.equal(timingSafeEqualStr('abc', 'abcd'), false, 'different lengths');
  tt.equal(timingSafeEqualStr('abc', ''), false);
  tt.equal(timingSafeEqualStr('é', 'e\u0301'), false, 'no normalisation');
  tt.equal(timingSafeEqualStr('ü', 'ü'), true);
  tt.equal(timingSafeEqualStr(null as unknown as string, 'null'), false, 'non-string → false');
});
