/**
 * Entry point of the standalone gateway proxy:
 *
 *   npm run gateway -- --config config/gateway.yaml
 *   agent-authz-gateway --config config/gateway.yaml
 *
 * Reads the YAML/JSON config, validates it (one clear path-named line on
 * stderr and exit code 1 when it is bad), listens, and closes gracefully on
 * SIGTERM/SIGINT (forced exit after {@link SHUTDOWN_GRACE_MS}).
 * Importing this module starts the gateway; use `server.ts` to embed it.
 */

import { loadConfigFile } from './config.ts';
import { buildGateway } from './server.ts';
import type { GatewayServer } from './server.ts';

/** How long a graceful shutdown may take before the process exits anyway (ms). */
export const SHUTDOWN_GRACE_MS = 10_000;

const USAGE = 'usage: agent-authz-gateway --config <file.yaml|file.json>';

function configPath(argv: readonly string[]): string {
  let file: string | undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    if (arg === '--config' || arg === '-c') {
      file = argv[i + 1];
      i += 1;
    } else if (arg.startsWith('--config=')) {
      file = arg.slice('--config='.length);
    } else {
      throw new TypeError(`unknown argument ${JSON.stringify(arg)}; ${USAGE}`);
    }
  }
  if (file === undefined || file === '') throw new TypeError(`missing --config; ${USAGE}`);
  return file;
}

function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] ?? 'error';
}

async function main(): Promise<void> {
  let server: GatewayServer;
  try {
    const raw = await loadConfigFile(configPath(process.argv.slice(2)));
    server = await buildGateway(raw, process.env);
    await server.listen();
  } catch (err) {
    process.stderr.write(`agent-authz-gateway: ${oneLine(err)}\n`);
    process.exit(1);
  }
  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    server.app.log.info({ signal }, 'gateway: shutting down');
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS).unref();
    server.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

await main();
