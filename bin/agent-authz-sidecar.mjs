#!/usr/bin/env node
// The agent-authz sidecar's command line: runs the compiled entry point, dist/sidecar/main.js
// (no command or `serve`: serve; `backup <file>`; `audit verify [--db FILE | --database-url URL |
// --export FILE] [--key-id ID]... [--json]`, which checks an audit trail offline and exits 0
// verified, 1 broken, 2 usage, 3 unreadable (docs/audit.md); `copy-to-postgres`; `--help`).
// Configuration comes from the SIDECAR_* environment variables (docs/operations.md).
await import('../dist/sidecar/main.js');
