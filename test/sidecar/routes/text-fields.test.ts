/**
 * The text rule on every human-readable field, through the real server
 * (issue 20 §2): control characters, lone surrogates, bidi overrides and
 * blank values are refused with 400 `invalid_request` naming the field; values
 * are stored NFC-normalised and trimmed, so a name reads back exactly as
 * creation returned it. That covers a platform's description and the note of
 * a denied step-up approval too. Also: operations without a body refuse
 * unknown members (refresh, challenge), as docs/api.md says.
 */
import t from 'tap';
import { Client, expectError, login, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { payment } from '../approvals/helpers.js';

t.test('text fields', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  const u = await login(sc, 'text@example.com');
  const bad = await u.post('/v1/auth/onboarding/profile', { first_name: 'A\r\nB\u0000', last_name: '\u001b[31m' });
  expectError(t, bad, 400, 'invalid_request', 'control characters in a name');
  t.equal(bad.body.error.field, 'body.first_name');
  const esc = await u.post('/v1/auth/onboarding/profile', { first_name: 'Ada', last_name: '\u001b[31m' });
  expectError(t, esc, 400, 'invalid_request', 'an ANSI escape');
  t.equal(esc.body.error.field, 'body.last_name');
  const ok = await u.post('/v1/auth/onboarding/profile', { first_name: '  Ada  ', last_name: 'Love\u0301lace' });
  t.equal(ok.status, 200);
  t.same([ok.body.first_name, ok.body.last_name], ['Ada', 'Lovélace'], 'trimmed and NFC');
  t.equal((await u.get('/v1/auth/session')).body.last_name, 'Lovélace', 'stored as returned');

  const f = await specFlow(sc, 'text-flow@example.com', { approve: ['data:read'] });
  const create = (name: string) => f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents`, { name, agent_type: 'api_agent' });
  for (const [name, why] of [
    ['x\ud800y\u0000z', 'a lone surrogate and a NUL'],
    ['x\ud800y', 'a lone surrogate'],
    ['   ', 'only spaces'],
    ['invoice\u202Efdp.exe', 'a right-to-left override'],
    ['a\u2066b\u2069', 'a bidi isolate'],
    ['tab\there', 'a tab in a one-line field'],
  ] as const) {
    const r = await create(name);
    expectError(t, r, 400, 'invalid_request', why);
    t.equal(r.body.error.field, 'body.name', `${why}: names the field`);
  }
  const made = await create(' Cafe\u0301 \u200F');
  t.equal(made.status, 200, 'NFC-normalisable names with a plain RLM mark are accepted');
  const list = (await f.user.get('/v1/service/agents')).body.agents as { agent_id: string; name: string }[];
  t.equal(list.find((a) => a.agent_id === made.body.agent_id)?.name, made.body.name, 'the name reads back exactly as creation returned it');
  t.equal(made.body.name, 'Café \u200F'.trim(), 'trimmed, NFC');

  const reg = await f.user.post('/v1/service/platforms/personal', { name: 'p', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'], description: 'a\u0007' });
  expectError(t, reg, 400, 'invalid_request', 'a BEL in a description');
  t.equal(reg.body.error.field, 'body.description', 'names the description');
  t.match(reg.body.error.message, /description/, 'the message names the field too');
  const revoke = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'bad\u202Ereason' });
  expectError(t, revoke, 400, 'invalid_request', 'a bidi override in a reason');
  t.equal(revoke.body.error.field, 'body.reason');
  const multi = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'line one\nline two\twith a tab' });
  t.equal(multi.status, 200, 'reasons may span lines');
});

t.test('the note of a denied approval', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'note@example.com', { approve: ['payments:send'], constraints: { require_approval: { scopes: ['payments:send'] } } });
  const p = payment('25.00');
  const v = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'payments:send', context: p.context });
  t.match(v.body, { decision: 'deny', decision_reason: 'approval_required', approval_id: String });
  const deny = (note: string) => f.user.post(`/v1/service/approvals/${String(v.body.approval_id)}/deny`, { note });
  for (const [note, why] of [['not\u0007now', 'a BEL'], ['no\u0000', 'a NUL'], ['\u009bcsi', 'a C1 control'], ['ok\u202Eko', 'a bidi override'], ['x\ud800', 'a lone surrogate'], [' \n\t ', 'only blanks']] as const) {
    const r = await deny(note);
    expectError(t, r, 400, 'invalid_request', `${why} in a note`);
    t.equal(r.body.error.field, 'body.note', `${why}: names the field`);
  }
  t.equal((await f.user.get(`/v1/service/approvals/${String(v.body.approval_id)}`)).body.state, 'pending', 'the refusals decided nothing');
  const ok = await deny('Cafe\u0301 is closed\n\ttry tomorrow');
  t.equal(ok.status, 200, 'a multi-line note with a tab is accepted');
  t.equal(ok.body.note, 'Café is closed\n\ttry tomorrow', 'stored NFC-normalised');
  t.equal((await f.platform.get(`/v1/service/approvals/${String(v.body.approval_id)}/status`)).body.note, ok.body.note, 'the agent reads the same note');
});

t.test('operations without a body refuse unknown members', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'nobody@example.com', { approve: ['data:read'] });
  const refresh = await f.user.post('/v1/auth/refresh', { extra: 1 });
  expectError(t, refresh, 400, 'invalid_request', 'refresh with a member');
  t.equal(refresh.body.error.field, 'body.extra');
  t.equal((await f.user.post('/v1/auth/refresh')).status, 200, 'refresh with no body');
  t.equal((await f.user.post('/v1/auth/refresh', {})).status, 200, 'refresh with {}');
  const challenge = await f.platform.post('/v1/service/challenge', { audience: 'x' });
  expectError(t, challenge, 400, 'invalid_request', 'challenge with a member');
  t.equal(challenge.body.error.field, 'body.audience');
  t.equal((await f.platform.post('/v1/service/challenge')).status, 200, 'challenge with no body');
  const plain = new Client(sc.url);
  plain.apiKey = f.reg.api_key;
  t.equal((await plain.post('/v1/service/challenge', [])).status, 400, 'an array body is refused');
});
