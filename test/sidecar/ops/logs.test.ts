/**
 * Structured logs: a full flow at level `debug`, including error paths (bad
 * code, bad CSRF, bad API key, a malformed body, a store fault at verify),
 * is captured through `logStream`. Every line is JSON, request lines carry a
 * `request_id` (an incoming `X-Request-Id` is used), and no secret appears:
 * API key, signing secrets, session and CSRF tokens, e-mailed codes, the
 * `X-Service-Proof` value and the proof signatures.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import { Client, present, specFlow } from '../../helpers/sidecar.js';
import { startFaultySidecar } from '../../helpers/store-faults.js';

/** Collects everything written, split into lines. */
class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
  lines(): string[] { return this.text.split('\n').filter(Boolean); }
}

/** Every string and number inside a parsed log line. */
function leaves(v: unknown, out: (string | number)[] = []): (string | number)[] {
  if (typeof v === 'string' || typeof v === 'number') out.push(v);
  else if (Array.isArray(v)) for (const x of v) leaves(x, out);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) leaves(x, out);
  return out;
}

t.test('logs are JSON with request ids and without secrets', async (t) => {
  const cap = new Capture();
  const sc = await startFaultySidecar({ logLevel: 'debug' }, { logStream: cap });
  t.teardown(() => sc.close());

  const secrets = new Map<string, string>();
  const keep = (label: string, v: unknown) => { if (typeof v === 'string' && v.length >= 8) secrets.set(v, label); };

  const f = await specFlow(sc, 'logs@example.com', { approve: ['data:read'], scopes: ['data:read', 'data:write'] });
  keep('api_key', f.reg.api_key);
  keep('signing_secret', f.reg.signing_secret);
  keep('webhook_signing_secret', f.reg.webhook_signing_secret);
  keep('session cookie', f.user.jar.get('service_session'));
  keep('csrf token', f.user.jar.get('service_csrf'));

  // Refresh rotates both tokens.
  t.equal((await f.user.post('/v1/auth/refresh')).status, 200);
  keep('session cookie (refreshed)', f.user.jar.get('service_session'));
  keep('csrf token (refreshed)', f.user.jar.get('service_csrf'));

  // Error paths.
  const stranger = new Client(sc.url);
  t.equal((await stranger.post('/v1/auth/email/send-code', { email: 'logs2@example.com' })).status, 200);
  const code2 = await sc.mail.codeFor('logs2@example.com');
  const wrong = code2 === '000000' ? '111111' : '000000';
  const bad = await stranger.post('/v1/auth/email/verify-code', { email: 'logs2@example.com', code: wrong });
  t.equal(bad.body?.error?.code, 'invalid_code', 'bad code');
  const malformed = await stranger.post('/v1/auth/email/verify-code', undefined, { raw: `{"email":"logs2@example.com","code":"${code2}"` });
  t.equal(malformed.status, 400, 'malformed body with the code in it');
  const badCsrf = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id }, { csrf: `${'x'.repeat(22)}.${'y'.repeat(43)}` });
  t.equal(badCsrf.body?.error?.code, 'csrf_invalid', 'bad CSRF');
  const fakeKey = `aak_0123456789ab_${'Q'.repeat(43)}`;
  keep('fake api key', fakeKey);
  const badKey = await f.platform.post('/v1/service/challenge', undefined, { apiKey: fakeKey });
  t.equal(badKey.status, 401, 'bad key');

  // A proof through the header-carrying path and verify (allow, then a store fault).
  const ch = await f.platform.post('/v1/service/challenge');
  const pr = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
  t.equal(pr.status, 200);
  keep('proof header', pr.body.proof_header);
  for (const [alg, sig] of Object.entries(pr.body.proof_bundle.sig as Record<string, string>)) keep(`proof signature ${alg}`, sig);
  const allow = await f.platform.post('/v1/service/verify', { proof_bundle: pr.body.proof_bundle, required_scope: 'data:read' }, {
    headers: { 'x-service-proof': pr.body.proof_header, 'x-request-id': 'gw-req-0001', 'x-service-signature': 'f'.repeat(64) },
  });
  t.equal(allow.body?.decision, 'allow');
  const bundle2 = await present(f);
  for (const sig of Object.values(bundle2.sig as Record<string, string>)) keep('proof signature', sig);
  sc.faults.fail('proofs.commitDecision', { error: () => new Error('SQLITE_IOERR: disk I/O error') });
  const faulty = await f.platform.post('/v1/service/verify', { proof_bundle: bundle2, required_scope: 'data:read' });
  sc.faults.clear();
  t.ok(faulty.status >= 500 || faulty.body?.decision === 'indeterminate', 'store fault fails closed');

  const codes = sc.mail.messages.map((m) => /sign-in code is (\d{6})/.exec(m.raw)?.[1]).filter((c): c is string => !!c);
  t.ok(codes.length >= 2, 'codes were e-mailed');

  const lines = cap.lines();
  t.ok(lines.length > 30, `captured ${lines.length} log lines`);
  const parsed = lines.map((l, i) => {
    try { return JSON.parse(l) as Record<string, unknown>; } catch { t.fail(`line ${i + 1} is not JSON: ${l.slice(0, 200)}`); return {}; }
  });
  t.equal(sc.app.log.level, 'debug', 'captured at level debug');
  if (process.env.OPS_DUMP_LOGS) process.stderr.write(cap.text);
  const requestLines = parsed.filter((p) => 'req' in p || 'res' in p);
  t.ok(requestLines.length >= 20, 'request lines logged');
  t.same(requestLines.filter((p) => typeof p.request_id !== 'string' || p.request_id === ''), [], 'every request line has a request_id');
  t.ok(parsed.some((p) => p.request_id === 'gw-req-0001'), 'the incoming X-Request-Id is the request_id');
  t.ok(parsed.some((p) => /indeterminate/.test(String(p.msg))), 'the store fault is logged');

  for (const [secret, label] of secrets) t.notOk(cap.text.includes(secret), `${label} is not logged`);
  for (const code of codes) {
    const hits = parsed.flatMap((p) => leaves(p)).filter((v) => (typeof v === 'number' ? String(v) === code : new RegExp(`(?<![0-9])${code}(?![0-9])`).test(v)));
    t.same(hits, [], `e-mailed code ${code} is not logged`);
  }
  t.notOk(/"(cookie|x-service-api-key|x-service-csrf|x-service-proof|x-service-signature)":"(?!\[redacted\])/i.test(cap.text), 'no sensitive header value');
});
