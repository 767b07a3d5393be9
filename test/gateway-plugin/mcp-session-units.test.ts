/**
 * Units of issue 31's MCP session binding and answer limits, without
 * servers: session tokens (mint, open, tampering, another route or secret,
 * lifetime, ending), session proofs, and finding the id of an answer too
 * large to read whole (`answerIdOf`).
 */

import t from 'tap';
import { createHmac, hkdfSync } from 'node:crypto';
import { MAX_CLOCK_SKEW_MS, McpSessions } from '../../gateway-plugin/mcp/session.js';
import { answerIdOf } from '../../gateway-plugin/mcp/message.js';

const KEY = Buffer.from('a gateway-only MCP session secret, 32+ bytes');
const API_KEY = 'gateway-api-key-0123456789';

t.test('a token opens to its agent and upstream id, on any gateway with the same key and route', async (t) => {
  const a = new McpSessions(KEY, '/mcp', 60_000);
  const token = a.mint('agent-1', 'upstream-7') as string;
  t.match(a.open(token), { agentId: 'agent-1', upstreamId: 'upstream-7', token });
  t.match(new McpSessions(KEY, '/mcp', 60_000).open(token), { agentId: 'agent-1' }, 'another replica (a restart too)');
  t.equal(new McpSessions(KEY, '/other', 60_000).open(token), undefined, 'not on another MCP route');
  t.equal(new McpSessions(Buffer.from('another secret of at least 32 bytes'), '/mcp', 60_000).open(token), undefined, 'not under another secret');
  t.equal(a.mint('agent-1', 'bad id with spaces'), undefined, 'an upstream id that is not an MCP session id is not bound');
  t.notOk(token.includes(Buffer.from('upstream-7').toString('base64url')), 'the token does not reveal the upstream id');
  t.notOk(Buffer.from(token.split('.')[2] as string, 'base64url').includes('upstream-7'), 'not even decoded (it is encrypted)');
  t.not(a.mint('agent-1', 'upstream-7'), a.mint('agent-1', 'upstream-7'), 'a fresh IV per token');
});

/** A token as one minted under `secret` would be: the old scheme keyed the MAC with HKDF(API key, route) and label 'route /mcp'. */
function forge(secret: string, info: string, agent: string, upstream: string, issuedAt: number): string {
  const key = Buffer.from(hkdfSync('sha256', secret, 'agent-authz mcp session', info, 32));
  const body = `s1.${Buffer.from(agent).toString('base64url')}.${Buffer.from(upstream).toString('base64url')}.${issuedAt.toString(36)}`;
  return `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`;
}

t.test('whoever holds the sidecar API key cannot mint tokens or session keys (review finding 1)', async (t) => {
  const s = new McpSessions(KEY, '/mcp', 60_000);
  const forged = forge(API_KEY, 'route /mcp', 'agent-2', 'upstream-7', Date.now());
  t.equal(s.open(forged), undefined, 'a token MACed with a key derived from the API key does not open');
  const forged2 = forge(KEY.toString(), 'route /mcp', 'agent-2', 'upstream-7', Date.now());
  t.equal(s.open(forged2), undefined, 'nor one under the old derivation of the same secret');
  const token = s.mint('agent-1', 'upstream-7') as string;
  t.not(s.answerKey(token), token.split('.')[4], 'the session key is not the token MAC');
  t.throws(() => new McpSessions(Buffer.from('short'), '/mcp', 60_000), TypeError, 'a short secret is misuse');
});

t.test('a token dated in the future does not open; within the clock skew it does', async (t) => {
  let now = 1_000_000;
  const s = new McpSessions(KEY, '/mcp', 5_000, () => now);
  now += MAX_CLOCK_SKEW_MS + 1;
  const ahead = s.mint('agent-1', 'u-1') as string;
  now = 1_000_000;
  t.equal(s.open(ahead), undefined, 'issued later than now + the skew');
  now += 1;
  t.ok(s.open(ahead), 'within the skew');
  now = 1_000_000 + MAX_CLOCK_SKEW_MS + 1 + 5_000;
  t.ok(s.open(ahead), 'alive for its lifetime from its issue time');
  now += 1;
  t.equal(s.open(ahead), undefined, 'then expired (a future date does not extend it)');
});

t.test('ending a session ends every token of its upstream id', async (t) => {
  let now = 1_000_000;
  const s = new McpSessions(KEY, '/mcp', 60_000, () => now);
  const first = s.mint('agent-1', 'u-9') as string;
  now += 1;
  const second = s.mint('agent-1', 'u-9') as string;
  t.not(first, second);
  s.end(s.open(first) as NonNullable<ReturnType<McpSessions['open']>>);
  t.equal(s.open(second), undefined, 'another token text of the same upstream session is ended too');
});

