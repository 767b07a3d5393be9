/**
 * Timings of the console that the browser tests also read (a plain module:
 * no DOM, no JSX).
 */

/** How often the audit view polls for the newest events. */
export const AUDIT_POLL_MS = 5000;
