/**
 * A sidecar process started the way `npm start` starts it: `node bin/agent-authz-sidecar.mjs` with no
 * command (serve) on the compiled sources (test/helpers/compiled-sidecar.ts), configured only through its
 * `SIDECAR_*` environment (SQLite in a temp data directory, a real SMTP sink, a free loopback port), for the
 * black-box flows of issue 32. It is reached only over HTTP ({@link remoteSidecar}) and stopped with
 * SIGTERM, as a service manager stops it; it must then exit 0.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import type { Test } from 'tap';
import { compiledSidecarBin } from './compiled-sidecar.js';
import { freePort } from './net.js';
import { supervise } from './supervise.js';
import { remoteSidecar, startMailSink } from './sidecar.js';
import type { TestSidecar } from './sidecar.js';

/** A started sidecar process. */
export interface StartedSidecar {
  /** The sidecar as the HTTP helpers take it (url and mail only). */
  sc: TestSidecar;
  /** Its stdout and stderr so far (the last 50 kB). */
  output(): string;
  /** SIGTERM, then its exit code (SIGKILL after 10 s). */
  stop(): Promise<number | null>;
}

/**
 * Starts the sidecar's command line with `env` over the defaults below; resolves when `/readyz` answers 200
 * (at most 60 s). The process, its mail sink and data directory are removed in `t`'s teardown.
 */
export async function startSidecarCommand(t: Test, env: Record<string, string> = {}): Promise<StartedSidecar> {
  const mail = await startMailSink();
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-start-'));
  const bin = await compiledSidecarBin();
  const child = spawn(process.execPath, [bin], {
    cwd: path.dirname(path.dirname(bin)), stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir,
      SIDECAR_SMTP_URL: mail.url, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'warn',
      SIDECAR_SEND_CODE_PER_MINUTE: '1000', SIDECAR_WEBHOOK_ALLOW_INSECURE: '1', SIDECAR_CRYPTO_WORKERS: '1', ...env,
    },
  });
  const proc = supervise(child);
  t.teardown(async () => {
    await proc.stop('SIGKILL', 10_000);
    await mail.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  const started: StartedSidecar = { sc: remoteSidecar(url, mail), output: proc.output,
    stop: () => proc.stop('SIGTERM', 10_000) };
  await proc.ready(url, 'the sidecar');
  return started;
}
