/**
 * Sub-delegation chains across replicas on PostgreSQL (issue 33): two
 * sidecar processes on one database.
 *
 * - a parent budget of N payments, two children each allowed N: of 3N
 *   concurrent verifies of the children's proofs, spread over both replicas,
 *   exactly N are allowed (every link debited in the one-round-trip commit);
 * - revoking a link on one replica denies every descendant at once on the
 *   other, whose caches had just allowed them, and leaves the parent and a
 *   sibling allowed there.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { expectDecision, verify } from '../decide/helpers.js';
import { chainOf, mustSubDelegate, newAgent, proofOf, rootFlow } from '../chains/helpers.js';
import { newReplicaGroup, platformOn, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(240_000);

const pgc = await startPostgres(t);
if (pgc) {
  const group = await newReplicaGroup(t, pgc);
  const [A, B] = await startReplicas(t, group, 2) as [Replica, Replica];

  await t.test('a parent budget of N payments: exactly N of 3N verifies across replicas and children', async (t) => {
    const N = 10;
    const budget = (amount: number) => ({ budget: { amount: `${amount}.00`, currency: 'USD', period: 'total' } });
    const f = await rootFlow(A.sc, 'pg-chain-budget@example.com',
      { approve: ['payments:send'], maxDepth: 1, constraints: budget(N) });
    const kids = [await newAgent(f, 'kid-a'), await newAgent(f, 'kid-b')];
    for (const kid of kids) {
      await mustSubDelegate(f, f.agentId, { to_agent_id: kid, scopes: ['payments:send'], constraints: budget(N) });
    }
    const proofs = [];
    for (let i = 0; i < 3 * N; i++) proofs.push(await proofOf(f, kids[i % 2]!));
    const on = [platformOn(A, f.reg.api_key as string), platformOn(B, f.reg.api_key as string)];
    const ctx = { amount: '1.00', currency: 'USD' };
    const answers = await Promise.all(proofs.map((p, i) =>
      verify(on[Math.floor(i / 2) % 2]!, p, 'payments:send', ctx)));
    t.equal(answers.filter((r) => r.status !== 200).length, 0, 'every verify answered 200');
    t.equal(answers.filter((r) => r.body?.decision === 'allow').length, N, `exactly ${N} of ${3 * N} allowed`);
    t.same([...new Set(answers.filter((r) => r.body?.decision !== 'allow').map((r) => r.body?.decision_reason))],
      ['budget_exceeded'], 'the others: budget_exceeded');
  });

  await t.test('revoking on one replica denies the descendants at once on the other', async (t) => {
    const f = await rootFlow(A.sc, 'pg-chain-revoke@example.com', { maxDepth: 3 });
    const { agents, certs } = await chainOf(f, 3, 3, ['data:read']);
    const sibling = await newAgent(f, 'sibling');
    await mustSubDelegate(f, agents[0]!, { to_agent_id: sibling, scopes: ['data:read'] });
    const onB = platformOn(B, f.reg.api_key as string);
    for (const a of [...agents, sibling]) {
      expectDecision(t, await verify(onB, await proofOf(f, a), 'data:read'), 'allow', 'authorized', undefined,
        'B allows (its caches warm)');
    }
    const proofs = await Promise.all([...agents, sibling].map((a) => proofOf(f, a)));
    const rev = await f.user.post(`/v1/service/delegations/${certs[1]}/revoke`, { reason: 'stop' });
    t.equal(rev.status, 200, 'revoked on A');
    const answers = await Promise.all(proofs.map((p) => verify(onB, p, 'data:read')));
    expectDecision(t, answers[0]!, 'allow', 'authorized', undefined, 'the root: allowed on B');
    for (const d of [1, 2, 3]) {
      expectDecision(t, answers[d]!, 'deny', 'delegation_revoked', undefined, `depth ${d}: denied on B at once`);
    }
    expectDecision(t, answers[4]!, 'allow', 'authorized', undefined, 'the sibling: allowed on B');
  });
}
