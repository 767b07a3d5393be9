// Entry of the crypto worker threads (sidecar/crypto-pool.ts). A worker does not reliably
// inherit the TypeScript loader of its parent (`node --import tsx` on Node 20, the
// `register()` of bin/agent-authz-sidecar.mjs), so it registers tsx itself before loading
// the worker code. Registering again where the loader was inherited is harmless.
import { register } from 'tsx/esm/api';

register();
await import('./crypto-worker.js');
