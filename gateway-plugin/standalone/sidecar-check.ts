/**
 * The standalone gateway's view of its sidecar, for readiness and for the operator: whether
 * the sidecar answers `GET /readyz` with 200 and, if not, why (unreachable, too slow, or its
 * own answer), and whether it accepts the gateway's API key. Logged so that an operator sees
 * why the gateway is not ready — at startup (`checkSidecar`, with a re-check every 5 s until
 * the sidecar is ready) and whenever the readiness answer changes.
 *
 * The API key is checked once at startup with the call the gateway makes for every 401, a
 * challenge (`POST /v1/service/challenge`; the unused challenge expires). It never appears in
 * a log line. Readiness itself stays what docs/gateway.md says: the sidecar's `/readyz`.
 */
import { Pool } from 'undici';
import type { FastifyBaseLogger } from 'fastify';

/** A readiness probe's result; `detail` is a sentence for the log. */
export type Readiness =
  | { readonly ready: true }
  | { readonly ready: false; readonly cause: 'sidecar_unreachable' | 'sidecar_timeout' | 'sidecar_not_ready'; readonly detail: string };

/** The API key check's result. */
export type KeyCheck =
  | { readonly result: 'accepted' }
  | { readonly result: 'refused'; readonly code: string }
  | { readonly result: 'unknown'; readonly detail: string };

/** What {@link SidecarCheck.checkAtStartup} found. */
export interface StartupCheck { readonly readiness: Readiness; readonly apiKey: KeyCheck | undefined }

/** How often the startup check looks again while the sidecar is not ready (ms). */
export const RECHECK_INTERVAL_MS = 5_000;

/** Probes the sidecar and logs what the operator needs to know. */
export class SidecarCheck {
  readonly #pool: Pool;
  readonly #base: string;
  readonly #url: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #log: FastifyBaseLogger;
  #last: Readiness | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(o: { url: URL; apiKey: string; timeoutMs: number; log: FastifyBaseLogger }) {
    this.#pool = new Pool(o.url.origin, { connections: 2, connect: { timeout: o.timeoutMs } });
    this.#base = o.url.pathname.replace(/\/+$/, '');
    this.#url = `${o.url.origin}${this.#base}`;
    this.#apiKey = o.apiKey;
    this.#timeoutMs = o.timeoutMs;
    this.#log = o.log;
  }

  /** One request with the deadline; the body is read (at most 4 KiB kept). */
  async #request(method: 'GET' | 'POST', path: string, headers: Record<string, string>): Promise<{
    status: number; body: string } | { error: string; timeout: boolean }> {
    try {
      const res = await this.#pool.request({
        method, path: this.#base + path, headers, signal: AbortSignal.timeout(this.#timeoutMs),
        headersTimeout: this.#timeoutMs, bodyTimeout: this.#timeoutMs,
      });
      const body = (await res.body.text()).slice(0, 4096);
      return { status: res.statusCode, body };
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
      const code = e.code ?? e.cause?.code ?? e.name;
      return { error: code, timeout: /Timeout|TimeoutError|AbortError/i.test(code) };
    }
  }

  /** Probes `GET {sidecar}/readyz`. Never throws. */
  async readiness(requestId: string): Promise<Readiness> {
    const r = await this.#request('GET', '/readyz', { 'x-request-id': requestId, accept: 'application/json' });
    const at = `${this.#url}/readyz`;
    if ('error' in r) {
      return r.timeout
        ? { ready: false, cause: 'sidecar_timeout', detail: `the sidecar did not answer ${at} within ${this.#timeoutMs} ms (challenge_timeout_ms)` }
        : { ready: false, cause: 'sidecar_unreachable', detail: `the sidecar is unreachable at ${at} (${r.error}): is it running, and is sidecar_url right?` };
    }
    if (r.status === 200) return { ready: true };
    return { ready: false, cause: 'sidecar_not_ready', detail: `the sidecar answered ${at} with ${r.status}${reasonOf(r.body)}` };
  }

  /** Checks the API key with one challenge. Never throws. */
  async apiKey(requestId: string): Promise<KeyCheck> {
    const r = await this.#request(
      'POST', '/v1/service/challenge', {
        'x-request-id': requestId, accept: 'application/json', 'x-service-api-key': this.#apiKey });
    if ('error' in r) return { result: 'unknown', detail: `the API key could not be checked (${r.error})` };
    if (r.status === 200) return { result: 'accepted' };
    if (r.status === 401 || r.status === 403) return { result: 'refused', code: errorCode(r.body) ?? String(r.status) };
    return { result: 'unknown', detail: `the API key could not be checked: the sidecar answered ${r.status}${reasonOf(r.body)}` };
  }

  /** Logs a readiness result when it differs from the previous one. */
  report(result: Readiness): void {
    if (this.#closed) return;
    const last = this.#last;
    this.#last = result;
    if (result.ready) {
      if (last !== undefined && !last.ready) this.#log.info({ sidecar_url: this.#url }, 'gateway ready: the sidecar answers /readyz with 200');
      return;
    }
    if (last === undefined || last.ready || last.cause !== result.cause || last.detail !== result.detail) {
      this.#log.warn({ cause: result.cause, sidecar_url: this.#url }, `gateway not ready: ${result.detail}`);
    }
  }

  /**
   * The startup check: readiness and the API key, logged; while the sidecar is not ready,
   * looks again every {@link RECHECK_INTERVAL_MS} (logging changes) until it is, or until close.
   */
  async checkAtStartup(): Promise<StartupCheck> {
    const readiness = await this.readiness('startup-check');
    this.report(readiness);
    let apiKey: KeyCheck | undefined;
    if (readiness.ready || readiness.cause === 'sidecar_not_ready') {
      apiKey = await this.apiKey('startup-check');
      if (apiKey.result === 'refused') {
        this.#log.error({ code: apiKey.code, sidecar_url: this.#url },
          `the sidecar refused the gateway's API key (${apiKey.code}): every request to a protected route is refused `
          + 'with 503 verify_unavailable until api_key_env names a valid key');
      } else if (apiKey.result === 'unknown') {
        this.#log.warn({ sidecar_url: this.#url }, apiKey.detail);
      }
    }
    if (readiness.ready) {
      if (apiKey?.result === 'accepted') this.#log.info({ sidecar_url: this.#url }, 'sidecar ready; API key accepted');
    } else this.#schedule();
    return { readiness, apiKey };
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.readiness('startup-check').then((r) => {
        this.report(r);
        if (!r.ready) this.#schedule();
      });
    }, RECHECK_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops the re-checks and closes the connections. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#pool.destroy().catch(() => undefined);
  }
}

/** The `error.code` of an error body, if any. */
function errorCode(body: string): string | undefined {
  try {
    const code = (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' && /^[a-z_]{1,64}$/.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

/** ` (code, cause)` from an error body, for a log sentence. */
function reasonOf(body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: { code?: unknown; cause?: unknown } }).error;
    const parts = [e?.code, e?.cause].filter((x): x is string => typeof x === 'string' && /^[a-z_]{1,64}$/.test(x));
    return parts.length > 0 ? ` (${parts.join(', ')})` : '';
  } catch {
    return '';
  }
}
