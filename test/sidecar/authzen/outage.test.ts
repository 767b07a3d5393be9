/**
 * A store outage is never `true` (AuthZEN 1.0: a whole-request failure is an
 * HTTP error; a failed item is `decision: false` with an error): a sidecar on
 * a real PostgreSQL that is then stopped answers a single evaluation with an
 * error status in the error shape (503 `evaluation_indeterminate`, or a 401/5xx
 * when the API key cannot be checked), a batch never with a `true`, and
 * decides again once the database is back. Before that, one table the grant
 * check reads is made unreadable (its SELECT revoked): the key is checked,
 * the delegation cannot be read, and the answers are indeterminate.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { delegateAgent, specFlow, startMailSink } from '../../helpers/sidecar.js';
import { newMasterKey, platformOn, startReplica } from '../postgres/replicas.js';
import { PATHS, action, agent, http } from './helpers.js';

t.setTimeout(180_000);
const pg = await startPostgres(t);
if (pg) {
  const mail = await startMailSink();
  t.teardown(() => mail.close());
  const dbUrl = await pg.createDatabase();
  const db = dbUrl.split('/').pop()!;
  const r = await startReplica(t, { dbUrl, masterKey: newMasterKey(), mail }, 'authzen-outage',
    { env: { SIDECAR_CRYPTO_WORKERS: '0', SIDECAR_DATABASE_CONNECT_TIMEOUT_MS: '1000' } });
  const f = await specFlow(r.sc, 'outage@example.com', { approve: ['data:read'] });
  const c = platformOn(r, f.reg.api_key);
  // An agent whose certificate was never read (not in the certificate cache).
  const fresh = await delegateAgent({ ...f, platform: c }, 'fresh', { approve: ['data:read'] });
  const one = { subject: agent(f.agentId), action: action('data:read'), resource: http('GET', '/x') };

  t.test('before: allowed', async (t) => {
    const a = await c.post(PATHS.evaluation, one);
    t.equal(a.body?.decision, true, a.text);
  });

  t.test('the delegations cannot be read (SELECT revoked): indeterminate, never true', async (t) => {
    await pg.admin('REVOKE SELECT ON certificates FROM authz', [], db);
    t.teardown(() => pg.admin('GRANT SELECT ON certificates TO authz', [], db));
    const other = { ...one, subject: agent(fresh.agentId) };
    const a = await c.post(PATHS.evaluation, other);
    t.equal(a.status, 503, `single: 503 (${a.text.slice(0, 200)})`);
    t.equal(a.body?.error?.code, 'evaluation_indeterminate');
    t.equal(a.body?.error?.reason, 'store_unavailable');
    t.equal(a.body?.decision, undefined, 'no decision member');
    const b = await c.post(PATHS.evaluations, { ...other, evaluations: [{}, {}] });
    t.equal(b.status, 200, 'batch: answered');
    t.same(b.body?.evaluations?.map((e: { decision: boolean; context: { error?: { code: string } } }) =>
      `${e.decision}:${e.context.error?.code}`), ['false:evaluation_indeterminate', 'false:evaluation_indeterminate'],
    'batch: each item false with the error in its context');
    const s = await c.post(PATHS.searchAction, { subject: agent(fresh.agentId), resource: http('GET', '/x') });
    t.equal(s.status, 503, 'search: 503, not an empty list');
    t.equal(s.body?.error?.code, 'evaluation_indeterminate');
  });

  t.test('the database stopped: never true, an error is an error', async (t) => {
    await pg.stop('fast');
    for (let i = 0; i < 3; i++) {
      const a = await c.post(PATHS.evaluation, one);
      t.not(a.body?.decision, true, `single ${i}: never true (${a.status} ${a.text.slice(0, 200)})`);
      t.ok(a.status >= 400, `single ${i}: an HTTP error`);
      t.equal(a.body?.error?.status, a.status, `single ${i}: the error shape`);
      t.type(a.body?.error?.code, 'string');
      const b = await c.post(PATHS.evaluations, { ...one, evaluations: [{}, {}, {}] });
      t.not(b.status, 500, `batch ${i}: not a crash`);
      if (b.status === 200) {
        for (const e of b.body.evaluations) {
          t.equal(e.decision, false, `batch ${i}: false`);
          t.equal(e.context?.error?.code, 'evaluation_indeterminate', `batch ${i}: the error in the context`);
        }
      } else {
        t.equal(b.body?.error?.status, b.status, `batch ${i}: a whole-request error in the error shape`);
      }
      const s = await c.post(PATHS.searchAction, { subject: agent(f.agentId), resource: http('GET', '/x') });
      t.ok(s.status >= 400, `search ${i}: an HTTP error, not an empty or partial list`);
    }
  });

  t.test('the database back: decides again', async (t) => {
    await pg.start();
    let last = '';
    for (let i = 0; i < 50; i++) {
      const a = await c.post(PATHS.evaluation, one);
      last = `${a.status} ${a.text.slice(0, 200)}`;
      if (a.body?.decision === true) break;
      await new Promise((done) => setTimeout(done, 200));
    }
    t.match(last, /^200 .*"decision":true/, 'allowed again');
  });
}
