/**
 * Durability across a crash. First the unit: `releaseAllLeases` in the SQLite
 * outbox and the worker calling it at start. Then the real thing: the
 * sidecar as a child process started as users do (`node --import tsx
 * sidecar/main.ts` with SIDECAR_* variables), a flow over HTTP that enqueues
 * every kind of event the routes emit before a removal, a receiver that holds
 * the deliveries open, `kill -9` while they are in flight, a restart on the
 * same data dir: every event arrives, the interrupted ones with the same id
 * and the same bytes, right after the restart (not after the 60 s lease).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebhookWorker } from '../../../sidecar/webhooks/worker.js';
import { Client, onboard, remoteSidecar, startMailSink } from '../../helpers/sidecar.js';
import { freePort } from '../../helpers/net.js';
import { addPlatform, enqueue, memoryLogger, openFixture, row, startReceiver } from './helpers.js';
import { deliveryId, said, startHookReceiver, transportProblems, waitFor } from './fixtures/hooks.js';
import type { Hit } from './fixtures/hooks.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SECRET = 'whsec_kill_test_0123456789';

t.test('releaseAllLeases clears the leases of pending deliveries only', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const pid = addPlatform(f, 'http://127.0.0.1:9/hook', SECRET);
  const now = Date.now();
  const a = enqueue(f, pid, now);
  const b = enqueue(f, pid, now + 1);
  const c = enqueue(f, pid, now + 2);
  t.equal(await f.outbox.releaseAllLeases(), 0, 'nothing leased yet');
  const claimed = await f.outbox.claimDue(now + 10, 2, 60_000);
  t.same(claimed.map((d) => d.id), [a.id, b.id]);
  t.equal(row(f, a.id).lease_until, now + 10 + 60_000);
  // A finished delivery with a stray lease value is not touched (and not counted).
  f.db.run("UPDATE outbox SET state = 'delivered', lease_until = ? WHERE id = ?", now + 99, b.id);
  t.equal(await f.outbox.releaseAllLeases(), 1, 'one pending delivery was leased');
  t.equal(row(f, a.id).lease_until, null);
  t.equal(row(f, a.id).state, 'pending');
  t.equal(row(f, a.id).attempts, 0, 'no attempt is recorded');
  t.equal(row(f, b.id).lease_until, now + 99, 'delivered row untouched');
  t.equal(row(f, c.id).lease_until, null);
  const again = await f.outbox.claimDue(now + 10, 10, 60_000);
  t.same(again.map((d) => d.id).sort(), [a.id, c.id].sort(), 'due again at once, same ids');
});

t.test('a started worker sends deliveries a dead process had leased, at once', async (t) => {
  const f = openFixture();
  const rx = await startReceiver();
  const logger = memoryLogger();
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, Date.now() - 1000);
  // The previous process claimed it with a long lease and died.
  t.same((await f.outbox.claimDue(Date.now(), 10, 600_000)).map((d) => d.id), [ev.id]);
  const worker = new WebhookWorker({
    store: f.outbox, box: f.box, allowInsecure: true, logger, timeoutMs: 2_000, leaseMs: 600_000, pollIntervalMs: 50,
  });
  t.teardown(async () => {
    await worker.stop();
    await rx.close();
    f.close();
  });
  t.same(await worker.tick(), [], 'without the release the lease holds it (tick does not release)');
  worker.start();
  await waitFor('the leased delivery', 5_000, () => row(f, ev.id).state === 'delivered');
  t.equal(rx.requests.length, 1);
  t.equal(rx.requests[0]!.headers['x-service-delivery-id'], ev.id, 'original id');
  t.ok(rx.requests[0]!.body.equals(ev.body), 'original body');
  t.equal(row(f, ev.id).attempts, 1);
  t.ok(logger.lines.some((l) => l.msg?.includes('released leases') && (l.obj as { released?: number }).released === 1), 'logged the release');
});

// ---------------------------------------------------------------------------
// kill -9 of a real sidecar process

const MASTER_KEY = Buffer.alloc(32, 0x5a).toString('base64');

interface Child { proc: ChildProcess; output: string[]; exited: Promise<void> }

/** Starts the compiled sidecar (SIDECAR_MAIN) and waits until /readyz answers 200. */
async function startChild(env: NodeJS.ProcessEnv, base: string): Promise<Child> {
  const proc = spawn(process.execPath, [SIDECAR_MAIN], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  proc.stdout!.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  proc.stderr!.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await waitFor('the sidecar child to be ready', 15_000, async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`the sidecar exited (${proc.exitCode ?? proc.signalCode}): ${output.join('')}`);
    try {
      return (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200;
    } catch {
      return false;
    }
  });
  return { proc, output, exited };
}

