/**
 * The receiver validates its options once, like the gateway plugin: unknown keys (with a hint
 * for the removed `dedupFile`), wrong types and missing required options each throw a
 * `TypeError` whose message starts with the option's path; secrets never appear in a message.
 * The same for the adapters and for the SQLite store; and `receiver.close()` closes the store.
 */
import t from 'tap';
import type { Test } from 'tap';
import { join } from 'node:path';
import { existsSync, readdirSync } from 'node:fs';
import Fastify from 'fastify';
import { createNodeWebhookHandler, createWebhookReceiver, MemoryDedupStore, webhookFastifyPlugin } from '../../receiver/index.js';
import type { WebhookReceiverOptions } from '../../receiver/index.js';
import { SqliteDedupStore } from '../../receiver/sqlite.js';
import { SECRET, signed, tempDir } from './helpers.js';

const base = (): WebhookReceiverOptions => ({ secret: SECRET, dedup: new MemoryDedupStore(), onEvent: () => undefined });

/** Asserts `fn` throws a TypeError whose message starts with `prefix` and matches `rest`. */
function throwsAt(t: Test, fn: () => unknown, prefix: string, rest: RegExp, name: string): void {
  try {
    fn();
    t.fail(`${name}: accepted`);
  } catch (err) {
    t.ok(err instanceof TypeError, `${name}: a TypeError`);
    const message = (err as Error).message;
    t.ok(message.startsWith(prefix), `${name}: names the path (${message})`);
    t.match(message, rest, `${name}: says what is wrong`);
    t.notMatch(message, /whsec_|\n/, `${name}: one line, no secret`);
  }
}

t.test('createWebhookReceiver: every misuse is a path-named TypeError', async (t) => {
  const cases: [string, () => unknown, string, RegExp][] = [
    ['not an object', () => createWebhookReceiver(undefined as never), 'receiver options: must be an object', /object/],
    ['unknown key', () => createWebhookReceiver({ ...base(), onevent: () => undefined } as never), 'receiver options: onevent: unknown key', /allowed: secret, onEvent/],
    ['dedupFile moved', () => createWebhookReceiver({ ...base(), dedupFile: './x.db' } as never), 'receiver options: dedupFile: was removed', /agent-authz\/receiver\/sqlite/],
    ['missing secret', () => createWebhookReceiver({ ...base(), secret: undefined } as never), 'receiver options: secret: is required', /webhook_signing_secret/],
    ['empty secret', () => createWebhookReceiver({ ...base(), secret: '' }), 'receiver options: secret: must not be empty', /empty/],
    ['numeric secret', () => createWebhookReceiver({ ...base(), secret: 42 } as never), 'receiver options: secret: must be a string or a list of strings', /a number/],
    ['empty list', () => createWebhookReceiver({ ...base(), secret: [] }), 'receiver options: secret: must not be an empty list', /list/],
    ['bad list item', () => createWebhookReceiver({ ...base(), secret: ['whsec_a', ''] }), 'receiver options: secret[1]: must not be empty', /empty/],
    ['non-string list item', () => createWebhookReceiver({ ...base(), secret: ['whsec_a', 7] } as never), 'receiver options: secret[1]: must be a string', /a number/],
    ['missing onEvent', () => createWebhookReceiver({ ...base(), onEvent: undefined } as never), 'receiver options: onEvent: is required', /function/],
    ['onEvent: 1', () => createWebhookReceiver({ ...base(), onEvent: 1 } as never), 'receiver options: onEvent: must be a function', /got a number/],
    ['onUnknownEvent', () => createWebhookReceiver({ ...base(), onUnknownEvent: 'log' } as never), 'receiver options: onUnknownEvent: must be a function', /a string/],
    ['onError', () => createWebhookReceiver({ ...base(), onError: {} } as never), 'receiver options: onError: must be a function', /an object/],
    ['clock', () => createWebhookReceiver({ ...base(), clock: Date.now() } as never), 'receiver options: clock: must be a function', /a number/],
    ['missing dedup', () => createWebhookReceiver({ ...base(), dedup: undefined } as never), 'receiver options: dedup: is required', /SqliteDedupStore.*MemoryDedupStore/],
    ['dedup not a store', () => createWebhookReceiver({ ...base(), dedup: 'memory' } as never), 'receiver options: dedup: must be a DedupStore', /a string/],
    ['dedup without add', () => createWebhookReceiver({ ...base(), dedup: { has: () => false } } as never), 'receiver options: dedup.add: must be a function', /has\(\) and add\(\)/],
    ['dedup close', () => createWebhookReceiver({ ...base(), dedup: { has: () => false, add: () => undefined, close: 1 } } as never), 'receiver options: dedup.close: must be a function', /present/],
    ['tolerance 0', () => createWebhookReceiver({ ...base(), toleranceSeconds: 0 }), 'receiver options: toleranceSeconds: must be an integer from 1 to 3600', /integer/],
    ['tolerance string', () => createWebhookReceiver({ ...base(), toleranceSeconds: '300' } as never), 'receiver options: toleranceSeconds:', /integer/],
  ];
  for (const [name, fn, prefix, rest] of cases) throwsAt(t, fn, prefix, rest, name);
  t.doesNotThrow(() => createWebhookReceiver({ ...base(), secret: ['whsec_new', SECRET], toleranceSeconds: 60, clock: Date.now, onError: () => undefined }));
});

