/**
 * Vite build of the account holder's console: Preact with the automatic JSX
 * runtime, served by the sidecar at /console/ (routes/console.ts), built into
 * dist/console/ with content-hashed file names. No inline script and no
 * module-preload polyfill, so the strict Content-Security-Policy holds.
 * `node:net` (used by the shared constraint validator in src/) maps to a small
 * browser implementation of `isIP`.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  publicDir: false,
  logLevel: 'warn',
  resolve: { alias: { 'node:net': path.join(here, 'src/shims/net.ts') } },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: path.join(here, '..', 'dist', 'console'),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
    reportCompressedSize: false,
  },
});
