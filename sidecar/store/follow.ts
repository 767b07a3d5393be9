/**
 * Follows the store's change feed (when the engine has one) on behalf of the
 * in-process caches, which are described to it by {@link CacheHooks} so that
 * the store never imports them: a revocation marks the certificate revoked,
 * a key change drops the connection's cached API keys, a lost feed suspends
 * the caches (every lookup reads the store), and a resync reloads the revoked
 * ids and resumes them. A failed reload is retried every second while the
 * feed stays live.
 */
import type { Store } from './types.js';

/** What the feed does to the caches. */
export interface CacheHooks {
  revoked(certId: string): void;
  keysChanged(connectionId: string): void;
  /** Stop trusting cached approvals and keys (read through). */
  suspend(): void;
  /** Trust the caches again, with these certificates known revoked. */
  resume(revokedIds: string[]): void;
}

/** Subscribes `hooks` to `store.changes`; returns the unsubscribe function (a no-op without a feed). */
export function followChanges(store: Store, hooks: CacheHooks, o: { onResync?: () => void; onError?: (err: unknown) => void } = {}): () => void {
  const feed = store.changes;
  if (!feed) return () => {};
  let generation = 0;
  let retry: NodeJS.Timeout | undefined;
  const resync = (gen: number): void => {
    store.delegations.revokedCertificateIds().then((ids) => {
      if (gen !== generation || !feed.live) return;
      hooks.resume(ids);
      o.onResync?.();
    }, (err: unknown) => {
      o.onError?.(err);
      if (gen !== generation || !feed.live) return;
      retry = setTimeout(() => resync(gen), 1_000);
      retry.unref();
    });
  };
  const off = feed.subscribe((c) => {
    if (c.type === 'certificate_revoked') hooks.revoked(c.certId);
    else if (c.type === 'connection_keys_changed') hooks.keysChanged(c.connectionId);
    else {
      generation++;
      clearTimeout(retry);
      hooks.suspend();
      if (c.type === 'resync') resync(generation);
    }
  });
  return () => { off(); clearTimeout(retry); };
}