t.test('the adapters validate their options and their receiver', async (t) => {
  const receiver = createWebhookReceiver(base());
  throwsAt(t, () => createNodeWebhookHandler(receiver, { maxBodyBytes: -1 }), 'webhook handler options: maxBodyBytes:', /integer/, 'node maxBodyBytes');
  throwsAt(t, () => createNodeWebhookHandler(receiver, { maxbodybytes: 10 } as never), 'webhook handler options: maxbodybytes: unknown key', /allowed: maxBodyBytes/, 'node unknown key');
  throwsAt(t, () => createNodeWebhookHandler({} as never), 'createNodeWebhookHandler: receiver: must be a receiver', /createWebhookReceiver/, 'node receiver');
  throwsAt(t, () => webhookFastifyPlugin(receiver, { path: 'webhooks' }), 'webhook plugin options: path:', /absolute path/, 'plugin path');
  throwsAt(t, () => webhookFastifyPlugin(receiver, { path: '/x', prefix: '/y' } as never), 'webhook plugin options: prefix: unknown key', /allowed/, 'plugin unknown key');
  throwsAt(t, () => webhookFastifyPlugin(undefined as never), 'webhookFastifyPlugin: receiver: must be a receiver', /undefined/, 'plugin receiver');
  throwsAt(t, () => new MemoryDedupStore(0), 'MemoryDedupStore: maxEntries:', /integer/, 'memory maxEntries');
});

t.test('SqliteDedupStore validates its options before touching the disk', async (t) => {
  const dir = tempDir(t);
  throwsAt(t, () => new SqliteDedupStore(undefined as never), 'SqliteDedupStore options: must be an object', /object/, 'no options');
  throwsAt(t, () => new SqliteDedupStore(join(dir, 'a.db') as never), 'SqliteDedupStore options: must be an object', /object/, 'a plain path');
  throwsAt(t, () => new SqliteDedupStore({} as never), 'SqliteDedupStore options: file: is required', /file/, 'no file');
  throwsAt(t, () => new SqliteDedupStore({ file: join(dir, 'b.db'), retentionDays: 0 }), 'SqliteDedupStore options: retentionDays:', /integer/, 'retention');
  throwsAt(t, () => new SqliteDedupStore({ file: join(dir, 'c.db'), table: 'x; DROP TABLE y' }), 'SqliteDedupStore options: table:', /identifier/, 'table');
  throwsAt(t, () => new SqliteDedupStore({ file: join(dir, 'd.db'), filename: 'x' } as never), 'SqliteDedupStore options: filename: unknown key', /allowed: file/, 'unknown key');
  t.same(readdirSync(dir), [], 'no database file was created by a refused store');
});

t.test('receiver.close() closes the store it was given (once); closing the Fastify app closes the receiver', async (t) => {
  const dir = tempDir(t);
  const store = new SqliteDedupStore({ file: join(dir, 'close.db') });
  let closes = 0;
  const counted = { has: (id: string) => store.has(id), add: (id: string, at: number) => store.add(id, at), close: () => { closes++; store.close(); } };
  const receiver = createWebhookReceiver({ ...base(), dedup: counted });
  t.same(await receiver.handleWebhook(signed()), { status: 204 });
  await Promise.all([receiver.close(), receiver.close()]);
  await receiver.close();
  t.equal(closes, 1, 'the store is closed once');
  t.match(await receiver.handleWebhook(signed()), { status: 503, body: { error: { code: 'dedup_unavailable' } } }, 'after close: 503, the service retries');

  const store2 = new SqliteDedupStore({ file: join(dir, 'app.db') });
  const app = Fastify();
  await app.register(webhookFastifyPlugin(createWebhookReceiver({ ...base(), dedup: store2 })));
  await app.ready();
  t.ok(store2.has('x') === false, 'open while the app runs');
  await app.close();
  t.throws(() => store2.has('x'), /not open/, 'closed with the app');
  t.ok(existsSync(join(dir, 'app.db')));
});
