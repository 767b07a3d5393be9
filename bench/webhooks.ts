/**
 * The webhooks step: a sidecar starts on a database whose outbox was seeded
 * with pending `delegation.revoked` events for a local receiver; measures
 * how fast the outbox drains (deliveries per second, time to all delivered).
 */
import http from 'node:http';
import crypto from 'node:crypto';
import path from 'node:path';
import { BenchSeedDb } from './seed-db.js';
import { DB_FILE_NAME } from '../sidecar/store/index.js';
import { AAD, createSecretBox } from '../sidecar/secrets.js';
import type { Backend } from './plan.js';
import type { Setup } from './flow.js';
import { startSidecar, stopSidecar } from './sidecar.js';
import { log, sleep } from './common.js';
import type { Run } from './common.js';

/** Runs the webhooks step on a copy (`copy('webhooks')`) of the store base; fills `run.results.webhooks`. */
export async function webhooksStep(run: Run, backend: Backend, s: Setup, copy: (name: string) => string): Promise<void> {
  const { plan } = run;
  const n = plan.webhooks.events;
  const dir = copy('webhooks');
  const received = new Set<string>();
  let first = 0;
  let last = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((r) => { done = r; });
  let expected = Infinity;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-service-delivery-id'] ?? '');
      const now = performance.now();
      if (!received.has(id)) {
        received.add(id);
        if (!first) first = now;
        last = now;
      }
      res.writeHead(204).end();
      if (received.size >= expected) done();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
  const box = createSecretBox(new Uint8Array(Buffer.from(run.masterKey, 'base64')));
  const db = new BenchSeedDb(path.join(dir, DB_FILE_NAME));
  try {
    const rows = Array.from({ length: n }, (_, i) => {
      const id = crypto.randomUUID();
      const body = Buffer.from(JSON.stringify({ event: 'delegation.revoked', cert_id: `cert-${crypto.randomUUID()}`, agent_id: s.agentId, connection_id: s.connectionId, org_id: 'bench', reason: `bench-${i}` }));
      return { id, eventType: 'delegation.revoked', bodyEnc: box.seal(body, AAD.outboxBody(id)) };
    });
    db.seedOutbox(s.connectionId, rows);
    db.setCallbackUrl(db.platformOf(s.connectionId), url);
    expected = db.outboxStates().pending ?? n;
    db.checkpoint();
  } finally {
    db.close();
  }
  const t0 = performance.now();
  const sc = await startSidecar(run, backend, dir, { name: `sidecar(${backend}, webhooks)`, webhooks: true });
  const ready = performance.now();
  try {
    await Promise.race([all, sleep(plan.webhooks.maxSeconds * 1000)]);
  } finally {
    await stopSidecar(sc);
    await new Promise<void>((r) => receiver.close(() => r()));
  }
  const spanS = Math.max(1e-3, (last - first) / 1000);
  run.results.webhooks = {
    backend, enqueued: expected, delivered: received.size, perSec: received.size > 1 ? (received.size - 1) / spanS : 0,
    startupS: (ready - t0) / 1000, allDeliveredAfterReadyS: received.size >= expected ? (last - ready) / 1000 : undefined,
  };
  log(`${backend}: webhooks: ${received.size}/${expected} delivered, ${run.results.webhooks.perSec.toFixed(0)}/s`);
}
