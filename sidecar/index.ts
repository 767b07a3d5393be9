/**
 * `agent-authz/sidecar`: embed the sidecar service in your own process.
 * Most users run it as a program instead (`agent-authz-sidecar`, or the
 * Docker image); this entry is for tests and custom hosting.
 *
 * ```ts
 * import { buildServer, loadConfig } from 'agent-authz/sidecar';
 *
 * const app = await buildServer(loadConfig(process.env));
 * await app.listen({ host: '127.0.0.1', port: 8700 });
 * ```
 *
 * `buildServer` never listens; closing the returned instance stops its
 * workers and closes its store.
 */
export { buildServer } from './server.js';
export type { BuildOptions, SidecarServer } from './server.js';
export { ConfigError, loadConfig } from './config/index.js';
export type { SidecarConfig } from './config/index.js';
