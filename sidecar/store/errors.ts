/**
 * The store's one error class for callers: the database cannot be reached or
 * did not answer in time (connection refused or lost, server shutting down,
 * statement timeout). It carries `statusCode = 503`, so an account call that
 * meets it answers 503 `service_unavailable` (sidecar/http/errors.ts); the
 * verify pipeline answers `indeterminate` for every store error anyway.
 * Other store errors (a broken constraint) propagate as they are.
 *
 * {@link SchemaTooNewError} stops startup: the database was migrated by a
 * newer sidecar than this one. {@link AuditSourceError} is the offline audit
 * verifier's: its input cannot be read.
 */

/** The database is unavailable; the request may succeed later. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
  /** Read by Fastify's error handling: 503. */
  readonly statusCode = 503;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The database's schema is newer than this code knows: the sidecar must not start. */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError';
  constructor(found: number, known: number) {
    super(`the database schema is at version ${found}, newer than this sidecar knows (${known}): a newer sidecar migrated it. `
      + 'Run that version (or newer) of the sidecar, or restore a backup made before the upgrade; this one refuses to start.');
  }
}

/** Why an audit source cannot be verified (unreadable, not a sidecar database with the chain, not an export). */
export class AuditSourceError extends Error {
  override name = 'AuditSourceError';
}
