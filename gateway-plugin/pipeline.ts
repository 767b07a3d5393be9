/**
 * The decision pipeline: one route table, one proof extraction, one context
 * derivation and one outcome table, shared by the reverse proxy (plugin.ts)
 * and the forward-auth endpoint (forward-auth/plugin.ts). Both feed it the
 * facts of the request to decide and render what it throws with
 * refusal.ts, so every mode refuses with the same status and body.
 *
 * 1. {@link DecisionPipeline.admit} (before the body is read): refuse method
 *    and URL override headers (400 `override_header_refused`, override.ts;
 *    unless the proxy strips them), normalize the
 *    path (400 `ambiguous_path` / `invalid_request`), resolve the route (400
 *    `ambiguous_path`, 403 `route_not_mapped`), and on plain protected routes
 *    read the proof header (403 `duplicate_proof_header`, 401
 *    `proof_required` with a fresh challenge, 403 `proof_rejected` /
 *    `invalid_proof` without calling verify).
 * 2. {@link DecisionPipeline.verdict} (with the body, or `undefined` when a
 *    forward-auth proxy did not send it): derive the context, call verify and
 *    map its answer; only an explicit allow (or a public route or public MCP
 *    method) returns. A route whose context needs the body (amount/currency
 *    pointers, MCP) is refused with 403 `body_not_forwarded` without it, and
 *    `body_sha256` is sent only when the body is known.
 *    POSTs to an MCP route read the JSON-RPC message first (mcp/verdict.ts):
 *    a tool call needs its tool's scope (403 `tool_not_mapped` for a tool
 *    not in the table) and sends the tool as `context.tool`, public methods
 *    pass without a proof, anything else needs the route's scope.
 *    POSTs to an A2A route read the A2A request (a2a/verdict.ts): its
 *    method's (or declared skill's) scope, 403 `a2a_method_not_mapped` for
 *    an unknown method, 400 `a2a_push_url_refused` for a push URL the SSRF
 *    rules refuse, and, once verify allowed, 404 `a2a_task_not_found` for a
 *    task the verified agent did not create (a2a/tasks.ts).
 * 3. MCP sessions (reverse proxy only, mcp/session.ts, mcp/verdict.ts): a request on an MCP
 *    route carrying `Mcp-Session-Id` must carry a session token of this
 *    gateway (404 `mcp_session_not_found`, before any proof is read), and its
 *    proof must be the token's agent's (403 `mcp_session_forbidden`); an
 *    answer to a server request, or a public method on the session, may
 *    prove the session instead, with `X-Service-Session-Proof` (no verify);
 *    on a session a public method needs one of the two.
 * 4. The idempotency ledger (reverse proxy only, idempotency.ts): stage 1 reads the
 *    `Idempotency-Key` of a keyed request (400 `idempotency_key_required`), stage 2 sends it to
 *    verify with the request hash; the allow says whether to forward (claimed) or replay.
 */

import { ServiceError } from '../src/errors.js';
import { sha256Hex } from '../src/crypto/encoding.js';
import type { VerifyContext, VerifyIdempotency } from '../src/protocol.js';
import { KEYED_METHODS, idempotencyBlock, readIdempotencyKey, requestHash } from './idempotency.js';
import { deriveAmountCurrency, deriveClientIp, deriveTenant } from './context.js';
import type { TenantRule, TrustedProxies } from './context.js';
import type { GatewayMetrics } from './metrics.js';
import type { TaskOwners } from './a2a/tasks.js';
import { a2aVerdict } from './a2a/verdict.js';
import type { McpFacts } from './mcp/message.js';
import { mcpVerdict } from './mcp/verdict.js';
import { mapVerifyCall, verifyCallLabel } from './outcome.js';
import { normalizeRequestTarget } from '../src/path.js';
import { decodeProofJson, readProofHeader } from './proof.js';
import { refuseOverrideHeaders } from './override.js';
import type { OverrideHeaderPolicy } from './override.js';
import type { RouteMatch, RouteTable } from './routes.js';
import { sessionHeaderOf } from './mcp/session.js';
import type { McpSessions, SessionBinding } from './mcp/session.js';
import type { SidecarClient } from './verify-client.js';
import { refusalReason } from './refusal.js';
import { shadowHeaderValue } from './shadow.js';
import { queryContext } from './verdict.js';
import type { Admission, GatewayVerdict, Peer, PipelineRequest, VerdictSteps } from './verdict.js';

