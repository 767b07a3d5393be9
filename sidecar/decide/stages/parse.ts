/**
 * Stage 3, parse: the body is a verify request (else the route's 400
 * `invalid_request`), the required scope is in the vocabulary (400
 * `invalid_scopes`), and the proof bundle parses (400 `invalid_proof`).
 * None of these is billed: no challenge has been looked at yet. A proof must speak
 * for the agent the caller names (an AuthZEN subject), else 400 `invalid_proof`.
 * A grant check (`mode: 'grant'`) has no proof to parse.
 */
import { ServiceError } from '../../../src/errors.js';
import { parseProofBundle } from '../../../src/proof.js';
import { isValidScope } from '../../../src/scopes.js';
import type { Stage } from '../stage.js';

/** The parse stage. */
export const parse: Stage = {
  name: 'parse',
  run(_ctx, call) {
    if (call.body instanceof ServiceError) throw call.body;
    const request = call.body;
    if (!isValidScope(request.required_scope)) {
      const shown = String(request.required_scope).slice(0, 140);
      throw new ServiceError('invalid_scopes', `required_scope is not in the scope vocabulary: ${shown}.`,
        { field: 'body.required_scope', invalid_scopes: [shown] });
    }
    call.request = request;
    if (call.mode === 'grant') return;
    const proof = parseProofBundle(request.proof_bundle);
    if (!proof) throw new ServiceError('invalid_proof', 'proof_bundle is malformed, oversized or not a proof bundle.');
    if (call.subject !== undefined && proof.payload.agent_id !== call.subject) {
      throw new ServiceError('invalid_proof', 'The proof speaks for another agent than the subject.');
    }
    call.proof = proof;
  },
};
