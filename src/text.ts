/**
 * The one rule for human-readable text fields (names, descriptions, reasons,
 * notes): what an account holder or an agent types, which other people later
 * read in a console, a log or an e-mail.
 *
 * A value is accepted when, after NFC normalisation, it
 * - consists of Unicode scalar values only (no lone surrogates, which would
 *   be stored as invalid UTF-8 and read back differently);
 * - has no C0 or C1 control character, except a tab or line feed in a
 *   multi-line field (no CR, NUL, ESC: no log or terminal injection);
 * - has no bidirectional embedding, override or isolate (U+202A–U+202E,
 *   U+2066–U+2069: text that displays in another order than it reads, the
 *   "Trojan Source" trick). The plain marks LRM, RLM and ALM stay allowed;
 * - is not blank (only white space), unless the field is optional and the
 *   value is empty;
 * - is at most `max` code points long.
 *
 * Leading and trailing white space is trimmed from the stored value. Pure: no I/O.
 * docs/api.md ("Text fields") documents the same rule.
 */

/** How one field is checked. */
export interface TextRule {
  /** Most code points (after normalisation and trimming). */
  readonly max: number;
  /** Tabs and line feeds are allowed (descriptions, notes). */
  readonly multiline?: boolean;
  /** The empty string is allowed (an optional field sent empty). */
  readonly optional?: boolean;
}

/** The outcome: the value to store, or why it is refused (a sentence fragment after the field name). */
export type TextCheck = { readonly ok: true; readonly value: string } | { readonly ok: false; readonly reason: string };

// With the `u` flag a surrogate pair is one code point, so this matches lone halves only.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
// C0 controls except TAB (09) and LF (0A), DEL, and C1 controls.
const CONTROL_SINGLE = /[\u0000-\u001F\u007F-\u009F]/u;
const CONTROL_MULTI = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/u;
// Embeddings and overrides (LRE RLE PDF LRO RLO), isolates (LRI RLI FSI PDI).
const BIDI_CONTROL = /[\u202A-\u202E\u2066-\u2069]/u;

/**
 * Checks and normalises one text value.
 *
 * ```ts
 * checkText('  Ada ', { max: 100 });            // { ok: true, value: 'Ada' }
 * checkText('A\u0000B', { max: 100 }).ok;        // false: a control character
 * checkText('evil\u202Etxt.exe', { max: 100 }).ok; // false: a bidi override
 * ```
 */
export function checkText(raw: string, rule: TextRule): TextCheck {
  if (LONE_SURROGATE.test(raw)) return { ok: false, reason: 'contains a lone surrogate (not valid Unicode text)' };
  const value = raw.normalize('NFC');
  if ((rule.multiline ? CONTROL_MULTI : CONTROL_SINGLE).test(value)) {
    return { ok: false, reason: rule.multiline ? 'contains a control character (only tab and line feed are allowed)' : 'contains a control character' };
  }
  if (BIDI_CONTROL.test(value)) return { ok: false, reason: 'contains a bidirectional override or isolate character' };
  const trimmed = value.trim();
  if (trimmed === '' && !(rule.optional && value === '')) return { ok: false, reason: 'must not be blank' };
  let length = 0;
  for (const _ of trimmed) if (++length > rule.max) return { ok: false, reason: `must be at most ${rule.max} characters` };
  return { ok: true, value: trimmed };
}
