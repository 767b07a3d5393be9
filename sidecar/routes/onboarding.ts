/**
 * Onboarding routes (spec endpoints 4 and 5): the profile, then the account
 * type, which completes onboarding and creates the root identity (a hybrid
 * keypair whose private half is sealed under the master key).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import { canonicalize } from '../../src/canonical.js';
import { generateHybridKeyPair, publicKeyToJson } from '../../src/crypto/hybrid.js';
import { AAD } from '../secrets.js';
import type { ServiceContext } from '../context.js';
import { TEXT_RULES, requireText } from '../http/resources.js';

/** Account types and what each gets at onboarding. */
export const ACCOUNT_TYPES = ['individual', 'organization'] as const;

const ProfileBody = Type.Object({
  first_name: Type.String({ minLength: 1, maxLength: 100 }),
  last_name: Type.String({ minLength: 1, maxLength: 100 }),
}, { additionalProperties: false });
const TypeBody = Type.Object({ account_type: Type.String({ maxLength: 64 }) }, { additionalProperties: false });

/** Registers the onboarding routes. */
export async function registerOnboardingRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  app.post('/v1/auth/onboarding/profile', { schema: { body: ProfileBody, tags: ['onboarding'] }, config: { auth: 'session_csrf' } }, async (request) => {
    const b = request.body as { first_name: string; last_name: string };
    const first = requireText(b.first_name, 'body.first_name', TEXT_RULES.personName);
    const last = requireText(b.last_name, 'body.last_name', TEXT_RULES.personName);
    await ctx.store.accounts.updateProfile(request.session!.accountId, first, last);
    const a = await ctx.store.accounts.getAccount(request.session!.accountId);
    return { onboarding_step: a?.onboardingStep ?? 'account_type', first_name: first, last_name: last };
  });

  app.post('/v1/auth/onboarding/account-type', { schema: { body: TypeBody, tags: ['onboarding'] }, config: { auth: 'session_csrf' } }, async (request) => {
    const type = (request.body as { account_type: string }).account_type;
    if (!(ACCOUNT_TYPES as readonly string[]).includes(type)) throw new ServiceError('invalid_account_type', undefined, { field: 'body.account_type' });
    const accountId = request.session!.accountId;
    const account = await ctx.store.accounts.getAccount(accountId);
    if (!account) throw new ServiceError('auth_required');
    if (account.onboardingStep === 'complete') {
      if (account.accountType === type) return { onboarding_step: 'complete', account_type: type };
      throw new ServiceError('onboarding_complete', `Onboarding is already complete as ${account.accountType}.`);
    }
    if (account.onboardingStep === 'profile') throw new ServiceError('onboarding_incomplete', 'Send the profile (first_name, last_name) first.');
    const kp = generateHybridKeyPair();
    const done = await ctx.store.accounts.completeOnboarding(accountId, {
      accountType: type,
      rootPublicKey: canonicalize(publicKeyToJson(kp.publicKey)),
      rootSecretEnc: ctx.box.seal(kp.secretSeed, AAD.rootSecret(accountId)),
      creditsMicros: type === 'individual' ? ctx.config.alphaCreditsMicros : 0,
    });
    kp.secretSeed.fill(0);
    if (!done) {
      const again = await ctx.store.accounts.getAccount(accountId);
      if (again?.accountType !== type) throw new ServiceError('onboarding_complete');
    }
    return { onboarding_step: 'complete', account_type: type };
  });
}
