#!/usr/bin/env node
// The agent-authz sidecar's command line: runs the compiled entry point, dist/sidecar/main.js
// (no command or `serve`: serve; `backup <file>`; `audit verify [--db FILE | --database-url URL |
// --export FILE] [--key-id ID]... [--json]`, which checks an audit trail offline and exits 0
// verified, 1 broken, 2 usage, 3 unreadable, 4 cannot run (docs/audit.md); `copy-to-postgres`; `--help`).
// Configuration comes from the SIDECAR_* environment variables (docs/operations.md).
//
// When the compiled code cannot be loaded (no dist/, an incomplete build, a Node too old for it) this file says so
// and exits 1, or for `audit` 4 (VERIFY_EXIT.cannotRun of sidecar/audit/verify-command.ts), never 1: 1 from
// `audit verify` means a check ran and found the trail broken. An error thrown later in `audit` is also 4.
const AUDIT_CANNOT_RUN = 4;
const args = process.argv.slice(2);
const audit = args[0] === 'audit';

/** Stops `audit` with 4 (and its --json document) for an error nothing else caught. */
function cannotRun(message) {
  process.stderr.write(`agent-authz sidecar: audit verify: cannot run: ${message}\n`);
  if (args.includes('--json')) {
    const error = { code: 'cannot_run', message: `cannot run: ${message}` };
    process.stdout.write(JSON.stringify({ exit: AUDIT_CANNOT_RUN, ok: false, error }) + '\n');
  }
  process.exit(AUDIT_CANNOT_RUN);
}

if (audit) {
  process.on('uncaughtException', (err) => cannotRun(err?.message ?? String(err)));
  process.on('unhandledRejection', (err) => cannotRun(err?.message ?? String(err)));
}
const entry = new URL('../dist/sidecar/main.js', import.meta.url);
try {
  await import(entry.href);
} catch (err) {
  const message = `cannot load ${entry.pathname}: ${err?.message ?? String(err)} `
    + '(a missing or incomplete build: `npm run build` in a clone)';
  if (audit) cannotRun(message);
  process.stderr.write(`agent-authz sidecar: failed to start: ${message}\n`);
  process.exit(1);
}
