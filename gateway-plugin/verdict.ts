/**
 * The types of the decision pipeline (pipeline.ts): the request it decides,
 * what stage 1 admitted, the verdict it returns, and the steps the protocol
 * verdicts (mcp/verdict.ts, a2a/verdict.ts) borrow from it, and the context's
 * query hash. A module of its own so that those files and the pipeline import no circle.
 */

import type { IncomingHttpHeaders } from 'node:http';
import type { ServiceError } from '../src/errors.js';
import { sha256Hex } from '../src/crypto/encoding.js';
import type { VerifyContext, VerifyIdempotency } from '../src/protocol.js';
import type { RequestTarget } from '../src/path.js';
import type { LedgerAnswer } from './idempotency.js';
import type { McpFacts } from './mcp/message.js';
import type { McpSessions, SessionBinding } from './mcp/session.js';
import type { TaskOwners } from './a2a/tasks.js';
import type { RouteMatch } from './routes.js';

/** The facts of the request to decide (for forward-auth: the original request, as the proxy describes it). */
export interface PipelineRequest {
  /** The gateway's request id (sent to verify and the challenge call). */
  readonly id: string;
  /** The original method, uppercase. */
  readonly method: string;
  /** The original request target (path and query). */
  readonly rawUrl: string;
  /** The original headers, flat `[name, value, …]` as `IncomingMessage.rawHeaders` (proof header count). */
  readonly rawHeaders: readonly string[];
  /** The original headers, parsed (lowercase names). */
  readonly headers: IncomingHttpHeaders;
  /** The original Host (tenant host rules). */
  readonly host: string | undefined;
  /** The socket peer of the gateway (a proxy for forward-auth). */
  readonly peerAddress: string | undefined;
}

/** The result of stage 1 (`DecisionPipeline.admit`); `mcp` is filled while an MCP message is read. */
export interface Admission {
  readonly target: RequestTarget;
  readonly route: RouteMatch;
  /** JSON text of a proof that passed the strict pre-check (plain protected routes). */
  readonly bundleJson: string | undefined;
  /** Set for POSTs to an MCP route (the refusal then is a JSON-RPC error). */
  readonly mcp: McpFacts | undefined;
  /** The MCP session the request names (sessions bound to their agent: the reverse proxy only). */
  readonly session: SessionBinding | undefined;
  /** The session binding of the route (reverse proxy only). */
  readonly sessions: McpSessions | undefined;
  /** Why the session of a POST was refused (thrown by stage 2, in the JSON-RPC shape). */
  readonly sessionError: ServiceError | undefined;
  /** On a shadow-mode route, the refusal of its proof header (missing, malformed): forwarded anyway. */
  readonly shadow?: ServiceError;
  /** The request's `Idempotency-Key` when its route keys it (idempotency.ts). */
  readonly idempotencyKey?: string;
}

/** Facts about the client common to every decision. */
export interface Peer {
  readonly clientIp: string | undefined;
  readonly trustedPeer: boolean;
}

/** What the pipeline decided: the request may pass (`shadow`: a shadow-mode route would have refused it; shadow.ts). */
export type GatewayVerdict = Peer & (
  | { readonly kind: 'public' }
  | {
    readonly kind: 'allow'; readonly scope: string;
    readonly agentId: string | undefined; readonly certId: string | undefined;
    /** With a keyed request: forward and record (claimed), or replay the recorded answer. */
    readonly idempotency?: LedgerAnswer;
  }
  | ShadowDecision
);

/** A refusal of a shadow-mode route, forwarded anyway: the refusal, its reason label, and the route's pattern. */
export interface ShadowDecision {
  readonly kind: 'shadow';
  readonly refusal: ServiceError;
  readonly reason: string;
  readonly route: string;
  /** The value of the header that tells the upstream (shadow.ts). */
  readonly shadowRefusal: string;
}

/** The pipeline's steps that the MCP and A2A verdicts use (pipeline.ts implements them). */
export interface VerdictSteps {
  /**
   * The proof's JSON text; a missing proof is 401 `proof_required` with a fresh challenge for `scope`
   * (without one when `withChallenge` is false: shadow mode forwards the request, nobody reads it).
   */
  readProof(req: PipelineRequest, scope: string, withChallenge?: boolean): Promise<string>;
  /** Calls verify and maps its answer: an allow verdict, or throws the refusal. */
  verify(
    bundleJson: string, scope: string, context: VerifyContext, requestId: string, peer: Peer,
    idempotency?: VerifyIdempotency,
  ): Promise<GatewayVerdict>;
  /** `client_ip` and `tenant` of the context. */
  peerContext(req: PipelineRequest, peer: Peer): Pick<VerifyContext, 'client_ip' | 'tenant'>;
  /** A would-be refusal of a shadow-mode route, method or tool, forwarded (shadow.ts). */
  shadowVerdict(req: PipelineRequest, admission: Admission, refusal: ServiceError): GatewayVerdict;
  /** The task owners of an A2A route (undefined outside the reverse proxy: every named task is then refused). */
  tasks(route: RouteMatch): TaskOwners | undefined;
}

/**
 * `query_sha256` of the context, only for a non-empty query (`target.query` is undefined
 * otherwise): the query is forwarded byte for byte and is printable ASCII (src/path.ts).
 */
export function queryContext(query: string | undefined): Pick<VerifyContext, 'query_sha256'> {
  return query === undefined ? {} : { query_sha256: sha256Hex(query) };
}
