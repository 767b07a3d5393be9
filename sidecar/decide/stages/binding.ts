/**
 * Stage 10, binding: an operation-bound proof (docs/proofs.md) allows only the
 * operation it was bound to. For an allow, a bound operation that differs from
 * the request verified (its scope, method, path, tool or body hash; a member
 * the context lacks counts as different) is deny `operation_mismatch`, the
 * member named in the audit row; an unbound proof is deny `operation_unbound`
 * when the certificate (`require_bound_operation`) or the service
 * (`SIDECAR_REQUIRE_BOUND_OPERATION`) requires binding. Denies pass unchanged.
 */
import { operationMismatch } from '../../../src/operation.js';
import { need } from '../stage.js';
import type { Stage } from '../stage.js';

/** The binding stage. */
export const binding: Stage = {
  name: 'binding',
  run(ctx, call) {
    if (need(call.decision, 'decision').decision !== 'allow' || call.mode === 'grant') return;
    const request = need(call.request, 'request');
    const op = need(call.proof, 'proof').payload.operation;
    if (op === undefined) {
      if (ctx.config.requireBoundOperation || need(call.cert, 'cert').payload.constraints?.require_bound_operation === true) {
        call.decision = { decision: 'deny', reason: 'operation_unbound' };
      }
      return;
    }
    const member = operationMismatch(op, request.required_scope, request.context);
    if (member !== null) call.decision = { decision: 'deny', reason: 'operation_mismatch', details: { operation_member: member } };
  },
};
