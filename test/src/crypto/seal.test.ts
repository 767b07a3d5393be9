/**
 * Tests for sealing secrets at rest (AES-256-GCM) and HKDF subkey derivation.
 */
import t, { type Test } from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { SEAL_OVERHEAD_BYTES, deriveKey, open, seal } from '../../../src/crypto/seal.js';

const key = new Uint8Array(randomBytes(32));
const plaintext = new TextEncoder().encode('a 64-byte hybrid secret seed would go here........ (demo bytes)');

function contains(hay: Uint8Array, needle: Uint8Array): boolean {
  return Buffer.from(hay).indexOf(Buffer.from(needle)) !== -1;
}

function throwsAuth(tt: Test, f: () => unknown, msg: string): void {
  try {
    f();
    tt.fail(`${msg}: did not throw`);
  } catch (e) {
    tt.ok(e instanceof Error && !(e instanceof TypeError) && e.message === 'seal: authentication failed', msg);
  }
}

t.test('round trip and format', async (tt) => {
  const s = seal(key, plaintext, 'agent:42');
  tt.equal(s.length, plaintext.length + SEAL_OVERHEAD_BYTES, 'version + nonce + ciphertext + tag');
  tt.equal(SEAL_OVERHEAD_BYTES, 29);
  tt.equal(s[0], 0x01, 'version byte');
  tt.same(open(key, s, 'agent:42'), plaintext);
  tt.notOk(contains(s, plaintext), 'sealed bytes do not contain the plaintext');
  tt.notOk(contains(s, plaintext.subarray(0, 8)), '...nor a prefix of it');
  const s2 = seal(key, plaintext, 'agent:42');
  tt.notSame(s2.subarray(1, 13), s.subarray(1, 13), 'fresh nonce per seal');
  tt.same(open(key, seal(key, new Uint8Array(), ''), ''), new Uint8Array(), 'empty plaintext and aad');
  tt.same(open(key, seal(key, plaintext, 'ключ/ü'), 'ключ/ü'), plaintext, 'non-ASCII aad');
});

t.test('tampering fails authentication', async (tt) => {
  const s = seal(key, plaintext, 'agent:42');
  throwsAuth(tt, () => open(key, s, 'agent:43'), 'wrong aad');
  throwsAuth(tt, () => open(key, s, ''), 'empty aad');
  throwsAuth(tt, () => open(new Uint8Array(randomBytes(32)), s, 'agent:42'), 'wrong key');
  for (const [name, i] of [['version', 0], ['nonce', 5], ['ciphertext', 20], ['tag', s.length - 1]] as const) {
    const c = new Uint8Array(s);
    c[i]! ^= 0x80;
    throwsAuth(tt, () => open(key, c, 'agent:42'), `flipped ${name} byte`);
  }
  throwsAuth(tt, () => open(key, s.subarray(0, s.length - 1), 'agent:42'), 'truncated');
  throwsAuth(tt, () => open(key, new Uint8Array([...s, 0]), 'agent:42'), 'extended');
  throwsAuth(tt, () => open(key, s.subarray(0, 28), 'agent:42'), 'shorter than the overhead');
  throwsAuth(tt, () => open(key, new Uint8Array(), 'agent:42'), 'empty');
});

t.test('misuse is a TypeError', async (tt) => {
  tt.throws(() => seal(new Uint8Array(16), plaintext, 'a'), TypeError, 'short key');
  tt.throws(() => open(new Uint8Array(33), seal(key, plaintext, 'a'), 'a'), TypeError, 'long key on open');
  tt.throws(() => seal(key, 'text' as unknown as Uint8Array, 'a'), TypeError, 'string plaintext');
  tt.throws(() => seal(key, plaintext, 5 as unknown as string), TypeError, 'non-string aad');
});

t.test('deriveKey (HKDF-SHA256)', async (tt) => {
  const master = new Uint8Array(32).fill(7);
  const k = deriveKey(master, 'seal');
  tt.equal(k.length, 32);
  tt.same(deriveKey(master, 'seal'), k, 'deterministic');
  tt.notSame(deriveKey(master, 'csrf'), k, 'purposes are independent');
  tt.notSame(deriveKey(new Uint8Array(32).fill(8), 'seal'), k, 'depends on the master key');
  tt.equal(deriveKey(master, 'csrf', 64).length, 64);
  // Reference computation (RFC 5869, empty salt = 32 zero bytes, one output block).
  const prk = createHmac('sha256', new Uint8Array(32)).update(master).digest();
  const t1 = createHmac('sha256', prk).update(Buffer.concat([Buffer.from('agent-authz/v1/key/seal'), Buffer.from([1])])).digest();
  tt.same(k, new Uint8Array(t1), 'matches RFC 5869 computed by hand');
  tt.throws(() => deriveKey(new Uint8Array(31), 'seal'), TypeError, 'short master key');
  for (const p of ['', 'Seal', 'a b', 'x'.repeat(65)]) tt.throws(() => deriveKey(master, p), TypeError, `purpose ${JSON.stringify(p)}`);
  for (const n of [0, 15, 65, 1.5]) tt.throws(() => deriveKey(master, 'seal', n), TypeError, `length ${n}`);
});
