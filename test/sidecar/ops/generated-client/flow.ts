/**
 * The spec's flow, written against the TypeScript client that
 * swagger-typescript-api generates from GET /openapi.json (`./api.ts`, made by
 * test/sidecar/ops/openapi-client.test.ts next to a copy of this file). It is
 * type-checked with strict `tsc` before it runs, so a method name, parameter or
 * response member that the document gets wrong fails the test.
 *
 * Cookies behave as in a browser (a jar in `customFetch`); the CSRF header and
 * the API key are added by the client's `securityWorker` to the operations the
 * document marks as secured.
 */
import { Api } from './api.js';

/** What the flow saw, for the test to assert. */
export interface FlowResult {
  onboardingStep: string;
  platformId: string;
  agentId: string;
  certId: string;
  allow: { decision: string; decision_reason: string };
  afterRevoke: { decision: string; decision_reason: string };
  presentAfterRevoke: { status: number; code: string };
  auditTypes: string[];
  refreshed: string;
}

/** A fetch that keeps cookies like a browser (one jar per client). */
function cookieFetch(jar: Map<string, string>): typeof fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    if (jar.size > 0) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(input, { ...init, headers });
    for (const line of res.headers.getSetCookie()) {
      const pair = line.split(';', 1)[0] ?? '';
      const i = pair.indexOf('=');
      const name = pair.slice(0, i);
      const value = pair.slice(i + 1);
      if (value === '') jar.delete(name);
      else jar.set(name, value);
    }
    return res;
  };
}

/** Runs sign-in → onboarding → platform → agent → delegation → challenge → present → verify → revoke → audit. */
export async function runFlow(baseUrl: string, email: string, codeFor: (email: string) => Promise<string>): Promise<FlowResult> {
  const jar = new Map<string, string>();
  const user = new Api({
    baseUrl, customFetch: cookieFetch(jar),
    securityWorker: () => ({ headers: { 'X-Service-CSRF': jar.get('service_csrf') ?? '' } }),
  });
  await user.auth.sendLoginCode({ email });
  const login = await user.auth.verifyLoginCode({ email, code: await codeFor(email) });
  await user.onboarding.setProfile({ first_name: 'Ada', last_name: 'Lovelace' });
  const done = await user.onboarding.setAccountType({ account_type: 'individual' });
  const refreshed = await user.auth.refreshSession();
  const reg = await user.platforms.registerPersonalPlatform({
    name: 'Generated client', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'payments:send'],
  });

  const platform = new Api({ baseUrl, securityWorker: () => ({ headers: { 'X-Service-API-Key': reg.api_key } }) });
  const agent = await platform.agents.createAgent(reg.connection_id, { name: 'agent-1', agent_type: 'api_agent' });
  const request = await user.delegations.createSelfRequest({ connection_id: reg.connection_id, agent_id: agent.agent_id });
  const approval = await user.delegations.approveDelegationRequest(request.request_id, { approved_scope: ['data:read'] });

  const prove = async () => {
    const { challenge } = await platform.proofs.createChallenge();
    return (await platform.proofs.presentProof(reg.connection_id, agent.agent_id, { challenge })).proof_bundle;
  };
  const allow = await platform.verify.verifyProof({ proof_bundle: await prove(), required_scope: 'data:read' });
  const earlier = await prove();
  await user.delegations.revokeCertificate(approval.cert_id, { reason: 'done' });
  const afterRevoke = await platform.verify.verifyProof({ proof_bundle: earlier, required_scope: 'data:read' });
  const { challenge } = await platform.proofs.createChallenge();
  const refused = await platform.proofs.presentProof(reg.connection_id, agent.agent_id, { challenge }).then(
    () => ({ status: 200, code: '' }),
    (err: { status: number; error: { error: { code: string } } }) => ({ status: err.status, code: err.error.error.code }),
  );
  const audit = await user.audit.listAuditEvents({ limit: 25 });

  return {
    onboardingStep: done.onboarding_step, platformId: reg.platform_id, agentId: agent.agent_id, certId: approval.cert_id,
    allow: { decision: allow.decision, decision_reason: allow.decision_reason },
    afterRevoke: { decision: afterRevoke.decision, decision_reason: afterRevoke.decision_reason },
    presentAfterRevoke: refused, auditTypes: audit.events.map((e) => e.event_type), refreshed: `${login.status}/${refreshed.status}`,
  };
}
