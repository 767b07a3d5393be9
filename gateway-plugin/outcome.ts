/**
 * The outcome mapper: verify result → what the gateway does (spec 4.15 table).
 *
 * | verify result                                        | gateway answer                                   |
 * |------------------------------------------------------|--------------------------------------------------|
 * | 200 `allow` (scope, if echoed, equals the required)  | forward to the upstream                          |
 * | 200 `deny`, reason not_delegated / delegation_revoked / delegation_expired / constraint_denied | 403 with that code (+ `constraint`) |
 * | 200 `deny`, any other reason                          | 403 `proof_rejected`, `reason` = the deny reason |
 * | 200 `deny` with `approval_id` (approval reasons)      | the same, plus `approval_id` and the header `X-Service-Approval-Id` |
 * | 200 `indeterminate`                                   | 503 `decision_indeterminate`                     |
 * | 200 unknown decision                                  | 503 `verify_unavailable`, cause `verify_unknown_decision` |
 * | 200 non-JSON type, empty, unparseable, not an object, oversized, or scope mismatch | 503 `verify_unavailable`, cause `verify_bad_response` |
 * | 200 `allow` without a valid `idempotency` member (a key was sent) | 503 `verify_unavailable`, `verify_bad_response` |
 * | 400                                                   | 403 `proof_rejected`, `reason` = verify's error.code |
 * | 409 `idempotency_in_flight`, 422 `idempotency_key_reused` | the same status and code (idempotency.ts)     |
 * | 401, 402, 429, 5xx, any other status                  | 503 `verify_unavailable`, cause `verify_status_<n>` |
 * | timeout (incl. a hung body) / network failure         | 503 `verify_unavailable`, cause `verify_timeout` / `verify_network` |
 *
 * Only the first row reaches the upstream. Values copied from the sidecar into
 * responses are restricted to short lowercase identifiers.
 */

import { ServiceError } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import type { DecisionReason } from '../src/decisions.js';
import { APPROVAL_ID_HEADER, APPROVAL_ID_PATTERN } from '../src/protocol.js';
import type { VerifyResponse } from '../src/protocol.js';
import type { VerifyCallResult } from './verify-client.js';
import { parseLedgerAnswer } from './idempotency.js';
import type { LedgerAnswer } from './idempotency.js';

/** A deny reason that is also a gateway error code (it becomes the 403 `error.code` itself). */
export type DenyCode = DecisionReason & ErrorCode;

/** Deny reasons that become the 403 `error.code` themselves. */
export const DENY_CODES: ReadonlySet<string> = new Set<DenyCode>(['not_delegated', 'delegation_revoked', 'delegation_expired', 'constraint_denied']);

/** A verify 200 body as read off the wire: every member of {@link VerifyResponse}, none trusted yet. */
type UntrustedVerifyResponse = { readonly [K in keyof VerifyResponse]?: unknown };

/** Shape of identifiers passed on from the sidecar (reason, constraint, code). */
export const IDENTIFIER_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
/** Shape of agent/cert/scope values copied into upstream headers. */
const HEADER_VALUE = /^[\x21-\x7e]{1,256}$/;

/** What the gateway does with a verified request. */
export type Outcome =
  | {
    readonly kind: 'allow'; readonly scope: string;
    readonly agentId: string | undefined; readonly certId: string | undefined;
    readonly idempotency?: LedgerAnswer;
  }
  | { readonly kind: 'refuse'; readonly error: ServiceError };

/** Label of the verify-latency histogram for an outcome. */
export function verifyCallLabel(result: VerifyCallResult, outcome: Outcome): string {
  if (result.kind !== 'response') return result.kind;
  if (outcome.kind === 'allow') return 'allow';
  const code = outcome.error.code;
  if (DENY_CODES.has(code) || (code === 'proof_rejected' && result.status === 200)) return 'deny';
  if (code === 'decision_indeterminate') return 'indeterminate';
  return code === 'proof_rejected' ? 'rejected' : 'error';
}

