#!/usr/bin/env node
// The standalone agent-authz gateway of @agent-authz/gateway: runs the compiled entry point,
// dist/gateway-plugin/standalone/main.js (usage: agent-authz-gateway --config <file>).
await import('../dist/gateway-plugin/standalone/main.js');