t.test('kill -9 with deliveries in flight: after a restart every event arrives, same ids and bodies', async (t) => {
  const mail = await startMailSink();
  const rx = await startHookReceiver({ holdNext: Number.MAX_SAFE_INTEGER }); // hold everything until the kill
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-kill-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('SIDECAR_') || k.startsWith('TAP') || k.startsWith('_TAP') || k === 'NODE_OPTIONS' || k === 'NODE_ENV') continue;
    env[k] = v;
  }
  Object.assign(env, {
    SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir, SIDECAR_SMTP_URL: mail.url, SIDECAR_WEBHOOK_ALLOW_INSECURE: '1',
    SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'warn', SIDECAR_MASTER_KEY: MASTER_KEY,
  });
  const children: Child[] = [];
  t.teardown(async () => {
    for (const c of children) {
      if (c.proc.exitCode === null && c.proc.signalCode === null) {
        c.proc.kill('SIGKILL');
        await c.exited;
      }
    }
    await rx.close();
    await mail.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  // --- first life: the flow, with every delivery held open by the receiver
  const first = await startChild(env, base);
  children.push(first);
  const user = await onboard(remoteSidecar(base, mail), 'kill-test@example.test');
  const reg = await user.post('/v1/service/platforms/personal', {
    name: 'Kill platform', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'], callback_url: rx.url,
  });
  t.equal(reg.status, 200, said(reg, 'register platform'));
  const secret: string = reg.body.webhook_signing_secret;
  const connId: string = reg.body.connection_id;
  const platform = new Client(base);
  platform.apiKey = reg.body.api_key;
  const agent = await platform.post(`/v1/service/connections/${connId}/agents`, { name: 'agent-k', agent_type: 'api_agent' });
  t.equal(agent.status, 200, said(agent, 'create agent'));
  const sr1 = await user.post('/v1/service/delegations/self-request', { connection_id: connId });
  const ap1 = await user.post(`/v1/service/delegations/requests/${sr1.body.request_id}/approve`, { approved_scope: ['data:read'] });
  t.equal(ap1.status, 200, said(ap1, 'approve'));
  const sr2 = await user.post('/v1/service/delegations/self-request', { connection_id: connId });
  const dn2 = await user.post(`/v1/service/delegations/requests/${sr2.body.request_id}/deny`, { reason: 'no' });
  t.equal(dn2.status, 200, said(dn2, 'deny'));
  const rv = await user.post(`/v1/service/delegations/${ap1.body.cert_id}/revoke`, { reason: 'before the crash' });
  t.equal(rv.status, 200, said(rv, 'revoke'));
  const rot = await user.post(`/v1/service/connections/${connId}/rotate-key`);
  t.equal(rot.status, 200, said(rot, 'rotate-key'));
  const expected = ['connection.created', 'delegation.approved', 'delegation.denied', 'delegation.revoked', 'connection.key_rotated'];

  const before = await user.get('/v1/service/webhooks/deliveries');
  t.equal(before.status, 200);
  t.same(before.body.deliveries.map((d: { event: string }) => d.event).sort(), [...expected].sort(), 'all events are in the outbox');
  t.ok(before.body.deliveries.every((d: { state: string; attempts: number }) => d.state === 'pending' && d.attempts === 0), 'none answered yet');

  // The worker runs 4 deliveries at once: wait until it has as many in flight as it can.
  await waitFor('deliveries in flight at the receiver', 10_000, () => rx.hits.length >= Math.min(4, expected.length));
  await new Promise((r) => setTimeout(r, 200)); // a late fifth would be visible too (it is not: the slots are full)
  const inFlight: Hit[] = [...rx.hits];
  t.ok(inFlight.length >= 1, `${inFlight.length} deliveries in flight at the kill`);
  t.ok(inFlight.every((h) => h.answer === 'held'));
  for (const h of inFlight) t.same(transportProblems(h, secret), [], `in flight: ${String(h.body.event)} is signed`);

  first.proc.kill('SIGKILL');
  await first.exited;
  t.equal(first.proc.signalCode, 'SIGKILL', 'killed with SIGKILL');

  // --- second life: same data dir and master key; the receiver now answers 204
  rx.holdNext = 0;
  const hitsBeforeRestart = rx.hits.length;
  const restartedAt = Date.now();
  const second = await startChild({ ...env, SIDECAR_LOG_LEVEL: 'info' }, base);
  children.push(second);

  const after = (): Hit[] => rx.hits.slice(hitsBeforeRestart);
  await waitFor('every event delivered after the restart', 20_000,
    () => expected.every((e) => after().some((h) => h.body.event === e && h.answer === 204)));
  const allDeliveredMs = Date.now() - restartedAt;
  t.ok(allDeliveredMs < 15_000, `all delivered ${allDeliveredMs} ms after the restart (the lease is 60 s: they were released)`);

  const answered = after().filter((h) => h.answer === 204);
  t.same(answered.map((h) => String(h.body.event)).sort(), [...expected].sort(), 'each event once after the restart, none missing');
  for (const h of answered) t.same(transportProblems(h, secret), [], `after restart: ${String(h.body.event)} is signed`);
  for (const h of inFlight) {
    const again = answered.find((x) => deliveryId(x) === deliveryId(h));
    t.ok(again, `in-flight ${String(h.body.event)} ${deliveryId(h)} delivered again with the same id`);
    if (!again) continue;
    t.ok(again.raw.equals(h.raw), 'with the same body bytes');
    t.ok(Number(again.headers['x-service-timestamp']) >= Number(h.headers['x-service-timestamp']), 'with a current timestamp');
  }
  t.same(new Set(answered.map(deliveryId)), new Set(before.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id)), 'the outbox ids, no others');

  // The session survived the restart; the account sees them delivered, one attempt each.
  const list = await waitFor('the attempts recorded', 10_000, async () => {
    const r = await user.get('/v1/service/webhooks/deliveries');
    return r.status === 200 && r.body.deliveries.every((d: { state: string }) => d.state === 'delivered') ? r : undefined;
  });
  for (const d of list.body.deliveries) {
    t.match(d, { state: 'delivered', attempts: 1, last_status: 204, last_error: null }, `${String(d.event)}: the killed send recorded no attempt`);
  }
  const lines = second.output.join('').split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return {}; } });
  const released = lines.find((l) => typeof l.msg === 'string' && l.msg.includes('released leases'));
  t.equal(released?.released, inFlight.length, 'the restarted worker released the leases of the killed deliveries');

  second.proc.kill('SIGTERM');
  await second.exited;
  t.equal(second.proc.exitCode, 0, 'clean shutdown');
});
