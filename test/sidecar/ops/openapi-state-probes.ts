/**
 * The state-dependent mistakes of `openapi-errors.test.ts`: requests that are
 * well formed but wrong for what exists (a decided request approved again, a
 * scope that was not requested, a second platform, an approval granted twice,
 * a redelivery without a callback, a removed connection, …). They run in the
 * order listed, as the owner of every real id unless `as` says otherwise;
 * some succeed on purpose to set up the next one (`expect` absent).
 */
import type { Flow } from '../../helpers/sidecar.js';

/** One state-dependent request. */
export interface StateProbe {
  /** The operation, by operationId. */
  readonly operationId: string;
  readonly name: string;
  /** The JSON body (none when absent). */
  readonly body?: unknown;
  /** Path ids to use instead of the fixture's. */
  readonly ids?: (f: Flow) => Record<string, string>;
  /** Whose credentials (default the owner). */
  readonly as?: 'owner' | 'other';
  /** `"<status> <code>"` it must answer; absent: any answer, checked only against the document. */
  readonly expect?: string;
}

const decided = (f: Flow): Record<string, string> => ({ request_id: f.requestId });
const approve = (body: Record<string, unknown>): Record<string, unknown> => ({ approved_scope: ['data:read'], ...body });

/** The state probes, in the order they run. */
export const STATE_PROBES: readonly StateProbe[] = [
  { operationId: 'sendLoginCode', name: 'not an e-mail address', body: { email: 'not-an-address' }, expect: '400 invalid_request' },
  { operationId: 'verifyLoginCode', name: 'a code for an address that never asked', body: { email: 'nobody@example.com', code: '123456' }, expect: '400 invalid_code' },
  { operationId: 'verifyLoginCode', name: 'a code already used', body: { email: 'probe-owner@example.com', code: '123456' }, expect: '400 code_used' },
  { operationId: 'setProfile', name: 'a name with a bidirectional override', body: { first_name: '\u202Eevil', last_name: 'x' }, expect: '400 invalid_request' },
  { operationId: 'setAccountType', name: 'an unknown account type', body: { account_type: 'robot' }, expect: '400 invalid_account_type' },
  { operationId: 'setAccountType', name: 'another type after onboarding', body: { account_type: 'organization' }, expect: '409 onboarding_complete' },
  { operationId: 'registerPersonalPlatform', name: 'a second platform', body: { name: 'p2', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] }, expect: '409 platform_limit_reached' },
  { operationId: 'registerPersonalPlatform', name: 'a scope outside the vocabulary', body: { name: 'p2', surface_type: 'agentic_api', default_allowed_scopes: ['nope:x'] }, expect: '400 invalid_scopes' },
  { operationId: 'registerPersonalPlatform', name: 'an ftp callback', body: { name: 'p2', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'], callback_url: 'ftp://example.com/' }, expect: '400 invalid_callback_url' },
  { operationId: 'registerPersonalPlatform', name: 'an unknown surface type', body: { name: 'p2', surface_type: 'tv', default_allowed_scopes: ['data:read'] }, expect: '400 invalid_request' },
  { operationId: 'updatePlatform', name: 'an empty edit', body: {}, expect: '400 invalid_request' },
  { operationId: 'updatePlatform', name: 'a blank name', body: { name: ' ' }, expect: '400 invalid_request' },
  { operationId: 'updatePlatform', name: 'a member that cannot be edited', body: { callback_url: null },
    expect: '400 invalid_request' },
  { operationId: 'setCallbackUrl', name: 'an ftp callback', body: { callback_url: 'ftp://example.com/' }, expect: '400 invalid_callback_url' },
  { operationId: 'createAgent', name: 'an unknown agent type', body: { name: 'a', agent_type: 'robot' }, expect: '400 invalid_agent_type' },
  { operationId: 'createAgent', name: 'an empty name', body: { name: '', agent_type: 'api_agent' }, expect: '400 invalid_request' },
  { operationId: 'createSelfRequest', name: 'an agent of no connection', body: { connection_id: '{connection_id}', agent_id: 'nope' }, expect: '404 agent_not_found' },
  { operationId: 'approveDelegationRequest', name: 'an empty scope', body: { approved_scope: [] }, expect: '400 empty_scope' },
  { operationId: 'approveDelegationRequest', name: 'a scope outside the vocabulary', body: { approved_scope: ['nope:x'] }, expect: '400 invalid_scopes' },
  { operationId: 'approveDelegationRequest', name: 'a scope not requested', body: { approved_scope: ['admin:manage'] }, expect: '400 scope_not_requested' },
  { operationId: 'approveDelegationRequest', name: 'an expiry in the past', body: approve({ expires_at: '2000-01-01T00:00:00Z' }), expect: '400 invalid_expiry' },
  { operationId: 'approveDelegationRequest', name: 'an unknown constraint', body: approve({ constraints: { bogus: 1 } }), expect: '400 invalid_constraints' },
  { operationId: 'approveDelegationRequest', name: 'a budget without a period', body: approve({ constraints: { budget: { amount: '1.00', currency: 'USD' } } }), expect: '400 invalid_constraints' },
  { operationId: 'approveDelegationRequest', name: 'a decided request', body: approve({}), ids: decided, expect: '409 request_not_pending' },
  { operationId: 'denyDelegationRequest', name: 'a decided request', body: { reason: 'no' }, ids: decided, expect: '409 request_not_pending' },
  { operationId: 'denyDelegationRequest', name: 'a reason that is not a string', body: { reason: 5 }, expect: '400 invalid_request' },
  { operationId: 'revokeCertificate', name: 'a reason with a NUL', body: { reason: 'a\u0000b' }, expect: '400 invalid_request' },
  { operationId: 'presentProof', name: 'a challenge never issued', body: { challenge: 'A'.repeat(43) }, expect: '400 invalid_challenge' },
  { operationId: 'presentProof', name: 'an operation of the wrong shape', body: { challenge: 'A'.repeat(43), operation: { scope: 5 } }, expect: '400 invalid_request' },
  { operationId: 'verifyProof', name: 'an empty proof bundle', body: { proof_bundle: {}, required_scope: 'data:read' }, expect: '400 invalid_proof' },
  { operationId: 'verifyProof', name: 'a proof bundle that is a string', body: { proof_bundle: 'nope', required_scope: 'data:read' } },
  { operationId: 'verifyProof', name: 'a scope outside the vocabulary', body: { proof_bundle: {}, required_scope: 'nope:x' } },
  { operationId: 'verifyProof', name: 'an unknown context member', body: { proof_bundle: {}, required_scope: 'data:read', context: { colour: 'red' } }, expect: '400 invalid_request' },
  { operationId: 'denyApproval', name: 'a note with a NUL', body: { note: 'a\u0000b' }, expect: '400 invalid_request' },
  { operationId: 'getApprovalStatus', name: 'another platform\'s approval', as: 'other', expect: '404 approval_not_found' },
  { operationId: 'grantApproval', name: 'grant (sets up the next)', body: {} },
  { operationId: 'grantApproval', name: 'an approval already granted', body: {}, expect: '409 approval_not_pending' },
  { operationId: 'denyApproval', name: 'an approval already granted', body: {}, expect: '409 approval_not_pending' },
  { operationId: 'setCallbackUrl', name: 'clear the callback (sets up the next)', body: { callback_url: null } },
  { operationId: 'redeliverWebhook', name: 'a platform without a callback', body: {}, expect: '409 callback_not_configured' },
  { operationId: 'removeConnection', name: 'remove (sets up the next)', body: {} },
  { operationId: 'rotateApiKey', name: 'a removed connection', body: {}, expect: '404 connection_not_found' },
  { operationId: 'createSelfRequest', name: 'a removed connection', body: { connection_id: '{connection_id}' }, expect: '404 connection_not_found' },
  { operationId: 'createChallenge', name: 'the key of a removed connection', body: {}, expect: '401 invalid_api_key' },
  { operationId: 'getCertificateUsage', name: 'the usage of a revoked certificate' },
  { operationId: 'revokeCertificate', name: 'a certificate already revoked', body: { reason: 'again' } },
];
