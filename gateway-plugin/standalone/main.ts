/**
 * Entry point of the standalone gateway proxy:
 *
 *   npm run gateway -- --config config/gateway.yaml
 *   agent-authz-gateway --config config/gateway.yaml
 *
 * Reads the YAML/JSON config, validates it (one clear path-named line on
 * stderr and exit code 1 when it is bad), listens, and closes gracefully on
 * SIGTERM/SIGINT with the sidecar's shutdown sequence (runtime/shutdown.ts):
 * new connections are refused and the readiness path answers 503
 * `shutting_down` at once; every response from then on carries
 * `Connection: close`; idle keep-alive connections get a short drain (no
 * reset races); in-flight requests finish; then the metrics listener and the
 * sidecar/upstream pools close and the process exits 0. After
 * {@link SHUTDOWN_GRACE_MS} remaining connections are cut and it exits 1; a
 * second signal exits 1 at once.
 * Importing this module starts the gateway; use `server.ts` to embed it.
 */

import { loadConfigFile } from './config.js';
import { buildGateway } from './server.js';
import { installGracefulShutdown } from '../../runtime/shutdown.js';

/** How long a graceful shutdown may take before remaining connections are cut and the process exits 1 (ms). */
export const SHUTDOWN_GRACE_MS = 10_000;

const USAGE = 'usage: agent-authz-gateway --config <file.yaml|file.json>';

/** The `--help` text. */
const HELP = `${USAGE}

The agent-authz standalone gateway: a reverse proxy in front of your API that forwards a
request only after the sidecar's verify allows it (docs/gateway.md).

  -c, --config <file>   the configuration: YAML, or JSON for a file ending in .json; every key
                        is described in config/gateway.example.yaml
  -h, --help            this text

The sidecar API key is read from the environment variable that api_key_env names.
Exit codes: 0 after a graceful stop (SIGTERM, SIGINT); 1 for a bad configuration or a stop
that ran out of time.
`;

function configPath(argv: readonly string[]): string {
  let file: string | undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(HELP);
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
  try {
    const raw = await loadConfigFile(configPath(process.argv.slice(2)));
    const server = await buildGateway(raw, process.env);
    // Before listen(): it adds an onSend hook. Readiness flips in server.ts's preClose hook.
    installGracefulShutdown(server.app, { timeoutMs: SHUTDOWN_GRACE_MS, name: 'gateway' });
    await server.listen();
    // Logs why the gateway is not ready (sidecar unreachable, not ready, API key refused).
    void server.checkSidecar();
  } catch (err) {
    process.stderr.write(`agent-authz-gateway: ${oneLine(err)}\n`);
    process.exit(1);
  }
}

await main();
