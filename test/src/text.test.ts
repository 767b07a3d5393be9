/**
 * The text rule (src/text.ts), value by value: what is refused and why, what
 * is stored (NFC, trimmed), and the multi-line and optional variants.
 */
import t from 'tap';
import { checkText } from '../../src/text.js';

t.test('refused values', async (t) => {
  const cases: [string, RegExp][] = [
    ['A\r\nB\u0000', /control character/], ['\u001b[31m', /control character/], ['x\u0085y', /control character/],
    ['x\ud800y', /lone surrogate/], ['\udc00', /lone surrogate/], ['a\u202Eb', /bidirectional/], ['a\u2067b', /bidirectional/],
    ['', /blank/], [' \u00a0\t', /control character|blank/], ['   ', /blank/], ['x'.repeat(11), /at most 10/],
  ];
  for (const [v, why] of cases) {
    const r = checkText(v, { max: 10 });
    t.equal(r.ok, false, `${JSON.stringify(v)} refused`);
    if (!r.ok) t.match(r.reason, why);
  }
});

t.test('accepted values are normalised', async (t) => {
  t.same(checkText('  Ada ', { max: 10 }), { ok: true, value: 'Ada' });
  t.same(checkText('Cafe\u0301', { max: 10 }), { ok: true, value: 'Café' }, 'NFC');
  t.same(checkText('😀'.repeat(10), { max: 10 }), { ok: true, value: '😀'.repeat(10) }, 'the bound counts code points');
  t.same(checkText('\u200Fשלום', { max: 10 }), { ok: true, value: '\u200Fשלום' }, 'RLM mark allowed');
  t.same(checkText('a\nb\tc', { max: 10, multiline: true }), { ok: true, value: 'a\nb\tc' }, 'multi-line fields keep LF and tab');
  t.equal(checkText('a\r\nb', { max: 10, multiline: true }).ok, false, 'but not CR');
  t.same(checkText('', { max: 10, optional: true }), { ok: true, value: '' }, 'an optional field may be empty');
  t.equal(checkText(' ', { max: 10, optional: true }).ok, false, 'but not blank');
});
