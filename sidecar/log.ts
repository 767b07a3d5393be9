/**
 * Log redaction: pino paths that never reach the log in clear (API keys,
 * cookies, CSRF tokens, proof headers, secrets, login codes).
 */

/** Paths censored by pino in every sidecar log line. */
export const LOG_REDACT_PATHS = [
  'req.headers.cookie',
  'req.headers["x-service-api-key"]',
  'req.headers["x-service-csrf"]',
  'req.headers["x-service-proof"]',
  'req.headers.authorization',
  'res.headers["set-cookie"]',
  'headers.cookie',
  'headers["x-service-api-key"]',
  'headers["x-service-csrf"]',
  'headers["x-service-proof"]',
  'api_key',
  'signing_secret',
  'webhook_signing_secret',
  'body.code',
  'body.api_key',
  'body.proof_bundle',
] as const;
