/**
 * Onboarding routes (spec endpoints 4 and 5): the profile, then the account
 * type, which completes onboarding and creates the root identity (a hybrid
 * keypair whose private half is sealed under the master key).
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import { canonicalize } from '../../src/canonical.js';
import { generateHybridKeyPair, publicKeyToJson } from '../../src/crypto/hybrid.js';
import { AAD } from '../secrets.js';
import type { ServiceContext } from '../context.js';
import { TEXT_RULES, requireText } from '../http/resources.js';
import { adminEvent, createOrganisation } from './organisations.js';

/** Account types and what each gets at onboarding. */
export const ACCOUNT_TYPES = ['individual', 'organization'] as const;

const ProfileBody = Type.Object({
  first_name: Type.String({ minLength: 1, maxLength: 100 }),
  last_name: Type.String({ minLength: 1, maxLength: 100 }),
}, { additionalProperties: false });
const TypeBody = Type.Object({
  account_type: Type.String({ maxLength: 64 }),
  organization_name: Type.Optional(Type.String({
    maxLength: 400, description: 'With `organization`: creates an organisation '
    + 'of this name with the person as its first owner, and the session acts in it (docs/organisations.md).' })),
}, { additionalProperties: false });

/** The routes of this file, each defined once (api/route.ts). */
export const ONBOARDING_ROUTES = {
  setProfile: defineRoute({
    method: 'POST', url: '/v1/auth/onboarding/profile', auth: 'session_csrf', permission: 'person',
    schema: { body: ProfileBody, tags: ['onboarding'] },
    operation: op('setProfile', 'Onboarding: profile (spec 4.4)',
      'Records first and last name; the next step is `account_type`.', S.ProfileResult),
  }),
  setAccountType: defineRoute({
    method: 'POST', url: '/v1/auth/onboarding/account-type', auth: 'session_csrf', permission: 'person',
    schema: { body: TypeBody, tags: ['onboarding'] },
    operation: op('setAccountType', 'Onboarding: account type (spec 4.5)',
      'Completes onboarding and creates the root identity (hybrid Ed25519 + ML-DSA-65). `individual` gets alpha '
        + 'credits; `organization` with `organization_name` also creates the organisation and acts in it.',
      S.AccountTypeResult, ['invalid_account_type', 'onboarding_incomplete', 'onboarding_complete']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the onboarding routes. */
export async function registerOnboardingRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, ONBOARDING_ROUTES.setProfile, async (request) => {
    const b = request.body as { first_name: string; last_name: string };
    const first = requireText(b.first_name, 'body.first_name', TEXT_RULES.personName);
    const last = requireText(b.last_name, 'body.last_name', TEXT_RULES.personName);
    await ctx.store.accounts.updateProfile(request.session!.personId, first, last);
    const a = await ctx.store.accounts.getAccount(request.session!.personId);
    return { onboarding_step: a?.onboardingStep ?? 'account_type', first_name: first, last_name: last };
  });

  mount(app, ONBOARDING_ROUTES.setAccountType, async (request) => {
    const body = request.body as { account_type: string; organization_name?: string };
    const type = body.account_type;
    if (body.organization_name !== undefined) {
      if (type !== 'organization') {
        throw new ServiceError('invalid_request', 'organization_name goes with account_type organization.',
          { field: 'body.organization_name' });
      }
      requireText(body.organization_name, 'body.organization_name', TEXT_RULES.name);
    }
    if (!(ACCOUNT_TYPES as readonly string[]).includes(type)) throw new ServiceError(
      'invalid_account_type', undefined, { field: 'body.account_type' });
    const accountId = request.session!.personId;
    const account = await ctx.store.accounts.getAccount(accountId);
    if (!account) throw new ServiceError('auth_required');
    if (account.onboardingStep === 'complete') {
      if (account.accountType === type) return { onboarding_step: 'complete', account_type: type };
      throw new ServiceError('onboarding_complete', `Onboarding is already complete as ${account.accountType}.`);
    }
    if (account.onboardingStep === 'profile') throw new ServiceError(
      'onboarding_incomplete', 'Send the profile (first_name, last_name) first.');
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
      return { onboarding_step: 'complete', account_type: type };
    }
    if (type !== 'organization' || body.organization_name === undefined) {
      return { onboarding_step: 'complete', account_type: type };
    }
    const org = await createOrganisation(ctx, accountId, body.organization_name, 'body.organization_name');
    await ctx.store.organisations.setSessionWorkspace(request.session!.sessionId, org.organization_id,
      [adminEvent(ctx, org.organization_id, 'workspace.switched', accountId, { from_workspace_id: accountId })]);
    return { onboarding_step: 'complete', account_type: type, organization_id: org.organization_id };
  });
}
