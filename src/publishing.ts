/**
 * A platform's `publish_state` and its transitions (issue 32; the spec shows
 * only the initial `draft`). Pure: no I/O.
 *
 * - `draft`: registered; only its own workspace sees it (a personal
 *   account's one platform stays here: publishing needs an organisation).
 * - `published`: listed in the directory that signed-in account holders
 *   read, and open to new connections.
 * - `unpublished`: withdrawn from the directory and closed to new
 *   connections, by its publisher or because the publisher domain's
 *   verification lapsed. Existing connections keep working, as an app that
 *   leaves a marketplace stays installed where it was installed; removing
 *   them is a separate, explicit act.
 *
 * Who: publishing and unpublishing need `platforms_manage` in the owning
 * organisation (see `roles.ts`); the lapse is the service's own move.
 * Publishing needs a verified publisher domain, a callback address and a
 * description ({@link checkPublish}); republishing needs them again.
 */

/** The states, initial first. */
export const PUBLISH_STATES = ['draft', 'published', 'unpublished'] as const;

/** A platform's publish state. */
export type PublishState = (typeof PUBLISH_STATES)[number];

/** What moves a platform between states. */
export type PublishAction = 'publish' | 'unpublish' | 'domain_lapsed';

/** The transitions: state → action → next state; a missing entry is a refused move. */
export const PUBLISH_TRANSITIONS: Readonly<Record<PublishState, Partial<Record<PublishAction, PublishState>>>> =
  Object.freeze({
    draft: { publish: 'published' },
    published: { unpublish: 'unpublished', domain_lapsed: 'unpublished' },
    unpublished: { publish: 'published' },
  });

/** What publishing requires, as known when it is asked for. */
export interface PublishFacts {
  /** The owner is an organisation (a personal workspace cannot publish). */
  organisation: boolean;
  /** The organisation's publisher domain is verified now (not lapsed). */
  domainVerified: boolean;
  /** The platform has a callback address. */
  callbackUrl: string | null;
  /** The platform has a description. */
  description: string | null;
}

/** A move's outcome: the next state, or why it is refused. */
export type PublishMove = { ok: true; state: PublishState } | { ok: false; code: PublishRefusal };

/** Why a publish-state move is refused (error-table codes). */
export type PublishRefusal =
  | 'publish_state_invalid'
  | 'account_type_not_supported'
  | 'publisher_domain_unverified'
  | 'callback_url_required'
  | 'description_required';

/** The next state for `action` from `state`, or `publish_state_invalid` when the move does not exist. */
export function nextPublishState(state: PublishState, action: PublishAction): PublishMove {
  const next = PUBLISH_TRANSITIONS[state]?.[action];
  return next === undefined ? { ok: false, code: 'publish_state_invalid' } : { ok: true, state: next };
}

/**
 * Whether a platform in `state` may be published with `facts`: the move must exist, and every
 * requirement hold, checked in a fixed order so the refusal names the first one missing.
 */
export function checkPublish(state: PublishState, facts: PublishFacts): PublishMove {
  const move = nextPublishState(state, 'publish');
  if (!move.ok) return move;
  if (!facts.organisation) return { ok: false, code: 'account_type_not_supported' };
  if (!facts.domainVerified) return { ok: false, code: 'publisher_domain_unverified' };
  if (blank(facts.callbackUrl)) return { ok: false, code: 'callback_url_required' };
  if (blank(facts.description)) return { ok: false, code: 'description_required' };
  return move;
}

function blank(value: string | null): boolean {
  return value === null || value.trim() === '';
}