t.test('on a route pattern with :param or *, a token is good on the path it was issued on only (review finding 6)', async (t) => {
  for (const pattern of ['/t/:tenant/mcp', '/mcp/*']) {
    const s = new McpSessions(KEY, pattern, 60_000);
    const [here, there] = pattern === '/mcp/*' ? ['/mcp/a', '/mcp/b'] : ['/t/a/mcp', '/t/b/mcp'];
    const token = s.mint('agent-1', 'u-1', here) as string;
    t.ok(s.open(token, here), `${pattern}: on ${here}`);
    t.equal(s.open(token, there), undefined, `${pattern}: not on ${there}`);
  }
  const exact = new McpSessions(KEY, '/mcp', 60_000);
  t.ok(exact.open(exact.mint('agent-1', 'u-1', '/mcp') as string, '/mcp'), 'an exact pattern has one path');
});

t.test('tampered tokens do not open', async (t) => {
  const s = new McpSessions(KEY, '/mcp', 60_000);
  const token = s.mint('agent-1', 'upstream-7') as string;
  const parts = token.split('.');
  const swap = (i: number, v: string): string => parts.map((p, j) => (j === i ? v : p)).join('.');
  for (const [what, bad] of [
    ['another agent', swap(1, Buffer.from('agent-2').toString('base64url'))],
    ['another upstream id', swap(2, Buffer.from('upstream-8').toString('base64url'))],
    ['a later issue time', swap(3, (Date.now() + 1000).toString(36))],
    ['an issue time that is not base36 digits', swap(3, `+${Date.now().toString(36)}`)],
    ['a flipped MAC', swap(4, (parts[4] as string).replace(/^./, (c) => (c === 'A' ? 'B' : 'A')))],
    ['a missing part', parts.slice(0, 4).join('.')],
    ['another version', swap(0, 's2')],
  ] as const) t.equal(s.open(bad), undefined, what);
});

t.test('a token expires after its lifetime, and an ended one never opens again', async (t) => {
  let now = 1_000_000;
  const s = new McpSessions(KEY, '/mcp', 5_000, () => now);
  const token = s.mint('agent-1', 'u-1') as string;
  now += 5_000;
  t.ok(s.open(token), 'alive at its lifetime');
  now += 1;
  t.equal(s.open(token), undefined, 'expired after it');
  now = 1_000_000;
  const other = s.mint('agent-1', 'u-2') as string;
  s.end(s.open(other) as NonNullable<ReturnType<McpSessions['open']>>);
  t.equal(s.open(other), undefined, 'ended');
  t.ok(s.open(token), 'other sessions live on');
});

t.test('session proofs: the HMAC of the exact body under the session key', async (t) => {
  const s = new McpSessions(KEY, '/mcp', 60_000);
  const token = s.mint('agent-1', 'u-1') as string;
  const body = Buffer.from('{"jsonrpc":"2.0","id":3,"result":{}}');
  const proof = createHmac('sha256', Buffer.from(s.answerKey(token), 'base64url')).update(body).digest('base64url');
  t.ok(s.checkAnswer(token, proof, body));
  t.notOk(s.checkAnswer(token, proof, Buffer.from('{"jsonrpc":"2.0","id":4,"result":{}}')), 'another body');
  const other = s.mint('agent-2', 'u-1') as string;
  t.notOk(s.checkAnswer(other, proof, body), 'another session');
  t.notOk(s.checkAnswer(token, 'x', body), 'garbage');
});

t.test('answerIdOf: the top-level id at the start or the end of a response, nothing else', async (t) => {
  const id = (head: string, tail = head): unknown => answerIdOf(Buffer.from(head), Buffer.from(tail));
  t.equal(id('{"jsonrpc":"2.0","id":7,"result":{"x":'), 7, 'id first (most libraries)');
  t.equal(id('{"id":"a-1","jsonrpc":"2.0","error":{'), 'a-1');
  t.equal(id('{"result":{"content":', 'xxxx"}},"jsonrpc":"2.0","id":12}'), 12, 'result first, id last (the official SDK)');
  t.equal(id('{"result":{', '"}},"jsonrpc":"2.0","id":"s-9"}\n'), 's-9');
  t.equal(id('{"result":{', '"x":{"id":5}}}'), undefined, 'a nested id is not the id');
  t.equal(id('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{'), undefined, 'a request is not an answer');
  t.equal(id('{"method":"x","params":{', ',"id":5}'), undefined, 'neither is one with its id last');
  t.equal(id('{"result":{', '"id":"a\\"b"}'), undefined, 'an escaped string id is not guessed');
  t.equal(id('{"result":{', ',"id":12345678901234567}'), undefined, 'not a safe integer');
});
