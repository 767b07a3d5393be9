/** Fixtures for the receiver tests: signed requests built by hand with node:crypto, temp dirs. */
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SECRET = 'whsec_receiver_test_0123456789';

/** The spec formula, independent of src/webhooks.ts. */
export const sign = (secret: string, ts: string, body: Buffer): string =>
  createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.concat([Buffer.from(`${ts}.`, 'utf8'), body])).digest('hex');

/** A signed delivery as the service sends it. */
export interface Signed {
  id: string;
  rawBody: Buffer;
  headers: Record<string, string>;
}

export function signed(opts: { id?: string; nowMs?: number; secret?: string; event?: Record<string, unknown>; headerId?: string } = {}): Signed {
  const id = opts.id ?? randomUUID();
  const ts = String(Math.floor((opts.nowMs ?? Date.now()) / 1000));
  const rawBody = Buffer.from(JSON.stringify(opts.event ?? {
    event: 'delegation.revoked', delivery_id: id, occurred_at: new Date().toISOString(),
    cert_id: `cert-${randomUUID()}`, agent_id: 'a1', connection_id: 'c1', org_id: 'o1', reason: 'test',
  }));
  return {
    id,
    rawBody,
    headers: {
      'content-type': 'application/json',
      'x-service-signature': sign(opts.secret ?? SECRET, ts, rawBody),
      'x-service-timestamp': ts,
      'x-service-delivery-id': opts.headerId ?? id,
      'user-agent': 'agent-authz-webhooks/1',
    },
  };
}

export function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'authz-receiver-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
