/**
 * `/healthz` (liveness) and `/readyz` (store answers, migrations applied, not
 * shutting down) on a real sidecar, plus the `X-Request-Id` contract.
 */
import fs from 'node:fs';
import net from 'node:net';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startSidecar } from '../../helpers/sidecar.js';
import { startFaultySidecar } from '../../helpers/store-faults.js';
import { openSqliteStore } from '../../../sidecar/store/index.js';
import type { SqliteStore } from '../../../sidecar/store/index.js';

t.test('liveness and readiness', async (t) => {
  const sc = await startFaultySidecar();
  t.teardown(() => sc.close());

  const live = await fetch(`${sc.url}/healthz`);
  t.equal(live.status, 200);
  t.same(await live.json(), { status: 'ok' });
  t.equal(live.headers.get('cache-control'), 'no-store');

  const ready = await fetch(`${sc.url}/readyz`);
  t.equal(ready.status, 200);
  const body = await ready.json() as { status: string; schema_version: number };
  t.equal(body.status, 'ready');
  t.ok(Number.isInteger(body.schema_version) && body.schema_version >= 1, 'schema version reported');

  // The store fails: not ready (503), but still alive.
  sc.faults.fail(/./);
  const down = await fetch(`${sc.url}/readyz`);
  t.equal(down.status, 503);
  t.same(await down.json(), { status: 'not_ready', reason: 'store_unavailable' });
  t.equal((await fetch(`${sc.url}/healthz`)).status, 200, 'liveness does not depend on the store');
  const m = await fetch(`${sc.url}/metrics`);
  t.equal(m.status, 200, 'metrics are still served while the store fails');
  await m.text();

  sc.faults.clear();
  t.equal((await fetch(`${sc.url}/readyz`)).status, 200, 'ready again once the store answers');
});

t.test('readiness reports pending migrations', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-ready-'));
  const real = openSqliteStore({ file: path.join(dir, 'db.sqlite') });
  const stale = Object.create(real) as SqliteStore;
  stale.ping = async () => ({ ok: false, schemaVersion: 1, expectedVersion: 99 });
  const sc = await startSidecar({}, { store: stale });
  t.teardown(async () => { await sc.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  const r = await fetch(`${sc.url}/readyz`);
  t.equal(r.status, 503);
  t.same(await r.json(), { status: 'not_ready', reason: 'migrations_pending', schema_version: 1, expected_version: 99 });
});

t.test('readiness turns 503 as soon as a shutdown starts', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close().catch(() => {}));
  t.equal((await fetch(`${sc.url}/readyz`)).status, 200);
  // A request whose headers are still arriving when the shutdown starts is answered, not reset.
  const port = Number(new URL(sc.url).port);
  const sock = net.connect(port, '127.0.0.1');
  await once(sock, 'connect');
  sock.write('GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  await new Promise((r) => setTimeout(r, 50));
  const closing = sc.app.close();
  await new Promise((r) => setTimeout(r, 50));
  let raw = '';
  sock.setEncoding('utf8').on('data', (d: string) => { raw += d; });
  const ended = once(sock, 'close');
  sock.write('\r\n');
  await ended;
  await closing;
  t.match(raw, /^HTTP\/1\.1 503 /);
  t.match(raw, /\r\nconnection: close\r\n/i);
  t.match(raw, /"reason":"shutting_down"/);
});

t.test('X-Request-Id is honoured and echoed', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const a = await fetch(`${sc.url}/healthz`, { headers: { 'x-request-id': 'gw-1234.abc:def_9' } });
  t.equal(a.headers.get('x-request-id'), 'gw-1234.abc:def_9');
  const b = await fetch(`${sc.url}/v1/service/verify`, { method: 'POST', headers: { 'x-request-id': 'upstream-42', 'content-type': 'application/json' }, body: '{}' });
  t.equal(b.status, 401);
  t.equal(b.headers.get('x-request-id'), 'upstream-42', 'echoed on errors too');
  const c = await fetch(`${sc.url}/healthz`, { headers: { 'x-request-id': 'not ok; <script>' } });
  t.match(c.headers.get('x-request-id'), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'an unusable id is replaced by a UUID');
  const d = await fetch(`${sc.url}/healthz`);
  t.match(d.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, 'an id is made when none is sent');
  const e = await fetch(`${sc.url}/no/such/route`, { headers: { 'x-request-id': 'nf-1' } });
  t.equal(e.status, 404);
  t.equal(e.headers.get('x-request-id'), 'nf-1', 'echoed on 404');
});
