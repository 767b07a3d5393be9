/**
 * A runnable webhook receiver: verifies each delivery from the sidecar,
 * deduplicates it by delivery id (SQLite file) and prints the event.
 *
 *   WEBHOOK_SECRET=whsec_... PORT=8787 npx tsx examples/webhook-receiver.ts
 *
 * Environment:
 *   WEBHOOK_SECRET   the webhook_signing_secret shown at platform registration (required;
 *                    several may be given separated by commas, during a rotation)
 *   PORT             port to listen on (default 8787)
 *   HOST             address to listen on (default 127.0.0.1)
 *   DEDUP_FILE       SQLite file of processed delivery ids (default ./webhook-deliveries.db)
 *
 * Point the platform's callback URL at it (any path). The sidecar sends only to
 * https and public addresses unless it runs with SIDECAR_WEBHOOK_ALLOW_INSECURE=1
 * (development only): put this behind a TLS-terminating proxy, or use that flag
 * locally with callback URL http://127.0.0.1:8787/webhooks.
 *
 * In an application, import from 'agent-authz/receiver' and 'agent-authz/receiver/sqlite'
 * instead of the relative paths.
 */
import http from 'node:http';
import { createNodeWebhookHandler, createWebhookReceiver } from '../receiver/index.js';
import type { WebhookEvent } from '../receiver/index.js';
import { SqliteDedupStore } from '../receiver/sqlite.js';

const secretEnv = process.env['WEBHOOK_SECRET'];
if (!secretEnv) {
  console.error('Set WEBHOOK_SECRET to the webhook_signing_secret of your platform.');
  process.exit(2);
}
const port = Number(process.env['PORT'] ?? 8787);
const host = process.env['HOST'] ?? '127.0.0.1';
const dedupFile = process.env['DEDUP_FILE'] ?? './webhook-deliveries.db';

/** Values never to print. */
const SECRET_FIELDS = new Set(['api_key', 'webhook_signing_secret']);
const redact = (e: WebhookEvent): Record<string, unknown> =>
  Object.fromEntries(Object.entries(e).map(([k, v]) => [k, SECRET_FIELDS.has(k) ? '[redacted]' : v]));

const receiver = createWebhookReceiver({
  secret: secretEnv.split(',').map((s) => s.trim()).filter(Boolean),
  dedup: new SqliteDedupStore({ file: dedupFile }),
  // Store or queue only; do the real work elsewhere (spec 6.3). Here: print.
  onEvent: (event, ctx) => {
    console.log(`${new Date().toISOString()} ${event.event} delivery=${ctx.deliveryId}`);
    console.log(JSON.stringify(redact(event), null, 2));
  },
  onUnknownEvent: (body, ctx) => {
    console.log(`${new Date().toISOString()} unknown event ${String(body['event'])} delivery=${ctx.deliveryId}`);
  },
  onError: (err, ctx) => console.error(`delivery ${ctx.deliveryId}: ${ctx.stage} failed:`, err),
});

const server = http.createServer(createNodeWebhookHandler(receiver));
server.listen(port, host, () => {
  const a = server.address();
  const bound = typeof a === 'object' && a !== null ? a.port : port;
  console.log(`webhook receiver listening on http://${host}:${bound} (dedup: ${dedupFile})`);
});

const shutdown = (): void => {
  server.close(() => {
    void receiver.close().then(() => process.exit(0));
  });
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
