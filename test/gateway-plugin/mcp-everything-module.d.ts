/** Types of the one module of `@modelcontextprotocol/server-everything` the tests import (the package ships none). */
declare module '@modelcontextprotocol/server-everything/dist/server/index.js' {
  import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
  /** The everything server's factory: the server and its per-session cleanup. */
  export function createServer(): { server: McpServer; cleanup: (sessionId?: string) => void };
}
