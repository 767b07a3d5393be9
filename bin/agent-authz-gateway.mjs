#!/usr/bin/env node
// Launcher of the standalone agent-authz gateway: registers tsx, then runs
// gateway-plugin/main.ts (usage: agent-authz-gateway --config <file>).
import { register } from 'tsx/esm/api';

register();
await import('../gateway-plugin/main.js');
