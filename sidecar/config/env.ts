/**
 * The parsing helpers of the sidecar's `SIDECAR_*` settings and their one
 * error type: a bad value stops startup with one line naming the variable.
 * Shared by index.ts and database.ts.
 */

/**
 * A configuration error: its message is the one line printed at startup.
 *
 * ```ts
 * try { loadConfig(process.env); } catch (err) { if (err instanceof ConfigError) { console.error(err.message); process.exit(2); } throw err; }
 * ```
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** An integer setting within [min, max]; `def` when unset or empty. Throws {@link ConfigError} naming the variable. */
export function int(env: NodeJS.ProcessEnv, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name}: expected an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name}: must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** A boolean setting (1/true, 0/false); `def` when unset or empty. Throws {@link ConfigError} naming the variable. */
export function flag(env: NodeJS.ProcessEnv, name: string, def = false): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${name}: expected 1/true or 0/false, got ${JSON.stringify(raw)}`);
}
