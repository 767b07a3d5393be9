/**
 * The shape of one constraint kind of the approval form's editor (the
 * entries of kinds.tsx and rule-kinds.tsx): its form state, its editor, how
 * the state becomes the API's member, and how a set value reads in plain
 * words.
 */
import type { JSX } from 'preact';

/** The props of a kind's editor. */
export interface EditorProps<S> {
  /** The id prefix of the kind's fields (`c-<key>`). */
  id: string;
  state: S;
  onChange: (s: S) => void;
  /** The scopes of the request under review (what an approval rule can name). */
  scopes: readonly string[];
}

/** One constraint kind. */
export interface ConstraintKind<S> {
  /** The member of `constraints` (docs/constraints.md). */
  key: string;
  label: string;
  help: string;
  empty: () => S;
  /** The API's member, or undefined when the kind is not set. */
  toValue: (s: S) => unknown;
  Editor: (p: EditorProps<S>) => JSX.Element;
  /** The value in plain words, for lists and confirmations. */
  describe: (v: unknown) => string;
}
