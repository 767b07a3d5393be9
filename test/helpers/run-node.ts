/**
 * A Node program run to completion as a user would run it: this Node (`process.execPath`), a
 * clean environment (PATH plus the variables given, none of the test runner's), output collected.
 * Used by the tests of the sidecar's command line (`audit verify` through the bin or main.ts).
 */
import { spawn } from 'node:child_process';

/** The outcome of {@link runNode}. */
export interface Ran { code: number | null; stdout: string; stderr: string }

/**
 * Runs `node <args>` in `cwd` with PATH and `env` only; killed with SIGKILL after `timeoutMs`
 * (60 s by default; the code is then null).
 */
export function runNode(args: readonly string[], o: { cwd: string; env?: Record<string, string>; timeoutMs?: number }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const env = { PATH: process.env.PATH ?? '', ...o.env };
    const child = spawn(process.execPath, [...args], { cwd: o.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    child.once('error', (err) => { clearTimeout(timer); reject(err); });
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}
