#!/usr/bin/env node
// Launcher of the agent-authz sidecar: registers tsx, then runs sidecar/main.ts
// (configuration from the SIDECAR_* environment variables; see docs/operations.md).
import { register } from 'tsx/esm/api';

register();
await import('../sidecar/main.js');
