/**
 * What the gateway targets can reach on the machine of a run: a CPU bound
 * computed from figures of the same run.
 *
 * Every request through any gateway costs the machine at least what a plain
 * `@fastify/http-proxy` request costs it (load generator, proxy, upstream;
 * CPU per request from /proc and the load generator's own counters) plus one
 * hybrid verify (the crypto ceiling's CPU per verify, a tight in-process
 * loop). So no gateway that checks a hybrid signature per request can pass
 *
 *   cores ÷ (plain path CPU per request + hybrid verify CPU)
 *
 * requests per second, whatever the rest of it costs. Divided by the plain
 * and jose proxies' measured rates, that is the highest ratio reachable: when
 * it is below a target, the target is out of reach on that machine.
 *
 * The spec's gateway also calls verify, a service, for every request. The
 * `hop` row measures the least such a call costs: the plain proxy sending
 * the proof to a node:http service that answers allow at once. Its path CPU
 * plus the hybrid verify is a tighter bound for any design that calls a
 * service per request (it still leaves out the audit write and metering).
 * The same sum with the `stub` row's path (this gateway in front of a sidecar
 * that does no work) says what this gateway could reach if the sidecar cost
 * nothing but the signature check; it is a reference, not a bound.
 */
import type { BackendResults, GatewayVariant } from './report.js';

/** CPU per request (ms) of a variant's whole path at c=50: load generator, serving process, upstream, and the sidecar behind it. */
export function pathCpuMs(b: BackendResults, v: GatewayVariant): number | undefined {
  const c = b.gateway?.[v]?.cpuMsPerReq;
  if (!c || c.loadGen === undefined) return undefined;
  return c.loadGen + c.server + (v === 'direct' ? 0 : c.upstream) + (c.sidecar ?? 0);
}

/** A throughput and its ratios to the plain and jose proxies' measured rates. */
export interface BoundRate { rps: number; plainRatio: number; joseRatio: number }

/** The gateway bounds of one backend's run (undefined parts were not measured). */
export interface GatewayBounds extends BoundRate {
  /** With the `hop` row's path (plain proxy + one call to a do-nothing verify service) instead of the plain proxy's: still a bound for any gateway that calls a service per request. */
  hop: BoundRate | undefined;
  /** With the `stub` row's path (this gateway, a sidecar doing nothing): what this gateway could reach if the sidecar cost only the check. A reference, not a bound. */
  withGateway: BoundRate | undefined;
}

/** The bounds of {@link GatewayBounds} for `cores` cores, or undefined without the plain, jose and ceiling figures. */
export function gatewayBounds(b: BackendResults, cores: number): GatewayBounds | undefined {
  const plain = b.gateway?.plain;
  const jose = b.gateway?.jose;
  if (!plain || !jose || !b.ceiling) return undefined;
  const verifyMs = b.ceiling.verifyCpuUs / 1000;
  const rate = (path: number | undefined): BoundRate | undefined => {
    if (path === undefined) return undefined;
    const rps = (cores * 1000) / (path + verifyMs);
    return { rps, plainRatio: rps / plain.c50.rps, joseRatio: rps / jose.c50.rps };
  };
  const base = rate(pathCpuMs(b, 'plain'));
  return base && { ...base, hop: rate(pathCpuMs(b, 'hop')), withGateway: rate(pathCpuMs(b, 'stub')) };
}
