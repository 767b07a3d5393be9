/**
 * Tests for the encoding helpers: strict base64url, SHA-256 hex, constant-time string equality.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { b64urlDecode, b64urlEncode, sha256Hex, timingSafeEqualStr } from '../../../src/crypto/encoding.js';

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

t.test('base64url: exactly one accepted text per byte string (every last character tried)', async (tt) => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  let accepted = 0;
  for (const prefix of ['', 'QUJD']) {
    for (const body of ['A', 'AB']) {
      for (const c of alphabet) {
        const s = prefix + body + c;
        const d = b64urlDecode(s);
        const canonical = Buffer.from(s, 'base64url').toString('base64url') === s;
        tt.equal(d !== null, canonical, `${s}: accepted exactly when canonical`);
        if (d) { accepted++; tt.equal(b64urlEncode(d), s, `${s}: round trip`); }
      }
    }
  }
  tt.equal(accepted, 2 * (16 + 4), 'per prefix: 16 canonical last characters after 1 character, 4 after 2');
});

t.test('sha256Hex', async (tt) => {
  const abc = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
  tt.equal(sha256Hex('abc'), abc, 'FIPS 180-2 "abc" vector (string)');
  tt.equal(sha256Hex(new TextEncoder().encode('abc')), abc, 'same for bytes');
  tt.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  tt.equal(sha256Hex(new Uint8Array(0)), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'empty bytes too');
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
  // Equal-length ASCII takes the direct byte comparison; everything else the HMAC path.
  const hex = 'a1'.repeat(32);
  tt.equal(timingSafeEqualStr(hex, 'a1'.repeat(32)), true, 'equal hex');
  tt.equal(timingSafeEqualStr(hex, 'a1'.repeat(31) + 'a2'), false, 'hex differing in the last character');
  tt.equal(timingSafeEqualStr('A-_b'.repeat(11), 'A-_b'.repeat(11)), true, 'equal base64url');
  tt.equal(timingSafeEqualStr('abé', 'abè'), false, 'equal length, non-ASCII, different');
  tt.equal(timingSafeEqualStr('abé', 'abé'), true, 'equal length, non-ASCII, same');
  tt.equal(timingSafeEqualStr('ab\u00e9', 'ab\u00c3'), false, 'no Latin-1 truncation or UTF-8 confusion');
  tt.equal(timingSafeEqualStr('\ud800', '\udfff'), false, 'different lone surrogates');
  tt.equal(timingSafeEqualStr('x\ud800', 'x\ud800'), true, 'same lone surrogate');
  tt.equal(timingSafeEqualStr('\u0100', '\u0000'), false, 'no Latin-1 truncation of U+0100');
});
