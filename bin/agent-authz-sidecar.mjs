#!/usr/bin/env node
// The agent-authz sidecar's command line: runs the compiled entry point, dist/sidecar/main.js
// (no command: serve; `backup <file>`; `--help`). Configuration comes from the SIDECAR_*
// environment variables (docs/operations.md).
await import('../dist/sidecar/main.js');
