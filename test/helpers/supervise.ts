/**
 * A started sidecar process watched from a test: its output kept (the last 50 kB), its stop
 * (a signal, then SIGKILL after a grace), and its readiness (`/readyz` answering 200, bounded).
 * One definition for the helpers that start sidecars as processes (test/helpers/started-sidecar.ts,
 * test/sidecar/postgres/replicas.ts).
 */
import type { ChildProcess } from 'node:child_process';

/** A watched child process. */
export interface Supervised {
  /** Its stdout and stderr so far (the last 50 kB). */
  output(): string;
  /** Sends `signal` unless it has exited, SIGKILL after `graceMs`; resolves to its exit code. */
  stop(signal: NodeJS.Signals, graceMs: number): Promise<number | null>;
  /**
   * Resolves once `${url}/readyz` answers 200, polled every 100 ms for at most `ms`. Throws, with
   * the output, when the process exits first or time runs out (then it is killed). `what` names it.
   */
  ready(url: string, what: string, ms?: number): Promise<void>;
}

/** Watches `child`, whose stdout and stderr must be pipes. */
export function supervise(child: ChildProcess): Supervised {
  let out = '';
  const keep = (c: Buffer): void => { out = (out + c.toString()).slice(-50_000); };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let gone = false;
  const exit = new Promise<number | null>((done) => child.once('exit', (code) => { gone = true; done(code); }));
  const stop = async (signal: NodeJS.Signals, graceMs: number): Promise<number | null> => {
    if (!gone) child.kill(signal);
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    const code = await exit;
    clearTimeout(killer);
    return code;
  };
  const ready = async (url: string, what: string, ms = 60_000): Promise<void> => {
    const deadline = Date.now() + ms;
    for (;;) {
      if (gone) throw new Error(`${what} exited during startup:\n${out}`);
      try {
        const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) });
        await res.arrayBuffer();
        if (res.status === 200) return;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) {
        await stop('SIGKILL', 5_000);
        throw new Error(`${what} was not ready within ${ms / 1000} s:\n${out}`);
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  return { output: () => out, stop, ready };
}