export type { Admission, GatewayVerdict, PipelineRequest, ShadowDecision } from './verdict.js';

/** The message of an `ambiguous_path` refusal, by the spelling that is routed differently. */
const AMBIGUOUS_MESSAGES = {
  trailing_slash: 'The request path ends with "/" and the path without it is routed differently.',
  case: 'The request path is routed differently when letter case is ignored.',
  fold: 'The request path is routed differently when read as lenient servers read it '
    + '(Unicode folding, trailing dots or spaces).',
} as const;

/** What the pipeline needs from the resolved options. */
export interface PipelineOptions {
  readonly routes: RouteTable;
  readonly trustedProxies: TrustedProxies;
  readonly context: { readonly tenant: TenantRule | undefined };
  readonly metrics: GatewayMetrics;
  readonly overrideHeaders: OverrideHeaderPolicy;
}

/** The shared decision pipeline of one gateway (see the file header). */
export class DecisionPipeline {
  readonly #opts: PipelineOptions;
  readonly #sidecar: SidecarClient;
  readonly #sessions: ((route: RouteMatch) => McpSessions | undefined) | undefined;
  readonly #tasks: ((route: RouteMatch) => TaskOwners | undefined) | undefined;
  readonly #ledger: { readonly upstreamTimeoutMs: number } | undefined;
  /** The steps the MCP and A2A verdicts use (mcp/verdict.ts, a2a/verdict.ts). */
  readonly #steps: VerdictSteps;

