/**
 * Logging policy of the sidecar: JSON lines (pino through Fastify), one
 * `request_id` per request (`X-Request-Id` is honoured when it is 1–128
 * characters of `[A-Za-z0-9._:-]`, otherwise a UUID is made; the id is echoed
 * in the `X-Request-Id` response header), and redaction.
 *
 * What never reaches the log in clear: API keys, cookies (the session token
 * and the CSRF cookie), the CSRF header, proof headers and bundles, webhook
 * signatures, platform secrets and e-mailed login codes. Fastify's request
 * serializer logs only method, url, host and remote address (no headers,
 * no bodies), and no route logs a body; the paths below censor those fields
 * wherever they would still appear, at the top level or one level down.
 *
 * The one deliberate exception is the development mailer (no
 * `SIDECAR_SMTP_URL`): it writes login codes to the log as `devLoginCode`,
 * with a warning at startup. Never run it in production.
 */

/** Secret field names: censored at the top level of a log object and one level down. */
export const SECRET_FIELDS = [
  'api_key', 'apiKey', 'signing_secret', 'webhook_signing_secret', 'proof_bundle', 'csrf', 'password', 'secret',
] as const;

/** Headers censored in any logged header object. */
export const SECRET_HEADERS = [
  'cookie', 'set-cookie', 'authorization', 'x-service-api-key', 'x-service-csrf', 'x-service-proof', 'x-service-signature',
] as const;

/** Paths censored by pino in every sidecar log line. */
export const LOG_REDACT_PATHS: readonly string[] = [
  ...SECRET_HEADERS.flatMap((h) => [`req.headers["${h}"]`, `res.headers["${h}"]`, `headers["${h}"]`]),
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]),
  'body.code',
  'req.body',
  'request.body',
];

/** The censor value written in place of a redacted field. */
export const LOG_CENSOR = '[redacted]';
