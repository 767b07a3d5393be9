/**
 * Stage 1, authenticate: the API key names a live key of an active
 * connection (`auth/api-key.ts`), or the call is refused with 401
 * `invalid_api_key` before anything else is looked at (a bad key is 401
 * whatever the body). A store failure while looking the key up is
 * `store_unavailable`.
 */
import { ServiceError } from '../../../src/errors.js';
import { authenticateApiKey } from '../../auth/api-key.js';
import { StoreFault } from '../stage.js';
import type { Stage } from '../stage.js';

/** The authenticate stage. */
export const authenticate: Stage = {
  name: 'authenticate',
  async run(ctx, call) {
    try {
      call.auth = await authenticateApiKey(ctx, call.apiKey);
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      throw new StoreFault('read', err);
    }
  },
};
