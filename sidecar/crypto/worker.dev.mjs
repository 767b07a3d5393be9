// Development entry of the crypto worker threads, used only when the sidecar runs from its
// TypeScript sources (tests, `tsx`): a worker does not reliably inherit the parent's TypeScript
// loader, so it registers tsx itself before loading worker.ts. The compiled package
// starts dist/sidecar/crypto/worker.js directly (slot.ts) and never loads this file.
import { register } from 'tsx/esm/api';

register();
await import('./worker.js');