  /**
   * `sessions`: the session binding of each MCP route; `tasks`: the task owners of each A2A route
   * (both only in the reverse proxy, which reads and rewrites answers; without `tasks` every
   * request naming a task is refused); `ledger`: the idempotency ledger is used (the reverse
   * proxy, which sees and records the answer).
   */
  constructor(
    opts: PipelineOptions, sidecar: SidecarClient, sessions?: (route: RouteMatch) => McpSessions | undefined,
    tasks?: (route: RouteMatch) => TaskOwners | undefined, ledger?: { readonly upstreamTimeoutMs: number },
  ) {
    this.#opts = opts;
    this.#sidecar = sidecar;
    this.#sessions = sessions;
    this.#tasks = tasks;
    this.#ledger = ledger;
    this.#steps = {
      readProof: (r, scope, withChallenge) => this.#readProof(r, scope, withChallenge),
      verify: (...args) => this.#verify(...args),
      peerContext: (r, peer) => this.#peerContext(r, peer),
      shadowVerdict: (r, admission, refusal) => this.#shadowVerdict(r, admission, refusal),
      tasks: (route) => this.#tasks?.(route),
    };
  }

  /** The session a request on an MCP route names; 404 `mcp_session_not_found` for a token this gateway cannot open. */
  #session(req: PipelineRequest, sessions: McpSessions | undefined, path: string): SessionBinding | undefined {
    const value = sessionHeaderOf(req.rawHeaders);
    if (sessions === undefined || value === undefined) return undefined;
    const binding = sessions.open(value, path);
    if (binding === undefined) throw new ServiceError('mcp_session_not_found');
    return binding;
  }

  /** Stage 1, before the body: path, route, and the proof of plain protected routes. Throws a {@link ServiceError}. */
  async admit(req: PipelineRequest): Promise<Admission> {
    if (this.#opts.overrideHeaders === 'refuse') refuseOverrideHeaders(req.rawHeaders);
    const target = normalizeRequestTarget(req.rawUrl);
    const resolution = this.#opts.routes.resolve(req.method, target.path);
    if (resolution.kind === 'ambiguous') {
      throw new ServiceError('ambiguous_path', AMBIGUOUS_MESSAGES[resolution.spelling]);
    }
    if (resolution.kind === 'none') throw new ServiceError('route_not_mapped');
    const route = resolution.route;
    const sessions = route.mcp === undefined ? undefined : this.#sessions?.(route);
    if (route.a2a !== undefined && req.method === 'POST') {
      const a2a: McpFacts = { parsed: false, id: null, tool: undefined, protocol: 'a2a' };
      return { target, route, bundleJson: undefined, mcp: a2a, session: undefined, sessions, sessionError: undefined };
    }
    if (route.mcp !== undefined && req.method === 'POST') {
      const mcp: McpFacts = { parsed: false, id: null, tool: undefined };
      // Refused in stage 2, once the refusal can take the JSON-RPC shape.
      try {
        const session = this.#session(req, sessions, target.path);
        return { target, route, bundleJson: undefined, mcp, session, sessions, sessionError: undefined };
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        return { target, route, bundleJson: undefined, mcp, session: undefined, sessions, sessionError: err };
      }
    }
    const session = route.mcp === undefined ? undefined : this.#session(req, sessions, target.path);
    const base = { target, route, mcp: undefined, session, sessions, sessionError: undefined };
    if (route.scope === undefined) return { ...base, bundleJson: undefined };
    if (route.mode !== 'shadow') {
      const idempotencyKey = this.#idempotencyKey(req, route);
      const bundleJson = await this.#readProof(req, route.scope);
      return { ...base, bundleJson, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) };
    }
    try {
      return { ...base, bundleJson: await this.#readProof(req, route.scope, false) };
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return { ...base, bundleJson: undefined, shadow: err };
    }
  }

  /** The key of a keyed request; 400 `idempotency_key_required` when its route requires one and it has none. */
  #idempotencyKey(req: PipelineRequest, route: RouteMatch): string | undefined {
    if (this.#ledger === undefined || route.idempotency === 'off' || !KEYED_METHODS.has(req.method)) return undefined;
    const key = readIdempotencyKey(req.rawHeaders);
    if (key === undefined && route.idempotency === 'required') throw new ServiceError('idempotency_key_required');
    return key;
  }

  /**
   * Stage 2, with the body (`undefined`: not forwarded): context, verify, outcome. Throws a {@link ServiceError}
   * unless allowed; on a shadow-mode route, returns what would have been refused as a `shadow` verdict instead.
   */
  async verdict(req: PipelineRequest, admission: Admission, body: Buffer | undefined): Promise<GatewayVerdict> {
    if (admission.route.mode !== 'shadow') return this.#verdict(req, admission, body);
    let refusal = admission.shadow;
    if (refusal === undefined) {
      try {
        return await this.#verdict(req, admission, body);
      } catch (err) {
        // A push URL the SSRF rules refuse is refused in shadow mode too (docs/a2a.md).
        if (!(err instanceof ServiceError) || err.code === 'a2a_push_url_refused') throw err;
        refusal = err;
      }
    }
    return this.#shadowVerdict(req, admission, refusal);
  }

  /** A would-be refusal of a shadow-mode route or MCP tool, forwarded (shadow.ts). */
  #shadowVerdict(req: PipelineRequest, admission: Admission, refusal: ServiceError): GatewayVerdict {
    const peer: Peer = deriveClientIp(req.peerAddress, req.headers['x-forwarded-for'], this.#opts.trustedProxies);
    const reason = refusalReason(refusal);
    return {
      kind: 'shadow', refusal, reason, route: admission.route.pattern,
      shadowRefusal: shadowHeaderValue(refusal, reason), ...peer,
    };
  }

  async #verdict(req: PipelineRequest, admission: Admission, body: Buffer | undefined): Promise<GatewayVerdict> {
    const { route, target } = admission;
    const peer: Peer = deriveClientIp(req.peerAddress, req.headers['x-forwarded-for'], this.#opts.trustedProxies);
    if (admission.mcp?.protocol === 'a2a') return a2aVerdict(this.#steps, req, admission, body, peer);
    if (admission.mcp !== undefined) {
      return this.#bound(admission, await mcpVerdict(this.#steps, req, admission, body, peer));
    }
    if (route.scope === undefined) return { kind: 'public', ...peer };
    if (admission.bundleJson === undefined) throw new ServiceError('internal_error');
    const needsBody = route.amountPointer !== undefined || route.currencyPointer !== undefined;
    if (body === undefined && needsBody) throw new ServiceError('body_not_forwarded');
    const money = body === undefined
      ? {}
      : deriveAmountCurrency(body, req.headers['content-type'], route.amountPointer, route.currencyPointer);
    const context: VerifyContext = {
      method: req.method,
      path: target.path,
      ...this.#peerContext(req, peer),
      ...money,
      ...queryContext(target.query),
      ...(body === undefined ? {} : { body_sha256: sha256Hex(body) }),
    };
    const key = admission.idempotencyKey;
    const idempotency = key === undefined || this.#ledger === undefined ? undefined : idempotencyBlock(
      key, requestHash(req.method, target.path, target.query, body ?? Buffer.alloc(0)), this.#ledger.upstreamTimeoutMs);
    const verdict = await this.#verify(admission.bundleJson, route.scope, context, req.id, peer, idempotency);
    return this.#bound(admission, verdict);
  }

  /** A request on a session passes only for the session's agent (a public method has no agent and passes). */
  #bound(admission: Admission, decision: GatewayVerdict): GatewayVerdict {
    const { session } = admission;
    if (session !== undefined && decision.kind === 'allow' && decision.agentId !== session.agentId) {
      throw new ServiceError('mcp_session_forbidden');
    }
    return decision;
  }

  /** `client_ip` and `tenant` of the context. */
  #peerContext(req: PipelineRequest, peer: Peer): Pick<VerifyContext, 'client_ip' | 'tenant'> {
    const tenant = deriveTenant(this.#opts.context.tenant, req.host, req.headers, peer.trustedPeer);
    return {
      ...(peer.clientIp === undefined ? {} : { client_ip: peer.clientIp }),
      ...(tenant === undefined ? {} : { tenant }),
    };
  }

  /**
   * The proof's JSON text; a missing proof is 401 `proof_required` with a fresh challenge for `scope`
   * (without one when `withChallenge` is false: shadow mode forwards the request, nobody reads it).
   */
  async #readProof(req: PipelineRequest, scope: string, withChallenge = true): Promise<string> {
    const header = readProofHeader(req.rawHeaders);
    if (header.kind === 'duplicate') throw new ServiceError('duplicate_proof_header');
    if (header.kind === 'missing') {
      const challenge = withChallenge ? await this.#sidecar.challenge(req.id) : undefined;
      let www = `ServiceProof realm="agent-authz", scope="${scope}"`;
      if (challenge !== undefined) www += `, challenge="${challenge}"`;
      const extra = challenge === undefined ? { required_scope: scope } : { required_scope: scope, challenge };
      throw new ServiceError('proof_required', undefined, extra, { 'www-authenticate': www });
    }
    return decodeProofJson(header.value).json;
  }

  async #verify(
    bundleJson: string, scope: string, context: VerifyContext, requestId: string, peer: Peer,
    idempotency?: VerifyIdempotency,
  ): Promise<GatewayVerdict> {
    const started = performance.now();
    const result = await this.#sidecar.verify(
      { proofBundleJson: bundleJson, required_scope: scope, context, ...(idempotency ? { idempotency } : {}) },
      requestId);
    const outcome = mapVerifyCall(result, scope, idempotency !== undefined);
    this.#opts.metrics.verifyDuration.observe(
      { result: verifyCallLabel(result, outcome) }, (performance.now() - started) / 1000);
    if (outcome.kind === 'refuse') throw outcome.error;
    const ledger = outcome.idempotency === undefined ? {} : { idempotency: outcome.idempotency };
    const { scope: allowed, agentId, certId } = outcome;
    return { kind: 'allow', scope: allowed, agentId, certId, ...ledger, ...peer };
  }
}
