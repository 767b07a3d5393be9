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
import { buildServer } from './server.js';
import { installGracefulShutdown } from '../runtime/shutdown.js';
import { getMlDsaBackend } from '../src/crypto/hybrid.js';
import { runBackupCommand } from './backup.js';
import { AUDIT_USAGE, runAuditCommand } from './audit/verify-command.js';
import { runCopyCommand } from './copy.js';

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
    usage: 'backup <file>', summary: 'online backup of the SQLite database to a new file', run: runBackupCommand,
  },
  audit: { usage: AUDIT_USAGE,
    summary: 'check an audit trail offline (docs/audit.md; exit 0 verified, 1 broken, 2 usage, 3 unreadable, 4 cannot run)',
    run: (args) => runAuditCommand(args) },
  'copy-to-postgres': { usage: 'copy-to-postgres',
    summary: 'copy the SQLite store into an empty PostgreSQL database (SIDECAR_DATABASE_URL), verify, print counts',
    run: runCopyCommand },
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
