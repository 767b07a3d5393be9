/**
 * The master-key check at startup (both engines): a constant sealed with the
 * master key is stored once ({@link Store.keyCheck}); every later start opens
 * it. A process started with another key refuses to start, before it could
 * write anything sealed with the wrong key, and says why. With several
 * replicas on one database this catches a replica whose SIDECAR_MASTER_KEY
 * differs from the others'.
 */
import type { Store } from './types.js';

/** The associated data of the key-check value. */
export const KEY_CHECK_AAD = 'store:key_check';
const PLAINTEXT = new TextEncoder().encode('agent-authz key check v1');

/** What the check needs of the secret box. */
export interface Sealer {
  seal(plaintext: Uint8Array, aad: string): Uint8Array;
  open(sealed: Uint8Array, aad: string): Uint8Array;
}

/** The master key cannot open the stored secrets. */
export class MasterKeyMismatchError extends Error {
  override name = 'MasterKeyMismatchError';
}

/** Stores the key-check value on first start, else checks it; throws {@link MasterKeyMismatchError}. */
export async function checkMasterKey(store: Store, box: Sealer): Promise<void> {
  const stored = await store.keyCheck(box.seal(PLAINTEXT, KEY_CHECK_AAD));
  let ok = false;
  try {
    ok = Buffer.from(box.open(stored, KEY_CHECK_AAD)).equals(Buffer.from(PLAINTEXT));
  } catch { /* another key: the authentication tag does not verify */ }
  if (!ok) {
    throw new MasterKeyMismatchError('the master key cannot open this database\'s secrets (its key-check value was sealed with another key). '
      + 'Start every sidecar on this database with the same SIDECAR_MASTER_KEY (or the master.key file it was created with); this one refuses to start.');
  }
}
