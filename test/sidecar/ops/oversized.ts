/**
 * Oversized requests at full speed, for the lingering-close tests (issue 35;
 * runtime/linger.ts): a request head and a body far over the server's limit
 * written at once on a fresh connection, and the answer read back. Without a
 * lingering close the server answers while the body is still arriving, closes
 * with unread bytes, and the kernel's reset fails the client's write
 * (`EPIPE`, `ECONNRESET`) before it reads the answer: such a request ends here
 * with `status: 0` and the socket error's code. Like most HTTP clients (Node's
 * `fetch` among them), this one reads the answer only once its request is sent.
 */
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { freePort } from '../../helpers/net.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';
import { REPO, cleanEnv } from './helpers.js';
import { ERRORS, isErrorCode } from '../../../src/errors.js';

/** One oversized request's outcome: the status and error code read (status 0 when none), and the socket's error (a reset) if any. */
export interface OversizedResult {
  readonly status: number;
  readonly code: string | undefined;
  readonly error: string | undefined;
}

/** The size of the body's chunks, one per event-loop turn at most. */
const CHUNK = 128 * 1024;

/** A body of `bytes` bytes of JSON-ish filler, allocated once per size. */
const bodies = new Map<number, Buffer>();
export function fillerBody(bytes: number): Buffer {
  let b = bodies.get(bytes);
  if (b === undefined) bodies.set(bytes, (b = Buffer.alloc(bytes, 'a')));
  return b;
}

/**
 * Writes `head` (the request line and headers, without the blank line; `Content-Length` is added)
 * and `body` at once to 127.0.0.1:`port`, and reads the answer until its `Content-Length`, the
 * connection's end, or `timeoutMs`.
 */
export function sendOversized(port: number, head: string, body: Buffer, timeoutMs = 10_000): Promise<OversizedResult> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const raw = Buffer.concat(chunks).toString('latin1');
      const split = raw.indexOf('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
      const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(raw.slice(0, split))?.[1] ?? -1);
      const text = split < 0 ? '' : Buffer.from(raw.slice(split + 4), 'latin1').toString('utf8');
      if (split < 0 || len < 0 || Buffer.byteLength(text) < len) {
        resolve({ status: 0, code: undefined, error: error ?? 'closed before a complete answer' });
        return;
      }
      let code: string | undefined;
      try { code = (JSON.parse(text) as { error?: { code?: string } }).error?.code; } catch { code = undefined; }
      resolve({ status, code, error });
    };
    const timer = setTimeout(() => { error ??= 'timeout'; finish(); }, timeoutMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      const raw = Buffer.concat(chunks).toString('latin1');
      const split = raw.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(raw.slice(0, split))?.[1];
      if (split >= 0 && len !== undefined && Buffer.byteLength(raw.slice(split + 4), 'latin1') >= Number(len)) finish();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => { error ??= err.code ?? err.message; });
    socket.on('close', finish);
    // As most HTTP clients (Node's fetch too): the head goes first, then the body in chunks as fast as
    // the socket takes them, and the answer is read once the whole request is sent.
    socket.pause();
    socket.write(`${head}\r\nContent-Length: ${body.length}\r\n\r\n`);
    let offset = 0;
    const more = (): void => {
      while (offset < body.length && !socket.destroyed) {
        const chunk = body.subarray(offset, (offset += CHUNK));
        const last = offset >= body.length;
        const flowing = socket.write(chunk, last ? (err) => { if (err === undefined || err === null) socket.resume(); } : undefined);
        if (!flowing) { socket.once('drain', () => setImmediate(more)); return; }
        if (!last) { setImmediate(more); return; }
      }
    };
    setImmediate(more);
  });
}

/** Whether `r` is a refusal in the error shape with `code` and its status, read without a reset. */
export function refusedWith(r: OversizedResult, code: string): boolean {
  return r.error === undefined && r.code === code && isErrorCode(code) && ERRORS[code].status === r.status;
}

/**
 * Runs `n` calls of `one(i)` with at most `concurrency` at a time and tallies the outcomes by
 * `label(result)` (e.g. `413 body_too_large`, `reset ECONNRESET`).
 */
export async function tally<R>(n: number, concurrency: number, one: (i: number) => Promise<R>, label: (r: R) => string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      const i = next++;
      const key = label(await one(i));
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }));
  return counts;
}

/** A sidecar process for the oversized and durability tests. */
export interface SidecarProcess {
  readonly url: string;
  readonly port: number;
  readonly lines: string[];
  /** The spawned process (the wrapper's, with a `wrapper`). */
  readonly pid: number;
  /** Resolves once the spawned process has exited. */
  readonly exited: Promise<void>;
  kill(): void;
}

/**
 * Spawns the sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts; behind `wrapper`,
 * e.g. strace, if given) on a free port with a fresh data directory and `env`, and waits until `/readyz`
 * answers 200: at most `readyMs` (a loaded machine under tap may need more than 20 s to start it).
 */
export async function spawnSidecarProcess(env: Record<string, string> = {}, readyMs = 90_000, wrapper: string[] = []): Promise<SidecarProcess> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-linger-'));
  const argv = [...wrapper, process.execPath, await compiledSidecarMain()];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'],
    env: cleanEnv({ SIDECAR_PORT: String(port), SIDECAR_HOST: '127.0.0.1', SIDECAR_DATA_DIR: dataDir, SIDECAR_LOG_LEVEL: 'warn', ...env }),
  });
  const lines: string[] = [];
  child.stdout!.setEncoding('utf8').on('data', (d: string) => lines.push(d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => lines.push(d));
  let exited = false;
  const done = new Promise<void>((resolve) => child.once('exit', () => { exited = true; fs.rmSync(dataDir, { recursive: true, force: true }); resolve(); }));
  const kill = (): void => { if (!exited) child.kill('SIGKILL'); };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + readyMs;
  while (Date.now() < deadline && !exited) {
    const status = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status, () => 0);
    if (status === 200) return { url, port, lines, kill, pid: child.pid!, exited: done };
    await new Promise((r) => setTimeout(r, 200));
  }
  kill();
  throw new Error(`sidecar not ready within ${readyMs} ms: ${lines.join('').slice(0, 2000)}`);
}
