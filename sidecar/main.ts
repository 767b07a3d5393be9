/**
 * The sidecar's entry point (`npm start`, `agent-authz-sidecar`) and its
 * command line ({@link COMMANDS}): without a command it serves. Serving reads
 * the configuration from the environment, builds the server, listens, and shuts
 * down gracefully on SIGTERM/SIGINT (runtime/shutdown.ts, {@link installGracefulShutdown}):
 *
 * 1. stop accepting connections; `/readyz` answers 503 `shutting_down` from
 *    the first moment of the shutdown. Every response sent from then on
 *    carries `Connection: close`. Keep-alive connections that are idle are
 *    kept for a short drain (a request arriving on one is still answered,
 *    instead of the client seeing a reset), then closed;
 * 2. wait for in-flight requests, at most `SIDECAR_SHUTDOWN_TIMEOUT_MS` in all;
 * 3. stop the webhook worker (an in-flight delivery finishes, or is aborted
 *    and its lease released so another instance can retry it);
 * 4. close the database (WAL checkpoint), then exit 0.
 *
 * When the deadline passes first, remaining connections are cut, the close
 * is given a short grace, and the process exits 1. A second signal during
 * the shutdown exits 1 at once. Exit code 2: bad configuration or usage.
 */
import { ConfigError, loadConfig } from './config/index.js';
import type { SidecarConfig } from './config/index.js';
// `audit verify` is loaded with this file: a build whose audit code cannot load fails as this file does,
// which bin/agent-authz-sidecar.mjs reports as exit 4 (cannot run), never 1. The server and the other
// commands are loaded when they run: a command does not pay for code it never calls (`audit verify` used to
// load the whole server, about 1 CPU s).
import { AUDIT_USAGE, runAuditCommand } from './audit/verify-command.js';

/**
 * A module a command needs (`importing` is its `import()`, `specifier` the same path); a failure names it and
 * the likely cause, as bin/agent-authz-sidecar.mjs does for this file (the process then exits 1: failed to start).
 */
async function load<T>(importing: Promise<T>, specifier: string): Promise<T> {
  try {
    return await importing;
  } catch (err) {
    const file = new URL(specifier, import.meta.url).pathname;
    throw new Error(`cannot load ${file}: ${(err as Error)?.message ?? String(err)} `
      + '(a missing or incomplete build: `npm run build` in a clone)', { cause: err });
  }
}

/** A subcommand: its one-line usage and what it runs (resolves to the exit code). */
interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly run: (args: readonly string[]) => Promise<number>;
}

/** The sidecar's subcommands; no command means `serve`. */
export const COMMANDS: Readonly<Record<string, Command>> = {
  serve: { usage: 'serve', summary: 'run the sidecar (the default)', run: async () => { await serve(); return -1; } },
  backup: {
    usage: 'backup <file>', summary: 'online backup of the SQLite database to a new file',
    run: async (args) => (await load(import('./backup.js'), './backup.js')).runBackupCommand(args),
  },
  audit: { usage: AUDIT_USAGE,
    summary: 'check an audit trail offline (docs/audit.md; exit 0 verified, 1 broken, 2 usage, 3 unreadable, 4 cannot run)',
    run: (args) => runAuditCommand(args) },
  'copy-to-postgres': { usage: 'copy-to-postgres',
    summary: 'copy the SQLite store into an empty PostgreSQL database (SIDECAR_DATABASE_URL), verify, print counts',
    run: async (args) => (await load(import('./copy.js'), './copy.js')).runCopyCommand(args) },
};

/** The `--help` text. */
export function helpText(): string {
  const lines = Object.values(COMMANDS).map((c) => `  agent-authz-sidecar ${c.usage.padEnd(24)} ${c.summary}`);
  return [
    'usage:',
    ...lines,
    '  agent-authz-sidecar --help                   this text',
    '',
    'Configuration comes from SIDECAR_* environment variables (README.md, docs/operations.md);',
    'an unknown SIDECAR_* variable or a bad value stops startup with exit code 2.',
    '',
  ].join('\n');
}

function readConfig(): SidecarConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agent-authz sidecar: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

async function serve(): Promise<void> {
  const config = readConfig();
  const [{ buildServer }, { installGracefulShutdown }, { getMlDsaBackend }] = await Promise.all([
    load(import('./server.js'), './server.js'), load(import('../runtime/shutdown.js'), '../runtime/shutdown.js'),
    load(import('../src/crypto/hybrid.js'), '../src/crypto/hybrid.js')]);
  const app = await buildServer(config);
  process.on('uncaughtException', (err) => {
    app.log.fatal({ err }, 'uncaught exception; exiting');
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    app.log.fatal({ err }, 'unhandled promise rejection; exiting');
    process.exit(1);
  });
  // /readyz flips to 503 shutting_down in its preClose hook (routes/health.ts), which
  // app.close() runs at the start of the shutdown.
  installGracefulShutdown(app, { timeoutMs: config.shutdownTimeoutMs, name: 'sidecar' });
  await app.listen({ host: config.host, port: config.port });
  let metrics: string = 'main port';
  if (app.metricsServer !== null && config.metricsListen !== null) {
    await app.metricsServer.listen({ host: config.metricsListen.host, port: config.metricsListen.port });
    const a = app.metricsServer.server.address() as { address: string; port: number; family: string };
    metrics = a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
  }
  app.log.info({
    metrics_listen: metrics,
    host: config.host, port: (app.server.address() as { port: number } | null)?.port ?? config.port,
    data_dir: config.dataDir, production: config.production, log_level: config.logLevel,
    mailer: config.smtpUrl ? 'smtp' : 'development-log', audit_retention_days: config.auditRetentionDays,
    challenge_retention_hours: config.challengeRetentionHours, shutdown_timeout_ms: config.shutdownTimeoutMs,
    crypto_workers: config.cryptoWorkers, mldsa_backend: getMlDsaBackend(),
    audit_chain: config.audit.chain, audit_key_id: app.ctx.audit.signer.keyId,
  }, 'agent-authz sidecar ready');
}

/** Dispatches the command line; resolves to an exit code, or -1 while serving. */
async function main(argv: readonly string[]): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(helpText());
    return 0;
  }
  const name = argv[0] ?? 'serve';
  const command = COMMANDS[name];
  if (command === undefined || (name === 'serve' && argv.length > 1)) {
    process.stderr.write(`agent-authz sidecar: unknown command or argument: ${argv.join(' ')}\n${helpText()}`);
    return 2;
  }
  return command.run(argv.slice(1));
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
}, (err: unknown) => {
  process.stderr.write(`agent-authz sidecar: failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