function identifier(value: unknown): string | undefined {
  return typeof value === 'string' && IDENTIFIER_PATTERN.test(value) ? value : undefined;
}

function headerValue(value: unknown): string | undefined {
  return typeof value === 'string' && HEADER_VALUE.test(value) ? value : undefined;
}

function refuse(code: ErrorCode, extra: Record<string, unknown>, headers?: Record<string, string>): Outcome {
  return { kind: 'refuse', error: new ServiceError(code, undefined, extra, headers) };
}

function unavailable(cause: string): Outcome {
  return refuse('verify_unavailable', { cause });
}

function parseObject(result: Extract<VerifyCallResult, { kind: 'response' }>,
  needJsonType: boolean): UntrustedVerifyResponse & Record<string, unknown> | undefined {
  const type = (result.contentType ?? '').split(';')[0]?.trim().toLowerCase();
  if (result.tooLarge || (needJsonType && type !== 'application/json') || result.body.trim() === '') return undefined;
  try {
    const parsed = JSON.parse(result.body) as unknown;
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The ledger's refusals, passed on to the agent with their own status and code. */
const LEDGER_REFUSALS: Readonly<Record<number, ErrorCode>> = {
  409: 'idempotency_in_flight', 422: 'idempotency_key_reused',
};

/**
 * Maps one verify result to the gateway's outcome for `requiredScope`; `keyed`: the request sent an
 * idempotency block, so an allow must carry the ledger's answer.
 */
export function mapVerifyCall(result: VerifyCallResult, requiredScope: string, keyed = false): Outcome {
  if (result.kind === 'timeout') return unavailable('verify_timeout');
  if (result.kind === 'network') return unavailable('verify_network');
  const ledgerCode = LEDGER_REFUSALS[result.status];
  if (keyed && ledgerCode !== undefined) {
    const err = parseObject(result, false)?.error as Record<string, unknown> | undefined;
    if (err?.code === ledgerCode) return refuse(ledgerCode, {});
  }
  if (result.status === 400) {
    const body = parseObject(result, false);
    const err = body?.error as Record<string, unknown> | undefined;
    const reason = identifier(err !== null && typeof err === 'object' ? err.code : undefined) ?? 'unspecified';
    return refuse('proof_rejected', { reason });
  }
  if (result.status !== 200) return unavailable(`verify_status_${result.status}`);
  const body = parseObject(result, true);
  if (body === undefined) return unavailable('verify_bad_response');
  switch (body.decision) {
    case 'allow': {
      if (body.scope !== undefined && body.scope !== requiredScope) return unavailable('verify_bad_response');
      const allow = {
        kind: 'allow', scope: requiredScope, agentId: headerValue(body.agent_id), certId: headerValue(body.cert_id),
      } as const;
      if (!keyed) return allow;
      const idempotency = parseLedgerAnswer(body.idempotency);
      return idempotency === undefined ? unavailable('verify_bad_response') : { ...allow, idempotency };
    }
    case 'deny': {
      const reason = identifier(body.decision_reason);
      const constraint = identifier(body.constraint);
      const approvalId = typeof body.approval_id === 'string' && APPROVAL_ID_PATTERN.test(body.approval_id) ? body.approval_id : undefined;
      const extra: Record<string, unknown> = {
        ...(constraint === undefined ? {} : { constraint }),
        ...(approvalId === undefined ? {} : { approval_id: approvalId }),
      };
      // The approval id also goes in a header, so an agent (or a proxy in front) finds it without parsing the body.
      const headers = approvalId === undefined ? undefined : { [APPROVAL_ID_HEADER]: approvalId };
      if (reason !== undefined && DENY_CODES.has(reason)) return refuse(reason as ErrorCode, extra, headers);
      return refuse('proof_rejected', { ...extra, reason: reason ?? 'unspecified' }, headers);
    }
    case 'indeterminate': {
      const reason = identifier(body.decision_reason);
      return refuse('decision_indeterminate', reason === undefined ? {} : { reason });
    }
    default:
      return unavailable('verify_unknown_decision');
  }
}
