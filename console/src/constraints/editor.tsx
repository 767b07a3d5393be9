/**
 * The constraints editor of the approval form: one fieldset per kind of
 * kinds.tsx, and the constraints object they make, checked by the API's own
 * validator (src/constraints.ts) so that the message shown is the one the
 * API would give.
 */
import type { JSX } from 'preact';
import { validateConstraints } from '../../../src/constraints.js';
import { CONSTRAINT_KINDS } from './kinds.js';

/** The editor's state: one entry per kind key. */
export type ConstraintsState = Record<string, unknown>;

/** A fresh state (nothing set). */
export function emptyConstraints(): ConstraintsState {
  return Object.fromEntries(CONSTRAINT_KINDS.map((k) => [k.key, k.empty()]));
}

/** The `constraints` member for the API (null when nothing is set) and the API's validation message, if any. */
export function buildConstraints(s: ConstraintsState): { value: Record<string, unknown> | null; error: string | null } {
  const out: Record<string, unknown> = {};
  for (const k of CONSTRAINT_KINDS) {
    const v = k.toValue(s[k.key]);
    if (v !== undefined) out[k.key] = v;
  }
  if (Object.keys(out).length === 0) return { value: null, error: null };
  const err = validateConstraints(out);
  return { value: out, error: err ? `${err}.` : null };
}

/** The editor. */
export function ConstraintsEditor(p: {
  state: ConstraintsState; onChange: (s: ConstraintsState) => void; errorId: string; error: string | null;
  /** The requested scopes (an approval rule names some of them). */
  scopes: readonly string[];
}): JSX.Element {
  return (
    <fieldset class="constraints" aria-describedby={p.error ? p.errorId : undefined}>
      <legend>Constraints <span class="hint">(optional; leave empty for none)</span></legend>
      {CONSTRAINT_KINDS.map((k) => {
        const id = `c-${k.key}`;
        return (
          <fieldset class="kind" key={k.key} aria-describedby={`${id}-help`}>
            <legend id={`${id}-legend`}>{k.label}</legend>
            <span class="hint" id={`${id}-help`}>{k.help}</span>
            <k.Editor id={id} state={p.state[k.key]} scopes={p.scopes} onChange={(v: unknown) => p.onChange({ ...p.state, [k.key]: v })} />
          </fieldset>
        );
      })}
      {p.error && <p class="error" role="alert" id={p.errorId}>{p.error}</p>}
    </fieldset>
  );
}
