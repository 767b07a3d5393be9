/**
 * Timings and rules of the console that the browser tests also read (a
 * plain module: no DOM, no JSX).
 */
import type { TextRule } from '../../src/text.js';

/** How often the audit view polls for the newest events. */
export const AUDIT_POLL_MS = 5000;

/** How often the approvals page polls for new pending approvals. */
export const APPROVALS_POLL_MS = 5000;

/**
 * The text rule of a denial's note: the API's `TEXT_RULES.reason`
 * (sidecar/http/resources.ts; a test checks they agree), applied before
 * sending so the page says what the API would.
 */
export const NOTE_RULE: TextRule = { max: 500, multiline: true, optional: true };

/** How many levels of sub-delegations a certificate's page reads below it (the format's hard cap). */
export const TREE_MAX_DEPTH = 8;

/** How many certificates a certificate's page reads into its tree at most. */
export const TREE_MAX_NODES = 500;
