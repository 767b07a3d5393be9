/**
 * Units of the over-limit answer read (mcp/body.ts; security review finding
 * 5): the gateway reads an MCP answer past its body limit only with a
 * well-formed session proof, up to a small multiple of the limit, and only a
 * few at a time; the id of the server's request is found at the start of the
 * answer even when the limit is smaller than the first chunk.
 */

import t from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { MAX_OVERFLOW_READS, McpAnswerTooLarge, OVERFLOW_FACTOR, overflowReadsInProgress, readLimitedBody } from '../../gateway-plugin/mcp/body.js';

const KEY = randomBytes(32).toString('base64url');
const proofOf = (body: Buffer): string => createHmac('sha256', Buffer.from(KEY, 'base64url')).update(body).digest('base64url');

interface Outcome { err: Error | null; body?: Buffer | undefined }

/** Starts a read; `result()` is the outcome (or undefined while none). */
function read(limit: number, contentLength: number | undefined, proof: string, maxBytes?: number): {
  stream: PassThrough; result: () => Outcome | undefined; done: Promise<Outcome>;
} {
  const stream = new PassThrough();
  let outcome: Outcome | undefined;
  const done = new Promise<Outcome>((resolve) => {
    readLimitedBody(stream, contentLength === undefined ? undefined : String(contentLength), limit, { key: KEY, proof, maxBytes }, (err, body) => {
      outcome = { err, body };
      resolve(outcome);
    });
  });
  return { stream, result: () => outcome, done };
}

const code = (o: Outcome | undefined): string | undefined => (o?.err as { code?: string } | null | undefined)?.code;

t.test('a malformed session proof: over the limit is 413 at once, nothing read past it', async (t) => {
  for (const proof of ['', 'x', 'A'.repeat(42), 'A'.repeat(44), `${'A'.repeat(42)}=`]) {
    const r = read(100, 200, proof);
    t.equal(code(r.result()), 'body_too_large', `proof ${JSON.stringify(proof.slice(0, 8))}… (${proof.length}): refused before reading`);
    const s = read(100, undefined, proof);
    s.stream.write(Buffer.alloc(101));
    t.equal(code(await s.done), 'body_too_large', 'without Content-Length: at the first byte past the limit');
    t.notOk(s.result()?.err instanceof McpAnswerTooLarge);
  }
  t.equal(overflowReadsInProgress(), 0);
});

t.test(`the read stops at ${OVERFLOW_FACTOR} x the limit, or at mcp.answer_overflow_bytes`, async (t) => {
  const proof = 'A'.repeat(43);
  t.equal(code(read(100, 100 * OVERFLOW_FACTOR + 1, proof).result()), 'body_too_large', 'declared past the cap: at once');
  const within = read(100, 100 * OVERFLOW_FACTOR, proof);
  t.equal(within.result(), undefined, 'declared within the cap: read');
  within.stream.end(Buffer.alloc(100 * OVERFLOW_FACTOR));
  t.equal(code(await within.done), 'body_too_large', 'a wrong proof is a plain 413 at the end');
  const set = read(100, undefined, proof, 150);
  set.stream.write(Buffer.alloc(151));
  t.equal(code(await set.done), 'body_too_large', 'the configured cap');
  t.equal(overflowReadsInProgress(), 0);
});

t.test(`at most ${MAX_OVERFLOW_READS} over-limit reads at a time`, async (t) => {
  const proof = 'A'.repeat(43);
  const open = Array.from({ length: MAX_OVERFLOW_READS }, () => read(10, undefined, proof));
  for (const r of open) r.stream.write(Buffer.alloc(11));
  t.equal(overflowReadsInProgress(), MAX_OVERFLOW_READS);
  t.equal(code(read(10, 20, proof).result()), 'body_too_large', 'one more with a Content-Length: at once');
  const more = read(10, undefined, proof);
  more.stream.write(Buffer.alloc(11));
  t.equal(code(await more.done), 'body_too_large', 'one more without: at the limit');
  (open[0] as { stream: PassThrough }).stream.destroy();
  await (open[0] as { done: Promise<Outcome> }).done;
  t.equal(overflowReadsInProgress(), MAX_OVERFLOW_READS - 1, 'a client gone mid-body frees its read');
  for (const r of open.slice(1)) r.stream.end();
  await Promise.all(open.map((r) => r.done));
  t.equal(overflowReadsInProgress(), 0, 'every read freed');
});

t.test('a limit smaller than the first chunk still finds the id at the start of the answer', async (t) => {
  const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: 'x'.repeat(3000) } }));
  const r = read(10, body.length, proofOf(body), 10_000);
  r.stream.end(body);
  const out = await r.done;
  t.ok(out.err instanceof McpAnswerTooLarge, 'the server is answered');
  t.equal((out.err as McpAnswerTooLarge).answerId, 7);
});
