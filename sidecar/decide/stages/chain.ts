/**
 * Stage 9, chain: for a sub-delegated certificate (docs/certificates.md,
 * "Sub-delegation"), every link of its chain decides too. The delegation
 * stage decided the leaf; this stage, on an allow, checks each ancestor from
 * the leaf's parent up to the root with the same check (status, expiry, the
 * required scope, its constraints against the context) and takes the first
 * deny. A chain deeper than `SIDECAR_MAX_DELEGATION_DEPTH` allows now is deny
 * `not_delegated` at the leaf (the setting may have been lowered since issue).
 * Every decision under a chain names the chain in its audit row (`chain`: the
 * certificate ids, leaf to root) and a deny names the link it failed at
 * (`link: {depth, cert_id}`). A certificate the account holder signed is left
 * as the delegation stage decided it. A store failure is `store_unavailable`.
 */
import { depthOf } from '../../../src/chain.js';
import { need, read } from '../stage.js';
import type { Decision, Stage } from '../stage.js';
import { checkDelegation } from './delegation.js';

/** The chain stage. */
export const chain: Stage = {
  name: 'chain',
  async run(ctx, call) {
    const links = call.chain;
    if (links === undefined || links.length < 2) return;
    const decision = need(call.decision, 'decision');
    const request = need(call.request, 'request');
    const leaf = links[0]!.payload;
    const ids = links.map((c) => c.payload.cert_id);
    const named = (d: Decision, at: number): Decision => ({
      ...d, details: { ...d.details, chain: ids, link: { depth: depthOf(links[at]!.payload), cert_id: ids[at] } } });
    if (decision.decision !== 'allow') {
      call.decision = named(decision, 0);
      return;
    }
    if (depthOf(leaf) > ctx.config.maxDelegationDepth) {
      call.decision = named({ decision: 'deny', reason: 'not_delegated' }, 0);
      return;
    }
    for (let at = 1; at < links.length; at++) {
      const d = await read(() => checkDelegation(ctx, links[at]!, request.required_scope, request.context, call.now));
      if (d.decision !== 'allow') {
        call.decision = named(d, at);
        return;
      }
    }
    call.decision = { ...decision, details: { ...decision.details, chain: ids } };
  },
};
