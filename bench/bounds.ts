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
 * it is below a target, the target is out of reach on that machine. The same
 * sum with the stub row's path (this gateway in front of a sidecar that does
 * no work) says what this gateway could reach if the sidecar cost nothing
 * but the signature check; it is a reference, not a bound.
 */
import type { BackendResults, GatewayVariant } from './report.ts';

/** CPU per request (ms) of a variant's whole path at c=50: load generator, serving process, upstream, and the sidecar behind it. */
export function pathCpuMs(b: BackendResults, v: GatewayVariant): number | undefined {
  const c = b.gateway?.[v]?.cpuMsPerReq;
  if (!c || c.loadGen === undefined) return undefined;
  return c.loadGen + c.server + (v === 'direct' ? 0 : c.upstream) + (c.sidecar ?? 0);
}

/** The gateway bounds of one backend's run (undefined parts were not measured). */
export interface GatewayBounds {
  /** cores ÷ (plain path CPU + hybrid verify CPU), req/s. */
  rps: number;
  /** {@link rps} ÷ the plain proxy's rate and ÷ the jose proxy's rate. */
  plainRatio: number;
  joseRatio: number;
  /** The same with the stub row's path instead of the plain proxy's (this gateway, a sidecar doing nothing but the check). */
  withGatewayRps: number | undefined;
  withGatewayPlainRatio: number | undefined;
  withGatewayJoseRatio: number | undefined;
}

/** The bounds of {@link GatewayBounds} for `cores` cores, or undefined without the plain, jose and ceiling figures. */
export function gatewayBounds(b: BackendResults, cores: number): GatewayBounds | undefined {
  const plain = b.gateway?.plain;
  const jose = b.gateway?.jose;
  const plainPath = pathCpuMs(b, 'plain');
  if (!plain || !jose || plainPath === undefined || !b.ceiling) return undefined;
  const verifyMs = b.ceiling.verifyCpuUs / 1000;
  const rps = (cores * 1000) / (plainPath + verifyMs);
  const stubPath = pathCpuMs(b, 'stub');
  const withGatewayRps = stubPath === undefined ? undefined : (cores * 1000) / (stubPath + verifyMs);
  return {
    rps, plainRatio: rps / plain.c50.rps, joseRatio: rps / jose.c50.rps,
    withGatewayRps,
    withGatewayPlainRatio: withGatewayRps === undefined ? undefined : withGatewayRps / plain.c50.rps,
    withGatewayJoseRatio: withGatewayRps === undefined ? undefined : withGatewayRps / jose.c50.rps,
  };
}
